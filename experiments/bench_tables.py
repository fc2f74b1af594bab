"""Speed of the table path (issue 51): fit on Adult at eps = 1, and sampling 10^6 records.

Prints seconds and sizes (rows, columns, tables, particles, steps) for: reading and checking the table, the
release (counting, calibration, the discrete Gaussian draw), the particles' fit, and sampling N records decoded
to a DataFrame. No figure is asserted by a test: run it on a quiet machine and read it.

    make adult && python experiments/bench_tables.py [--n-samples 1000000] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main(argv=None) -> int:
    from swflow.tables.synthesizer import TableSynthesizer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-samples", type=int, default=1_000_000)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: as the process has them)")
    p.add_argument("--adult-dir", default=str(HERE.parent / "data" / "adult"))
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="the made-up example table, 1 000 samples (CI)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    if args.smoke:
        from swflow.tables import example_table

        private, schema = example_table(2000)
        args.n_samples, steps = 1000, {"steps": 50}
    else:
        from tables_adult import read_adult

        from swflow.tables import Schema

        private, _ = read_adult(Path(args.adult_dir))
        schema, steps = Schema.read(HERE / "tables" / "adult_schema.json"), {}
    read = time.perf_counter() - t0
    syn = TableSynthesizer(schema=schema, epsilon=args.epsilon, delta=1e-9, clip=True, **steps)
    t0 = time.perf_counter()
    syn.fit(private)
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    samples = syn.sample(args.n_samples, seed=1)
    sample = time.perf_counter() - t0
    out = {"rows": len(private), "columns": len(schema.columns), "tables": len(syn.pairs),
           "particles": syn.flow.n_particles, "steps": syn.flow.steps, "threads": torch.get_num_threads(),
           "read_seconds": read, "fit_seconds": fit, "samples": len(samples), "sample_seconds": sample,
           "samples_per_second": len(samples) / sample}
    print(f"{out['rows']} rows x {out['columns']} columns, {out['tables']} tables: fit {fit:.1f} s at eps = "
          f"{args.epsilon:g} ({out['particles']} particles, {out['steps']} steps, {out['threads']} threads); "
          f"{out['samples']} samples in {sample:.1f} s ({out['samples_per_second']:.0f}/s)")
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
