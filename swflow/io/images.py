"""A user's own images: a folder of pictures or an image array, read into (n, C, S, S) floats in [0, 1].

Public images train an autoencoder (``swflow train-ae --images``); private images are encoded by it
(``swflow generate --images``); reference images score a run (``swflow evaluate --reference``). One
reader serves all three, so every collection is cropped, resized and scaled by the same rule. The
image size and channels of private images come from the autoencoder's metadata, never from the images.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

__all__ = ["HASHES_SUFFIX", "IMAGE_SUFFIXES", "load_images", "image_source", "image_hashes", "is_image_collection",
           "write_public_hashes"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
_GREY_MODES = ("1", "L", "LA", "I", "I;16", "F")


def is_image_collection(path: str | Path) -> bool:
    """A folder, or an array file whose array is not 2-D rows (images are (n, H, W) or 4-D)."""
    from .arrays import read_array

    path = Path(path)
    return path.is_dir() or (path.exists() and read_array(path).ndim in (3, 4))


def load_images(source, *, size: int, channels: int | None = None) -> np.ndarray:
    """Images (n, channels, size, size) float32 in [0, 1] from a folder of pictures, an array file, or an
    array in memory (numpy or torch).

    Folder: every .png/.jpg/... file, in name order; converted to grey (1 channel) or RGB (3).
    Array (.npy/.npz/.h5, or in memory): (n, H, W), (n, C, H, W) or (n, H, W, C) with C in {1, 3}; uint8
    pixels are divided by 255, floats must already lie in [0, 1].
    Each image is centre-cropped to a square and resized to ``size`` (bilinear, antialiased).
    ``channels``: 1 or 3; None takes the collection's own (folders: grey only if every file is grey).
    """
    if channels not in (None, 1, 3):
        raise ValueError(f"channels must be 1 (grey) or 3 (RGB), got {channels}")
    if size < 8:
        raise ValueError(f"image size must be at least 8 pixels, got {size}")
    if not isinstance(source, (str, Path)):
        if hasattr(source, "detach"):  # a torch tensor
            source = source.detach().cpu().numpy()
        return _resize(_as_images(np.asarray(source), channels, what="the images"), size)
    path = Path(source)
    if path.is_dir():
        return _load_folder(path, size, channels)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give a folder of images or an .npy/.npz/.h5 image array")
    from .arrays import read_array

    return _resize(_as_images(read_array(path), channels, what=str(path)), size)


def image_source(path: str | Path, images: np.ndarray) -> dict:
    """What a collection of *public* images was: path, count, shape and the sha256 of its pixels as read.
    Never called on private images: a fingerprint of private data is not released."""
    return {"path": str(path), "count": int(len(images)), "image_shape": list(images.shape[1:]),
            "sha256": hashlib.sha256(np.ascontiguousarray(images, dtype=np.float32).tobytes()).hexdigest()}


def image_hashes(images: np.ndarray) -> np.ndarray:
    """A 64-bit fingerprint (n,) uint64 of each image's pixels as read (the first 8 bytes of the sha256 of its
    float32 pixels): equal images get equal fingerprints whatever their order or collection. Private images'
    fingerprints are compared in memory only, never written."""
    images = np.ascontiguousarray(images, dtype=np.float32)
    return np.array([int.from_bytes(hashlib.sha256(image.tobytes()).digest()[:8], "little") for image in images],
                    dtype=np.uint64)


HASHES_SUFFIX = ".public-images.npy"


def write_public_hashes(images: np.ndarray, weights: Path) -> dict:
    """Write the fingerprints of the public ``images`` beside checkpoint ``weights`` (NAME.public-images.npy,
    sorted) and return what the checkpoint's metadata records of them (file name and sha256)."""
    path = Path(weights).with_suffix(HASHES_SUFFIX)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, np.unique(image_hashes(images)), allow_pickle=False)
    tmp.replace(path)
    return {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


#: grey modes whose pixels are wider than 8 bits, and the value of white in each (Pillow's "I" holds 16-bit PNGs)
_WIDE_GREY = {"I;16": 65535.0, "I;16B": 65535.0, "I;16L": 65535.0, "I;16N": 65535.0, "I": 65535.0, "F": 1.0}


def _open(path: Path):
    """One image file, fully read, refused with what to do when it is unreadable or larger than Pillow's own
    limit on decoded pixels (``PIL.Image.MAX_IMAGE_PIXELS``, its guard against decompression bombs)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            limit = Image.MAX_IMAGE_PIXELS
            if limit is not None and img.width * img.height > limit:
                raise ValueError(f"image {path} has {img.width} x {img.height} pixels, more than Pillow's limit of "
                                 f"{limit} (PIL.Image.MAX_IMAGE_PIXELS, its guard against decompression bombs): "
                                 "downscale it first, or raise that limit in your own program if you trust the file")
            img.load()
            return img.copy()
    except (OSError, UnidentifiedImageError, Image.DecompressionBombError) as err:
        raise ValueError(f"could not read image {path}: {err}") from None


def _pixels(img, channels: int) -> np.ndarray:
    """One decoded picture as float32 (channels, H, W) in [0, 1] at its own size: 8-bit values divided by 255,
    wider grey values (16-bit PNGs) by their own white, never clipped to 8 bits first."""
    if img.mode in _WIDE_GREY:
        grey = np.asarray(img, dtype=np.float32) / _WIDE_GREY[img.mode]
        if not (np.isfinite(grey).all() and grey.min() >= 0 and grey.max() <= 1):
            raise ValueError(f"a {img.mode} picture holds values outside [0, {_WIDE_GREY[img.mode]:g}]; store 8- or "
                             "16-bit pixels")
        return np.repeat(grey[None], channels, axis=0)
    pixels = np.asarray(img.convert("L" if channels == 1 else "RGB"), dtype=np.float32) / 255.0
    return pixels[None] if channels == 1 else pixels.transpose(2, 0, 1)


def _load_folder(directory: Path, size: int, channels: int | None) -> np.ndarray:
    files = sorted(p for p in directory.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {directory}")
    opened = [_open(f) for f in files]
    if channels is None:
        channels = 1 if all(img.mode in _GREY_MODES for img in opened) else 3
    # one resize rule for folders and arrays (_resize), so a picture reads the same from either
    return np.concatenate([_resize(_pixels(img, channels)[None], size) for img in opened])


def _as_images(arr: np.ndarray, channels: int | None, *, what: str) -> np.ndarray:
    """(n, C, H, W) float32 in [0, 1] from an image array, with the layout and scale rules of load_images."""
    path = what
    if arr.ndim == 3:
        arr = arr[:, None]
    elif arr.ndim == 4 and arr.shape[1] not in (1, 3) and arr.shape[3] in (1, 3):
        arr = arr.transpose(0, 3, 1, 2)  # channels last -> first
    if arr.ndim != 4 or arr.shape[1] not in (1, 3):
        raise ValueError(f"{path} holds an array of shape {arr.shape}; images are (n, H, W), (n, C, H, W) or "
                         "(n, H, W, C) with C = 1 (grey) or 3 (RGB)")
    if len(arr) == 0:
        raise ValueError(f"{path} holds no images")
    if arr.dtype == np.uint8:
        arr = arr.astype(np.float32) / 255.0
    elif arr.dtype.kind == "f":
        arr = arr.astype(np.float32)
        if not np.isfinite(arr).all():
            raise ValueError(f"{path} holds NaN or infinite pixels; fix or drop those images")
        if arr.min() < 0 or arr.max() > 1:
            raise ValueError(f"{path} holds float pixels outside [0, 1]; scale them (e.g. divide 8-bit values "
                             "by 255) or store uint8")
    else:
        raise ValueError(f"{path} has pixels of dtype {arr.dtype}; use uint8 (0-255) or floats in [0, 1]")
    if channels is not None and arr.shape[1] != channels:
        raise ValueError(f"{path} holds {arr.shape[1]}-channel images; the autoencoder takes {channels}-channel "
                         "ones (convert them first)")
    return arr


def _resize(images: np.ndarray, size: int, chunk: int = 1024) -> np.ndarray:
    """Centre-crop to a square and resize to ``size`` × ``size`` (bilinear, antialiased)."""
    import torch
    from torch.nn.functional import interpolate

    h, w = images.shape[2:]
    side = min(h, w)
    top, left = (h - side) // 2, (w - side) // 2
    images = images[:, :, top:top + side, left:left + side]
    if side == size:
        return np.ascontiguousarray(images)
    out = [interpolate(torch.from_numpy(np.ascontiguousarray(images[i:i + chunk])), size=(size, size),
                       mode="bilinear", antialias=True, align_corners=False).clamp_(0, 1).numpy()
           for i in range(0, len(images), chunk)]
    return np.concatenate(out)
