"""The pair tables' shrinkage toward independence (swflow.tables.shrinkage.shrunk_tables) and the switch that turns it
off."""
import numpy as np
import pytest
import torch


def _toward(estimate: np.ndarray, center: np.ndarray, noise_energy: float) -> np.ndarray:
    """The positive-part James–Stein estimate: center + max(0, 1 − noise_energy/‖estimate − center‖²)(…)."""
    departure = estimate - center
    return center + max(0.0, 1.0 - noise_energy / (departure ** 2).sum()) * departure


def _james_stein(table: np.ndarray, sigma: float, n: int) -> np.ndarray:
    """The positive-part James–Stein estimate of ONE table toward the product of its own margins over the public
    n (a table whose columns are in no other table pools nothing): P + max(0, 1 − cells·σ²/‖T − P‖²)(T − P)."""
    rows, cols = table.sum(axis=1).clip(min=0), table.sum(axis=0).clip(min=0)
    return _toward(table, np.outer(rows / rows.sum(), cols / cols.sum()) * n, table.size * sigma ** 2)


@pytest.mark.parametrize("strength", [0.0, 30.0, 400.0])  # no departure, one inside the noise, one far above it
def test_a_table_is_shrunk_by_the_james_stein_factor(strength):
    from swflow.tables.shrinkage import shrunk_tables

    rng = np.random.default_rng(0)
    truth = np.outer([0.5, 0.3, 0.2], [0.4, 0.3, 0.2, 0.1]) * 10_000 + strength * np.array(
        [[1, -1, 0, 0], [-1, 1, 0, 0], [0, 0, 0, 0]])
    noisy = truth + rng.normal(0, 20.0, truth.shape)
    got = shrunk_tables([torch.tensor(noisy)], [3, 4], [(0, 1)], noise_std=20.0, dataset_size=10_000)[0]
    np.testing.assert_allclose(got.numpy(), _james_stein(noisy, 20.0, 10_000), rtol=1e-9, atol=1e-9)
    unshrunk = shrunk_tables([torch.tensor(noisy)], [3, 4], [(0, 1)], noise_std=0.0, dataset_size=10_000)[0]
    np.testing.assert_array_equal(unshrunk.numpy(), noisy)  # no noise: nothing to shrink


def test_shrinkage_lowers_the_squared_error_of_independent_columns_over_noise_draws():
    """Monte Carlo, 300 draws: where the truth is independence, the shrunk tables are closer to it than the noisy
    ones (the James–Stein dominance; a shrinkage that pushed the wrong way, or not at all, fails)."""
    from swflow.tables.shrinkage import shrunk_tables

    rng = np.random.default_rng(1)
    truth = np.outer([0.6, 0.4], [0.25, 0.25, 0.25, 0.25]) * 4000
    raw, shrunk = [], []
    for _ in range(300):
        noisy = truth + rng.normal(0, 40.0, truth.shape)
        raw.append(((noisy - truth) ** 2).sum())
        out = shrunk_tables([torch.tensor(noisy)], [2, 4], [(0, 1)], noise_std=40.0, dataset_size=4000)[0]
        shrunk.append(((out.numpy() - truth) ** 2).sum())
    assert np.mean(shrunk) < 0.6 * np.mean(raw)


def test_shrink_false_fits_the_released_tables_as_they_are_and_survives_a_reload(tmp_path, monkeypatch):
    import swflow.pipeline.tables as tables_module
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import example_table

    frame, schema = example_table(800)
    calls = []
    original = tables_module.shrunk_tables
    monkeypatch.setattr(tables_module, "shrunk_tables", lambda *a, **k: calls.append(1) or original(*a, **k))
    TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-6, steps=20).fit(frame)
    assert calls, "the default fit shrinks the released tables"
    calls.clear()
    syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-6, steps=20, shrink=False).fit(frame)
    assert not calls and syn.privacy_report().run_config["shrink"] is False
    path = syn.save(tmp_path / "table.pt")
    loaded = TableSynthesizer.load(path)
    assert not calls and loaded.flow.shrink is False
    assert loaded.sample(50, seed=2).equals(syn.sample(50, seed=2))  # the same fit, refitted from the release
    with pytest.raises(ValueError, match="shrink is True or False"):
        TableSynthesizer(schema=schema, epsilon=1.0, shrink="no")


