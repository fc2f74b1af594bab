"""How private rows are put behind a release mechanism: one constructor per kind of target, and
the targets for special set-ups (nothing outside this package touches a target's rows or noise).

Every constructor does the same three things: calibrate the spec for the plan, start a fresh
ledger, and draw privacy noise from its own source (a fresh OS seed unless one is given; the OS
CSPRNG with ``secure_noise``).

* :func:`private_target`: projections of (batches of) the rows, the central mechanisms.
* :func:`local_target`: every row released once as y + N(0, σ² I), local DP.
* :func:`sharded_target`: one rank's shard under torch.distributed (shared seed across ranks).
* :func:`histogram_target`: one noisy release of the K×B counts of the rows' projections.

* :class:`ShardedTarget`: one rank's shard of the private rows under torch.distributed.
* :class:`FixedNoiseTarget`: projections with a fixed noise std and NO privacy claim, for
  experiments that reproduce a paper's smoothing level (its report says "not private").
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from ..kernels.sliced import project, sort_rows
from .calibrate import PrivacySpec, ReleasePlan, calibrate, calibrate_local
from .histogram import HistogramTarget, ShardedCounts
from .ledger import PrivacyLedger
from .noise import NoiseSource
from .release import LocallyReleasedTarget, PrivateTarget

__all__ = ["ShardedTarget", "ShardedHistogramTarget", "FixedNoiseTarget", "private_target", "local_target",
           "sharded_target", "histogram_target", "sharded_histogram_target"]


class ShardedTarget(PrivateTarget):
    """Rows [offset, offset + len(shard)) of a private set of ``dataset_size`` records."""

    def __init__(self, shard: Tensor, calibration, *, offset: int, dataset_size: int, noise: NoiseSource,
                 ledger: PrivacyLedger, batch_size: int | None = None):
        super().__init__(shard, calibration, noise=noise, ledger=ledger, batch_size=batch_size,
                         dataset_size=dataset_size)
        self.offset = offset

    def release(self, theta: Tensor) -> tuple[Tensor, float]:
        self._check_budget()
        idx = self._batch_indices()
        if idx is None:
            idx = torch.arange(self.size)
        mine = (idx >= self.offset) & (idx < self.offset + self._data.shape[0])
        theta = theta.to(device=self._data.device, dtype=self._data.dtype)
        values = theta.new_zeros(theta.shape[1], idx.numel())
        values[:, mine] = theta.T @ self._data[idx[mine] - self.offset].T
        sigma = 0.0
        if self._calibration is not None:
            values, sigma = self._privatize(values, self._calibration.sensitivity(theta))
            values = values * mine.to(values.dtype)  # this rank's columns only: each record noised once
        dist.all_reduce(values)
        return sort_rows(values)[0], sigma


class FixedNoiseTarget(PrivateTarget):
    """Projections of a batch of ``batch_size`` rows (None: every row) plus N(0, σ²) with a fixed σ: swf's
    smoothing (004 §4.1), not a privacy mechanism (no calibration, no ledger entries, ε = ∞ in its report)."""

    def __init__(self, data: Tensor, noise_std: float, *, seed: int | None, batch_size: int | None = None):
        super().__init__(data, None, noise=NoiseSource(seed), ledger=PrivacyLedger(), batch_size=batch_size)
        self.noise_std_value = float(noise_std)

    def release(self, theta: Tensor) -> tuple[Tensor, float]:
        values = project(self._batch(), theta.to(device=self._data.device, dtype=self._data.dtype))
        values = values + self._noise.gaussian(tuple(values.shape), self.noise_std_value, device=values.device,
                                               dtype=values.dtype)
        return sort_rows(values)[0], self.noise_std_value


def private_target(data: Tensor, spec: PrivacySpec, plan: ReleasePlan, *, privacy_seed: int | None = None,
                   device=None) -> PrivateTarget:
    """Rows ``data`` (m, d) behind the projection-release mechanism that ``spec`` and ``plan`` call for."""
    return PrivateTarget(data if device is None else data.to(device), calibrate(spec, plan),
                         noise=NoiseSource(privacy_seed, secure=spec.secure_noise), ledger=PrivacyLedger(),
                         batch_size=plan.sample_size)


def local_target(data: Tensor, spec: PrivacySpec, *, privacy_seed: int | None = None, batch_size: int | None = None,
                 device=None) -> LocallyReleasedTarget:
    """Rows ``data`` (m, d) released once each with local Gaussian noise (sensitivity 2R)."""
    return LocallyReleasedTarget(data if device is None else data.to(device),
                                 calibrate_local(spec, dataset_size=data.shape[0], dim=data.shape[1]),
                                 noise=NoiseSource(privacy_seed, secure=spec.secure_noise), ledger=PrivacyLedger(),
                                 batch_size=batch_size)


def sharded_target(shard: Tensor, spec: PrivacySpec, plan: ReleasePlan, *, offset: int, privacy_seed: int,
                   seed_known: bool) -> ShardedTarget:
    """This rank's ``shard`` (rows offset … offset + len) of a private set of ``plan.dataset_size`` rows. Every
    rank passes the same ``privacy_seed`` so that the ranks draw the same batches."""
    if spec.secure_noise:
        raise ValueError("sharded runs share one privacy seed across ranks; secure_noise is not available")
    return ShardedTarget(shard, calibrate(spec, plan), offset=offset, dataset_size=plan.dataset_size,
                         noise=NoiseSource(privacy_seed, seed_known=seed_known), ledger=PrivacyLedger(),
                         batch_size=plan.sample_size)


class ShardedHistogramTarget(ShardedCounts, HistogramTarget):
    """One rank's shard of the private rows behind a sliced-histogram release (:class:`ShardedCounts`)."""


