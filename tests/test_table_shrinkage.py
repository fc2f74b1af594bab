"""The pair tables' shrinkage toward independence (swflow.tables.flow.shrunk_tables) and the switch that turns it
off."""
import numpy as np
import pytest
import torch


def _james_stein(table: np.ndarray, sigma: float, n: int) -> np.ndarray:
    """The positive-part James–Stein estimate of ONE table toward the product of its own margins over the public
    n (a table whose columns are in no other table pools nothing): P + max(0, 1 − cells·σ²/‖T − P‖²)(T − P)."""
    rows, cols = table.sum(axis=1).clip(min=0), table.sum(axis=0).clip(min=0)
    product = np.outer(rows / rows.sum(), cols / cols.sum()) * n
    departure = table - product
    keep = max(0.0, 1.0 - table.size * sigma ** 2 / (departure ** 2).sum())
    return product + keep * departure


@pytest.mark.parametrize("strength", [0.0, 30.0, 400.0])  # no departure, one inside the noise, one far above it
def test_a_table_is_shrunk_by_the_james_stein_factor(strength):
    from swflow.tables.flow import shrunk_tables

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
    from swflow.tables.flow import shrunk_tables

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
