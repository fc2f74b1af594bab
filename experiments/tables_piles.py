"""Piles beside a rare class (issue 94): the share of each class's samples on the pile, against held-out rows.

A made-up table of 15 000 rows (10 000 private, 5 000 held out): `y` negative 92 % / positive 6 % / invalid 2 %;
`x` numeric on [0, 45] with 2 decimals and missing allowed, exactly on the pile for every negative (45, the
maximum; 0, the minimum; or 20, inside the range), spread beside it for the positives, missing for three invalids
in four; 16 more columns unrelated to `y`. Released with `target="y"` at each ε. Beside the shares, the AUC of a
classifier trained on the samples, and on the private rows, predicting a positive `y` on the held-out rows (the
scorer of swflow.tables.metrics, whose bins keep a pile apart). The issue's bars: each class's share within 0.10 of the
held-out share at ε = 10 (0.20 at ε = 1), the AUC within 0.05 of the private rows' (0.10). The table in
docs/tables-design.md ("Piles") came from

    python experiments/tables_piles.py --where max min inside --epsilons 1 10 --seeds 0 1
"""
from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import pandas as pd

PILES = {"max": 45.0, "min": 0.0, "inside": 20.0}


def made_up(n: int, seed: int, where: str, *, others: int = 8) -> pd.DataFrame:
    """The table (module docstring): ``others`` category and gamma-number columns each beside ``y`` and ``x``."""
    rng = np.random.default_rng(seed)
    y = rng.choice(["negative", "positive", "invalid"], n, p=[0.92, 0.06, 0.02])
    beside = {"max": (30, 14, 44.9), "min": (15, 0.1, 31), "inside": (30, 20.1, 44.9)}[where]
    x = np.where(y == "negative", PILES[where], np.clip(rng.normal(beside[0], 7, n), *beside[1:]).round(2))
    x = np.where((y == "invalid") & (rng.uniform(size=n) < 0.75), np.nan, x)
    columns = {"y": y, "x": x}
    for j in range(others):
        columns[f"c{j}"] = rng.choice(list("abcde"), n)
        columns[f"g{j}"] = rng.gamma(2, 3, n).round(2).clip(0, 60)
    return pd.DataFrame(columns)


def schema_of(others: int = 8):
    from swflow.tables import Schema

    return Schema.from_json({"columns": [
        {"name": "y", "type": "categorical", "categories": ["negative", "positive", "invalid"]},
        {"name": "x", "type": "numeric", "min": 0, "max": 45, "missing": True, "decimals": 2}]
        + [c for j in range(others) for c in ({"name": f"c{j}", "type": "categorical", "categories": list("abcde")},
                                              {"name": f"g{j}", "type": "numeric", "min": 0, "max": 60,
                                               "decimals": 2})]})


def positive_last(others: int = 8):
    """The schema with `y`'s categories ordered so that the scorer's class (the last declared) is the positives."""
    from swflow.tables import Schema

    columns = schema_of(others).to_json()["columns"]
    columns[0] = {**columns[0], "categories": ["negative", "invalid", "positive"]}
    return Schema.from_json({"columns": columns})


def pile_shares(where: str, epsilon: float, seed: int, *, rows: int, others: int, steps: int | None) -> dict:
    """One cell: each class's share of rows on the pile, held out and in the samples; the classifiers' AUC."""
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables.metrics import efficacy

    table = made_up(rows + rows // 2, seed, where, others=others)
    private, held = table[:rows], table[rows:]
    options = {} if steps is None else {"steps": steps}
    syn = TableSynthesizer(schema=schema_of(others), epsilon=epsilon, delta=1e-9, target="y",
                           count_noise="gaussian", privacy_seed=seed, **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = syn.fit(private).sample(rows, seed=seed)
    pile = PILES[where]
    share = {f"{cls} {side}": float((frame.x[frame.y == cls] == pile).mean())
             for cls in ("negative", "positive") for side, frame in (("held out", held), ("samples", samples))}
    scorer = positive_last(others)
    auc = {f"AUC {name}": efficacy(scorer, frame, held, "y")["auc"] for name, frame in (("private", private),
                                                                                           ("samples", samples))}
    return {"where": where, "epsilon": epsilon, "seed": seed, **share, **auc}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--where", nargs="+", choices=tuple(PILES), default=["max"])
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--json", action="store_true", help="print one JSON list")
    p.add_argument("--smoke", action="store_true", help="1 000 rows, 2 more columns, 30 steps, eps 10 (CI)")
    args = p.parse_args()
    rows, others, steps = (1000, 1, 30) if args.smoke else (10_000, 8, None)
    epsilons, seeds = ([10.0], [0]) if args.smoke else (args.epsilons, args.seeds)
    cells = [pile_shares(where, eps, seed, rows=rows, others=others, steps=steps)
             for where in args.where for eps in epsilons for seed in seeds]
    if args.json:
        print(json.dumps(cells))
        return
    for cell in cells:
        print(f"pile at {cell['where']:<6} eps {cell['epsilon']:>4g} seed {cell['seed']}: "
              + "; ".join(f"{k} {'n/a' if v is None else f'{v:.3f}'}" for k, v in cell.items()
                          if k not in ("where", "epsilon", "seed")))


if __name__ == "__main__":
    main()
