"""Table files: CSV or Parquet in, the same format out.

CSV: a header row, no index column; an empty field is the missing value. Parquet through pyarrow. Values are read
as they are written, and the schema check that follows (swflow/tables/schema.py) decides what is valid.
"""
from __future__ import annotations

import contextlib
import contextvars
from pathlib import Path

from ..privacy.rows import ChunkedRows

__all__ = ["read_table", "write_table", "TableRows", "TABLE_SUFFIXES", "record_count", "csv_text_as_pandas_reads",
           "delimiter_of", "reading_shown"]

TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet")
#: the delimiters a text table's header is read for, where none is named (delimiter_of)
DELIMITERS = (",", ";", "\t", "|")


def _suffix(path: Path) -> str:
    """The file's kind: '.parquet', or '.csv' for delimited text (.csv, .tsv, .txt)."""
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise ValueError(f"{path}: a table is a .csv, .tsv, .txt or .parquet file, got {suffix or 'no suffix'!r}")
    return ".parquet" if suffix == ".parquet" else ".csv"


def delimiter_of(path: str | Path, sep: str | None = None) -> str:
    """A text table's delimiter: ``sep`` where named; a tab for .tsv; else the first of DELIMITERS that its header
    holds (',' when it holds none: one column)."""
    if sep is not None:
        return sep
    path = Path(path)
    if path.suffix.lower() == ".tsv":
        return "\t"
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            header = f.readline()
    except OSError:
        return ","
    return next((d for d in DELIMITERS if d in header), ",")


def read_table(path: str | Path, *, schema=None, sep: str | None = None):
    """The DataFrame of a CSV or Parquet file. With ``schema``, a CSV's categorical columns whose categories are all
    strings are read as strings (a category "1" stays "1", not the number 1). Without one (public rows for the
    schema proposer), a CSV column is read as numbers only when every value is one and none is written with a
    leading zero: codes such as zip code 02134 stay text. A CSV whose header repeats a name, or looks delimited by
    something other than ``sep`` (default: :func:`delimiter_of`), is refused with what to do."""
    import pandas as pd

    path = Path(path)
    suffix = _suffix(path)
    if not path.exists():
        raise FileNotFoundError(f"table file {path} is missing")
    sep = delimiter_of(path, sep)
    if suffix == ".csv":
        check_header(path, sep)  # its own errors say what to do, and name no row
    try:
        if suffix == ".parquet":
            return pd.read_parquet(path)
        if schema is not None:
            return _missing_markers(_no_trailing(pd.read_csv(path, dtype=_text_columns(schema), skipinitialspace=True,
                                                             sep=sep, index_col=False, **_markers(schema))), schema)
        return _numbers_where_plain(_no_trailing(pd.read_csv(path, dtype=str, skipinitialspace=True, sep=sep,
                                                             index_col=False)))
    except (ValueError, OSError, pd.errors.ParserError) as err:
        raise unreadable(path, suffix, err) from None


def _no_trailing(frame):
    """``frame`` without the empty, unnamed column that a delimiter at the end of every line makes ("a,b," reads as
    a third column "Unnamed: 2"; read with ``index_col=False``, so that rows with one more field than the header do
    not turn their first column into the index), and without the spaces that end a name or a text value: read_csv's
    ``skipinitialspace`` drops those that begin one, so "Paris ", " Paris" and "Paris" are one category."""
    from pandas.api.types import is_object_dtype, is_string_dtype

    empty = [name for name in frame.columns if str(name).startswith("Unnamed: ") and
             (frame[name].isna() | (frame[name].astype(str).str.strip() == "")).all()]
    frame = frame.drop(columns=empty) if empty else frame
    frame = frame.rename(columns=lambda name: name.rstrip() if isinstance(name, str) else name)
    for name in frame.columns:
        column = frame[name]
        if is_string_dtype(column) or is_object_dtype(column):
            text = column.map(lambda v: isinstance(v, str))
            if text.any():
                frame[name] = column.where(~text, column[text].str.rstrip())
    return frame


def unreadable(path: Path, suffix: str, err: Exception) -> ValueError:
    """The error for a table file its reader refused, without the reader's words: they name the line or the value of
    a row, which may be private ("Expected 4 fields in line 51")."""
    import pandas as pd

    if isinstance(err, pd.errors.EmptyDataError):
        what = "it is empty: a table is a header row of column names, then one line a record"
    elif isinstance(err, pd.errors.ParserError):
        what = ("a row has more or fewer fields than the header, or a quote is not closed: check the file's "
                "delimiters and quotes with a CSV reader")
    elif isinstance(err, OSError):
        what = f"{type(err).__name__}: check that it exists, is readable and is whole"
    else:
        what = f"{type(err).__name__} from its reader: check its format with a {suffix[1:]} reader"
    return ValueError(f"{path} is not a readable {suffix[1:]} table ({what}; swflow names no row, as rows may be "
                      "private)")


