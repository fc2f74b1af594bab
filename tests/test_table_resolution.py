"""Resolution that follows the data (issue 58): the fine one-way release, the cells it sets, its accounting with the
pair tables, its read-back and its audit. References are independent: brute force, numpy's quantiles and least
squares, dp-accounting's PLD, Monte Carlo with stated tolerances."""
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

from swflow.privacy.oneway import Tree, fit_tree, level_counts, split_levels, verify_levels
from swflow.privacy.verify import ClaimMismatch
from swflow.tables import Schema
from swflow.tables.cells import FineGrid
from swflow.tables.resolution import column_cells, fine_weights


# -- the release ---------------------------------------------------------------------------------------------------------
def test_replacing_one_record_moves_the_levels_by_at_most_sqrt_2_levels():
    """Brute force over random neighbours: the ℓ2 change of every released level count is at most √(2·Σ L), and
    reached (a record moved between fine cells that share no node)."""
    trees = [Tree.for_cells(1024, flat=False), Tree.for_cells(7, flat=True), Tree.for_cells(50, flat=False)]
    rng = np.random.default_rng(0)
    base = torch.from_numpy(np.stack([rng.integers(0, t.cells, 200) for t in trees], axis=1))
    bound = math.sqrt(2 * sum(t.levels for t in trees))
    largest = 0.0
    for _ in range(300):
        other = base.clone()
        other[rng.integers(200)] = torch.tensor([rng.integers(0, t.cells) for t in trees])
        largest = max(largest, float((level_counts(other, trees) - level_counts(base, trees)).double().norm()))
    first, last = base.clone(), base.clone()
    first[0], last[0] = torch.zeros(3, dtype=torch.long), torch.tensor([t.cells - 1 for t in trees])
    reached = float((level_counts(first, trees) - level_counts(last, trees)).double().norm())
    assert largest <= bound + 1e-12 and reached == pytest.approx(bound)
    for level_sums in split_levels(level_counts(base, trees).double(), trees):  # every level counts every record
        assert all(float(level.sum()) == 200 for level in level_sums)


def _node(leaves: np.ndarray, tree: Tree, level: int) -> np.ndarray:
    """The level-``level`` node of each fine cell, written out: b^(L − level) consecutive cells a node."""
    return leaves // tree.branching ** (tree.levels - level) if tree.levels > 1 else leaves


def _dense_least_squares(noisy: np.ndarray, tree: Tree, total: float | None) -> np.ndarray:
    """numpy's least squares on the tree's full design matrix (every released node the sum of its fine cells), the
    sum constraint eliminated by hand (x_last = total − Σ the others)."""
    leaves = np.arange(tree.cells)
    design = np.concatenate([np.eye(tree.nodes(level))[_node(leaves, tree, level)].T
                             for level in range(1, tree.levels + 1)])
    if total is None:
        return np.linalg.lstsq(design, noisy, rcond=None)[0]
    reduced = design[:, :-1] - design[:, -1:]
    free, *_ = np.linalg.lstsq(reduced, noisy - total * design[:, -1], rcond=None)
    return np.append(free, total - free.sum())


@pytest.mark.parametrize("cells, flat", [(20, False), (300, False), (3, False), (7, True), (1000, False)])
def test_the_tree_fit_is_least_squares(cells, flat):
    """fit_tree's two passes against numpy's dense least squares, the sum fixed at n and free (add/remove), on
    4-ary trees with empty leaves past the last fine cell (20 of 64, 300 of 1 024), a one-level tree and a flat one;
    the residual sum of squares and its degrees of freedom alike."""
    tree = Tree.for_cells(cells, flat=flat)
    rng = np.random.default_rng(cells)
    exact = level_counts(torch.from_numpy(rng.integers(0, cells, 500))[:, None], [tree]).double()
    noisy = exact + torch.from_numpy(rng.normal(0, 3.0, exact.numel()))
    for total in (500, None):
        fitted, rss, dof = fit_tree(split_levels(noisy, [tree])[0], tree, total=total)
        reference = _dense_least_squares(noisy.numpy(), tree, total)
        assert np.allclose(fitted.numpy(), reference, atol=1e-8)
        nodes = [np.bincount(_node(np.arange(cells), tree, level), weights=reference, minlength=tree.nodes(level))
                 for level in range(1, tree.levels + 1)]
        assert rss == pytest.approx(float(((np.concatenate(nodes) - noisy.numpy()) ** 2).sum()), rel=1e-9)
        assert dof == tree.size - cells + (total is not None)
        if total is not None:
            assert fitted.sum() == pytest.approx(total)


