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
1970-01-01; swflow/tables/types.py), so hourly readings come back on the hour:

    {"name": "admitted", "type": "date", "min": "2000-01-01", "max": "2030-12-31", "missing": true}
    {"name": "read_at", "type": "datetime", "min": "2013-01-01T00:00", "max": "2014-01-01T00:00", "unit": "hour"}

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

from .rules import Rule, check_consistent, parse_rule
from .types import TEMPORAL, UNITS, coarsest_unit, instant_number, instant_text, instants, looks_temporal

__all__ = ["Column", "Schema", "SchemaError", "MISSING", "category_codes"]

#: how a missing value is declared among a column's categories (JSON null)
MISSING = None
#: a column of numbers with more distinct values than this is proposed as numeric, else as categories
NUMERIC_VALUES = 16
#: how a numeric column's fine cells are cut (swflow/tables/cells.py): equal slices of the values, or of their log
SCALES = ("linear", "log")


class SchemaError(ValueError):
    """A schema that cannot be used, or a table that does not fit its schema."""


@dataclass(frozen=True)
class Column:
    """One column: ``kind`` 'categorical' (``categories``, in their declared order; None is the missing value;
    ``dtype`` 'category': records come back as a pandas category) or 'numeric' (``low`` ≤ value ≤ ``high``;
    ``integer``: whole numbers; ``decimals``: values written with that many decimal places, so they come back so;
    ``missing``: a value may be missing; ``temporal`` 'date' or 'datetime': the numbers are days, or a datetime's
    ``unit`` ('second', 'minute' or 'hour'), since 1970-01-01, and records hold dates or datetimes; ``scale``
    'linear' or 'log': how its fine cells are cut)."""

    name: str
    kind: str
    categories: tuple | None = None
    low: float | None = None
    high: float | None = None
    integer: bool = False
    missing: bool = False
    decimals: int | None = None
    temporal: str | None = None
    unit: str = "second"
    dtype: str | None = None
    scale: str = "linear"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError(f"a column needs a non-empty name, got {self.name!r}")
        if self.kind == "categorical":
            if not self.categories or len(self.categories) < 1:
                raise SchemaError(f"column {self.name!r}: a categorical column declares its categories")
            try:
                repeated = len(set(self.categories)) != len(self.categories)
            except TypeError:  # a list or a dict among them
                raise SchemaError(f"column {self.name!r}: a category is a string, a number, a boolean or null, not "
                                  "a list or an object") from None
            if repeated:
                raise SchemaError(f"column {self.name!r}: its categories repeat")
            if self.dtype not in (None, "category"):
                raise SchemaError(f"column {self.name!r}: dtype is 'category' or left out, got {self.dtype!r}")
            if self.scale != "linear":
                raise SchemaError(f"column {self.name!r}: a scale is declared on numbers, not on categories")
        elif self.kind == "numeric":
            if self.low is None or self.high is None or not (math.isfinite(self.low) and math.isfinite(self.high)):
                raise SchemaError(f"column {self.name!r}: a numeric column declares finite min and max")
            if not self.low < self.high:
                raise SchemaError(f"column {self.name!r}: min {self.low} must be below max {self.high}")
            if self.decimals is not None and (self.integer or not isinstance(self.decimals, int)
                                              or isinstance(self.decimals, bool) or not 0 <= self.decimals <= 12):
                raise SchemaError(f"column {self.name!r}: decimals is a whole number of places from 0 to 12, for a "
                                  f"column that is not integer; got {self.decimals!r}")
            if self.temporal is not None and (self.temporal not in TEMPORAL or not self.integer
                                              or self.decimals is not None):
                raise SchemaError(f"column {self.name!r}: a temporal column is a 'date' or a 'datetime', counted in "
                                  "whole days or units")
            if self.unit not in UNITS or (self.unit != "second" and self.temporal != "datetime"):
                raise SchemaError(f"column {self.name!r}: a datetime's unit is one of {list(UNITS)} (a date counts "
                                  f"days), got {self.unit!r}")
            if self.scale not in SCALES or (self.scale != "linear" and self.temporal is not None):
                raise SchemaError(f"column {self.name!r}: scale is one of {list(SCALES)} (a date or datetime is "
                                  f"linear), got {self.scale!r}")
            if self.integer and math.floor(self.high) < math.ceil(self.low):
                raise SchemaError(f"column {self.name!r}: no whole number lies in [{self.low:g}, {self.high:g}]")
        else:
            raise SchemaError(f"column {self.name!r}: type must be 'categorical' or 'numeric', got {self.kind!r}")

    def to_json(self) -> dict:
        if self.kind == "categorical":
            return {"name": self.name, "type": "categorical", "categories": list(self.categories),
                    **({"dtype": self.dtype} if self.dtype else {})}
        if self.temporal is not None:
            return {"name": self.name, "type": self.temporal, "min": _bound(self, self.low),
                    "max": _bound(self, self.high), **({"missing": True} if self.missing else {}),
                    **({"unit": self.unit} if self.unit != "second" else {})}
        out = {"name": self.name, "type": "numeric", "min": self.low, "max": self.high}
        return {**out, **({"integer": True} if self.integer else {}), **({"missing": True} if self.missing else {}),
                **({"decimals": self.decimals} if self.decimals is not None else {}),
                **({"scale": self.scale} if self.scale != "linear" else {})}

    @classmethod
    def from_json(cls, entry) -> "Column":
        if not isinstance(entry, dict):
            raise SchemaError(f"a column is a JSON object, got {entry!r}")
        kind = entry.get("type")
        allowed = _KEYS.get(kind, {"name", "type"})
        unknown = set(entry) - allowed
        if unknown:
            raise SchemaError(f"column {entry.get('name')!r}: unknown keys {sorted(unknown)}; a {kind} column has "
                              f"{sorted(allowed)}")
        if kind == "categorical":
            categories = entry.get("categories")
            if not isinstance(categories, list):
                raise SchemaError(f"column {entry.get('name')!r}: categories must be a list")
            return cls(entry.get("name"), "categorical", categories=tuple(categories), dtype=entry.get("dtype"))
        if kind in TEMPORAL:
            unit = entry.get("unit", "second")
            if unit not in UNITS:
                raise SchemaError(f"column {entry.get('name')!r}: a datetime's unit is one of {list(UNITS)}, got "
                                  f"{unit!r}")
            try:
                low, high = (instant_number(entry[key], kind, unit) for key in ("min", "max"))
            except (KeyError, ValueError) as err:
                raise SchemaError(f"column {entry.get('name')!r}: a {kind} column needs min and max as ISO 8601 "
                                  f"text ({err})") from None
            missing = entry.get("missing", False)
            if not isinstance(missing, bool):
                raise SchemaError(f"column {entry.get('name')!r}: 'missing' must be true or false, got {missing!r}")
            return cls(entry.get("name"), "numeric", low=low, high=high, integer=True, missing=missing,
                       temporal=kind, unit=unit)
        if kind == "numeric":
            try:
                low, high = float(entry["min"]), float(entry["max"])
            except (KeyError, TypeError, ValueError):
                raise SchemaError(f"column {entry.get('name')!r}: a numeric column needs numbers min and max") from None
            flags = {key: entry.get(key, False) for key in ("integer", "missing")}
            for key, value in flags.items():
                if not isinstance(value, bool):  # "no" is a truthy string: only JSON true and false are read
                    raise SchemaError(f"column {entry.get('name')!r}: {key!r} must be true or false, got {value!r}")
            return cls(entry.get("name"), "numeric", low=low, high=high, decimals=entry.get("decimals"),
                       scale=entry.get("scale", "linear"), **flags)
        raise SchemaError(f"column {entry.get('name')!r}: type must be one of {sorted(_KEYS)}, got {kind!r}")


