"""Public rows choose which pairs of columns a table run releases (swflow/tables/pairs.py, issue 51)."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from swflow.tables.pairs import choose_pairs, pair_departures, pair_dependence, released_error


def test_pair_dependence_is_the_total_variation_from_independence():
    """Against pandas' crosstab: 0.5 · Σ |p(a, b) − p(a) p(b)| for every pair."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 4000)
    cells = np.stack([a, (a + rng.integers(0, 2, 4000)) % 4, rng.integers(0, 2, 4000)], axis=1)
    got = pair_dependence(cells, [3, 4, 2])
    for (i, j), value in got.items():
        joint = pd.crosstab(cells[:, i], cells[:, j], normalize=True).to_numpy()
        expected = 0.5 * np.abs(joint - np.outer(joint.sum(1), joint.sum(0))).sum()
        assert value == pytest.approx(expected, abs=1e-12)
    assert got[(0, 1)] > 0.3 and got[(0, 2)] < 0.05  # the dependent pair stands out


def test_the_rule_on_a_table_worked_by_hand():
    """Columns 0 and 1 equal, column 2 independent: dependence 0.5, 0, 0. Under noise the pair (0, 1) is kept and
    column 2 keeps its first pair (0, 2) (a column needs a marginal); (1, 2) adds noise and no dependence, so it is
    left out. Without noise nothing costs anything: every pair."""
    public = np.array([[0, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]])
    assert pair_dependence(public, [2, 2, 2]) == {(0, 1): 0.5, (0, 2): 0.0, (1, 2): 0.0}
    assert choose_pairs(public, [2, 2, 2], dataset_size=1000, noise_multiplier=3.0) == [(0, 1), (0, 2)]
    assert choose_pairs(public, [2, 2, 2], dataset_size=1000, noise_multiplier=0.0) == [(0, 1), (0, 2), (1, 2)]


def test_more_noise_keeps_fewer_pairs_and_every_column_stays_covered():
    rng = np.random.default_rng(1)
    base = rng.integers(0, 4, (3000, 1))
    public = np.concatenate([base, (base + rng.integers(0, 2, (3000, 1))) % 4, rng.integers(0, 4, (3000, 4))], axis=1)
    sizes = [4] * 6
    kept = [choose_pairs(public, sizes, dataset_size=5000, noise_multiplier=z) for z in (0.0, 0.5, 2.0, 8.0)]
    assert len(kept[0]) == 15 and [len(k) for k in kept] == sorted((len(k) for k in kept), reverse=True)
    assert len(kept[-1]) < 15 and kept[-1][0] == (0, 1)
    for pairs in kept:
        assert {c for p in pairs for c in p} == set(range(6))
    with pytest.raises(ValueError, match="two columns"):
        choose_pairs(public[:, :1], [4], dataset_size=10, noise_multiplier=1.0)


def test_the_noise_counts_the_records_moves_and_the_tables_released_anyway():
    """σ(K) = z·√(moved·(K + fixed)): add-remove (a record moves one count a table) at z chooses what replace-one
    does at z/√2, exactly; tables released whatever is chosen (a privacy unit's class tables) are counted in every
    K's σ: the choice is the prefix of the ranking (each column's first pair added) whose summed errors, at that σ,
    are least, found here by brute force over every prefix."""
    rng = np.random.default_rng(2)
    base = rng.integers(0, 4, (3000, 1))
    public = np.concatenate([base, (base + rng.integers(0, 2, (3000, 1))) % 4, (base + rng.integers(0, 3, (3000, 1)))
                             % 4, rng.integers(0, 4, (3000, 3))], axis=1)
    sizes = [4] * 6
    for z in (0.3, 1.0, 3.0):
        assert (choose_pairs(public, sizes, dataset_size=5000, noise_multiplier=z, moved=1)
                == choose_pairs(public, sizes, dataset_size=5000, noise_multiplier=z / math.sqrt(2)))
    ranked = choose_pairs(public, sizes, dataset_size=5000, noise_multiplier=0.0)  # every pair, ranked
    departures = pair_departures(public, sizes)
    first = {}
    for pair in ranked:
        for column in pair:
            first.setdefault(column, pair)
    for z, fixed in ((3.0, 0), (3.0, 60), (30.0, 0), (30.0, 600)):
        errors = []
        for k in range(1, len(ranked) + 1):
            released = set(ranked[:k]) | set(first.values())
            variance = z ** 2 * (len(released) + fixed)
            errors.append(sum(float(released_error(np.array([departures[p][0]]), np.array([departures[p][1]]) * 5000 ** 2,
                                                   np.array([16.0]), variance=variance, dataset_size=5000)[0])
                              if p in released else departures[p][0] for p in ranked))
        best = max(k for k in range(1, len(ranked) + 1) if errors[k - 1] <= min(errors) * (1 + 1e-12))
        expected = set(ranked[:best]) | set(first.values())
        assert set(choose_pairs(public, sizes, dataset_size=5000, noise_multiplier=z, moved=1,
                                fixed_tables=fixed)) == expected
    with pytest.raises(ValueError, match="moved 1 or 2"):
        choose_pairs(public, sizes, dataset_size=5000, noise_multiplier=1.0, moved=3)


