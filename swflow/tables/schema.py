"""The public schema of a table: its columns, each with its categories or its numeric bounds.

Declared by the data owner (JSON), or proposed from PUBLIC rows by :meth:`Schema.propose`; nothing in it is ever
read from private rows. It checks a private table before anything is released: a value outside the schema is an
error that names the column and the rule (never which rows, how many, or what value), unless clipping was asked
for (numbers are clipped to their bounds; a category outside the list is still an error: there is nothing to clip
it to).

    {"columns": [{"name": "age", "type": "numeric", "min": 17, "max": 90, "integer": true},
                 {"name": "sex", "type": "categorical", "categories": ["Female", "Male"]}]}

A missing value (an empty field in CSV files, NaN, None or ``pd.NA``) is allowed only where the schema declares it:
``null`` among a categorical column's ``categories``, or ``"missing": true`` on a numeric column (it then has a cell
of its own, and comes back missing).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Column", "Schema", "SchemaError", "MISSING", "category_codes"]

#: how a missing value is declared among a column's categories (JSON null)
MISSING = None
#: a column of numbers with more distinct values than this is proposed as numeric, else as categories
NUMERIC_VALUES = 16


class SchemaError(ValueError):
    """A schema that cannot be used, or a table that does not fit its schema."""


@dataclass(frozen=True)
class Column:
    """One column: ``kind`` 'categorical' (``categories``, in their declared order; None is the missing value) or
    'numeric' (``low`` ≤ value ≤ ``high``; ``integer``: whole numbers; ``decimals``: values written with that many
    decimal places, so they come back so; ``missing``: a value may be missing)."""

    name: str
    kind: str
    categories: tuple | None = None
    low: float | None = None
    high: float | None = None
    integer: bool = False
    missing: bool = False
    decimals: int | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError(f"a column needs a non-empty name, got {self.name!r}")
        if self.kind == "categorical":
            if not self.categories or len(self.categories) < 1:
                raise SchemaError(f"column {self.name!r}: a categorical column declares its categories")
            if len(set(self.categories)) != len(self.categories):
                raise SchemaError(f"column {self.name!r}: its categories repeat")
        elif self.kind == "numeric":
            if self.low is None or self.high is None or not (math.isfinite(self.low) and math.isfinite(self.high)):
                raise SchemaError(f"column {self.name!r}: a numeric column declares finite min and max")
            if not self.low < self.high:
                raise SchemaError(f"column {self.name!r}: min {self.low} must be below max {self.high}")
            if self.decimals is not None and (self.integer or not isinstance(self.decimals, int)
                                              or isinstance(self.decimals, bool) or not 0 <= self.decimals <= 12):
                raise SchemaError(f"column {self.name!r}: decimals is a whole number of places from 0 to 12, for a "
                                  f"column that is not integer; got {self.decimals!r}")
            if self.integer and math.floor(self.high) < math.ceil(self.low):
                raise SchemaError(f"column {self.name!r}: no whole number lies in [{self.low:g}, {self.high:g}]")
        else:
            raise SchemaError(f"column {self.name!r}: type must be 'categorical' or 'numeric', got {self.kind!r}")

    def to_json(self) -> dict:
        if self.kind == "categorical":
            return {"name": self.name, "type": "categorical", "categories": list(self.categories)}
        out = {"name": self.name, "type": "numeric", "min": self.low, "max": self.high}
        return {**out, **({"integer": True} if self.integer else {}), **({"missing": True} if self.missing else {}),
                **({"decimals": self.decimals} if self.decimals is not None else {})}

    @classmethod
    def from_json(cls, entry) -> "Column":
        if not isinstance(entry, dict):
            raise SchemaError(f"a column is a JSON object, got {entry!r}")
        allowed = {"name", "type", "categories", "min", "max", "integer", "missing", "decimals"}
        unknown = set(entry) - allowed
        if unknown:
            raise SchemaError(f"column {entry.get('name')!r}: unknown keys {sorted(unknown)}; a column has "
                              f"{sorted(allowed)}")
        kind = entry.get("type")
        if kind == "categorical":
            categories = entry.get("categories")
            if not isinstance(categories, list):
                raise SchemaError(f"column {entry.get('name')!r}: categories must be a list")
            return cls(entry.get("name"), "categorical", categories=tuple(categories))
        if kind == "numeric":
            try:
                low, high = float(entry["min"]), float(entry["max"])
            except (KeyError, TypeError, ValueError):
                raise SchemaError(f"column {entry.get('name')!r}: a numeric column needs numbers min and max") from None
            flags = {key: entry.get(key, False) for key in ("integer", "missing")}
            for key, value in flags.items():
                if not isinstance(value, bool):  # "no" is a truthy string: only JSON true and false are read
                    raise SchemaError(f"column {entry.get('name')!r}: {key!r} must be true or false, got {value!r}")
            return cls(entry.get("name"), "numeric", low=low, high=high, decimals=entry.get("decimals"), **flags)
        raise SchemaError(f"column {entry.get('name')!r}: type must be 'categorical' or 'numeric', got {kind!r}")


@dataclass(frozen=True)
class Schema:
    """The columns of a table, in order."""

    columns: tuple[Column, ...]

    def __post_init__(self):
        if not self.columns:
            raise SchemaError("a schema needs at least one column")
        names = [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise SchemaError(f"column names repeat: {sorted({n for n in names if names.count(n) > 1})}")

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def to_json(self) -> dict:
        return {"columns": [c.to_json() for c in self.columns]}

    @classmethod
    def from_json(cls, data) -> "Schema":
        if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
            raise SchemaError('a schema is a JSON object {"columns": [...]}')
        return cls(tuple(Column.from_json(entry) for entry in data["columns"]))

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
        is whole; ``"missing": true`` when some are missing), other columns with their observed categories (missing
        values as a category when any occur). A numeric column is one of numbers with more than ``NUMERIC_VALUES``
        distinct values, whatever ``max_categories`` says (raising it never turns numbers into categories).
        Never call it on private rows: the bounds and categories would then be private statistics."""
        import pandas as pd

        if len(public) == 0:
            raise SchemaError("the public rows are empty: a schema is proposed from public rows that hold values")
        columns = []
        for name in public.columns:
            values = public[name]
            numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values) and \
                values.nunique(dropna=True) > NUMERIC_VALUES
            if numeric:
                finite = values.dropna().to_numpy(dtype=float)
                whole = bool(np.all(finite == np.round(finite)))
                columns.append(Column(str(name), "numeric", low=float(finite.min()), high=float(finite.max()),
                                      integer=whole, missing=bool(values.isna().any())))
                continue
            seen = sorted({_plain(v) for v in values.dropna().unique()}, key=str)
            if len(seen) > max_categories:
                raise SchemaError(f"public column {name!r} has {len(seen)} distinct values: more than "
                                  f"{max_categories} categories; group its values, raise --max-categories, or "
                                  "declare it numeric if its values are numbers")
            columns.append(Column(str(name), "categorical",
                                  categories=tuple(seen) + ((MISSING,) if values.isna().any() else ())))
        return cls(tuple(columns))

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
                codes = category_codes(values, column.categories)
                if (codes < 0).any():
                    raise SchemaError(f"column {column.name!r}: some rows hold values outside its declared categories "
                                      "(a missing value is one only where null is among them): declare them, or "
                                      "clean the rows")
                out[column.name] = pd.Series(np.array(column.categories, dtype=object)[codes],
                                             index=table.index, dtype=object)
                continue
            absent = values.isna().to_numpy()
            numbers = pd.to_numeric(values, errors="coerce").astype(float)
            finite = np.isfinite(numbers.to_numpy(dtype=float, na_value=np.nan))
            if (absent & ~column.missing).any():
                raise SchemaError(f"column {column.name!r}: some rows are missing a value, which the schema does "
                                  'not allow: declare "missing": true on the column, or drop or impute them')
            if (~absent & ~finite).any():
                raise SchemaError(f"column {column.name!r}: some rows hold values that are not finite numbers; "
                                  "clean them, or declare the column categorical")
            outside = (numbers < column.low) | (numbers > column.high)
            if outside.any() and not clip:
                raise SchemaError(f"column {column.name!r}: some rows lie outside "
                                  f"[{column.low:g}, {column.high:g}]; pass --clip (clip=True) to clip them to the "
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


def category_codes(values, categories: tuple) -> np.ndarray:
    """(n,) int64: each value's position among the declared ``categories`` (None: the missing value, matched by
    NaN, None and ``pd.NA``), −1 where it is not declared. Vectorized (pandas' Categorical): no loop over rows."""
    import pandas as pd

    declared = [c for c in categories if c is not MISSING]
    positions = np.array([i for i, c in enumerate(categories) if c is not MISSING] + [-1], dtype=np.int64)
    codes = pd.Categorical(pd.Series(values).to_numpy(dtype=object), categories=declared).codes.astype(np.int64)
    out = positions[codes]  # code −1 (not declared, or missing) reads the trailing −1
    if MISSING in categories:
        out[pd.isna(pd.Series(values)).to_numpy() & (codes < 0)] = categories.index(MISSING)
    return out


def _plain(value):
    """A cell as the schema compares it: NaN and None are the missing value, numpy scalars plain Python."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return value.item() if hasattr(value, "item") else value