def check_header(path: Path, sep: str = ",") -> None:
    """Refuse a CSV header that repeats a column name (pandas would rename the second silently) or that looks
    delimited by another character than ``sep``."""
    import csv

    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        header = [name.rstrip() for name in next(csv.reader(f, delimiter=sep, skipinitialspace=True), [])]
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise ValueError(f"its header repeats the column names {repeated}: rename them so each is once")
    if len(header) == 1:
        for other in (";", "\t", "|"):
            if other != sep and other in header[0]:
                raise ValueError(f"its header is one column {header[0]!r} that looks delimited by {other!r}: "
                                 f"swflow read it as {sep!r}-separated: name the delimiter with --sep {other!r}")


def _markers(schema) -> dict:
    """read_csv's missing-value markers: pandas' own (NA, None, null, N/A, …), except where a categorical column
    declares one as a category (Namibia's code "NA", a "None" answer), which it then reads as that category."""
    from pandas._libs.parsers import STR_NA_VALUES

    declared = {c.name: {v for v in c.categories if isinstance(v, str)} for c in schema.columns
                if c.kind == "categorical"}
    return {"keep_default_na": False,
            "na_values": {c.name: sorted(set(STR_NA_VALUES) - declared.get(c.name, set())) for c in schema.columns}}


def _missing_markers(frame, schema):
    """The columns the schema does not name (an identifier column) with pandas' usual missing markers (read_csv read
    them as text, having markers for the schema's columns only)."""
    from pandas._libs.parsers import STR_NA_VALUES
    from pandas.api.types import is_numeric_dtype

    for name in frame.columns:
        if name not in schema.names and not is_numeric_dtype(frame[name]):
            frame[name] = frame[name].where(~frame[name].isin(list(STR_NA_VALUES)))
    return frame


def _text_columns(schema) -> dict:
    return {c.name: str for c in schema.columns
            if c.kind == "categorical" and all(isinstance(v, str) for v in c.categories if v is not None)}


def _numbers_where_plain(frame):
    """Columns of text read as numbers where every present value is a plain number (no leading zero), as booleans
    where every one is True or False (any case)."""
    import pandas as pd

    for name in frame.columns:
        text = frame[name].dropna().astype(str).str.strip()
        numbers = pd.to_numeric(text, errors="coerce")
        if len(text) and numbers.notna().all() and not text.str.match(r"^[+-]?0\d").any():
            frame[name] = pd.to_numeric(frame[name])
        elif len(text) and text.str.lower().isin(["true", "false"]).all():
            flags = frame[name].str.strip().str.lower().map({"true": True, "false": False})
            frame[name] = flags.astype("boolean" if flags.isna().any() else bool)
    return frame


def write_table(frame, path: str | Path) -> Path:
    """``frame`` as a CSV (no index column; tab-separated for .tsv) or Parquet file, by the path's suffix."""
    path = Path(path)
    if _suffix(path) == ".csv":
        frame.to_csv(path, index=False, sep="\t" if path.suffix.lower() == ".tsv" else ",")
    else:
        frame.to_parquet(path, index=False)
    return path


