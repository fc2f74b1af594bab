"""Spark counts a table run's releases where the rows are: a Spark DataFrame, or CSV and Parquet files read by
Spark, on whatever cluster the session runs (``local[2]`` in the tests; ``spark-submit`` for a cluster:
docs/tables-engines.md). Every partition is checked by the schema and counted by the run's own codec on its
executor (``mapInPandas``): the same functions as pandas' (marginals.pair_counts, the codec's cells), so the release
is pandas', count for count; only each partition's exact count vector comes back, and the driver sums them
(swflow/tables/engines.py).

Executors need swflow installed (the same version as the driver): they unpickle the codec and run it.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np

from .counted import EngineTable, files_of, files_sha256, is_uri
from .schema import Schema, SchemaError

__all__ = ["SparkTable"]


class SparkTable(EngineTable):
    """The private rows of a Spark DataFrame, or of files (a path or a glob) that Spark reads, checked against
    ``schema`` once, then counted by Spark on demand (``spark``: the session for files; default the active one,
    or a new local one).

    ``unit`` (a privacy.units.UnitBound): the rows are those of units of the identifier column ``unit.column``.
    Spark then gathers each unit's rows in one partition, and each partition weights its units' rows with the very
    functions a pandas run uses on all of them (privacy.units: a unit's weights read its own rows only): the count
    of records by min(1, k / its rows), each row's class of that weight as the run's last column, the trees and the
    pair tables by the unit's spread. The counts are pandas' but for the order of float sums."""

    def __init__(self, source, schema: Schema, *, clip: bool = False, spark=None, unit=None):
        from pyspark.sql import DataFrame, SparkSession

        self.schema, self.clip, self.unit = schema, clip, unit
        if isinstance(source, DataFrame):
            self.frame, self.files, self.name, self.csv = source, [], "the Spark DataFrame", False
        else:
            from .files import delimiter_of

            spark = spark or SparkSession.getActiveSession() or _local_session()
            self.name = str(source)
            if is_uri(source):  # hdfs://, s3a://, file://: Spark reads them (and the glob) itself; a CSV's sep is ','
                self.files, paths, self.csv, sep = [], [self.name], not self.name.lower().endswith(".parquet"), ","
            else:
                self.files = files_of(source)
                paths = [str(Path(f).resolve()) for f in self.files]
                self.csv = self.files[0].suffix.lower() != ".parquet"
                sep = delimiter_of(self.files[0]) if self.csv else None
            self.frame = (spark.read.csv(paths, header=True, inferSchema=False, sep=sep) if self.csv
                          else spark.read.parquet(*paths))
        self._check_names()
        if unit is not None:  # every unit's rows in one partition
            self.frame = self.frame.repartition(self.frame[unit.column])
        self._records = self._check()

    def __len__(self) -> int:
        return self._records

    def __str__(self) -> str:
        return f"the {self._records} rows of {self.name} (Spark)"

    def _check_names(self) -> None:
        import pandas as pd

        names = [str(n).rstrip() for n in self.frame.columns]
        if self.unit is not None:
            if self.unit.column not in names:
                from ..privacy.units import no_unit_column

                raise ValueError(no_unit_column(self.unit.column))
            names.remove(self.unit.column)
        try:  # the same refusal as pandas' for missing or undeclared columns
            self.schema._check_names(pd.DataFrame(columns=names))
        except SchemaError as err:
            raise SchemaError(f"{self.name}: {err}") from None

    def _run(self, job, out_schema: str):
        """``job`` on every partition (mapInPandas, under a UTC session time zone: Spark's timestamps reach pandas
        as UTC, as pandas reads them), its rows collected."""
        spark = self.frame.sparkSession
        with _utc(spark):
            return self._columns().mapInPandas(job, out_schema).collect()

    def _columns(self):
        """The schema's columns, and the unit's identifiers where a unit is named."""
        return self.frame.select(*self.schema.names, *([] if self.unit is None else [self.unit.column]))

    def _job(self, kind: str, **settings) -> "_Job":
        return _Job(self.schema, self.clip, self.csv, kind, unit=self.unit, **settings)

    def _check(self) -> int:
        """The number of records, once every row fits the schema: a partition's first refused column (in the
        schema's order) is refused in pandas' words, the lowest of every partition's."""
        rows = self._run(self._job("check"), "records long, column int, words string")
        records = sum(int(r["records"]) for r in rows)
        if any(r["column"] == UNITLESS[0] for r in rows):
            from ..privacy.units import UNITLESS_ROWS

            raise ValueError(UNITLESS_ROWS)
        refused = sorted((int(r["column"]), r["words"]) for r in rows if r["column"] >= 0)
        if refused:
            raise SchemaError(f"{self.name}: {refused[0][1]}")
        if records == 0:
            raise ValueError(f"{self.name} holds no records: a table run needs at least one")
        return records

    def _summed(self, job, size: int) -> np.ndarray:
        """Every partition's count vector, summed in partition order: int64, or float64 where a unit weights them."""
        dtype = _count_dtype(self.unit)
        total = np.zeros(size, dtype=dtype)
        for row in self._run(job, "counts binary"):
            total += np.frombuffer(row["counts"], dtype=dtype)
        return total

    def pair_counts(self, codec, pairs: list[tuple[int, int]]) -> np.ndarray:
        sizes = codec.sizes
        return self._summed(self._job("pairs", codec=codec, pairs=pairs), sum(sizes[i] * sizes[j] for i, j in pairs))

    def fine_counts(self, codec, columns: list[int], trees=None) -> list[np.ndarray]:
        sizes = [codec.sizes[j] for j in columns]
        flat = self._summed(self._job("fine", codec=codec, columns=columns, trees=trees), sum(sizes))
        return list(np.split(flat, np.cumsum(sizes)[:-1]))

    def unit_mass(self) -> float:
        """What the count of records counts under a unit: Σ over units of min(its rows, k)."""
        return float(self._summed(self._job("mass"), 1)[0])

    def distinct(self, name: str, low: float, high: float, at_least: int) -> tuple[np.ndarray, np.ndarray]:
        from pyspark.sql import functions as F

        if self.unit is not None:
            raise ValueError("under a privacy unit the repeated values are counted by pandas (each unit's values in "
                             "its rows' order)")
        job = self._job("values", name=name, inside=(low, high))
        spark = self.frame.sparkSession
        with _utc(spark):
            found = (self._columns().mapInPandas(job, "value double, n long")
                     .groupBy("value").agg(F.sum("n").alias("n"))
                     .where((F.col("n") >= at_least) | F.col("value").isin(float(low), float(high)))
                     .orderBy("value").collect())
        return (np.array([r["value"] for r in found], dtype=np.float64),
                np.array([r["n"] for r in found], dtype=np.int64))

    def sha256(self) -> str:
        """A fingerprint of the files' bytes (of a DataFrame, or files a URI names: of its rows' count and plan;
        never the rows)."""
        if not hasattr(self, "_digest"):
            plan = "" if self.files else self.frame._jdf.queryExecution().analyzed().toString()
            self._digest = files_sha256(self.files, repr((self._records, self.frame.columns, plan)))
        return self._digest


class _Job:
    """What one partition does, on an executor (pickled there): check its rows, count them by the codec's cells,
    or list its candidate values; ``kind`` 'check', 'pairs', 'fine' or 'values'."""

    def __init__(self, schema: Schema, clip: bool, csv: bool, kind: str, *, unit=None, **settings):
        self.schema, self.clip, self.csv, self.kind, self.settings = schema.to_json(), clip, csv, kind, settings
        self.unit = unit

    def __call__(self, batches):
        import pandas as pd

        from .files import csv_text_as_pandas_reads

        schema = Schema.from_json(self.schema)
        if self.unit is not None and self.kind != "check":  # a unit's rows may span the partition's batches
            frames = list(batches)
            batches = [pd.concat(frames, ignore_index=True)] if frames else []
        counts, records, refused, values = None, 0, None, []
        for frame in batches:
            ids = None
            if self.unit is not None:
                ids, frame = frame[self.unit.column], frame.drop(columns=[self.unit.column])
            if self.csv:
                frame = csv_text_as_pandas_reads(frame, schema)
            records += len(frame)
            if self.kind == "check":
                refused = refused or (UNITLESS if ids is not None and ids.isna().any() else None) or _first_refusal(
                    schema, frame, self.clip)
                continue
            checked = schema.check(frame, clip=self.clip)
            if self.kind == "values":
                values.append(self._inside(schema, checked))
                continue
            part = self._counts(checked) if ids is None else self._unit_counts(checked, ids)
            counts = part if counts is None else counts + part
        if self.kind == "check":
            column, words = refused or (-1, "")
            yield pd.DataFrame({"records": [records], "column": [column], "words": [words]})
        elif self.kind == "values":
            found, n = np.unique(np.concatenate(values or [np.zeros(0)]), return_counts=True)
            yield pd.DataFrame({"value": found, "n": n.astype(np.int64)})
        elif counts is not None:
            yield pd.DataFrame({"counts": [counts.astype(_count_dtype(self.unit)).tobytes()]})

    def _counts(self, checked) -> np.ndarray:
        import torch

        from ..privacy.marginals import pair_counts

        codec = self.settings["codec"]
        cells = codec.cell_index(checked)
        if self.kind == "pairs":
            return pair_counts(torch.from_numpy(cells), codec.sizes, self.settings["pairs"]).numpy()
        return np.concatenate([np.bincount(cells[:, j], minlength=codec.sizes[j])
                               for j in self.settings["columns"]])

    def _unit_counts(self, checked, ids) -> np.ndarray:
        """A partition's counts, each row weighted as a pandas run weights it (pipeline/table_units.py) by the rows
        of its unit, all of which are in this partition: the count of records' mass, or the pair tables or fine
        cells of ``checked`` with each row's class of its unit's rows as the codec's last column."""
        import torch

        from ..privacy.marginals import pair_counts
        from ..privacy.units import (ROWS_COLUMN, row_class_labels, row_classes, spread_weights, tree_weights,
                                     unit_codes, unit_weights)

        k = self.unit.max_rows
        codes = unit_codes(ids.reset_index(drop=True))
        count_weights = unit_weights(codes, max_rows=k).numpy()
        if self.kind == "mass":
            return np.array([count_weights.sum()])
        labels = np.array(row_class_labels(k), dtype=object)
        codec = self.settings["codec"]
        cells = codec.cell_index(checked.reset_index(drop=True).assign(
            **{ROWS_COLUMN: labels[row_classes(count_weights)]}))
        if self.kind == "pairs":
            pairs = self.settings["pairs"]
            weights = spread_weights(codes, cells, pairs, max_rows=k, constant=len(codec.sizes) - 1)
            return pair_counts(torch.from_numpy(cells), codec.sizes, pairs, weights).numpy()
        columns = self.settings["columns"]
        weights = tree_weights(codes, torch.from_numpy(cells)[:, columns], self.settings["trees"], max_rows=k).numpy()
        return np.concatenate([np.bincount(cells[:, j], weights=weights, minlength=codec.sizes[j]) for j in columns])

    def _inside(self, schema: Schema, checked) -> np.ndarray:
        """The checked values of the column within its bounds (a missing value never is)."""
        low, high = self.settings["inside"]
        x = checked[self.settings["name"]].to_numpy(dtype=float, na_value=np.nan)
        return x[(x >= low) & (x <= high)]


def _count_dtype(unit):
    """A partition's counts: records one each (int64), or weighted by a privacy unit (float64)."""
    return np.int64 if unit is None else np.float64


#: a partition's refusal of rows without a unit (privacy.units.UNITLESS_ROWS), before any column's
UNITLESS = (-2, "unitless")


def _first_refusal(schema: Schema, frame, clip: bool) -> tuple[int, str] | None:
    """(the position, pandas' words) of the first column of ``frame`` that the schema refuses, or None."""
    for position, column in enumerate(schema.columns):
        try:
            Schema((column,)).check(frame[[column.name]], clip=clip)
        except SchemaError as err:
            return position, str(err)
    return None


def _local_session():
    """A local Spark session of swflow's own, whose Python workers run this Python (where swflow is installed):
    PySpark reads PYSPARK_PYTHON once, into the context, which is ours to set without touching the environment."""
    import sys

    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.appName("swflow").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.pythonExec = sys.executable
    return spark


@contextlib.contextmanager
def _utc(spark):
    """The session's time zone set to UTC for one job, and restored after."""
    key = "spark.sql.session.timeZone"
    before = spark.conf.get(key)
    spark.conf.set(key, "UTC")
    try:
        yield
    finally:
        spark.conf.set(key, before)