def test_the_tree_fits_residual_is_chi_square():
    """The residual over σ² against χ² with its degrees of freedom (Monte Carlo: mean within 4 standard errors)."""
    tree = Tree.for_cells(20, flat=False)  # 3 levels of 4, 16, 64 nodes; 44 empty leaves
    rng = np.random.default_rng(1)
    exact = level_counts(torch.from_numpy(rng.integers(0, 20, 500))[:, None], [tree]).double()
    dof = tree.size - 20 + 1
    stats = []
    for seed in range(300):
        draw = exact + torch.from_numpy(np.random.default_rng(100 + seed).normal(0, 3.0, exact.numel()))
        stats.append(fit_tree(split_levels(draw, [tree])[0], tree, total=500)[1] / 9.0)
    assert abs(np.mean(stats) - dof) < 4 * math.sqrt(2 * dof / 300)


def test_cells_from_a_noiseless_fine_histogram_are_its_exact_quantiles():
    """Exact counts in: the fitted leaves are the counts, the weights follow them, and each cell ends at the fine
    cell holding the k/m quantile of the values (numpy's inverted-CDF quantile)."""
    column = Schema.from_json({"columns": [{"name": "x", "type": "numeric", "min": 0, "max": 1000}]}).columns[0]
    values = np.random.default_rng(2).lognormal(3, 1, 5000).clip(0, 1000)
    grid = FineGrid(column)
    fine = grid.index(pd.Series(values))
    tree = Tree.for_cells(grid.size, flat=False)
    levels = split_levels(level_counts(torch.from_numpy(fine)[:, None], [tree]).double(), [tree])[0]
    weights = fine_weights(levels, tree, total=5000)
    assert np.allclose(weights, np.bincount(fine, minlength=grid.size), atol=1e-6)
    m = 12
    cells = column_cells(column, weights, m)
    expected = [grid.index(pd.Series([np.quantile(values, k / m, method="inverted_cdf")]))[0] + 1
                for k in range(1, m)]
    assert sorted(set(cells.starts[1:-1].tolist())) == sorted(set(expected))
    counts = np.bincount(cells.index(pd.Series(values)), minlength=cells.size)
    assert counts.max() <= 5000 / m + np.bincount(fine).max()  # no cell holds more than its share and one fine cell


def test_levels_that_count_a_mass_of_their_own_keep_their_shape_scaled_to_the_records():
    """A unit's trees count each unit's rows by their spread (privacy.units.tree_weights), a mass other than the
    count of records n. With ``counts_total=False`` the weights are the exact fine counts' shape scaled to n; held at
    n instead, the least squares pull every level-1 node down alike, and a small node loses its mass."""
    rng = np.random.default_rng(5)
    fine = np.concatenate([rng.integers(0, 40, 3000), rng.integers(200, 256, 60)])  # a small pile far from the rest
    tree = Tree.for_cells(256, flat=False)
    exact = np.bincount(fine, minlength=256).astype(float)
    levels = split_levels(1.5 * level_counts(torch.from_numpy(fine)[:, None], [tree]).double(), [tree])[0]
    n = len(fine)
    free = fine_weights(levels, tree, total=n, counts_total=False)
    assert np.allclose(free, exact, atol=1e-6)
    held = fine_weights(levels, tree, total=n)
    assert held[200:].sum() < 0.5 * exact[200:].sum()


def test_a_cluster_below_two_sigma_keeps_part_of_its_mass_and_the_leak_is_bounded():
    """Noisy trees (σ = 40) of a column with 600 records in one slice and 60 (1.5σ) in a slice far away, 200 draws.
    Clipping the fitted counts at zero (no threshold) gives the small cluster's node a third of its mass on average
    (measured 19; a 2σ threshold gave 3: it read the cluster as noise and moved its records into the large one),
    and what it costs is bounded: the noise of the empty nodes draws under 30 % of the records into empty space
    (measured 19 %)."""
    tree = Tree.for_cells(1024, flat=False)
    fine = torch.cat([torch.full((600,), 100), torch.full((60,), 900)])[:, None]
    exact = level_counts(fine, [tree]).double()
    small, large = slice(896, 912), slice(96, 112)  # the clusters' level-3 nodes (16 fine cells each)
    kept, leaked = [], []
    for seed in range(200):
        noisy = exact + torch.from_numpy(np.random.default_rng(seed).normal(0, 40.0, exact.numel()))
        weights = fine_weights(split_levels(noisy, [tree])[0], tree, total=660)
        assert (weights >= 0).all() and weights.sum() == pytest.approx(660)
        kept.append(weights[small].sum())
        leaked.append(660 - weights[small].sum() - weights[large].sum())
    assert np.mean(kept) > 12 and np.mean(leaked) < 0.3 * 660


@pytest.mark.parametrize("counts, sigma", [([300.0, 120.0, 80.0, -10.0, 10.0], 30.0),
                                           ([25.0, 5.0, 18.0, 2.0, 9.0], 30.0)])
