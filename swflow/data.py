"""Datasets and the public/private split with its manifest.

The split is a seeded permutation of the record indices; the manifest stores both index sets'
sha256 so that anything trained on "the public split" can prove which rows it saw.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Split", "split_indices", "load_digits", "load_array", "write_manifest"]


@dataclass(frozen=True)
class Split:
    public: np.ndarray
    private: np.ndarray
    seed: int

    def manifest(self) -> dict:
        return {"seed": self.seed, "public_size": int(self.public.size), "private_size": int(self.private.size),
                "public_sha256": _hash(self.public), "private_sha256": _hash(self.private)}


def _hash(idx: np.ndarray) -> str:
    return hashlib.sha256(np.sort(idx).astype(np.int64).tobytes()).hexdigest()


def split_indices(n: int, *, public_fraction: float = 0.5, seed: int = 0) -> Split:
    """Deterministic disjoint public/private index sets covering range(n)."""
    if not 0 < public_fraction < 1:
        raise ValueError(f"public_fraction must be in (0, 1), got {public_fraction}")
    perm = np.random.default_rng(seed).permutation(n)
    cut = int(round(public_fraction * n))
    return Split(np.sort(perm[:cut]), np.sort(perm[cut:]), seed)


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1 797 8×8 digits (shipped in the wheel): images (n, 1, 8, 8) in [0, 1], labels."""
    from sklearn.datasets import load_digits as _load

    d = _load()
    return (d.images / 16.0).astype(np.float32)[:, None], d.target.astype(np.int64)


def load_array(path: str | Path) -> np.ndarray:
    """Rows of a .npy, .npz (its only or 'data' array) or .h5/.hdf5 ('data' or the only dataset)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give a .npy, .npz or .h5 file whose rows are records")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                keys = list(z.keys())
                key = "data" if "data" in keys else (keys[0] if len(keys) == 1 else None)
                if key is None:
                    raise ValueError(f"{path} holds several arrays {keys}; name the one to use 'data'")
                arr = z[key]
        elif suffix in (".h5", ".hdf5"):
            import h5py

            with h5py.File(path, "r") as f:
                keys = list(f.keys())
                key = "data" if "data" in keys else (keys[0] if len(keys) == 1 else None)
                if key is None:
                    raise ValueError(f"{path} holds several datasets {keys}; name the one to use 'data'")
                arr = f[key][:]
        else:
            raise ValueError(f"unsupported file type {suffix!r}; use .npy, .npz or .h5")
    except (OSError, EOFError) as err:
        raise ValueError(f"could not read {path}: {err} (corrupt or truncated file?)") from err
    arr = np.asarray(arr)
    if arr.ndim != 2:
        raise ValueError(f"{path} holds an array of shape {arr.shape}; need 2-D rows = records")
    return arr.astype(np.float32)


def write_manifest(split: Split, path: str | Path, **extra) -> Path:
    path = Path(path)
    path.write_text(json.dumps({**split.manifest(), **extra}, indent=2) + "\n")
    return path
