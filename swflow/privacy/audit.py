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

__all__ = ["clopper_pearson", "epsilon_lower_bound", "split_epsilon_lower_bound"]


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


def _bounds_at(a: np.ndarray, b: np.ndarray, thresholds: np.ndarray, *, delta: float, alpha: float) -> np.ndarray:
    """ε lower bounds of the tests {s ≥ t} (a more often above t than b), one per threshold, vectorized."""
    a, b = np.sort(a), np.sort(b)
    ka = len(a) - np.searchsorted(a, thresholds, side="left")
    kb = len(b) - np.searchsorted(b, thresholds, side="left")
    a_lo = np.where(ka == 0, 0.0, beta.ppf(alpha / 2, ka, len(a) - ka + 1))
    b_hi = np.where(kb == len(b), 1.0, beta.ppf(1 - alpha / 2, kb + 1, len(b) - kb))
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.log((a_lo - delta) / b_hi)
    return np.where(np.isfinite(bound) & (a_lo > delta), bound, 0.0)


def split_epsilon_lower_bound(with_canary: np.ndarray, without: np.ndarray, *, delta: float, alpha: float = 0.05,
                              candidates: int = 200, seed: int = 0) -> float:
    """ε lower bound of one threshold test chosen on the first half of each sample and evaluated on
    the second half, so the Clopper–Pearson intervals (level 1 − alpha) are not spent on the choice.

    The test direction (which sample sits higher) is chosen with the threshold. Candidates are
    quantiles of the first half's ``without`` scores, dense in the upper tail where the ratio of
    tail probabilities grows. The draws are shuffled (``seed``) before the split, so their order
    (a sorted release, say) does not matter. Vectorized: fine for millions of trials.
    """
    rng = np.random.default_rng(seed)
    a, b = rng.permutation(np.asarray(with_canary, dtype=float)), rng.permutation(np.asarray(without, dtype=float))
    best, pick = 0.0, None
    for sign in (1.0, -1.0):  # sign −1: the test {s ≤ t}
        a1, b1 = sign * a[: len(a) // 2], sign * b[: len(b) // 2]
        levels = 1 - np.logspace(np.log10(5.0 / len(b1)), np.log10(0.5), candidates)
        thresholds = np.quantile(b1, levels)
        bounds = _bounds_at(a1, b1, thresholds, delta=delta, alpha=alpha)
        if bounds.max() > best:
            best, pick = bounds.max(), (sign, thresholds[int(bounds.argmax())])
    if pick is None:
        return 0.0
    sign, threshold = pick
    held_out = _bounds_at(sign * a[len(a) // 2:], sign * b[len(b) // 2:], np.array([threshold]),
                          delta=delta, alpha=alpha)
    return max(0.0, float(held_out[0]))
