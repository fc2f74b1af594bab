"""The Gaussian-smoothed sliced-Wasserstein drift v̂(σ) of 004 Eq. 20–21.

On direction θ_j, with particle projections p_ij = ⟨x_i, θ_j⟩, the smoothed particle CDF
F_j(t) = (1/n) Σ_l Φ((t − p_lj)/σ) and the released (noisy, sorted) target quantile Q_j, the
first variation of the smoothed SW² gives the displacement

    D_ij = E_{z ~ N(0, σ²)} [ Q_j(F_j(p_ij + z)) − (p_ij + z) ] = E_z Q_j(F_j(p_ij + z)) − p_ij,

and the drift is the average over directions, v̂(x_i) = (1/k) Σ_j D_ij θ_j. Noise on *both*
sides is what lets the flow deconvolve: the target side is the privacy release (done by
:mod:`swflow.privacy`), the particle side is the smoothing inside F_j and E_z.

Two estimators of D:

* :func:`exact_smoothed_drift` (the default) computes F_j and the Gaussian average
  deterministically on a per-direction grid. No particle-side random draws, no sort of n keys.
* :func:`sampled_drift` is 004's reference estimator: one draw z_ij per particle and direction,
  ranks of the noisy projections among themselves, displacement read at the noisy point. It is
  unbiased but its variance (the quantile error of a b-row release, read at an independent level
  for every particle) acts as extra diffusion. With σ = 0 it is the exact SWF drift (one sort).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Protocol

import torch
from torch import Tensor

from .sliced import quantile, rank_levels, sort_rows

__all__ = ["DriftResult", "GridReduce", "LOCAL", "OneProcess", "Workspace", "binned_drift", "exact_smoothed_drift", "sampled_drift",
           "pull_back", "clip_rows", "grid_spacing_ratio"]

#: Grid spacing Δ ≤ σ / SPACING_RATIO (the error bound below is quadratic in Δ/σ).
SPACING_RATIO = 12
MIN_POINTS, MAX_POINTS = 256, 1 << 15
#: Half-width of the grid margin and of the Gaussian window, in σ (Gaussian mass beyond: 2e-9).
TAIL = 6.0


class DriftResult(NamedTuple):
    """Drift of every particle and a free diagnostic.

    drift : Tensor, shape (n, d)
    projected_w2 : Tensor, scalar
        ``sqrt(mean_ij D_ij²)``: RMS projected displacement on this step's directions.
    """

    drift: Tensor
    projected_w2: Tensor


class GridReduce(Protocol):
    """How per-process partial results are combined (identity in one process; all-reduce across
    ranks in :mod:`swflow.simulate.distributed`). Each returns a tensor of the input's shape."""

    def sum(self, t: Tensor) -> Tensor: ...

    def max(self, t: Tensor) -> Tensor: ...


class OneProcess:
    """Where a flow's particles live, and how its ranks talk: the default communicator, every particle in
    this process. :class:`swflow.simulate.distributed.ProcessGroup` shards them over a torch.distributed group
    instead; the simulator calls the same five methods either way.

    keep(full, dim) : this process's part of a draw shaped like all the particles (along ``dim``)
    sum(t), max(t) : partial results combined over the processes (:class:`GridReduce`)
    sampled_drift(noisy_proj, released, theta) : 004's one-draw drift, with global particle ranks
    gather(particles) : all particles (n, d) in the one-process order

    and, for the builders: ``sharded`` (whether ``data`` is this process's shard of the private rows),
    ``shard(n)`` (its rows lo, hi) and ``shared_privacy_seed(seed)`` (the seed every process uses, and whether
    anyone knows it).
    """

    rank, world, sharded = 0, 1, False

    def shard(self, n: int) -> tuple[int, int]:
        return 0, n

    def shared_privacy_seed(self, seed: int | None) -> tuple[int | None, bool]:
        return seed, seed is not None  # None: the target draws a fresh secret seed itself

    def keep(self, full: Tensor, dim: int) -> Tensor:
        return full

    def sum(self, t: Tensor) -> Tensor:
        return t

    def max(self, t: Tensor) -> Tensor:
        return t

    def sampled_drift(self, noisy_proj: Tensor, released: Tensor, theta: Tensor) -> DriftResult:
        return sampled_drift(noisy_proj, released, theta)

    def gather(self, particles: Tensor) -> Tensor:
        return particles