def test_the_command_line_fits_without_shrinkage_and_samples_the_run_alike(tmp_path, monkeypatch):
    import json

    import swflow.pipeline.tables as tables_module
    from swflow.cli import main
    from swflow.tables import example_table

    def refuse(*args, **kwargs):
        raise AssertionError("--no-shrink run shrank its tables")

    monkeypatch.setattr(tables_module, "shrunk_tables", refuse)
    frame, schema = example_table(600)
    frame.to_csv(tmp_path / "private.csv", index=False)
    schema.write(tmp_path / "schema.json")
    run = tmp_path / "run"
    assert main(["generate", "--table", str(tmp_path / "private.csv"), "--schema", str(tmp_path / "schema.json"),
                 "--epsilon", "1", "--delta", "1e-6", "--steps", "20", "--no-shrink", "--quiet",
                 "--out", str(run)]) == 0
    assert json.loads((run / "privacy.json").read_text())["run_config"]["shrink"] is False
    assert main(["sample", str(run), "--n", "20", "--out", str(tmp_path / "more")]) == 0  # refitted, unshrunk


def test_a_margin_with_a_prior_is_shrunk_toward_it_by_the_james_stein_factor():
    """A column given a prior has its one-way counts (a row sum of its one table carries the noise of the other
    column's cells: variance cols·σ²) shrunk toward the prior, by James–Stein's factor with rows − 2; the table's
    departure from its own margins' product is shrunk as without a prior, and added to the product of the shrunk
    margins. Recomputed here in numpy from the formula."""
    from swflow.tables.shrinkage import shrunk_tables

    rng = np.random.default_rng(3)
    n, sigma = 3000, 30.0
    interaction = 60.0 * np.array([[1, -1, 0], [-1, 1, 0], [0, 0, 0], [0, 0, 0]])
    noisy = np.outer([0.3, 0.27, 0.23, 0.2], [0.5, 0.25, 0.25]) * n + interaction + rng.normal(0, sigma, (4, 3))
    prior = np.array([0.25, 0.25, 0.25, 0.25])
    pooled_rows, cols = noisy.sum(axis=1).clip(min=0), noisy.sum(axis=0).clip(min=0)
    rows = _toward(noisy.sum(axis=1), prior * n, (4 - 2) * 3 * sigma ** 2).clip(min=0)
    assert not np.allclose(rows, pooled_rows, rtol=0.01) and not np.allclose(rows, prior * n, rtol=0.01)
    departure = noisy - np.outer(pooled_rows / pooled_rows.sum(), cols / cols.sum()) * n
    keep = 1.0 - noisy.size * sigma ** 2 / (departure ** 2).sum()
    assert 0 < keep < 1
    want = np.outer(rows / rows.sum(), cols / cols.sum()) * n + keep * departure
    got = shrunk_tables([torch.tensor(noisy)], [4, 3], [(0, 1)], noise_std=sigma, dataset_size=n,
                        priors=[torch.tensor(prior), None])[0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-9, atol=1e-9)


def test_a_near_uniform_margin_of_many_categories_is_shrunk_toward_its_prior_over_noise_draws():
    """Monte Carlo, 200 draws: a column of 160 categories of about 11 rows each (a school per category) in one pair
    table whose noise swamps its counts. With each category alike as its prior, the shrunk table's margin of that
    column is far closer to the truth than the noisy table's own margin (the pooled estimate, what the tables are
    shrunk toward without a prior): a margin left as noisy as it was released fails. A column far from its prior,
    above its noise, keeps its shape."""
    from swflow.tables.shrinkage import shrunk_tables

    rng = np.random.default_rng(2)
    schools = rng.integers(8, 15, 160).astype(float)
    truth = np.outer(schools, [0.5, 0.5])
    n, sigma, prior = int(truth.sum()), 38.0, [torch.full((160,), 1 / 160), None]
    raw, shrunk = [], []
    for _ in range(200):
        noisy = truth + rng.normal(0, sigma, truth.shape)
        out = shrunk_tables([torch.tensor(noisy)], [160, 2], [(0, 1)], noise_std=sigma, dataset_size=n,
                            priors=prior)[0].numpy()
        raw.append(((noisy.sum(axis=1) - schools) ** 2).sum())
        shrunk.append(((out.sum(axis=1) - schools) ** 2).sum())
    assert np.mean(shrunk) < 0.05 * np.mean(raw)

    skewed = np.outer([9000, 600, 300, 100], [0.5, 0.5])
    out = shrunk_tables([torch.tensor(skewed + rng.normal(0, 5.0, skewed.shape))], [4, 2], [(0, 1)],
                        noise_std=5.0, dataset_size=10_000, priors=[torch.full((4,), 0.25), None])[0].numpy()
    np.testing.assert_allclose(out.sum(axis=1), skewed.sum(axis=1), atol=40)


