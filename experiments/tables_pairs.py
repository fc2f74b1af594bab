"""Which pairs a table run releases when public rows exist: every pair against the public rule (issue 51).

On made-up tables whose columns depend on each other (each column drawn given up to two earlier ones, from
conditional tables fixed by a seed; never Adult), with 20 000 private rows, 20 000 held-out rows and 2 000 public
rows of the same law: the table flow's release of every pair, against the pairs that
:func:`swflow.tables.pairs.choose_pairs` keeps from the public rows, and against that rule's K halved and
doubled (the same ranking) to show where the rule lands. Scores: mean TVD of the 2- and 3-way marginals against
the held-out rows.

    python experiments/tables_pairs.py [--columns 10 30] [--epsilons 1 10] [--json]
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def network_table(n: int, *, columns: int, seed: int, law: int = 1234):
    """(a DataFrame of ``n`` made-up records, its schema as JSON): column j takes 2 … 7 categories and is drawn given
    up to two earlier columns jointly, from conditional tables drawn once from ``law``; rows from ``seed``."""
    import pandas as pd

    rule = np.random.default_rng(law)
    sizes = [int(s) for s in rule.integers(2, 8, columns)]
    parents = [tuple(sorted(rule.choice(j, min(j, 2), replace=False))) for j in range(columns)]
    tables = [rule.dirichlet(np.full(sizes[j], 0.5), size=int(np.prod([sizes[p] for p in parents[j]] or [1])))
              for j in range(columns)]
    rng = np.random.default_rng(seed)
    cells = np.zeros((n, columns), dtype=np.int64)
    for j in range(columns):
        row = (np.ravel_multi_index(cells[:, list(parents[j])].T, [sizes[p] for p in parents[j]]) if parents[j]
               else np.zeros(n, dtype=np.int64))
        cells[:, j] = (rng.uniform(size=(n, 1)) > tables[j][row].cumsum(1)).sum(1).clip(max=sizes[j] - 1)
    names = [f"c{j}" for j in range(columns)]
    frame = pd.DataFrame({name: np.array([f"v{v}" for v in range(k)], dtype=object)[cells[:, j]]
                          for j, (name, k) in enumerate(zip(names, sizes))})
    schema = {"columns": [{"name": name, "type": "categorical", "categories": [f"v{v}" for v in range(k)]}
                          for name, k in zip(names, sizes)]}
    return frame, schema


def main(argv=None) -> int:
    from swflow.privacy.mechanisms import analytic_gaussian_multiplier
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import Schema, TableCodec
    from swflow.tables.metrics import marginal_tvd
    from swflow.tables.pairs import choose_pairs

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--columns", type=int, nargs="+", default=[10, 30])
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--n", type=int, default=20_000, help="private rows (and held-out rows)")
    p.add_argument("--public", type=int, default=2_000, help="public rows")
    p.add_argument("--steps", type=int, default=1000, help="the particles' steps")
    p.add_argument("--json", action="store_true")
    p.add_argument("--smoke", action="store_true", help="6 columns, 2 000 rows, 50 steps, eps 1 (CI)")
    args = p.parse_args(argv)
    if args.smoke:
        args.columns, args.epsilons, args.n, args.public, args.steps = [6], [1.0], 2000, 300, 50
    delta, results = 1e-9, {}
    for columns in args.columns:
        (private, schema_json), (held_out, _) = (network_table(args.n, columns=columns, seed=s) for s in (0, 1))
        public, _ = network_table(args.public, columns=columns, seed=2)
        schema = Schema.from_json(schema_json)
        codec = TableCodec(schema)
        public_cells = codec.cell_index(schema.check(public))
        sizes = [b - a for a, b in codec.blocks()]
        for epsilon in args.epsilons:
            z = analytic_gaussian_multiplier(epsilon=epsilon, delta=delta)
            rule = choose_pairs(public_cells, sizes, dataset_size=args.n, noise_multiplier=z)
            names = schema.names
            variants = {"every pair": None, "public rule": "public"}
            ranked = choose_pairs(public_cells, sizes, dataset_size=args.n, noise_multiplier=0.0)  # all, ranked
            for label, k in (("rule's K / 2", len(rule) // 2), ("rule's K x 2", 2 * len(rule))):
                if columns - 1 <= k < len(ranked):
                    variants[label] = [(names[i], names[j]) for i, j in ranked[:k]]
            for label, pairs in variants.items():
                t0 = time.perf_counter()
                options = {"public": public} if pairs == "public" else {"pairs": pairs}
                syn = TableSynthesizer("dpswflow-hist", schema=schema, epsilon=epsilon, delta=delta,
                                       count_noise="gaussian", steps=args.steps, privacy_seed=3, **options)
                frame = syn.fit(private).sample(args.n, seed=1)
                cell = {**marginal_tvd(schema, frame, held_out, ways=(2, 3)), "pairs": len(syn.pairs),
                        "of": len(ranked), "seconds": time.perf_counter() - t0}
                key = f"columns={columns} eps={epsilon:g} {label}"
                results[key] = cell
                print(f"{key:38} pairs {cell['pairs']:4d} of {cell['of']:4d}  tvd 2/3-way {cell['tvd_2way']:.4f} "
                      f"{cell['tvd_3way']:.4f}  ({cell['seconds']:.0f} s)", flush=True)
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
