"""A column's values in and out: dates and times as the numbers the codec counts, and records written back with the
dtypes they came in with.

Inside, a ``date`` column is a whole number of days since 1970-01-01 and a ``datetime`` column a whole number of
its declared ``unit`` (seconds, minutes or hours) since 1970-01-01T00:00:00 (no time zone), so both are binned like
integer columns, and an hourly column's samples fall on whole hours. Out, a date is a
``datetime.date`` (Parquet date32, CSV ``2024-05-31``), a datetime a ``datetime64`` value, an integer column that may
be missing a nullable ``Int64``, a column of booleans ``bool`` (nullable ``boolean`` where null is declared), a
column of whole-number categories ``int64`` (``Int64``), and a categorical column declared ``"dtype": "category"`` a
pandas ``category`` with its declared categories, in their order.
"""
from __future__ import annotations

import datetime as dt
import re

import numpy as np

__all__ = ["TEMPORAL", "UNITS", "unit_seconds", "instant_number", "instant_text", "instants", "present",
           "looks_temporal", "coarsest_unit"]

#: the temporal types
TEMPORAL = ("date", "datetime")
_DAY = 86_400
#: a datetime column's units: seconds in each
UNITS = {"second": 1, "minute": 60, "hour": 3_600}
_EPOCH = dt.datetime(1970, 1, 1)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]00:?00)?$")  # UTC: Z or +00:00


def unit_seconds(kind: str, unit: str = "second") -> int:
    """Seconds in one of a temporal column's numbers: a day for a date, the declared ``unit`` for a datetime."""
    return _DAY if kind == "date" else UNITS[unit]


def coarsest_unit(seconds: np.ndarray) -> str:
    """The coarsest unit that every one of ``seconds`` (since 1970-01-01, NaN where missing) is a whole number of:
    what the schema proposer declares for a public datetime column."""
    seconds = seconds[np.isfinite(seconds)]
    return next((unit for unit in ("hour", "minute") if np.all(seconds % UNITS[unit] == 0)), "second")


