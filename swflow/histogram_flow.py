"""dpswflow-hist: one noisy release of the K×B sliced histogram, then a flow toward its quantile functions.

The method is this module plus its registration (swflow.registry); the release itself lives in the
privacy package (swflow/privacy/histogram.py), like every method's.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from .callbacks import FlowCallback
from .flow import FlowConfig, ParticleFlow, Presampled
from .privacy import PrivacySpec, histogram_target

__all__ = ["build"]


def build(data: torch.Tensor, *, spec, privacy: PrivacySpec, config: FlowConfig, n_projections: int,
          pool_size: int | None, bins: int | None, privacy_seed: int | None, callbacks: list[FlowCallback],
          dataset_size: int | None = None, **_) -> ParticleFlow:
    """One release of the K×B counts on K public directions (the strategy's pool; ``pool_size`` = K and
    ``bins`` = B, None: the public rule of n and the budget), then ``n_projections`` of them per step
    toward their released quantile functions. ``dataset_size``: the public size of the data set ``data``
    is a part of (its own size private), else len(data)."""
    n = data.shape[0] if dataset_size is None else dataset_size
    plan, bins = spec.release.resolve(steps=config.steps, dataset_size=n, dim=data.shape[1],
                                      n_projections=n_projections, privacy=privacy, pool_size=pool_size, bins=bins)
    target = histogram_target(data, privacy, plan, bins=bins, privacy_seed=privacy_seed, device=config.device,
                              dataset_size=dataset_size)
    if config.particle_cdf is None:  # the release is a quantile table: read the particles' ranks on a grid
        config = replace(config, particle_cdf="binned")
    directions = plan.n_projections  # K
    return ParticleFlow(target, Presampled(directions, min(n_projections, directions)), config,
                        callbacks=callbacks)
