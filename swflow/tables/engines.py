"""Private tables counted where they live: DuckDB reads CSV and Parquet files (paths, globs) or a relation, out of
core, and returns a table run's exact count vectors only (swflow/tables/cell_sql.py writes the cells as SQL).

    >>> syn.fit("visits/*.parquet", engine="duckdb")     # or swflow generate --table 'visits/*.parquet' --engine duckdb

The rows never come into Python: the engine checks them against the schema, counts them, and answers the releases'
queries (the repeated values' candidates, the fine one-way histograms, the pair tables) with exact counts, which the
release's target noises and records in its ledger as it does for rows read by pandas. For the same rows, schema,
settings and privacy seed, the release is pandas', count for count (tests/test_table_engines.py).
"""
from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import torch

from ..privacy.rows import CountedRows
from .cell_sql import ColumnSQL, quote
from .schema import Schema, SchemaError

__all__ = ["ENGINES", "EngineTable", "engine_table", "choose_engine"]

#: how a table run reads its private rows: pandas in this process (a DataFrame, or a file in chunks), or DuckDB
ENGINES = ("pandas", "duckdb")
#: a table file at least this large is counted by DuckDB unless an engine is named (pandas holds a chunk at a
#: time, but reads every value through Python)
DUCKDB_FROM_BYTES = 2 << 30
#: rows of a refused column handed to pandas' check, for its words
PROBLEM_ROWS = 64
#: DuckDB's memory for a table's files: past it, a release's hash tables spill to disk
MEMORY_LIMIT = "2GB"


def choose_engine(table, engine: str | None) -> str:
    """The engine for ``table`` (a DataFrame, a path, a glob, or a DuckDB relation): the one named, else DuckDB
    for a relation, a glob or files of DUCKDB_FROM_BYTES or more, else pandas."""
    if engine is not None:
        if engine not in ENGINES:
            raise ValueError(f"engine is one of {ENGINES}, got {engine!r}")
        return engine
    if type(table).__module__.startswith("duckdb"):
        return "duckdb"
    if isinstance(table, (str, Path)):
        files = _files(table)
        if glob.has_magic(str(table)) or sum(f.stat().st_size for f in files) >= DUCKDB_FROM_BYTES:
            return "duckdb"
    return "pandas"


def _files(pattern) -> list[Path]:
    """The files a path or a glob names, sorted; one kind (.csv or .parquet); refused when there are none."""
    text = str(pattern)
    files = sorted(Path(p) for p in glob.glob(text)) if glob.has_magic(text) else [Path(text)]
    if not files or not all(f.exists() for f in files):
        raise FileNotFoundError(f"table file {text} is missing" if not glob.has_magic(text) else
                                f"no table file matches {text}")
    suffixes = {f.suffix.lower() for f in files}
    if len(suffixes) != 1 or suffixes - {".csv", ".parquet"}:
        raise ValueError(f"{text}: a table is .csv or .parquet files, all of one kind, got {sorted(suffixes)}")
    return files


def engine_table(table, schema: Schema, *, engine: str | None, clip: bool = False, record_level: bool = True):
    """(the engine, ``table`` as the run's private rows): as it is for pandas, an :class:`EngineTable` for DuckDB.
    ``record_level``: the run counts records one each in one process (an engine's only run, for now: a privacy
    unit's weights and torchrun's shards are pandas')."""
    engine = choose_engine(table, engine)
    if engine == "pandas":
        if type(table).__module__.startswith("duckdb") or (isinstance(table, (str, Path)) and
                                                            glob.has_magic(str(table))):
            raise ValueError("pandas reads one file or a DataFrame: count a glob or a DuckDB relation with "
                             "engine='duckdb'")
        return engine, table
    if not record_level:
        raise ValueError(f"the {engine} engine counts record-level runs in one process: under a privacy unit or "
                         "torchrun, use engine='pandas'")
    return engine, EngineTable(table, schema, clip=clip)


