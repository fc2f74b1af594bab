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

#: the temporal types: a day, an instant, a time of day (seconds, minutes or hours since midnight)
TEMPORAL = ("date", "datetime", "time")
_DAY = 86_400
#: a datetime column's units: seconds in each
UNITS = {"second": 1, "minute": 60, "hour": 3_600}
_EPOCH = dt.datetime(1970, 1, 1)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIME = re.compile(r"^\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]00:?00)?$")  # UTC: Z or +00:00


def unit_seconds(kind: str, unit: str = "second") -> int:
    """Seconds in one of a temporal column's numbers: a day for a date, the declared ``unit`` for a datetime or a
    time of day."""
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
    if kind == "time":
        seconds = _day_seconds(value)
        if seconds is None:
            raise ValueError(f"{value!r} is not a time of day (HH:MM or HH:MM:SS, 00:00 to 23:59:59)")
        if seconds % unit_seconds(kind, unit):
            raise ValueError(f"{value!r} is not a whole {unit}: the bounds of a time counted in {unit}s are whole "
                             f"{unit}s")
        return seconds / unit_seconds(kind, unit)
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
    if kind == "time":
        return moment.time().isoformat(timespec="seconds" if unit == "second" else "minutes")
    return moment.date().isoformat() if kind == "date" else moment.isoformat()


def _day_seconds(text: str) -> float | None:
    """Seconds since midnight of "HH:MM" or "HH:MM:SS(.f)" text (None where it is no time of day)."""
    if not _TIME.match(text.strip()):
        return None
    parts = [float(p) for p in text.strip().split(":")]
    hours, minutes, seconds = (parts + [0.0])[:3]
    if hours >= 24 or minutes >= 60 or seconds >= 60:
        return None
    return hours * 3600 + minutes * 60 + seconds


def _times(values, unit: str) -> np.ndarray:
    """(n,) float: times of day (``datetime.time`` or "HH:MM[:SS]" text) as whole ``unit``s since midnight, NaN
    where missing; a value between two units falls in the earlier."""
    import pandas as pd

    values = pd.Series(values)
    absent = values.isna().to_numpy()
    seconds = np.full(len(values), np.nan)
    for i, value in enumerate(values.to_numpy(dtype=object)):
        if absent[i]:
            continue
        if isinstance(value, dt.time) and value.tzinfo is None:
            seconds[i] = value.hour * 3600 + value.minute * 60 + value.second + value.microsecond / 1e6
        elif isinstance(value, str) and (found := _day_seconds(value)) is not None:
            seconds[i] = found
        else:
            raise ValueError("some values are not times of day: write them as HH:MM or HH:MM:SS (00:00 to 23:59:59)")
    return np.floor(seconds / UNITS[unit])


def instants(values, kind: str, unit: str = "second") -> np.ndarray:
    """(n,) float: each value (datetime64, ``datetime.date``, ``pd.Timestamp`` or ISO 8601 text) as days or ``unit``s
    since 1970-01-01, NaN where missing; a datetime between two units falls in the earlier (10:59 in 10:00 when
    counted in hours). Raises ValueError (naming the rule, never a value or a row) on values that
    are not dates, carry a time zone other than UTC ("Z" and +00:00 are read as UTC), or (date) a time of day."""
    import pandas as pd

    if kind == "time":
        return _times(values, unit)
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
    if column.temporal == "time":
        return pd.Series([None if np.isnan(x) else (dt.datetime(2000, 1, 1) + dt.timedelta(
            seconds=float(x) * UNITS[column.unit])).time() for x in numbers], dtype=object)
    if column.temporal is not None:
        stamps = pd.Series(pd.to_datetime(numbers * unit_seconds(column.temporal, column.unit), unit="s"))
        if column.temporal == "datetime":
            return stamps
        return pd.Series([None if pd.isna(s) else s.date() for s in stamps], dtype=object)
    if column.integer:
        return pd.Series(numbers).astype("Int64") if column.missing else pd.Series(numbers.astype(np.int64))
    return pd.Series(numbers)


def looks_temporal(values) -> str | None:
    """'date', 'datetime' or 'time' when every present value of a public column is one (datetime64 values, ``datetime.date``
    objects, or ISO 8601 text), else None: what the schema proposer calls a date."""
    import pandas as pd

    values = pd.Series(values)
    if pd.api.types.is_datetime64_any_dtype(values):
        return "datetime"
    present_values = values.dropna()
    if len(present_values) == 0 or pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return None
    if all(isinstance(v, dt.time) for v in present_values):
        return "time"
    if all(isinstance(v, dt.date) and not isinstance(v, dt.datetime) for v in present_values):
        return "date"
    if all(isinstance(v, dt.datetime) for v in present_values):
        return "datetime"
    if not all(isinstance(v, str) for v in present_values):
        return None
    if all(_DATE.match(v) for v in present_values):
        return "date"
    if all(_TIME.match(v.strip()) and _day_seconds(v) is not None for v in present_values):
        return "time"
    return "datetime" if all(_DATETIME.match(v) for v in present_values) else None
