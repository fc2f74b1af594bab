"""Speed of the table path (issue 51): fit on Adult at eps = 1, and sampling 10^6 records.

Prints seconds and sizes (rows, columns, tables, particles, steps) for: the fit (reading and checking the table,
the release: counting, calibration, the discrete Gaussian draw; the particles' fit), and sampling N records decoded
to a DataFrame. ``--rows N`` instead writes a made-up table of N rows (swflow's example law) to a Parquet or CSV
file in chunks and fits from the file, read in chunks: the process's peak memory is printed. No figure is
asserted by a test: run it on a quiet machine and read it.

    make adult && python experiments/bench_tables.py [--n-samples 1000000] [--threads 2]
    python experiments/bench_tables.py --rows 10000000 --format parquet
    python experiments/bench_tables.py --wide 100000     # 30 columns: 15 categorical, 15 skewed numeric
    python experiments/bench_tables.py --wide 10000 --columns 200 --score     # issue 59's wide table
    python experiments/bench_tables.py --wide 3000 --columns 6 --categories 5000 --score   # one column of 5 000
    python experiments/bench_tables.py --step     # the particles' fit: milliseconds a step on four tables' shapes

``--score`` draws held-out rows from the same law and prints the mean 1- and 2-way TVD of swflow's samples and of
independent columns from noisy one-way counts (the trivial answer, on 32 equal-width bins) at the same epsilon.
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
    from swflow.pipeline.tables import TableSynthesizer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n-samples", type=int, default=1_000_000)
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: as the process has them)")
    p.add_argument("--adult-dir", default=str(HERE.parent / "data" / "adult"))
    p.add_argument("--rows", type=int, default=None, help="fit a made-up table of this many rows from a file")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="--rows: the file's format")
    p.add_argument("--wide", type=int, default=None, metavar="ROWS", help="fit a made-up table of ROWS records and "
                   "30 columns (15 categorical with dependence, 15 lognormal numbers on wide declared bounds)")
    p.add_argument("--columns", type=int, default=30, help="--wide: the number of columns (half categorical, "
                   "half numeric, side by side)")
    p.add_argument("--categories", type=int, default=None, help="--wide: one more column with this many categories")
    p.add_argument("--score", action="store_true", help="--wide: score against held-out rows, with independent "
                   "columns beside")
    p.add_argument("--step", action="store_true", help="time a step of the particles' fit on the shapes of four "
                   "tables (random targets: the time does not depend on them)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="the made-up example table, 1 000 samples (CI)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.step or args.smoke:  # the smoke run times a step too, with few particles
        rows = _step_costs(steps=1, n_particles=50) if args.smoke else _step_costs(steps=20)
        print(json.dumps(rows) if args.json else "\n".join(
            f"{r['shape']}: D = {r['coordinates']}, {r['tables']} tables of {r['table_cells']} cells in all: "
            f"{r['ms_per_step']:.1f} ms a step ({r['particles']} particles); one product over every coordinate "
            f"pair would multiply {r['dense_over_pairs']:.1f} x as much" for r in rows))
        if args.step:
            return 0
    t0 = time.perf_counter()
    if args.rows is not None:
        private, schema = _made_up_file(args.rows, args.format), None
        steps = {}
    elif args.wide is not None:
        private, schema = _wide_table(args.wide, args.columns, args.categories)
        steps = {}
    elif args.smoke:
        from swflow.tables import example_table

        private, schema = example_table(2000)
        args.n_samples, steps = 1000, {"steps": 50}
    else:
        from tables_adult import read_adult

        from swflow.tables import Schema

        private, _ = read_adult(Path(args.adult_dir))
        schema, steps = Schema.read(HERE / "tables" / "adult_schema.json"), {}
    read = time.perf_counter() - t0
    if schema is None:
        from swflow.tables.example import EXAMPLE_SCHEMA

        schema = EXAMPLE_SCHEMA
    syn = TableSynthesizer(schema=schema, epsilon=args.epsilon, delta=1e-9, clip=True, **steps)
    t0 = time.perf_counter()
    syn.fit(private, progress="auto")
    fit = time.perf_counter() - t0
    t0 = time.perf_counter()
    samples = syn.sample(args.n_samples, seed=1)
    sample = time.perf_counter() - t0
    import resource

    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"rows": syn.privacy_report().dataset_size, "columns": len(syn.schema.columns), "tables": len(syn.pairs),
           "peak_memory_mb": peak_mb,
           "particles": syn.flow.n_particles, "steps": syn.flow.steps, "threads": torch.get_num_threads(),
           "read_seconds": read, "fit_seconds": fit, "samples": len(samples), "sample_seconds": sample,
           "samples_per_second": len(samples) / sample}
    print(f"{out['rows']} rows x {out['columns']} columns, {out['tables']} tables: fit {fit:.1f} s at eps = "
          f"{args.epsilon:g} ({out['particles']} particles, {out['steps']} steps, {out['threads']} threads); "
          f"{out['samples']} samples in {sample:.1f} s ({out['samples_per_second']:.0f}/s); peak memory of the "
          f"process {peak_mb:.0f} MB")
    if args.score and args.wide is not None:
        out.update(_scores(syn, private, schema, _wide_table(args.wide, args.columns, args.categories, seed=1)[0],
                           args.epsilon))
        print(f"mean TVD against held-out rows: swflow 1-way {out['swflow_tvd_1way']:.3f}, 2-way "
              f"{out['swflow_tvd_2way']:.3f}; independent columns 1-way {out['independent_tvd_1way']:.3f}, 2-way "
              f"{out['independent_tvd_2way']:.3f}")
    if args.json:
        print(json.dumps(out))
    return 0


#: the shapes --step times: each column's cells (the pairs are the schema-alone rule's)
STEP_SHAPES = {"insteval, every student and lecturer a cell": [2972, 2160, 4, 6, 2, 15, 5],
               "insteval at 256 categories a column": [256, 256, 4, 6, 2, 15, 5],
               "storms (260 names, 11 columns of 16 cells)": [260] + [16] * 11,
               "200 columns of 8 cells": [8] * 200}


def _step_costs(*, steps: int, n_particles: int = 2000) -> list[dict]:
    """Milliseconds a step of swflow.tables.flow.fit_particles on each of STEP_SHAPES (the pairs the schema alone
    gives, random targets), with the cells a product over every coordinate pair would multiply, N·D², against the
    pairs' N·Σ cells_i·cells_j."""
    from swflow.tables.flow import MarginalFlowConfig, fit_particles
    from swflow.tables.pairs import schema_pairs

    out = []
    for shape, sizes in STEP_SHAPES.items():
        pairs = schema_pairs(sizes)
        tables = [torch.rand(sizes[i], sizes[j]) for i, j in pairs]
        config = MarginalFlowConfig(n_particles=n_particles, steps=steps)
        fit_particles(tables, sizes, pairs, dataset_size=1000, config=MarginalFlowConfig(n_particles=n_particles,
                                                                                          steps=1))  # warm up
        t0 = time.perf_counter()
        fit_particles(tables, sizes, pairs, dataset_size=1000, config=config)
        cells = sum(sizes[i] * sizes[j] for i, j in pairs)
        out.append({"shape": shape, "coordinates": sum(sizes), "tables": len(pairs), "table_cells": cells,
                    "particles": n_particles, "ms_per_step": (time.perf_counter() - t0) / steps * 1000,
                    "dense_over_pairs": sum(sizes) ** 2 / cells})
    return out


