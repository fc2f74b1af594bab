"""The sliced histogram's default rules: (K, B), the step size, and the multiplier one release of the budget buys
(public quantities only: n, ε, δ; swflow/privacy/histogram.py is the release)."""
from __future__ import annotations

import math

__all__ = ["histogram_shape", "histogram_step_size", "one_release_multiplier"]


def histogram_shape(*, dataset_size: int, privacy, n_directions: int | None = None,
                    bins: int | None = None) -> tuple[int, int]:
    """(K, B) for a run: the given values, else the default rule of public quantities only.

    The rule reads the effective sample size n / z (z the noise multiplier the budget buys, which for
    one release does not depend on K): K is the largest power of two ≤ 1.75·sqrt(n/z), in [32, 512],
    and B = K/4 in [16, 128]. More directions cover the sphere better but split the budget: σ grows
    like sqrt(K). Chosen on the encoded public Fashion-MNIST split and synthetic mixtures on S^7 and
    S^15 at n = 1 500 … 20 000, ε = 1 and 10 (experiments/hist_rules.py), never on private rows.
    """
    if n_directions is not None and n_directions < 1:
        raise ValueError(f"the histogram needs at least one direction, got {n_directions}")
    if bins is not None and bins < 2:
        raise ValueError(f"the histogram needs at least 2 bins, got {bins}")
    effective = _effective_size(dataset_size, privacy)
    if n_directions is None:
        n_directions = _power_of_two(1.75 * math.sqrt(effective), 32, 512)
    if bins is None:
        bins = _power_of_two(n_directions / 4.0, 16, 128)
    return n_directions, bins


def histogram_step_size(*, dataset_size: int, privacy) -> float:
    """The default step size h: 3 when the effective size n / z is at least 2 000, else 1 (a larger
    step reaches the released marginals sooner but follows their noise more when few rows back them).
    Chosen with the (K, B) rule on the same public and synthetic data (experiments/hist_rules.py)."""
    return 3.0 if _effective_size(dataset_size, privacy) >= 2_000 else 1.0


def one_release_multiplier(privacy) -> float:
    """The noise multiplier z that the budget ``privacy`` (a PrivacySpec) buys for one Gaussian release of the whole
    data set (the given one, else the analytic Gaussian's); 0 without privacy. Default rules read it, never a run's
    accounting: the release itself is calibrated by :func:`~swflow.privacy.calibrate`."""
    from .mechanisms import analytic_gaussian_multiplier

    if not privacy.private:
        return 0.0
    return privacy.noise_multiplier or analytic_gaussian_multiplier(epsilon=privacy.epsilon, delta=privacy.delta)


def _effective_size(n: int, privacy) -> float:
    """n / z for the budget ``privacy`` (a PrivacySpec); n itself without privacy."""
    return n / one_release_multiplier(privacy) if privacy.private else float(n)


def _power_of_two(x: float, lo: int, hi: int) -> int:
    """The largest power of two ≤ x, clamped to [lo, hi]."""
    return int(min(hi, max(lo, 2 ** math.floor(math.log2(max(x, 1.0))))))