def test_a_noisy_margin_is_the_nearest_law_of_its_total_not_its_counts_clipped():
    """A column's pooled counts become a law by subtracting one level τ and clipping (the least-squares non-negative
    counts of the same total): τ checked against scipy's root of Σ max(c − τ, 0) = Σ c. Monte Carlo, 300 draws: 255
    small counts (18 each) beside one of 5 000, noise σ = 100 a count; their share of the law (0.479) is kept on
    average within 0.03 (its std over draws about 0.1, so five standard errors), where each count clipped at zero
    gives them about 0.7."""
    from scipy.optimize import brentq

    from swflow.tables.shrinkage import pooled_laws

    rng = np.random.default_rng(0)
    counts = rng.normal(5.0, 20.0, 40)
    law = pooled_laws([torch.tensor(np.c_[counts, np.zeros(40)])], [40, 2], [(0, 1)])[0].numpy()
    level = brentq(lambda t: np.clip(counts - t, 0, None).sum() - counts.sum(), counts.min() - 1, counts.max())
    want = np.clip(counts - level, 0, None)
    np.testing.assert_allclose(law, want / want.sum(), atol=1e-9)

    truth = np.r_[5000.0, np.full(255, 18.0)]
    projected, clipped = [], []
    for _ in range(300):
        noisy = truth + rng.normal(0, 100.0, truth.shape)
        law = pooled_laws([torch.tensor(np.c_[noisy / 2, noisy / 2])], [256, 2], [(0, 1)])[0].numpy()
        projected.append(law[1:].sum())
        clipped.append(noisy[1:].clip(min=0).sum() / noisy.clip(min=0).sum())
    share = truth[1:].sum() / truth.sum()
    assert abs(np.mean(projected) - share) < 0.03
    assert np.mean(clipped) > share + 0.15


def test_a_category_columns_rest_keeps_its_count_and_the_others_are_shrunk_at_what_it_leaves():
    """Monte Carlo, 300 draws: a column of 2 160 declared categories kept as 255 cells of 18 records each and a cell
    of the rest holding 5 000, in one table of noise σ = 70 a count (the 255 pure noise). With the rest's prior NaN,
    the shrunk margin keeps the 255 cells' share (0.479) within 0.01 on average and lies within 0.1 of the truth in
    TVD; with the rest given each category alike (1 905 / 2 160 of the mass), the share is pulled off and the TVD
    is above 0.25."""
    from swflow.tables.shrinkage import _margins

    rng = np.random.default_rng(1)
    truth = np.r_[5000.0, np.full(255, 18.0)]
    n = int(truth.sum())
    rest_free = torch.tensor(np.r_[np.nan, np.full(255, 1 / 2160)])
    rest_alike = torch.tensor(np.r_[1905 / 2160, np.full(255, 1 / 2160)])
    shares, errors = {"free": [], "alike": []}, {"free": [], "alike": []}
    for _ in range(300):
        noisy = np.outer(truth, [0.5, 0.5]) + rng.normal(0, 70.0, (256, 2))
        for name, prior in (("free", rest_free), ("alike", rest_alike)):
            law = _margins([torch.tensor(noisy)], [256, 2], [(0, 1)], noise_std=70.0, dataset_size=n,
                           priors=[prior, None])[1][0].numpy()
            shares[name].append(law[1:].sum())
            errors[name].append(0.5 * np.abs(law - truth / n).sum())
    assert abs(np.mean(shares["free"]) - truth[1:].sum() / n) < 0.01
    assert np.mean(errors["free"]) < 0.1 < 0.25 < np.mean(errors["alike"])