class EngineTable:
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
            self.files, self.name = _files(source), str(source)
            self.csv = self.files[0].suffix.lower() == ".csv"
            paths = "[" + ", ".join("'" + str(f).replace("'", "''") + "'" for f in self.files) + "]"
            self.source = (f"read_csv({paths}, header = true, all_varchar = true, delim = ',', quote = '\"')"
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
        for prefix, found in (("VARCHAR", "text"), ("BOOL", "boolean"), ("DATE", "date"), ("TIMESTAMP", "timestamp"),
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
            frame = _as_pandas_reads(frame, self.schema)
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
        """The checked values of column ``name`` strictly inside (low, high) that at least ``at_least`` records
        hold, rising (float64), and their counts (int64)."""
        value = self.columns[name].value()
        result = self._query(
            f"SELECT v, count(*) AS n FROM (SELECT {value} AS v FROM {self.source}) WHERE v > {low!r} AND v < "
            f"{high!r} GROUP BY v HAVING count(*) >= {int(at_least)} ORDER BY v").fetchnumpy()
        return np.asarray(result["v"], dtype=np.float64), np.asarray(result["n"], dtype=np.int64)

    def rows(self, codec) -> "EngineRows":
        """These records as ``codec`` encodes them, counted here."""
        return EngineRows(self, codec)

    def values(self, names: list[str]) -> "EngineValues":
        """The checked values of the columns ``names``, as the repeated-values release counts them, counted here."""
        return EngineValues(self, names)

    def sha256(self) -> str:
        """A fingerprint of the files' bytes (of a relation: of its rows' count and columns; never the rows)."""
        import hashlib

        if hasattr(self, "_digest"):
            return self._digest
        digest = hashlib.sha256(repr((self._records, sorted(self._types().items()))).encode())
        for path in self.files:
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 22), b""):
                    digest.update(block)
        self._digest = digest.hexdigest()
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


class EngineRows(CountedRows):
    """The records of an :class:`EngineTable` in ``codec``'s cells, as the count releases read them: their exact
    pair tables and fine histograms, from the engine."""

    def __init__(self, table: EngineTable, codec):
        self.table, self.codec = table, codec
        self.cells = [table.columns[c.name].cell(cells, f"a{j}", f"v{j}")
                      for j, (c, cells) in enumerate(zip(codec.schema.columns, codec.cells))]

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.table), self.codec.dim)

    def __getitem__(self, rows: slice) -> "EngineRows":
        if rows.indices(len(self))[:2] != (0, len(self)):
            raise ValueError("an engine counts all of its rows: a table counted by DuckDB does not run under torchrun")
        return self

    def pair_counts(self, sizes: list[int], pairs: list[tuple[int, int]]) -> torch.Tensor:
        if list(sizes) != list(self.codec.sizes):
            raise ValueError("the tables' cells are not this codec's")
        return torch.from_numpy(np.concatenate(self.table.counts(self.cells, [tuple(p) for p in pairs], sizes)))

    def level_counts(self, columns: list[int], trees) -> torch.Tensor:
        names = self.codec.schema.names
        fine = self.table.histograms([self.table.columns[names[j]].histogram(self.codec.cells[j], f"a{j}", f"v{j}")
                                      for j in columns], columns)
        parts = []
        for counts, tree in zip(fine, trees):
            leaves = torch.from_numpy(counts)
            for level in range(1, tree.levels + 1):
                parts.append(torch.zeros(tree.nodes(level), dtype=torch.int64).index_add_(
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
            raise ValueError("an engine counts all of its rows: a table counted by DuckDB does not run under torchrun")
        return self

    def distinct_values(self, columns: list[int], inside: list[tuple[float, float]], at_least: int):
        return [tuple(map(torch.from_numpy, self.table.distinct(self.names[j], low, high, at_least)))
                for j, (low, high) in zip(columns, inside)]

    def sha256(self) -> str:
        return self.table.sha256()

    def __str__(self) -> str:
        return str(self.table)


def _as_pandas_reads(frame, schema: Schema):
    """A CSV file's text values (``frame``) as swflow's pandas reader reads them (swflow/tables/files.py), in
    memory."""
    import io

    import pandas as pd

    from .files import _markers, _missing_markers, _no_trailing, _text_columns

    kept = Schema(tuple(c for c in schema.columns if c.name in frame.columns))
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    buffer.seek(0)
    return _missing_markers(_no_trailing(pd.read_csv(buffer, dtype=_text_columns(kept), skipinitialspace=True,
                                                     index_col=False, **_markers(kept))), kept)