#: the keys each type of column may have
_KEYS = {"categorical": {"name", "type", "categories", "dtype"},
         "numeric": {"name", "type", "min", "max", "integer", "missing", "decimals", "scale"},
         "date": {"name", "type", "min", "max", "missing"},
         "datetime": {"name", "type", "min", "max", "missing", "unit"}}


@dataclass(frozen=True)
class Schema:
    """The columns of a table, in order, and the rules between them that samples keep (swflow/tables/rules.py)."""

    columns: tuple[Column, ...]
    rules: tuple = ()

    def __post_init__(self):
        if not self.columns:
            raise SchemaError("a schema needs at least one column")
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise SchemaError(f"column names repeat: {sorted({n for n in names if names.count(n) > 1})}")
        if any(not isinstance(rule, Rule) for rule in self.rules):
            raise SchemaError("rules are swflow.tables.rules.Rule (from JSON text: Schema.from_json)")
        try:
            check_consistent(self.rules, {c.name: c for c in self.columns})
        except ValueError as err:
            raise SchemaError(str(err)) from None

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def to_json(self) -> dict:
        return {"columns": [c.to_json() for c in self.columns],
                **({"rules": [rule.text for rule in self.rules]} if self.rules else {})}

    @classmethod
    def from_json(cls, data) -> "Schema":
        if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
            raise SchemaError('a schema is a JSON object {"columns": [...]} (and "rules": [...], if any)')
        unknown = set(data) - {"columns", "rules"}
        if unknown:
            raise SchemaError(f"a schema has 'columns' and 'rules', not {sorted(unknown)}")
        columns = tuple(Column.from_json(entry) for entry in data["columns"])
        if not isinstance(data.get("rules", []), list):
            raise SchemaError('"rules" is a list of texts such as "start <= end"')
        try:
            rules = tuple(parse_rule(text, {c.name: c for c in columns}) for text in data.get("rules", []))
        except ValueError as err:
            raise SchemaError(str(err)) from None
        return cls(columns, rules)

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
        if len(public) == 0:
            raise SchemaError("the public rows are empty: a schema is proposed from public rows that hold values")
        odd = [name for name in public.columns if not isinstance(name, str)]
        if odd:
            raise SchemaError(f"column names are text: {odd!r} are not (rename them, e.g. "
                              "frame.columns = frame.columns.astype(str))")
        return cls(tuple(_proposed(name, public[name], max_categories) for name in public.columns))

    def check(self, table, *, clip: bool = False):
        """``table`` (a DataFrame) with the schema's columns in its order, every value valid; numbers outside their
        bounds clipped when ``clip``. Errors name the column and the rule broken: never a value, a count or a
        position of a row (each would be a statistic of private rows without noise)."""
        import pandas as pd

        missing = [n for n in self.names if n not in table.columns]
        if missing:
            raise SchemaError(f"the table lacks the schema's columns {missing}")
        extra = [n for n in table.columns if n not in self.names]
        if extra:
            raise SchemaError(f"the table has columns the schema does not declare: {[str(e) for e in extra]}; "
                              "declare them or drop them")
        out = {}
        for column in self.columns:
            values = table[column.name]
            if column.kind == "categorical":
                try:
                    codes = category_codes(values, column.categories)
                except SchemaError as err:
                    raise SchemaError(f"column {column.name!r}: {err}") from None
                if (codes < 0).any():
                    raise SchemaError(f"column {column.name!r}: some rows hold values outside its declared categories "
                                      "(a missing value is one only where null is among them): declare them, or "
                                      "clean the rows")
                out[column.name] = pd.Series(np.array(column.categories, dtype=object)[codes],
                                             index=table.index, dtype=object)
                continue
            absent = values.isna().to_numpy()
            if column.temporal is not None:
                try:
                    numbers = pd.Series(instants(values, column.temporal, column.unit), index=table.index)
                except ValueError as err:
                    raise SchemaError(f"column {column.name!r} is a {column.temporal}: {err}") from None
            else:
                numbers = pd.to_numeric(_not_boolean(column, values), errors="coerce").astype(float)
            finite = np.isfinite(numbers.to_numpy(dtype=float, na_value=np.nan))
            if (absent & ~column.missing).any():
                raise SchemaError(f"column {column.name!r}: some rows are missing a value, which the schema does "
                                  'not allow: declare "missing": true on the column, or drop or impute them')
            if (~absent & ~finite).any():
                raise SchemaError(f"column {column.name!r}: some rows hold values that are not finite numbers; "
                                  "clean them, or declare the column categorical")
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
                numbers = numbers.clip(math.ceil(column.low), math.floor(column.high))
            else:
                numbers = numbers.clip(column.low, column.high)
            out[column.name] = numbers
        return pd.DataFrame(out, index=table.index)


