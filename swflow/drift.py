"""The Gaussian-smoothed sliced-Wasserstein drift v̂(σ) of 004 Eq. 20–21.

For each direction θ_j the particles' noisy projections are ranked within the noisy particle
set, each rank level is mapped to the same level of the (released, noisy, sorted) target
projections, and the displacement "target quantile − noisy projection" is pulled back along θ_j.
The drift is the average over directions:

    v̂(x_i) = (1/k) Σ_j (Q_{ν*ξ,j}(F_{μ*ξ,j}(p_ij)) − p_ij) θ_j,   p_ij = ⟨x_i, θ_j⟩ + z_ij.

Noise on *both* sides is what lets the flow deconvolve: the target side is the privacy release
(done by :mod:`swflow.privacy`), the particle side is plain smoothing drawn by the simulator.
Ranks come from one sort per direction and quantiles from exact linear interpolation between
order statistics — no fixed percentile grid.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from .sliced import quantile, rank_levels, sort_rows

__all__ = ["DriftResult", "smoothed_drift", "clip_rows"]


class DriftResult(NamedTuple):
    """Drift of every particle and a free diagnostic.

    drift : Tensor, shape (n, d)
    projected_w2 : Tensor, scalar
        ``sqrt(mean_j mean_i displacement²)``: the smoothed ``SW_2`` between particles and the
        released target on this step's directions (exact when n equals the target size).
    """

    drift: Tensor
    projected_w2: Tensor


def smoothed_drift(noisy_particle_proj: Tensor, target_sorted: Tensor, theta: Tensor) -> DriftResult:
    """Drift of 004 Eq. 20–21 from already-noised projections.

    Parameters
    ----------
    noisy_particle_proj : Tensor, shape (k, n)
        ``⟨x_i, θ_j⟩ + z_ij`` for the n particles (z ~ N(0, s²); s = 0 gives the SWF drift).
    target_sorted : Tensor, shape (k, m)
        Released target projections for the same directions, each row sorted ascending.
    theta : Tensor, shape (d, k)
        The directions, unit columns.

    Returns
    -------
    DriftResult
    """
    k, n = noisy_particle_proj.shape
    if target_sorted.shape[0] != k or theta.shape[1] != k:
        raise ValueError(f"direction count mismatch: particles {k}, target {target_sorted.shape[0]}, "
                         f"theta {theta.shape[1]}")
    values, order = sort_rows(noisy_particle_proj)
    # The r-th smallest noisy particle projection sits at level (r + 1/2)/n of its own set.
    levels = rank_levels(n, device=values.device, dtype=values.dtype)
    displacement_sorted = quantile(target_sorted, levels) - values
    displacement = torch.empty_like(displacement_sorted).scatter_(1, order, displacement_sorted)
    drift = (theta @ displacement).T / k
    rms = torch.linalg.vector_norm(displacement_sorted) / math.sqrt(displacement_sorted.numel())
    return DriftResult(drift, rms)


def clip_rows(x: Tensor, max_norm: float) -> Tensor:
    """Rows of ``x`` (n, d) rescaled to Euclidean norm at most ``max_norm``."""
    norms = x.norm(dim=1, keepdim=True)
    return x * (max_norm / norms.clamp(min=max_norm))
