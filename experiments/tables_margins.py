"""Where a table run's two-way error comes from (issue 94): its columns' laws or its links, on the pairs it
measures and on those it does not, beside one Gaussian release of the one-way counts (independent columns).

One fit of swflow (its defaults, ``--target`` named or not) and one draw of independent columns at the same ε
(replace-one, sensitivity √(2C), analytic Gaussian: experiments/tables_adult.py's ``independent``), each scored
against the private rows themselves in the run's own cells (a diagnosis: the private rows are read without noise,
never released). Mean two-way TVD over the measured pairs and over up to 300 others drawn at random (public seed):

- ``raw`` / ``shrunk``: the released tables as they are (clipped at zero) / shrunk (swflow.tables.shrinkage);
- ``particles``: the fitted particles' own two-way law; ``particles' laws``: the product of their one-way laws
  (what the particles would score with every link cut);
- ``independence, pooled laws``: the product of each column's law pooled over the released tables;
- ``independent columns``: the one-way release's product; ``particles' links on its laws``: the particles' departure
  from their own product, added to the one-way release's product (the links of one, the laws of the other);
- one-way TVD of the particles, of the pooled laws and of the one-way release.

    make tables-data
    python experiments/tables_margins.py --table caravan --epsilon 1 [--target Purchase]
"""
from __future__ import annotations

import argparse
import itertools
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tables_bench import DELTA, read  # noqa: E402

#: the pairs the run does not measure, drawn at random, that are scored
OTHER_PAIRS = 300


def tvd(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a - b).abs().sum())


def law(table: torch.Tensor) -> torch.Tensor:
    table = table.to(torch.float64).clamp(min=0)
    return table / max(float(table.sum()), 1e-12)


def one_way_release(counts: list[torch.Tensor], *, epsilon: float, seed: int) -> list[torch.Tensor]:
    """Each column's counts plus Gaussian noise of one release of all C one-way tables (replace-one: √(2C))."""
    from swflow.privacy.mechanisms import analytic_gaussian_multiplier

    sigma = analytic_gaussian_multiplier(epsilon=epsilon, delta=DELTA) * np.sqrt(2 * len(counts))
    generator = torch.Generator().manual_seed(seed)
    return [law(c + sigma * torch.randn(len(c), generator=generator, dtype=torch.float64)) for c in counts]


def decompose(syn, private, *, epsilon: float, seed: int = 0) -> dict[str, float]:
    """The mean two-way and one-way TVDs of the module docstring, for a fitted TableSynthesizer ``syn``."""
    from swflow.privacy.marginals import split_tables
    from swflow.tables.shrinkage import pooled_laws, shrunk_tables

    sizes, report = syn.codec.sizes, syn.privacy_report()
    cells = torch.from_numpy(syn.codec.cell_index(syn.schema.check(private, clip=True))).long()
    n, columns = len(cells), len(sizes)

    def exact(i: int, j: int) -> torch.Tensor:
        table = torch.zeros(sizes[i], sizes[j], dtype=torch.float64)
        return table.index_put_((cells[:, i], cells[:, j]), torch.ones(n, dtype=torch.float64), accumulate=True) / n

    tables = split_tables(syn._counts, sizes, syn.pairs)
    priors = [None if p is None else torch.from_numpy(p) for p in syn.codec.priors()]
    shrunk = shrunk_tables(tables, sizes, syn.pairs, noise_std=report.noise_std, dataset_size=report.dataset_size,
                           priors=priors)
    pooled = pooled_laws(tables, sizes, syn.pairs)
    particles = [p.to(torch.float64) for p in syn._particles]
    own = [p.mean(0) for p in particles]
    laws = [torch.bincount(cells[:, j], minlength=sizes[j]).to(torch.float64) / n for j in range(columns)]
    released = one_way_release([m * n for m in laws], epsilon=epsilon, seed=seed)

    def joint(i, j):
        return particles[i].T @ particles[j] / len(particles[i])

    measured = set(syn.pairs)
    others = [p for p in itertools.combinations(range(columns), 2) if p not in measured]
    rng = np.random.default_rng(seed)
    others = [others[k] for k in rng.choice(len(others), size=min(OTHER_PAIRS, len(others)), replace=False)]
    ways = {"particles": joint, "particles' laws": lambda i, j: torch.outer(own[i], own[j]),
            "independent columns": lambda i, j: torch.outer(released[i], released[j]),
            "particles' links on its laws": lambda i, j: joint(i, j) - torch.outer(own[i], own[j])
            + torch.outer(released[i], released[j])}
    out = {"measured: raw": np.mean([tvd(law(t), exact(i, j)) for (i, j), t in zip(syn.pairs, tables)]),
           "measured: shrunk": np.mean([tvd(law(t), exact(i, j)) for (i, j), t in zip(syn.pairs, shrunk)]),
           "measured: independence, pooled laws": np.mean([tvd(torch.outer(pooled[i], pooled[j]).double(),
                                                                exact(i, j)) for i, j in syn.pairs])}
    for where, pairs in (("measured", syn.pairs), ("others", others)):
        if not pairs:  # every pair measured
            continue
        for label, way in ways.items():
            out[f"{where}: {label}"] = np.mean([tvd(way(i, j), exact(i, j)) for i, j in pairs])
    out.update({"one-way: particles": np.mean([tvd(own[j], laws[j]) for j in range(columns)]),
                "one-way: pooled laws": np.mean([tvd(pooled[j].double(), laws[j]) for j in range(columns)
                                                 if pooled[j] is not None]),
                "one-way: independent columns": np.mean([tvd(released[j], laws[j]) for j in range(columns)])})
    return {key: float(value) for key, value in out.items()}


def main(argv=None) -> None:
    from swflow import Synthesizer

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", default="caravan")
    p.add_argument("--epsilon", type=float, default=1.0)
    p.add_argument("--target", help="the column named as target= (default: none)")
    p.add_argument("--seed", type=int, default=0,
                   help="the particles' and the one-way release's seed (the run's noise is the OS's)")
    p.add_argument("--data-dir", default=str(HERE.parent / "data" / "tables"))
    p.add_argument("--smoke", action="store_true", help="the made-up example table, 800 rows, 50 steps (CI)")
    args = p.parse_args(argv)
    settings = {}
    if args.smoke:
        from swflow.tables import example_table

        private, schema = example_table(800, seed=0)
        settings = {"steps": 50}
    else:
        private, _, schema = read(args.table, Path(args.data_dir))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a small table's warnings are the run's own; the numbers are the point
        syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=args.epsilon, delta=DELTA, clip=True,
                          seed=args.seed, target=args.target, **settings).fit(private)
    report = syn.privacy_report()
    print(f"{args.table if not args.smoke else 'example'}  eps {args.epsilon:g}  target {args.target}  "
          f"K {len(syn.pairs)}  sigma {report.noise_std:.1f}  n {report.dataset_size}")
    for key, value in decompose(syn, private, epsilon=args.epsilon, seed=args.seed).items():
        print(f"  {key:44} {value:.4f}")


if __name__ == "__main__":
    main()
