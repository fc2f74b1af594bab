"""What public rows add to a run per person (issue 75): a unit run with public rows against one without, on the
tables of experiments/tables_units.py.

Each draw splits a table by unit at random (public seed): half the units private, as in tables_units.py; the other
half split again at random, half of them public rows, half held out. Every method runs at (ε, δ = 1e-9) per unit
(add/remove of one unit and all of its rows) and is scored against the held-out units' rows as tables_units.py
scores (mean 3-way TVD, a classifier's AUC):
- ``unit``: swflow with ``privacy_unit`` at its default k, the cells from its released trees, every pair;
- ``unit-public``: the same with ``public=`` the public units' rows: the cells from their counts at no cost (no
  trees released) and the pairs chosen from them at the unit's noise, each column still with its rows' class;
- ``public-rows``: the public rows themselves, drawn with replacement to the private rows' number: the trivial
  answer a data owner with such rows has (no privacy spent on the private rows);
- ``private`` (the floor) and ``uniform`` (records uniform over the schema).
Public rows drawn from the same population as the private ones, as here, are the best case for them: the trivial
answer then beats every private release. The run per person is for what public rows do not say: another year,
another region, too few of them. Each finished cell is kept in --out, so a rerun continues:

    make tables-data
    python experiments/tables_units_public.py --seeds 0 1 2 3 4
    python experiments/tables_units_public.py --smoke          # the made-up table only, small (CI)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tables_adult import Scorer, uniform_records  # noqa: E402
from tables_bench import DELTA, peer_codec_of  # noqa: E402
from tables_units import TABLES, cell_key, draw_arguments, draw_settings, mean_cell, read, store_cell  # noqa: E402

METHODS = ("private", "uniform", "public-rows", "unit", "unit-public")


def split_public(held_out: pd.DataFrame, unit: str, *, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(public rows, held-out rows): the held-out units split at random, half each."""
    names = held_out[unit].unique()
    public = set(np.random.default_rng(seed + 7_000).permutation(names)[: len(names) // 2])
    chosen = held_out[unit].isin(public)
    return held_out[chosen].reset_index(drop=True), held_out[~chosen].reset_index(drop=True)


def run_cell(method: str, private: pd.DataFrame, public: pd.DataFrame, schema, unit: str, *, epsilon: float,
             seed: int, steps: int | None) -> pd.DataFrame:
    """The samples of one method (as many as the private rows)."""
    from swflow import Synthesizer

    n = len(private)
    if method == "private":
        return private.drop(columns=[unit])
    if method == "uniform":
        return uniform_records(peer_codec_of(schema), n=n, seed=seed)
    if method == "public-rows":
        return public.drop(columns=[unit]).sample(n, replace=True, random_state=seed).reset_index(drop=True)
    settings = {"public": public} if method == "unit-public" else {}
    syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=epsilon, delta=DELTA, clip=True, seed=seed,
                      privacy_unit=unit, **({} if steps is None else {"steps": steps}), **settings)
    return syn.fit(private).sample(n, seed=seed)


def table_text(cells: dict, tables: list[str], epsilons: list[float], seeds: list[int]) -> str:
    """Markdown: per table and ε, the mean 3-way TVD (AUC) of each method over the draws."""
    out = [f"mean 3-way TVD / AUC over the draws {seeds}, δ = {DELTA:g} per unit\n",
           "| table | ε | " + " | ".join(METHODS) + " |", "|" + "---|" * (len(METHODS) + 2)]
    for table in tables:
        for epsilon in epsilons:
            row = []
            for method in METHODS:
                c = mean_cell(cells, table, method, None if method in ("private", "uniform", "public-rows")
                              else epsilon, seeds)
                row.append("–" if c is None else f"{c['tvd_3way']:.3f}" + (
                    f" / {c['auc']:.2f}" if c.get("auc") is not None else ""))
            out.append(f"| {table} | {epsilon:g} | " + " | ".join(row) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    draw_arguments(p, out="experiments/out/tables_units_public.json")
    p.add_argument("--smoke", action="store_true", help="the made-up table, 300 customers, eps 5, few steps (CI)")
    args = p.parse_args(argv)
    steps, units = draw_settings(args)
    out = Path(args.out)
    cells = json.loads(out.read_text()) if out.exists() else {}
    for table, seed in ((t, s) for t in args.tables for s in args.seeds):
        private, held_out, schema, unit = read(table, Path(args.data_dir), seed=seed, units=units)
        public, held_out = split_public(held_out, unit, seed=seed)
        score = Scorer(schema, private.drop(columns=[unit]), held_out.drop(columns=[unit]), TABLES[table][2])
        for method in METHODS:
            for epsilon in [None] if method in ("private", "uniform", "public-rows") else args.epsilons:
                key = cell_key(table, method, epsilon, seed)
                if key in cells:
                    continue
                t0 = time.perf_counter()
                frame = run_cell(method, private, public, schema, unit, epsilon=epsilon or 1.0, seed=seed,
                                 steps=steps)
                assert len(schema.check(frame)) == len(frame)  # every row valid under the schema
                cells = store_cell(out, cells, key, {**score(frame), "seconds": time.perf_counter() - t0})
                print(f"{key:40} tvd 3-way {cells[key]['tvd_3way']:.3f}  auc {cells[key].get('auc')}", flush=True)
        print(f"{table} (seed {seed}): {private[unit].nunique()} private units, {public[unit].nunique()} public, "
              f"{held_out[unit].nunique()} held out")
    print(table_text(cells, args.tables, args.epsilons, args.seeds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
