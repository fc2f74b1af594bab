"""Samples of a fitted table run as a Spark DataFrame, drawn on the executors chunk by chunk.

Chunk i of ``n`` records is ``syn.sample(size, seed=chunk_seed(seed, i))``, the chunks of SAMPLE_CHUNK records that
``swflow sample`` writes to a file (table_samples.py): the DataFrame holds those very records, one
partition a chunk, and a chunk is drawn only when Spark computes its partition. Drawing is post-processing of the
release: the executors receive the fitted Synthesizer (its released counts and particles, never a private row) and
need swflow installed, as for counting (swflow/tables/spark.py).

    >>> frame = syn.sample(100_000_000, seed=0, spark=spark)   # lazy; frame.write.parquet("hdfs:///synthetic")
"""
from __future__ import annotations

import datetime as dt

import pandas as pd

from .table_samples import SAMPLE_CHUNK, chunk_seed

__all__ = ["sample_dataframe", "spark_schema"]


def _spark_type(column) -> str:
    """The Spark SQL type of a column's samples (the dtype swflow.tables.types.present gives them)."""
    if column.kind == "categorical":
        declared = [c for c in column.categories if c is not None]
        if all(isinstance(c, bool) for c in declared):
            return "boolean"
        if all(isinstance(c, int) and not isinstance(c, bool) for c in declared):
            return "bigint"
        return "double" if all(isinstance(c, float) for c in declared) else "string"
    if column.temporal == "date":
        return "date"
    if column.temporal == "datetime":
        return "timestamp_ntz"  # naive, as pandas reads the rows: no session time zone moves them
    if column.temporal == "time":
        return "string"  # Spark has no time of day: HH:MM:SS[.ffffff]
    return "bigint" if column.integer and not column.missing else "double"


def spark_schema(schema) -> str:
    """The DDL of a samples DataFrame: each column of ``schema`` by :func:`_spark_type`, its name quoted."""
    return ", ".join(f"`{c.name.replace('`', '``')}` {_spark_type(c)}" for c in schema.columns)


def _for_spark(frame: pd.DataFrame, schema) -> pd.DataFrame:
    """``frame`` (a chunk of samples) in the Python types its Spark columns take."""
    out = {}
    for column in schema.columns:
        values, kind = frame[column.name], _spark_type(column)
        if kind == "date":
            values = pd.Series([None if pd.isna(v) else pd.Timestamp(v).date() for v in values], dtype=object)
        elif kind == "string":
            values = pd.Series([None if pd.isna(v) else v.isoformat() if isinstance(v, dt.time) else str(v)
                                for v in values], dtype=object)
        elif kind == "double":
            values = values.astype("float64")
        out[column.name] = values.reset_index(drop=True)
    return pd.DataFrame(out)


def sample_dataframe(syn, n: int, *, spark=None, seed: int = 0, conditions: dict | None = None, rules: bool = True,
                     chunk: int = SAMPLE_CHUNK):
    """A Spark DataFrame of ``n`` records of the fitted table Synthesizer ``syn`` (module docstring), in the session
    ``spark`` (default: the active one). ``conditions`` and ``rules`` as for ``syn.sample``."""
    from pyspark.sql import SparkSession

    if n < 1 or chunk < 1:
        raise ValueError(f"need n >= 1 samples and a chunk of at least 1, got n={n}, chunk={chunk}")
    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise ValueError("no active Spark session: pass spark=SparkSession.builder.getOrCreate() (or your own)")
    syn.sample(1, seed=seed, conditions=conditions, rules=rules)  # a bad condition fails here, before any job
    schema = syn.user_schema
    sizes = [min(chunk, n - start) for start in range(0, n, chunk)]

    def draw(batches):
        for batch in batches:
            for index in batch["id"]:
                frame = syn.sample(sizes[index], seed=chunk_seed(seed, int(index)), conditions=conditions, rules=rules)
                yield _for_spark(frame, schema)

    # one chunk a partition, in order: collected, the records come in the order swflow sample writes them
    return spark.range(0, len(sizes), 1, numPartitions=len(sizes)).mapInPandas(draw, spark_schema(schema))