LOCAL: GridReduce = OneProcess()


class Workspace:
    """Buffers a flow step reuses from one step to the next, one per name: the step's (k, n) arrays are then
    written into memory the process already holds, instead of fresh pages the OS must zero on every step
    (measured: most of a 3 ms step at n = 10 000, k = 32 on two cores; experiments/bench_step.py). A drift
    function given no workspace allocates as usual. Not thread-safe: one per simulator."""

    def __init__(self):
        self._buffers: dict[str, Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device) -> Tensor:
        """An uninitialised buffer of this shape, dtype and device (reused when the last one named so matches)."""
        buf = self._buffers.get(name)
        shape = tuple(shape)
        if buf is None or tuple(buf.shape) != shape or buf.dtype != dtype or buf.device != torch.device(device):
            buf = torch.empty(shape, dtype=dtype, device=device)
            self._buffers[name] = buf
        return buf

    def zeros(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device) -> Tensor:
        return self.get(name, shape, dtype, device).zero_()


def _check_shapes(k: int, target_sorted: Tensor, theta: Tensor) -> None:
    """The particle side, the release and the directions agree on the number of directions k."""
    if target_sorted.shape[0] != k or theta.shape[1] != k:
        raise ValueError(f"direction count mismatch: particles {k}, target {target_sorted.shape[0]}, "
                         f"theta {theta.shape[1]}")


def pull_back(displacement: Tensor, theta: Tensor, reduce: GridReduce, workspace: Workspace | None = None) -> DriftResult:
    """(k, n) displacements -> drift (n, d) and the all-particle RMS displacement. The drift is the transpose of a
    (d, n) product: θ·D on the layouts as they are runs 6x faster than Dᵀ·θᵀ into an (n, d) buffer (one thread,
    n = 10⁴, k = 70)."""
    k, n = displacement.shape
    out = (workspace or Workspace()).get("drift", (theta.shape[0], n), displacement.dtype, displacement.device)
    drift = torch.mm(theta.to(displacement.dtype), displacement, out=out).div_(k).T
    stats = reduce.sum(torch.stack([torch.linalg.vector_norm(displacement).square(),
                                    displacement.new_tensor(float(n))]))
    return DriftResult(drift, (stats[0] / (stats[1] * k)).sqrt())


def sampled_drift(noisy_particle_proj: Tensor, target_sorted: Tensor, theta: Tensor) -> DriftResult:
    """004's one-draw estimator from already-noised projections (exact SWF drift for σ = 0).

    Parameters
    ----------
    noisy_particle_proj : Tensor, shape (k, n)
        ``⟨x_i, θ_j⟩ + z_ij`` for the n particles (z ~ N(0, s²); s = 0 gives the SWF drift).
    target_sorted : Tensor, shape (k, m)
        Released target projections for the same directions, each row sorted ascending.
    theta : Tensor, shape (d, k)
        The directions, unit columns.
    """
    _check_shapes(noisy_particle_proj.shape[0], target_sorted, theta)
    n = noisy_particle_proj.shape[1]
    values, order = sort_rows(noisy_particle_proj)
    # The r-th smallest noisy particle projection sits at level (r + 1/2)/n of its own set.
    levels = rank_levels(n, device=values.device, dtype=values.dtype)
    displacement_sorted = quantile(target_sorted, levels) - values
    displacement = torch.empty_like(displacement_sorted).scatter_(1, order, displacement_sorted)
    return pull_back(displacement, theta, LOCAL)


def grid_spacing_ratio(width: float, noise_std: float) -> tuple[int, float]:
    """Points G and the ratio σ/Δ of the grid that :func:`exact_smoothed_drift` uses for projections
    spanning ``width`` (the margins of TAIL·σ on both sides are added here)."""
    span = width + 2 * TAIL * noise_std
    points = int(min(MAX_POINTS, max(MIN_POINTS, math.ceil(span / noise_std * SPACING_RATIO) + 1)))
    return points, noise_std / (span / (points - 1))


