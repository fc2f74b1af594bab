"""A schema proposed from PUBLIC rows, written as a data owner would write it (``swflow schema``).

The public rows' exact extremes are poor bounds: a private value just beyond them is refused, and they read as a
statistic rather than as what is publicly known. So a number's bounds are widened by a tenth of the public span on
each side and rounded outward to a round step (1, 2 or 5 times a power of ten, a tenth of the span's order), and
never cross zero where the public values do not (counts and amounts stay non-negative); a date's bounds go out to
whole years. Values that are all whole days are proposed as dates, not as datetimes counted in hours. Every column
carries a ``note`` saying what was seen in the public rows and what the owner should check; the notes are never
read by a run.
"""
from __future__ import annotations

import math
from decimal import Decimal

import numpy as np

from .column import MISSING, NUMERIC_VALUES, Column, Ignored, SchemaError, _plain, not_numbers
from .types import UNITS, coarsest_unit, instant_text, instants, looks_temporal

__all__ = ["propose", "round_bounds", "ROOM"]

#: the share of the public span added on each side before rounding
ROOM = 0.1
_DAY = 86_400


def round_bounds(low: float, high: float, *, integer: bool = False) -> tuple[float, float]:
    """(low', high'): ``low``..``high`` widened by ROOM of its span on each side, rounded outward to a step of 1, 2
    or 5 × 10^k (about a tenth of the span's order; whole for ``integer``); a bound does not cross zero where the
    values do not. A single value is widened by a tenth of its size (or to ±1 at zero)."""
    span = high - low
    if span <= 0:
        span = abs(high) or 1.0
    step = 10.0 ** math.floor(math.log10(span)) / 10
    step = next(m * step for m in (1, 2, 5, 10) if span / (m * step) <= 20)
    if integer:
        step = max(1.0, round(step))
    new_low = math.floor((low - ROOM * span) / step) * step
    new_high = math.ceil((high + ROOM * span) / step) * step
    if low >= 0 > new_low:
        new_low = 0.0
    if high <= 0 < new_high:
        new_high = 0.0
    return float(_tidy(new_low)), float(_tidy(new_high))


def _tidy(x: float) -> float:
    """``x`` without the binary dust of a product of decimals (0.30000000000000004 -> 0.3)."""
    return float(f"{x:.12g}")


def propose(public, *, max_categories: int = 64) -> tuple[Column | Ignored, ...]:
    """The columns proposed for the PUBLIC rows ``public`` (a DataFrame): module docstring; Schema.propose. A column
    of text with more than ``max_categories`` values (free text, an identifier, codes) is proposed as ignored, with
    a note on what to do, rather than refusing the file."""
    if len(public) == 0:
        raise SchemaError("the public rows are empty: a schema is proposed from public rows that hold values")
    odd = [name for name in public.columns if not isinstance(name, str)]
    if odd:
        raise SchemaError(f"column names are text: {odd!r} are not (rename them, e.g. "
                          "frame.columns = frame.columns.astype(str))")
    return tuple(_proposed(name, public[name], max_categories) for name in public.columns)


def _proposed(name: str, values, max_categories: int) -> Column:
    """One column of :func:`propose`."""
    import pandas as pd

    missing = bool(values.isna().any())
    seen = f"{values.notna().sum()} public values" + (", some missing" if missing else "")
    if values.dtype == object and len(values.dropna()) and all(isinstance(v, Decimal) for v in values.dropna()):
        values = values.astype(float)  # decimal.Decimal numbers: numbers (their places read as "decimals")
    temporal = looks_temporal(values)
    if temporal is not None:
        return _temporal(name, values, temporal, missing, seen)
    explicit = isinstance(values.dtype, pd.StringDtype) and getattr(values.dtype, "na_value", None) is pd.NA
    if explicit and values.nunique(dropna=True) <= max_categories:  # "string", not the str pandas reads text as
        return Column(name, "categorical", categories=tuple(sorted(values.dropna().unique(), key=str)) +
                      ((MISSING,) if missing else ()), dtype="string", note=f"{seen}; pandas strings: they come back so")
    if isinstance(values.dtype, pd.CategoricalDtype):
        declared = tuple(_plain(v) for v in values.cat.categories)
        dtype = "ordered category" if values.cat.ordered else "category"
        return Column(name, "categorical", categories=declared + ((MISSING,) if missing else ()), dtype=dtype,
                      note=f"{seen}; the categories of its pandas dtype, in their order: add any the private rows "
                      "may hold")
    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values) and \
            values.nunique(dropna=True) > NUMERIC_VALUES:
        return _numeric(name, values, missing, seen)
    try:
        categories = sorted({_plain(v) for v in values.dropna().unique()}, key=str)
    except TypeError:  # unhashable cells: lists, dicts
        raise SchemaError(f"public column {name!r} holds lists or objects: a table's cell is a number, a string, a "
                          "boolean, a date or missing; flatten the column first") from None
    if len(categories) > max_categories:
        return Ignored(name, f"{seen}, {len(categories)} distinct: more than {max_categories} categories, so left out "
                       f"of the run (read, then dropped). {_why_many(values.dropna(), categories)}")
    return Column(name, "categorical", categories=tuple(categories) + ((MISSING,) if missing else ()),
                  note=f"{seen}, {len(categories)} categories: add any the private rows may hold and the public rows "
                  "lack (a private value outside them is refused)")


