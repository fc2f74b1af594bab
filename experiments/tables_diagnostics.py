"""Diagnostics of the benchmark's misses (issue 58): what a log scale, every category its own cell, and more
noise draws would change. Settings measured here are not defaults; docs/tables.md ("Not done yet") reports them.

- ``log-scale``: counts and amounts declared ``"scale": "log"`` against the table as declared, at each ε and seed.
- ``every-category``: a many-category column given one cell per category and every other column ``--others`` cells,
  against the defaults, at each ε (ε = 1e6 is the pair tables without noise; storms' names).
- ``auc-draws``: more noise draws of a table's AUC and 3-way TVD at one ε, of swflow or (``--peer``) of a peer.

Each line is one fit and one draw of the noise, scored as `swflow evaluate --against` does (experiments/tables_bench.py).

    make tables-data
    python experiments/tables_diagnostics.py log-scale --table k401ksubs --columns inc nettfa --epsilons 1 10
    python experiments/tables_diagnostics.py every-category --table storms --column name --epsilons 10 30 100 1e6
    python experiments/tables_diagnostics.py auc-draws --table medexp --epsilons 1 [--adjacency add-remove]
    python experiments/tables_diagnostics.py auc-draws --table medexp --epsilons 1 --peer mst
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tables_adult import Scorer  # noqa: E402
from tables_bench import DELTA, PEERS, TARGETS, peer_codec_of, peer_samples, read, swflow  # noqa: E402

#: the benchmark's cache of the peers' samples (experiments/tables_bench.py)
PEER_CACHE = HERE / "out" / "tables_bench_peers"


def log_scale(schema, columns: list[str]):
    """``schema`` with ``columns`` declared ``"scale": "log"`` (swflow/tables/cells.py)."""
    from dataclasses import replace

    from swflow.tables import Schema

    unknown = set(columns) - {c.name for c in schema.columns if c.kind == "numeric"}
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not numeric columns of the table")
    return Schema(tuple(replace(c, scale="log") if c.name in columns else c for c in schema.columns), schema.rules)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", nargs="?", choices=("log-scale", "every-category", "auc-draws"), default="log-scale")
    p.add_argument("--table", default="movies")
    p.add_argument("--column", default="name", help="every-category: the many-category column")
    p.add_argument("--columns", nargs="+", default=["votes", "budget"], help="log-scale: the columns declared log")
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--others", type=int, default=16, help="every-category: the other columns' cells")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="the noise draws' seeds (the "
                   "benchmark's is 0)")
    p.add_argument("--adjacency", choices=("replace-one", "add-remove"), default="replace-one")
    p.add_argument("--peer", choices=PEERS, help="auc-draws: draws of this peer instead of swflow (`make peers-env`; "
                   "cached beside the benchmark's)")
    p.add_argument("--data-dir", default=str(HERE.parent / "data" / "tables"))
    p.add_argument("--smoke", action="store_true", help="the made-up example table, eps 5, one seed (CI)")
    args = p.parse_args(argv)
    if args.peer and args.what != "auc-draws":
        p.error("--peer is for auc-draws")
    if args.smoke:
        from swflow.tables import example_table

        (private, schema), (held_out, _) = example_table(1000, seed=0), example_table(1000, seed=1)
        target, args.epsilons, args.seeds = "income", [5.0], [1]
        args.column, args.columns, args.peer = "sector", ["hours"], None  # no peers in CI
    else:
        private, held_out, schema = read(args.table, Path(args.data_dir))
        target = TARGETS[args.table]
    runs = []  # (label, schema, settings)
    if args.what == "log-scale":
        runs += [("as declared", schema, {}), (f"log scale on {', '.join(args.columns)}",
                                               log_scale(schema, args.columns), {})]
    elif args.what == "every-category":
        column = next(c for c in schema.columns if c.name == args.column)
        cells = {**{name: args.others for name in schema.names}, args.column: len(column.categories)}
        runs += [("defaults", schema, {}), (f"{args.column} every category, others {args.others}", schema,
                                            {"cells": cells})]
    else:
        runs += [(args.peer or "defaults", schema, {})]
    score = Scorer(schema, private, held_out, target)  # scored alike under any scale: the same bounds
    for epsilon in args.epsilons:
        for seed in args.seeds:
            for label, table_schema, settings in runs:
                if args.peer:  # the peer's unit, add/remove; cached beside the benchmark's draw (seed 0)
                    frame, facts = peer_samples(args.peer, args.table, peer_codec_of(schema), private,
                                                epsilon=epsilon, n=len(private), seed=seed, cache=PEER_CACHE,
                                                cpu_minutes=60.0)
                    if frame is None:
                        print(f"eps {epsilon:g}  seed {seed}  {label}: {facts['stopped']}", flush=True)
                        continue
                else:
                    frame = swflow(table_schema, private, epsilon=epsilon, n=len(private), seed=seed,
                                   adjacency=args.adjacency, **settings)
                result = score(frame)
                auc = "-" if result["auc"] is None else f"{result['auc']:.3f}"
                unit = "add-remove" if args.peer else args.adjacency
                print(f"eps {epsilon:g}  seed {seed}  {unit}  {label:40}  3-way TVD "
                      f"{result['tvd_3way']:.3f}  AUC {auc}  (delta {DELTA:g})", flush=True)


if __name__ == "__main__":
    main()
