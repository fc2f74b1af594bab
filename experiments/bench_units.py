"""What a privacy unit costs in time (issue 75): a table run on about 10^5 rows of 10^4 units (the made-up event
table of experiments/tables_units.py), with the unit (``privacy_unit``, default bound) against the same rows as rows
(add/remove of a row), each fit timed end to end (the releases, their calibration, the particles' fit) and a
sample of as many records. Prints the sizes and the ratio.

    python experiments/bench_units.py [--units 10000] [--repeats 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tables_units import EVENTS_SCHEMA, events  # noqa: E402


def timed(frame, schema, **settings) -> float:
    from swflow import Synthesizer

    t0 = time.perf_counter()
    syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=1.0, delta=1e-9, **settings).fit(frame)
    syn.sample(len(frame) // 10, seed=0)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--units", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="300 units, one repeat, 50 steps (CI)")
    args = p.parse_args(argv)
    from swflow.tables import Schema

    steps = {"steps": 50} if args.smoke else {}
    if args.smoke:
        args.units, args.repeats = 300, 1
    frame, schema = events(args.units, seed=0), Schema.from_json(EVENTS_SCHEMA)
    rows = frame.drop(columns=["customer"])
    row_times = [timed(rows, schema, adjacency="add-remove", **steps) for _ in range(args.repeats)]
    unit_times = [timed(frame, schema, privacy_unit="customer", **steps) for _ in range(args.repeats)]
    result = {"rows": len(frame), "units": args.units, "row_run_s": min(row_times), "unit_run_s": min(unit_times),
              "ratio": min(unit_times) / min(row_times)}
    print(f"{len(frame)} rows of {args.units} units: row run {result['row_run_s']:.1f} s, unit run "
          f"{result['unit_run_s']:.1f} s (best of {args.repeats}): {result['ratio']:.2f} x")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