def sharded_histogram_target(shard: Tensor, spec: PrivacySpec, plan: ReleasePlan, *, bins: int, privacy_seed: int,
                             seed_known: bool) -> ShardedHistogramTarget:
    """This rank's ``shard`` of a private set of ``plan.dataset_size`` rows behind one histogram release
    (the noise is drawn on rank 0, so OpenDP's sampler and the OS CSPRNG work here too)."""
    check_histogram(spec, plan, seed_typed=seed_known)
    return ShardedHistogramTarget(shard, calibrate(spec, plan), noise=NoiseSource(privacy_seed, seed_known=seed_known,
                                                                                  secure=spec.secure_noise),
                                  ledger=PrivacyLedger(), bins=bins, dataset_size=plan.dataset_size)


def check_histogram(spec: PrivacySpec, plan: ReleasePlan, *, seed_typed: bool) -> None:
    if spec.sensitivity_bound != "spectral":
        raise ValueError("the sliced histogram's sensitivity (sqrt(2K)) does not depend on the directions; "
                         f"sensitivity_bound={spec.sensitivity_bound!r} does not apply: leave it unset")
    if plan.noise != spec.count_noise:
        raise ValueError(f"the plan's count noise {plan.noise!r} is not the spec's {spec.count_noise!r}")
    if spec.private and seed_typed and plan.noise == "discrete-gaussian":
        raise ValueError("the histogram's default count noise is OpenDP's discrete Gaussian, which no seed can "
                         "reproduce: for reproducible float noise pass count_noise='gaussian' "
                         "(--count-noise gaussian), or leave privacy_seed unset")


def histogram_target(data: Tensor, spec: PrivacySpec, plan: ReleasePlan, *, bins: int,
                     privacy_seed: int | None = None, device=None, dataset_size: int | None = None) -> HistogramTarget:
    """Rows ``data`` (m, d) behind one release of their K×B sliced histogram (K = ``plan.n_projections``),
    with the count noise ``spec.count_noise`` (the plan's). ``dataset_size``: ``data`` is a part, maybe
    empty, of a data set of that public size (one class, when labels are private)."""
    check_histogram(spec, plan, seed_typed=privacy_seed is not None)
    return HistogramTarget(data if device is None else data.to(device), calibrate(spec, plan),
                           noise=NoiseSource(privacy_seed, secure=spec.secure_noise), ledger=PrivacyLedger(),
                           bins=bins, dataset_size=dataset_size)
