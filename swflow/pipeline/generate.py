"""A run into a folder: :func:`generate` is what `swflow generate` calls once it has its settings, its request and
the private data (:func:`swflow.sources.open_source`), on one process or under torchrun.

    open_source(source) -> PrivateData ─┐
    Settings (flags, TOML, keywords) ───┼─> generate -> the run folder (privacy.json, samples, ...)
    RunRequest (where, how it reports) ─┘

Every kind of data arrives as the same PrivateData, and every run is fitted by swflow.pipeline.fitting.fit.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..core.errors import SettingsError
from ..core.sources import PrivateData
from ..io.outdir import staged
from ..io.resources import check_run
from ..methods.registry import method
from ..simulate.flow import FlowDiverged
from ..simulate.threads import step_threads

__all__ = ["RunRequest", "Generated", "generate"]


@dataclass(frozen=True)
class RunRequest:
    """What a run is asked besides its settings: where it goes and how it reports. Built once from the flags."""

    out: str
    inputs: tuple = ()  # the private files: an output folder may not hold them
    overwrite: bool = False
    resume: bool = False
    quiet: bool = False
    conditional: bool = False
    labels_public: bool = False
    label_set: tuple[int, ...] = ()  # the public label set of a conditional run
    shard_mode: str = "exact"


@dataclass(frozen=True)
class Generated:
    """A finished run: its privacy report, the files it wrote (as a phrase), its seconds and a note for its user."""

    report: object
    files: str
    seconds: float
    note: str = ""

    def summary(self, out: str) -> str:
        note = f"\n  {self.note}" if self.note else ""
        return f"{self.report.statement}{note}\nwrote {out}/ ({self.files}) in {self.seconds:.1f} s"


def generate(run, request: RunRequest, data: PrivateData) -> Generated | None:
    """Fit ``run`` (Settings) on ``data`` and write the run folder ``request.out``. Under torchrun every rank calls
    this; rank 0 returns the result and the others None. Raises SettingsError for settings this machine cannot
    run, ValueError for bad input."""
    try:
        plan = run.plan(data.rows.shape[0], data.rows.shape[1])
    except ValueError as err:
        raise SettingsError(str(err)) from None
    if not run.flow.record_every:  # about 50 trajectory frames over the run
        run = replace(run, flow=replace(run.flow, record_every=max(1, plan.steps // 50)))
    meta = getattr(data.codec, "meta", None)
    image_values = 0 if meta is None else math.prod(int(size) for size in meta["image_shape"])
    spec = method(run.method)
    footprint = spec.release.footprint(plan, sketch=64 if run.sketch is None else run.sketch, flow=spec.kind == "flow",
                                       streamed_chunk=getattr(data.rows, "chunk_rows", None))
    try:
        check_run(settings=run, plan=plan, dim=data.rows.shape[1], image_values=image_values, out=request.out,
                  footprint=footprint, flow=spec.kind == "flow")
    except ValueError as err:
        raise SettingsError(str(err)) from None
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # started by torchrun: rank 0 owns the run folder
        from .distributed import generate_distributed

        if run.adapt.adapt_decoder:
            raise ValueError("--adapt-decoder runs on one process (DP-SGD through Opacus): run it without torchrun")
        t0 = time.perf_counter()
        done = generate_distributed(run, request, data, plan)
        return None if done is None else Generated(done[0], f"on {done[1]} ranks", time.perf_counter() - t0)
    t0 = time.perf_counter()
    try:
        with staged(request.out, overwrite=request.overwrite, resume=request.resume, inputs=request.inputs) as out:
            if run.adapt.adapt_decoder:
                report, files = _adapted(out, run, request, data, plan)
            elif spec.kind == "generator":
                report, files = _generator(out, run, request, data, plan)
            elif request.conditional:
                report, files = _conditional(out, run, request, data, plan)
            else:
                report, files = _flow(out, run, request, data, plan)
    except FlowDiverged as err:
        raise FlowDiverged(f"{err}. {_after_divergence(rewound=getattr(err, 'rewound', False))}") from None
    return Generated(report, files, time.perf_counter() - t0, note=report.notes.get("labels_note", "")
                     if request.conditional else "")


def _after_divergence(*, rewound: bool) -> str:
    """What a diverged run left, and the way on that spends no privacy again where there is one: ``rewound``, its
    checkpoint was rewound to a release made before the first step (swflow.simulate.callbacks.Checkpointer)."""
    if not rewound:  # releases during the steps: no step 0 holds them all
        return ("Its releases so far are in the unfinished folder: --overwrite starts afresh, with new releases "
                "(a second use of the private data)")
    return ("Its release is kept in the unfinished folder, rewound to step 0: rerun the same command with --resume "
            "and a smaller --step-size to flow again from it, at no further privacy cost (--overwrite would "
            "release again: a second use of the private data)")


def _flow(out: Path, run, request: RunRequest, data: PrivateData, plan):
    from ..evaluate.animate import animate_trajectory
    from .run import run_flow_to_dir

    config = run.flow_config(plan)
    report = run_flow_to_dir(run, data.rows, out, plan=plan, config=config, decoder=data.codec.decode,
                             run_config=data.run_config, progress=not request.quiet,
                             threads=step_threads(config.n_particles, plan.n_projections)).report
    if data.codec.decode is not None:
        animate_trajectory(out / "trajectory.h5", out / "flow.gif", decode=data.codec.decode)
    return report, "privacy.json, samples.h5, trajectory.h5, samples.png"


def _generator(out: Path, run, request: RunRequest, data: PrivateData, plan):
    from .run import run_generator_to_dir

    report = run_generator_to_dir(run, data.rows, out, plan=plan, decoder=data.codec.decode, progress=not request.quiet,
                                  checkpoint_every=run.flow.checkpoint_every,
                                  run_config={**data.run_config, "steps": plan.steps,
                                              "batch_size": plan.rows_per_step, **run.option_values()})
    return report, "privacy.json, samples.h5, samples.png"


def _conditional(out: Path, run, request: RunRequest, data: PrivateData, plan):
    from .conditional import run_conditional_to_dir

    if method(run.method).kind != "flow":
        raise ValueError(f"--conditional runs one flow per class; {run.method} is not a flow method")
    if data.labels is None:
        raise ValueError("--conditional needs labelled records (a --dataset: its labels split the private rows)")
    config = run.flow_config(plan)
    report = run_conditional_to_dir(run, data.rows, data.labels, out, classes=request.label_set, plan=plan,
                                    config=config, labels_public=request.labels_public, decoder=data.codec.decode,
                                    run_config=data.run_config, progress=not request.quiet,
                                    threads=step_threads(config.n_particles, plan.n_projections))
    return report, "privacy.json, samples.h5 with labels, samples.png; one flow per class in classes/"


def _adapted(out: Path, run, request: RunRequest, data: PrivateData, plan):
    """--adapt-decoder: the histogram flow and a DP-SGD adaptation of the decoder, one budget."""
    from .run import run_adapted_flow_to_dir

    if data.records is None or data.codec.name != "autoencoder" or request.conditional:
        raise ValueError("--adapt-decoder fine-tunes an autoencoder's sampling decoder on the private images: it "
                         "needs --dataset or --images, the default --decoder, and no --conditional")
    config = run.flow_config(plan)
    report = run_adapted_flow_to_dir(run, data.rows, data.records, out, plan=plan, config=config,
                                     model=data.codec.model, meta=data.codec.meta, run_config=data.run_config,
                                     progress=not request.quiet,
                                     threads=step_threads(config.n_particles, plan.n_projections))
    return report, ("privacy.json with both releases, the adapted decoder decoder.pt, samples.h5, trajectory.h5, "
                    "samples.png")
