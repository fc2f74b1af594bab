"""A dataset's split encoded by its autoencoder: the image codec's view of a named dataset.

Every path that encodes a split goes through :func:`encoded_split`, which checks that the split the
autoencoder was trained with (its manifest) is the split being cut now, so a private row can never be
encoded as public or the other way round.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import torch

from swflow.io.splits import split_part

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
    model, meta = load_autoencoder(checkpoint or default_checkpoint(dataset))
    part = split_part(dataset, split, meta, root=root, population=population)
    return EncodedSplit(torch.from_numpy(model.encode_images(part.images)), part.labels, model.decode_images,
                        part.split, meta, part.population, part.images)


def run_autoencoder(run_config: dict):
    """(model, metadata) of the autoencoder a run used: by the path it recorded (a user's checkpoint) or by
    its name among the shipped ones, refused unless its sha256 is the one the run recorded."""
    where = run_config.get("autoencoder_path", run_config["autoencoder"])
    return load_autoencoder(where, expected_sha256=run_config.get("autoencoder_sha256"))
