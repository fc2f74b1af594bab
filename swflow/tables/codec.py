"""The table codec: the public map from records to rows of norm 1 and back to valid records.

Built from the declared schema alone (the table's counterpart of an image autoencoder, with nothing to train):
every column becomes a block of cells, a categorical column one cell per declared category, a numeric column one
cell per value when it is integer with at most ``numeric_bins`` values, else ``numeric_bins`` equal-width bins on
its declared bounds. A record is the concatenation of its blocks' one-hot vectors, scaled by 1/√C for C columns,
so every record has norm exactly 1: the bound R = 1 that the release's sensitivity needs holds by construction,
whatever the private rows are.

Back: each block's largest coordinate picks its cell; a numeric bin becomes a value drawn uniformly inside it
(public randomness), rounded for integer columns and kept within the bounds. Any vector decodes to a valid record.
"""
from __future__ import annotations

import math

import numpy as np

from .schema import Column, Schema

__all__ = ["TableCodec", "NUMERIC_BINS"]

#: equal-width bins of a numeric column (an integer column with at most this many values keeps each value)
NUMERIC_BINS = 16


class TableCodec:
    """Records (a DataFrame under ``schema``) to rows (n, D) of norm 1, and rows back to records."""

    def __init__(self, schema: Schema, *, numeric_bins: int = NUMERIC_BINS):
        if numeric_bins < 2:
            raise ValueError(f"numeric_bins must be >= 2, got {numeric_bins}")
        self.schema, self.numeric_bins = schema, numeric_bins
        self.cells = [self._cells(c) for c in schema.columns]
        sizes = [len(c) for c in self.cells]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
        self.dim = int(self.offsets[-1])
        self.scale = 1.0 / math.sqrt(len(schema.columns))

    def _cells(self, column: Column) -> list:
        """The cells of ``column``: its categories, its integer values, or the left edges of its bins."""
        if column.kind == "categorical":
            return list(column.categories)
        if column.integer and column.high - column.low + 1 <= self.numeric_bins:
            return list(range(int(math.ceil(column.low)), int(math.floor(column.high)) + 1))
        return list(np.linspace(column.low, column.high, self.numeric_bins + 1)[:-1])

    def blocks(self) -> list[tuple[int, int]]:
        """(start, stop) of each column's block in a row, in schema order."""
        return [(int(a), int(b)) for a, b in zip(self.offsets[:-1], self.offsets[1:])]

    def cell_index(self, table) -> np.ndarray:
        """(n, C) int: each record's cell in each column (``table`` already checked against the schema)."""
        out = np.empty((len(table), len(self.schema.columns)), dtype=np.int64)
        for j, column in enumerate(self.schema.columns):
            values = table[column.name]
            if column.kind == "categorical":
                lookup = {v: i for i, v in enumerate(column.categories)}
                out[:, j] = np.fromiter((lookup[v] for v in values.to_numpy(dtype=object)), np.int64, len(values))
            elif column.integer and isinstance(self.cells[j][0], int):
                out[:, j] = np.round(values.to_numpy(dtype=float)).astype(np.int64) - self.cells[j][0]
            else:
                width = (column.high - column.low) / self.numeric_bins
                idx = np.floor((values.to_numpy(dtype=float) - column.low) / width)
                out[:, j] = np.clip(idx, 0, self.numeric_bins - 1).astype(np.int64)
        return out

    def encode(self, table, *, clip: bool = False) -> np.ndarray:
        """Rows (n, D) float32 of norm 1 for the records of ``table``, checked against the schema first."""
        checked = self.schema.check(table, clip=clip)
        cells = self.cell_index(checked)
        rows = np.zeros((len(checked), self.dim), dtype=np.float32)
        rows[np.arange(len(checked))[:, None], self.offsets[:-1][None, :] + cells] = self.scale
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
        """Valid records from cells (n, C), each in its column's range; a numeric bin becomes a value drawn
        uniformly inside it with the public ``seed`` (a whole number for integer columns)."""
        import pandas as pd

        cells = np.asarray(cells, dtype=np.int64)
        sizes = np.array([len(c) for c in self.cells])
        if cells.ndim != 2 or cells.shape[1] != len(sizes) or (cells < 0).any() or (cells >= sizes).any():
            raise ValueError(f"cells must be (n, {len(sizes)}) with column j's cells in 0..{list(sizes - 1)}")
        rng = np.random.default_rng(seed)
        out = {}
        for j, (column, values) in enumerate(zip(self.schema.columns, self.cells)):
            pick = cells[:, j]
            if column.kind == "categorical":
                out[column.name] = pd.Series([values[i] for i in pick], dtype="object")
            elif column.integer and isinstance(values[0], int):
                out[column.name] = pd.Series(np.asarray(values, dtype=np.int64)[pick])
            else:
                width = (column.high - column.low) / self.numeric_bins
                left = column.low + pick * width
                if column.integer:  # a whole number of the bin, uniformly: the bin holds [left, left + width)
                    first = np.ceil(left)
                    last = np.where(pick == self.numeric_bins - 1, math.floor(column.high),
                                    np.ceil(left + width) - 1)
                    last = np.maximum(last, first)
                    drawn = (first + np.floor(rng.uniform(size=len(pick)) * (last - first + 1))).astype(np.int64)
                else:
                    drawn = np.clip(left + rng.uniform(size=len(pick)) * width, column.low, column.high)
                out[column.name] = pd.Series(drawn)
        return pd.DataFrame(out)
