"""A dataset's split encoded by its autoencoder: the image codec's view of a named dataset.

Every path that encodes a split goes through :func:`encoded_split`, which checks that the split the
autoencoder was trained with (its manifest) is the split being cut now, so a private row can never be
encoded as public or the other way round.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import torch

from swflow.io.data import load_dataset
from swflow.io.splits import SPLITS, dataset_split, public_rows

from .train import default_checkpoint, load_autoencoder

__all__ = ["EncodedSplit", "encoded_split", "run_autoencoder"]


class EncodedSplit(NamedTuple):
    """latents (m, d) on the unit sphere, labels (m,), the decoder, the Split and the autoencoder's metadata;
    the images themselves (for a DP adaptation of the decoder, which is accounted)."""

    latents: torch.Tensor
    labels: np.ndarray
    decode: Callable[[np.ndarray], np.ndarray]
    split: object
    meta: dict
    population: dict | None = None  # the declared population drawn from the split (swflow/io/populations.py)
    images: np.ndarray | None = None


def encoded_split(dataset: str, split: str = "private", *, root=None, checkpoint: str | None = None,
                  population: str | None = None) -> EncodedSplit:
    """Encode one split of ``dataset`` with its autoencoder (``checkpoint``, default the dataset's).

    ``public`` and ``private`` are the halves of the training part that the autoencoder's manifest
    names (refused when the data files give another split); ``test`` is the dataset's test part.
    ``population`` draws a declared sub-population of the private split or of the test part (its
    reference); the public split is the broad population and takes none."""
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
        rows = public_rows(meta, labels, halves) if split == "public" else halves.private
        images, labels = images[rows], labels[rows]
    drawn = None
    if population is not None:
        from swflow.io.populations import check_population, describe, population_rows

        check_population(population, dataset)
        if split == "public":
            raise ValueError("the public split is the broad population the autoencoder learned: a population is "
                             "drawn from the private split (or the test part, its reference)")
        rows = population_rows(labels, population)
        drawn = {**describe(population, rows), "drawn_from": split}
        images, labels = images[rows], labels[rows]
    return EncodedSplit(torch.from_numpy(model.encode_images(images)), labels, model.decode_images, halves, meta,
                        drawn, images)


def run_autoencoder(run_config: dict):
    """(model, metadata) of the autoencoder a run used: by the path it recorded (a user's checkpoint) or by
    its name among the shipped ones, refused unless its sha256 is the one the run recorded."""
    where = run_config.get("autoencoder_path", run_config["autoencoder"])
    return load_autoencoder(where, expected_sha256=run_config.get("autoencoder_sha256"))
