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

__all__ = ["IMAGE_SUFFIXES", "load_images", "image_source", "is_image_collection"]

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp")
_GREY_MODES = ("1", "L", "LA", "I", "I;16", "F")


def is_image_collection(path: str | Path) -> bool:
    """A folder, or an array file whose array is not 2-D rows (images are (n, H, W) or 4-D)."""
    from .data import read_array

    path = Path(path)
    return path.is_dir() or (path.exists() and read_array(path).ndim in (3, 4))


def load_images(path: str | Path, *, size: int, channels: int | None = None) -> np.ndarray:
    """Images (n, channels, size, size) float32 in [0, 1] from a folder of pictures or an array file.

    Folder: every .png/.jpg/... file, in name order; converted to grey (1 channel) or RGB (3).
    Array (.npy/.npz/.h5): (n, H, W), (n, C, H, W) or (n, H, W, C) with C in {1, 3}; uint8 pixels are
    divided by 255, floats must already lie in [0, 1].
    Each image is centre-cropped to a square and resized to ``size`` (bilinear, antialiased).
    ``channels``: 1 or 3; None takes the collection's own (folders: grey only if every file is grey).
    """
    path = Path(path)
    if channels not in (None, 1, 3):
        raise ValueError(f"channels must be 1 (grey) or 3 (RGB), got {channels}")
    if size < 8:
        raise ValueError(f"image size must be at least 8 pixels, got {size}")
    if path.is_dir():
        return _load_folder(path, size, channels)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give a folder of images or an .npy/.npz/.h5 image array")
    return _resize(_array_images(path, channels), size)


def image_source(path: str | Path, images: np.ndarray) -> dict:
    """What a collection of *public* images was: path, count, shape and the sha256 of its pixels as read.
    Never called on private images: a fingerprint of private data is not released."""
    return {"path": str(path), "count": int(len(images)), "image_shape": list(images.shape[1:]),
            "sha256": hashlib.sha256(np.ascontiguousarray(images, dtype=np.float32).tobytes()).hexdigest()}


def _load_folder(directory: Path, size: int, channels: int | None) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    files = sorted(p for p in directory.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"no images ({', '.join(IMAGE_SUFFIXES)}) in {directory}")
    opened = []
    for f in files:
        try:
            with Image.open(f) as img:
                img.load()
                opened.append(img.copy())
        except (OSError, UnidentifiedImageError) as err:
            raise ValueError(f"could not read image {f}: {err}") from None
    if channels is None:
        channels = 1 if all(img.mode in _GREY_MODES for img in opened) else 3
    out = np.empty((len(opened), channels, size, size), dtype=np.float32)
    for i, img in enumerate(opened):
        img = img.convert("L" if channels == 1 else "RGB")
        side = min(img.size)
        left, top = (img.width - side) // 2, (img.height - side) // 2
        img = img.crop((left, top, left + side, top + side)).resize((size, size), Image.BILINEAR)
        pixels = np.asarray(img, dtype=np.float32) / 255.0
        out[i] = pixels[None] if channels == 1 else pixels.transpose(2, 0, 1)
    return out


def _array_images(path: Path, channels: int | None) -> np.ndarray:
    """(n, C, H, W) float32 in [0, 1] from an array file, with the layout and scale rules above."""
    from .data import read_array

    arr = read_array(path)
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
