"""Flows by method name: :func:`make_flow` checks what every flow needs and calls the builder that the
method's :class:`~swflow.methods.registry.MethodSpec` names; the central and local flows' builders live here."""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import torch

from ..kernels.drift import LOCAL, OneProcess
from .plan import RunPlan, resolve_fixed
from ..privacy import FixedNoiseTarget, PrivacySpec, check_rows, local_target, private_target, sharded_target
from ..simulate.callbacks import FlowCallback, ProgressBar
from ..simulate.flow import FlowConfig, ParticleFlow, Presampled, Resampled
from .registry import method as method_spec, sharded_methods

__all__ = ["make_flow", "build_flow", "build_central", "build_local"]


def make_flow(method: str, data: torch.Tensor, *, privacy: PrivacySpec, config: FlowConfig,
              n_projections: int, pool_size: int | None = None, batch_size: int | None = None,
              bins: int | None = None, privacy_seed: int | None = None, callbacks: Sequence[FlowCallback] = (),
              progress: bool = True, dataset_size: int | None = None) -> ParticleFlow:
    """A ready-to-run flow: strategy, calibrated private target and simulator.

    ``data`` (m, d) are the private rows in the flow's space: a tensor, or for dpswflow-hist a
    :class:`~swflow.privacy.rows.ChunkedRows` source such as :class:`~swflow.privacy.rows.StreamedRows` (rows on
    disk, counted in chunks). ``pool_size`` and ``bins`` are the histogram's K and B for dpswflow-hist (None:
    :func:`~swflow.privacy.histogram.histogram_shape` of the public n and budget). ``privacy_seed`` seeds the privacy
    noise (None: from the OS; ignored with ``secure_noise``). ``callbacks`` observe the run
    (:func:`swflow.simulate.callbacks.run_files` for a run directory); ``progress`` adds a progress bar.
    ``dataset_size``: a histogram of a part of a data set of this (public) size, whose own size is private
    (one class when labels are private, swflow.pipeline.conditional); the part may be empty.
    """
    spec = _check(method, data, privacy, part_of_larger=dataset_size is not None)
    plan = resolve_fixed(method, steps=config.steps, n_projections=n_projections,
                         dataset_size=data.shape[0] if dataset_size is None else dataset_size, dim=data.shape[1],
                         privacy=privacy, batch_size=batch_size, pool_size=pool_size, bins=bins,
                         step_size=config.step_size)
    return _build(spec, data, plan, privacy=privacy, config=config, privacy_seed=privacy_seed, callbacks=callbacks,
                  progress=progress, part_of_larger=dataset_size is not None)


def build_flow(data: torch.Tensor, plan: RunPlan, *, privacy: PrivacySpec, config: FlowConfig,
               privacy_seed: int | None = None, callbacks: Sequence[FlowCallback] = (), progress: bool = False,
               part_of_larger: bool = False, communicator: OneProcess = LOCAL) -> ParticleFlow:
    """The flow of a resolved ``plan`` (:func:`swflow.methods.plan.resolve`): the checks every flow needs, then the
    builder its method's registry entry names. ``part_of_larger``: ``data`` is a part of a data set of
    ``plan.dataset_size`` rows (see :func:`make_flow`'s ``dataset_size``). ``communicator``: where the
    particles live; a :class:`~swflow.simulate.distributed.ProcessGroup` makes ``data`` this rank's shard
    (``communicator.shard(plan.dataset_size)``) of the private rows, for the methods that shard."""
    spec = _check(plan.method, data, privacy, part_of_larger=part_of_larger)
    if communicator.sharded and not spec.sharded:
        raise ValueError(f"{plan.method} does not run sharded over processes; these do: "
                         f"{', '.join(sharded_methods())}")
    return _build(spec, data, plan, privacy=privacy, config=config, privacy_seed=privacy_seed, callbacks=callbacks,
                  progress=progress and communicator.rank == 0, part_of_larger=part_of_larger,
                  communicator=communicator)


