"""Private tables with a public schema: the schema, the codec between records and rows, and table files.

A table reaches the engine as one source (a CSV or Parquet file, or a DataFrame) and one codec (the
:class:`~swflow.tables.codec.TableCodec`, built from the declared :class:`~swflow.tables.schema.Schema`, never from
private rows): records become rows of norm 1, the release and the flow run on them as on any rows, and the codec
turns the particles back into valid records.
"""
from .codec import TableCodec
from .example import example_table
from .schema import Column, Schema, SchemaError

__all__ = ["Column", "Schema", "SchemaError", "TableCodec", "example_table"]