def _fft_convolve(signal: Tensor, kernel: Tensor, offset: int) -> Tensor:
    """Rows of ``signal`` (k, G) convolved with ``kernel`` (L,); output[g] = Σ_b s[b] K[g − b + offset]."""
    k, g = signal.shape
    length = g + kernel.shape[0] - 1
    size = 1 << (length - 1).bit_length()
    full = torch.fft.irfft(torch.fft.rfft(signal, size) * torch.fft.rfft(kernel, size), size)
    return full[:, offset:offset + g]


def exact_smoothed_drift(particles: Tensor, target_sorted: Tensor, theta: Tensor, *, noise_std: float,
                         reduce: GridReduce = LOCAL, workspace: Workspace | None = None) -> DriftResult:
    """The drift with the particle-side expectation over z ~ N(0, σ²) computed on a grid.

    Every direction gets a uniform grid s_0 < … < s_{G−1} of spacing Δ ≤ σ/12 over
    [−r − TAIL·σ, r + TAIL·σ], r = max_i ‖x_i‖ (every projection lies in [−r, r]). Then:

    1. each clean projection p_ij is split linearly between its two neighbouring grid points
       (mass 1/n);
    2. F(s_g) = Σ_b mass_b Φ((s_g − s_b)/σ), the smoothed particle CDF (FFT convolution);
    3. q(s_g) = Q_target(F(s_g)) with the piecewise-linear quantile of the released set;
    4. h(s_g) = Σ_b q(s_b) φ((s_g − s_b)/σ) / Σ_b φ(·), the Gaussian average, truncated at TAIL·σ;
    5. D_ij = h(p_ij) − p_ij, with h interpolated linearly between grid points.

    Error: linear binning moves each Φ term by at most (Δ²/8)·max|Φ''|/σ² = 0.030·(Δ/σ)², so
    |ΔF| ≤ 2.1e-4 at Δ = σ/12, and D moves by that times the target quantile's slope. Steps 4–5
    add O((Δ/σ)²) of the target's range, and the truncation adds 2e-9 of it. Against direct
    quadrature, for σ from 0.01 to 10 times the data spread, the largest error is 6e-4 of the
    spread (tests/test_drift.py). The grid has at most 2^15 points. Beyond that (σ below about
    1/3000 of the projections' range) Δ grows past σ/12 and the bound grows with it; use σ = 0,
    which is exact by sorting, there. Per step: one matmul, a handful of passes over the n·k
    grid coordinates, two row-wise scatters and one gather; O(k·G log G) on the grid; memory O(n·k).

    Parameters
    ----------
    particles : Tensor, shape (n, d)
        This process's particles.
    target_sorted : Tensor, shape (k, m)
        Released target projections, each row sorted ascending.
    theta : Tensor, shape (d, k)
        Unit directions.
    noise_std : float
        σ > 0, keyword-only.
    reduce : GridReduce
        Combines the particle radius, the binned mass and the diagnostic across processes.
    workspace : Workspace, optional
        Buffers reused across steps (the simulator's); the returned drift lives in it until the next call.

    Returns
    -------
    DriftResult
    """
    if not noise_std > 0:
        raise ValueError(f"exact smoothing needs noise_std > 0 (got {noise_std}); σ = 0 is exact by sorting")
    if particles.ndim != 2 or particles.shape[1] != theta.shape[0]:
        raise ValueError(f"particles {tuple(particles.shape)} do not match directions {tuple(theta.shape)}: "
                         "need particles (n, d) and theta (d, k)")
    _check_shapes(theta.shape[1], target_sorted, theta)
    radius = _radius(particles, reduce)
    points, ratio = grid_spacing_ratio(2 * radius, noise_std)
    inv_spacing = ratio / noise_std
    start = -radius - TAIL * noise_std

    # 1. grid coordinates of every projection and their linear binning
    workspace = workspace or Workspace()
    cell, w = _grid_coordinates(particles, theta, start=start, inv_spacing=inv_spacing, workspace=workspace)
    mass = _linear_mass(cell, w, points, reduce, workspace=workspace)

    on_grid = _drift_on_grid(mass, target_sorted, points=points, ratio=ratio, start=start, inv_spacing=inv_spacing)
    return pull_back(_read_linear(on_grid, cell, w, workspace), theta, reduce, workspace)


