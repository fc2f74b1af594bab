"""Beyond pairs (issue 58, item 3): would three-way tables move the 3-way error toward the floor at ε = 10?

An upper bound first, before any budget is spent on triples: swflow's release at ε = 10 (its default, every pair),
then the same particles fitted to the same released pair tables plus the EXACT three-way tables (no noise: an
oracle, not a private method) of the T triples where the pairs-only samples are furthest from the private rows'
3-way marginal (the best T an oracle could choose). Any private release of triples would pay noise on them and
budget taken from the pairs, and would choose them worse, so it can only do less well than this bound. If even the
oracle moves the held-out 3-way TVD little, releasing triples is not worth building into the default.

Scored on the held-out half as tables_bench.py does (mean 3-way TVD, numbers in 10 bins at the held-out deciles).
The oracle reaches into the synthesizer's fitted state (an experiment, not an API).

    make tables-data
    python experiments/tables_triples.py                       # movies, weather, medexp, diamonds at ε = 10
    python experiments/tables_triples.py --smoke               # the made-up example table (CI)
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def triple_tables(cells: np.ndarray, sizes: list[int], triples) -> list[torch.Tensor]:
    """The exact counts of every triple (cells (n, C) int)."""
    out = []
    for i, j, k in triples:
        flat = (cells[:, i] * sizes[j] + cells[:, j]) * sizes[k] + cells[:, k]
        out.append(torch.from_numpy(np.bincount(flat, minlength=sizes[i] * sizes[j] * sizes[k])
                                    .reshape(sizes[i], sizes[j], sizes[k]).astype(np.float64)))
    return out


def worst_triples(cells: np.ndarray, synthetic: np.ndarray, sizes: list[int], count: int):
    """The ``count`` triples whose 3-way marginal differs most (TV) between the private cells and the synthetic
    ones: the oracle's choice."""
    scores = []
    for triple in itertools.combinations(range(len(sizes)), 3):
        a, b = (t.numpy() / t.numpy().sum() for t in (triple_tables(cells, sizes, [triple])[0],
                                                       triple_tables(synthetic, sizes, [triple])[0]))
        scores.append((0.5 * float(np.abs(a - b).sum()), triple))
    return [t for _, t in sorted(scores, reverse=True)[:count]]


def run(schema, private, held_out, *, epsilon: float, counts: list[int], steps: int | None, seed: int = 0) -> dict:
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.privacy.marginals import split_tables
    from swflow.tables.flow import fit_particles
    from swflow.tables.shrinkage import shrunk_tables
    from swflow.tables.metrics import marginal_tvd

    settings = {} if steps is None else {"steps": steps}
    syn = TableSynthesizer(schema=schema, epsilon=epsilon, delta=1e-9, clip=True, seed=seed, **settings).fit(private)
    n = len(private)
    reference = schema.check(held_out, clip=True)
    out = {"private (floor)": marginal_tvd(schema, schema.check(private, clip=True), reference, ways=(3,))["tvd_3way"],
           "pairs (swflow)": marginal_tvd(schema, syn.sample(n, seed=seed), reference, ways=(3,))["tvd_3way"]}
    sizes, report = syn.codec.sizes, syn.privacy_report()
    cells = syn.codec.cell_index(schema.check(private, clip=True))
    synthetic = syn.codec.cell_index(schema.check(syn.sample(n, seed=seed + 1)))
    pairs = shrunk_tables(split_tables(syn._counts, sizes, syn.pairs), sizes, syn.pairs,
                          noise_std=report.noise_std, dataset_size=report.dataset_size)
    for count in counts:
        triples = worst_triples(cells, synthetic, sizes, count)
        particles = fit_particles(pairs + triple_tables(cells, sizes, triples), sizes, syn.pairs + triples,
                                  dataset_size=report.dataset_size, config=syn.flow)
        syn._particles = particles
        out[f"+ {count} exact triples (oracle)"] = marginal_tvd(schema, syn.sample(n, seed=seed), reference,
                                                                ways=(3,))["tvd_3way"]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", nargs="+", default=["movies", "weather", "medexp", "diamonds"])
    p.add_argument("--epsilon", type=float, default=10.0)
    p.add_argument("--triples", type=int, nargs="+", default=[10, 40])
    p.add_argument("--data-dir", default=str(HERE.parent / "data" / "tables"))
    p.add_argument("--smoke", action="store_true", help="the made-up example table, few steps (CI)")
    args = p.parse_args(argv)
    if args.smoke:
        from swflow.tables import example_table

        (private, schema), (held_out, _) = example_table(1500, seed=0), example_table(1500, seed=1)
        loaded, steps, args.triples = {"example": (private, held_out, schema)}, 60, [2]
    else:
        from tables_bench import read

        loaded, steps = {name: read(name, Path(args.data_dir)) for name in args.tables}, None
    print(f"mean 3-way TVD against held-out rows at ε = {args.epsilon:g} (triples: exact, an upper bound)")
    for name, (private, held_out, schema) in loaded.items():
        scores = run(schema, private, held_out, epsilon=args.epsilon, counts=args.triples, steps=steps)
        print(f"{name:10} " + "  ".join(f"{key}: {value:.3f}" for key, value in scores.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