def test_the_codec_gives_each_category_alike_and_each_stretch_of_a_number_alike_as_its_prior():
    """A category column's prior holds each category alike, and none on its cell of the rest (NaN); a number's,
    each stretch of its declared bounds alike: checked against where uniform draws over the bounds fall (Monte
    Carlo, 200 000 draws: a share's std is at most 0.0012, the tolerance 0.005). A column that may be missing has
    none."""
    import pandas as pd

    from swflow.tables import Schema, TableCodec
    from swflow.tables.cells import ColumnCells, FineGrid

    schema = Schema.from_json({"columns": [
        {"name": "city", "type": "categorical", "categories": [f"c{i}" for i in range(10)]},
        {"name": "age", "type": "numeric", "min": 0, "max": 100},
        {"name": "income", "type": "numeric", "min": 0, "max": 1000, "missing": True}]})
    city = ColumnCells(FineGrid(schema.columns[0]), [0, 1, 2, 10], order=[3, 0, 1, 2, 4, 5, 6, 7, 8, 9])
    age_grid = FineGrid(schema.columns[1])
    third, half = age_grid.values // 3, age_grid.values // 2
    age = ColumnCells(age_grid, [0, 5, third, half, age_grid.values])  # unequal cells, as the trees set them
    codec = TableCodec(schema, cells=[city, age, ColumnCells.uniform(schema.columns[2], bins=16)])
    city_prior, age_prior, income_prior = codec.priors()
    np.testing.assert_allclose(city_prior, [0.1, 0.1, np.nan])  # the rest: the least counted, no law alike
    draws = pd.Series(np.random.default_rng(0).uniform(0, 100, 200_000))
    shares = np.bincount(age.index(draws), minlength=age.size) / len(draws)
    np.testing.assert_allclose(age_prior, shares, atol=0.005)
    assert age_prior.sum() == pytest.approx(1.0) and len(set(np.round(age_prior, 2))) == 4
    assert income_prior is None


def test_the_fit_gives_each_category_column_its_prior_and_two_categories_are_left_as_pooled(monkeypatch):
    """The fit passes the codec's priors (categories alike, a number's bounds alike); a column of two cells, whose
    James–Stein factor has cells − 2 = 0 in it, keeps its pooled margin however close to its prior it is."""
    import swflow.pipeline.tables as tables_module
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import example_table
    from swflow.tables.shrinkage import shrunk_tables

    frame, schema = example_table(800)
    seen = []
    original = tables_module.shrunk_tables
    monkeypatch.setattr(tables_module, "shrunk_tables", lambda *a, **k: seen.append(k["priors"]) or original(*a, **k))
    syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-6, steps=20).fit(frame)
    (priors,) = seen
    for column, prior, cells in zip(schema.columns, priors, syn.codec.cells):
        assert (prior is None) == cells.missing, column.name
        if prior is not None:
            assert len(prior) == syn.codec.sizes[schema.names.index(column.name)]
            assert float(prior.sum()) == pytest.approx(1.0)

    rng = np.random.default_rng(4)
    noisy = np.outer([0.5, 0.5], [0.3, 0.3, 0.4]) * 2000 + rng.normal(0, 30.0, (2, 3))
    got = shrunk_tables([torch.tensor(noisy)], [2, 3], [(0, 1)], noise_std=30.0, dataset_size=2000,
                        priors=[torch.tensor([0.5, 0.5]), None])[0]
    want = shrunk_tables([torch.tensor(noisy)], [2, 3], [(0, 1)], noise_std=30.0, dataset_size=2000)[0]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


# -- a third column's centre ------------------------------------------------------------------------------------------
def _linked_through_a_third(n: float):
    """Exact pair tables of three columns, i and j independent given k but far from independent: (i, j), (i, k),
    (j, k), each n · P, from P(i, j, k) = P(k) P(i | k) P(j | k)."""
    p_k = np.array([0.5, 0.3, 0.2])
    p_i = np.array([[0.7, 0.2, 0.1], [0.2, 0.6, 0.2], [0.1, 0.2, 0.7]])  # row c: P(i | k = c)
    p_j = np.array([[0.6, 0.3, 0.1, 0.0], [0.1, 0.2, 0.6, 0.1], [0.05, 0.05, 0.2, 0.7]])
    joint = np.einsum("c,ci,cj->ijc", p_k, p_i, p_j) * n
    return joint.sum(axis=2), joint.sum(axis=1), joint.sum(axis=0)  # (i, j), (i, k), (j, k)