def _drift_on_grid(mass: Tensor, target_sorted: Tensor, *, points: int, ratio: float, start: float,
                   inv_spacing: float) -> Tensor:
    """Steps 2–5 of :func:`exact_smoothed_drift` on the grid: h(s_g) − s_g, shape (k, G), from the binned particle
    mass (k, G); the grid starts at ``start`` with spacing 1/``inv_spacing`` = σ/``ratio``."""
    device = mass.device
    # 2. smoothed CDF: kernel Φ(tΔ/σ) for t = −(G−1) … G−1
    offsets = torch.arange(-(points - 1), points, dtype=_WORK, device=device) / ratio
    cdf = _fft_convolve(mass, torch.special.ndtr(offsets), points - 1).clamp_(0, 1)

    # 3. target quantile at those levels
    q = quantile(target_sorted.to(_WORK), cdf)

    # 4. Gaussian average, truncated at TAIL σ (particles sit ≥ TAIL σ inside the grid)
    half = min(points - 1, math.ceil(TAIL * ratio))
    taps = torch.arange(-half, half + 1, dtype=_WORK, device=device) / ratio
    density = torch.exp(-0.5 * taps.square())
    smoothed = _fft_convolve(q, density / density.sum(), half)

    # 5. D = h(p) − p is linear in each cell
    return smoothed - (start + torch.arange(points, dtype=_WORK, device=device) / inv_spacing)


_WORK = torch.float64  # the grid (k × G) is small: keep it in float64


def _radius(particles: Tensor, reduce: GridReduce) -> float:
    """Largest particle norm over every process, padded for the float rounding of |⟨x, θ⟩| ≤ ‖x‖."""
    radius = float(reduce.max(torch.linalg.vector_norm(particles, dim=1).amax().to(_WORK).reshape(1)))
    return radius * (1 + 1e-5) + 1e-12


def _grid_coordinates(particles: Tensor, theta: Tensor, *, start: float, inv_spacing: float,
                      workspace: Workspace, last_cell: int | None = None) -> tuple[Tensor, Tensor]:
    """Cell index (k, n) and in-cell weight (k, n) of u = (⟨x, θ⟩ − s_0)/Δ, from one matmul.
    Needs every u ≥ 0 (the grid starts left of every projection), so truncation is the floor.
    ``last_cell``: clamp u into [0, last_cell + 1) first (one float pass), for a grid whose edge a
    projection can reach."""
    k, n = theta.shape[1], particles.shape[0]
    u = workspace.get("u", (k, n), particles.dtype, particles.device)
    torch.addmm(torch.full((k, 1), -start * inv_spacing, dtype=particles.dtype, device=particles.device),
                theta.T * inv_spacing, particles.T, out=u)
    if last_cell is not None:
        end = torch.tensor(float(last_cell + 1), dtype=u.dtype)
        u.clamp_(0.0, float(torch.nextafter(end, end.new_zeros(()))))  # the largest u whose cell is last_cell
    cell = workspace.get("cell", (k, n), torch.long, particles.device).copy_(u)  # truncation toward zero
    return cell, u.frac_()  # u − trunc(u) = u − cell, without a pass that mixes float and int64


def _linear_mass(cell: Tensor, w: Tensor, points: int, reduce: GridReduce, dtype=_WORK, *,
                 workspace: Workspace) -> Tensor:
    """Each projection's mass split linearly between its two grid points, normalized per row: (k, G).

    mass[g] = Σ_{cell=g} (1 − w) + Σ_{cell=g−1} w (two scatters of real weights: a scatter of expanded ones to count
    the cells took half as long again)."""
    shape = (cell.shape[0], points)
    left = workspace.zeros("left", shape, w.dtype, w.device).scatter_add_(
        1, cell, torch.sub(1.0, w, out=workspace.get("one_minus_w", w.shape, w.dtype, w.device)))
    right = workspace.zeros("right", shape, w.dtype, w.device).scatter_add_(1, cell, w)
    mass = left.to(dtype)
    mass[:, 1:] += right[:, :-1].to(dtype)
    mass = reduce.sum(mass)
    return mass / mass.sum(dim=1, keepdim=True)


