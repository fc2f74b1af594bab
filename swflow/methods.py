"""The flow methods by name: one registry for the Python API and ``swflow generate --method``."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch

from .flow import FlowConfig, ParticleFlow, Presampled, Resampled
from .registry import check_budget
from .privacy import PrivacySpec, check_rows, local_target, private_target

__all__ = ["FLOW_METHODS", "FlowMethod", "make_flow"]


@dataclass(frozen=True)
class FlowMethod:
    name: str
    strategy: str  # 'resampled' | 'presampled' | 'local'
    private: bool


# summaries live in swflow.registry, the list shared with the CLI and the estimator
FLOW_METHODS = {
    "swf": FlowMethod("swf", "resampled", False),
    "dpswflow-r": FlowMethod("dpswflow-r", "resampled", True),
    "dpswflow": FlowMethod("dpswflow", "presampled", True),
    "ldp-flow": FlowMethod("ldp-flow", "local", True),
}


def make_flow(method: str, data: torch.Tensor, *, privacy: PrivacySpec, config: FlowConfig,
              n_projections: int, pool_size: int | None = None, batch_size: int | None = None,
              privacy_seed: int | None = None, trajectory_path: str | Path | None = None,
              checkpoint_path: str | Path | None = None, model_path: str | Path | None = None,
              sketch: int | None = 64, progress: bool = True) -> ParticleFlow:
    """A ready-to-run flow: strategy, calibrated private target and simulator.

    ``data`` (m, d) are the private rows in the flow's space. ``privacy_seed`` seeds the privacy
    noise (None: from the OS; ignored with ``secure_noise``). ``model_path`` records each step's
    release (directions, σ, a ``sketch``-level quantile sketch of the noisy values) for
    :class:`swflow.model.FlowModel`.
    """
    if method not in FLOW_METHODS:
        raise ValueError(f"unknown flow method {method!r}; choose one of {sorted(FLOW_METHODS)}")
    spec = FLOW_METHODS[method]
    check_rows(data, name="private data")
    check_budget(method, private=privacy.private)  # eps = inf runs dpswflow-r / dpswflow noise-free
    if spec.strategy == "local":
        return _local_flow(data, privacy=privacy, config=config, n_projections=n_projections, batch_size=batch_size,
                           privacy_seed=privacy_seed, trajectory_path=trajectory_path,
                           checkpoint_path=checkpoint_path, model_path=model_path, sketch=sketch, progress=progress)
    if spec.strategy == "resampled":
        strategy = Resampled(n_projections)
    else:
        strategy = Presampled(pool_size if pool_size is not None else n_projections, n_projections)
    plan = strategy.plan(steps=config.steps, dataset_size=data.shape[0], batch_size=batch_size,
                         dim=data.shape[1])
    target = private_target(data, privacy, plan, privacy_seed=privacy_seed, device=config.device)
    return ParticleFlow(target, strategy, config, trajectory_path=trajectory_path,
                        checkpoint_path=checkpoint_path, model_path=model_path, sketch=sketch, progress=progress)


def _local_flow(data: torch.Tensor, *, privacy: PrivacySpec, config: FlowConfig, n_projections: int,
                batch_size: int | None, privacy_seed: int | None, trajectory_path, checkpoint_path,
                model_path, sketch: int | None, progress: bool) -> ParticleFlow:
    """LDP flow: one local Gaussian release of every row, then a flow whose target side is already
    noisy and whose particle side is smoothed with the same σ (what makes it deconvolve)."""
    target = local_target(data, privacy, privacy_seed=privacy_seed, batch_size=batch_size, device=config.device)
    if config.smoothing_std is None:  # the particle side gets the local release's σ
        config = replace(config, smoothing_std=target.local_noise_std)
    return ParticleFlow(target, Resampled(n_projections), config, trajectory_path=trajectory_path,
                        checkpoint_path=checkpoint_path, model_path=model_path, sketch=sketch, progress=progress)
