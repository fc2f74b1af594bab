"""Private rows that stay where they are, read in chunks: :class:`ChunkedRows`, the base of every such
data source, and :class:`StreamedRows`, an HDF5 dataset.

A release that is a sum over rows (the sliced histogram's counts) can be computed chunk by chunk, so
the private data may be larger than memory. Every chunk is checked as an in-memory set is (finite,
inside the norm ball, or clipped when asked) before anything is counted, and the rows' fingerprint
for a resumed run is a SHA-256 over the chunks. Under torch.distributed each rank streams its own
contiguous share of the rows (``start``/``stop``).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from torch import Tensor

__all__ = ["ChunkedRows", "CountedRows", "StreamedRows"]


class ChunkedRows:
    """The base of a data source whose rows are read in chunks (a file, a database query, a generator).

    A source implements ``shape`` (rows, dim) and ``chunks()``, which yields (offset of the chunk's first
    row, rows (c, d)) in order, the same rows on every call. The base gives ``len``, the fingerprint a
    resumed run checks (``sha256``) and ``to``. Only a release that is a sum over rows (dpswflow-hist's
    counts) reads such a source; every other method needs the rows in memory and says so. A source that
    can be cut into contiguous shards (``rows[lo:hi]``) also runs under torchrun."""

    @property
    def shape(self) -> tuple[int, int]:
        raise NotImplementedError

    def chunks(self) -> Iterator[tuple[int, Tensor]]:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.shape[0]

    def to(self, device) -> "ChunkedRows":
        """These rows with their chunks on ``device``; a source that only reads to the CPU is itself there."""
        if device is None or torch.device(device).type == "cpu":
            return self
        raise NotImplementedError(f"{type(self).__name__} reads its rows to the CPU only; implement to(device) "
                                  "to count them on another device")

    def sha256(self) -> str:
        """A fingerprint of the rows (never the rows), for a resumed run to check it reads the same ones."""
        digest = hashlib.sha256(repr(tuple(self.shape)).encode())
        for _, rows in self.chunks():
            digest.update(torch.as_tensor(rows, dtype=torch.float32).cpu().numpy().tobytes())
        return digest.hexdigest()

    def __str__(self) -> str:
        return f"{type(self).__name__} of {self.shape[0]} rows"


class CountedRows(ChunkedRows):
    """Rows that stay in an engine that counts them (swflow/tables/engines.py): a count release asks for its exact
    counts, never for the rows. ``pair_counts(sizes, pairs)``: marginals.pair_counts' layout;
    ``level_counts(columns, trees)``: oneway.level_counts'; ``distinct_values(columns, inside, at_least)``: each
    column's values strictly inside its bounds held by at least that many records, and its bounds held by any, with
    their counts."""

    def pair_counts(self, sizes: list[int], pairs: list[tuple[int, int]]) -> Tensor:
        raise NotImplementedError

    def level_counts(self, columns: list[int], trees) -> Tensor:
        raise NotImplementedError

    def distinct_values(self, columns: list[int], inside: list[tuple[float, float]], at_least: int) -> list:
        raise NotImplementedError

    def chunks(self):
        raise TypeError(f"{self} is counted where it lives: only a count release (dpswflow-hist on a table) reads "
                        "it, and never its rows")


class StreamedRows(ChunkedRows):
    """Rows ``start`` … ``stop`` of the 2-D dataset ``dataset`` of the HDF5 file ``path``, in chunks of
    ``chunk_rows`` (a chunk of 65 536 rows of d = 8 is 2 MB; the histogram's (K, chunk) projections of it
    are K × 0.5 MB)."""

    def __init__(self, path: str | Path, *, dataset: str = "data", start: int = 0, stop: int | None = None,
                 chunk_rows: int = 1 << 16, device=None):
        import h5py

        self.path, self.dataset, self.chunk_rows, self.device = Path(path), dataset, int(chunk_rows), device
        if self.chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        try:
            with h5py.File(self.path, "r") as f:
                if dataset not in f:
                    raise ValueError(f"{self.path} has no dataset {dataset!r} (it holds {sorted(f.keys())})")
                shape, kind = f[dataset].shape, f[dataset].dtype.kind
        except OSError as err:
            raise ValueError(f"could not read {self.path}: {err}") from err
        if len(shape) != 2:
            raise ValueError(f"{self.path}:{dataset} has shape {shape}; need 2-D rows = records")
        if kind not in "fiub":
            raise ValueError(f"{self.path}:{dataset} holds {kind!r} values; need numbers")
        stop = shape[0] if stop is None else stop
        if not 0 <= start <= stop <= shape[0]:
            raise ValueError(f"rows {start}..{stop} are not within the {shape[0]} rows of {self.path}")
        self.start, self.stop, self.dim = start, stop, shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.stop - self.start, self.dim)

    def __getitem__(self, rows: slice) -> "StreamedRows":
        """Rows ``lo:hi`` of these (a rank's shard), still on disk."""
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("rows on disk are taken as a contiguous slice lo:hi")
        lo, hi, _ = rows.indices(len(self))
        return StreamedRows(self.path, dataset=self.dataset, start=self.start + lo, stop=self.start + max(lo, hi),
                            chunk_rows=self.chunk_rows, device=self.device)

    def to(self, device) -> "StreamedRows":
        """The same rows, their chunks delivered on ``device``."""
        return StreamedRows(self.path, dataset=self.dataset, start=self.start, stop=self.stop,
                            chunk_rows=self.chunk_rows, device=device)

    def chunks(self) -> Iterator[tuple[int, Tensor]]:
        """(offset of the chunk's first row, rows (c, d) float32), in order."""
        import h5py

        with h5py.File(self.path, "r") as f:
            data = f[self.dataset]
            for lo in range(self.start, self.stop, self.chunk_rows):
                rows = np.asarray(data[lo:min(lo + self.chunk_rows, self.stop)], dtype=np.float32)
                yield lo, torch.from_numpy(rows).to(self.device or "cpu")

    def __str__(self) -> str:
        return f"{self.path}:{self.dataset}"
