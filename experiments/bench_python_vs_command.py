"""The README's table fit from Python against the same fit from the command, quiet and beside busy torch jobs
(issue 76: from Python, with OpenMP's default waiting policy, it was 8-25x slower than the command, which starts
with a passive one). Each fit runs in a fresh process, as a user's script or a shell would start it; prints the
seconds and the ratios. No figure is asserted by a test: read it.

    python experiments/bench_python_vs_command.py [--load 2] [--repeats 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_step import LOADER  # noqa: E402

PYTHON_FIT = """
import sys, time
from swflow import Synthesizer
from swflow.tables import example_table
frame, schema = example_table({rows})
t0 = time.perf_counter()
Synthesizer("dpswflow-hist", epsilon=1.0, delta=1e-6, schema=schema, steps={steps}).fit(frame)
print(time.perf_counter() - t0)
"""


def python_fit(rows: int, steps: int) -> float:
    """Seconds of the fit from a fresh Python process (OpenMP's defaults: nothing set)."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run([sys.executable, "-c", PYTHON_FIT.format(rows=rows, steps=steps)], env=env, check=True,
                          capture_output=True, text=True)
    return float(done.stdout.strip().splitlines()[-1])


def command_fit(rows: int, steps: int, folder: Path) -> float:
    """Wall seconds of `swflow generate --table` on the same table (the command's start included)."""
    from swflow.tables import example_table
    from swflow.tables.example import EXAMPLE_SCHEMA

    frame, _ = example_table(rows)
    frame.to_csv(folder / "t.csv", index=False)
    (folder / "schema.json").write_text(json.dumps(EXAMPLE_SCHEMA))
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "swflow.cli", "generate", "--table", str(folder / "t.csv"), "--schema",
                    str(folder / "schema.json"), "--epsilon", "1", "--delta", "1e-6", "--steps", str(steps), "--out",
                    str(folder / "run"), "--overwrite", "--quiet"], env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--load", type=int, default=2, help="busy torch jobs beside the fits")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="one busy job, one repeat, 50 steps (CI)")
    args = p.parse_args(argv)
    if args.smoke:
        args.load, args.repeats, args.steps = 1, 1, 50
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for side in ("quiet", "loaded"):
            loaders = [subprocess.Popen([sys.executable, "-c", LOADER]) for _ in range(args.load if side == "loaded"
                                                                                       else 0)]
            try:
                result[side] = {"python": min(python_fit(args.rows, args.steps) for _ in range(args.repeats)),
                                "command": min(command_fit(args.rows, args.steps, Path(tmp))
                                               for _ in range(args.repeats))}
            finally:
                for loader in loaders:
                    loader.kill()
                    loader.wait()
    for side, times in result.items():
        print(f"{side:6} python fit {times['python']:6.1f} s, command (start and files included) "
              f"{times['command']:6.1f} s: python / command {times['python'] / times['command']:.2f}")
    print(f"python: loaded / quiet {result['loaded']['python'] / result['quiet']['python']:.2f} "
          f"(a fair share beside {args.load} jobs is {args.load + 1}x)")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
