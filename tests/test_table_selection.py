"""A wide table's pairs chosen privately (issue 94): the exponential mechanism's law, its score's sensitivity, its
accounting beside the Gaussian releases, and a run that finds the pairs the schema's order hides."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from swflow.privacy.selection import choose, dependence_scores, score_sensitivity

pytestmark = pytest.mark.filterwarnings("ignore:the noise")


def test_gumbel_top_two_is_two_rounds_of_the_exponential_mechanism():
    """The ordered pair kept from scores + Gumbel(2Δ/ε₀) has sequential exponential-mechanism probabilities:
    w_i / Σw, then w_j / (Σw − w_i), w = exp(ε₀·u / (2Δ)). χ² over 20 000 draws (12 ordered pairs)."""
    scores = torch.tensor([0.0, 1.0, 2.0, 4.0], dtype=torch.float64)
    multiplier, sensitivity = 2.0, 1.0  # ε₀ = 1, Gumbel scale 2
    w = np.exp(scores.numpy() / (multiplier * sensitivity))
    expected = {(i, j): w[i] / w.sum() * w[j] / (w.sum() - w[i]) for i, j in itertools.permutations(range(4), 2)}
    rng = np.random.default_rng(0)
    draws = 20_000
    counts = dict.fromkeys(expected, 0)
    for _ in range(draws):
        kept = choose(scores, 2, multiplier=multiplier, sensitivity=sensitivity,
                      uniforms=torch.from_numpy(rng.uniform(size=4)))
        counts[tuple(kept)] += 1
    keys = sorted(expected)
    result = stats.chisquare([counts[k] for k in keys], [draws * expected[k] for k in keys])
    assert result.pvalue > 1e-3, (counts, expected)


def _score(cells: np.ndarray, sizes: tuple[int, int]) -> float:
    table = np.zeros(sizes)
    np.add.at(table, (cells[:, 0], cells[:, 1]), 1)
    return float(dependence_scores([torch.from_numpy(table)], len(cells))[0])


def test_the_score_moves_at_most_its_sensitivity_under_every_replacement():
    """Every record of small random tables replaced by every other pair of cells: |u(D) − u(D')| ≤ 6 + 4/n, and
    some replacement moves it by more than the table's own 2 (the margins' product counts)."""
    rng = np.random.default_rng(1)
    largest = 0.0
    for n, sizes in [(3, (2, 2)), (5, (3, 2)), (8, (3, 3)), (12, (4, 2))]:
        for _ in range(20):
            cells = np.stack([rng.integers(0, sizes[0], n), rng.integers(0, sizes[1], n)], 1)
            base = _score(cells, sizes)
            for i in range(n):
                for a, b in itertools.product(range(sizes[0]), range(sizes[1])):
                    other = cells.copy()
                    other[i] = (a, b)
                    moved = abs(_score(other, sizes) - base)
                    assert moved <= score_sensitivity(n) + 1e-9
                    largest = max(largest, moved)
    assert largest > 2.0


def test_the_score_is_the_l1_distance_from_the_margins_product():
    table = torch.tensor([[3.0, 1.0], [0.0, 4.0]], dtype=torch.float64)  # n = 8, margins (4, 4) and (3, 5)
    product = np.outer([4, 4], [3, 5]) / 8
    assert float(dependence_scores([table], 8)[0]) == pytest.approx(np.abs(table.numpy() - product).sum())


def _wide(n: int = 1500, columns: int = 40, seed: int = 0):
    """A table of binary columns where column j and column j + 20 agree on 95 % of rows, and no column depends on
    its neighbours in the schema."""
    from swflow.tables import Schema

    rng = np.random.default_rng(seed)
    half = columns // 2
    first = rng.integers(0, 2, (n, half))
    second = np.where(rng.random((n, half)) < 0.05, 1 - first, first)
    values = np.concatenate([first, second], 1)
    frame = pd.DataFrame({f"c{j}": np.where(values[:, j] == 1, "b", "a") for j in range(columns)})
    schema = Schema.from_json({"columns": [{"name": f"c{j}", "type": "categorical", "categories": ["a", "b"]}
                                           for j in range(columns)]})
    return frame, schema, {(j, j + half) for j in range(half)}


def test_a_wide_run_finds_the_pairs_the_schema_order_hides_and_accounts_them(tmp_path):
    import dp_accounting as dpa
    from dp_accounting import rdp

    from swflow.pipeline.tables import TableSynthesizer

    frame, schema, planted = _wide()
    syn = TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-9, steps=20).fit(frame)
    assert len(planted & set(syn.pairs)) >= 18  # the neighbours' rule has none of them
    assert len(syn.pairs) == 2 * 39 and {(j, j + 1) for j in range(39)} <= set(syn.pairs)
    assert syn.pairs_chosen_by.startswith("a private choice: each column with the next")
    report = syn.privacy_report()
    choice = report.ledger[-1]
    assert (choice["mechanism"], choice["count"], choice["n_projections"]) == ("exponential", 39, 780 - 39)
    assert choice["noise_std"] == pytest.approx(choice["noise_multiplier"] * (6 + 4 / len(frame)))
    # the claim is dp-accounting's RDP of the ledger's events, composed here independently of swflow's adapters
    accountant = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    for event in report.ledger[:-1]:
        accountant.compose(dpa.GaussianDpEvent(event["noise_multiplier"]), event["count"])
    accountant.compose(dpa.ZCDpEvent((2 / choice["noise_multiplier"]) ** 2 / 8), choice["count"])
    assert report.epsilon == pytest.approx(accountant.get_epsilon(1e-9), rel=1e-9)
    assert 9.99 < report.epsilon <= 10.0
    # zCDP: the choice takes a tenth of ρ (each Gaussian release 1/(2z²), each round ε₀²/8)
    rho = [1 / (2 * e["noise_multiplier"] ** 2) * e["count"] for e in report.ledger]
    assert rho[-1] / sum(rho) == pytest.approx(0.1, rel=1e-6)
    path = syn.save(tmp_path / "model.pt")
    back = TableSynthesizer.load(path)
    assert back.pairs == syn.pairs and back.privacy_report().epsilon == report.epsilon


def test_an_edited_choice_is_refused_on_load(tmp_path):
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.privacy.verify import ClaimMismatch

    frame, schema, _ = _wide(n=800, columns=34)
    path = TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-9, steps=5).fit(frame).save(tmp_path / "m.pt")
    blob = torch.load(path, weights_only=True)
    numbers = blob["measurements"]
    unchosen = {name: number for name, number in numbers.items() if name != "choice of pairs"}
    for edit in ({"measurements": unchosen},
                 {"measurements": {**numbers, "choice of pairs": {**numbers["choice of pairs"], "rounds": 10}}},
                 {"pairs": blob["pairs"][:-1]}):
        torch.save({**blob, **edit}, tmp_path / "edited.pt")
        with pytest.raises(ClaimMismatch):
            TableSynthesizer.load(tmp_path / "edited.pt")


def test_the_choice_is_made_only_where_it_is_informative_and_covered():
    """At ε = 1 on 1 500 rows the Gumbel scale (about 1 000) is above a tenth of n: the neighbours are kept and the
    budget stays with the tables; under add-remove, or with pairs given, there is no choice either."""
    from swflow.pipeline.table_choice import selection_plan
    from swflow.pipeline.tables import TableSynthesizer

    frame, schema, _ = _wide()
    assert selection_plan(TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-9), 1500, sharded=False)
    assert selection_plan(TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-9), 1500, sharded=False) is None
    assert selection_plan(TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-9), 1500, sharded=True) is None
    assert selection_plan(TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-9, adjacency="add-remove"), 1500,
                          sharded=False) is None
    given = TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-9, pairs=[("c0", "c20")])
    assert selection_plan(given, 1500, sharded=False) is None
    narrow = TableSynthesizer(schema=schema, epsilon=10.0, delta=1e-9)
    narrow.schema = type(schema)(schema.columns[:32], ())
    assert selection_plan(narrow, 1500, sharded=False) is None  # 496 pairs: every pair
    many = [{"name": f"m{j}", "type": "categorical", "categories": [str(k) for k in range(300)]} for j in range(2)]
    giant = TableSynthesizer(schema={"columns": many + schema.to_json()["columns"]}, epsilon=10.0, delta=1e-9)
    assert selection_plan(giant, 1500, sharded=False) is None  # the spine's first table: 90 000 cells


def test_duckdb_makes_the_same_choice_as_pandas(tmp_path):
    """The candidates are counted where the rows live: for the same privacy seed, DuckDB's run chooses the pandas
    run's pairs and releases its counts."""
    pytest.importorskip("duckdb")
    from swflow.pipeline.tables import TableSynthesizer

    frame, schema, _ = _wide(n=1000, columns=34)
    frame.to_parquet(tmp_path / "t.parquet")
    settings = dict(schema=schema, epsilon=10.0, delta=1e-9, steps=5, count_noise="gaussian", privacy_seed=3)
    pandas_run = TableSynthesizer(**settings).fit(frame)
    duck_run = TableSynthesizer(**settings).fit(str(tmp_path / "t.parquet"), engine="duckdb")
    assert pandas_run.pairs == duck_run.pairs and pandas_run.pairs_chosen_by.startswith("a private choice")
    assert torch.equal(pandas_run._counts, duck_run._counts)
    assert math.isclose(pandas_run.privacy_report().epsilon, duck_run.privacy_report().epsilon)
