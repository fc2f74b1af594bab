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

__all__ = ["TrajectoryWriter", "read_trajectory", "write_samples", "read_samples"]


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

    def append(self, step: int, particles: np.ndarray) -> None:
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


def write_samples(path: str | Path, latents: np.ndarray, *, config: dict, images: np.ndarray | None = None,
                  labels: np.ndarray | None = None) -> Path:
    """samples.h5: ``latents`` (n, d) float32, optional ``images`` (n, C, H, W) in [0, 1] and ``labels``."""
    path = Path(path)
    with h5py.File(path, "w") as f:
        f.create_dataset("latents", data=np.asarray(latents, dtype=np.float32), compression="gzip")
        if images is not None:
            f.create_dataset("images", data=np.asarray(images, dtype=np.float32), compression="gzip")
        if labels is not None:
            f.create_dataset("labels", data=np.asarray(labels))
        f.attrs["config"] = json.dumps(config)
    return path


def read_samples(path: str | Path) -> dict:
    """Every dataset of samples.h5 as arrays, plus ``config``."""
    with h5py.File(path, "r") as f:
        out = {k: f[k][:] for k in f.keys()}
        out["config"] = json.loads(f.attrs["config"])
    return out
