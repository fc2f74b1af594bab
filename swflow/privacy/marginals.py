"""The marginal release of a table: K noisy two-way tables of counts, released once.

A table's records arrive as the codec's rows: one block of cells per column, each record one-hot in every block
(swflow/tables/codec.py). A direction supported on two blocks, with generic values on their cells, projects every
record to one atom per pair of cells, so its histogram is that pair's two-way marginal: the sliced histogram on
pair-block slices IS the set of two-way marginals. This module counts them exactly, as tables, rather than
through bins on a line (no two cells share a bin, whatever the blocks' sizes).

Sensitivity, with n fixed and public: a replaced record leaves one cell and enters another (or stays) in each
of the K tables, so at most 2K counts move by one: ℓ2 sensitivity √(2K), as the sliced histogram's (the same
events, the same accountants). Under zero-out the null record is the zero row, whose every block counts in its
first cell: again a replacement, √(2K). The pairs come from the public schema alone; the noise does not grow with
n, and nothing after the release (the particles' fit, any number of samples) touches the rows again.
"""
from __future__ import annotations

import torch
from torch import Tensor

from .histogram import CountTarget, ShardedCounts
from .rows import CountedRows

__all__ = ["MarginalTarget", "ShardedMarginalTarget", "exact_tables", "pair_counts", "split_tables", "MARGINAL_RELEASE",
           "marginal_release"]

MARGINAL_RELEASE = (
    "one release of the K = {k} two-way tables of counts of the private records' cells, for the column pairs "
    "{pairs} of the public schema, plus noise of std noise_std on every count. {sensitivity}. Calibrated once; the "
    "particles' fit to the released tables and every sample after it are free")
#: MARGINAL_RELEASE's sensitivity, by adjacency and by what one unit adds (a row: 1; a privacy unit: k)
MARGINAL_SENSITIVITY = {
    "replace-one": "L2 sensitivity sqrt(2K): a changed record moves one count between two cells of each table (n "
                   "stays fixed and public)",
    "add-remove": "L2 sensitivity sqrt(K): an added or removed record changes one count of each table (n is "
                  "private)",
    "unit": "L2 sensitivity {c} x sqrt(K): an added or removed unit moves each table's counts by at most {c} in L2, "
            "its rows weighted by their spread (the number of units and of rows is private)"}


def marginal_release(pairs, *, adjacency: str, contribution: int) -> str:
    """MARGINAL_RELEASE for ``pairs`` under ``adjacency``, one unit adding at most ``contribution`` to a table."""
    kind = "unit" if contribution > 1 else adjacency
    sensitivity = MARGINAL_SENSITIVITY.get(kind, MARGINAL_SENSITIVITY["replace-one"]).format(c=contribution)
    return MARGINAL_RELEASE.format(k=len(pairs), pairs=[list(p) for p in pairs], sensitivity=sensitivity)


def pair_counts(cells: Tensor, sizes: list[int], pairs: list[tuple[int, int]], weights: Tensor | None = None
                ) -> Tensor:
    """Exact two-way tables, flattened and concatenated.

    Parameters
    ----------
    cells : Tensor, shape (m, C), int64
        Each record's cell in each of the C columns (0 ≤ cells[:, j] < sizes[j]).
    sizes : the C columns' numbers of cells
    pairs : K pairs (i, j), i < j
    weights : Tensor, shape (m,), float64, optional
        Each record's weight (a privacy unit's rows, swflow/privacy/units.py); None counts each record once.

    Returns
    -------
    Tensor, shape (Σ_k sizes[i_k]·sizes[j_k],), int64 (float64 with weights): table k in row-major order (cell a of
    column i, b of j at a·sizes[j] + b); every table sums to m (to the weights' sum).
    """
    parts = [torch.bincount(cells[:, i] * sizes[j] + cells[:, j], weights=weights, minlength=sizes[i] * sizes[j])
             for i, j in pairs]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)


def _cells_of(rows: Tensor, blocks: list[tuple[int, int]]) -> Tensor:
    """(m, C) int64: each codec row's cell in each column (its block's one coordinate)."""
    return torch.stack([rows[:, a:b].argmax(dim=1) for a, b in blocks], dim=1)


