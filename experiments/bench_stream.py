"""Private rows larger than memory: `swflow generate --data FILE.h5 --method dpswflow-hist` streams the
rows in chunks to count the sliced histogram (swflow.privacy.rows.StreamedRows).

For each size n it writes n rows of d = 8 on the unit sphere to an HDF5 file (in chunks, float32), runs
the command in a fresh process (20 steps, 1 000 particles: the flow's part is negligible) and reports
the wall time, the time per 10^7 rows and the process's peak resident memory (ru_maxrss). The file's
size is printed beside it: the peak must stay far below it for the largest n.

Then the other direction: ``swflow sample RUN --n N`` of a finished dpswflow-hist run (300 steps), which
replays the flow in chunks straight to samples.h5, timed and with its peak memory, beside the time of the
same 300 steps run on N particles at once (extrapolated from one timed step at min(N, 10^6)).

    python experiments/bench_stream.py [--sizes 1e6 1e7 1e8] [--sample-n 1e7] [--dir /var/tmp]   # 1e8 rows: 3.2 GB
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_rows(path: Path, n: int, d: int = 8, chunk: int = 1 << 20) -> None:
    import h5py

    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        data = f.create_dataset("data", shape=(n, d), dtype="float32", chunks=(min(n, 1 << 16), d))
        for lo in range(0, n, chunk):
            rows = rng.standard_normal((min(chunk, n - lo), d), dtype=np.float32)
            data[lo:lo + len(rows)] = rows / np.linalg.norm(rows, axis=1, keepdims=True)


def run_one(path: Path, out: Path) -> dict:
    return _swflow(["generate", "--data", str(path), "--method", "dpswflow-hist", "--epsilon", "10", "--delta", "1e-10", "--steps", "20",
                    "--n-particles", "1000", "--manifold", "sphere", "--quiet", "--out", str(out), "--overwrite"])


def _swflow(argv: list[str]) -> dict:
    """Wall time and peak resident memory of `swflow ARGV` in a fresh process."""
    code = ("import resource, runpy, sys; sys.argv = ['swflow', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('swflow.cli', run_name='__main__')\n"
            "finally:\n    print('MAXRSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    maxrss_kb = int(next(line.split()[1] for line in done.stderr.splitlines() if line.startswith("MAXRSS_KB")))
    return {"seconds": seconds, "peak_rss_mb": maxrss_kb / 1024}


def sample_many(tmp: Path, n: int) -> dict:
    from bench_step import time_hist

    rows = tmp / "rows-3000.h5"
    write_rows(rows, 3000)
    run = tmp / "run-sampler"
    _swflow(["generate", "--data", str(rows), "--method", "dpswflow-hist", "--epsilon", "10", "--manifold", "sphere",
             "--quiet", "--out", str(run), "--overwrite"])
    result = _swflow(["sample", str(run), "--n", str(n), "--out", str(tmp / "sampled"), "--quiet"])
    at_once = min(n, 1_000_000)
    step_ms = time_hist(at_once, 8, 32, 256, 64, "cpu", 3)
    return {"n": n, **result, "flow_300_steps_s": 300 * step_ms / 1e3 * n / at_once}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=float, nargs="+", default=[1e6, 1e7, 1e8])
    ap.add_argument("--dir", default=None, help="where the row files go (default: a temporary folder)")
    ap.add_argument("--sample-n", type=float, default=1e7, help="samples drawn from a finished run (0: skip)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.sample_n = [2e4], 5e4
    rows_out = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for n in (int(s) for s in args.sizes):
            path = Path(tmp) / f"rows-{n}.h5"
            t0 = time.perf_counter()
            write_rows(path, n)
            written = time.perf_counter() - t0
            result = run_one(path, Path(tmp) / f"run-{n}")
            row = {"n": n, "file_gb": os.path.getsize(path) / 1e9, "write_s": written, **result,
                   "seconds_per_1e7_rows": result["seconds"] / n * 1e7}
            rows_out.append(row)
            path.unlink()
            if not args.json:
                print(f"n = {n:>12,}  file {row['file_gb']:6.2f} GB  generate {row['seconds']:8.1f} s  "
                      f"({row['seconds_per_1e7_rows']:6.1f} s per 10^7 rows)  peak memory {row['peak_rss_mb']:7.0f} MB",
                      flush=True)
        sampled = sample_many(Path(tmp), int(args.sample_n)) if args.sample_n else None
    if sampled and not args.json:
        print(f"swflow sample --n {sampled['n']:,}: {sampled['seconds']:.1f} s, peak memory {sampled['peak_rss_mb']:.0f} MB; "
              f"the flow's 300 steps on as many particles: {sampled['flow_300_steps_s']:.1f} s "
              f"(ratio {sampled['seconds'] / sampled['flow_300_steps_s']:.2f})")
    if args.json:
        print(json.dumps({"machine": f"{platform.machine()}, {os.cpu_count()} cores", "rows": rows_out,
                          "sample": sampled}))


if __name__ == "__main__":
    main()