def _numeric(name: str, values, missing: bool, seen: str) -> Column:
    finite = values.dropna().to_numpy(dtype=float)
    whole = bool(np.all(finite == np.round(finite)))
    # the fewest decimal places (up to 6) every value is written with: so the samples are written alike
    places = None if whole else next((d for d in range(1, 7) if np.allclose(finite, np.round(finite, d),
                                                                            rtol=0, atol=1e-9)), None)
    low, high = round_bounds(float(finite.min()), float(finite.max()), integer=whole)
    return Column(name, "numeric", low=low, high=high, integer=whole, missing=missing, decimals=places,
                  note=f"{seen} from {finite.min():.6g} to {finite.max():.6g}; bounds rounded out to {low:g} .. "
                  f"{high:g}: set them to what is publicly known of every value (a private value outside is refused, "
                  "or clipped with --clip)")


def _temporal(name: str, values, temporal: str, missing: bool, seen: str) -> Column:
    if temporal == "time":  # the whole day: a time of day's bounds are public
        present = instants(values, "time", "second")
        unit = coarsest_unit(present[np.isfinite(present)])
        return Column(name, "numeric", low=0.0, high=float(_DAY // UNITS[unit] - 1), integer=True, missing=missing,
                      temporal="time", unit=unit, note=f"{seen}; times of day counted in {unit}s; bounds the whole "
                      "day: narrow them to what is publicly known (opening hours)")
    seconds = instants(values, "datetime") if temporal == "datetime" else instants(values, "date") * _DAY
    present = seconds[np.isfinite(seconds)]
    if temporal == "datetime" and np.all(present % _DAY == 0):
        temporal = "date"  # every value at midnight: whole days
    first, last = (_year_start(present.min() - ROOM * np.ptp(present), end=False),
                   _year_start(present.max() + ROOM * np.ptp(present), end=True))
    if temporal == "date":
        low, high, unit = first / _DAY, last / _DAY - 1, "second"
    else:
        unit = coarsest_unit(present)
        low, high = first / UNITS[unit], (last - UNITS[unit]) / UNITS[unit]
    shown = (instant_text(low, temporal, unit), instant_text(high, temporal, unit))
    return Column(name, "numeric", low=float(low), high=float(high), integer=True, missing=missing,
                  temporal=temporal, unit=unit,
                  note=f"{seen}; {'whole days: a date' if temporal == 'date' else f'counted in {unit}s'}; bounds "
                  f"rounded out to whole years, {shown[0]} .. {shown[1]}: set them to what is publicly known")


def _year_start(seconds: float, *, end: bool) -> float:
    """Seconds since 1970 of 1 January of the year of ``seconds`` (``end``: of the next year)."""
    import datetime as dt

    year = (dt.datetime(1970, 1, 1) + dt.timedelta(seconds=float(seconds))).year + end
    return (dt.datetime(year, 1, 1) - dt.datetime(1970, 1, 1)).total_seconds()


def _why_many(values, categories: list) -> str:
    """What a column with too many distinct public values probably is, and what the owner can do with it."""
    if all(isinstance(v, str) and v.isdigit() for v in categories):
        return ("Its values are codes written with leading zeros (zip codes), which stay text: to keep it, group them "
                "(e.g. by their first digits) and declare the groups as categories")
    if not_numbers(values).startswith("numbers written"):
        return ("Its values are numbers written with separators or signs (1,234, $12.50, 45%): write them as plain "
                "numbers and propose again, and it becomes a numeric column")
    return ("Free text or an identifier: leave it ignored, group it into categories, raise --max-categories, or, if "
            "it names a person, pass it as --privacy-unit (and delete it here)")
