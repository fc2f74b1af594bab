"""One home for a dataset, its autoencoder and its public/private split.

Every path that encodes a split goes through :func:`encoded_split`, which checks that the split the
autoencoder was trained with (its manifest) is the split being cut now, so a private row can never be
encoded as public or the other way round.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np
import torch

__all__ = ["EncodedSplit", "NearestPublicDecoder", "SPLITS", "dataset_split", "encoded_split", "nearest_public_decoder",
           "public_rows", "run_autoencoder"]

SPLITS = ("public", "private", "test")


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


def public_rows(meta: dict, labels: np.ndarray, halves) -> np.ndarray:
    """The rows of the public split an autoencoder learned from: all of them, or those outside the classes its
    metadata excludes (a checkpoint built for private classes the public data never saw)."""
    excluded = meta.get("excluded_classes", [])
    return halves.public[~np.isin(labels[halves.public], excluded)]


def encoded_split(dataset: str, split: str = "private", *, root=None, checkpoint: str | None = None,
                  population: str | None = None) -> EncodedSplit:
    """Encode one split of ``dataset`` with its autoencoder (``checkpoint``, default the dataset's).

    ``public`` and ``private`` are the halves of the training part that the autoencoder's manifest
    names (refused when the data files give another split); ``test`` is the dataset's test part.
    ``population`` draws a declared sub-population of the private split or of the test part (its
    reference); the public split is the broad population and takes none."""
    from ..autoencoders import default_checkpoint, load_autoencoder

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
    return EncodedSplit(torch.from_numpy(model.encode_images(images)), labels, model.decode_images, halves, meta,
                        drawn, images)


def run_autoencoder(run_config: dict):
    """(model, metadata) of the autoencoder a run used: by the path it recorded (a user's checkpoint) or by
    its name among the shipped ones, refused unless its sha256 is the one the run recorded."""
    from ..autoencoders import load_autoencoder

    where = run_config.get("autoencoder_path", run_config["autoencoder"])
    return load_autoencoder(where, expected_sha256=run_config.get("autoencoder_sha256"))


class NearestPublicDecoder:
    """Decode each code to the public image whose code is nearest: the largest inner product on the
    sphere, cosine distance. It reads only the public split and the released particles, so it is
    post-processing (no privacy cost); its outputs are public images, selected by the private flow.

    codes : (m, d) public codes on the unit sphere; images : (m, C, H, W) the public images they encode;
    labels : (m,) their public labels, when they have any (:meth:`of_class`)
    """

    def __init__(self, codes: torch.Tensor, images: np.ndarray, *, labels: np.ndarray | None = None,
                 chunk: int = 4096):
        if codes.shape[0] != len(images) or (labels is not None and len(labels) != len(images)):
            raise ValueError(f"{codes.shape[0]} codes for {len(images)} images"
                             + ("" if labels is None else f" and {len(labels)} labels"))
        self.codes, self.images, self.labels, self.chunk = codes.float(), images, labels, chunk

    def of_class(self, label) -> "NearestPublicDecoder":
        """The decoder over the public images of one class (a labelled sample keeps its label's images)."""
        if self.labels is None:
            raise ValueError("these public images have no labels")
        rows = np.flatnonzero(self.labels == label)
        if len(rows) == 0:
            raise ValueError(f"no public image has label {label}")
        return NearestPublicDecoder(self.codes[torch.from_numpy(rows)], self.images[rows], chunk=self.chunk)

    def nearest(self, latents) -> np.ndarray:
        """(n,) index of the nearest public code of each of ``latents`` (n, d)."""
        z = torch.nn.functional.normalize(torch.as_tensor(np.asarray(latents), dtype=torch.float32), dim=1)
        return torch.cat([(part @ self.codes.T).argmax(dim=1) for part in z.split(self.chunk)]).numpy()

    def __call__(self, latents) -> np.ndarray:
        return self.images[self.nearest(latents)]


def nearest_public_decoder(model, meta: dict, *, root=None) -> NearestPublicDecoder:
    """The :class:`NearestPublicDecoder` over the public images autoencoder ``model`` (metadata ``meta``) was
    trained on: its dataset's public split, or a user's public collection, refused unless its pixels
    still have the sha256 the checkpoint recorded."""
    source = meta.get("source")
    if source is not None:  # swflow train-ae --images PUBLIC
        from .images import image_hashes, load_images, public_hashes

        images = load_images(source["path"], size=meta["image_shape"][-1], channels=meta["image_shape"][0])
        foreign = int((~np.isin(image_hashes(images), public_hashes(meta))).sum())
        if foreign:  # every image this decoder can return must be one of the public images
            raise ValueError(f"{foreign} of the {len(images)} images at {source['path']} are not among the public "
                             f"images {meta['name']} was trained on: restore the public collection, or use "
                             "--decoder autoencoder")
        labels = None
    else:
        images, labels, halves = dataset_split(meta["dataset"], meta, root=root)
        rows = public_rows(meta, labels, halves)
        images, labels = images[rows], labels[rows]
    return NearestPublicDecoder(torch.from_numpy(model.encode_images(images)), images, labels=labels)
