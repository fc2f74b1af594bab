"""A flow run written to a directory that follows the output contract (docs/getting-started.md, "What a run
directory holds").

privacy.json, samples.h5, trajectory.h5, samples.png; a checkpoint.pt while the run is going
(it holds the privacy-noise RNG state, so it is deleted once the run has finished).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import torch

from ..evaluate.animate import save_grid, save_scatter
from ..io.hdf5 import write_samples
from ..methods.plan import RunPlan
from ..methods.registry import release_sketch
from ..privacy import PrivacyReport, write_report
from ..simulate.callbacks import Checkpointer, run_files
from ..simulate.flow import FlowConfig
from .fitting import RunResult, fit
from .settings import Settings

__all__ = ["run_adapted_flow_to_dir", "run_flow_to_dir", "run_generator_to_dir", "write_outputs"]


def _chain(first, rest):
    yield first
    yield from rest


def run_flow_to_dir(settings: Settings, data, out: Path, *, plan: RunPlan | None = None,
                    config: FlowConfig | None = None, decoder: Callable[[np.ndarray], np.ndarray] | None = None,
                    run_config: dict | None = None, progress: bool = True, threads: int | None = None,
                    part_of_larger: bool = False) -> RunResult:
    """Fit the flow of ``settings`` on private rows ``data`` (m, d) (:func:`swflow.pipeline.fitting.fit`, with ``plan``,
    ``config``, ``threads`` and ``part_of_larger`` as there) and write the contract's files into ``out``; an
    interrupted run continues from ``out/checkpoint.pt``."""
    result = fit(settings, data, plan=plan, config=config, run_config=run_config, progress=progress,
                 threads=threads, part_of_larger=part_of_larger,
                 callbacks=run_files(out, sketch=release_sketch(settings.method, settings.sketch)))
    write_outputs(out, result.particles.cpu().numpy(), result.report, decoder)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return result


ADAPT_NOTE = ("the decoder was adapted to the private images by DP-SGD (Opacus) {objective}: {steps} steps on batches "
              "of {batch} of {n}, each image's gradient clipped to norm {clip:g} (a replaced image moves a step's sum "
              "by 2C), Gaussian noise of multiplier {z:.4g} relative to 2C; composed with the release above into the "
              "one (epsilon, delta). The adapted decoder (decoder.pt, decoder.json) is part of this run's output")
ADAPT_OBJECTIVE_NOTE = {
    "pixel": "on the decoder's own loss (4x-pooled L1 to each image, code term)",
    "critic": "on a critic of the private images, which the decoder learned against from the released codes alone "
              "(post-processing)"}


def with_budget_split(histogram: PrivacyReport, composed: PrivacyReport, share: float) -> PrivacyReport:
    """``composed`` with a note of what each release of an adapted run costs, as its accountant composes them.
    adapt_share sets the histogram's own target, (1 − share)·ε, under the histogram's exact accountant; the run's ε
    composes both releases under another (RDP), which charges the histogram more on its own, so the DP-SGD stage's
    part of the cost is not share·ε. Both figures are stated."""
    from ..privacy import MechanismEvent, accountant_for

    events = tuple(MechanismEvent(**e) for e in composed.ledger)
    accountant = accountant_for(events, adjacency=composed.adjacency)
    charged = accountant.epsilon(events[:1], delta=composed.delta_accountant)
    added = composed.epsilon - charged
    note = (f"adapt_share = {share:g} calibrates the histogram alone to (1 - {share:g}) x epsilon = "
            f"{(1 - share) * composed.target_epsilon:.4g} under its own exact accountant (alone it would claim "
            f"{histogram.epsilon:.4f}). The run's epsilon composes both releases under {accountant.name}, which "
            f"charges the histogram {charged:.4f} on its own; the DP-SGD stage adds {added:.4f}, "
            f"{100 * added / composed.epsilon:.1f}% of the composed {composed.epsilon:.4f}. The share sets the "
            "histogram's target, not the DP-SGD stage's part of the cost")
    return composed.with_notes(budget_split=note)


def adapt_note(settings, event, multiplier: float, *, secure: bool = False) -> str:
    """The report's sentence for the adaptation of ``settings`` (AdaptSettings) that released ``event``; ``secure``:
    what its noise is under secure_noise."""
    from ..privacy.noise import SECURE_DP_SGD_CAVEAT

    note = ADAPT_NOTE.format(objective=ADAPT_OBJECTIVE_NOTE[settings.adapt_objective], steps=settings.adapt_steps,
                             batch=event.sample_size, n=event.dataset_size, clip=settings.adapt_clip, z=multiplier)
    return f"{note}. {SECURE_DP_SGD_CAVEAT}" if secure else note


def run_adapted_flow_to_dir(settings: Settings, data: torch.Tensor, images: np.ndarray, out: Path, *, plan: RunPlan,
                            config: FlowConfig, model, meta: dict, run_config: dict | None = None,
                            progress: bool = True, threads: int | None = None) -> PrivacyReport:
    """A histogram flow on the private codes ``data`` and a DP-SGD adaptation of autoencoder ``model``'s decoder
    on the private ``images``, in one budget (autoencoders/adapt.py): the flow, the adapted decoder
    (decoder.pt and decoder.json in ``out``), the samples it decodes, and privacy.json with both releases. ``threads``: torch
    threads while the flow runs, as in :func:`run_flow_to_dir` (the adaptation keeps the process's count)."""
    from dataclasses import replace

    from autoencoders.adapt import adapt_decoder, split_budget
    from ..privacy import NoiseSource, compose
    from ..methods.registry import method as method_spec

    method, privacy_seed = settings.method, settings.privacy_seed
    if not method_spec(method).release.of_counts:
        raise ValueError(f"the decoder's adaptation shares the budget with a histogram release: use dpswflow-hist, "
                         f"not {method}")
    spec = settings.privacy
    histogram_spec, multiplier = split_budget(spec, plan.release, settings.adapt)
    fitted = fit(replace(settings, privacy=histogram_spec), data, plan=plan, config=config, run_config=run_config,
                 callbacks=run_files(out, sketch=release_sketch(method, settings.sketch)), progress=progress,
                 threads=threads)
    particles = fitted.particles
    noise = NoiseSource(None if privacy_seed is None else privacy_seed + 7919, secure=spec.secure_noise)
    adapted, event, _ = adapt_decoder(model, images, particles.cpu().numpy(), multiplier=multiplier,
                                      settings=settings.adapt, adjacency=spec.adjacency, noise=noise,
                                      seed=config.seed, progress=progress)
    a = settings.adapt
    report = with_budget_split(fitted.report, compose(fitted.report, [event], target_epsilon=spec.epsilon,
                                                      note=adapt_note(a, event, multiplier, secure=spec.secure_noise)),
                               a.adapt_share)
    from autoencoders.train import publish_checkpoint

    decoder_meta = {**{key: meta[key] for key in ("dataset", "channels", "image_shape", "latent", "latent_norm",
                                                  "architecture", "decoder", "split", "source", "excluded_classes")
                       if key in meta},
                    "name": "decoder", "trained_on": (f"the public images of {meta['name']}, then the private images of "
                                                      f"this run by DP-SGD: {report.statement}"),
                    "adapted_from": {"name": meta["name"], "weights_sha256": meta["weights_sha256"]},
                    "adaptation": {**{key: getattr(a, key) for key in (
                                       "adapt_objective", "adapt_steps", "adapt_batch_size", "adapt_lr",
                                       "adapt_critic_lr", "adapt_critic_width", "adapt_clip", "adapt_share")},
                                   "noise_multiplier": multiplier}}
    decoder_meta = publish_checkpoint(adapted, decoder_meta, out / "decoder.pt")
    report = replace(report, run_config={**report.run_config, "decoder": "adapted",
                                         "decoder_sha256": decoder_meta["weights_sha256"]})
    write_outputs(out, particles.cpu().numpy(), report, adapted.decode_images)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return report


def run_generator_to_dir(settings: Settings, data, out: Path, *, plan: RunPlan | None = None,
                         decoder: Callable[[np.ndarray], np.ndarray] | None = None, run_config: dict | None = None,
                         progress: bool = True, checkpoint_every: int = 50) -> PrivacyReport:
    """Fit the generator baseline of ``settings`` on private rows ``data`` and write privacy.json, samples.h5
    (``settings.flow.n_particles`` samples, seed ``settings.flow.seed``) and samples.png.

    Training checkpoints to ``out/checkpoint.pt`` (it holds the privacy-noise state: deleted at the end),
    so an interrupted run continues from there when called again on the same ``out``."""
    result = fit(settings, data, plan=plan, progress=progress,
                 callbacks=[Checkpointer(out / "checkpoint.pt", every=checkpoint_every)],
                 run_config={"n_samples": settings.flow.n_particles, **(run_config or {})})
    samples = result.generator.sample(settings.flow.n_particles, seed=settings.flow.seed)
    write_outputs(out, samples.cpu().numpy(), result.report, decoder)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return result.report


def write_outputs(out: Path, latents, report: PrivacyReport, decoder, labels: np.ndarray | None = None) -> None:
    """privacy.json, samples.h5 (decoded images and labels when given; its config is the report's
    run_config) and samples.png. ``latents`` is an (n, d) array or an iterable of chunks (streamed to
    disk; the picture shows the first chunk)."""
    write_report(report, out)
    if not isinstance(latents, np.ndarray):
        chunks = iter(latents)
        first = next(chunks)
        latents = first
        stream = _chain(first, chunks)
    else:
        stream = latents
    images = write_samples(out / "samples.h5", stream, config=report.run_config, decoder=decoder, labels=labels)
    if images is not None:
        # one row of ten per class for labelled samples
        shown = (images[:100] if labels is None else
                 images[np.concatenate([np.flatnonzero(labels == c)[:10] for c in np.unique(labels)])])
        save_grid(shown, out / "samples.png")
    else:
        save_scatter(latents, out / "samples.png", title=f"{report.method}: {report.statement}")
