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

__all__ = ["run_flow_to_dir", "run_generator_to_dir", "write_outputs"]


def _chain(first, rest):
    yield first
    yield from rest


def run_flow_to_dir(method: str, data: torch.Tensor, out: Path, *, privacy: PrivacySpec, config: FlowConfig,
                    n_projections: int, pool_size: int | None = None, batch_size: int | None = None,
                    bins: int | None = None, privacy_seed: int | None = None,
                    decoder: Callable[[np.ndarray], np.ndarray] | None = None,
                    run_config: dict | None = None, progress: bool = True,
                    dataset_size: int | None = None) -> tuple[FlowResult, PrivacyReport]:
    """Run a flow method on private rows ``data`` (m, d) and write the contract's files into ``out``
    (``dataset_size``: see :func:`~swflow.methods.make_flow`)."""
    flow = make_flow(method, data, privacy=privacy, config=config, n_projections=n_projections,
                     pool_size=pool_size, batch_size=batch_size, bins=bins, privacy_seed=privacy_seed,
                     callbacks=run_files(out, sketch=release_sketch(method)), progress=progress,
                     dataset_size=dataset_size)
    result = flow.run()
    report = flow.privacy_report(method, run_config)
    write_outputs(out, result.particles.cpu().numpy(), report, decoder)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    return result, report


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
