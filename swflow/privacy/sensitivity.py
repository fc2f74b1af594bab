"""Sensitivity of one release of projected rows ``YΘ`` (003 §8.1–8.3, 004 Eq. 23).

Neighbouring data sets change one row by ``u = y − y'``; the release changes by ``uᵀΘ`` with
``‖uᵀΘ‖² = ‖u‖² · H``, ``H = ‖ûᵀΘ‖²`` for the unit vector ``û``. With Θ's columns uniform on the
sphere and independent of the data, each ``⟨û, θ_j⟩²`` is Beta(1/2, (d−1)/2) (mean 1/d,
variance 2(d−1)/(d²(d+2))), so ``H`` concentrates around k/d:

* ``bernstein``: H ≤ w(k, δθ) with probability ≥ 1 − δθ (003 Lemma 2), any k;
* ``clt``: the normal approximation of 004 Eq. 23 — an approximation, offered for k > 30 only;
* ``spectral``: H ≤ ‖Θ‖₂² for the drawn Θ, deterministic (failure probability 0).

The failure probability δθ of a probabilistic bound is charged to δ once per release.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy.stats import norm

__all__ = ["BOUNDS", "ADJACENCIES", "SensitivityBound", "bernstein_bound", "clt_bound",
           "spectral_bound", "adjacency_factor", "projection_sensitivity"]

from ..core.config import ADJACENCIES, BOUNDS  # noqa: E402  (the settings' constants, torch-free)


@dataclass(frozen=True)
class SensitivityBound:
    """ℓ2 sensitivity of one projection release.

    kind : one of BOUNDS
    squared_gain : H bound (w or ‖Θ‖₂²); the sensitivity is ``factor * sqrt(squared_gain)``
    factor : 2R (replace-one) or R (zero-out)
    failure_probability : δθ charged to δ per release (0 for spectral)
    """

    kind: str
    squared_gain: float
    factor: float
    failure_probability: float

    @property
    def value(self) -> float:
        return self.factor * math.sqrt(self.squared_gain)


def _check_kd(k: int, d: int, delta_theta: float) -> None:
    if k < 1 or d < 1:
        raise ValueError(f"need k >= 1 projections and d >= 1 dimensions, got k={k}, d={d}")
    if not 0 < delta_theta < 1:
        raise ValueError(f"delta_theta must be in (0, 1), got {delta_theta}")


def bernstein_bound(k: int, d: int, *, delta_theta: float) -> float:
    """w(k, δθ) = k/d + (2/3) ln(1/δθ) + (2/d) sqrt(k(d−1)/(d+2) · ln(1/δθ))  (003 Lemma 2)."""
    _check_kd(k, d, delta_theta)
    log_term = math.log(1.0 / delta_theta)
    return k / d + (2.0 / 3.0) * log_term + (2.0 / d) * math.sqrt(k * (d - 1) / (d + 2) * log_term)


def clt_bound(k: int, d: int, *, delta_theta: float) -> float:
    """k/d + (z_{1−δθ}/d) sqrt(2k(d−1)/(d+2))  (004 Eq. 23; normal approximation, k > 30)."""
    _check_kd(k, d, delta_theta)
    if k <= 30:
        raise ValueError(f"the CLT bound is an approximation offered only for k > 30 projections "
                         f"(got k={k}); use sensitivity_bound='bernstein' or 'spectral'")
    z = norm.isf(delta_theta)
    return k / d + (z / d) * math.sqrt(2.0 * k * (d - 1) / (d + 2))


def spectral_bound(theta: torch.Tensor) -> float:
    """‖Θ‖₂² of the drawn directions, shape (d, k): the exact worst case over unit vectors."""
    return float(torch.linalg.matrix_norm(theta.double(), ord=2) ** 2)


def adjacency_factor(adjacency: str, norm_bound: float) -> float:
    """Largest ‖y − y'‖ between neighbours: 2R under replace-one, R under zero-out."""
    if adjacency not in ADJACENCIES:
        raise ValueError(f"unknown adjacency {adjacency!r}; choose one of {ADJACENCIES}")
    if adjacency == "add-remove":
        raise ValueError("add-remove adjacency is for a table's releases of counts only (n private); projections "
                         "of rows are accounted under replace-one or zero-out")
    if not norm_bound > 0:
        raise ValueError(f"norm_bound R must be > 0, got {norm_bound}")
    return 2.0 * norm_bound if adjacency == "replace-one" else norm_bound


def projection_sensitivity(*, kind: str, k: int, d: int, adjacency: str, norm_bound: float,
                           delta_theta: float = 0.0, theta: torch.Tensor | None = None) -> SensitivityBound:
    """Sensitivity bound of one release of k projections of d-dimensional rows."""
    factor = adjacency_factor(adjacency, norm_bound)
    if kind == "bernstein":
        return SensitivityBound(kind, bernstein_bound(k, d, delta_theta=delta_theta), factor, delta_theta)
    if kind == "clt":
        return SensitivityBound(kind, clt_bound(k, d, delta_theta=delta_theta), factor, delta_theta)
    if kind == "spectral":
        if theta is None:
            raise ValueError("the spectral bound needs the drawn directions theta (d, k)")
        return SensitivityBound(kind, spectral_bound(theta), factor, 0.0)
    raise ValueError(f"unknown sensitivity bound {kind!r}; choose one of {BOUNDS}")