def _proposed(name: str, values, max_categories: int) -> Column:
    """One column of Schema.propose."""
    import pandas as pd

    missing = bool(values.isna().any())
    temporal = looks_temporal(values)
    if temporal is not None:
        numbers = instants(values, temporal)  # days, or seconds: read once, then counted in the coarsest unit
        unit = "second" if temporal == "date" else coarsest_unit(numbers)
        numbers = numbers[np.isfinite(numbers)] / UNITS[unit]
        return Column(name, "numeric", low=float(np.floor(numbers.min())), high=float(np.ceil(numbers.max())),
                      integer=True, missing=missing, temporal=temporal, unit=unit)
    if isinstance(values.dtype, pd.CategoricalDtype):
        declared = tuple(_plain(v) for v in values.cat.categories)
        return Column(name, "categorical", categories=declared + ((MISSING,) if missing else ()), dtype="category")
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values) and \
            values.nunique(dropna=True) > NUMERIC_VALUES:
        finite = values.dropna().to_numpy(dtype=float)
        whole = bool(np.all(finite == np.round(finite)))
        # the fewest decimal places (up to 6) every value is written with: so the samples are written alike
        places = None if whole else next((d for d in range(1, 7) if np.allclose(finite, np.round(finite, d),
                                                                                rtol=0, atol=1e-9)), None)
        return Column(name, "numeric", low=float(finite.min()), high=float(finite.max()), integer=whole,
                      missing=missing, decimals=places)
    try:
        seen = sorted({_plain(v) for v in values.dropna().unique()}, key=str)
    except TypeError:  # unhashable cells: lists, dicts
        raise SchemaError(f"public column {name!r} holds lists or objects: a table's cell is a number, a string, a "
                          "boolean, a date or missing; flatten the column first") from None
    if len(seen) > max_categories:
        codes = all(isinstance(v, str) and v.isdigit() for v in seen)
        raise SchemaError(f"public column {name!r} has {len(seen)} distinct values: more than {max_categories} "
                          "categories; group its values, raise --max-categories, or declare it numeric if its values "
                          "are numbers" + ("; its values are codes written with leading zeros (zip codes), which "
                                           "stay text: group them (e.g. by their first digits)" if codes else ""))
    return Column(name, "categorical", categories=tuple(seen) + ((MISSING,) if missing else ()))


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


def _bound(column: Column, number: float) -> str:
    return instant_text(number, column.temporal, column.unit) if column.temporal else f"{number:g}"


def _plain(value):
    """A cell as the schema compares it: NaN and None are the missing value, numpy scalars plain Python."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return value.item() if hasattr(value, "item") else value


def _not_boolean(column: Column, values):
    """``values`` of a numeric ``column``, refused where they are True/False (pandas would read them as 0 and 1)."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(values):
        raise SchemaError(f"column {column.name!r} holds True/False, but the schema declares it numeric: declare it "
                          'categorical with "categories": [false, true]')
    return values
