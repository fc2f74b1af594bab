"""The public/private split of a dataset as an autoencoder's manifest names it, and the public images a
checkpoint learned from: the one place that says which records are public.

A record is public or private, not both: :func:`refuse_public` is the check every entry point runs on private
images, and :func:`dataset_split` refuses data files that cut another split than the checkpoint was trained on.
Checkpoints are described by their metadata dicts (as ``autoencoders.load_autoencoder`` returns them), so nothing
here loads a model.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .data import load_dataset, split_indices
from .images import image_hashes

__all__ = ["SPLITS", "SplitPart", "dataset_split", "overlap_with_public", "public_hashes", "public_rows", "refuse_public",
           "split_part"]

SPLITS = ("public", "private", "test")


def dataset_split(dataset: str, meta: dict, *, root=None, images=None, labels=None):
    """(images, labels, Split) of ``dataset``'s training part, cut as the autoencoder with metadata
    ``meta`` was trained: refused when the data files give another split than its manifest names."""
    if images is None:
        images, labels = load_dataset(dataset, root=root)
    halves = split_indices(len(images), seed=meta["split"]["seed"])
    if halves.manifest() != meta["split"]:
        raise ValueError(f"the {dataset} split does not match the one {meta['name']} was trained with "
                         "(different data files?); retrain with `swflow train-ae`")
    return images, labels, halves


def public_rows(meta: dict, labels: np.ndarray, halves) -> np.ndarray:
    """The rows of the public split an autoencoder learned from: all of them, or those outside the classes its
    metadata excludes (a checkpoint built for private classes the public data never saw)."""
    excluded = meta.get("excluded_classes", [])
    return halves.public[~np.isin(labels[halves.public], excluded)]


class SplitPart(NamedTuple):
    """The images (m, C, H, W) and labels (m,) of one split, the Split it was cut by (None for the test part) and
    the declared population drawn from it (None when none was asked for)."""

    images: np.ndarray
    labels: np.ndarray
    split: object
    population: dict | None


def split_part(dataset: str, split: str, meta: dict, *, root=None, population: str | None = None) -> SplitPart:
    """One split of ``dataset`` as the autoencoder with metadata ``meta`` cut it.

    ``public`` and ``private`` are the halves of the training part that the autoencoder's manifest names (refused
    when the data files give another split); ``test`` is the dataset's test part. ``population`` draws a declared
    sub-population of the private split or of the test part (its reference); the public split is the broad
    population and takes none."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    images, labels = load_dataset(dataset, part="test" if split == "test" else "train", root=root)
    if meta["dataset"] != dataset or tuple(meta["image_shape"]) != tuple(images.shape[1:]):
        raise ValueError(f"checkpoint {meta['name']} was trained on {meta['dataset']} {meta['image_shape']}, "
                         f"not on {dataset} {list(images.shape[1:])}")
    halves = None
    if split != "test":
        images, labels, halves = dataset_split(dataset, meta, images=images, labels=labels)
        rows = public_rows(meta, labels, halves) if split == "public" else halves.private
        images, labels = images[rows], labels[rows]
    drawn = None
    if population is not None:
        from .populations import check_population, describe, population_rows

        check_population(population, dataset)
        if split == "public":
            raise ValueError("the public split is the broad population the autoencoder learned: a population is "
                             "drawn from the private split (or the test part, its reference)")
        rows = population_rows(labels, population)
        drawn = {**describe(population, rows), "drawn_from": split}
        images, labels = images[rows], labels[rows]
    return SplitPart(images, labels, halves, drawn)


def public_hashes(meta: dict) -> np.ndarray:
    """The fingerprints of the public images checkpoint ``meta`` (as :func:`autoencoders.load_autoencoder`
    returns it) was trained on: a user's checkpoint recorded them beside itself (refused when that file is
    missing or not the recorded one); a dataset's checkpoint has them computed from its public split (empty
    when the dataset's files are not on this machine: then no image of it can be given either)."""
    if meta.get("source") is None and meta.get("dataset") not in (None, "images"):
        try:
            images, _, halves = dataset_split(meta["dataset"], meta)
        except FileNotFoundError:
            return np.zeros(0, dtype=np.uint64)
        return np.unique(image_hashes(images[halves.public]))
    record = (meta.get("source") or {}).get("image_hashes")
    if record is None:
        raise ValueError(f"checkpoint {meta['name']} records no fingerprints of its public images (made by an older "
                         "swflow): retrain it with `swflow train-ae --images PUBLIC`")
    path = Path(meta["checkpoint_path"]).parent / record["file"]
    if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != record["sha256"]:
        raise ValueError(f"{path}, the fingerprints of {meta['name']}'s public images, is missing or was changed: "
                         "restore it beside the checkpoint, or retrain with `swflow train-ae --images PUBLIC`")
    return np.load(path, allow_pickle=False)


def overlap_with_public(images: np.ndarray, meta: dict) -> int:
    """How many of ``images`` are, pixel for pixel, public images of checkpoint ``meta``."""
    return int(np.isin(image_hashes(images), public_hashes(meta)).sum())


def refuse_public(images: np.ndarray, meta: dict, *, where: str = "the private images") -> None:
    """Refuse private ``images`` of which any is, pixel for pixel, a public image checkpoint ``meta`` was trained on
    (a user's collection or a dataset's public split): a record is public or private, not both. Every entry point
    (the command, the Synthesizer) calls this one check."""
    shared = overlap_with_public(images, meta)
    if shared:
        raise ValueError(f"{shared} of the {len(images)} images in {where} are public images {meta['name']} was "
                         "trained on (pixel for pixel): a record is public or private, not both. Remove them from the "
                         "private images, or retrain the autoencoder without them")
