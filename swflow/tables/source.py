"""A table on the data path: the ``table`` source (a CSV or Parquet file, or a DataFrame) and the ``table`` codec
(:class:`~swflow.tables.codec.TableCodec`, built from the public schema), both registered in swflow.sources."""
from __future__ import annotations

from pathlib import Path

import torch

from ..core.sources import Records, SourceRequest
from .codec import TableCodec
from .files import TableRows
from .schema import Schema

__all__ = ["TableSource", "table_codec", "table_source"]


class TableSource:
    """The table codec as a run's data path uses it: a file is read and encoded in chunks (memory flat in its
    length), a DataFrame at once; every record is checked against the schema (or clipped to it, ``clip``)."""

    name = "table"
    manifold = "sphere"  # every encoded record has norm exactly 1 (swflow/tables/codec.py)
    norm_bound = None

    def __init__(self, codec: TableCodec, *, clip: bool = False):
        self.codec, self.clip = codec, clip

    def encode(self, table):
        if isinstance(table, (str, Path)):
            return TableRows(table, self.codec, clip=self.clip)
        return torch.from_numpy(self.codec.encode(table, clip=self.clip))

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