def instant_number(value, kind: str, unit: str = "second") -> float:
    """A declared bound (an ISO 8601 string such as "2024-05-31" or "2024-05-31T12:00:00") as the column's number:
    days (date) or units (datetime) since 1970-01-01. Raises ValueError on anything else, or on a bound between two
    of the column's numbers."""
    import pandas as pd

    if not isinstance(value, str):
        raise ValueError(f"a {kind} bound is an ISO 8601 string such as '2024-05-31', got {value!r}")
    try:
        stamp = pd.Timestamp(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO 8601 {kind}") from None
    if stamp.tzinfo is not None:
        raise ValueError(f"{value!r} has a time zone: declare bounds in UTC without one")
    seconds = (stamp.to_pydatetime() - _EPOCH).total_seconds()
    if kind == "date" and seconds % _DAY:
        raise ValueError(f"{value!r} has a time of day: a date column's bounds are dates")
    if seconds % unit_seconds(kind, unit):
        raise ValueError(f"{value!r} is not a whole {unit}: the bounds of a datetime counted in {unit}s are whole "
                         f"{unit}s")
    return seconds / unit_seconds(kind, unit)


def instant_text(number: float, kind: str, unit: str = "second") -> str:
    """The ISO 8601 text of a column's number (instant_number's inverse)."""
    moment = _EPOCH + dt.timedelta(seconds=float(number) * unit_seconds(kind, unit))
    return moment.date().isoformat() if kind == "date" else moment.isoformat()


def instants(values, kind: str, unit: str = "second") -> np.ndarray:
    """(n,) float: each value (datetime64, ``datetime.date``, ``pd.Timestamp`` or ISO 8601 text) as days or ``unit``s
    since 1970-01-01, NaN where missing; a datetime between two units falls in the earlier (10:59 in 10:00 when
    counted in hours). Raises ValueError (naming the rule, never a value or a row) on values that
    are not dates, carry a time zone other than UTC ("Z" and +00:00 are read as UTC), or (date) a time of day."""
    import pandas as pd

    values = pd.Series(values)
    absent = values.isna().to_numpy()
    if isinstance(values.dtype, pd.DatetimeTZDtype):
        values = _utc_naive(values)
    if pd.api.types.is_numeric_dtype(values) and not absent.all():
        raise ValueError("its values are numbers, not dates: write them as ISO 8601 dates or datetime64 values")
    try:
        stamps = values if pd.api.types.is_datetime64_dtype(values) else pd.to_datetime(
            values, errors="coerce", format="ISO8601")
    except (ValueError, TypeError):  # mixed time zones, objects pandas cannot read
        text = values.dropna().astype(str)
        if text.str.contains(r"\d:\d\d(?::\d\d(?:\.\d+)?)?[+-]\d\d:?\d\d$").any() and not text.str.contains(
                r"[+-]00:?00$|Z$").all():
            raise ValueError(_OTHER_ZONE) from None
        raise ValueError("some values are not dates without a time zone") from None
    if isinstance(stamps.dtype, pd.DatetimeTZDtype):
        stamps = _utc_naive(stamps)
    if (stamps.isna().to_numpy() & ~absent).any():
        raise ValueError("some values are not ISO 8601 dates")
    seconds = (stamps - pd.Timestamp(_EPOCH)).dt.total_seconds().to_numpy(dtype=float, na_value=np.nan)
    numbers = seconds / unit_seconds(kind, unit)
    if kind == "date" and np.any(np.isfinite(numbers) & (numbers != np.floor(numbers))):
        raise ValueError("some values have a time of day: declare the column a datetime, or keep the dates only")
    if kind == "datetime":
        numbers = np.floor(numbers)  # whole units: finer instants fall in their unit
    return numbers


_OTHER_ZONE = ("its values carry a time zone other than UTC: convert them to UTC (tz_convert('UTC')), then drop the "
               "zone (tz_localize(None))")


def _utc_naive(stamps):
    """Zoned ``stamps`` (a Series) without their zone where every one is in UTC (written with "Z" or +00:00: the
    instant and its wall time agree); other zones are refused, as a date's day depends on them."""
    naive = stamps.dt.tz_localize(None)
    present = stamps.notna().to_numpy()
    if not (naive[present] == stamps.dt.tz_convert(None)[present]).all():
        raise ValueError(_OTHER_ZONE)
    return naive


def present(column, values: np.ndarray):
    """A pandas Series of ``values`` ((n,) decoded values of ``column``: numbers, or categories as objects, None
    where missing) in the dtype the column's records came in (module docstring)."""
    import pandas as pd

    if column.kind == "categorical":
        declared = [c for c in column.categories if c is not None]
        nullable = None in column.categories
        if column.dtype in ("category", "ordered category"):
            return pd.Series(pd.Categorical(values, categories=declared, ordered=column.dtype == "ordered category"))
        if column.dtype == "string":
            return pd.Series(list(values), dtype="string")
        if all(isinstance(c, bool) for c in declared):
            return pd.Series(values, dtype="boolean" if nullable else bool)
        if all(isinstance(c, int) and not isinstance(c, bool) for c in declared):
            return pd.Series(values, dtype="Int64" if nullable else np.int64)
        if all(isinstance(c, str) for c in declared):  # the string dtype read_csv gives this pandas (str, object)
            return pd.Series(list(values))
        return pd.Series(values, dtype=object)
    numbers = np.asarray(values, dtype=np.float64)
    if column.temporal is not None:
        stamps = pd.Series(pd.to_datetime(numbers * unit_seconds(column.temporal, column.unit), unit="s"))
        if column.temporal == "datetime":
            return stamps
        return pd.Series([None if pd.isna(s) else s.date() for s in stamps], dtype=object)
    if column.integer:
        return pd.Series(numbers).astype("Int64") if column.missing else pd.Series(numbers.astype(np.int64))
    return pd.Series(numbers)


def looks_temporal(values) -> str | None:
    """'date' or 'datetime' when every present value of a public column is one (datetime64 values, ``datetime.date``
    objects, or ISO 8601 text), else None: what the schema proposer calls a date."""
    import pandas as pd

    values = pd.Series(values)
    if pd.api.types.is_datetime64_any_dtype(values):
        return "datetime"
    present_values = values.dropna()
    if len(present_values) == 0 or pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return None
    if all(isinstance(v, dt.date) and not isinstance(v, dt.datetime) for v in present_values):
        return "date"
    if all(isinstance(v, dt.datetime) for v in present_values):
        return "datetime"
    if not all(isinstance(v, str) for v in present_values):
        return None
    if all(_DATE.match(v) for v in present_values):
        return "date"
    return "datetime" if all(_DATETIME.match(v) for v in present_values) else None
