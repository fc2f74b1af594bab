"""The public schema of a table: its columns, each with its categories or its numeric bounds.

Declared by the data owner (JSON), or proposed from PUBLIC rows by :meth:`Schema.propose`; nothing in it is ever
read from private rows. It checks a private table before anything is released: a value outside the schema is an
error that names the column and says how many rows (never which rows or what value), unless clipping was asked
for (numbers are clipped to their bounds; a category outside the list is still an error: there is nothing to clip
it to).

    {"columns": [{"name": "age", "type": "numeric", "min": 17, "max": 90, "integer": true},
                 {"name": "sex", "type": "categorical", "categories": ["Female", "Male"]}]}

A missing value is allowed only where the schema declares it as a category: ``null`` in ``categories`` (written
as an empty field in CSV files).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Column", "Schema", "SchemaError", "MISSING"]

#: how a missing value is declared among a column's categories (JSON null)
MISSING = None


class SchemaError(ValueError):
    """A schema that cannot be used, or a table that does not fit its schema."""


@dataclass(frozen=True)
class Column:
    """One column: ``kind`` 'categorical' (``categories``, in their declared order; None is the missing value) or
    'numeric' (``low`` ≤ value ≤ ``high``; ``integer``: whole numbers)."""

    name: str
    kind: str
    categories: tuple | None = None
    low: float | None = None
    high: float | None = None
    integer: bool = False

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
        else:
            raise SchemaError(f"column {self.name!r}: type must be 'categorical' or 'numeric', got {self.kind!r}")

    def to_json(self) -> dict:
        if self.kind == "categorical":
            return {"name": self.name, "type": "categorical", "categories": list(self.categories)}
        out = {"name": self.name, "type": "numeric", "min": self.low, "max": self.high}
        return {**out, "integer": True} if self.integer else out

    @classmethod
    def from_json(cls, entry) -> "Column":
        if not isinstance(entry, dict):
            raise SchemaError(f"a column is a JSON object, got {entry!r}")
        allowed = {"name", "type", "categories", "min", "max", "integer"}
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
            return cls(entry.get("name"), "numeric", low=low, high=high, integer=bool(entry.get("integer", False)))
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
        is whole), other columns with their observed categories (missing values as a category when any occur).
        Never call it on private rows: the bounds and categories would then be private statistics."""
        import pandas as pd

        columns = []
        for name in public.columns:
            values = public[name]
            numeric = pd.api.types.is_numeric_dtype(values) and values.nunique(dropna=True) > max_categories // 4
            if numeric and values.notna().all():
                finite = values.to_numpy(dtype=float)
                whole = bool(np.all(finite == np.round(finite)))
                columns.append(Column(str(name), "numeric", low=float(finite.min()), high=float(finite.max()),
                                      integer=whole))
                continue
            seen = sorted({_plain(v) for v in values.dropna().unique()}, key=str)
            if len(seen) > max_categories:
                raise SchemaError(f"public column {name!r} has {len(seen)} distinct values: more than "
                                  f"{max_categories} categories; declare it as numeric or group its values")
            columns.append(Column(str(name), "categorical",
                                  categories=tuple(seen) + ((MISSING,) if values.isna().any() else ())))
        return cls(tuple(columns))

    def check(self, table, *, clip: bool = False):
        """``table`` (a DataFrame) with the schema's columns in its order, every value valid; numbers outside their
        bounds clipped when ``clip``. Errors name the column and count the rows, never show a value or a row."""
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
                allowed = set(column.categories)
                present = [_plain(v) for v in values.to_numpy(dtype=object)]
                bad = np.array([v not in allowed for v in present], dtype=bool)
                if bad.any():
                    absent = all(v is MISSING for v, b in zip(present, bad) if b)
                    what = ("missing values, which the schema does not declare (add null to its categories)"
                            if absent else "values outside its declared categories")
                    raise SchemaError(f"column {column.name!r}: {int(bad.sum())} row(s) hold {what}")
                out[column.name] = pd.Series(present, index=table.index, dtype=object)
                continue
            numbers = pd.to_numeric(values, errors="coerce")
            unreadable = numbers.isna() | ~np.isfinite(numbers.to_numpy(dtype=float, na_value=np.nan))
            if unreadable.any():
                raise SchemaError(f"column {column.name!r}: {int(unreadable.sum())} row(s) are missing or not "
                                  "finite numbers; drop or impute them, or declare the column categorical")
            outside = (numbers < column.low) | (numbers > column.high)
            if outside.any() and not clip:
                raise SchemaError(f"column {column.name!r}: {int(outside.sum())} row(s) lie outside "
                                  f"[{column.low:g}, {column.high:g}]; pass --clip (clip=True) to clip them to the "
                                  "declared bounds, or widen the schema")
            out[column.name] = numbers.clip(column.low, column.high)
        return pd.DataFrame(out, index=table.index)


def _plain(value):
    """A cell as the schema compares it: NaN and None are the missing value, numpy scalars plain Python."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return value.item() if hasattr(value, "item") else value