def exact_tables(data, blocks: list[tuple[int, int]], pairs: list[tuple[int, int]], weights: Tensor | None = None
                 ) -> Tensor:
    """The exact two-way tables of ``pairs`` (concatenated, as :func:`pair_counts`), never released: of codec rows
    held in memory ((m, D) tensor, each column's block ``blocks[j]`` one-hot), summed chunk by chunk over a source of
    cells (a frame's, :class:`~swflow.tables.source.FrameCells`, or a file's, each chunk checked and read into cells
    before it is counted), or counted where the rows live (an engine's rows, swflow/tables/engines.py). Record i is
    counted with ``weights[i]`` (None: once)."""
    sizes = [stop - start for start, stop in blocks]
    if isinstance(data, Tensor):
        return pair_counts(_cells_of(data, blocks), sizes, pairs, weights)
    if isinstance(data, CountedRows):
        if weights is not None:
            raise ValueError("weighted records (a privacy unit's) are counted in memory, not by an engine")
        return data.pair_counts(sizes, pairs)
    empty = torch.zeros((0, len(sizes)), dtype=torch.int64)
    total = pair_counts(empty, sizes, pairs, None if weights is None else weights[:0])
    for offset, cells in data.cell_chunks():  # each record's cells as the codec reads them: no one-hot rows
        part = None if weights is None else weights[offset:offset + len(cells)]
        total = total + pair_counts(cells, sizes, pairs, part)
    return total


class MarginalTarget(CountTarget):
    """Codec rows (m, D) behind ONE release of K two-way tables (the :meth:`release_tables` call).

    ``blocks``: each column's (start, stop) in a row; ``pairs``: the K column pairs. The noise is the sliced
    histogram's (OpenDP's discrete Gaussian, or the privacy stream's float Gaussian), calibrated for K slices.
    """

    what, unit = "a table release", "tables"

    def __init__(self, data: Tensor, calibration, *, noise, ledger, blocks: list[tuple[int, int]],
                 pairs: list[tuple[int, int]], dataset_size: int | None = None):
        self.blocks, self.pairs = [tuple(b) for b in blocks], [tuple(p) for p in pairs]
        self.sizes = [stop - start for start, stop in self.blocks]
        if not self.pairs or any(not 0 <= i < j < len(self.sizes) for i, j in self.pairs):
            raise ValueError(f"pairs must be column pairs (i, j) with i < j < {len(self.sizes)}, got {self.pairs}")
        super().__init__(data, calibration, noise=noise, ledger=ledger, groups=len(self.pairs),
                         dataset_size=dataset_size)

    def cells(self, rows: Tensor | None = None) -> Tensor:
        """(m, C) int64: each record's cell in each column (its block's one coordinate), of ``rows`` (default: the
        private rows held in memory)."""
        return _cells_of(self._data if rows is None else rows, self.blocks)

    def _counts(self) -> Tensor:
        """The exact tables, concatenated (:func:`exact_tables` of the private rows), record i counted with
        ``weights[i]``."""
        return exact_tables(self._data, self.blocks, self.pairs, self.weights)

    def release_tables(self) -> list[Tensor]:
        """The K noisy tables (sizes[i] × sizes[j], float64), released once: the ledger event first, then the
        draw."""
        return split_tables(self._release_counts(), self.sizes, self.pairs)

    def public_release(self) -> dict:
        counts = getattr(self, "released_counts", None)
        return {} if counts is None else {"noisy_counts": counts}


def split_tables(flat: Tensor, sizes: list[int], pairs: list[tuple[int, int]]) -> list[Tensor]:
    """The concatenated tables of :func:`pair_counts` back as K (sizes[i], sizes[j]) tensors."""
    lengths = [sizes[i] * sizes[j] for i, j in pairs]
    if flat.ndim != 1 or flat.numel() != sum(lengths):
        raise ValueError(f"expected {sum(lengths)} released counts for these pairs, got shape {tuple(flat.shape)}")
    return [part.reshape(sizes[i], sizes[j]) for part, (i, j) in zip(flat.split(lengths), pairs)]


class ShardedMarginalTarget(ShardedCounts, MarginalTarget):
    """One rank's contiguous shard of a table's codec rows behind the one table release (torchrun,
    :class:`~swflow.privacy.histogram.ShardedCounts`). Built with ``dataset_size``, the records of every rank."""
