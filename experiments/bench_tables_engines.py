"""Tables counted where they live (issue 95): the same table run, released and fitted, with its rows counted by
pandas (this process, a file in chunks) and by DuckDB (where they are), on a made-up table of 12 columns written
as Parquet files: categories, skewed numbers on a log scale, missing values, a pile, dates, and an identifier
column the schema ignores. One line per size: seconds and the child process's peak memory per engine, and whether
the releases are the same count for count (with a privacy seed and float noise, which a test checks too).

    python experiments/bench_tables_engines.py --rows 1000000 10000000 [--engines pandas duckdb] [--data-dir D]
    python experiments/bench_tables_engines.py --rows 100000000 --engines duckdb
    python experiments/bench_tables_engines.py --rows 10000000 --engines spark
    python experiments/bench_tables_engines.py --smoke

Each fit runs in a child process of its own (its peak resident memory is ru_maxrss; Spark's rows live in its JVM
and Python workers, whose memory is Spark's settings: not shown); the files are written once
per size, a million rows at a time, and kept in --data-dir for the next run. No figure is asserted by a test: run
it on a quiet machine and read it.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

SCHEMA = {"columns": [
    {"name": "region", "type": "categorical", "categories": [f"r{i:02d}" for i in range(12)]},
    {"name": "sex", "type": "categorical", "categories": ["F", "M"]},
    {"name": "age", "type": "numeric", "min": 0, "max": 100, "integer": True},
    {"name": "income", "type": "numeric", "min": 0, "max": 1000000, "scale": "log", "missing": True},
    {"name": "visits", "type": "numeric", "min": 0, "max": 500, "integer": True},
    {"name": "diagnosis", "type": "categorical", "categories": [f"d{i}" for i in range(20)] + [None]},
    {"name": "cost", "type": "numeric", "min": 0, "max": 100000, "decimals": 2},
    {"name": "admitted", "type": "date", "min": "2015-01-01", "max": "2024-12-31", "missing": True},
    {"name": "stay", "type": "numeric", "min": 0, "max": 365, "integer": True},
    {"name": "insured", "type": "categorical", "categories": ["yes", "no"]},
    {"name": "score", "type": "numeric", "min": -3, "max": 3},
    {"name": "person", "type": "ignore"}]}
CHUNK = 1_000_000


def made_up(n: int, seed: int):
    """``n`` made-up rows (a DataFrame) under SCHEMA, with dependence between columns."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(45, 18, n), 0, 100).round()
    sick = rng.uniform(size=n) < 0.2 + age / 250
    income = np.exp(rng.normal(10, 1.2, n)).clip(0, 1e6)
    income[rng.uniform(size=n) < 0.08] = np.nan
    cost = np.where(sick, rng.lognormal(7, 1.5, n), 0.0).clip(0, 1e5).round(2)  # a pile at 0
    days = rng.integers(0, 3650, n)
    admitted = pd.Series(pd.Timestamp("2015-01-01") + pd.to_timedelta(days, unit="D")).astype("datetime64[us]")
    return pd.DataFrame({
        "region": np.array([f"r{i:02d}" for i in range(12)], dtype=object)[rng.integers(0, 12, n)],
        "sex": np.where(rng.uniform(size=n) < 0.5, "F", "M").astype(object), "age": age, "income": income,
        "visits": np.clip(rng.geometric(0.2 - 0.1 * sick, n) - 1, 0, 500).astype(float),
        "diagnosis": np.array([f"d{i}" for i in range(20)] + [None], dtype=object)[
            np.where(sick, rng.integers(0, 20, n), 20)],
        "cost": cost, "admitted": admitted.where(sick), "stay": np.where(sick, rng.poisson(4, n), 0).astype(float),
        "insured": np.where(rng.uniform(size=n) < 0.85, "yes", "no").astype(object),
        "score": np.clip(rng.normal(0, 1, n) + 0.5 * sick, -3, 3),
        "person": rng.integers(0, n // 3 + 1, n)})


def write_parts(rows: int, folder: Path) -> Path:
    """The made-up table of ``rows`` rows as Parquet files of CHUNK rows each in ``folder`` (kept: written once)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / "done"
    if not done.exists():
        for i, start in enumerate(range(0, rows, CHUNK)):
            made_up(min(CHUNK, rows - start), seed=i).to_parquet(folder / f"part-{i:05d}.parquet", index=False)
        done.write_text(str(rows))
    return folder


def child(args) -> int:
    """One fit, in this (child) process: prints its seconds, peak memory and released counts' digest as JSON."""
    import hashlib
    import resource
    import warnings

    from swflow.pipeline.tables import TableSynthesizer

    start = time.perf_counter()
    unit = {} if args.unit is None else {"privacy_unit": "person", "max_rows_per_unit": args.unit}
    syn = TableSynthesizer(schema=SCHEMA, epsilon=1.0, privacy_seed=None if unit else 1, count_noise="gaussian",
                           steps=args.steps, **unit)  # a unit run's noise is the OS's: never seeded
    table = str(args.folder / "part-*.parquet")
    if args.engine == "pandas":  # pandas reads one file: the parts as one (written once, beside them)
        table = str(args.folder / "whole.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        syn.fit(table, engine=args.engine)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(syn._counts.numpy().tobytes()).hexdigest()[:16]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    if args.engine == "spark":  # the JVM and its Python workers hold the rows: their memory is Spark's settings'
        peak = None
    print(json.dumps({"seconds": seconds, "peak_gb": peak, "counts": digest}))
    return 0


def whole(folder: Path) -> None:
    """The parts as one Parquet file, written by streaming them (what the pandas engine reads)."""
    import pyarrow.parquet as pq

    target = folder / "whole.parquet"
    if target.exists():
        return
    parts = sorted(folder.glob("part-*.parquet"))
    with pq.ParquetWriter(target, pq.read_schema(parts[0])) as writer:
        for part in parts:
            writer.write_table(pq.read_table(part))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    p.add_argument("--engines", nargs="+", default=["pandas", "duckdb"], choices=["pandas", "duckdb", "spark"],
                   help="spark: a local session on every core (Java 17 and pyspark: make env, make java)")
    p.add_argument("--steps", type=int, default=1000, help="the particles' fit (the same on every engine)")
    p.add_argument("--data-dir", type=Path, default=Path("data/bench_engines"))
    p.add_argument("--unit", type=int, metavar="K", help="a run under the privacy unit 'person', each counting as "
                   "at most K rows (pandas and Spark; its noise is never seeded, so no two releases are the same)")
    p.add_argument("--smoke", action="store_true", help="10 000 rows, 20 steps, into a scratch folder")
    p.add_argument("--child", choices=["pandas", "duckdb", "spark"], dest="engine", help=argparse.SUPPRESS)
    p.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.engine is not None:
        return child(args)
    if args.smoke:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="bench-engines-") as scratch:
            args.rows, args.steps, args.data_dir, args.smoke = [10_000], 20, Path(scratch), False
            return run(args)
    return run(args)


def run(args) -> int:
    """One line per size and engine (main's arguments)."""
    print(f"{'rows':>12} {'engine':>7} {'seconds':>8} {'peak GB':>8}  same release")
    for rows in args.rows:
        folder = write_parts(rows, args.data_dir / f"rows-{rows}")
        if "pandas" in args.engines:
            whole(folder)
        digests = {}
        for engine in args.engines:
            unit = [] if args.unit is None else ["--unit", str(args.unit)]
            out = subprocess.run([sys.executable, __file__, "--child", engine, "--folder", str(folder), "--steps",
                                  str(args.steps), *unit], check=True, capture_output=True, text=True).stdout
            line = json.loads(out.strip().splitlines()[-1])
            if args.unit is None:  # a unit run's noise is never seeded: its releases differ by design
                digests[engine] = line["counts"]
            same = "" if len(digests) < 2 else ("yes" if len(set(digests.values())) == 1 else "NO")
            peak = "-" if line["peak_gb"] is None else f"{line['peak_gb']:.2f}"
            print(f"{rows:>12,} {engine:>7} {line['seconds']:>8.1f} {peak:>8}  {same}", flush=True)
        if len(set(digests.values())) > 1:
            raise SystemExit("the engines' releases differ: that is a bug (tests/test_table_engines.py)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
