"""One home for a dataset, its autoencoder and its public/private split.

Every path that encodes a split goes through :func:`encoded_split`, which checks that the split the
autoencoder was trained with (its manifest) is the split being cut now, so a private row can never be
encoded as public or the other way round.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import torch

__all__ = ["EncodedSplit", "SPLITS", "dataset_split", "encoded_split", "run_autoencoder"]

SPLITS = ("public", "private", "test")


class EncodedSplit(NamedTuple):
    """latents (m, d) on the unit sphere, labels (m,), the decoder, the Split and the autoencoder's metadata."""

    latents: torch.Tensor
    labels: np.ndarray
    decode: Callable[[np.ndarray], np.ndarray]
    split: object
    meta: dict
    population: dict | None = None  # the declared population drawn from the split (swflow/populations.py)


def dataset_split(dataset: str, meta: dict, *, root=None, images=None, labels=None):
    """(images, labels, Split) of ``dataset``'s training part, cut as the autoencoder with metadata
    ``meta`` was trained: refused when the data files give another split than its manifest names."""
    from .data import load_dataset, split_indices

    if images is None:
        images, labels = load_dataset(dataset, root=root)
    halves = split_indices(len(images), seed=meta["split"]["seed"])
    if halves.manifest() != meta["split"]:
        raise ValueError(f"the {dataset} split does not match the one {meta['name']} was trained with "
                         "(different data files?); retrain with `swflow train-ae`")
    return images, labels, halves


def encoded_split(dataset: str, split: str = "private", *, root=None, checkpoint: str | None = None,
                  population: str | None = None) -> EncodedSplit:
    """Encode one split of ``dataset`` with its autoencoder (``checkpoint``, default the dataset's).

    ``public`` and ``private`` are the halves of the training part that the autoencoder's manifest
    names (refused when the data files give another split); ``test`` is the dataset's test part.
    ``population`` draws a declared sub-population of the private split or of the test part (its
    reference); the public split is the broad population and takes none."""
    from autoencoders import default_checkpoint, load_autoencoder

    from .data import load_dataset

    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {SPLITS}")
    images, labels = load_dataset(dataset, part="test" if split == "test" else "train", root=root)
    model, meta = load_autoencoder(checkpoint or default_checkpoint(dataset))
    if meta["dataset"] != dataset or tuple(meta["image_shape"]) != tuple(images.shape[1:]):
        raise ValueError(f"checkpoint {meta['name']} was trained on {meta['dataset']} {meta['image_shape']}, "
                         f"not on {dataset} {list(images.shape[1:])}")
    halves = None
    if split != "test":
        images, labels, halves = dataset_split(dataset, meta, images=images, labels=labels)
        rows = halves.public if split == "public" else halves.private
        images, labels = images[rows], labels[rows]
    drawn = None
    if population is not None:
        from .populations import describe, population_rows

        if split == "public":
            raise ValueError("the public split is the broad population the autoencoder learned: a population is "
                             "drawn from the private split (or the test part, its reference)")
        rows = population_rows(labels, population)
        drawn = {**describe(population, rows, labels), "drawn_from": split}
        images, labels = images[rows], labels[rows]
    return EncodedSplit(torch.from_numpy(model.encode_images(images)), labels, model.decode_images, halves, meta,
                        drawn)


def run_autoencoder(run_config: dict):
    """(model, metadata) of the autoencoder a run used: by the path it recorded (a user's checkpoint) or by
    its name among the shipped ones, refused unless its sha256 is the one the run recorded."""
    from autoencoders import load_autoencoder

    where = run_config.get("autoencoder_path", run_config["autoencoder"])
    return load_autoencoder(where, expected_sha256=run_config.get("autoencoder_sha256"))