def _build(spec, data, plan: RunPlan, *, privacy, config, privacy_seed, callbacks, progress, part_of_larger,
           communicator=LOCAL):
    callbacks = [*callbacks, *([ProgressBar()] if progress else [])]
    return spec.builder()(data, plan, privacy=privacy, config=config, privacy_seed=privacy_seed, callbacks=callbacks,
                          part_of_larger=part_of_larger, communicator=communicator)


def _check(method: str, data, privacy: PrivacySpec, *, part_of_larger: bool):
    """What every flow needs of its method, rows and budget; the method's registry entry."""
    spec = method_spec(method)
    if spec.kind != "flow":
        raise ValueError(f"{method} is a generator, not a flow: use swflow.methods.generators.make_generator")
    if part_of_larger and not spec.release.of_counts:
        raise ValueError(f"only a histogram release takes a part of a larger data set; {method} does not")
    from ..privacy.rows import ChunkedRows

    if isinstance(data, ChunkedRows):
        if not spec.release.of_counts:
            raise ValueError(f"{method} needs the private rows in memory; only dpswflow-hist reads them from disk in "
                             "chunks (its release is a sum over rows)")
    else:
        check_rows(data, name="private data", allow_empty=part_of_larger)
    spec.check_budget(private=privacy.private)  # eps = inf runs dpswflow-r / dpswflow noise-free
    return spec


def build_central(data: torch.Tensor, plan: RunPlan, *, privacy: PrivacySpec, config: FlowConfig,
                  privacy_seed: int | None, callbacks: list[FlowCallback], communicator: OneProcess = LOCAL,
                  **_) -> ParticleFlow:
    """The flows of 004: a release of a batch's projections on fresh directions per step (dpswflow-r; swf
    without noise), or one release of every row on a pool of directions (dpswflow). swf with a
    ``smoothing_std`` σ > 0 is 004 §4.1's smoothed flow without privacy: both projected sets smoothed by σ."""
    release = method_spec(plan.method).release
    strategy = (Resampled(plan.n_projections) if release.per_step  # fresh each step
                else Presampled(plan.release.n_projections, plan.n_projections))  # steps pick from the released pool
    smoothed = not release.private and bool(config.smoothing_std)
    if communicator.sharded and smoothed:
        raise ValueError("swf with a smoothing_std (both projected sets smoothed) runs in one process")
    if communicator.sharded:  # data: this rank's rows; every rank draws the same batches from one seed
        seed, known = communicator.shared_privacy_seed(privacy_seed)
        target = sharded_target(data, privacy, plan.release, offset=communicator.shard(plan.dataset_size)[0],
                                privacy_seed=seed, seed_known=known)
    elif smoothed:
        target = FixedNoiseTarget(data if config.device is None else data.to(config.device), config.smoothing_std,
                                  seed=privacy_seed, batch_size=plan.release.sample_size)
    else:
        target = private_target(data, privacy, plan.release, privacy_seed=privacy_seed, device=config.device)
    return ParticleFlow(target, strategy, config, callbacks=callbacks, communicator=communicator)


def build_local(data: torch.Tensor, plan: RunPlan, *, privacy: PrivacySpec, config: FlowConfig,
                privacy_seed: int | None, callbacks: list[FlowCallback], **_) -> ParticleFlow:
    """LDP flow: one local Gaussian release of every row, then a flow whose target side is already
    noisy and whose particle side is smoothed with the same σ (what makes it deconvolve)."""
    target = local_target(data, privacy, privacy_seed=privacy_seed, batch_size=plan.batch_size, device=config.device)
    if config.smoothing_std is None:  # the particle side gets the local release's σ
        config = replace(config, smoothing_std=target.local_noise_std)
    return ParticleFlow(target, Resampled(plan.n_projections), config, callbacks=callbacks)
