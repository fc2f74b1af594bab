"""The scorer's marginals (swflow/tables/metrics.py), against pandas' own crosstabs of the same bins."""
import itertools

import numpy as np
import pandas as pd
import pytest

from swflow.tables import Schema
from swflow.tables.metrics import marginal_errors, marginal_tvd


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
