"""Private tables counted where they live: an engine reads the rows where they are (DuckDB: CSV and Parquet files,
globs, a relation, out of core; Spark: a DataFrame or files, on a cluster) and returns a table run's exact count
vectors only.

    >>> syn.fit("visits/*.parquet", engine="duckdb")     # or swflow generate --table 'visits/*.parquet' --engine duckdb
    >>> syn.fit(spark.read.parquet("hdfs:///visits"))   # Spark, where the DataFrame lives

The rows never come into the driver: the engine checks them against the schema, counts them, and answers the
releases' questions (the repeated values' candidates, the fine one-way histograms, the pair tables) with exact
counts, which the release's target noises and records in its ledger as it does for rows read by pandas
(:class:`~swflow.privacy.rows.CountedRows`). For the same rows, schema, settings and privacy seed, the release is
pandas', count for count (tests/test_table_engines.py). An engine is a counted.EngineTable: DuckDB's in
swflow/tables/duck.py (each cell one SQL expression: cell_sql.py), Spark's in swflow/tables/spark.py (each partition
counted by the codec itself, the vectors summed).
"""
from __future__ import annotations

import glob
from pathlib import Path

from .counted import files_of, is_uri
from .schema import Schema

__all__ = ["ENGINES", "engine_table", "choose_engine"]

#: how a table run reads its private rows: pandas in this process (a DataFrame, or a file in chunks), DuckDB, Spark
ENGINES = ("pandas", "duckdb", "spark")
#: a table file at least this large is counted by DuckDB unless an engine is named (pandas holds a chunk at a
#: time, but reads every value through Python)
DUCKDB_FROM_BYTES = 2 << 30


def choose_engine(table, engine: str | None) -> str:
    """The engine for ``table`` (a DataFrame, a path, a glob, a URI, or a DuckDB relation): the one named, else Spark
    for a Spark DataFrame or a URI, DuckDB for a relation, a glob or files of DUCKDB_FROM_BYTES or more, else
    pandas."""
    if engine is not None:
        if engine not in ENGINES:
            raise ValueError(f"engine is one of {ENGINES}, got {engine!r}")
        return engine
    if type(table).__module__.startswith("duckdb"):
        return "duckdb"
    if type(table).__module__.startswith("pyspark") or is_uri(table):
        return "spark"  # a DataFrame, or files a URI names (hdfs://, s3a://): Spark reads them
    if isinstance(table, (str, Path)):
        files = files_of(table)
        if glob.has_magic(str(table)) or sum(f.stat().st_size for f in files) >= DUCKDB_FROM_BYTES:
            return "duckdb"
    return "pandas"


def engine_table(table, schema: Schema, *, engine: str | None, clip: bool = False, unit=None, sharded: bool = False):
    """(the engine, ``table`` as the run's private rows): as it is for pandas, an :class:`EngineTable` for DuckDB
    and Spark. ``unit``: the run's privacy unit (privacy.units.UnitBound; Spark and pandas weight a unit's rows,
    DuckDB counts records only); ``sharded``: under torchrun, whose shards are pandas'."""
    engine = choose_engine(table, engine)
    if engine != "spark" and is_uri(table):
        raise ValueError(f"{table}: files a URI names are read by Spark: engine='spark' (--engine spark)")
    if engine == "pandas":
        if type(table).__module__.startswith(("duckdb", "pyspark")) or (isinstance(table, (str, Path)) and
                                                                         glob.has_magic(str(table))):
            raise ValueError("pandas reads one file or a DataFrame: count a glob or a DuckDB relation with "
                             "engine='duckdb', a Spark DataFrame with engine='spark'")
        return engine, table
    if sharded:
        raise ValueError(f"the {engine} engine counts all the rows in one run: under torchrun, use engine='pandas'")
    if engine == "spark":
        from .spark import SparkTable

        return engine, SparkTable(table, schema, clip=clip, unit=unit)
    if unit is not None:
        raise ValueError("DuckDB counts record-level runs: under a privacy unit, use engine='spark' or 'pandas'")
    from .duck import DuckDBTable

    return engine, DuckDBTable(table, schema, clip=clip)
