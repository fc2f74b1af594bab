"""A table's cells as SQL: the plan of a table run's private counts, for an engine that counts where the rows live.

Every private count of a record-level table run is a count of records by their cells: the number of records, each
released column's fine one-way histogram (its tree's levels are sums of it), the pair tables of the coarse cells,
and the repeated-values release's counts of exact values. This module writes each column's cell as one SQL
expression, from the public schema and codec alone, so that an engine (DuckDB, Spark: swflow/tables/engines.py)
returns only the exact count vectors; the noise, the ledger and everything after them stay in swflow.

The cells are the codec's, bit for bit. A numeric column's cell is a non-decreasing step function of its checked
value (a float64): :func:`thresholds` finds, for each cell k, the least float64 at which the codec's own ``index``
reaches k, by bisection over the ordered float64s of the bounds; the SQL cell is then the number of thresholds at
or below the value, found by a binary tree of comparisons (:func:`count_at_or_below`). Comparisons of float64s are
exact in every engine, so the engine's cells are the codec's whatever rounding its arithmetic does. Categories are
matched by value, a missing value goes to its declared cell.

A row the schema refuses is flagged by :meth:`ColumnSQL.problem`; the engine then hands a few such rows of the
first flagged column, inside this process, to :meth:`Schema.check`, so the refusal is pandas', in its words (a
column and a rule, never a value, a count or a row).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .column import Column
from .types import UNITS

__all__ = ["thresholds", "count_at_or_below", "ColumnSQL", "SOURCE_KINDS", "quote"]

#: what a column of the engine's table holds, as far as the checks go: text read from a CSV file (every column of
#: one is read as text, and converted here as pandas' reader converts it), text, numbers, booleans, dates, times
#: without a zone, times with one, times of day
SOURCE_KINDS = ("csv", "text", "number", "boolean", "date", "timestamp", "timestamptz", "time")


def quote(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _literal(value) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    return f"CAST('{float(value)!r}' AS DOUBLE)"


def _ordered(x: np.ndarray) -> np.ndarray:
    """float64s as int64 keys in the same order (−0.0 and 0.0 one key)."""
    bits = x.astype(np.float64).view(np.int64)
    return np.where(bits < 0, -(bits & np.int64(0x7FFFFFFFFFFFFFFF)), bits)


def _from_ordered(key: np.ndarray) -> np.ndarray:
    key = key.astype(np.int64)
    bits = np.where(key < 0, (-key) | np.int64(-0x8000000000000000), key)
    return bits.view(np.float64)


def thresholds(index, low: float, high: float) -> tuple[int, np.ndarray]:
    """(first, steps): the cell ``first`` of ``low``, and for each cell k from first + 1 to the cell of ``high``
    the least float64 x in [low, high] with ``index(x)`` ≥ k (rising float64s): the cell of x in [low, high] is
    first + the number of steps ≤ x.

    ``index``: (n,) float64 → (n,) int64, non-decreasing on [low, high] (a numeric column's cells, missing values
    aside). Checked on the way: an index that is not, or that skips a cell, raises (the SQL would not be the
    codec's)."""
    first, last = (int(k) for k in index(np.array([low, high])))
    want = np.arange(first + 1, last + 1)
    lo = np.full(len(want), _ordered(np.array([low]))[0])  # index(lo) < k
    hi = np.full(len(want), _ordered(np.array([high]))[0])  # index(hi) >= k
    while (hi > lo + 1).any():  # (hi - lo overflows int64 across zero)
        mid = (lo >> 1) + (hi >> 1) + (lo & hi & 1)
        reached = index(_from_ordered(mid)) >= want
        hi, lo = np.where(reached, mid, hi), np.where(reached, lo, mid)
    steps = _from_ordered(hi)
    for x in (steps, _from_ordered(np.maximum(hi - 1, lo))):  # at each step and just below it (a cell may be empty)
        if (index(x) != first + np.searchsorted(steps, x, side="right")).any():
            raise ValueError("a column's cells are not a non-decreasing step of its values")
    return first, steps


def count_at_or_below(value: str, edges: np.ndarray) -> str:
    """SQL: how many of the rising ``edges`` are ≤ ``value`` (a binary tree of comparisons; ``value`` an SQL
    expression of a DOUBLE that is not NULL)."""
    edges = [float(e) for e in edges]

    def node(lo: int, hi: int) -> str:
        if lo == hi:
            return str(lo)
        mid = (lo + hi) // 2
        return f"CASE WHEN {value} < {_literal(edges[mid])} THEN {node(lo, mid)} ELSE {node(mid + 1, hi)} END"

    return node(0, len(edges))


@dataclass(frozen=True)
class ColumnSQL:
    """One schema column read from the engine's column ``name`` that holds ``kind`` (SOURCE_KINDS) values."""

    column: Column
    kind: str
    clip: bool = False

    def __post_init__(self):
        if self.kind not in SOURCE_KINDS:
            raise ValueError(f"an engine's column holds one of {SOURCE_KINDS}, got {self.kind!r}")

    @property
    def raw(self) -> str:
        return quote(self.column.name)

    @property
    def text(self) -> str:
        """The value as pandas' CSV reader leaves it: spaces around it dropped."""
        return f"trim({self.raw})"

    def absent(self) -> str:
        """SQL: the value is missing (NULL, NaN, or in a CSV file an empty field or a missing-value marker that is
        not a declared category)."""
        if self.kind == "csv":
            from pandas._libs.parsers import STR_NA_VALUES

            declared = {v for v in self.column.categories or () if isinstance(v, str)}
            markers = ", ".join(_literal(m) for m in sorted((set(STR_NA_VALUES) | {""}) - declared))
            return f"({self.raw} IS NULL OR {self.text} IN ({markers}))"
        if self.kind == "number":
            return f"({self.raw} IS NULL OR isnan(CAST({self.raw} AS DOUBLE)))"
        return f"({self.raw} IS NULL)"

    # -- numbers -----------------------------------------------------------------------------------
    def number(self) -> str:
        """SQL DOUBLE: a numeric column's value as the schema counts it (days or units since 1970-01-01 for dates
        and times), NULL where it is not one; before clipping."""
        c = self.column
        if c.temporal is None:
            return {"csv": f"TRY_CAST({self.text} AS DOUBLE)", "number": f"CAST({self.raw} AS DOUBLE)"}.get(
                self.kind, "CAST(NULL AS DOUBLE)")
        if c.temporal == "time":
            seconds = {"csv": self._day_seconds(self.text), "text": self._day_seconds(f"trim({self.raw})"),
                       "time": f"(hour({self.raw}) * 3600 + minute({self.raw}) * 60 + second({self.raw}) + "
                               f"(microsecond({self.raw}) % 1000000) / 1e6)"}.get(self.kind, "CAST(NULL AS DOUBLE)")
            return f"floor({seconds} / {UNITS[c.unit]})"
        stamp = {"csv": self._stamp(self.text), "text": self._stamp(self.raw),
                 "date": f"CAST({self.raw} AS TIMESTAMP)", "timestamp": self.raw}.get(self.kind)
        if stamp is None:
            return "CAST(NULL AS DOUBLE)"
        from .types import unit_seconds

        micros = unit_seconds(c.temporal, c.unit) * 1_000_000
        return f"floor(CAST(epoch_us({stamp}) AS DOUBLE) / {micros})"

    @staticmethod
    def _day_seconds(text: str) -> str:
        """SQL DOUBLE: seconds since midnight of "H:MM" or "HH:MM:SS(.f)" ``text`` (NULL where it is none), in
        the order of operations of swflow.tables.types._day_seconds (the same float64)."""
        part = [f"TRY_CAST(NULLIF(split_part({text}, ':', {k}), '') AS DOUBLE)" for k in (1, 2, 3)]
        h, m, sec = part[0], part[1], f"coalesce({part[2]}, 0.0)"
        shaped = rf"regexp_matches({text}, '^\d{{1,2}}:\d{{2}}(:\d{{2}}(\.\d+)?)?$')"
        return (f"(CASE WHEN {shaped} AND {h} < 24 AND {m} < 60 AND {sec} < 60 THEN {h} * 3600 + {m} * 60 + {sec} "
                "END)")

    @staticmethod
    def _stamp(text: str) -> str:
        """SQL TIMESTAMP of ISO 8601 ``text``, a UTC mark ("Z", +00:00) dropped as pandas' reading drops it; NULL
        (refused) where a time carries another offset."""
        zoned = rf"regexp_matches({text}, '\d:\d\d(:\d\d(\.\d+)?)?[+-]\d\d:?\d\d$')"
        utc = rf"regexp_matches({text}, '[+-]00:?00$')"
        return (f"CASE WHEN {zoned} AND NOT {utc} THEN NULL ELSE "
                f"TRY_CAST(regexp_replace({text}, '(Z|[+-]00:?00)$', '') AS TIMESTAMP) END")

    def _whole_day(self) -> str:
        """SQL: a date column's value has no time of day (pandas refuses one)."""
        if self.column.temporal != "date" or self.kind == "date":
            return "TRUE"
        stamp = self.raw if self.kind == "timestamp" else self._stamp(self.text if self.kind == "csv" else self.raw)
        return f"(CAST({stamp} AS DATE) = {stamp})"

    @property
    def clip_bounds(self) -> tuple[float, float]:
        c = self.column
        return (float(math.ceil(c.low)), float(math.floor(c.high))) if c.integer else (float(c.low), float(c.high))

    def checked(self) -> str:
        """SQL DOUBLE: the checked value (clipped to the bounds where asked), for rows that are not absent."""
        lo, hi = self.clip_bounds
        return f"least(greatest({self.number()}, {_literal(lo)}), {_literal(hi)})"

    # -- categories --------------------------------------------------------------------------------
    def _key(self) -> tuple[str, type]:
        """(SQL of the value matched against the categories, the kind they are written in: str, float or bool);
        the SQL is NULL where no value of this source can match (pandas then refuses every present value)."""
        declared = [v for v in self.column.categories if v is not None]
        kinds = {bool if isinstance(v, bool) else str if isinstance(v, str) else float for v in declared}
        if len(kinds) > 1:
            raise ValueError(f"column {self.column.name!r} mixes categories of several kinds: count it with the pandas "
                             "engine")
        kind = kinds.pop() if kinds else str
        source = {"csv": {str: self.text, float: f"TRY_CAST({self.text} AS DOUBLE)",  # pandas reads True/False (any
                          bool: f"CASE WHEN lower({self.text}) IN ('true', 'false') "   # case) as booleans, nothing
                                f"THEN TRY_CAST({self.text} AS BOOLEAN) END"},         # else
                  "text": {str: self.raw}, "number": {float: f"CAST({self.raw} AS DOUBLE)"},
                  "boolean": {bool: self.raw}}.get(self.kind, {})
        return source.get(kind, "NULL"), kind

    def category(self, cell_of: list[int], absent: str, key: str) -> str:
        """SQL INTEGER: the cell ``cell_of[p]`` of the value declared at position p of the categories, −1 for a
        value not declared; ``absent`` and ``key``: SQL of :meth:`inputs`, or the names they were selected as."""
        categories, kind = list(self.column.categories), self._key()[1]
        whens = [f"WHEN {absent} THEN {cell_of[categories.index(None)] if None in categories else -1}"]
        whens += [f"WHEN {key} = {_literal(kind(v))} THEN {cell_of[p]}" for p, v in enumerate(categories)
                  if v is not None]
        return f"(CASE {' '.join(whens)} ELSE -1 END)"

    # -- checks and cells --------------------------------------------------------------------------
    def problem(self) -> str:
        """SQL BOOLEAN: pandas' check refuses this row's value of the column."""
        c = self.column
        if c.kind == "categorical":
            return f"({self.category(list(range(len(c.categories))), self.absent(), self._key()[0])} < 0)"
        if self.kind == "boolean" or self.kind == "timestamptz" or (
                c.temporal is not None and self.kind == "number") or ((self.kind == "time") != (c.temporal == "time")
                                                                     and self.kind not in ("csv", "text")):
            return f"NOT {self.absent()}" if c.temporal is not None else "TRUE"
        value = self.number()
        bad = [f"{value} IS NULL", f"isinf({value})", f"NOT {self._whole_day()}"]
        if not self.clip:
            bad.append(f"{value} < {_literal(c.low)} OR {value} > {_literal(c.high)}")
        if c.integer:
            inside = f"{value} >= {_literal(c.low)} AND {value} <= {_literal(c.high)}"
            bad.append(f"({inside} AND {value} <> round({value}))")
        present = f"(NOT {self.absent()} AND ({' OR '.join(bad)}))"
        return present if c.missing else f"({self.absent()} OR {present})"

    def inputs(self) -> tuple[str, str]:
        """(SQL BOOLEAN: the value is missing, SQL of what its cell is read from: the checked number, or the value
        matched against the categories); selected once, so that :meth:`cell` compares names, not expressions."""
        return self.absent(), self._key()[0] if self.column.kind == "categorical" else self.checked()

    def cell(self, cells, absent: str, value: str) -> str:
        """SQL INTEGER: the cell of the column's :class:`~swflow.tables.cells.ColumnCells` ``cells`` (a codec's,
        or the fine grid's), from :meth:`inputs` selected as ``absent`` and ``value``."""
        import pandas as pd

        if self.column.kind == "categorical":
            return self.category([int(k) for k in cells._coarse_of_fine], absent, value)
        first, steps = thresholds(lambda x: cells.index(pd.Series(x)), *self.clip_bounds)
        return f"(CASE WHEN {absent} THEN {len(cells.starts) - 1} ELSE {first} + " \
               f"{count_at_or_below(value, steps)} END)"

    def histogram(self, cells, absent: str, value: str) -> tuple[list[str], object]:
        """(SQL aggregates, read): one column's exact counts of the cells of ``cells`` (:meth:`cell`'s arguments)
        as aggregates over the rows, and ``read(fetched) -> (size,) int64`` that turns their fetched values into the
        counts. A number's cells by DuckDB's ``histogram(value, boundaries)`` (a binary search a row, where a tree of
        4 096 comparisons costs ten times more on spread values): a value ≤ the float64 just below step t_k is
        below t_k, so bin i of the boundaries holds the cell first + (the steps below its boundary's step)."""
        import pandas as pd

        if self.column.kind == "categorical":
            def read_categories(fetched):
                out = np.zeros(cells.size, dtype=np.int64)
                for cell, count in (fetched[0] or {}).items():
                    out[int(cell)] += int(count)
                return out

            return [f"histogram({self.cell(cells, absent, value)})"], read_categories
        first, steps = thresholds(lambda x: cells.index(pd.Series(x)), *self.clip_bounds)
        unique = np.unique(steps)
        ends = np.nextafter(unique, -np.inf)
        below = first + np.searchsorted(steps, unique, side="left")  # the cell of a value in each bin

        def read_numbers(fetched):
            out = np.zeros(cells.size, dtype=np.int64)
            found = {float(k): int(n) for k, n in (fetched[0] or {}).items()}
            for end, cell in zip(ends.tolist(), below.tolist()):
                out[cell] += found.pop(end, 0)
            out[first + len(steps)] += sum(found.values())  # above the last boundary: every step at or below
            if self.column.missing:
                out[len(cells.starts) - 1] += int(fetched[1])
            return out

        bounds = "[" + ", ".join(_literal(e) for e in ends) + "]"
        number = f"CASE WHEN {absent} THEN NULL ELSE {value} END"
        return [f"histogram({number}, CAST({bounds} AS DOUBLE[]))" if len(ends) else f"histogram({number} * 0)",
                f"count(*) FILTER (WHERE {absent})"], read_numbers

    def value(self) -> str:
        """SQL DOUBLE: the value the repeated-values release counts (absent: NULL, never counted)."""
        return f"(CASE WHEN {self.absent()} THEN NULL ELSE {self.checked()} END)"
