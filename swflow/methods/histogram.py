"""dpswflow-hist: one noisy release of the K×B sliced histogram, then a flow toward its quantile functions.

The method is this module plus its registration (swflow.methods.registry); the release itself lives in the
privacy package (swflow/privacy/histogram.py), like every method's.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from ..pipeline.plan import RunPlan
from ..privacy import PrivacySpec, histogram_target
from ..simulate.callbacks import FlowCallback
from ..simulate.flow import FlowConfig, ParticleFlow, Presampled

__all__ = ["build", "simulator_parts"]


def simulator_parts(plan: RunPlan, config: FlowConfig) -> tuple[Presampled, FlowConfig]:
    """The projection strategy (``plan.n_projections`` of the K released directions a step) and the simulator
    configuration of a histogram flow, in one process or sharded (swflow.simulate.distributed)."""
    if config.particle_cdf is None:  # the release is a quantile table: read the particles' ranks on a grid
        config = replace(config, particle_cdf="binned")
    directions = plan.release.n_projections  # K
    return Presampled(directions, min(plan.n_projections, directions)), config


def build(data: torch.Tensor, plan: RunPlan, *, privacy: PrivacySpec, config: FlowConfig, privacy_seed: int | None,
          callbacks: list[FlowCallback], part_of_larger: bool = False, **_) -> ParticleFlow:
    """One release of the plan's K×B counts on K public directions (``plan.release.n_projections`` = K,
    ``plan.bins`` = B), then ``plan.n_projections`` of them per step toward their released quantile functions.
    ``part_of_larger``: ``data`` is a part of a data set of the plan's (public) size, its own size private."""
    target = histogram_target(data, privacy, plan.release, bins=plan.bins, privacy_seed=privacy_seed,
                              device=config.device, dataset_size=plan.dataset_size if part_of_larger else None)
    strategy, config = simulator_parts(plan, config)
    return ParticleFlow(target, strategy, config, callbacks=callbacks)
