"""Private targets for special set-ups, built on :class:`PrivateTarget` inside the privacy package
(nothing outside it touches a target's private rows or noise).

* :class:`ShardedTarget`: one rank's shard of the private rows under torch.distributed.
* :class:`FixedNoiseTarget`: projections with a fixed noise std and NO privacy claim, for
  experiments that reproduce a paper's smoothing level (its report says "not private").
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from ..sliced import project, sort_rows
from .ledger import PrivacyLedger
from .noise import NoiseSource
from .release import PrivateTarget

__all__ = ["ShardedTarget", "FixedNoiseTarget"]


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
    """Projections of every row plus N(0, σ²) with a fixed σ: a smoothing knob for experiments, not a
    privacy mechanism (no calibration, no ledger entries, ε = ∞ in its report)."""

    def __init__(self, data: Tensor, noise_std: float, *, seed: int):
        super().__init__(data, None, noise=NoiseSource(seed), ledger=PrivacyLedger())
        self.noise_std_value = float(noise_std)

    def release(self, theta: Tensor) -> tuple[Tensor, float]:
        values = project(self._data, theta.to(device=self._data.device, dtype=self._data.dtype))
        values = values + self._noise.gaussian(tuple(values.shape), self.noise_std_value, device=values.device,
                                               dtype=values.dtype)
        return sort_rows(values)[0], self.noise_std_value
