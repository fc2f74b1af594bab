"""Sliced primitives: directions, projections, exact 1-D quantiles and transport, SW distances.

Layout convention: a set of one-dimensional samples for ``k`` directions is a tensor of shape
``(k, m)`` (one row per direction), so that sorting and interpolation run along the last,
contiguous axis. Directions are the *columns* of ``theta`` with shape ``(d, k)``, as in the papers
(Θ ∈ R^{d×Nθ}).

Two empirical quantile functions appear and are kept apart on purpose:

* :func:`quantile` — piecewise-linear through the order statistics at levels ``(i + 1/2)/m``;
  smooth in ``u``, used by the flow's transport map (004 Eq. 21).
* the right-continuous step quantile inside :func:`wasserstein_1d` — the exact quantile of the
  empirical measure, which makes ``W_p`` between empirical measures exact (same as scipy/POT).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "random_directions",
    "project",
    "sort_rows",
    "quantile",
    "rank_levels",
    "cdf",
    "transport_1d",
    "wasserstein_1d",
    "sliced_wasserstein",
    "smoothed_sliced_wasserstein",
]


def random_directions(
    n_projections: int,
    dim: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Directions drawn uniformly on the unit sphere S^{dim-1}.

    Returns
    -------
    theta : Tensor, shape (dim, n_projections)
        Unit-norm columns.
    """
    if n_projections < 1:
        raise ValueError(f"n_projections must be >= 1, got {n_projections}")
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    # Normalised Gaussians are uniform on the sphere; draw in float64 on the generator's
    # device so that a seed gives the same directions whatever dtype the flow uses.
    gen_device = generator.device if generator is not None else device
    g = torch.randn(dim, n_projections, generator=generator, device=gen_device, dtype=torch.float64)
    g = g / g.norm(dim=0, keepdim=True)
    return g.to(device=device, dtype=dtype)


def project(x: Tensor, theta: Tensor) -> Tensor:
    """Projections of the rows of ``x`` on the columns of ``theta``, direction-major.

    Parameters
    ----------
    x : Tensor, shape (n, d)
    theta : Tensor, shape (d, k)

    Returns
    -------
    Tensor, shape (k, n)
    """
    if x.ndim != 2 or theta.ndim != 2 or x.shape[1] != theta.shape[0]:
        raise ValueError(f"cannot project x {tuple(x.shape)} on theta {tuple(theta.shape)}: "
                         "need x (n, d) and theta (d, k)")
    return theta.T @ x.T


_INDEX_BITS = 29  # a float32 widened to float64 has 29 trailing zero mantissa bits
_INDEX_MASK = np.uint64((1 << _INDEX_BITS) - 1)


def _pool_size() -> int:
    return max(1, torch.get_num_threads())


@lru_cache(maxsize=1)
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=_pool_size())


def _sort_packed(block: np.ndarray, values_out: np.ndarray, order_out: np.ndarray) -> None:
    n = block.shape[1]
    keys = block.astype(np.float64)
    bits = keys.view(np.uint64)
    bits |= np.arange(n, dtype=np.uint64)
    keys.sort(axis=1)
    np.bitwise_and(bits, _INDEX_MASK, out=order_out.view(np.uint64))  # indices < 2**29: same bits as int64
    bits &= ~_INDEX_MASK
    values_out[...] = keys  # exact: the float32 value with its zero tail restored


