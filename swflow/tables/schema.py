"""The public schema of a table: its columns, each with its categories or its numeric bounds.

Declared by the data owner (JSON), or proposed from PUBLIC rows by :meth:`Schema.propose`; nothing in it is ever
read from private rows. It checks a private table before anything is released: a value outside the schema is an
error that names the column and the rule (never which rows, how many, or what value), unless clipping was asked
for (numbers are clipped to their bounds; a category outside the list is still an error: there is nothing to clip
it to).

    {"columns": [{"name": "age", "type": "numeric", "min": 17, "max": 90, "integer": true},
                 {"name": "sex", "type": "categorical", "categories": ["Female", "Male"]}]}

A missing value (an empty field in CSV files, NaN, NaT, None or ``pd.NA``) is allowed only where the schema declares
it: ``null`` among a categorical column's ``categories``, or ``"missing": true`` on a numeric, date or datetime
column (it then has a cell of its own, and comes back missing). Dates and times are declared with ISO 8601 bounds,
and counted like integer columns (days, or a datetime's ``unit``: seconds unless declared "minute" or "hour", since
1970-01-01, or since midnight for a time of day; swflow/tables/types.py), so hourly readings come back on the hour:

    {"name": "admitted", "type": "date", "min": "2000-01-01", "max": "2030-12-31", "missing": true}
    {"name": "read_at", "type": "datetime", "min": "2013-01-01T00:00", "max": "2014-01-01T00:00", "unit": "hour"}
    {"name": "opened", "type": "time", "min": "06:00", "max": "22:00", "unit": "minute"}

A count or an amount whose values spread over decades (votes, a budget, expenses, net worth) is declared
``"scale": "log"``: its fine cells are then cut evenly in log(1 + |x|/unit) rather than in x (swflow/tables/cells.py),
so that small values keep cells of their own instead of sharing one slice of wide bounds. It changes how finely the
column is seen, never which values are valid.

Records come back with the dtypes they came in with (:func:`swflow.tables.types.present`); a categorical column
declared ``"dtype": "category"`` comes back as a pandas ``category``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .column import MISSING, Column, Ignored, SchemaError, _bound, not_numbers
from .rules import Implication, Rule, check_consistent, parse_rule
from .types import instants

__all__ = ["Column", "Schema", "SchemaError", "MISSING", "IGNORE", "category_codes"]

#: the type of a column a table may hold that runs leave out (free text, an identifier): read, then dropped
IGNORE = "ignore"


@dataclass(frozen=True)
class Schema:
    """The columns of a table, in order, and the rules between them that samples keep (swflow/tables/rules.py)."""

    columns: tuple[Column, ...]
    rules: tuple = ()
    ignored: tuple[Ignored, ...] = ()  # columns a table may hold that runs leave out (free text, identifiers)

    def __post_init__(self):
        if not self.columns:
            raise SchemaError("a schema needs at least one column that is not ignored")
        names = [c.name for c in self.columns] + [i.name for i in self.ignored]
        if len(set(names)) != len(names):
            raise SchemaError(f"column names repeat: {sorted({n for n in names if names.count(n) > 1})}")
        if any(not isinstance(rule, (Rule, Implication)) for rule in self.rules):
            raise SchemaError("rules are swflow.tables.rules.Rule (from JSON text: Schema.from_json)")
        try:
            check_consistent(self.rules, {c.name: c for c in self.columns})
        except ValueError as err:
            raise SchemaError(str(err)) from None

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def to_json(self) -> dict:
        return {"columns": [c.to_json() for c in (*self.columns, *self.ignored)],
                **({"rules": [rule.text for rule in self.rules]} if self.rules else {})}

    @classmethod
    def from_json(cls, data) -> "Schema":
        if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
            raise SchemaError('a schema is a JSON object {"columns": [...]} (and "rules": [...], if any)')
        unknown = set(data) - {"columns", "rules"}
        if unknown:
            raise SchemaError(f"a schema has 'columns' and 'rules', not {sorted(unknown)}")
        ignored = tuple(Ignored.from_json(entry) for entry in data["columns"]
                        if isinstance(entry, dict) and entry.get("type") == IGNORE)
        columns = tuple(Column.from_json(entry) for entry in data["columns"]
                        if not (isinstance(entry, dict) and entry.get("type") == IGNORE))
        if not isinstance(data.get("rules", []), list):
            raise SchemaError('"rules" is a list of texts such as "start <= end"')
        try:
            rules = tuple(parse_rule(text, {c.name: c for c in columns}) for text in data.get("rules", []))
        except ValueError as err:
            raise SchemaError(str(err)) from None
        return cls(columns, rules, ignored)

    @classmethod
    def read(cls, path: str | Path) -> "Schema":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"schema file {path} is missing: write one, or propose one from public rows "
                                    "with `swflow schema PUBLIC.csv`")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise SchemaError(f"{path} is not JSON ({err})") from None
        return cls.from_json(data)

    def write(self, path: str | Path) -> Path:
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return Path(path)

    @classmethod
    def propose(cls, public, *, max_categories: int = 64) -> "Schema":
        """A schema read off PUBLIC rows (a DataFrame): numbers with their observed range (integer when every value
        is whole; ``"decimals"`` when every value has at most 6 places; ``"missing": true`` when some are missing),
        dates and datetimes likewise (datetime64 values, ``datetime.date`` objects, ISO 8601 text), other columns with their observed categories (missing values as
        a category when any occur; a pandas ``category`` column with its dtype's categories, in their order). A
        numeric column is one of numbers with more than ``NUMERIC_VALUES`` distinct values, whatever
        ``max_categories`` says (raising it never turns numbers into categories).
        Never call it on private rows: the bounds and categories would then be private statistics."""
        from .propose import propose

        columns = propose(public, max_categories=max_categories)
        return cls(tuple(c for c in columns if isinstance(c, Column)), (),
                   tuple(c for c in columns if isinstance(c, Ignored)))

    def check(self, table, *, clip: bool = False):
        """``table`` (a DataFrame) with the schema's columns in its order, every value valid; numbers outside their
        bounds clipped when ``clip``. Errors name the column and the rule broken: never a value, a count or a
        position of a row (each would be a statistic of private rows without noise)."""
        import pandas as pd

        self._check_names(table)
        return pd.DataFrame({c.name: _checked(c, table[c.name], clip) for c in self.columns}, index=table.index)

    def problems(self, table, *, clip: bool = False) -> list[str]:
        """Every problem ``table`` has with the schema, one message a column (the first rule it breaks), in the
        words :meth:`check` raises: a column and a rule, never a value, a count or a row. Empty when it fits."""
        found = []
        try:
            self._check_names(table)
        except SchemaError as err:
            found.append(str(err))
        for column in self.columns:
            if column.name in table.columns:
                try:
                    _checked(column, table[column.name], clip)
                except SchemaError as err:
                    found.append(str(err))
        return found

    def _check_names(self, table) -> None:
        missing = [n for n in self.names if n not in table.columns]
        if missing:
            raise SchemaError(f"the table lacks the schema's columns {missing}")
        extra = [n for n in table.columns if n not in self.names and n not in {i.name for i in self.ignored}]
        if extra:
            raise SchemaError(f"the table has columns the schema does not declare: {[str(e) for e in extra]}; "
                              "declare them or drop them")


def _checked(column: Column, values, clip: bool):
    """One column's ``values`` as :meth:`Schema.check` returns them, or the SchemaError of the first rule broken."""
    import pandas as pd

    if column.kind == "categorical":
        try:
            codes = category_codes(values, column.categories)
        except SchemaError as err:
            raise SchemaError(f"column {column.name!r}: {err}") from None
        if (codes < 0).any():
            raise SchemaError(f"column {column.name!r}: some rows hold values outside its declared categories "
                              "(a missing value is one only where null is among them): declare them, or "
                              "clean the rows")
        return pd.Series(np.array(column.categories, dtype=object)[codes], index=values.index, dtype=object)
    absent = values.isna().to_numpy()
    if column.temporal is not None:
        try:
            numbers = pd.Series(instants(values, column.temporal, column.unit), index=values.index)
        except ValueError as err:
            raise SchemaError(f"column {column.name!r} is a {column.temporal}: {err}") from None
    else:
        numbers = pd.to_numeric(_not_boolean(column, values), errors="coerce").astype(float)
    finite = np.isfinite(numbers.to_numpy(dtype=float, na_value=np.nan))
    if (absent & ~column.missing).any():
        raise SchemaError(f"column {column.name!r}: some rows are missing a value, which the schema does "
                          'not allow: declare "missing": true on the column, or drop or impute them')
    if (~absent & ~finite).any():
        raise SchemaError(f"column {column.name!r}: some rows hold {not_numbers(values[~absent & ~finite])}")
    outside = (numbers < column.low) | (numbers > column.high)
    if outside.any() and not clip:
        raise SchemaError(f"column {column.name!r}: some rows lie outside [{_bound(column, column.low)}, "
                          f"{_bound(column, column.high)}]; pass --clip (clip=True) to clip them to the "
                          "declared bounds, or widen the schema")
    if column.integer:
        inside = numbers[~outside].dropna()
        if (inside != np.round(inside)).any():
            raise SchemaError(f"column {column.name!r} is declared integer: some rows hold values that are "
                              "not whole numbers; round them, or declare the column not integer")
        # the whole numbers inside the bounds: clipping to a fractional bound would make a fraction
        return numbers.clip(math.ceil(column.low), math.floor(column.high))
    return numbers.clip(column.low, column.high)


def category_codes(values, categories: tuple) -> np.ndarray:
    """(n,) int64: each value's position among the declared ``categories`` (None: the missing value, matched by
    NaN, None and ``pd.NA``), −1 where it is not declared. Vectorized (pandas' Categorical): no loop over rows."""
    import pandas as pd

    declared = [c for c in categories if c is not MISSING]
    positions = np.array([i for i, c in enumerate(categories) if c is not MISSING] + [-1], dtype=np.int64)
    try:
        codes = pd.Categorical(pd.Series(values).to_numpy(dtype=object), categories=declared).codes.astype(np.int64)
    except TypeError:  # unhashable cells (lists, dicts) are no category
        raise SchemaError("some rows hold lists or objects, not values (a category is a string, a number, a "
                          "boolean or missing)") from None
    out = positions[codes]  # code −1 (not declared, or missing) reads the trailing −1
    if MISSING in categories:
        out[pd.isna(pd.Series(values)).to_numpy() & (codes < 0)] = categories.index(MISSING)
    return out


def _not_boolean(column: Column, values):
    """``values`` of a numeric ``column``, refused where they are True/False (pandas would read them as 0 and 1)."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(values):
        raise SchemaError(f"column {column.name!r} holds True/False, but the schema declares it numeric: declare it "
                          'categorical with "categories": [false, true]')
    return values
