"""Class-conditional generation: one flow per class on that class's private records.

Privacy by parallel composition: every record belongs to exactly one class, so it touches one
flow only and the run is (max_c ε_c, max_c δ_c)-DP. This holds for neighbouring data sets that
differ in the features of one record *within its class*: the labels and the class counts are
treated as public (the counts set each class's particle share and sample size, and appear in the
report). A neighbour that changes a record's label would touch two flows and change two class
sizes; that case is not covered, and the report says so.

Each class keeps the unconditional run's step count and sample rate (batch_c = batch · n_c / n),
so at a given noise multiplier every class spends what the unconditional run would.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .flow import FlowConfig
from .io import read_samples
from .privacy import PrivacyReport, PrivacySpec, statement
from .run import run_flow_to_dir, write_outputs

__all__ = ["run_conditional_to_dir", "class_shares", "LABEL_ADJACENCY"]

LABEL_ADJACENCY = "replace-one within a class (labels and class counts public)"
LABEL_NOTE = ("Labels and class counts are treated as public: neighbouring data sets differ in one record's "
              "features, not its label. A label change would touch two class flows and two class sizes; "
              "that is not accounted.")


def class_shares(counts: np.ndarray, total: int) -> np.ndarray:
    """Split ``total`` into integer shares proportional to ``counts`` (largest remainders), each ≥ 1."""
    counts = np.asarray(counts, dtype=np.float64)
    exact = total * counts / counts.sum()
    shares = np.floor(exact).astype(int)
    for i in np.argsort(exact - shares)[::-1][: total - shares.sum()]:
        shares[i] += 1
    return np.maximum(shares, 1)


def run_conditional_to_dir(method: str, data: torch.Tensor, labels: np.ndarray, out: Path, *, privacy: PrivacySpec,
                           config: FlowConfig, n_projections: int, pool_size: int | None = None,
                           batch_size: int | None = None, bins: int | None = None, privacy_seed: int | None = None,
                           decoder: Callable[[np.ndarray], np.ndarray] | None = None, run_config: dict | None = None,
                           progress: bool = True) -> PrivacyReport:
    """Run ``method`` once per class into ``out/classes/class-C/`` (finished classes are skipped on
    resume) and write the combined samples (with labels) and privacy.json into ``out``."""
    labels = np.asarray(labels)
    if labels.shape != (data.shape[0],):
        raise ValueError(f"need one label per private row: {labels.shape} labels for {data.shape[0]} rows")
    classes, counts = np.unique(labels, return_counts=True)
    if len(classes) < 2:
        raise ValueError("class-conditional generation needs at least two classes")
    particles = class_shares(counts, config.n_particles)
    reports, latents, sample_labels = [], [], []
    for c, n_c, particles_c in zip(classes, counts, particles):
        sub = out / "classes" / f"class-{c}"
        if not (sub / "privacy.json").exists():  # finished classes are kept as they are
            sub.mkdir(parents=True, exist_ok=True)  # an interrupted class resumes from its checkpoint
            batch_c = None if batch_size is None else max(1, round(batch_size * n_c / len(labels)))
            run_flow_to_dir(method, data[torch.as_tensor(labels == c)], sub, privacy=privacy,
                            config=replace(config, n_particles=int(particles_c), seed=config.seed + int(c)),
                            n_projections=n_projections, pool_size=pool_size, batch_size=batch_c, bins=bins,
                            privacy_seed=None if privacy_seed is None else privacy_seed + int(c),
                            decoder=None, run_config={**(run_config or {}), "class": int(c)}, progress=progress)
        reports.append(PrivacyReport.from_json(json.loads((sub / "privacy.json").read_text())))
        latents.append(read_samples(sub / "samples.h5")["latents"])
        sample_labels.append(np.full(len(latents[-1]), c))
    report = combined_report(method, classes, counts, reports, run_config)
    latents, sample_labels = np.concatenate(latents), np.concatenate(sample_labels)
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


def combined_report(method: str, classes: np.ndarray, counts: np.ndarray, reports: list[PrivacyReport],
                    run_config: dict | None) -> PrivacyReport:
    """privacy.json of a conditional run: the worst class's report with ε, δ = max over classes."""
    per_class = [{"class": int(c), "size": int(n), "epsilon": r.epsilon, "delta": r.delta,
                  "noise_multiplier": r.noise_multiplier, "batch_size": r.batch_size,
                  "sample_rate": r.sample_rate, "steps": r.steps} for c, n, r in zip(classes, counts, reports)]
    parts = {"per_class": per_class, "ledgers": {str(int(c)): r.ledger for c, r in zip(classes, reports)},
             "composition": "parallel over classes"}
    run_config = {"method": method, "conditional": True, **(run_config or {})}
    if not reports[0].private:
        return replace(reports[0], method=method, ledger=[], conditional=parts, run_config=run_config)
    worst = max(reports, key=lambda r: (r.epsilon is None, r.epsilon or 0.0))
    eps = None if any(r.epsilon is None for r in reports) else max(r.epsilon for r in reports)
    delta = max(r.delta for r in reports)
    return replace(worst.with_notes(labels_note=LABEL_NOTE), method=method, epsilon=eps, delta=delta,
                   adjacency=LABEL_ADJACENCY, ledger=[], conditional=parts, run_config=run_config,
                   statement=statement(float("inf") if eps is None else eps, delta, worst.accountant,
                                       LABEL_ADJACENCY))
