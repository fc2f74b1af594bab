"""Where a rare class's links go, and where the particles start (issue 74, item 3).

Two modes, each line one fit and one draw, scored as tables_bench.py does (mean 3-way TVD at the held-out deciles,
the AUC of a classifier trained on the samples predicting the table's target):

- ``diagnose``: without noise (ε = ∞: the exact tables; not private), the private rows, the private rows decoded
  through swflow's cells, and the particles fitted to the exact tables from each ``--start-logits`` (the logit a
  particle's starting cell gets, swflow.tables.flow.START_LOGIT; 0 is the start before it: Gaussian jitter alone),
  with the share of the positive class's mass that the particles put in cells of ``--column`` where the private
  rows have none of it (the rows' own share is 0).
- ``choose``: every ``--start-logits`` at each ε and seed (the seed draws the noise and the particles), then the mean
  3-way TVD and AUC per start logit over every (table, ε, seed): how the start was chosen on the tuning tables.

    make tables-data
    python experiments/tables_rare.py diagnose --table default --column balance --start-logits 0 3
    python experiments/tables_rare.py choose --tables diamonds cps1988 medexp k401ksubs --start-logits 0 3 6
    python experiments/tables_rare.py choose --start-logits 0 --lr 0.2   # the other remedy: a larger rate
    python experiments/tables_rare.py --smoke            # the made-up example table (CI)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tables_adult import Scorer  # noqa: E402
from tables_bench import DELTA, TARGETS, read  # noqa: E402


def fitted(schema, private, *, epsilon: float, seed: int, start_logit: float, **settings):
    """A TableSynthesizer fitted with its particles started at ``start_logit`` (restored after)."""
    import swflow.tables.flow as flow
    from swflow import Synthesizer

    noise = {} if epsilon == float("inf") else {"privacy_seed": 100 + seed, "count_noise": "gaussian"}
    kept, flow.START_LOGIT = flow.START_LOGIT, start_logit
    try:
        return Synthesizer("dpswflow-hist", schema=schema, epsilon=epsilon, delta=DELTA, clip=True, seed=seed,
                           **noise, **settings).fit(private)
    finally:
        flow.START_LOGIT = kept


def misplaced(syn, private, target: str, column: str) -> float:
    """The share of the target's last class's particle mass in cells of ``column`` where the private rows have none
    of that class (an oracle's reading: it looks at the private rows)."""
    names = syn.schema.names
    t, c = names.index(target), names.index(column)
    particles = syn._particles
    mass = (particles[t][:, -1:].T @ particles[c]).squeeze(0).numpy()
    cells = syn.codec.cell_index(syn.schema.check(private, clip=True))
    present = np.bincount(cells[cells[:, t] == particles[t].shape[1] - 1, c], minlength=len(mass)) > 0
    return float(mass[~present].sum() / mass.sum())


def diagnose(args, private, held_out, schema) -> None:
    target = TARGETS[args.table]
    score = Scorer(schema, private, held_out, target)
    line = "{:48} 3-way TVD {:.3f}  AUC {:.3f}"
    found = score(private)
    print(line.format("private rows (the floor)", found["tvd_3way"], found["auc"]))
    syn = fitted(schema, private, epsilon=float("inf"), seed=0, start_logit=0.0, steps=1)
    through = syn.codec.decode_cells(syn.codec.cell_index(schema.check(private, clip=True)), seed=0)
    found = score(through)
    print(line.format("private rows through swflow's cells", found["tvd_3way"], found["auc"]))
    for start in args.start_logits:
        syn = fitted(schema, private, epsilon=float("inf"), seed=0, start_logit=start)
        for seed in args.seeds:
            found = score(syn.sample(len(private), seed=seed))
            print(line.format(f"particles, exact tables, start {start:g}, sample {seed}", found["tvd_3way"],
                              found["auc"]) + f"  misplaced {misplaced(syn, private, target, args.column):.3f}")


def choose(args) -> None:
    found: dict[float, list] = {start: [] for start in args.start_logits}
    for table in args.tables:
        private, held_out, schema = args.loaded.get(table) or read(table, Path(args.data_dir))
        score = Scorer(schema, private, held_out, TARGETS[table])
        for epsilon in args.epsilons:
            for start in args.start_logits:
                draws = [score(fitted(schema, private, epsilon=epsilon, seed=seed, start_logit=start,
                                      **args.settings).sample(len(private), seed=seed)) for seed in args.seeds]
                found[start].extend(draws)
                print(f"{table} ε = {epsilon:g} start {start:g}: 3-way TVD "
                      f"{np.mean([d['tvd_3way'] for d in draws]):.3f}  AUC {np.mean([d['auc'] for d in draws]):.3f}  "
                      + " ".join(f"{d['tvd_3way']:.3f}/{d['auc']:.2f}" for d in draws), flush=True)
    for start, draws in found.items():
        print(f"start {start:g}: mean 3-way TVD {np.mean([d['tvd_3way'] for d in draws]):.4f}, mean AUC "
              f"{np.mean([d['auc'] for d in draws]):.3f} over {len(draws)} fits")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", nargs="?", choices=["diagnose", "choose"], default="diagnose")
    p.add_argument("--table", default="default", help="diagnose: the table")
    p.add_argument("--column", default="balance", help="diagnose: the column the misplaced mass is read in")
    p.add_argument("--tables", nargs="+", default=["diamonds", "cps1988", "medexp", "k401ksubs"])
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--start-logits", type=float, nargs="+", default=[0.0, 3.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--lr", type=float, help="choose: Adam's rate for every fit (default: the library's)")
    p.add_argument("--data-dir", default=str(HERE.parent / "data" / "tables"))
    p.add_argument("--smoke", action="store_true", help="the made-up example table, few steps (CI)")
    args = p.parse_args(argv)
    args.loaded, args.settings = {}, {} if args.lr is None else {"lr": args.lr}
    if args.smoke:
        from swflow.tables import example_table

        (private, schema), (held_out, _) = example_table(1500, seed=0), example_table(1500, seed=1)
        TARGETS["example"] = "income"
        args.loaded["example"] = (private, held_out, schema)
        args.table, args.tables, args.column, args.seeds, args.epsilons = "example", ["example"], "age", [0], [5.0]
        args.settings = {"steps": 20}
        diagnose(args, private, held_out, schema)
        choose(args)
        return 0
    if args.mode == "diagnose":
        diagnose(args, *read(args.table, Path(args.data_dir)))
    else:
        choose(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
