"""A table on the data path: the ``table`` source (a CSV or Parquet file, or a DataFrame) and the ``table`` codec
(:class:`~swflow.tables.codec.TableCodec`, built from the public schema), both registered in swflow.sources."""
from __future__ import annotations

from pathlib import Path

import torch

from ..core.sources import Records, SourceRequest
from ..privacy.rows import ChunkedRows
from .codec import TableCodec
from .counted import EngineTable
from .files import TableRows
from .schema import Schema

__all__ = ["TableSource", "FrameCells", "table_codec", "table_source"]


class FrameCells(ChunkedRows):
    """A frame's records in memory as their cells, (n, C) int64, not as the codec's one-hot rows (n, D) float32:
    C numbers a record where D is every column's cells (insteval with each of its 2 972 students a cell: 5 164, so
    1.5 GB of rows against 3.5 MB of cells). The releases count cells (``cell_chunks()``); ``chunks()`` gives the
    one-hot rows a chunk at a time, for whatever reads rows; ``cells[lo:hi]`` is a rank's share under torchrun."""

    #: one-hot rows per chunk are at most this many coordinates (64 MB of float32)
    CHUNK_COORDINATES = 1 << 24

    def __init__(self, cells: torch.Tensor, codec: TableCodec):
        if cells.ndim != 2 or cells.shape[1] != len(codec.sizes) or cells.dtype != torch.int64:
            raise ValueError(f"cells must be (n, {len(codec.sizes)}) int64, got {tuple(cells.shape)} {cells.dtype}")
        self.cells, self.codec = cells, codec
        self.chunk_rows = max(1, self.CHUNK_COORDINATES // codec.dim)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.cells), self.codec.dim)

    def __getitem__(self, rows: slice) -> "FrameCells":
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("records are taken as a contiguous slice lo:hi")
        return FrameCells(self.cells[rows], self.codec)

    def cell_chunks(self):
        """(offset, cells (c, C) int64) per chunk, in order."""
        for offset in range(0, len(self.cells), self.chunk_rows):
            yield offset, self.cells[offset:offset + self.chunk_rows]

    def chunks(self):
        """(offset, the codec's rows (c, D) float32) per chunk, in order."""
        for offset, cells in self.cell_chunks():
            yield offset, torch.from_numpy(self.codec.rows(cells.numpy()))

    def sha256(self) -> str:
        """A fingerprint of the cells and of the codec's layout (never the records)."""
        import hashlib

        digest = hashlib.sha256(repr((tuple(self.shape), self.codec.sizes)).encode())
        digest.update(self.cells.contiguous().numpy().tobytes())
        return digest.hexdigest()

    def __str__(self) -> str:
        return f"the cells of {len(self.cells)} records"


class TableSource:
    """The table codec as a run's data path uses it: a file is read and encoded in chunks (memory flat in its
    length), a DataFrame at once into its cells (:class:`FrameCells`); every record is checked against the schema
    (or clipped to it, ``clip``)."""

    name = "table"
    manifold = "sphere"  # every encoded record has norm exactly 1 (swflow/tables/codec.py)
    norm_bound = None

    def __init__(self, codec: TableCodec, *, clip: bool = False):
        self.codec, self.clip = codec, clip

    def encode(self, table):
        if isinstance(table, (str, Path)):
            return TableRows(table, self.codec, clip=self.clip)
        if isinstance(table, EngineTable):  # counted where the rows live
            return table.rows(self.codec)
        return FrameCells(torch.from_numpy(self.codec.cell_index(self.codec.schema.check(table, clip=self.clip))),
                          self.codec)

    @property
    def decode(self):
        return self.codec.decode

    def describe(self) -> dict:
        return {"columns": self.codec.schema.names, "numeric_bins": self.codec.numeric_bins}


def table_codec(request: SourceRequest) -> TableSource:
    """The codec of ``request.schema``: a Schema, its JSON object, or a JSON file."""
    schema = request.schema
    if schema is None:
        raise ValueError("a table needs its public schema: --schema SCHEMA.json (propose one from public rows with "
                         "`swflow schema PUBLIC.csv`)")
    if not isinstance(schema, Schema):
        schema = Schema.from_json(schema) if isinstance(schema, dict) else Schema.read(schema)
    return TableSource(TableCodec(schema), clip=request.clip)


def table_source(request: SourceRequest, codec) -> Records:
    """The private table ``request.location``: a file (read by the codec in chunks) or a DataFrame."""
    where = request.location
    if isinstance(where, (str, Path)):
        if not Path(where).exists():
            raise FileNotFoundError(f"table file {where} is missing")
        return Records(where, run_config={"table": str(where)})
    return Records(where)
