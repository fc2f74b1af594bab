"""The nearest-public decoder: each code decoded to the public image whose code is nearest.

It reads only the public images an autoencoder learned from and the released particles, so it is post-processing;
its outputs are public images, selected by the private flow (the method's name and docs say so).
"""
from __future__ import annotations

import numpy as np
import torch

from swflow.io.splits import dataset_split, public_rows

__all__ = ["NearestPublicDecoder", "nearest_public_decoder"]


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
        from swflow.io.images import image_hashes, load_images
        from swflow.io.splits import public_hashes

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
