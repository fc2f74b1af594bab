"""Private images: a named dataset's private split (``dataset``) and a user's own images (``images``).

Both are read as the image codec's autoencoder reads them (its size and channels, its split manifest), and
both are refused when a private image is one the autoencoder learned from: a record is public or private.
"""
from __future__ import annotations

from pathlib import Path

from ..io.images import load_images
from ..io.splits import refuse_public, split_part
from ..core.sources import Records, SourceRequest

__all__ = ["dataset_source", "images_source"]


def dataset_source(request: SourceRequest, codec) -> Records:
    """The private split of the dataset ``request.location`` as the codec's autoencoder cut it (its manifest),
    or the declared population ``request.population`` drawn from it."""
    part = split_part(request.location, "private", _meta(codec), root=request.data_root,
                      population=request.population)
    run_config = {"dataset": request.location}
    if part.population is not None:
        run_config["population"] = part.population
    return Records(part.images, labels=part.labels, run_config=run_config, manifold=_sphere(request))


def images_source(request: SourceRequest, codec) -> Records:
    """A user's private images (a folder, an array file, or an array), read at the codec's size and channels."""
    meta = _meta(codec)
    channels, size = meta["image_shape"][0], meta["image_shape"][-1]
    where = request.location
    images = load_images(where, size=size, channels=channels)
    named = isinstance(where, (str, Path))
    refuse_public(images, meta, **({"where": str(where)} if named else {}))
    manifold = _sphere(request)
    if not named:
        return Records(images, manifold=manifold)
    note = (f"{where}: {len(images)} private images, encoded by {meta['name']} ({meta['architecture']}, latent "
            f"{meta['latent']}, trained on {meta.get('source', {}).get('path', meta['dataset'])})")
    run_config = {"images": str(where)}
    if meta.get("source") is not None:
        run_config["public_images"] = meta["source"]
    return Records(images, run_config=run_config, manifold=manifold, notes=(note,))


def _meta(codec) -> dict:
    meta = getattr(codec, "meta", None)
    if meta is None or "image_shape" not in meta:
        raise ValueError(f"images are encoded by an image autoencoder, not by the {codec.name} codec")
    return meta


def _sphere(request: SourceRequest) -> str:
    if request.manifold not in (None, "sphere"):
        raise ValueError("the autoencoder's codes lie on the unit sphere: image runs use --manifold sphere")
    return "sphere"
