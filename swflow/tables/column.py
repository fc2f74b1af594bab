"""One column of a table's public schema: its kind, its categories or bounds, and its JSON form (swflow/tables/schema.py
holds the table's columns and rules, and checks rows against them)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .types import TEMPORAL, UNITS, instant_number, instant_text

#: the pandas dtypes a categorical column may come back in: a category, an ordered one (its categories' order), or
#: pandas' string dtype
CATEGORY_DTYPES = ("category", "ordered category", "string")

__all__ = ["CATEGORY_DTYPES", "MISSING_MARKERS", "not_numbers", "Column", "Ignored", "SchemaError", "MISSING", "NUMERIC_VALUES", "SCALES"]

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
    ``missing``: a value may be missing; ``temporal`` 'date', 'datetime' or 'time': the numbers are days, or a
    datetime's ``unit`` ('second', 'minute' or 'hour'), since 1970-01-01, or a time of day's units since midnight,
    and records hold dates, datetimes or times of day; ``scale``
    'linear' or 'log': how its fine cells are cut; ``note``: free text for the owner, never read)."""

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
    note: str | None = field(default=None, compare=False)  # what the proposer saw in public rows, for the owner

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
            if self.dtype not in (None, *CATEGORY_DTYPES):
                raise SchemaError(f"column {self.name!r}: dtype is one of {list(CATEGORY_DTYPES)} or left out, got "
                                  f"{self.dtype!r}")
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
                raise SchemaError(f"column {self.name!r}: a temporal column is a 'date', a 'datetime' or a 'time', "
                                  "counted in whole days or units")
            if self.unit not in UNITS or (self.unit != "second" and self.temporal not in ("datetime", "time")):
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
        note = {"note": self.note} if self.note else {}
        if self.kind == "categorical":
            return {"name": self.name, "type": "categorical", "categories": list(self.categories),
                    **({"dtype": self.dtype} if self.dtype else {}), **note}
        if self.temporal is not None:
            return {"name": self.name, "type": self.temporal, "min": _bound(self, self.low),
                    "max": _bound(self, self.high), **({"missing": True} if self.missing else {}),
                    **({"unit": self.unit} if self.unit != "second" else {}), **note}
        out = {"name": self.name, "type": "numeric", "min": self.low, "max": self.high}
        return {**out, **({"integer": True} if self.integer else {}), **({"missing": True} if self.missing else {}),
                **({"decimals": self.decimals} if self.decimals is not None else {}),
                **({"scale": self.scale} if self.scale != "linear" else {}), **note}

    @classmethod
    def from_json(cls, entry) -> "Column":
        if not isinstance(entry, dict):
            raise SchemaError(f"a column is a JSON object, got {entry!r}")
        note = entry.get("note")
        if note is not None and not isinstance(note, str):
            raise SchemaError(f"column {entry.get('name')!r}: a note is text, got {note!r}")
        column = cls._from_json(entry)
        return column if note is None else replace(column, note=note)

    @classmethod
    def _from_json(cls, entry: dict) -> "Column":
        kind = entry.get("type")
        if kind not in _KEYS:  # before its keys: "integer" is no type, and its min and max are not the fault
            raise SchemaError(f"column {entry.get('name')!r}: type must be one of {sorted(_KEYS)} or 'ignore', got "
                              f"{kind!r}" + (' (a whole number is "type": "numeric" with "integer": true)'
                                             if kind == "integer" else ""))
        allowed = _KEYS[kind] | {"note"}
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
                raise SchemaError(f"column {entry.get('name')!r}: a {kind}'s unit is one of {list(UNITS)}, got "
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


#: the keys each type of column may have
_KEYS = {"categorical": {"name", "type", "categories", "dtype"},
         "numeric": {"name", "type", "min", "max", "integer", "missing", "decimals", "scale"},
         "date": {"name", "type", "min", "max", "missing"},
         "datetime": {"name", "type", "min", "max", "missing", "unit"},
         "time": {"name", "type", "min", "max", "missing", "unit"}}


def _bound(column: Column, number: float) -> str:
    return instant_text(number, column.temporal, column.unit) if column.temporal else f"{number:g}"


def _plain(value):
    """A cell as the schema compares it: NaN and None are the missing value, numpy scalars plain Python."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    return value.item() if hasattr(value, "item") else value


@dataclass(frozen=True)
class Ignored:
    """A column a table may hold that runs leave out (free text, an identifier): read with the rows, then dropped,
    never released nor synthesized. ``note``: free text for the owner."""

    name: str
    note: str | None = field(default=None, compare=False)

    def to_json(self) -> dict:
        return {"name": self.name, "type": "ignore", **({"note": self.note} if self.note else {})}

    @classmethod
    def from_json(cls, entry: dict) -> "Ignored":
        if set(entry) - {"name", "type", "note"} or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise SchemaError('an ignored column is {"name": NAME, "type": "ignore"} (and a "note", if any)')
        return cls(entry["name"], entry.get("note"))


#: text that files use for a missing value but pandas does not read as one
MISSING_MARKERS = ("-", "--", "na", "n/a", "?", ".", "null", "none", "missing", "nan")


def not_numbers(values) -> str:
    """What a numeric column's unreadable ``values`` are, in words that name no value: missing-value markers,
    numbers written with separators or signs, or other text; and what to do."""
    import pandas as pd

    text = pd.Series(values, dtype=object).astype(str).str.strip()
    if text.str.lower().isin(MISSING_MARKERS).all():
        return (f"a text marker of a missing value (one of {list(MISSING_MARKERS)}), which is not read as missing: "
                'write it as an empty field (pandas: na_values=[...]) and declare "missing": true')
    plain = text.str.replace(r"[,$€£%\s]|^\((.*)\)$", r"\1", regex=True)
    if pd.to_numeric(plain, errors="coerce").notna().all():
        return ("numbers written with thousands separators, currency or percent signs (such as 1,234, $12.50 or "
                "45%): write them as plain numbers (a percent as its number), or declare the column categorical")
    return "values that are not finite numbers; clean them, or declare the column categorical"