def test_a_flat_trees_split_is_shrunk_toward_even_by_james_steins_factor(counts, sigma):
    """One level of five categories: numpy's reference. The least-squares counts with their sum fixed at n are
    y + (n − Σy)/5; the clipped split moves toward 1/5 each by λ = max(0, 1 − 4σ² / Σ(fitted − n/5)²). The second
    case's departure is within the noise (λ = 0): every category gets n/5."""
    n, y = 500.0, np.array(counts)
    fitted = y + (n - y.sum()) / 5
    keep = max(0.0, 1 - 4 * sigma ** 2 / ((fitted - n / 5) ** 2).sum())
    clipped = fitted.clip(min=0) / fitted.clip(min=0).sum()
    expected = n * (0.2 + keep * (clipped - 0.2))
    got = fine_weights([torch.tensor(y)], Tree.for_cells(5, flat=True), total=n, noise_std=sigma)
    assert np.allclose(got, expected, atol=1e-9)
    assert np.allclose(fine_weights([torch.tensor(y)], Tree.for_cells(5, flat=True), total=n),
                       n * clipped, atol=1e-9)  # without a noise level: the clipped split as it is


def test_shrunk_splits_read_a_noisy_column_better_at_the_deciles_and_keep_a_pile():
    """3 000 records spread evenly over 1 024 fine cells and a pile of 600 on one, a 4-ary tree with noise σ = 40,
    200 draws. The weights' mass in the true deciles' ten bins (the scorer's reading) is off by a TVD of 0.054 with
    the clipped splits and 0.040 with them shrunk toward even (better in 88 % of draws); the pile keeps 86 % of its
    records on average (90 % unshrunk: clipping the noise of its empty neighbours takes some from both)."""
    tree = Tree.for_cells(1024, flat=False)
    rng = np.random.default_rng(0)
    fine = np.concatenate([rng.integers(0, 1024, 3000), np.full(600, 517)])
    exact = level_counts(torch.from_numpy(fine)[:, None], [tree]).double()
    truth = np.cumsum(np.bincount(fine, minlength=1024)) / len(fine)
    deciles = np.searchsorted(truth, np.arange(1, 10) / 10)

    def decile_tvd(weights):
        cdf = np.cumsum(weights) / weights.sum()
        return 0.5 * np.abs(np.diff(cdf[deciles], prepend=0, append=1) - np.diff(truth[deciles], prepend=0,
                                                                                   append=1)).sum()
    plain, shrunk, pile = [], [], []
    for seed in range(200):
        levels = split_levels(exact + torch.from_numpy(np.random.default_rng(seed).normal(0, 40.0, exact.numel())),
                              [tree])[0]
        plain.append(decile_tvd(fine_weights(levels, tree, total=3600)))
        weights = fine_weights(levels, tree, total=3600, noise_std=40.0)
        assert (weights >= 0).all() and weights.sum() == pytest.approx(3600)
        shrunk.append(decile_tvd(weights))
        pile.append(weights[517])
    assert np.mean(shrunk) < 0.85 * np.mean(plain) and np.mean(np.less(shrunk, plain)) > 0.7
    assert np.mean(pile) > 0.8 * 600


def test_values_on_a_declared_bound_come_back_exactly():
    """A real column piles up on its bounds (23 % of medexp's expenses are exactly 0). The fine grid keeps each bound
    as a cell of its own (an atom), so a private fit at eps = 2 returns the piles as the bounds themselves (before,
    none came back: the zeros were drawn uniformly inside the first slice). Where nothing was released the schema's
    equal bins still decode uniformly (KS test against uniform on the first bin)."""
    from scipy import stats

    from swflow import Synthesizer
    from swflow.tables.cells import ColumnCells

    schema = Schema.from_json({"columns": [
        {"name": "cost", "type": "numeric", "min": 0, "max": 50000},
        {"name": "g", "type": "categorical", "categories": ["a", "b"]}]})
    rng = np.random.default_rng(8)
    cost = rng.lognormal(7, 1.5, 4000).clip(1, 49999)
    cost[:1000], cost[1000:1400] = 0.0, 50000.0  # 25 % at the low bound, 10 % at the high one
    frame = pd.DataFrame({"cost": cost, "g": rng.choice(["a", "b"], 4000)})
    grid = FineGrid(schema.columns[0])
    fine = grid.index(frame["cost"])
    assert (fine[:1000] == 0).all() and (fine[1000:1400] == grid.values - 1).all()
    assert ((fine[1400:] > 0) & (fine[1400:] < grid.values - 1)).all()
    out = Synthesizer("dpswflow-hist", schema=schema, epsilon=2.0, delta=1e-6, steps=100).fit(frame).sample(8000)
    assert abs((out["cost"] == 0).mean() - 0.25) < 0.05 and abs((out["cost"] == 50000).mean() - 0.10) < 0.04
    assert out["cost"].between(0, 50000).all()
    bins = ColumnCells.uniform(schema.columns[0], bins=16)
    origin, width, _ = grid.slicing()
    upper = origin + (bins.starts[1] - 1) * width  # the first bin: the atom at 0 and the slices up to here
    first_bin = bins.draw(np.zeros(4000, dtype=np.int64), rng)
    assert stats.kstest(first_bin, stats.uniform(0, upper).cdf).pvalue > 1e-3 and (first_bin > 0).all()


