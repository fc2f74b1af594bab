"""HDF5 files of the output contract: samples.h5 and trajectory.h5.

The trajectory is written frame by frame into a chunked, compressed, resizable dataset, so
memory does not grow with the number of steps, and a resumed run truncates frames past its
checkpoint before appending.
"""
from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

__all__ = ["PIXEL_SCALE", "load_tensors", "TrajectoryWriter", "ReleaseRecorder", "read_trajectory", "to_pixels",
           "write_samples", "read_samples"]


def load_tensors(path: str | Path, *, what: str, map_location=None):
    """``torch.load(path, weights_only=True)``: tensors and plain values only, so a file can never run
    code. A file that holds anything else, or is truncated, is refused with what to do."""
    import pickle

    import torch

    try:
        return torch.load(path, weights_only=True, map_location=map_location)
    except (pickle.UnpicklingError, RuntimeError, EOFError, AttributeError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"{path} is not a readable {what} (truncated, or it holds objects other than tensors and "
                         f"plain values, which swflow never loads: {first[:160]}); delete it, or start over "
                         "with --overwrite") from err


class TrajectoryWriter:
    """Appends particle snapshots to ``path`` (datasets ``latents`` (frames, n, d) and ``steps``)."""

    def __init__(self, path: str | Path, *, n: int, d: int, config: dict, resume_step: int | None = None):
        self.path = Path(path)
        if resume_step is None or not self.path.exists():
            with h5py.File(self.path, "w") as f:
                chunk_rows = max(1, min(n, (1 << 20) // (4 * d)))  # ~1 MiB chunks
                f.create_dataset("latents", shape=(0, n, d), maxshape=(None, n, d), dtype="float32",
                                 chunks=(1, chunk_rows, d), compression="gzip", compression_opts=4,
                                 shuffle=True)
                f.create_dataset("steps", shape=(0,), maxshape=(None,), dtype="int64", chunks=(1024,))
                f.attrs["config"] = json.dumps(config)
        else:
            with h5py.File(self.path, "a") as f:
                keep = int(np.searchsorted(f["steps"][:], resume_step, side="right"))
                f["latents"].resize(keep, axis=0)
                f["steps"].resize(keep, axis=0)
                f.attrs["config"] = json.dumps(config)  # a run rewound to its release may go on with other steps

    def append(self, step: int, particles: np.ndarray) -> None:
        from .resources import ensure_free

        ensure_free(self.path.parent, particles.size * 4, what=f"a frame of {self.path.name}")
        with h5py.File(self.path, "a") as f:
            lat, steps = f["latents"], f["steps"]
            i = lat.shape[0]
            lat.resize(i + 1, axis=0)
            steps.resize(i + 1, axis=0)
            lat[i] = particles.astype(np.float32, copy=False)
            steps[i] = step


def read_trajectory(path: str | Path) -> tuple[np.ndarray, np.ndarray, dict]:
    """(latents (frames, n, d), steps (frames,), config)."""
    with h5py.File(path, "r") as f:
        return f["latents"][:], f["steps"][:], json.loads(f.attrs["config"])


#: images are stored as 8-bit pixels: value = stored / PIXEL_SCALE (the dataset's ``pixel_scale`` attribute)
PIXEL_SCALE = 255


def to_pixels(images: np.ndarray) -> np.ndarray:
    """Images in [0, 1] as 8-bit pixels (rounded): what samples.h5 stores, and what image tools and FID read."""
    return np.rint(np.clip(np.asarray(images, dtype=np.float32), 0.0, 1.0) * PIXEL_SCALE).astype(np.uint8)


def write_samples(path: str | Path, latents, *, config: dict, decoder=None,
                  labels: np.ndarray | None = None) -> np.ndarray | None:
    """samples.h5: ``latents`` (n, d) float32, ``images`` (n, C, H, W) as 8-bit pixels (attribute
    ``pixel_scale`` = 255: a pixel in [0, 1] is the stored value / 255) when a ``decoder`` maps latents to
    images, and ``labels``. ``latents`` is one array or an iterable of (n_i, d) chunks, written as they
    come, so memory stays flat in n. Returns the first chunk's images as floats in [0, 1] (for a picture),
    or None."""
    from .resources import ensure_free

    path = Path(path)
    chunks = [latents] if isinstance(latents, np.ndarray) else latents
    first_images = None
    with h5py.File(path, "w") as f:
        for chunk in chunks:
            chunk = np.asarray(chunk, dtype=np.float32)
            images = None if decoder is None else to_pixels(decoder(chunk))
            ensure_free(path.parent, chunk.nbytes + (0 if images is None else images.nbytes), what=path.name)
            if "latents" not in f:
                f.create_dataset("latents", data=chunk, maxshape=(None, chunk.shape[1]), chunks=True,
                                 compression="gzip")
                if images is not None:
                    f.create_dataset("images", data=images, maxshape=(None, *images.shape[1:]), chunks=True,
                                     compression="gzip")
                    f["images"].attrs["pixel_scale"] = PIXEL_SCALE
                    first_images = images.astype(np.float32) / PIXEL_SCALE
                continue
            for name, values in (("latents", chunk), ("images", images)):
                if values is not None:
                    f[name].resize(f[name].shape[0] + len(values), axis=0)
                    f[name][-len(values):] = values
        if labels is not None:
            f.create_dataset("labels", data=np.asarray(labels))
        f.attrs["config"] = json.dumps(config)
    return first_images


def read_samples(path: str | Path) -> dict:
    """Every dataset of samples.h5 as arrays, plus ``config``; ``images`` as float32 in [0, 1] whatever their
    storage (8-bit pixels with their ``pixel_scale``, or floats from older versions)."""
    try:
        with h5py.File(path, "r") as f:
            out = {k: f[k][:] for k in f.keys()}
            if "images" in f and "pixel_scale" in f["images"].attrs:
                out["images"] = out["images"].astype(np.float32) / float(f["images"].attrs["pixel_scale"])
            out["config"] = json.loads(f.attrs["config"])
    except (OSError, KeyError) as err:
        raise ValueError(f"could not read {path} ({err}): the file is truncated or not an swflow samples file; "
                         "rerun the command that wrote it") from err
    return out


class ReleaseRecorder:
    """Records what the private data released at each flow step into ``model.h5``, and nothing more.

    Per step: the (public) directions theta (d, k), the step's σ, and a sketch of the released,
    already-noisy sorted projections — their empirical quantiles at ``sketch`` levels (i + ½)/K,
    or every released value when ``sketch`` is None. Steps are buffered and flushed with each
    checkpoint; a resumed run first drops steps past its checkpoint. ``public``: arrays of a one-off
    release kept whole in the group ``release/`` (a histogram's noisy counts).
    """

    def __init__(self, path: str | Path, *, attrs: dict, sketch: int | None, resume_step: int | None = None,
                 public: dict | None = None):
        self.path, self.sketch = Path(path), sketch
        self._buffer: list[tuple[int, np.ndarray, np.ndarray, float]] = []
        if resume_step is None or not self.path.exists():
            with h5py.File(self.path, "w") as f:
                for key, value in attrs.items():
                    f.attrs[key] = json.dumps(value)
                f.attrs["sketch"] = -1 if sketch is None else sketch
                for name, values in (public or {}).items():  # a one-off release, whole (see PrivateTarget.public_release)
                    f.create_dataset(f"release/{name}", data=np.asarray(values), compression="gzip")
        else:
            with h5py.File(self.path, "a") as f:
                for key, value in attrs.items():  # a run rewound to its release may go on with other steps
                    f.attrs[key] = json.dumps(value)
                if "steps" in f:
                    keep = int(np.searchsorted(f["steps"][:], resume_step, side="left"))  # steps < resume_step
                    for name in ("steps", "theta", "released", "sigma"):
                        f[name].resize(keep, axis=0)

    def add(self, step: int, theta, released, sigma: float) -> None:
        from ..kernels.sliced import quantile, rank_levels

        if self.sketch is not None:
            released = quantile(released, rank_levels(self.sketch, device=released.device, dtype=released.dtype))
        self._buffer.append((step, theta.detach().cpu().numpy().astype(np.float32),
                             released.detach().cpu().numpy().astype(np.float32), float(sigma)))

    def flush(self) -> None:
        if not self._buffer:
            return
        steps = np.array([b[0] for b in self._buffer], dtype=np.int64)
        theta = np.stack([b[1] for b in self._buffer])
        sigma = np.array([b[3] for b in self._buffer])
        widths = {b[2].shape[1] for b in self._buffer}
        if len(widths) != 1:
            raise ValueError("released sets of different sizes (Poisson batches) need a sketch size")
        released = np.stack([b[2] for b in self._buffer])
        from .resources import ensure_free

        ensure_free(self.path.parent, theta.nbytes + released.nbytes + 16 * len(steps), what=self.path.name)
        with h5py.File(self.path, "a") as f:
            if "steps" not in f:
                f.create_dataset("steps", shape=(0,), maxshape=(None,), dtype="int64", chunks=(4096,))
                f.create_dataset("sigma", shape=(0,), maxshape=(None,), dtype="float64", chunks=(4096,))
                f.create_dataset("theta", shape=(0, *theta.shape[1:]), maxshape=(None, *theta.shape[1:]),
                                 dtype="float32", chunks=(64, *theta.shape[1:]), compression="gzip")
                f.create_dataset("released", shape=(0, *released.shape[1:]), maxshape=(None, *released.shape[1:]),
                                 dtype="float32", chunks=(16, *released.shape[1:]), compression="gzip")
            i = f["steps"].shape[0]
            for name, values in (("steps", steps), ("sigma", sigma), ("theta", theta), ("released", released)):
                f[name].resize(i + len(values), axis=0)
                f[name][i:] = values
        self._buffer.clear()
