"""Single-release mechanisms: analytic Gaussian (Balle & Wang 2018), classical Gaussian, discrete Gaussian.

All functions work with the *noise multiplier* ``z = σ / Δ`` (noise std over ℓ2
sensitivity), so they are independent of the data's scale.
"""
from __future__ import annotations

import functools
import math

from scipy.optimize import brentq
from scipy.stats import norm

__all__ = ["discrete_gaussian_epsilon", "discrete_gaussians_epsilon", "discrete_gaussian_measurement", "analytic_gaussian_delta",
           "analytic_gaussian_epsilon", "analytic_gaussian_multiplier",
           "classical_gaussian_multiplier", "local_gaussian_std"]


def _check_delta(delta: float) -> None:
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")


def analytic_gaussian_delta(*, epsilon: float, noise_multiplier: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with σ/Δ = z (Balle & Wang 2018, Thm 8):
    δ = Φ(1/(2z) − εz) − e^ε Φ(−1/(2z) − εz)."""
    z = noise_multiplier
    a, b = 1.0 / (2.0 * z), epsilon * z
    # e^ε Φ(−a−b) in log space: the product under- and overflows for large ε. Its exponent is at most 0
    # (ε − (a + b)²/2 ≤ 0 since (a + b)² ≥ 4ab = 2ε), so it never overflows.
    second = math.exp(epsilon + norm.logcdf(-a - b))
    return max(norm.cdf(a - b) - second, 0.0)


def analytic_gaussian_epsilon(*, noise_multiplier: float, delta: float) -> float:
    """Smallest ε for which the Gaussian mechanism with σ/Δ = z is (ε, δ)-DP (exact)."""
    _check_delta(delta)
    if noise_multiplier <= 0:
        return math.inf
    if analytic_gaussian_delta(epsilon=0.0, noise_multiplier=noise_multiplier) <= delta:
        return 0.0
    hi = 1.0
    while analytic_gaussian_delta(epsilon=hi, noise_multiplier=noise_multiplier) > delta:
        hi *= 2.0
        if hi > 1e12:  # far beyond the largest budget a run may claim (calibrate.MAX_EPSILON)
            return math.inf
    return brentq(lambda e: analytic_gaussian_delta(epsilon=e, noise_multiplier=noise_multiplier) - delta,
                  0.0, hi, xtol=1e-12, rtol=1e-12)


def analytic_gaussian_multiplier(*, epsilon: float, delta: float) -> float:
    """Smallest σ/Δ that makes the Gaussian mechanism (ε, δ)-DP (valid for every ε > 0)."""
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    _check_delta(delta)
    f = lambda z: analytic_gaussian_delta(epsilon=epsilon, noise_multiplier=z) - delta  # noqa: E731
    lo, hi = 1e-3, 1.0
    while f(hi) > 0:
        hi *= 2.0
    while f(lo) < 0:
        lo /= 2.0
    z = brentq(f, lo, hi, xtol=1e-14, rtol=1e-14)
    # brentq may land a hair below the root; step up until the guarantee holds exactly.
    while f(z) > 0:
        z = math.nextafter(z, math.inf) * (1 + 1e-12)
    return z


def discrete_gaussian_measurement(scale: float):
    """OpenDP's discrete Gaussian sampler on integer vectors (ℓ2 input distance), P(x) ∝ exp(−x²/2·scale²):
    exact integer sampling from OpenDP's CSPRNG, the histogram's default count noise. Its ε is
    :func:`discrete_gaussian_epsilon`'s (OpenDP's own zCDP map is looser: 9% at ε = 1)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp.m.make_gaussian(dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T=float), scale=float(scale))


@functools.lru_cache(maxsize=256)  # a pure function of three numbers, and a PLD composition costs seconds
def discrete_gaussian_epsilon(*, noise_multiplier: float, unit_changes: int, delta: float) -> float:
    """ε at ``delta`` of one release of integer counts plus discrete-Gaussian noise of scale σ = z·√m
    (P(x) ∝ exp(−x²/2σ²), OpenDP's sampler), when neighbouring data sets move at most m = ``unit_changes``
    counts, each by exactly one (the sliced histogram: m = 2K, sensitivity √m).

    The coordinates' noises are independent, so the release's privacy loss is the sum of m losses of
    the one-dimensional discrete Gaussian with sensitivity 1: dp-accounting's privacy loss distribution
    of that mechanism (pessimistic estimate, an upper bound), composed m times. Its grid is sized so
    that discretization adds about 0.1% of the continuous Gaussian's ε at the same multiplier (measured
    cost of the discrete mechanism itself: experiments/privacy_budget.py)."""
    return discrete_gaussians_epsilon(((noise_multiplier, unit_changes),), delta=delta)


