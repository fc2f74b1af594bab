"""The table codec: the public map from records to rows of norm 1 and back to valid records.

Built from the declared schema (the table's counterpart of an image autoencoder, with nothing to train): every
column becomes a block of cells (:class:`~swflow.tables.cells.ColumnCells`). By default a categorical column has one
cell per declared category, a numeric column one cell per value when it is integer with at most ``numeric_bins``
values, else ``numeric_bins`` equal-width bins on its declared bounds (equal in log on a ``"scale": "log"``
column), and a numeric column that may be missing one more cell. Given ``cells`` (set by a released fine histogram or by public rows: :mod:`swflow.tables.resolution`)
replace those defaults. A record is the concatenation of its blocks' one-hot vectors, scaled by 1/√C for C columns,
so every record has norm exactly 1: the bound R = 1 that the release's sensitivity needs holds by construction,
whatever the private rows are.

Back: each block's largest coordinate picks its cell, and the cell decodes to a value drawn inside it (public
randomness; :meth:`ColumnCells.draw`). Any vector decodes to a valid record.
"""
from __future__ import annotations

import math

import numpy as np

from .cells import ColumnCells
from .schema import Schema
from .types import present

__all__ = ["TableCodec", "NUMERIC_BINS"]

#: equal-width bins of a numeric column (an integer column with at most this many values keeps each value)
NUMERIC_BINS = 16


class TableCodec:
    """Records (a DataFrame under ``schema``) to rows (n, D) of norm 1, and rows back to records."""

    def __init__(self, schema: Schema, *, numeric_bins: int = NUMERIC_BINS, cells: list[ColumnCells] | None = None):
        if numeric_bins < 2:
            raise ValueError(f"numeric_bins must be >= 2, got {numeric_bins}")
        self.schema, self.numeric_bins = schema, numeric_bins
        if cells is None:
            cells = [ColumnCells.uniform(c, bins=numeric_bins) for c in schema.columns]
        if len(cells) != len(schema.columns) or any(c.grid.column != col for c, col in zip(cells, schema.columns)):
            raise ValueError("cells must be given for every column of the schema, in its order")
        self.cells = list(cells)
        sizes = [c.size for c in self.cells]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.dim = int(self.offsets[-1])
        self.scale = 1.0 / math.sqrt(len(schema.columns))

    def blocks(self) -> list[tuple[int, int]]:
        """(start, stop) of each column's block in a row, in schema order."""
        return [(int(a), int(b)) for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    @property
    def sizes(self) -> list[int]:
        """Each column's number of cells."""
        return [c.size for c in self.cells]

    def priors(self) -> list[np.ndarray | None]:
        """Per column, a law over its cells known before any data, which the fit shrinks their noisy counts toward
        (swflow.tables.shrinkage.shrunk_tables): for categories every category alike, NaN on the cell of the rest
        (the categories the trees did not keep as cells: the least counted, so each category alike says nothing of
        its mass; the fit leaves it as counted); for numbers every stretch of the declared bounds alike, on the
        column's scale (a cell in proportion to its fine cells, none on a released atom or a bound, which a uniform
        draw reaches with probability 0). None where a column may be missing (its missing cell has no such law).
        A number's cells were set by the trees' release, which the pair tables' noise does not touch."""
        out = []
        for column, cells in zip(self.schema.columns, self.cells):
            if cells.missing:
                out.append(None)
                continue
            if column.kind == "categorical":
                held = np.diff(cells.starts)
                out.append(np.where(held > 1, np.nan, held / cells.grid.values))
                continue
            mass = np.add.reduceat(cells.grid.prior[:cells.grid.values][cells.order], cells.starts[:-1])
            out.append(mass / mass.sum() if mass.sum() > 0 else None)
        return out

    def cell_index(self, table) -> np.ndarray:
        """(n, C) int: each record's cell in each column (``table`` already checked against the schema)."""
        out = np.empty((len(table), len(self.schema.columns)), dtype=np.int64)
        for j, (column, cells) in enumerate(zip(self.schema.columns, self.cells)):
            out[:, j] = cells.index(table[column.name])
        return out

    def encode(self, table, *, clip: bool = False) -> np.ndarray:
        """Rows (n, D) float32 of norm 1 for the records of ``table``, checked against the schema first."""
        return self.rows(self.cell_index(self.schema.check(table, clip=clip)))

    def rows(self, cells: np.ndarray) -> np.ndarray:
        """Rows (n, D) float32 of norm 1: one cell per block, each coordinate 1/√C, for cells (n, C)."""
        rows = np.zeros((len(cells), self.dim), dtype=np.float32)
        rows[np.arange(len(cells))[:, None], self.offsets[:-1][None, :] + cells] = self.scale
        return rows

    def decode(self, rows: np.ndarray, *, seed: int = 0):
        """Valid records (a DataFrame with the schema's columns and dtypes) from any rows (n, D): each block's
        largest coordinate picks the cell (:meth:`decode_cells`)."""
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != self.dim:
            raise ValueError(f"rows must be (n, {self.dim}) for this schema's codec, got {rows.shape}")
        return self.decode_cells(np.stack([rows[:, a:b].argmax(axis=1) for a, b in self.blocks()], axis=1),
                                 seed=seed)

    def decode_cells(self, cells: np.ndarray, *, seed: int = 0):
        """Valid records from cells (n, C), each in its column's range; a cell becomes a value drawn inside it
        with the public ``seed`` (a whole number for integer columns, missing for a missing cell), in the dtype the
        column's records came in (swflow.tables.types.present)."""
        import pandas as pd

        cells = np.asarray(cells, dtype=np.int64)
        sizes = np.array(self.sizes)
        if cells.ndim != 2 or cells.shape[1] != len(sizes) or (cells < 0).any() or (cells >= sizes).any():
            raise ValueError(f"cells must be (n, {len(sizes)}) with column j's cells in 0..{list(sizes - 1)}")
        rng = np.random.default_rng(seed)
        return pd.DataFrame({column.name: present(column, column_cells.draw(cells[:, j], rng))
                             for j, (column, column_cells) in enumerate(zip(self.schema.columns, self.cells))})