def test_a_released_tables_error_once_shrunk_against_monte_carlo():
    """released_error, the rule's price of a released table, against the Monte Carlo mean TV distance between a
    pair's law and its noisy table shrunk toward it by positive-part James–Stein (written here, not the library's):
    within 30 % from 4 to 400 cells and from no departure at all to one far above the noise (2 000 draws a case;
    the ratio spans 0.84–1.26 on this grid), and the noise's own TV distance where the departure is far above it."""
    rng = np.random.default_rng(0)
    n = 10_000
    for cells in (4, 16, 100, 400):
        for sigma in (2.0, 10.0, 40.0):
            for size in (0.0, 1.0, 5.0, 20.0):
                departure = size * np.where(np.arange(cells) % 2 == 0, 1.0, -1.0) * rng.uniform(0.5, 1.5, cells)
                noisy = departure + rng.normal(0.0, sigma, (2000, cells))
                keep = np.maximum(0.0, 1 - cells * sigma ** 2 / (noisy ** 2).sum(1))[:, None]
                monte_carlo = 0.5 * np.abs(keep * noisy - departure).sum(1).mean() / n
                got = released_error(np.array([0.5 * np.abs(departure).sum() / n]),
                                     np.array([float((departure ** 2).sum())]), np.array([float(cells)]),
                                     variance=sigma ** 2, dataset_size=n)[0]
                assert got == pytest.approx(monte_carlo, rel=0.3), (cells, sigma, size)
    noise = math.sqrt(2 / math.pi) * 3.0 * 100 / (2 * n)
    far_above = released_error(np.array([0.4]), np.array([1e12]), np.array([100.0]), variance=9.0, dataset_size=n)
    assert far_above[0] == pytest.approx(noise, rel=1e-4)


def test_a_pair_of_many_cells_is_kept_where_shrinkage_makes_its_noise_cheap():
    """Three 30-category columns, the last two each the first plus a shift of up to 24 (every pair dependent, the
    last two weakly), and two independent coin columns. Priced at its whole noise (√(2/π)·σ·cells/(2n), 900 cells),
    the pair (1, 2), whose columns other pairs already cover, costs more than it holds and would be dropped; its
    departure is near its noise, so shrinkage leaves it an error below its dependence, and it is released. Where the
    noise swamps it (z four times larger) it is left out."""
    rng = np.random.default_rng(3)
    base = rng.integers(0, 30, (20000, 1))
    public = np.concatenate([base, (base + rng.integers(0, 25, (20000, 2))) % 30, rng.integers(0, 2, (20000, 2))],
                            axis=1)
    sizes = [30, 30, 30, 2, 2]
    chosen = choose_pairs(public, sizes, dataset_size=20000, noise_multiplier=2.0)
    assert (1, 2) in chosen
    whole_noise = math.sqrt(2 / math.pi * 4.0 * 2 * len(chosen)) * 900 / (2 * 20000)
    assert whole_noise > pair_departures(public, sizes)[(1, 2)][0]  # the unshrunk price: more than it holds
    assert (1, 2) not in choose_pairs(public, sizes, dataset_size=20000, noise_multiplier=8.0)


def test_public_rows_choose_the_pairs_and_the_private_rows_do_not(tmp_path):
    from swflow.pipeline.tables import TableSynthesizer
    from swflow.tables import example_table

    (first, schema), (second, _) = example_table(2000, seed=0), example_table(2000, seed=7)
    public, _ = example_table(400, seed=5)
    fits = [TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-6, public=public, steps=30).fit(private)
            for private in (first, second)]
    assert fits[0].pairs == fits[1].pairs and len(fits[0].pairs) < 10  # n and the budget, not the private rows
    report = fits[0].privacy_report().to_json()
    assert report["n_projections"] == len(fits[0].pairs)
    assert report["sensitivity"] == pytest.approx(math.sqrt(2 * len(fits[0].pairs)))
    assert "400 public rows" in report["run_config"]["pairs_chosen_by"]
    loaded = TableSynthesizer.load(fits[0].save(tmp_path / "t.pt"))
    assert loaded.pairs == fits[0].pairs and len(schema.check(loaded.sample(50))) == 50
    with pytest.raises(ValueError, match="not both"):
        TableSynthesizer(schema=schema, epsilon=1.0, public=public, pairs=[("age", "hours")])
    with pytest.raises(ValueError, match="public rows do not fit the schema: column 'age'"):
        TableSynthesizer(schema=schema, epsilon=1.0, public=public.assign(age=200), steps=5).fit(first)


def test_the_public_table_flag(tmp_path, capsys):
    from swflow.cli import main
    from swflow.tables import example_table

    (private, schema), (public, _) = example_table(1500, seed=0), example_table(300, seed=5)
    private.to_csv(tmp_path / "private.csv", index=False)
    public.to_csv(tmp_path / "public.csv", index=False)
    schema.write(tmp_path / "schema.json")
    flags = ["--schema", str(tmp_path / "schema.json"), "--method", "dpswflow-hist", "--epsilon", "1", "--delta",
             "1e-6", "--steps", "30", "--quiet", "--public-table", str(tmp_path / "public.csv")]
    assert main(["generate", "--table", str(tmp_path / "private.csv"), *flags, "--out", str(tmp_path / "run")]) == 0
    report = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert report["n_projections"] == len(report["run_config"]["pairs"]) < 10
    assert "public rows" in report["run_config"]["pairs_chosen_by"]
    capsys.readouterr()
    assert main(["generate", "--data", str(tmp_path / "x.npy"), "--public-table", str(tmp_path / "public.csv"),
                 "--epsilon", "1", "--out", str(tmp_path / "bad")]) == 2
    assert "--public-table belongs to a --table run" in capsys.readouterr().err
    assert main(["generate", "--table", str(tmp_path / "private.csv"), *flags[:-1], str(tmp_path / "nope.csv"),
                 "--out", str(tmp_path / "missing")]) == 2
    assert "--public-table" in capsys.readouterr().err and not (tmp_path / "missing").exists()
