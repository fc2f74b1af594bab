"""How the resolution defaults were chosen: the budget share of the fine one-way release and the cells rule, swept
on the benchmark's four tuning tables only (experiments/tables_bench.py: diamonds, cps1988, medexp, k401ksubs); the
other four tables were never run while choosing.

Each cell fits ``TableSynthesizer`` at ε with one (share, rule) and scores it as the benchmark does (mean 3-way TVD
against the held-out half). The rule's constant c sets the cells per column, m = ⌊√(n / (c·σ_pair))⌋ in [6, 32].

    python experiments/tables_resolution.py [--shares 0.1 0.15 0.25] [--rules 1 2 4] [--epsilons 1 10] [--json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tables_bench import DELTA, TARGETS, TUNE, read  # noqa: E402
from tables_adult import Scorer  # noqa: E402


def main(argv=None) -> int:
    import swflow.tables.resolution as resolution
    from swflow import Synthesizer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", nargs="+", default=list(TUNE), choices=list(TUNE))
    p.add_argument("--shares", type=float, nargs="+", default=[0.05, 0.15, 0.3])
    p.add_argument("--rules", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--data-dir", default=str(HERE.parent / "data" / "tables"))
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="the made-up example table, one cell (CI)")
    args = p.parse_args(argv)
    if args.smoke:
        from swflow.tables import example_table

        (private, schema), (held_out, _) = example_table(2000, seed=0), example_table(2000, seed=1)
        loaded = {"example": (private, held_out, schema, "income")}
        args.shares, args.rules, args.epsilons = [0.15], [2.0], [5.0]
    else:
        loaded = {t: (*read(t, Path(args.data_dir)), TARGETS[t]) for t in args.tables}
    results = {}
    default_rule = resolution.CELLS_RULE
    try:
        for table, (private, held_out, schema, target) in loaded.items():
            score = Scorer(schema, private, held_out, target)
            for epsilon, share, rule in itertools.product(args.epsilons, args.shares, args.rules):
                resolution.CELLS_RULE = rule  # the rule's constant, read when the cells are planned
                t0 = time.perf_counter()
                syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=epsilon, delta=DELTA, clip=True,
                                  resolution_share=share, steps=200 if args.smoke else 1000).fit(private)
                cell = {"tvd_3way": score(syn.sample(len(private), seed=0))["tvd_3way"],
                        "seconds": time.perf_counter() - t0}
                key = f"{table} eps={epsilon:g} share={share:g} rule={rule:g}"
                results[key] = cell
                print(f"{key:45} tvd 3-way {cell['tvd_3way']:.4f}  ({cell['seconds']:.0f} s)", flush=True)
    finally:
        resolution.CELLS_RULE = default_rule
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