@pytest.mark.parametrize("high", [18, 99_999])
def test_integer_columns_decode_to_whole_numbers_inside_their_bounds(high):
    """An integer column of 19 values (one fine cell each) and one of 10^5 (fine slices of 50 numbers): every
    sampled value whole and inside the bounds, after a private fit at eps = 1."""
    from swflow import Synthesizer

    schema = Schema.from_json({"columns": [
        {"name": "n", "type": "numeric", "min": 0, "max": high, "integer": True},
        {"name": "g", "type": "categorical", "categories": ["a", "b"]}]})
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"n": np.minimum(rng.geometric(0.2 if high < 100 else 1e-3, 3000), high),
                          "g": rng.choice(["a", "b"], 3000)})
    syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=1.0, delta=1e-6, steps=100).fit(frame)
    out = syn.sample(5000, seed=1)["n"].to_numpy()
    assert out.dtype.kind == "i" and out.min() >= 0 and out.max() <= high
    assert syn.privacy_report().run_config["resolution_columns"] == ["n"]


def test_an_integer_column_with_fractional_bounds_refuses_fractions_and_decodes_whole_numbers():
    """Issue 59: bounds 0.5 to 3.5 accepted 0.5 and 3.5 and counted them in the next column's block."""
    from swflow.tables import SchemaError, TableCodec

    schema = Schema.from_json({"columns": [
        {"name": "k", "type": "numeric", "min": 0.5, "max": 3.5, "integer": True},
        {"name": "g", "type": "categorical", "categories": ["a", "b"]}]})
    with pytest.raises(SchemaError, match="not whole numbers"):
        schema.check(pd.DataFrame({"k": [0.5, 2], "g": ["a", "b"]}))
    codec = TableCodec(schema)
    assert codec.sizes == [3, 2]  # 1, 2, 3
    frame = pd.DataFrame({"k": [1, 2, 3, 3], "g": ["a", "b", "a", "b"]})
    assert codec.cell_index(schema.check(frame)).tolist() == [[0, 0], [1, 1], [2, 0], [2, 1]]
    clipped = schema.check(pd.DataFrame({"k": [-4, 9], "g": ["a", "a"]}), clip=True)["k"].tolist()
    assert clipped == [1, 3]


def test_many_categories_keep_the_largest_and_split_the_rest_back_by_their_counts():
    column = Schema.from_json({"columns": [{"name": "c", "type": "categorical",
                                            "categories": [f"k{i}" for i in range(40)]}]}).columns[0]
    weights = np.arange(40, dtype=float)[::-1] ** 2  # k0 largest
    cells = column_cells(column, weights, 8)
    assert cells.size == 8
    assert [cells.index(pd.Series([f"k{i}"]))[0] for i in range(8)] == list(range(7)) + [7]
    drawn = cells.draw(np.full(20000, 7), np.random.default_rng(0))
    share = pd.Series(drawn).value_counts(normalize=True)
    expected = weights[7:] / weights[7:].sum()
    assert abs(share.get("k7", 0) - expected[0]) < 0.02 and set(share.index) <= {f"k{i}" for i in range(7, 40)}


def _areas_and_storms(rows: int, storms, rng):
    """(frame, schema): 40 areas drawn evenly, 300 storms (``storms``: each row's storm number), a price."""
    schema = Schema.from_json({"columns": [
        {"name": "area", "type": "categorical", "categories": [f"a{i}" for i in range(40)]},
        {"name": "storm", "type": "categorical", "categories": [f"s{i}" for i in range(300)]},
        {"name": "price", "type": "numeric", "min": 0, "max": 1000}]})
    return pd.DataFrame({"area": rng.choice([f"a{i}" for i in range(40)], rows), "storm": [f"s{i}" for i in storms],
                         "price": rng.uniform(0, 1000, rows)}), schema


def test_a_category_column_keeps_every_category_as_a_cell_up_to_the_cap():
    """Categories are not cut by the numbers' rule: 40 of them are 40 cells (no release spent on them), 300 are the
    255 largest by the released counts and one cell for the rest; the number keeps the rule's cells."""
    from swflow import Synthesizer
    from swflow.tables.resolution import MAX_CATEGORY_CELLS, cells_per_column

    rng = np.random.default_rng(0)
    frame, schema = _areas_and_storms(3000, rng.zipf(1.3, 3000) % 300, rng)
    syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=1.0, delta=1e-6, steps=5, n_particles=50).fit(frame)
    report = syn.privacy_report()
    run, pair_noise = report.run_config, report.ledger[0]["noise_std"]
    assert MAX_CATEGORY_CELLS == 256 and syn.codec.sizes[:2] == [40, 256]
    assert run["cells_per_column"][2] == cells_per_column(dataset_size=3000, pair_noise_std=pair_noise) < 40
    assert run["resolution_columns"] == ["storm", "price"]
    assert sorted(syn.sample(4000, seed=1)["area"].unique()) == sorted(f"a{i}" for i in range(40))