class TableRows(ChunkedRows):
    """Records ``start`` … ``stop`` of a table file (default: all), read in chunks of ``chunk_rows`` records, each
    checked against the schema and encoded by ``codec``: what a table larger than memory gives the release (a sum
    of counts over chunks). Memory stays at one chunk's encoded rows (chunk_rows × D float32) whatever the file's
    length; ``rows[lo:hi]`` is a rank's contiguous share under torchrun, still on disk."""

    def __init__(self, path: str | Path, codec, *, clip: bool = False, chunk_rows: int = 100_000, start: int = 0,
                 stop: int | None = None, _total: int | None = None):
        path = Path(path)
        self._suffix = _suffix(path)
        if not path.exists():
            raise FileNotFoundError(f"table file {path} is missing")
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
        self.path, self.codec, self.clip, self.chunk_rows = path, codec, clip, int(chunk_rows)
        self._total = self._count() if _total is None else _total
        stop = self._total if stop is None else stop
        if not 0 <= start <= stop <= self._total:
            raise ValueError(f"records {start}..{stop} are not within the {self._total} records of {path}")
        self.start, self.stop = int(start), int(stop)
        self._rows = self.stop - self.start

    def __getitem__(self, rows: slice) -> "TableRows":
        """Records ``lo:hi`` of these, still on disk."""
        if not isinstance(rows, slice) or rows.step not in (None, 1):
            raise TypeError("records on disk are taken as a contiguous slice lo:hi")
        lo, hi, _ = rows.indices(len(self))
        return TableRows(self.path, self.codec, clip=self.clip, chunk_rows=self.chunk_rows, start=self.start + lo,
                         stop=self.start + max(lo, hi), _total=self._total)

    def _count(self) -> int:
        """The file's records: from a Parquet file's metadata, or by reading a CSV file once."""
        if self._suffix == ".parquet":
            import pyarrow.parquet as pq

            try:
                return pq.ParquetFile(self.path).metadata.num_rows
            except (OSError, ValueError) as err:
                raise ValueError(f"{self.path} is not a readable parquet table ({err})") from None
        return sum(len(frame) for frame in self._frames())

    def _frames(self):
        import pandas as pd

        schema = self.codec.schema
        sep = delimiter_of(self.path)
        if self._suffix == ".csv":
            check_header(self.path, sep)  # its own errors say what to do, and name no row
        try:
            with _reading_bar(self.path) as bar, open(self.path, "rb") as handle:
                if self._suffix == ".csv":
                    for chunk in pd.read_csv(handle, dtype=_text_columns(schema), skipinitialspace=True, sep=sep,
                                             chunksize=self.chunk_rows, index_col=False, **_markers(schema)):
                        bar.update(handle.tell() - bar.n)
                        yield _missing_markers(_no_trailing(chunk), schema)
                else:
                    import pyarrow.parquet as pq

                    parquet = pq.ParquetFile(handle)
                    share = bar.total / max(parquet.metadata.num_rows, 1)
                    for batch in parquet.iter_batches(batch_size=self.chunk_rows):
                        bar.update(min(bar.total - bar.n, round(batch.num_rows * share)))
                        yield batch.to_pandas()
        except (ValueError, OSError, pd.errors.ParserError) as err:
            raise unreadable(self.path, self._suffix, err) from None

    @property
    def shape(self) -> tuple[int, int]:
        return (self._rows, self.codec.dim)

    def __len__(self) -> int:
        return self._rows

    def checked_frames(self):
        """(offset, the chunk's records checked against the schema) per chunk, in order. A chunk that does not fit
        the schema is refused with the column and the rule it breaks: never a value, a count or a position of a
        private row."""
        from .schema import SchemaError

        offset = 0  # of the frame's first record in the file
        for frame in self._frames():
            lo, hi = max(self.start - offset, 0), min(self.stop - offset, len(frame))
            if lo < hi:
                try:
                    checked = self.codec.schema.check(frame.iloc[lo:hi], clip=self.clip)
                except SchemaError as err:
                    raise SchemaError(f"{self.path}: {err}") from None
                yield offset + lo - self.start, checked
            offset += len(frame)
            if offset >= self.stop:
                break

    def cell_chunks(self):
        """(offset, cells (c, C) int64 tensor: each record's cell in each column, by ``codec``) per chunk, in order
        (:meth:`checked_frames`)."""
        import torch

        for offset, checked in self.checked_frames():
            yield offset, torch.from_numpy(self.codec.cell_index(checked))

    def chunks(self):
        """(offset, encoded rows (c, D) float32 tensor) per chunk, in order (:meth:`cell_chunks`, one-hot)."""
        import torch

        for offset, cells in self.cell_chunks():
            yield offset, torch.from_numpy(self.codec.rows(cells.numpy()))

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
        return f"the {self._rows} rows of {self.path}" + ("" if self._rows == self._total else
                                                           f" from record {self.start}")



#: a file this large shows a bar each time it is read, where the caller asked (:func:`reading_shown`)
READ_BAR_BYTES = 64 << 20
_SHOW_READING = contextvars.ContextVar("swflow_show_reading", default=False)


@contextlib.contextmanager
def reading_shown(show: bool = True):
    """Within the block: a table file of READ_BAR_BYTES or more shows a bar (in bytes) each time it is read (a 48
    million-row CSV file takes minutes a pass). Scoped: restored after."""
    token = _SHOW_READING.set(bool(show))
    try:
        yield
    finally:
        _SHOW_READING.reset(token)


def _reading_bar(path: Path):
    from tqdm.auto import tqdm

    size = path.stat().st_size
    return tqdm(total=size, unit="B", unit_scale=True, desc=f"reading {path.name}", leave=False,
                disable=not (_SHOW_READING.get() and size >= READ_BAR_BYTES))


def record_count(table, codec, *, clip: bool = False) -> int:
    """The number of records of a file, a frame or an engine's table (public under replace-one)."""
    return len(TableRows(table, codec, clip=clip)) if isinstance(table, (str, Path)) else len(table)


def csv_text_as_pandas_reads(frame, schema):
    """A CSV file's text values (``frame``) as swflow's pandas reader reads them (:func:`read_table`), in memory:
    what an engine that read a CSV file as text hands to the schema's check."""
    import io

    import pandas as pd

    from .schema import Schema

    kept = Schema(tuple(c for c in schema.columns if c.name in frame.columns))
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    buffer.seek(0)
    return _missing_markers(_no_trailing(pd.read_csv(buffer, dtype=_text_columns(kept), skipinitialspace=True,
                                                     index_col=False, **_markers(kept))), kept)
