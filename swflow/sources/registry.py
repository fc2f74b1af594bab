"""The registries of sources and codecs, and :func:`open_source`, the one function every run's data goes through.

A **codec** is the public model between records and the flow's rows, fitted on public data only. It is built by a
factory ``codec(request) -> codec`` and offers:

    name : str                     what privacy.json records as the run's codec
    encode(records) -> rows        (n, d) tensor, or ChunkedRows read in chunks (the release is a sum over rows)
    decode                         rows (m, d) -> records (m, ...), or None where the rows are the records
    describe() -> dict             public facts a run records about the codec (a checkpoint's name and sha256)
    manifold, norm_bound           where its rows live ('sphere' or 'ball'; None for a source's own declaration)
    keeps_records (optional)       True: the private records stay at hand (an accounted adaptation of the decoder)

A **source** reads the private records: ``source(request, codec) -> Records``. It may read the codec's public
metadata (an image size, a split manifest, a schema), never the other way round.

Both registries map a name to ``"module:attribute"``, imported when first used, so a source or codec defined in a
user's module is registered without editing swflow/ (tests/test_architecture.py does so).
"""
from __future__ import annotations

from importlib import import_module

from ..core.sources import PrivateData, Records, SourceRequest

__all__ = ["CODECS", "SOURCES", "PrivateData", "Records", "SourceRequest", "codec_for", "open_source",
           "register_codec", "register_source"]

#: the kinds of private data: name -> "module:function(request, codec) -> Records"
SOURCES: dict[str, str] = {
    "dataset": "swflow.sources.images:dataset_source",  # a named dataset's private split
    "images": "swflow.sources.images:images_source",    # a user's images: a folder, an array file, an array
    "rows": "swflow.sources.rows:rows_source",          # rows already in the flow's space: .npy/.npz/.h5, an array
    "table": "swflow.tables.source:table_source",       # a table with a public schema: CSV, Parquet, a DataFrame
}
#: the codecs: name -> "module:factory(request) -> codec"
CODECS: dict[str, str] = {
    "autoencoder": "autoencoders.codec:autoencoder_codec",        # an image autoencoder trained on public images
    "nearest-public": "autoencoders.codec:nearest_public_codec",  # its encoder; decodes to the nearest public image
    "identity": "swflow.sources.rows:identity_codec",             # rows that are already encoded
    "table": "swflow.tables.source:table_codec",                  # the table codec of a public schema
}


def register_source(name: str, target: str) -> None:
    """Register a kind of private data: ``target`` is "module:function", called as function(request, codec)."""
    SOURCES[name] = _checked(name, target)


def register_codec(name: str, target: str) -> None:
    """Register a codec: ``target`` is "module:factory", called as factory(request) and returning a codec."""
    CODECS[name] = _checked(name, target)


def _checked(name: str, target: str) -> str:
    if not name or ":" not in target:
        raise ValueError(f"register {name!r} as 'module:attribute', got {target!r}")
    return target


def _resolve(table: dict[str, str], what: str, name: str):
    if name not in table:
        raise ValueError(f"unknown {what} {name!r}; registered: {', '.join(sorted(table))}")
    module, _, attribute = table[name].partition(":")
    return getattr(import_module(module), attribute)


def codec_for(request: SourceRequest):
    """The codec ``request`` names, built by its registered factory from public data only."""
    return _resolve(CODECS, "codec", request.codec)(request)


def open_source(request: SourceRequest, *, codec=None) -> PrivateData:
    """The one way a run's private data is read: the codec (``codec``, or the one ``request`` names), the
    source's records, encoded by the codec. Every entry point (swflow generate, the Synthesizer, torchrun)
    and every kind of data (images, rows, HDF5 streams, tables) comes through here."""
    codec = codec_for(request) if codec is None else codec
    records = _resolve(SOURCES, "source", request.kind)(request, codec)
    rows = codec.encode(records.values)
    manifold = records.manifold or codec.manifold
    norm_bound = records.norm_bound if records.norm_bound is not None else codec.norm_bound
    keep = records.values if getattr(codec, "keeps_records", False) else None
    return PrivateData(rows=rows, codec=codec, labels=records.labels, manifold=manifold, norm_bound=norm_bound,
                       run_config={**codec.describe(), **records.run_config}, records=keep,
                       notes=records.notes)