def test_past_the_cap_a_category_column_keeps_all_of_its_categories_where_the_noise_allows():
    """Past 256, all or nothing: every category a cell where n / (4·σ_pooled) reaches the categories (then no one-way
    release is spent on it), else the cap; the ceiling without noise."""
    from swflow import Synthesizer
    from swflow.tables.resolution import CATEGORY_CELLS_CEILING, category_cells, cells_of

    assert category_cells(dataset_size=36_710, pooled_noise_std=2.37) == int(36_710 / (4 * 2.37))  # 3 872
    assert category_cells(dataset_size=100, pooled_noise_std=0.0) == CATEGORY_CELLS_CEILING
    storm = Schema.from_json({"columns": [
        {"name": "storm", "type": "categorical", "categories": [f"s{i}" for i in range(300)]},
        {"name": "x", "type": "categorical", "categories": ["a", "b"]}]}).columns[0]
    assert cells_of(storm, 9, categories=300) == 300 and cells_of(storm, 9, categories=299) == 256
    assert cells_of(storm, 9) == 256

    rng = np.random.default_rng(0)
    frame, schema = _areas_and_storms(20_000, rng.integers(0, 300, 20_000), rng)
    syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=10.0, delta=1e-6, steps=5, n_particles=50).fit(frame)
    pair_noise = syn.privacy_report().ledger[-1]["noise_std"]
    assert 20_000 / (4 * pair_noise / np.sqrt(2)) > 3 * 300  # far past the categories, whatever the split
    assert syn.codec.sizes[:2] == [40, 300]
    assert syn.privacy_report().run_config["resolution_columns"] == ["price"]  # no release for the storms


# -- accounting ----------------------------------------------------------------------------------------------------------
def test_two_gaussian_releases_compose_as_dp_accountings_pld_says():
    """The composed Gaussian account (GDP: 1/z² adds) against dp-accounting's PLD of the two Gaussians composed."""
    import dp_accounting as dpa
    from dp_accounting.pld import pld_privacy_accountant

    from swflow.privacy.accountants import accountant_for, epsilon_from_events
    from swflow.privacy.ledger import MechanismEvent

    def event(z, k):
        return MechanismEvent(noise_multiplier=z, noise_std=z * math.sqrt(2 * k), sensitivity=math.sqrt(2 * k),
                              sensitivity_bound="histogram", delta_sensitivity=0.0, sampling="none", sample_size=1000,
                              dataset_size=1000, n_projections=k)
    events = (event(3.0, 10), event(1.4, 45))
    ours = epsilon_from_events(events, delta=1e-6, adjacency="replace-one")
    pld = pld_privacy_accountant.PLDAccountant(neighboring_relation=dpa.NeighboringRelation.ADD_OR_REMOVE_ONE,
                                               value_discretization_interval=1e-4)
    pld.compose(dpa.GaussianDpEvent(3.0)).compose(dpa.GaussianDpEvent(1.4))
    assert ours == pytest.approx(pld.get_epsilon(1e-6), rel=2e-3)
    assert "composed" in accountant_for(events, adjacency="replace-one").name
    discrete = epsilon_from_events(tuple(replace(e, mechanism="discrete-gaussian") for e in events), delta=1e-6,
                                   adjacency="replace-one")
    assert ours <= discrete <= ours * 1.02  # the discrete Gaussian costs a hair more, never less


@pytest.mark.parametrize("count_noise", ["gaussian", "discrete-gaussian"])
def test_a_split_budget_meets_its_target_and_splits_rho(count_noise):
    from swflow.privacy import PrivacySpec, ReleasePlan
    from swflow.privacy.accountants import epsilon_from_events
    from swflow.privacy.calibrate import calibrate_shares, plan_events

    spec = PrivacySpec(epsilon=1.0, delta=1e-9, count_noise=count_noise)
    plans = tuple(ReleasePlan(releases=1, dataset_size=10_000, sample_size=None, n_projections=k, dim=3,
                              noise=count_noise) for k in (15, 36))
    fine, pairs = calibrate_shares(spec, plans, (0.15, 0.85))
    assert fine.noise_multiplier / pairs.noise_multiplier == pytest.approx(math.sqrt(0.85 / 0.15))
    events = tuple(plan_events(c.plan, adjacency="replace-one", multiplier=c.noise_multiplier, bound="histogram",
                               delta_theta=0.0)[0] for c in (fine, pairs))
    eps = epsilon_from_events(events, delta=1e-9, adjacency="replace-one")
    assert 0.995 <= eps <= 1.0 and fine.epsilon == eps
    with pytest.raises(ValueError, match="add up to 1"):
        calibrate_shares(spec, plans, (0.2, 0.5))