def _scores(syn, private, schema, held_out, epsilon: float) -> dict:
    from tables_adult import independent

    from swflow.tables import TableCodec
    from swflow.tables.metrics import marginal_tvd

    n = len(private)
    trivial = independent(TableCodec(schema, numeric_bins=32), private, epsilon=epsilon, delta=1e-9, n=n, seed=0)
    reference = schema.check(held_out, clip=True)
    out = {}
    for name, frame in (("swflow", syn.sample(n, seed=2)), ("independent", trivial)):
        for key, value in marginal_tvd(schema, schema.check(frame), reference, ways=(1, 2)).items():
            out[f"{name}_{key}"] = value
    return out


def _wide_table(rows: int, columns: int = 30, categories: int | None = None, *, seed: int = 0):
    """(frame, schema): experiments/tables_pairs.py's categorical columns (half of ``columns``), each followed by a
    lognormal number declared on [0, 10^6] (a skewed column on wide, round bounds) shifted by its cell; with
    ``categories``, one more column of that many categories (Zipf-like shares, shifted by c0's cell). Rows from
    ``seed``; the law is fixed."""
    import numpy as np
    import pandas as pd

    from tables_pairs import network_table

    from swflow.tables import Schema

    half = columns // 2
    frame, declared = network_table(rows, columns=half, seed=seed)
    rng = np.random.default_rng(seed + 1)
    out, entries = {}, []
    for j, entry in enumerate(declared["columns"]):
        out[entry["name"]], shift = frame[entry["name"]], frame[entry["name"]].str[1:].astype(int).to_numpy()
        out[f"x{j}"] = np.round(rng.lognormal(3 + shift, 1.5).clip(0, 1e6), 2)
        entries += [entry, {"name": f"x{j}", "type": "numeric", "min": 0, "max": 1_000_000}]
    if categories:
        shares = 1.0 / np.arange(1, categories + 1)
        shift = frame["c0"].str[1:].astype(int).to_numpy()
        code = (rng.choice(categories, size=rows, p=shares / shares.sum()) + 7 * shift) % categories
        out["code"] = np.array([f"k{v:05d}" for v in range(categories)], dtype=object)[code]
        entries.append({"name": "code", "type": "categorical", "categories": [f"k{v:05d}" for v in range(categories)]})
    return pd.DataFrame(out), Schema.from_json({"columns": entries})


def _made_up_file(rows: int, form: str) -> Path:
    """A file of ``rows`` made-up records (swflow's example law), written 10^6 at a time (flat memory)."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from swflow.tables import example_table

    path = Path(tempfile.mkdtemp()) / f"made_up.{form}"
    writer = None
    for i, start in enumerate(range(0, rows, 1_000_000)):
        frame, _ = example_table(min(1_000_000, rows - start), seed=100 + i)
        if form == "csv":
            frame.to_csv(path, index=False, mode="a", header=i == 0)
            continue
        batch = pa.Table.from_pandas(frame, preserve_index=False)
        writer = writer or pq.ParquetWriter(path, batch.schema)
        writer.write_table(batch)
    if writer is not None:
        writer.close()
    return path


if __name__ == "__main__":
    raise SystemExit(main())
