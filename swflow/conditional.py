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
from dataclasses import replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from .flow import FlowConfig
from .io import read_samples
from .privacy import PrivacyReport, PrivacySpec, statement
from .run import run_flow_to_dir, write_outputs

__all__ = ["run_conditional_to_dir", "class_shares", "LABELS_PUBLIC", "LABELS_PRIVATE", "PUBLIC_ADJACENCY",
           "COMPOSITIONS"]

PUBLIC_ADJACENCY = "replace-one within a class (labels and class counts public)"
LABELS_PUBLIC = "parallel over classes (labels and class counts public)"
LABELS_PRIVATE = "one Gaussian mechanism across the classes' histograms (labels private)"
COMPOSITIONS = (LABELS_PUBLIC, LABELS_PRIVATE)
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


def run_conditional_to_dir(method: str, data: torch.Tensor, labels: np.ndarray, out: Path, *, classes: Sequence[int],
                           privacy: PrivacySpec, config: FlowConfig, n_projections: int, pool_size: int | None = None,
                           batch_size: int | None = None, bins: int | None = None, privacy_seed: int | None = None,
                           labels_public: bool = False, decoder: Callable[[np.ndarray], np.ndarray] | None = None,
                           run_config: dict | None = None, progress: bool = True) -> PrivacyReport:
    """Run ``method`` once per class of the public label set ``classes`` into ``out/classes/class-C/``
    (finished classes are skipped on resume) and write the combined samples (with labels) and
    privacy.json into ``out``. Labels are private unless ``labels_public`` (see the module's docstring)."""
    from .registry import method as method_spec

    labels = np.asarray(labels)
    classes = np.asarray(sorted({int(c) for c in classes}))
    if labels.shape != (data.shape[0],):
        raise ValueError(f"need one label per private row: {labels.shape} labels for {data.shape[0]} rows")
    if len(classes) < 2:
        raise ValueError("class-conditional generation needs a label set of at least two classes")
    if not np.isin(labels, classes).all():
        raise ValueError(f"labels outside the declared label set {classes.tolist()}: declare every class the data "
                         "may hold (the label set is public; which classes occur is not)")
    if not labels_public and method_spec(method).releases != "histogram":
        raise ValueError(f"with private labels only a release of counts (dpswflow-hist) can be split by class without "
                         f"publishing the class sizes; {method} releases per-record values. Use dpswflow-hist, or pass "
                         "labels_public=True (--labels-public) to treat the labels and class counts as public")
    if labels_public:
        return _labels_public(method, data, labels, out, privacy=privacy, config=config, n_projections=n_projections,
                              pool_size=pool_size, batch_size=batch_size, bins=bins, privacy_seed=privacy_seed,
                              decoder=decoder, run_config=run_config, progress=progress)
    from .privacy.histogram import histogram_shape

    n = data.shape[0]  # public; the class sizes are not
    k, b = histogram_shape(dataset_size=max(1, n // len(classes)), privacy=privacy, n_directions=pool_size, bins=bins)
    reports, estimates = [], []
    for c in classes:
        sub = _class_dir(out, c)
        if not (sub / "privacy.json").exists():  # finished classes are kept as they are
            sub.mkdir(parents=True, exist_ok=True)  # an interrupted class resumes from its checkpoint
            run_flow_to_dir(method, data[torch.as_tensor(labels == c)], sub, privacy=privacy,
                            config=replace(config, seed=config.seed + int(c)), n_projections=n_projections,
                            pool_size=k, bins=b, dataset_size=n,
                            privacy_seed=None if privacy_seed is None else privacy_seed + int(c),
                            decoder=None, run_config={**(run_config or {}), "class": int(c)}, progress=progress)
        reports.append(PrivacyReport.from_json(json.loads((sub / "privacy.json").read_text())))
        estimates.append(estimated_size(sub) if reports[-1].private else float((labels == c).sum()))
    shares = class_shares(np.asarray(estimates), config.n_particles, at_least_one=False)
    latents, sample_labels = [], []
    for c, share in zip(classes, shares):
        latents.append(read_samples(_class_dir(out, c) / "samples.h5")["latents"][:share])
        sample_labels.append(np.full(share, c))
    per_class = [{"class": int(c), "estimated_size": round(max(e, 0.0)), "samples": int(s)}
                 for c, e, s in zip(classes, estimates, shares)]
    report = combined_report(method, classes, reports, per_class, run_config, composition=LABELS_PRIVATE)
    return _write(out, np.concatenate(latents), np.concatenate(sample_labels), report, decoder)


def estimated_size(class_dir: Path) -> float:
    """A class's size read off its released noisy counts: each direction's counts sum to the size plus
    noise, so their mean over the K directions estimates it (post-processing of the release)."""
    import h5py

    with h5py.File(class_dir / "model.h5", "r") as f:
        counts = f["release/noisy_counts"][:]
    return float(counts.sum(axis=1).mean())


def _class_dir(out: Path, c) -> Path:
    return Path(out) / "classes" / f"class-{int(c)}"


def _labels_public(method, data, labels, out, *, privacy, config, n_projections, pool_size, batch_size, bins,
                   privacy_seed, decoder, run_config, progress) -> PrivacyReport:
    present, counts = np.unique(labels, return_counts=True)
    particles = class_shares(counts, config.n_particles)
    reports, latents, sample_labels = [], [], []
    for c, n_c, particles_c in zip(present, counts, particles):
        sub = _class_dir(out, c)
        if not (sub / "privacy.json").exists():
            sub.mkdir(parents=True, exist_ok=True)
            batch_c = None if batch_size is None else max(1, round(batch_size * n_c / len(labels)))
            run_flow_to_dir(method, data[torch.as_tensor(labels == c)], sub, privacy=privacy,
                            config=replace(config, n_particles=int(particles_c), seed=config.seed + int(c)),
                            n_projections=n_projections, pool_size=pool_size, batch_size=batch_c, bins=bins,
                            privacy_seed=None if privacy_seed is None else privacy_seed + int(c),
                            decoder=None, run_config={**(run_config or {}), "class": int(c)}, progress=progress)
        reports.append(PrivacyReport.from_json(json.loads((sub / "privacy.json").read_text())))
        latents.append(read_samples(sub / "samples.h5")["latents"])
        sample_labels.append(np.full(len(latents[-1]), c))
    per_class = [{"class": int(c), "size": int(n), "epsilon": r.epsilon, "delta": r.delta,
                  "noise_multiplier": r.noise_multiplier, "batch_size": r.batch_size, "sample_rate": r.sample_rate,
                  "steps": r.steps} for c, n, r in zip(present, counts, reports)]
    report = combined_report(method, present, reports, per_class, run_config, composition=LABELS_PUBLIC)
    return _write(out, np.concatenate(latents), np.concatenate(sample_labels), report, decoder)


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


def combined_report(method: str, classes: np.ndarray, reports: list[PrivacyReport], per_class: list[dict],
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