# -- read-back -----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from swflow import Synthesizer
    from swflow.tables import example_table

    frame, schema = example_table(3000)
    syn = Synthesizer("dpswflow-hist", schema=schema, epsilon=2.0, delta=1e-6, steps=100,
                      count_noise="gaussian").fit(frame)
    path = syn.save(tmp_path_factory.mktemp("saved") / "table.pt")
    return syn, path


def test_the_two_release_ledger_is_re_derived_on_load(saved):
    from swflow.pipeline.tables import TableSynthesizer

    syn, path = saved
    report = syn.privacy_report()
    assert len(report.ledger) == 2 and report.ledger[1]["n_projections"] > 0 and report.epsilon <= 2.0
    assert "resolution release" in report.notes["budget_split"] and "THEN" in report.notes["release"]
    loaded = TableSynthesizer.load(path)
    assert loaded.codec.sizes == syn.codec.sizes
    assert loaded.sample(50, seed=3).equals(syn.sample(50, seed=3))


def _blob(path):
    return torch.load(path, weights_only=True)


def _claim_more_noise_in_the_levels(blob, factor):
    """The self-consistent forgery: the resolution event's σ claimed ×factor, ε and the statement recomputed."""
    from swflow.privacy import PrivacyReport
    from swflow.privacy.accountants import accountant_for, epsilon_from_events
    from swflow.privacy.ledger import MechanismEvent
    from swflow.privacy.report import statement

    report = PrivacyReport.from_json(blob["report"])
    ledger = [dict(e) for e in report.ledger]
    ledger[1].update(noise_multiplier=ledger[1]["noise_multiplier"] * factor,
                     noise_std=ledger[1]["noise_std"] * factor)
    events = tuple(MechanismEvent(**e) for e in ledger)
    eps = epsilon_from_events(events, delta=report.delta_accountant, adjacency=report.adjacency)
    name = accountant_for(events, adjacency=report.adjacency).name
    forged = replace(report, ledger=ledger, epsilon=eps, target_epsilon=eps,
                     statement=statement(eps, report.delta, name, report.adjacency))
    return {**blob, "report": forged.to_json(), "privacy": {**blob["privacy"], "epsilon": eps}}


@pytest.mark.parametrize("forgery", ["claim more noise in the levels", "edited levels",
                                     "no resolution event", "other cells recorded"])
def test_a_forged_resolution_release_is_refused(saved, tmp_path, forgery):
    from swflow.pipeline.tables import TableSynthesizer

    _, path = saved
    blob = _blob(path)
    if forgery == "claim more noise in the levels":
        blob = _claim_more_noise_in_the_levels(blob, 10.0)
    elif forgery == "edited levels":
        blob["measurements"]["one-way trees"] = blob["measurements"]["one-way trees"] * 1.2  # totals are not n
    elif forgery == "no resolution event":
        blob["report"] = {**blob["report"], "ledger": blob["report"]["ledger"][:1]}
    else:
        blob["report"] = {**blob["report"], "run_config": {**blob["report"]["run_config"], "cells": [2, 2, 2, 2, 2]}}
    torch.save(blob, tmp_path / "forged.pt")
    with pytest.raises(ClaimMismatch):
        TableSynthesizer.load(tmp_path / "forged.pt")


def test_released_levels_with_too_little_noise_are_refused():
    """verify_levels against exact counts plus a tenth of the claimed noise, and against honest draws."""
    tree = Tree.for_cells(1024, flat=False)
    rng = np.random.default_rng(4)
    exact = level_counts(torch.from_numpy(rng.integers(0, 300, 4000))[:, None], [tree]).double()
    honest = exact + torch.from_numpy(rng.normal(0, 5.0, exact.numel()))
    verify_levels(honest, [tree], sigma=5.0, dataset_size=4000, source="honest")
    with pytest.raises(ClaimMismatch, match="far less noise"):
        verify_levels(exact + torch.from_numpy(rng.normal(0, 0.5, exact.numel())), [tree], sigma=5.0,
                      dataset_size=4000, source="forged")
    with pytest.raises(ClaimMismatch, match="disagree"):
        verify_levels(honest, [tree], sigma=5.0, dataset_size=3000, source="another n")


# -- audit ---------------------------------------------------------------------------------------------------------------
def test_the_composed_release_audits_below_its_claim():
    from swflow.pipeline.audits import resolution_whitebox_audit

    honest = resolution_whitebox_audit(1.0, trials=2_000_000)
    assert 0.3 <= honest["audited_epsilon_lower_bound"] <= 1.0  # sees the release; never above the claim


