"""Class-conditional generation: one flow per class on that class's private records.

Two readings of the labels, stated in privacy.json:

* **Labels private (default).** Neighbouring data sets differ in one whole record, its label
  included, so the class sizes are private too. Only a release of counts can then be split by class
  without publishing the class sizes: every class of the public label set (the data set's classes,
  or the population's) gets its own sliced histogram, with the same K and B (a public rule of n and
  the number of classes) and the same noise σ = z·√(2K), *empty classes included*. A record that
  changes within its class moves 2K counts of one histogram; one that changes class moves K counts
  of each of two histograms (one out, one in). Either way the noisy histograms of all the classes
  together are one Gaussian mechanism of multiplier z: ‖Δ/σ‖² = 2K/σ² = (K + K)/σ² = 1/z². The class
  sizes are never used: each class's flow runs the requested number of particles, and the output
  keeps each class's share as estimated from its noisy counts (post-processing).
* **Labels public (``labels_public=True``).** Neighbours differ in one record's features within its
  class; labels and exact class counts are public (they set each class's particle share and batch,
  and appear in the report). Every record touches one flow only: parallel composition, (max ε_c,
  max δ_c). Any flow method works; each class keeps the unconditional run's step count and sample
  rate (batch_c = batch · n_c / n).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from ..core.config import COMPOSITIONS, LABELS_PRIVATE, LABELS_PUBLIC, PUBLIC_ADJACENCY
from ..io.hdf5 import read_samples
from ..privacy import PrivacyReport, PrivacySpec, statement
from ..simulate.flow import FlowConfig
from ..methods.plan import RunPlan
from .run import run_flow_to_dir, write_outputs
from .settings import Settings

__all__ = ["ClassRun", "plan_classes", "run_conditional_to_dir", "combine", "class_shares", "estimated_size",
           "LABELS_PUBLIC", "LABELS_PRIVATE", "PUBLIC_ADJACENCY", "COMPOSITIONS"]

PUBLIC_NOTE = ("Labels and class counts are treated as public (--labels-public): neighbouring data sets differ in "
               "one record's features, not its label. A label change would touch two class flows and two class "
               "sizes; that is not accounted.")
PRIVATE_NOTE = ("Labels are private: a neighbour may change one record's label. Every class of the public label "
                "set has a histogram with the same K, B and noise sigma = z * sqrt(2K), so moving a record between "
                "two classes (K counts out of one, K into the other) or within one (2K counts) is one Gaussian "
                "mechanism of multiplier z over all the classes. Class sizes are never published: each class's "
                "share of the samples is estimated from its noisy counts (estimated_size, post-processing).")


def class_shares(counts: np.ndarray, total: int, *, at_least_one: bool = True) -> np.ndarray:
    """Split ``total`` into integer shares proportional to ``counts`` (largest remainders); each ≥ 1 when
    ``at_least_one`` (exact public counts), else a class estimated at 0 gets nothing."""
    counts = np.clip(np.asarray(counts, dtype=np.float64), 0.0, None)
    if counts.sum() <= 0:
        counts = np.ones_like(counts)
    exact = total * counts / counts.sum()
    shares = np.floor(exact).astype(int)
    for i in np.argsort(exact - shares)[::-1][: total - shares.sum()]:
        shares[i] += 1
    return np.maximum(shares, 1) if at_least_one else shares


@dataclass(frozen=True)
class ClassRun:
    """One class's flow: which rows, and what differs from the unconditional run's settings.

    label : the class; rows : (n,) bool mask of its private rows; n_particles, seed, privacy_seed : its own;
    pool_size, bins, batch_size : its release's K, B and batch; dataset_size : the public size of the whole
    data set when its own size is private (labels private), else None."""

    label: int
    rows: np.ndarray
    n_particles: int
    seed: int
    privacy_seed: int | None
    pool_size: int | None
    bins: int | None
    batch_size: int | None
    dataset_size: int | None

    def fit_inputs(self, settings: Settings, plan: RunPlan) -> tuple[Settings, RunPlan]:
        """This class's settings and plan, from the whole data set's: the same steps, directions per step and
        step size; its own particles, seeds, histogram shape and batch."""
        from ..methods.plan import resolve_fixed

        own = replace(settings, privacy_seed=self.privacy_seed,
                      flow=replace(settings.flow, n_particles=self.n_particles, seed=self.seed))
        size = self.dataset_size if self.dataset_size is not None else int(self.rows.sum())
        return own, resolve_fixed(settings.method, steps=plan.steps, n_projections=plan.n_projections,
                                  dataset_size=size, dim=plan.dim, privacy=settings.privacy,
                                  batch_size=self.batch_size, pool_size=self.pool_size, bins=self.bins,
                                  step_size=plan.step_size)


def plan_classes(method: str, labels: np.ndarray, classes: Sequence[int], *, privacy: PrivacySpec, n_particles: int,
                 seed: int, pool_size: int | None = None, bins: int | None = None, batch_size: int | None = None,
                 privacy_seed: int | None = None, labels_public: bool = False) -> list[ClassRun]:
    """The per-class runs of a conditional fit (one rule for `swflow generate --conditional` and the
    Synthesizer); see the module's docstring for the two readings of the labels."""
    from ..methods.plan import resolve_fixed
    from ..methods.registry import method as method_spec

    labels = np.asarray(labels)
    classes = sorted({int(c) for c in classes})
    if len(classes) < 2:
        raise ValueError("class-conditional generation needs a label set of at least two classes")
    if not np.isin(labels, classes).all():
        raise ValueError(f"labels outside the declared label set {classes}: declare every class the data may hold "
                         "(the label set is public; which classes occur is not)")
    own_seed = lambda c: None if privacy_seed is None else privacy_seed + c  # noqa: E731
    if labels_public:
        present, counts = np.unique(labels, return_counts=True)
        if len(present) < 2:
            raise ValueError("with public labels, the private rows must hold at least two classes")
        particles = class_shares(counts, n_particles)
        return [ClassRun(int(c), labels == c, int(k), seed + int(c), own_seed(int(c)), pool_size, bins,
                         None if batch_size is None else max(1, round(batch_size * n_c / len(labels))), None)
                for c, n_c, k in zip(present, counts, particles)]
    if not method_spec(method).release.of_counts:
        raise ValueError(f"with private labels only a release of counts (dpswflow-hist) can be split by class without "
                         f"publishing the class sizes; {method} releases per-record values. Use dpswflow-hist, or pass "
                         "labels_public=True (--labels-public) to treat the labels and class counts as public")
    n = len(labels)  # public; the class sizes are not
    # every class's histogram takes the shape the pipeline gives a data set of the mean class size (a public
    # rule of n and the budget; the shape reads neither the steps nor the directions per step nor d)
    class_plan = resolve_fixed(method, steps=1, n_projections=1, dataset_size=max(1, n // len(classes)), dim=1,
                               privacy=privacy, pool_size=pool_size, bins=bins)
    k, b = class_plan.release.n_projections, class_plan.bins
    return [ClassRun(c, labels == c, n_particles, seed + c, own_seed(c), k, b, None, n) for c in classes]


def estimated_size(noisy_counts) -> float:
    """A class's size read off its released noisy counts (K, B): each direction's counts sum to the size plus
    noise, so their mean over the K directions estimates it (post-processing of the release)."""
    return float(np.asarray(noisy_counts, dtype=np.float64).sum(axis=1).mean())


def run_conditional_to_dir(settings: Settings, data: torch.Tensor, labels: np.ndarray, out: Path, *,
                           classes: Sequence[int], plan: RunPlan | None = None, config: FlowConfig | None = None,
                           labels_public: bool = False, decoder: Callable[[np.ndarray], np.ndarray] | None = None,
                           run_config: dict | None = None, progress: bool = True,
                           threads: int | None = None) -> PrivacyReport:
    """Run the flow of ``settings`` once per class of the public label set ``classes`` into
    ``out/classes/class-C/`` (finished classes are skipped on resume) and write the combined samples (with
    labels) and privacy.json into ``out``. Labels are private unless ``labels_public`` (see the module's
    docstring). ``plan`` and ``config`` are the whole data set's (default: from ``settings``); ``threads`` as
    in :func:`~swflow.pipeline.fitting.fit`."""
    labels = np.asarray(labels)
    if labels.shape != (data.shape[0],):
        raise ValueError(f"need one label per private row: {labels.shape} labels for {data.shape[0]} rows")
    plan = plan or settings.plan(*data.shape)
    config = config or settings.flow_config(plan)
    runs = plan_classes(settings.method, labels, classes, privacy=settings.privacy, n_particles=config.n_particles,
                        seed=config.seed, pool_size=settings.shape.pool_size, bins=settings.shape.bins,
                        batch_size=plan.batch_size, privacy_seed=settings.privacy_seed, labels_public=labels_public)
    reports, latents, estimates = [], [], []
    for run in runs:
        sub = _class_dir(out, run.label)
        if not (sub / "privacy.json").exists():  # finished classes are kept as they are
            sub.mkdir(parents=True, exist_ok=True)  # an interrupted class resumes from its checkpoint
            own, own_plan = run.fit_inputs(settings, plan)
            run_flow_to_dir(own, data[torch.as_tensor(run.rows)], sub, plan=own_plan,
                            config=replace(config, n_particles=run.n_particles, seed=run.seed),
                            run_config={**(run_config or {}), "class": run.label}, progress=progress,
                            threads=threads, part_of_larger=run.dataset_size is not None)
        reports.append(PrivacyReport.from_json(json.loads((sub / "privacy.json").read_text())))
        latents.append(read_samples(sub / "samples.h5")["latents"])
        if not labels_public:
            estimates.append(_estimated_size_of_run(sub) if reports[-1].private else float(run.rows.sum()))
    report, latents, sample_labels = combine(settings.method, runs, reports, latents, estimates, config.n_particles,
                                             run_config, labels_public=labels_public)
    return _write(out, latents, sample_labels, report, decoder)


def combine(method: str, runs: list[ClassRun], reports: list[PrivacyReport], latents: list[np.ndarray],
            estimates: list[float], n_particles: int, run_config: dict | None, *, labels_public: bool):
    """(report, latents, labels) of a conditional fit from its classes' reports and samples: with labels public
    every class's samples, with labels private each class's share by its estimated size."""
    if labels_public:
        per_class = [{"class": r.label, "size": int(r.rows.sum()), "epsilon": rep.epsilon, "delta": rep.delta,
                      "noise_multiplier": rep.noise_multiplier, "batch_size": rep.batch_size,
                      "sample_rate": rep.sample_rate, "steps": rep.steps} for r, rep in zip(runs, reports)]
        kept, shares = latents, [len(x) for x in latents]
    else:
        shares = class_shares(np.asarray(estimates), n_particles, at_least_one=False)
        kept = [x[:share] for x, share in zip(latents, shares)]
        per_class = [{"class": r.label, "estimated_size": round(max(e, 0.0)), "samples": int(share)}
                     for r, e, share in zip(runs, estimates, shares)]
    report = combined_report(method, [r.label for r in runs], reports, per_class, run_config,
                             composition=LABELS_PUBLIC if labels_public else LABELS_PRIVATE)
    sample_labels = np.concatenate([np.full(share, r.label) for r, share in zip(runs, shares)])
    return report, np.concatenate(kept), sample_labels


def _estimated_size_of_run(class_dir: Path) -> float:
    import h5py

    with h5py.File(class_dir / "model.h5", "r") as f:
        return estimated_size(f["release/noisy_counts"][:])


def _class_dir(out: Path, c) -> Path:
    return Path(out) / "classes" / f"class-{int(c)}"


def _write(out, latents, sample_labels, report, decoder) -> PrivacyReport:
    if getattr(decoder, "labels", None) is not None:  # nearest public image: among its own class's images
        decoder = _decode_by_class(decoder, sample_labels)
    write_outputs(out, latents, report, decoder, labels=sample_labels)
    return report


def _decode_by_class(decoder, labels: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """A decoder of the labelled samples (in ``labels``' order) that decodes each class's samples with
    ``decoder.of_class``, so an image always shows its label."""
    def decode(latents: np.ndarray) -> np.ndarray:
        if len(latents) != len(labels):
            raise ValueError(f"{len(latents)} samples for {len(labels)} labels")
        images = np.empty((len(latents), *decoder.images.shape[1:]), dtype=decoder.images.dtype)
        for c in np.unique(labels):
            rows = labels == c
            images[rows] = decoder.of_class(c)(latents[rows])
        return images

    return decode


def combined_report(method: str, classes: Sequence[int], reports: list[PrivacyReport], per_class: list[dict],
                    run_config: dict | None, *, composition: str) -> PrivacyReport:
    """privacy.json of a conditional run. Labels public: the worst class's report, (ε, δ) = max over the
    classes (parallel composition). Labels private: the classes' releases are one mechanism, so (ε, δ) is
    any class's (they are equal, and verification checks it)."""
    parts = {"per_class": per_class, "ledgers": {str(int(c)): r.ledger for c, r in zip(classes, reports)},
             "composition": composition}
    run_config = {"method": method, "conditional": True, "labels": "public" if composition == LABELS_PUBLIC
                  else "private", **(run_config or {})}
    if not reports[0].private:
        return replace(reports[0], method=method, ledger=[], conditional=parts, run_config=run_config,
                       dataset_size=sum(r.dataset_size for r in reports) if composition == LABELS_PUBLIC
                       else reports[0].dataset_size)
    worst = max(reports, key=lambda r: (r.epsilon is None, r.epsilon or 0.0))
    eps = None if any(r.epsilon is None for r in reports) else max(r.epsilon for r in reports)
    delta = max(r.delta for r in reports)
    if composition == LABELS_PUBLIC:
        adjacency, note = PUBLIC_ADJACENCY, PUBLIC_NOTE
        worst = replace(worst, dataset_size=sum(r.dataset_size for r in reports))
    else:
        adjacency, note = worst.adjacency, PRIVATE_NOTE
    return replace(worst.with_notes(labels_note=note), method=method, epsilon=eps, delta=delta, adjacency=adjacency,
                   ledger=[], conditional=parts, run_config=run_config,
                   statement=statement(float("inf") if eps is None else eps, delta, worst.accountant, adjacency))
