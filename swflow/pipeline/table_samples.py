"""A table run's samples written to a file, a million records at a time: 10⁸ records take the memory of one chunk.

The one way `generate`, `sample` and `verify` write (and make again) a samples file. Up to SAMPLE_CHUNK records are
one draw, ``syn.sample(n, seed=seed)``, written as :func:`~swflow.tables.files.write_table` writes a frame (the
files of earlier runs are made again byte for byte); more are drawn chunk by chunk, chunk i with the public seed
:func:`chunk_seed`, and appended (a CSV's lines, a Parquet file's row groups).
"""
from __future__ import annotations

from pathlib import Path

__all__ = ["SAMPLE_CHUNK", "write_samples", "chunk_seed"]

#: records drawn and written at once
SAMPLE_CHUNK = 1_000_000


def chunk_seed(seed: int, chunk: int) -> int:
    """The public seed of chunk ``chunk`` of a samples file drawn with ``seed`` (chunk 0: ``seed`` itself)."""
    return seed + 1_000_003 * chunk


def write_samples(syn, path: str | Path, n: int, *, seed: int, conditions: dict | None = None, rules: bool = True,
                  chunk: int | None = None, progress: bool = False) -> Path:
    """``n`` records of the fitted table Synthesizer ``syn`` into ``path`` (.csv or .parquet), drawn ``chunk`` at a
    time (default SAMPLE_CHUNK; module docstring); ``syn.rejected`` is then the share of all records drawn that broke a rule."""
    from ..tables.files import write_table

    path, chunk = Path(path), chunk or SAMPLE_CHUNK
    if n <= chunk:
        return write_table(syn.sample(n, seed=seed, conditions=conditions, rules=rules), path)
    from tqdm.auto import tqdm

    sizes = [min(chunk, n - start) for start in range(0, n, chunk)]
    writer, rejected = None, 0.0
    try:
        for i, size in enumerate(tqdm(sizes, desc=f"writing {n:,} records", unit="chunk", disable=not progress)):
            frame = syn.sample(size, seed=chunk_seed(seed, i), conditions=conditions, rules=rules)
            rejected += syn.rejected * size
            writer = _append(writer, frame, path)
    finally:
        if writer is not None and writer is not path:
            writer.close()
    syn.rejected = rejected / n
    return path


def _append(writer, frame, path: Path):
    """Append ``frame`` to ``path``: a CSV's lines (the header once), or a row group through a Parquet writer (made
    on the first chunk, its schema the first chunk's); returns the writer (a CSV's is the path)."""
    if path.suffix.lower() == ".csv":
        frame.to_csv(path, index=False, header=writer is None, mode="w" if writer is None else "a")
        return path
    import pyarrow as pa
    import pyarrow.parquet as pq

    if writer is None:
        table = pa.Table.from_pandas(frame, preserve_index=False)
        writer = pq.ParquetWriter(path, table.schema)
    else:
        table = pa.Table.from_pandas(frame, schema=writer.schema, preserve_index=False)
    writer.write_table(table)
    return writer