@pytest.mark.parametrize("part", ["values", "levels", "tables"])
def test_each_release_audits_below_its_own_claim_and_above_it_with_half_its_noise(part):
    """Each release alone, against the ε its own ledger event gives at a composed ε = 2 (the library's split): at or
    below it with the calibrated noise, above it with half."""
    from swflow.pipeline.audits import resolution_whitebox_audit

    honest = resolution_whitebox_audit(2.0, trials=2_000_000, part=part)
    assert honest["audited_epsilon_lower_bound"] <= honest["claimed_epsilon"] < 2.0
    halved = resolution_whitebox_audit(2.0, trials=2_000_000, part=part, halve=part)
    assert halved["audited_epsilon_lower_bound"] > halved["claimed_epsilon"]


def test_a_discrete_release_relabelled_or_edited_off_the_integers_is_refused():
    """Issue 59: a discrete-Gaussian release relabelled as float Gaussian passed; counts that are not whole numbers
    cannot come from the discrete mechanism, in the pair tables or in the levels."""
    from swflow.privacy.counts import check_integers

    check_integers(torch.tensor([3.0, -2.0]), "discrete-gaussian", source="honest")
    check_integers(torch.tensor([3.5]), "gaussian", source="float")
    with pytest.raises(ClaimMismatch, match="not whole numbers"):
        check_integers(torch.tensor([3.0, 2.25]), "discrete-gaussian", source="edited")
    tree = Tree.for_cells(16, flat=False)
    exact = level_counts(torch.arange(16)[:, None], [tree]).double()
    with pytest.raises(ClaimMismatch, match="not whole numbers"):
        verify_levels(exact + 0.5, [tree], sigma=1.0, dataset_size=16, source="x", mechanism="discrete-gaussian")


def test_a_one_column_table_says_what_is_wrong():
    from swflow import Synthesizer

    with pytest.raises(ValueError, match="at least 2 columns"):
        Synthesizer("dpswflow-hist", epsilon=1.0, schema={"columns": [
            {"name": "x", "type": "numeric", "min": 0, "max": 1}]})


def test_particles_in_a_file_are_never_read_they_are_refitted_to_the_release(saved, tmp_path):
    """Issue 59: particles replaced by the private records passed the read-back and were sampled under the run's
    claim. load refits them from the release: the particles a file stores (its fit's own, which verify compares
    with the refit and a signature or this machine's verify may vouch for: issue 96) are not read, so private records
    put there are ignored, and the refit samples what the fitted Synthesizer samples."""
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import example_table

    syn, path = saved
    blob = _blob(path)
    assert all(torch.equal(a, b) for a, b in zip(blob["particles"], syn._particles))  # the fit's own
    private, _ = example_table(3000)
    cells = torch.from_numpy(syn.codec.cell_index(syn.schema.check(private)))
    blob["particles"] = [torch.nn.functional.one_hot(cells[:, j], k).float() for j, k in enumerate(syn.codec.sizes)]
    torch.save(blob, tmp_path / "forged.pt")
    loaded = TableSynthesizer.load(tmp_path / "forged.pt")
    assert all(torch.equal(a, b) for a, b in zip(loaded._particles, syn._particles))
    assert not any(torch.equal(a, b) for a, b in zip(loaded._particles, blob["particles"]))


def test_declared_decimals_come_back_as_written():
    """Issue 59: floats came back with 16 digits. With "decimals": 2 a column on [0, 10] has one fine cell per value
    written with two places (1 001 of them), so atoms such as the bound 10 come back exact; on wide bounds the fine
    slices decode to values rounded to two places, inside the bounds."""
    from swflow import Synthesizer
    from swflow.tables import SchemaError

    schema = Schema.from_json({"columns": [
        {"name": "visib", "type": "numeric", "min": 0, "max": 10, "decimals": 2},
        {"name": "cost", "type": "numeric", "min": 0, "max": 100000, "decimals": 2},
        {"name": "g", "type": "categorical", "categories": ["a", "b"]}]})
    assert FineGrid(schema.columns[0]).whole and FineGrid(schema.columns[0]).values == 1001
    assert not FineGrid(schema.columns[1]).whole
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"visib": rng.choice([10.0, 0.06, 2.5, 9.99], 4000, p=[0.7, 0.1, 0.1, 0.1]),
                          "cost": np.round(rng.lognormal(5, 2, 4000).clip(0, 100000), 2),
                          "g": rng.choice(["a", "b"], 4000)})
    grid = FineGrid(schema.columns[0])
    assert np.array_equal(grid.draw(grid.index(frame["visib"]), rng), frame["visib"].to_numpy())
    out = Synthesizer("dpswflow-hist", schema=schema, epsilon=2.0, delta=1e-6, steps=100).fit(frame).sample(4000)
    assert set(np.unique(out["visib"])) <= {10.0, 0.06, 2.5, 9.99} | set(np.round(np.arange(0, 1001) / 100, 2))
    assert (out["visib"] == 10.0).mean() > 0.5  # the atom at the bound comes back as itself
    assert np.allclose(out["cost"], np.round(out["cost"], 2)) and out["cost"].between(0, 100000).all()
    for bad in (-1, 2.5, True, "2"):
        with pytest.raises(SchemaError, match="decimals"):
            Schema.from_json({"columns": [{"name": "x", "type": "numeric", "min": 0, "max": 1, "decimals": bad}]})
    with pytest.raises(SchemaError, match="decimals"):
        Schema.from_json({"columns": [{"name": "x", "type": "numeric", "min": 0, "max": 9, "integer": True,
                                       "decimals": 1}]})


