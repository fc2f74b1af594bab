"""Piles keep their neighbours apart (issue 94): a value that holds a large share of a column is a cell of its own,
cut on both sides, wherever it sits, so a class beside it keeps a cell of its own and its link with the column."""
import warnings

import numpy as np
import pandas as pd
import pytest

from swflow.pipeline.tables import TableSynthesizer
from swflow.tables import Schema
from swflow.tables.cells import FineGrid
from swflow.tables.resolution import column_cells

X = {"name": "x", "type": "numeric", "min": 0, "max": 45, "decimals": 2}


@pytest.mark.parametrize("where", ["top", "bottom", "inside"])
@pytest.mark.parametrize("cells", [2, 3, 8])
def test_a_pile_is_a_cell_of_its_own_cut_on_both_sides(where, cells):
    """Fine weights with 93 % of the mass on one fine cell: no cell holds the pile and anything else, and each side
    of it that holds mass is in cells of its own."""
    grid = FineGrid(Schema.from_json({"columns": [X]}).columns[0])
    weights = np.zeros(grid.values)
    pile = {"top": grid.values - 1, "bottom": 0, "inside": grid.values // 2}[where]
    weights[:] = 0.07 / (grid.values - 1)
    weights[pile] = 0.93
    starts = column_cells(grid.column, weights, cells).starts
    assert pile in starts and (pile + 1 in starts or pile + 1 == grid.values), starts
    edges = list(starts) + ([grid.values] if starts[-1] != grid.values else [])
    holding = [(a, b) for a, b in zip(edges, edges[1:]) if a <= pile < b]
    assert holding == [(pile, pile + 1)]


def _table(n: int, seed: int) -> pd.DataFrame:
    """The issue's made-up table, smaller: y negative 92 % / positive 6 % / invalid 2 %; x exactly 45 for every
    negative, N(30, 7) in [14, 44.9] for positives, mostly missing for the invalid; two unrelated columns."""
    rng = np.random.default_rng(seed)
    y = rng.choice(["negative", "positive", "invalid"], n, p=[0.92, 0.06, 0.02])
    x = np.where(y == "negative", 45.0, np.clip(rng.normal(30, 7, n), 14, 44.9).round(2))
    x = np.where((y == "invalid") & (rng.uniform(size=n) < 0.75), np.nan, x)
    return pd.DataFrame({"y": y, "x": x, "c": rng.choice(list("abcde"), n), "g": rng.gamma(2, 3, n).round(2).clip(0, 60)})


def test_a_class_beside_a_pile_keeps_its_link_at_epsilon_10():
    """Before: x's cells were one, the pile and every value below it, and 89 % of the positives' samples sat on the
    pile where none of their rows do (the issue's table, ε = 10). Now the pile is a cell of its own and the positives
    keep theirs; with the target's coordinates fitted under Adam's shorter memory (flow.TARGET_BETAS) 0.04 of their
    samples land on the pile here (0.11 under the default memory: docs/tables-design.md, "Piles"), within the
    issue's bar of 0.10."""
    schema = Schema.from_json({"columns": [
        {"name": "y", "type": "categorical", "categories": ["negative", "positive", "invalid"]},
        {**X, "missing": True}, {"name": "c", "type": "categorical", "categories": list("abcde")},
        {"name": "g", "type": "numeric", "min": 0, "max": 60, "decimals": 2}]})
    private = _table(10_000, seed=3)
    syn = TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-9, target="y", count_noise="gaussian",
                           privacy_seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        samples = syn.fit(private).sample(10_000, seed=3)
    on_pile = samples.x == 45.0
    assert on_pile[samples.y == "positive"].mean() <= 0.1
    assert on_pile[samples.y == "negative"].mean() >= 0.9


def _pile_tables(seed: int):
    """Exact pair tables of 10 000 records like the issue's: y (negative 92 %, positive 6 %, invalid 2 %), x in three
    cells (below the pile, the pile, missing), every negative on the pile; two columns unrelated to either."""
    import torch

    from swflow.privacy.marginals import pair_counts, split_tables

    rng = np.random.default_rng(seed)
    y = rng.choice(3, 10_000, p=[0.92, 0.06, 0.02])
    x = np.where(y == 0, 1, np.where((y == 2) & (rng.uniform(size=10_000) < 0.75), 2, 0))
    sizes = [3, 3, 5, 6]
    pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
    cells = torch.from_numpy(np.stack([y, x, rng.integers(0, 5, 10_000), rng.integers(0, 6, 10_000)], axis=1))
    return split_tables(pair_counts(cells, sizes, pairs).double(), sizes, pairs), sizes, pairs


@pytest.mark.parametrize("seed", [0, 1])
def test_a_named_target_s_residue_leaves_the_pile(seed):
    """Fitted to exact tables, where no positive sits on the pile: the positives' mass that the particles leave on
    it, with the target named (its coordinates under Adam's shorter memory, flow.TARGET_BETAS) and without. Measured
    at 1 000 steps: about 0.02 named, 0.09-0.10 unnamed (a slow tail of the fit, not the tables)."""
    import swflow.tables.flow as flow

    tables, sizes, pairs = _pile_tables(seed)
    share = {}
    for target in (None, 0):
        particles = flow.fit_particles(tables, sizes, pairs, dataset_size=10_000, target=target)
        positive = particles[0][:, 1] @ particles[1]  # (3,): the positives' mass in each cell of x
        share[target] = float(positive[1] / positive.sum())
    assert share[0] < 0.05 < share[None], share
