"""Empirical privacy auditing: an ε lower bound from membership-test outcomes.

For a mechanism M that is (ε, δ)-DP and any event E, P[M(D') ∈ E] ≤ e^ε P[M(D) ∈ E] + δ in both
directions. With scores from many runs on D (without the canary) and D' (with it), every
threshold event {s ≥ t} and {s < t} gives ε ≥ log((p_hi_side_low − δ) / p_other_side_high), with
one-sided Clopper–Pearson bounds holding jointly at level 1 − alpha.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta

__all__ = ["clopper_pearson", "epsilon_lower_bound"]


def clopper_pearson(k: int, n: int, *, alpha: float) -> tuple[float, float]:
    """Exact two-sided (1 − alpha) interval for a binomial proportion k/n."""
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"need 0 <= k <= n and n >= 1, got k={k}, n={n}")
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(with_canary: np.ndarray, without: np.ndarray, *, delta: float, alpha: float = 0.05) -> float:
    """Largest ε lower bound over all threshold tests on the scores, in both directions (≥ 0)."""
    a, b = np.asarray(with_canary, dtype=float), np.asarray(without, dtype=float)
    best = 0.0
    for t in np.unique(np.concatenate([a, b])):
        for in_a, in_b in ((int((a >= t).sum()), int((b >= t).sum())), (int((a < t).sum()), int((b < t).sum()))):
            pa_lo, pa_hi = clopper_pearson(in_a, len(a), alpha=alpha)
            pb_lo, pb_hi = clopper_pearson(in_b, len(b), alpha=alpha)
            for num, den in ((pa_lo, pb_hi), (pb_lo, pa_hi)):
                if num - delta > 0 and den > 0:
                    best = max(best, math.log((num - delta) / den))
    return best
