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

from .animate import save_grid, save_scatter
from .callbacks import release_sketch, run_files
from .flow import FlowConfig, FlowResult
from .io import write_samples
from .methods import make_flow
from .privacy import PrivacyReport, PrivacySpec, privacy_report, write_report
from .threads import torch_threads

__all__ = ["run_adapted_flow_to_dir", "run_flow_to_dir", "run_generator_to_dir", "write_outputs"]


def _chain(first, rest):
    yield first
    yield from rest


def run_flow_to_dir(method: str, data: torch.Tensor, out: Path, *, privacy: PrivacySpec, config: FlowConfig,
                    n_projections: int, pool_size: int | None = None, batch_size: int | None = None,
                    bins: int | None = None, privacy_seed: int | None = None,
                    decoder: Callable[[np.ndarray], np.ndarray] | None = None,
                    run_config: dict | None = None, progress: bool = True,
                    dataset_size: int | None = None, threads: int | None = None) -> tuple[FlowResult, PrivacyReport]:
    """Run a flow method on private rows ``data`` (m, d) and write the contract's files into ``out``
    (``dataset_size``: see :func:`~swflow.methods.make_flow`). ``threads``: torch threads while the flow runs
    (:func:`swflow.threads.torch_threads`; None, the default, leaves the process's setting alone)."""
    flow = make_flow(method, data, privacy=privacy, config=config, n_projections=n_projections,
                     pool_size=pool_size, batch_size=batch_size, bins=bins, privacy_seed=privacy_seed,
                     callbacks=run_files(out, sketch=release_sketch(method)), progress=progress,
                     dataset_size=dataset_size)
    with torch_threads(threads):
        result = flow.run()
    report = flow.privacy_report(method, run_config)
    write_outputs(out, result.particles.cpu().numpy(), report, decoder)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return result, report


ADAPT_NOTE = ("the decoder was fine-tuned on the private images by DP-SGD (Opacus): {steps} steps on batches of {batch} "
              "of {n}, each image's gradient clipped to norm {clip:g} (a replaced image moves a step's sum by 2C), "
              "Gaussian noise of multiplier {z:.4g} relative to 2C; composed with the release above into the one "
              "(epsilon, delta). The adapted decoder (decoder.pt, decoder.json) is part of this run's output")


def run_adapted_flow_to_dir(method: str, data: torch.Tensor, images: np.ndarray, out: Path, *, settings, plan,
                            config: FlowConfig, model, meta: dict, privacy_seed: int | None = None,
                            run_config: dict | None = None, progress: bool = True,
                            threads: int | None = None) -> PrivacyReport:
    """A histogram flow on the private codes ``data`` and a DP-SGD adaptation of autoencoder ``model``'s decoder
    on the private ``images``, in one budget (swflow/adapt.py): the flow, the adapted decoder (decoder.pt and
    decoder.json in ``out``), the samples it decodes, and privacy.json with both releases. ``threads``: torch
    threads while the flow runs, as in :func:`run_flow_to_dir` (the adaptation keeps the process's count)."""
    from dataclasses import replace

    from .adapt import adapt_decoder, split_budget
    from .privacy import NoiseSource, compose
    from .registry import method as method_spec

    if not method_spec(method).release.of_counts:
        raise ValueError(f"the decoder's adaptation shares the budget with a histogram release: use dpswflow-hist, "
                         f"not {method}")
    spec = settings.privacy
    histogram_spec, multiplier = split_budget(spec, plan.release, settings.adapt)
    flow = make_flow(method, data, privacy=histogram_spec, config=config, n_projections=plan.n_projections,
                     pool_size=plan.release.n_projections, bins=plan.bins, privacy_seed=privacy_seed,
                     callbacks=run_files(out, sketch=release_sketch(method)), progress=progress)
    with torch_threads(threads):
        particles = flow.run().particles
    noise = NoiseSource(None if privacy_seed is None else privacy_seed + 7919, secure=spec.secure_noise)
    adapted, event, _ = adapt_decoder(model, images, multiplier=multiplier, settings=settings.adapt,
                                      adjacency=spec.adjacency, noise=noise, privacy_seed=privacy_seed,
                                      secure=spec.secure_noise, seed=config.seed, progress=progress)
    a = settings.adapt
    report = compose(flow.privacy_report(method, run_config), [event], target_epsilon=spec.epsilon,
                     note=ADAPT_NOTE.format(steps=a.adapt_steps, batch=event.sample_size, n=event.dataset_size,
                                            clip=a.adapt_clip, z=multiplier))
    from autoencoders.train import publish_checkpoint

    decoder_meta = {**{key: meta[key] for key in ("dataset", "channels", "image_shape", "latent", "latent_norm",
                                                  "architecture", "decoder", "split", "source", "excluded_classes")
                       if key in meta},
                    "name": "decoder", "trained_on": (f"the public images of {meta['name']}, then the private images of "
                                                      f"this run by DP-SGD: {report.statement}"),
                    "adapted_from": {"name": meta["name"], "weights_sha256": meta["weights_sha256"]},
                    "adaptation": {**{key: getattr(a, key) for key in ("adapt_steps", "adapt_batch_size", "adapt_lr",
                                                                     "adapt_clip", "adapt_share")},
                                   "noise_multiplier": multiplier}}
    decoder_meta = publish_checkpoint(adapted, decoder_meta, out / "decoder.pt")
    report = replace(report, run_config={**report.run_config, "decoder": "adapted",
                                         "decoder_sha256": decoder_meta["weights_sha256"]})
    write_outputs(out, particles.cpu().numpy(), report, adapted.decode_images)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return report


def run_generator_to_dir(method: str, model, out: Path, *, n_samples: int, seed: int = 0,
                         decoder: Callable[[np.ndarray], np.ndarray] | None = None, run_config: dict | None = None,
                         progress: bool = True, checkpoint_every: int = 50) -> PrivacyReport:
    """Fit a generator baseline (it holds its private target) and write privacy.json, samples.h5, samples.png.

    Training checkpoints to ``out/checkpoint.pt`` (it holds the privacy-noise state: deleted at the end),
    so an interrupted run continues from there when called again on the same ``out``."""
    model.fit(progress=progress, checkpoint_path=out / "checkpoint.pt", checkpoint_every=checkpoint_every)
    config_record = {"method": method, "n_samples": n_samples, **(run_config or {})}
    report = privacy_report(method, model.target, run_config=config_record)
    write_outputs(out, model.sample(n_samples, seed=seed).cpu().numpy(), report, decoder)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return report


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