@functools.lru_cache(maxsize=256)
def discrete_gaussians_epsilon(releases: tuple[tuple[float, int], ...], *, delta: float) -> float:
    """ε at ``delta`` of several releases of integer counts of the same records, release i with discrete-Gaussian
    noise of multiplier z_i on m_i counts that a neighbour moves by one each (``releases``: ((z_i, m_i), ...)).

    Every count's noise is independent, so the composed privacy loss is the sum of Σ m_i one-dimensional losses:
    dp-accounting's privacy loss distributions (pessimistic), composed on one grid, sized as in
    :func:`discrete_gaussian_epsilon` (about 0.1% of the continuous Gaussian's ε at the composed multiplier)."""
    _check_delta(delta)
    if not releases or any(m < 1 for _, m in releases):
        raise ValueError(f"every release moves at least one count, got {releases}")
    if any(z <= 0 for z, _ in releases):
        return math.inf
    from dp_accounting.pld import privacy_loss_distribution as pld

    composed_z = sum(z ** -2 for z, _ in releases) ** -0.5  # Gaussian releases compose as one of this multiplier
    continuous = analytic_gaussian_epsilon(noise_multiplier=composed_z, delta=delta)
    changes = sum(m for _, m in releases)
    interval = max(1e-3 * max(continuous, 1e-3) / changes, 1e-9)  # Σ m compositions add up to Σ m intervals
    # each composition may cut this much tail mass into the loss's infinite part (dp-accounting's default, 1e-15,
    # made every δ below about 1e-14 read ε = inf, and a calibration then grew σ without end)
    tail = min(1e-15, delta * 1e-6)
    loss = None
    for z, m in releases:
        if z * math.sqrt(m) > DISCRETE_PLD_MAX_SCALE:
            # the noise's support (23σ integers) would not fit in memory: the discrete Gaussian of this scale
            # satisfies the continuous one's Rényi bound (Canonne, Kamath & Steinke 2020), which bounds its ε
            # through dp-accounting's RDP
            return _rdp_epsilon(releases, delta)
        part = pld.from_discrete_gaussian_mechanism(z * math.sqrt(m), sensitivity=1,
                                                    value_discretization_interval=interval
                                                    ).self_compose(m, tail_mass_truncation=tail)
        loss = part if loss is None else loss.compose(part, tail_mass_truncation=tail)
    return float(loss.get_epsilon_for_delta(delta))


#: the largest discrete-Gaussian scale σ whose privacy loss distribution swflow builds (its support is about 23σ
#: integers: 10^6 keeps it near 200 MB); beyond it ε comes from the Rényi bound, which is valid and a little looser
DISCRETE_PLD_MAX_SCALE = 1e6


def _rdp_epsilon(releases: tuple[tuple[float, int], ...], delta: float) -> float:
    """ε at ``delta`` of discrete-Gaussian releases through the continuous Gaussian's Rényi bound, which each
    satisfies (moved counts m_i, each by one: one Gaussian of multiplier z_i composed over them is the same bound)."""
    import dp_accounting as dpa
    from dp_accounting import rdp

    accountant = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    for z, _ in releases:
        accountant.compose(dpa.GaussianDpEvent(z))
    return float(accountant.get_epsilon(delta))


def classical_gaussian_multiplier(*, epsilon: float, delta: float) -> float:
    """σ/Δ = sqrt(2 ln(1.25/δ))/ε (Dwork & Roth Thm A.1) — only valid for ε ≤ 1."""
    _check_delta(delta)
    if not 0 < epsilon <= 1:
        raise ValueError(f"the classical Gaussian mechanism is only valid for 0 < epsilon <= 1 "
                         f"(got {epsilon}); use analytic_gaussian_multiplier")
    return math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def local_gaussian_std(*, epsilon: float, delta: float, norm_bound: float) -> tuple[float, float]:
    """(multiplier, σ) for releasing one record y, ‖y‖ ≤ R, as y + N(0, σ² I) with (ε, δ) local DP.

    Any two records differ by at most 2R in ℓ2, so σ = z · 2R with z the analytic-Gaussian multiplier.
    """
    z = analytic_gaussian_multiplier(epsilon=epsilon, delta=delta)
    return z, z * 2.0 * norm_bound
