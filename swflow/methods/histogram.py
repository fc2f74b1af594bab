"""dpswflow-hist: one noisy release of the K×B sliced histogram, then a flow toward its quantile functions.

The method is this module plus its registration (swflow.methods.registry); the release itself lives in the
privacy package (swflow/privacy/histogram.py), like every method's.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from ..kernels.drift import LOCAL, OneProcess
from .plan import RunPlan
from ..privacy import PrivacySpec, histogram_target
from ..privacy.targets import sharded_histogram_target
from ..simulate.callbacks import FlowCallback
from ..simulate.flow import FlowConfig, ParticleFlow, Presampled

__all__ = ["build"]


def build(data: torch.Tensor, plan: RunPlan, *, privacy: PrivacySpec, config: FlowConfig, privacy_seed: int | None,
          callbacks: list[FlowCallback], part_of_larger: bool = False, communicator: OneProcess = LOCAL,
          **_) -> ParticleFlow:
    """One release of the plan's K×B counts on K public directions (``plan.release.n_projections`` = K,
    ``plan.bins`` = B), then ``plan.n_projections`` of them per step toward their released quantile functions.
    ``part_of_larger``: ``data`` is a part of a data set of the plan's (public) size, its own size private.
    A sharded ``communicator``: ``data`` is this rank's shard; the exact counts are summed over the ranks."""
    if communicator.sharded:
        seed, known = communicator.shared_privacy_seed(privacy_seed)
        target = sharded_histogram_target(data, privacy, plan.release, bins=plan.bins, privacy_seed=seed,
                                          seed_known=known)
    else:
        target = histogram_target(data, privacy, plan.release, bins=plan.bins, privacy_seed=privacy_seed,
                                  device=config.device, dataset_size=plan.dataset_size if part_of_larger else None)
    if config.particle_cdf is None:  # the release is a quantile table: read the particles' ranks on a grid
        config = replace(config, particle_cdf="binned")
    directions = plan.release.n_projections  # K; a step uses plan.n_projections of them
    strategy = Presampled(directions, min(plan.n_projections, directions))
    return ParticleFlow(target, strategy, config, callbacks=callbacks, communicator=communicator)
