"""Rows that are already in the flow's space: the ``rows`` source and the ``identity`` codec.

A file (.npy, .npz, .h5) or rows in memory (an array, a tensor, an h5py dataset, any
:class:`~swflow.privacy.rows.ChunkedRows`). Where the rows live is the file's declaration (``swflow encode``
writes it) or the user's statement, never guessed from the rows: their norms are private.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..io.arrays import as_rows, declared_domain, h5_dataset_name, load_array
from ..privacy.rows import ChunkedRows, StreamedRows
from ..core.sources import Records, SourceRequest

__all__ = ["IdentityCodec", "identity_codec", "rows_source"]

HDF5_SUFFIXES = (".h5", ".hdf5")


class IdentityCodec:
    """Rows are the records: encode checks them into float32 rows, and there is nothing to decode."""

    name = "identity"
    decode = None
    manifold = "ball"
    norm_bound = None

    def encode(self, values):
        if isinstance(values, ChunkedRows):
            return values
        return torch.from_numpy(np.ascontiguousarray(values))

    def describe(self) -> dict:
        return {}


def identity_codec(request: SourceRequest) -> IdentityCodec:
    return IdentityCodec()


def rows_source(request: SourceRequest, codec) -> Records:
    """The private rows of ``request.location``: a file, or rows in memory. An HDF5 file stays on disk, read in
    chunks, when ``request.streamed`` (the release is a sum over rows)."""
    where = request.location
    if isinstance(where, (str, Path)):
        return _file_rows(Path(where), request)
    if isinstance(where, ChunkedRows):
        return Records(where, manifold=request.manifold)
    if hasattr(where, "file") and hasattr(where, "name") and hasattr(where, "shape"):  # an h5py dataset
        return Records(StreamedRows(where.file.filename, dataset=where.name), manifold=request.manifold)
    rows = as_rows(where.detach().cpu().numpy() if isinstance(where, torch.Tensor) else where)
    if rows.ndim != 2:
        raise ValueError(f"data must be (rows, dims), got shape {tuple(rows.shape)}; images need "
                         "Synthesizer(..., autoencoder=NAME_OR_PATH)")
    return Records(rows, manifold=request.manifold)


def _file_rows(path: Path, request: SourceRequest) -> Records:
    domain = declared_domain(path)
    notes = ()
    if request.manifold is None and domain is not None:
        notes = (f"{path} declares its rows on the {domain['domain']} (R = {domain['norm_bound']:g}"
                 + (f", encoded by {domain['autoencoder']}" if "autoencoder" in domain else "")
                 + f"): --manifold {domain['domain']}",)
    elif request.manifold is None and request.require_manifold:
        raise ValueError(f"{path} does not say where its rows live: pass --manifold sphere (rows on the unit "
                         "sphere, such as autoencoder latents) or --manifold ball (rows anywhere in the ball of "
                         "radius R). Files from `swflow encode` declare it themselves")
    if request.streamed and path.suffix.lower() in HDF5_SUFFIXES:
        values = StreamedRows(path, dataset=h5_dataset_name(path))
    else:
        values = load_array(path)
    manifold = request.manifold or ("ball" if domain is None else domain["domain"])
    return Records(values, run_config={"data": str(path)}, manifold=manifold,
                   norm_bound=None if domain is None else domain["norm_bound"], notes=notes)