def test_conditional_samples_hold_the_condition_and_follow_the_particles_law(saved, tmp_path, capsys):
    """Issue 59: sample(n, conditions=...) and `swflow sample RUN --where`. Every record holds the condition; another
    column's frequencies match the particles' conditional law computed by hand (Monte Carlo, 4 standard errors);
    values the schema does not allow, and conditions without support, are refused."""
    syn, _ = saved
    frame = syn.sample(20_000, seed=2, conditions={"sector": "self"})
    assert (frame["sector"] == "self").all() and len(syn.schema.check(frame)) == 20_000
    j, k = syn.schema.names.index("sector"), syn.schema.names.index("income")
    cell = int(syn.codec.cells[j].index(pd.Series(["self"]))[0])
    weight = syn._particles[j][:, cell].double()
    expected = (weight[:, None] * syn._particles[k].double()).sum(0) / weight.sum()  # P(income cell | self-employed)
    got = np.bincount(syn.codec.cells[k].index(frame["income"]), minlength=len(expected)) / len(frame)
    assert np.all(np.abs(got - expected.numpy()) < 4 * np.sqrt(expected.numpy() * (1 - expected.numpy()) / 20_000)
                  + 1e-9)
    with pytest.raises(ValueError, match="not a value the schema allows"):
        syn.sample(10, conditions={"sector": "X"})
    with pytest.raises(ValueError, match="a column of the schema"):
        syn.sample(10, conditions={"nope": 1})
    from swflow.tables.flow import sample_cells

    dead = [p.clone() for p in syn._particles]
    dead[j][:, cell] = 0.0
    with pytest.raises(ValueError, match="no support"):
        sample_cells(dead, 10, conditions={j: cell})


def test_swflow_sample_where_writes_conditioned_records(tmp_path, capsys):
    from swflow.cli import main
    from swflow.tables import example_table

    frame, schema = example_table(1500)
    frame.to_csv(tmp_path / "private.csv", index=False)
    schema.write(tmp_path / "schema.json")
    assert main(["generate", "--table", str(tmp_path / "private.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--method", "dpswflow-hist", "--epsilon", "2", "--delta", "1e-6", "--steps", "100", "--quiet",
                 "--out", str(tmp_path / "run")]) == 0
    assert main(["sample", str(tmp_path / "run"), "--n", "200", "--where", "sector=public", "--where", "age=40",
                 "--out", str(tmp_path / "more"), "--quiet"]) == 0
    more = pd.read_csv(tmp_path / "more" / "samples.csv")
    assert (more["sector"] == "public").all() and (more["age"] == 40).all() and len(more) == 200
    assert main(["sample", str(tmp_path / "run"), "--n", "5", "--where", "sector=other", "--out",
                 str(tmp_path / "bad")]) == 2
    assert "declares the categories" in capsys.readouterr().err


def test_the_proposer_declares_missing_numbers_and_keeps_numbers_numeric():
    """Issue 59: a numeric public column with a missing value was refused with advice that then failed; raising
    max_categories turned numbers into categories (the threshold was max_categories // 4); empty public rows gave an
    unrelated message."""
    from swflow.tables import SchemaError

    rng = np.random.default_rng(6)
    public = pd.DataFrame({"income": np.where(rng.uniform(size=500) < 0.1, np.nan, rng.lognormal(8, 1, 500)),
                           "kids": rng.integers(0, 5, 500)})
    for max_categories in (64, 1000):
        schema = Schema.propose(public, max_categories=max_categories)
        income = schema.columns[0]
        assert income.kind == "numeric" and income.missing and not income.integer
        assert schema.columns[1].kind == "categorical"
        assert len(schema.check(public)) == 500
    with pytest.raises(SchemaError, match="empty"):
        Schema.propose(public.iloc[:0])


def test_the_help_of_every_command_loads_no_torch():
    """The wheel check found a table flag that imported torch to print --help: each command's help stays light."""
    import subprocess
    import sys

    probe = ("import sys\nfrom swflow.cli import main\nfor command in ('generate', 'sample', 'evaluate', 'schema'):\n"
             "    try:\n        main([command, '--help'])\n    except SystemExit:\n        pass\n"
             "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"
