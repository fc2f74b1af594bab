"""Files of rows: .npy, .npz and HDF5 arrays read by one rule, and the domain a file declares for its rows.

Nothing here reads a row to decide anything about the rows: the domain and the norm bound are the file's
declaration (what ``swflow encode`` writes), never guessed from its values.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["as_rows", "declared_domain", "h5_dataset_name", "load_array", "read_array"]


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