def test_a_third_columns_centre_is_the_table_where_two_columns_are_independent_given_it():
    """Closed form: for exact tables of a law where i and j are independent given k, the centre computed from the
    (i, k) and (j, k) tables alone is the (i, j) table itself (numpy's sums of the law as the reference)."""
    from swflow.tables.shrinkage import _joint_law, conditional_centre

    ij, ik, jk = _linked_through_a_third(1000.0)
    laws = {(0, 2): _joint_law(torch.tensor(ik)), (1, 2): _joint_law(torch.tensor(jk))}
    centre = conditional_centre(laws, 0, 1, 2, torch.tensor(ij.sum(1) / 1000), torch.tensor(ij.sum(0) / 1000), 1000.0)
    np.testing.assert_allclose(centre.numpy(), ij, rtol=1e-9, atol=1e-9)
    assert conditional_centre(laws, 0, 1, 0, torch.ones(3) / 3, torch.ones(4) / 4, 1000.0) is None  # k is i
    assert conditional_centre({(0, 2): laws[(0, 2)]}, 0, 1, 2, torch.ones(3) / 3, torch.ones(4) / 4, 1.0) is None


def _shrunk_over_draws(ij, ik, jk, *, sigma: float, n: float, draws: int, seed: int, monkeypatch=None):
    """(the (i, j) table's squared errors shrunk, the same toward independence alone, whether the two differ) over
    noise draws of σ on every count."""
    import swflow.tables.shrinkage as shrinkage

    rng = np.random.default_rng(seed)
    errors, independent_errors, differ = [], [], []
    for _ in range(draws):
        noisy = [torch.tensor(t + rng.normal(0, sigma, t.shape)) for t in (ij, ik, jk)]
        args = (noisy, [3, 4, 3], [(0, 1), (0, 2), (1, 2)])
        got = shrinkage.shrunk_tables(*args, noise_std=sigma, dataset_size=n)[0].numpy()
        with monkeypatch.context() as patch:
            patch.setattr(shrinkage, "conditional_centre", lambda *a, **k: None)
            alone = shrinkage.shrunk_tables(*args, noise_std=sigma, dataset_size=n)[0].numpy()
        errors.append(((got - ij) ** 2).sum())
        independent_errors.append(((alone - ij) ** 2).sum())
        differ.append(not np.array_equal(got, alone))
    return np.array(errors), np.array(independent_errors), np.array(differ)


def test_a_table_linked_through_a_third_column_is_shrunk_toward_it_not_toward_independence(monkeypatch):
    """Monte Carlo, 200 draws of σ = 25 on tables of 3 000 records where i and j depend on each other only through
    k: shrunk toward k's centre, the (i, j) table's squared error is under 0.6 of what shrinking toward
    independence leaves (which keeps most of the noise, the departure from independence being real)."""
    ij, ik, jk = _linked_through_a_third(3000.0)
    errors, independent_errors, differ = _shrunk_over_draws(ij, ik, jk, sigma=25.0, n=3000.0, draws=200, seed=2,
                                                            monkeypatch=monkeypatch)
    assert differ.mean() > 0.9
    assert errors.mean() < 0.6 * independent_errors.mean()


def test_a_third_columns_centre_is_rarely_taken_where_independence_holds(monkeypatch):
    """Monte Carlo, 300 draws: where i, j and k are independent, k's centre (built from two noisy tables) is taken in
    place of independence only where it is nearer by more than twice its comparison's noise: a few per cent of
    draws (the nearer of the two by chance, about half of them, fails this), and the error is no worse."""
    p_i, p_j, p_k = np.array([0.5, 0.3, 0.2]), np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.6, 0.3, 0.1])
    n = 3000.0
    ij, ik, jk = np.outer(p_i, p_j) * n, np.outer(p_i, p_k) * n, np.outer(p_j, p_k) * n
    errors, independent_errors, differ = _shrunk_over_draws(ij, ik, jk, sigma=25.0, n=n, draws=300, seed=3,
                                                            monkeypatch=monkeypatch)
    assert differ.mean() < 0.08
    assert errors.mean() < 1.05 * independent_errors.mean()
