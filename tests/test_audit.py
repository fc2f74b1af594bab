import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from swflow.privacy.audit import clopper_pearson, epsilon_lower_bound

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "experiments"))


@pytest.mark.parametrize("k,n", [(0, 50), (3, 50), (50, 50), (17, 200)])
def test_clopper_pearson_matches_scipy(k, n):
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    lo, hi = clopper_pearson(k, n, alpha=0.05)
    assert lo == pytest.approx(ci.low, abs=1e-10) and hi == pytest.approx(ci.high, abs=1e-10)


def test_lower_bound_separated_and_identical():
    rng = np.random.default_rng(0)
    # perfectly separated scores: bound = log(CP_low(n/n) / CP_high(0/n))
    sep = epsilon_lower_bound(np.ones(200), np.zeros(200), delta=0.0)
    lo, _ = clopper_pearson(200, 200, alpha=0.05)
    _, hi = clopper_pearson(0, 200, alpha=0.05)
    assert sep == pytest.approx(math.log(lo / hi))
    same = rng.standard_normal(400)
    assert epsilon_lower_bound(same[:200], same[200:], delta=0.0) < 0.5
    # direction does not matter
    assert epsilon_lower_bound(np.zeros(200), np.ones(200), delta=0.0) == pytest.approx(sep)


def test_audit_finds_leakage_without_noise():
    import audit

    result = audit.audit("swf", math.inf, runs=60)
    assert result["audited_epsilon_lower_bound"] > 1.5


@pytest.mark.slow
@pytest.mark.parametrize("method,eps", [("dpswflow-r", 1.0), ("dpswflow-r", 4.0), ("dpswflow", 1.0), ("dpswflow", 4.0),
                                        ("dpswgen", 4.0)])
def test_audit_stays_below_claimed_epsilon(method, eps):
    import audit

    result = audit.audit(method, eps, runs=300)
    assert result["audited_epsilon_lower_bound"] <= eps
