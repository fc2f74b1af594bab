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

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from .sliced import quantile, rank_levels

__all__ = ["DriftResult", "smoothed_drift", "sort_rows", "clip_rows"]

_INDEX_BITS = 29  # a float32 widened to float64 has 29 trailing zero mantissa bits
_INDEX_MASK = np.uint64((1 << _INDEX_BITS) - 1)


def _pool_size() -> int:
    return max(1, torch.get_num_threads())


@lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=_pool_size())


def _sort_packed(block: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = block.shape[1]
    keys = block.astype(np.float64)
    keys.view(np.uint64)[...] |= np.arange(n, dtype=np.uint64)
    keys.sort(axis=1)
    bits = keys.view(np.uint64)
    order = (bits & _INDEX_MASK).view(np.int64)  # indices < 2**29: the bit pattern is the int64
    bits &= ~_INDEX_MASK
    return keys.astype(np.float32), order


def sort_rows(x: Tensor) -> tuple[Tensor, Tensor]:
    """``x.sort(dim=1)`` as (values, order); shape (k, n) -> (k, n), (k, n).

    On the CPU, float32 rows go through numpy's SIMD sort: each value is widened to float64,
    whose 29 trailing mantissa bits are zero, the column index is packed into them, and one
    value sort returns both the order and the values (distinct float32 values keep their order;
    ties are broken by index, reversed for negatives). Rows are split over threads (numpy
    releases the GIL). Other devices and dtypes use ``torch.sort``.
    """
    k, n = x.shape
    if x.device.type != "cpu" or x.dtype != torch.float32 or n >= (1 << _INDEX_BITS) or k == 0:
        return x.sort(dim=1)
    arr = x.detach().numpy()
    workers = min(k, _pool_size())
    blocks = np.array_split(arr, workers, axis=0)
    parts = list(_pool().map(_sort_packed, blocks)) if workers > 1 else [_sort_packed(arr)]
    values = np.concatenate([p[0] for p in parts], axis=0)
    order = np.concatenate([p[1] for p in parts], axis=0)
    return torch.from_numpy(values), torch.from_numpy(order)


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
    return DriftResult(drift, displacement_sorted.square().mean().sqrt())


def clip_rows(x: Tensor, max_norm: float) -> Tensor:
    """Rows of ``x`` (n, d) rescaled to Euclidean norm at most ``max_norm``."""
    norms = x.norm(dim=1, keepdim=True)
    return x * (max_norm / norms.clamp(min=max_norm))
