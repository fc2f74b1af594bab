"""What an engine that counts a table where it lives gives a run (swflow/tables/engines.py chooses it): an
:class:`EngineTable` answers three counts, and :class:`EngineRows` / :class:`EngineValues` hand them to the releases
as :class:`~swflow.privacy.rows.CountedRows`."""
from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import torch

from ..privacy.rows import CountedRows
from .schema import Schema

__all__ = ["EngineTable", "EngineRows", "EngineValues", "files_of", "files_sha256", "is_uri"]


def is_uri(source) -> bool:
    """Whether ``source`` names files by a URI (``hdfs://…``, ``s3a://…``, ``file://…``) that only Spark reads."""
    return isinstance(source, (str, Path)) and "://" in str(source)


def files_of(pattern) -> list[Path]:
    """The files a path or a glob names, sorted; one kind (.csv or .parquet); refused when there are none."""
    text = str(pattern)
    files = sorted(Path(p) for p in glob.glob(text)) if glob.has_magic(text) else [Path(text)]
    if not files or not all(f.exists() for f in files):
        raise FileNotFoundError(f"table file {text} is missing" if not glob.has_magic(text) else
                                f"no table file matches {text}")
    suffixes = {f.suffix.lower() for f in files}
    kinds = {".parquet" if s == ".parquet" else ".csv" if s in (".csv", ".tsv", ".txt") else s for s in suffixes}
    if len(kinds) != 1 or kinds - {".csv", ".parquet"}:
        raise ValueError(f"{text}: a table is text (.csv, .tsv, .txt) or .parquet files, all of one kind, got "
                         f"{sorted(suffixes)}")
    return files


class EngineTable:
    """The private rows an engine counts where they are, checked against ``schema`` once (``len()``: the number of
    records). An engine implements the three counts below; the releases read them through :meth:`rows` and
    :meth:`values`."""

    schema: Schema
    name: str

    def pair_counts(self, codec, pairs: list[tuple[int, int]]) -> np.ndarray:
        """(Σ sizes[i]·sizes[j],) int64: the exact pair tables of ``codec``'s cells (marginals.pair_counts)."""
        raise NotImplementedError

    def fine_counts(self, codec, columns: list[int], trees=None) -> list[np.ndarray]:
        """Each of ``columns``' exact counts by its cells of ``codec`` ((sizes[j],) int64 each; float64 where a
        privacy unit weights its rows by their spread over ``trees``, the columns' released trees)."""
        raise NotImplementedError

    def unit_mass(self) -> float:
        """Under a privacy unit: what the count of records counts (each unit min(its rows, k))."""
        raise NotImplementedError(f"{type(self).__name__} counts record-level runs only")

    def distinct(self, name: str, low: float, high: float, at_least: int) -> tuple[np.ndarray, np.ndarray]:
        """The checked values of column ``name`` within [low, high] that at least ``at_least`` records hold, or
        that are ``low`` or ``high`` (held by any), rising (float64), and their counts (int64)."""
        raise NotImplementedError

    def sha256(self) -> str:
        """A fingerprint of the rows' source (never the rows)."""
        raise NotImplementedError

    def rows(self, codec) -> "EngineRows":
        """These records as ``codec`` encodes them, counted where they are."""
        return EngineRows(self, codec)

    def values(self, names: list[str]) -> "EngineValues":
        """The checked values of the columns ``names``, as the repeated-values release counts them."""
        return EngineValues(self, names)


def files_sha256(files: list[Path], head: str = "") -> str:
    """SHA-256 of ``head`` and the bytes of ``files``."""
    import hashlib

    digest = hashlib.sha256(head.encode())
    for path in files:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
    return digest.hexdigest()


class EngineRows(CountedRows):
    """The records of an :class:`EngineTable` in ``codec``'s cells, as the count releases read them: their exact
    pair tables and fine histograms, from the engine."""

    def __init__(self, table: EngineTable, codec):
        self.table, self.codec = table, codec

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.table), self.codec.dim)

    def __getitem__(self, rows: slice) -> "EngineRows":
        if rows.indices(len(self))[:2] != (0, len(self)):
            raise ValueError("an engine counts all of its rows: a table it counts does not run under torchrun")
        return self

    def pair_counts(self, sizes: list[int], pairs: list[tuple[int, int]]) -> torch.Tensor:
        if list(sizes) != list(self.codec.sizes):
            raise ValueError("the tables' cells are not this codec's")
        return torch.from_numpy(self.table.pair_counts(self.codec, [tuple(p) for p in pairs]))

    def level_counts(self, columns: list[int], trees) -> torch.Tensor:
        fine = self.table.fine_counts(self.codec, list(columns), trees=list(trees))
        parts = []
        for counts, tree in zip(fine, trees):
            leaves = torch.from_numpy(counts)
            for level in range(1, tree.levels + 1):
                parts.append(torch.zeros(tree.nodes(level), dtype=leaves.dtype).index_add_(
                    0, tree.node_of(torch.arange(len(leaves)), level), leaves))
        return torch.cat(parts)

    def sha256(self) -> str:
        return self.table.sha256()

    def __str__(self) -> str:
        return str(self.table)


class EngineValues(CountedRows):
    """The checked values of some columns of an :class:`EngineTable` (``names``), as the repeated-values release
    reads them: each column's candidates and their exact counts, from the engine."""

    def __init__(self, table: EngineTable, names: list[str]):
        self.table, self.names = table, list(names)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.table), len(self.names))

    def __getitem__(self, rows: slice) -> "EngineValues":
        if rows.indices(len(self))[:2] != (0, len(self)):
            raise ValueError("an engine counts all of its rows: a table it counts does not run under torchrun")
        return self

    def distinct_values(self, columns: list[int], inside: list[tuple[float, float]], at_least: int):
        return [tuple(map(torch.from_numpy, self.table.distinct(self.names[j], low, high, at_least)))
                for j, (low, high) in zip(columns, inside)]

    def sha256(self) -> str:
        return self.table.sha256()

    def __str__(self) -> str:
        return str(self.table)
