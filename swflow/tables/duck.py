"""DuckDB counts a table run's releases where the rows are: CSV and Parquet files (a path or a glob) or a DuckDB
relation, out of core, each column's cell one SQL expression (swflow/tables/cell_sql.py); only the exact count
vectors come back (swflow/tables/engines.py)."""
from __future__ import annotations

import numpy as np

from .cell_sql import ColumnSQL, quote
from .counted import EngineTable, files_of, files_sha256
from .files import csv_text_as_pandas_reads, delimiter_of
from .schema import Schema, SchemaError

__all__ = ["DuckDBTable", "MEMORY_LIMIT"]

#: rows of a refused column handed to pandas' check, for its words
PROBLEM_ROWS = 64
#: DuckDB's memory for a table's files: past it, a release's hash tables spill to disk
MEMORY_LIMIT = "2GB"


class DuckDBTable(EngineTable):
    """The private rows of files (a path or a glob) or of a DuckDB relation, checked against ``schema`` once, then
    counted by DuckDB on demand. ``len()`` is the number of records."""

    def __init__(self, source, schema: Schema, *, clip: bool = False, threads: int | None = None,
                 memory_limit: str = MEMORY_LIMIT):
        """``threads``, ``memory_limit``: DuckDB's for files (a relation runs on its own connection, as set); past
        the limit DuckDB spills to a private temporary folder, removed with this table."""
        self.schema, self.clip = schema, clip
        self.relation = source if type(source).__module__.startswith("duckdb") else None
        if self.relation is not None:  # queried on its own connection, as the view private_source
            self.files, self.name = [], "the DuckDB relation"
            self.source, self.csv = "private_source", False
        else:
            self.connection = _connection(self, threads=threads, memory_limit=memory_limit)
            self.files, self.name = files_of(source), str(source)
            self.csv = self.files[0].suffix.lower() != ".parquet"
            paths = "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in self.files) + "]"
            delim = delimiter_of(self.files[0]).replace("'", "''")
            self.source = (f"read_csv({paths}, header = true, all_varchar = true, delim = '{delim}', quote = '\"')"
                           if self.csv else f"read_parquet({paths})")
        self.columns = {c.name: ColumnSQL(c, self._kind(c.name), clip=clip) for c in schema.columns}
        self.inputs = [self.columns[c.name].inputs() for c in schema.columns]  # each column's, selected once
        self._records = self._check()

    def __len__(self) -> int:
        return self._records

    def _query(self, sql: str):
        """The result of ``sql`` (fetchall, fetchnumpy, df)."""
        return self.relation.query("private_source", sql) if self.relation is not None else \
            self.connection.execute(sql)

    def __str__(self) -> str:
        return f"the {self._records} rows of {self.name} (DuckDB)"

    def _types(self) -> dict[str, str]:
        if not hasattr(self, "_type_of"):
            described = self._query(f"DESCRIBE SELECT * FROM {self.source}").fetchall()
            self._type_of = {row[0]: str(row[1]).upper() for row in described}
        return self._type_of

    def _kind(self, name: str) -> str:
        """What the engine's column ``name`` holds (cell_sql.SOURCE_KINDS)."""
        import pandas as pd

        names = list(self._types())
        try:  # the same refusal as pandas' for missing or undeclared columns
            self.schema._check_names(pd.DataFrame(columns=[n.rstrip() for n in names]))
        except SchemaError as err:
            raise SchemaError(f"{self.name}: {err}") from None
        kind = self._types()[name]
        if self.csv:
            return "csv"
        if kind.startswith("TIMESTAMP WITH TIME ZONE") or kind == "TIMESTAMPTZ":
            return "timestamptz"
        for prefix, found in (("VARCHAR", "text"), ("BOOL", "boolean"), ("DATE", "date"), ("TIMESTAMP", "timestamp"), ("TIME", "time"),
                              ("DOUBLE", "number"), ("FLOAT", "number"), ("DECIMAL", "number"), ("REAL", "number")):
            if kind.startswith(prefix):
                return found
        if any(word in kind for word in ("INT", "NUMERIC")):
            return "number"
        raise SchemaError(f"{self.name}: column {name!r} holds {kind} values, which swflow does not read: cast it to "
                          "text, numbers, booleans, dates or timestamps")

    def _check(self) -> int:
        """The number of records, once every row fits the schema: a column that does not is refused in pandas'
        words (a few of its refused values checked by pandas, in this process; never shown)."""
        names = list(self.columns)
        flags = ", ".join(f"bool_or({self.columns[n].problem()})" for n in names)
        row = self._query(f"SELECT count(*), {flags} FROM {self.source}").fetchall()[0]
        records, refused = int(row[0]), [n for n, bad in zip(names, row[1:]) if bad]
        if not refused:
            if records == 0:
                raise ValueError(f"{self.name} holds no records: a table run needs at least one")
            return records
        name = refused[0]
        frame = self._query(f"SELECT {quote(name)} FROM {self.source} WHERE {self.columns[name].problem()} "
                            f"LIMIT {PROBLEM_ROWS}").df()
        if self.csv:
            frame = csv_text_as_pandas_reads(frame, self.schema)
        column = self.schema.columns[self.schema.names.index(name)]
        try:
            Schema((column,)).check(frame, clip=self.clip)
        except SchemaError as err:
            raise SchemaError(f"{self.name}: {err}") from None
        raise SchemaError(f"{self.name}: column {name!r}: some rows do not fit the schema as DuckDB reads them; "
                          "read it with engine='pandas' (--engine pandas) to see the rule it breaks")

    def counts(self, expressions: list[str], groups: list[tuple[int, ...]], sizes: list[int]) -> list[np.ndarray]:
        """Exact counts of the records by each group of the columns ``expressions`` (SQL of a cell each, < its
        ``sizes``), in one scan: each group's table flattened row-major (int64)."""
        used = sorted({j for group in groups for j in group})
        inputs = ", ".join(f"{a} AS a{j}, {v} AS v{j}" for j in used for a, v in [self.inputs[j]])
        select = ", ".join(f"{expressions[j]} AS c{j}" for j in used)
        sets = ", ".join("(" + ", ".join(f"c{j}" for j in group) + ")" for group in groups)
        keys = ", ".join(f"c{j}" for j in used)
        result = self._query(f"SELECT {keys}, count(*) AS n FROM (SELECT {select} FROM (SELECT {inputs} FROM "
                             f"{self.source})) GROUP BY GROUPING SETS ({sets})").fetchnumpy()
        present = {j: ~np.ma.getmaskarray(result[f"c{j}"]) for j in used}
        counts = np.ma.getdata(result["n"]).astype(np.int64)
        out = []
        for group in groups:  # a cell is never NULL: a row of this group is one whose group columns all are set
            mine = np.logical_and.reduce([present[j] for j in group]) & np.logical_and.reduce(
                [~present[j] for j in used if j not in group] or [np.ones(len(counts), bool)])
            flat = np.zeros(int(np.prod([sizes[j] for j in group])), dtype=np.int64)
            at = np.zeros(int(mine.sum()), dtype=np.int64)
            for j in group:
                at = at * sizes[j] + np.ma.getdata(result[f"c{j}"])[mine].astype(np.int64)
            np.add.at(flat, at, counts[mine])
            out.append(flat)
        return out

    def histograms(self, plans: list[tuple[list[str], object]], columns: list[int]) -> list[np.ndarray]:
        """Each of ``columns``' exact counts by its cells, in one scan: ``plans`` are ColumnSQL.histogram's."""
        inputs = ", ".join(f"{a} AS a{j}, {v} AS v{j}" for j in columns for a, v in [self.inputs[j]])
        aggregates = [sql for sqls, _ in plans for sql in sqls]
        row = self._query(f"SELECT {', '.join(aggregates)} FROM (SELECT {inputs} FROM {self.source})").fetchall()[0]
        out, at = [], 0
        for sqls, read in plans:
            out.append(read(row[at:at + len(sqls)]))
            at += len(sqls)
        return out

    def distinct(self, name: str, low: float, high: float, at_least: int) -> tuple[np.ndarray, np.ndarray]:
        """The checked values of column ``name`` within [low, high] that at least ``at_least`` records hold, or
        that are ``low`` or ``high`` (held by any), rising (float64), and their counts (int64)."""
        value = self.columns[name].value()
        result = self._query(
            f"SELECT v, count(*) AS n FROM (SELECT {value} AS v FROM {self.source}) WHERE v >= {low!r} AND v <= "
            f"{high!r} GROUP BY v HAVING count(*) >= {int(at_least)} OR v = {low!r} OR v = {high!r} ORDER BY v"
        ).fetchnumpy()
        return np.asarray(result["v"], dtype=np.float64), np.asarray(result["n"], dtype=np.int64)

    def _cells(self, codec) -> list[str]:
        return [self.columns[c.name].cell(cells, f"a{j}", f"v{j}")
                for j, (c, cells) in enumerate(zip(codec.schema.columns, codec.cells))]

    def pair_counts(self, codec, pairs: list[tuple[int, int]]) -> np.ndarray:
        return np.concatenate(self.counts(self._cells(codec), pairs, codec.sizes))

    def fine_counts(self, codec, columns: list[int], trees=None) -> list[np.ndarray]:
        names = codec.schema.names
        return self.histograms([self.columns[names[j]].histogram(codec.cells[j], f"a{j}", f"v{j}")
                                for j in columns], columns)

    def sha256(self) -> str:
        """A fingerprint of the files' bytes (of a relation: of its rows' count and columns; never the rows)."""
        if not hasattr(self, "_digest"):
            self._digest = files_sha256(self.files, repr((self._records, sorted(self._types().items()))))
        return self._digest


def _connection(owner, *, threads: int | None, memory_limit: str):
    """A DuckDB connection of its own for ``owner``, spilling into a folder only this user reads, removed (with
    what DuckDB spilled there: private rows) when ``owner`` is collected or the process ends."""
    import shutil
    import tempfile
    import weakref

    import duckdb

    spill = tempfile.mkdtemp(prefix="swflow-duckdb-")
    config = {"memory_limit": memory_limit, "temp_directory": spill, **({} if threads is None else
                                                                         {"threads": threads})}
    connection = duckdb.connect(config=config)
    weakref.finalize(owner, _close, connection, spill, shutil.rmtree)
    return connection


def _close(connection, spill: str, remove) -> None:
    connection.close()
    remove(spill, ignore_errors=True)
