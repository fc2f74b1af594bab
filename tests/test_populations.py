"""Declared private populations: drawn from the private split only, with the declared proportions."""
import numpy as np
import pytest

from swflow.io.data import split_indices
from swflow.io.populations import POPULATIONS, population_rows, proportions


@pytest.mark.parametrize("name", sorted(POPULATIONS))
def test_population_is_drawn_from_the_private_split_with_the_declared_proportions(name):
    labels = np.random.default_rng(0).integers(0, 10, size=4000)
    split = split_indices(len(labels), seed=3)
    rows = split.private[population_rows(labels[split.private], name)]
    assert np.intersect1d(rows, split.public).size == 0  # no private index on the public side, and back
    assert np.isin(rows, split.private).all() and len(np.unique(rows)) == len(rows)
    share = proportions(name)
    counts = {c: int((labels[rows] == c).sum()) for c in share}
    assert set(np.unique(labels[rows])) <= set(share)
    for c, p in share.items():  # met to within one row per class (largest remainder)
        assert abs(counts[c] - p * len(rows)) <= 1.0
    # the largest such subset: some class is used up
    assert any(counts[c] >= (labels[split.private] == c).sum() - 1 for c in share)
    assert np.array_equal(rows, split.private[population_rows(labels[split.private], name)])  # deterministic


def test_skewed_proportions_fall_from_30_to_1_percent():
    share = proportions("skewed")
    assert share[0] / share[9] == pytest.approx(30.0) and sum(share.values()) == pytest.approx(1.0)
    assert all(share[c] > share[c + 1] for c in range(9))


def test_population_cli_records_the_population_and_refuses_the_public_split(tmp_path, capsys):
    from swflow.cli import main
    from autoencoders.encoded import encoded_split

    with pytest.raises(ValueError, match="public split is the broad population"):
        encoded_split("digits", "public", population="skewed")
    assert main(["generate", "--dataset", "digits", "--population", "skewed", "--method", "dpswflow-hist",
                 "--epsilon", "5", "--delta", "1e-4", "--steps", "3", "--n-particles", "60",
                 "--out", str(tmp_path / "r")]) == 0
    import json

    config = json.loads((tmp_path / "r" / "privacy.json").read_text())["run_config"]
    assert config["population"]["population"] == "skewed" and config["population"]["drawn_from"] == "private"
    report = json.loads((tmp_path / "r" / "privacy.json").read_text())
    assert report["dataset_size"] == config["population"]["size"]
    capsys.readouterr()
    assert main(["generate", "--data", "x.npy", "--population", "skewed", "--out", str(tmp_path / "q")]) == 2
    assert "--population draws from a dataset's private split" in capsys.readouterr().err
