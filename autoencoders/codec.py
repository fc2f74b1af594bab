"""The image codecs: an autoencoder trained on public images, between private images and the flow's rows.

``autoencoder`` decodes the flow's particles with the checkpoint's decoder; ``nearest-public`` encodes with the
same encoder and decodes each particle to the public image whose code is nearest (post-processing: its outputs
are public images, selected by the private flow). Both are registered in swflow.sources.CODECS.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .nearest import nearest_public_decoder
from .train import default_checkpoint, load_autoencoder

__all__ = ["AutoencoderCodec", "autoencoder_codec", "nearest_public_codec"]


class AutoencoderCodec:
    """Images (n, C, H, W) in [0, 1] <-> codes (n, d) on the unit sphere, by ``model`` (metadata ``meta``).
    ``reference``: the name or .pt path it was loaded from (a path is recorded so later commands find it)."""

    name = "autoencoder"
    manifold = "sphere"
    norm_bound = None
    keeps_records = True  # the private images stay at hand for an accounted adaptation of the decoder

    def __init__(self, model, meta: dict, *, reference: str | None = None):
        self.model, self.meta, self.reference = model, meta, reference

    def encode(self, images) -> torch.Tensor:
        return torch.from_numpy(self.model.encode_images(images))

    @property
    def decode(self):
        return self.model.decode_images

    def describe(self) -> dict:
        facts = {"autoencoder": self.meta["name"], "autoencoder_sha256": self.meta["weights_sha256"]}
        if self.reference is not None and Path(self.reference).suffix == ".pt":  # a user's checkpoint, by path
            facts["autoencoder_path"] = str(Path(self.reference).resolve())
        return facts


class NearestPublicCodec(AutoencoderCodec):
    """The autoencoder's encoder, and the nearest public image as the decoder."""

    name = "nearest-public"

    def __init__(self, model, meta: dict, *, reference: str | None = None, root=None):
        super().__init__(model, meta, reference=reference)
        self._nearest = nearest_public_decoder(model, meta, root=root)

    @property
    def decode(self):
        return self._nearest

    def describe(self) -> dict:
        return {**super().describe(), "decoder": "nearest-public"}


def _checkpoint(request) -> str:
    if request.checkpoint is not None:
        return request.checkpoint
    if request.kind == "dataset":
        return default_checkpoint(request.location)
    raise ValueError("--images needs --checkpoint NAME or PATH.pt: the autoencoder trained on your public images "
                     "(`swflow train-ae --images PUBLIC --name NAME`)")


def autoencoder_codec(request) -> AutoencoderCodec:
    reference = _checkpoint(request)
    model, meta = load_autoencoder(reference)
    return AutoencoderCodec(model, meta, reference=reference)


def nearest_public_codec(request) -> NearestPublicCodec:
    if request.kind not in ("dataset", "images"):
        raise ValueError("--decoder nearest-public picks public images by their codes: it needs --dataset or "
                         "--images (rows of --data have no public images)")
    reference = _checkpoint(request)
    model, meta = load_autoencoder(reference)
    return NearestPublicCodec(model, meta, reference=reference, root=request.data_root)
