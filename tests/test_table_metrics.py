"""The scorer's marginals (swflow/tables/metrics.py), against pandas' own crosstabs of the same bins."""
import itertools

import numpy as np
import pandas as pd
import pytest

from swflow.tables import Schema
from swflow.tables.metrics import decile_edges, efficacy, marginal_errors, marginal_tvd


def test_each_marginal_s_error_is_the_tvd_of_its_crosstab_at_the_reference_deciles():
    schema = Schema.from_json({"columns": [
        {"name": "x", "type": "numeric", "min": 0, "max": 100},
        {"name": "g", "type": "categorical", "categories": ["a", "b", "c"]},
        {"name": "h", "type": "categorical", "categories": [0, 1]}]})
    rng = np.random.default_rng(4)
    reference = pd.DataFrame({"x": rng.uniform(0, 100, 2000), "g": rng.choice(["a", "b", "c"], 2000),
                              "h": rng.integers(0, 2, 2000)})
    synthetic = pd.DataFrame({"x": rng.uniform(0, 100, 1500) ** 0.9, "g": rng.choice(["a", "b", "c"], 1500,
                                                                                      p=[0.5, 0.3, 0.2]),
                              "h": rng.integers(0, 2, 1500)})
    inner = np.unique(np.quantile(reference["x"], np.linspace(0.1, 0.9, 9)))
    bins = [-np.inf, *inner, np.inf]

    def binned(frame):  # numbers in 10 bins at the reference's deciles, left-closed as np.digitize reads them
        return frame.assign(x=pd.cut(frame["x"], bins, right=False, labels=False))

    errors = marginal_errors(schema, synthetic, reference, 2)
    assert set(errors) == set(itertools.combinations(["x", "g", "h"], 2))
    for pair, error in errors.items():
        a = binned(synthetic).groupby(list(pair)).size() / len(synthetic)
        b = binned(reference).groupby(list(pair)).size() / len(reference)
        expected = 0.5 * a.sub(b, fill_value=0).abs().sum()
        assert error == pytest.approx(expected, abs=1e-12)
    assert marginal_tvd(schema, synthetic, reference, ways=(2,))["tvd_2way"] == pytest.approx(
        np.mean(list(errors.values())))
    assert marginal_errors(schema, reference, reference, 3) == {("x", "g", "h"): 0.0}


def test_a_pile_is_a_bin_of_its_own_where_the_deciles_collapse_onto_it():
    """40 % of the reference sits on 0 (a pile at the minimum, like hours worked by those out of the labour force).
    Deciles alone put 0 in one bin with the values above it, up to the median, so a frame that moved the whole
    pile to 0.5 scored a 1-way TVD of 0; the pile's own bin sees the 0.4 that moved. And a class that the pile
    decides (y = 1 exactly on the pile) is read without error by a classifier trained on the rows themselves."""
    schema = Schema.from_json({"columns": [
        {"name": "x", "type": "numeric", "min": 0, "max": 100, "decimals": 1},
        {"name": "y", "type": "categorical", "categories": [0, 1]}]})
    rng = np.random.default_rng(5)
    x = np.where(rng.uniform(size=4000) < 0.4, 0.0, rng.uniform(1, 100, 4000).round(1))
    reference = pd.DataFrame({"x": x, "y": (x == 0).astype(int)})
    moved = reference.assign(x=np.where(x == 0, 0.5, x))
    assert marginal_tvd(schema, moved, reference, ways=(1,))["tvd_1way"] == pytest.approx((x == 0).mean() / 2,
                                                                                        abs=1e-12)
    held = reference.sample(frac=1.0, random_state=1)
    assert efficacy(schema, reference, held, "y")["auc"] == pytest.approx(1.0)
    edges = decile_edges(schema, reference)["x"]
    assert edges[0] == 0.0 and edges[1] == np.nextafter(0.0, np.inf)  # the pile's bin: [0, the next float)


def test_a_numeric_target_piled_at_its_maximum_is_predicted_as_its_pile():
    """The top bin of a numeric target is the pile where one sits at the maximum (its bin past the pile holds no
    row, and a class of no rows has no AUC); the pile decides z here, so the classifier reads it almost surely."""
    schema = Schema.from_json({"columns": [{"name": "h", "type": "numeric", "min": 0, "max": 100},
                                           {"name": "z", "type": "numeric", "min": 0, "max": 1}]})
    rng = np.random.default_rng(0)
    h = np.where(rng.uniform(size=3000) < 0.2, 100.0, rng.uniform(0, 99, 3000))
    frame = pd.DataFrame({"h": h, "z": (h == 100) * 0.5 + rng.uniform(0, 0.5, 3000)})
    scores = efficacy(schema, frame.iloc[:1500], frame.iloc[1500:], "h")
    assert "pile" in scores["positive_class"] and scores["auc"] > 0.99
