"""Table files: CSV or Parquet in, the same format out.

CSV: a header row, no index column; an empty field is the missing value. Parquet through pyarrow. Values are read
as they are written, and the schema check that follows (swflow/tables/schema.py) decides what is valid.
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["read_table", "write_table", "TABLE_SUFFIXES"]

TABLE_SUFFIXES = (".csv", ".parquet")


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{path}: a table is a .csv or .parquet file, got {suffix or 'no suffix'!r}")
    return suffix


def read_table(path: str | Path, *, schema=None):
    """The DataFrame of a CSV or Parquet file. With ``schema``, a CSV's categorical columns whose categories are all
    strings are read as strings (a category "1" stays "1", not the number 1)."""
    import pandas as pd

    path = Path(path)
    dtype = None
    if schema is not None:
        dtype = {c.name: str for c in schema.columns
                 if c.kind == "categorical" and all(isinstance(v, str) for v in c.categories if v is not None)}
    suffix = _suffix(path)
    if not path.exists():
        raise FileNotFoundError(f"table file {path} is missing")
    try:
        if suffix == ".csv":
            return pd.read_csv(path, dtype=dtype, skipinitialspace=True)
        return pd.read_parquet(path)
    except (ValueError, OSError, pd.errors.ParserError) as err:
        raise ValueError(f"{path} is not a readable {suffix[1:]} table ({err})") from None


def write_table(frame, path: str | Path) -> Path:
    """``frame`` as a CSV (no index column) or Parquet file, by the path's suffix."""
    path = Path(path)
    if _suffix(path) == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path
