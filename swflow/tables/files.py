"""Table files: CSV or Parquet in, the same format out.

CSV: a header row, no index column; an empty field is the missing value. Parquet through pyarrow. Values are read
as they are written, and the schema check that follows (swflow/tables/schema.py) decides what is valid.
"""
from __future__ import annotations

from pathlib import Path

from ..privacy.rows import ChunkedRows

__all__ = ["read_table", "write_table", "TableRows", "TABLE_SUFFIXES"]

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


class TableRows(ChunkedRows):
    """A table file read in chunks of ``chunk_rows`` records, each checked against the schema and encoded by
    ``codec``: what a table larger than memory gives the release (a sum of counts over chunks). Memory stays at one
    chunk's encoded rows (chunk_rows × D float32) whatever the file's length."""

    def __init__(self, path: str | Path, codec, *, clip: bool = False, chunk_rows: int = 100_000):
        path = Path(path)
        self._suffix = _suffix(path)
        if not path.exists():
            raise FileNotFoundError(f"table file {path} is missing")
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        self.path, self.codec, self.clip, self.chunk_rows = path, codec, clip, int(chunk_rows)
        self._rows = sum(len(frame) for frame in self._frames())

    def _frames(self):
        import pandas as pd

        schema = self.codec.schema
        try:
            if self._suffix == ".csv":
                dtype = {c.name: str for c in schema.columns
                         if c.kind == "categorical" and all(isinstance(v, str) for v in c.categories if v is not None)}
                yield from pd.read_csv(self.path, dtype=dtype, skipinitialspace=True, chunksize=self.chunk_rows)
            else:
                import pyarrow.parquet as pq

                for batch in pq.ParquetFile(self.path).iter_batches(batch_size=self.chunk_rows):
                    yield batch.to_pandas()
        except (ValueError, OSError, pd.errors.ParserError) as err:
            raise ValueError(f"{self.path} is not a readable {self._suffix[1:]} table ({err})") from None

    @property
    def shape(self) -> tuple[int, int]:
        return (self._rows, self.codec.dim)

    def __len__(self) -> int:
        return self._rows

    def chunks(self):
        """(offset, encoded rows (c, D) float32 tensor) per chunk, in order; a chunk that does not fit the schema
        is refused with the first row number of its chunk (never a value)."""
        import torch

        from .schema import SchemaError

        offset = 0
        for frame in self._frames():
            try:
                rows = self.codec.encode(frame, clip=self.clip)
            except SchemaError as err:
                raise SchemaError(f"{self.path}, the chunk of rows from {offset} on: {err}") from None
            yield offset, torch.from_numpy(rows)
            offset += len(frame)

    def sha256(self) -> str:
        """A fingerprint of the file's bytes (never its rows)."""
        import hashlib

        digest = hashlib.sha256()
        with open(self.path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
        return digest.hexdigest()

    def to(self, device):
        return self

    def __str__(self) -> str:
        return f"the {self._rows} rows of {self.path}"