def _read_linear(on_grid: Tensor, cell: Tensor, w: Tensor, workspace: Workspace) -> Tensor:
    """A function given on the grid (k, G), read at the projections (cell, w) by linear interpolation."""
    slope = torch.diff(on_grid, dim=1, append=on_grid[:, -1:]).to(w.dtype)
    value = torch.gather(on_grid.to(w.dtype), 1, cell, out=workspace.get("value", cell.shape, w.dtype, w.device))
    change = torch.gather(slope, 1, cell, out=workspace.get("change", cell.shape, w.dtype, w.device))
    return value.addcmul_(w, change)


#: points of :func:`binned_drift`'s grid
BINNED_POINTS = 2048


def binned_drift(particles: Tensor, target_sorted: Tensor, theta: Tensor, *, points: int = BINNED_POINTS,
                 reduce: GridReduce = LOCAL, workspace: Workspace | None = None) -> DriftResult:
    """The unsmoothed SW drift (σ = 0) with the particle CDF read on a grid instead of by sorting.

    Each projection is binned linearly onto ``points`` grid points (2 048: a cell of 0.001 on the unit
    sphere) spanning [−r, r] (r the largest
    particle norm); the particle CDF at grid point g is the mass left of g plus half the mass at g
    (the mid-rank (i + ½)/n of a sorted sample, smeared over one cell); the target quantile is read
    there and interpolated back to each projection. Against the sorted ranks this moves each level by
    at most the particle mass within one cell (Δ = 2r/(points − 1)), so the drift's error is that of
    smoothing the particles by a kernel of width Δ. No sort of n keys: one matmul, two row-wise
    scatters, two gathers per step; memory O(n·k).

    Parameters
    ----------
    particles : Tensor, shape (n, d)
    target_sorted : Tensor, shape (k, m)
        Released target quantiles per direction, each row sorted ascending.
    theta : Tensor, shape (d, k)
        Unit directions.
    points : int, keyword-only
        Grid points G ≥ 2.
    workspace : Workspace, optional
        Buffers reused across steps (the simulator's); the returned drift lives in it until the next call.

    Returns
    -------
    DriftResult
    """
    if particles.ndim != 2 or particles.shape[1] != theta.shape[0]:
        raise ValueError(f"particles {tuple(particles.shape)} do not match directions {tuple(theta.shape)}: "
                         "need particles (n, d) and theta (d, k)")
    if points < 2:
        raise ValueError(f"the grid needs at least 2 points, got {points}")
    _check_shapes(theta.shape[1], target_sorted, theta)
    radius = _radius(particles, reduce)
    inv_spacing = (points - 1) / (2 * radius)
    workspace = workspace or Workspace()
    # a projection at +r sits on the last grid point: clamped to the right end of the last cell
    cell, w = _grid_coordinates(particles, theta, start=-radius, inv_spacing=inv_spacing, workspace=workspace,
                                last_cell=points - 2)
    # float32 suffices here: the levels are cumulative sums of ≤ points terms, exact to ~1e-6
    mass = _linear_mass(cell, w, points, reduce, dtype=torch.float32, workspace=workspace)
    levels = (torch.cumsum(mass, dim=1) - 0.5 * mass).clamp_(0.0, 1.0)
    grid = -radius + torch.arange(points, dtype=torch.float32, device=particles.device) / inv_spacing
    on_grid = quantile(target_sorted.to(torch.float32), levels) - grid
    return pull_back(_read_linear(on_grid, cell, w, workspace), theta, reduce, workspace)


def clip_rows(x: Tensor, max_norm: float) -> Tensor:
    """Rows of ``x`` (n, d) rescaled to Euclidean norm at most ``max_norm``."""
    norms = x.norm(dim=1, keepdim=True)
    return x * (max_norm / norms.clamp(min=max_norm))