def sort_rows(x: Tensor) -> tuple[Tensor, Tensor]:
    """``x.sort(dim=1)`` as (values, order); shape (k, n) -> (k, n), (k, n).

    On the CPU, float32 rows go through numpy's SIMD sort: each value is widened to float64,
    whose 29 trailing mantissa bits are zero, the column index is packed into them, and one
    value sort returns both the order and the values (distinct float32 values keep their order;
    ties are broken by index, reversed for negatives). Blocks of rows are sorted on threads
    (numpy releases the GIL) straight into the outputs. Other devices and dtypes use ``torch.sort``.
    The CPU path carries no autograd graph: use ``torch.sort`` where gradients must flow.
    """
    k, n = x.shape
    if x.device.type != "cpu" or x.dtype != torch.float32 or n >= (1 << _INDEX_BITS) or k == 0:
        return x.sort(dim=1)
    arr = x.detach().numpy()
    values = np.empty((k, n), dtype=np.float32)
    order = np.empty((k, n), dtype=np.int64)
    bounds = np.linspace(0, k, min(k, _pool_size()) + 1).astype(int)
    jobs = [(arr[a:b], values[a:b], order[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    if len(jobs) > 1:
        list(_pool().map(lambda job: _sort_packed(*job), jobs))
    else:
        _sort_packed(*jobs[0])
    return torch.from_numpy(values), torch.from_numpy(order)


def rank_levels(n: int, *, device=None, dtype=torch.float32) -> Tensor:
    """CDF levels ``(i + 1/2)/n`` of the order statistics of an ``n``-point sample, shape (n,)."""
    return (torch.arange(n, device=device, dtype=dtype) + 0.5) / n


def quantile(sorted_values: Tensor, levels: Tensor) -> Tensor:
    """Piecewise-linear empirical quantile through the order statistics.

    The ``i``-th order statistic of an ``m``-point sample sits at level ``(i + 1/2)/m``; levels in
    between are interpolated linearly and levels outside ``[1/(2m), 1 - 1/(2m)]`` are clamped to
    the extreme order statistics.

    Parameters
    ----------
    sorted_values : Tensor, shape (k, m)
        Each row sorted ascending.
    levels : Tensor, shape (n,) or (k, n)
        Levels in [0, 1]; a 1-D tensor is shared by every row.

    Returns
    -------
    Tensor, shape (k, n)
    """
    k, m = sorted_values.shape
    if m == 0:
        raise ValueError("quantile of an empty sample")
    pos = (levels * m - 0.5).clamp(0.0, m - 1)
    lo = pos.floor().long().clamp(max=m - 1)
    hi = (lo + 1).clamp(max=m - 1)
    frac = (pos - lo.to(pos.dtype)).to(sorted_values.dtype)
    if levels.ndim == 1:
        v_lo = sorted_values.index_select(1, lo)
        v_hi = sorted_values.index_select(1, hi)
    else:
        v_lo = sorted_values.gather(1, lo)
        v_hi = sorted_values.gather(1, hi)
    return torch.lerp(v_lo, v_hi, frac)


def cdf(sorted_values: Tensor, z: Tensor) -> Tensor:
    """Piecewise-linear empirical CDF, the exact inverse of :func:`quantile` on its range.

    Parameters
    ----------
    sorted_values : Tensor, shape (k, m)
        Each row sorted ascending.
    z : Tensor, shape (k, n)

    Returns
    -------
    Tensor, shape (k, n)
        Levels in ``[1/(2m), 1 - 1/(2m)]``.
    """
    k, m = sorted_values.shape
    if m == 1:
        return torch.full_like(z, 0.5)
    # Index of the segment [s_i, s_{i+1}] holding z, clamped to the first/last segment.
    i = torch.searchsorted(sorted_values.contiguous(), z.contiguous(), right=True) - 1
    i = i.clamp(0, m - 2)
    s_lo = sorted_values.gather(1, i)
    s_hi = sorted_values.gather(1, i + 1)
    gap = s_hi - s_lo
    t = torch.where(gap > 0, (z - s_lo) / torch.where(gap > 0, gap, torch.ones_like(gap)),
                    torch.zeros_like(z)).clamp(0.0, 1.0)
    return (i.to(z.dtype) + 0.5 + t) / m


def transport_1d(source_sorted: Tensor, target_sorted: Tensor, z: Tensor) -> Tensor:
    """Monotone 1-D transport map ``T = Q_target ∘ F_source`` evaluated at ``z``.

    Parameters
    ----------
    source_sorted : Tensor, shape (k, n_src)
    target_sorted : Tensor, shape (k, n_tgt)
        Row-sorted samples; sizes may differ.
    z : Tensor, shape (k, n)

    Returns
    -------
    Tensor, shape (k, n)
    """
    return quantile(target_sorted, cdf(source_sorted, z))


def wasserstein_1d(u_values: Tensor, v_values: Tensor, *, p: float = 2.0) -> Tensor:
    """Exact ``W_p^p`` between uniform empirical measures on the line, batched over rows.

    Integrates ``|F_u^{-1}(t) - F_v^{-1}(t)|^p`` over ``t ∈ (0, 1)`` with the step quantile
    functions, on the merged grid of CDF jumps, so sample sizes may differ.

    Parameters
    ----------
    u_values : Tensor, shape (k, n)
    v_values : Tensor, shape (k, m)

    Returns
    -------
    Tensor, shape (k,)
        ``W_p^p`` per row (take the ``1/p`` power for the distance).
    """
    if u_values.ndim != 2 or v_values.ndim != 2 or u_values.shape[0] != v_values.shape[0]:
        raise ValueError(f"need (k, n) and (k, m) tensors, got {tuple(u_values.shape)} "
                         f"and {tuple(v_values.shape)}")
    n, m = u_values.shape[1], v_values.shape[1]
    if n == 0 or m == 0:
        raise ValueError("wasserstein_1d of an empty sample")
    u_sorted = u_values.sort(dim=1).values
    v_sorted = v_values.sort(dim=1).values
    if n == m:  # one common grid: the sorted samples are matched one to one
        return (u_sorted - v_sorted).abs().pow(p).mean(dim=1)
    work = torch.float64
    grid = torch.cat([torch.arange(1, n + 1, dtype=work) / n, torch.arange(1, m + 1, dtype=work) / m])
    grid = grid.sort().values.to(u_values.device)
    widths = torch.diff(grid, prepend=grid.new_zeros(1))
    mids = grid - widths / 2
    iu = (mids * n).floor().long().clamp(max=n - 1)
    iv = (mids * m).floor().long().clamp(max=m - 1)
    diff = (u_sorted[:, iu].to(work) - v_sorted[:, iv].to(work)).abs().pow(p)
    return (diff * widths).sum(dim=1).to(u_values.dtype)


def _directions_for(x: Tensor, projections: Tensor | None, n_projections: int | None,
                    generator: torch.Generator | None) -> Tensor:
    if projections is not None:
        if projections.ndim != 2 or projections.shape[0] != x.shape[1]:
            raise ValueError(f"projections must have shape (d={x.shape[1]}, k), "
                             f"got {tuple(projections.shape)}")
        return projections.to(device=x.device, dtype=x.dtype)
    if n_projections is None:
        raise ValueError("give either projections= (d, k) or n_projections=")
    return random_directions(n_projections, x.shape[1], generator=generator,
                             device=x.device, dtype=x.dtype)


def _check_pair(x: Tensor, y: Tensor) -> None:
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError(f"x and y must be 2-D (rows = points), got {x.ndim}-D and {y.ndim}-D")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"dimension mismatch: x has d={x.shape[1]}, y has d={y.shape[1]}")


def sliced_wasserstein(
    x: Tensor,
    y: Tensor,
    *,
    n_projections: int | None = None,
    projections: Tensor | None = None,
    p: float = 2.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Monte-Carlo sliced Wasserstein distance ``SW_p = (mean_j W_p^p(θ_j#x, θ_j#y))^{1/p}``.

    Parameters
    ----------
    x : Tensor, shape (n, d)
    y : Tensor, shape (m, d)
    n_projections : int, optional
        Number of random directions (ignored when ``projections`` is given).
    projections : Tensor, shape (d, k), optional
        Fixed unit directions; makes the value deterministic and comparable with POT.

    Returns
    -------
    Tensor, scalar
    """
    _check_pair(x, y)
    theta = _directions_for(x, projections, n_projections, generator)
    return wasserstein_1d(project(x, theta), project(y, theta), p=p).mean().pow(1.0 / p)


def smoothed_sliced_wasserstein(
    x: Tensor,
    y: Tensor,
    *,
    noise_std: float,
    n_projections: int | None = None,
    projections: Tensor | None = None,
    p: float = 2.0,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Gaussian-smoothed sliced Wasserstein distance (DP-SWD, 003/004 Eq. 9), Monte-Carlo.

    ``G_σ SW_p(μ, ν) = SW_p(μ * ξ_σ, ν * ξ_σ)``: each projected set gets i.i.d. ``N(0, σ²)`` noise
    before the 1-D transport. This is the *metric*; a private release of the target's noisy
    projections must go through :mod:`swflow.privacy`, never through this helper.

    Parameters
    ----------
    x : Tensor, shape (n, d)
    y : Tensor, shape (m, d)
    noise_std : float
        σ ≥ 0, keyword-only.

    Returns
    -------
    Tensor, scalar
    """
    if noise_std < 0:
        raise ValueError(f"noise_std must be >= 0, got {noise_std}")
    _check_pair(x, y)
    theta = _directions_for(x, projections, n_projections, generator)
    px, py = project(x, theta), project(y, theta)
    if noise_std > 0:
        px = px + noise_std * torch.randn(px.shape, generator=generator, device=px.device, dtype=px.dtype)
        py = py + noise_std * torch.randn(py.shape, generator=generator, device=py.device, dtype=py.dtype)
    return wasserstein_1d(px, py, p=p).mean().pow(1.0 / p)
