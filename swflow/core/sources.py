"""The words of the data path, shared by every layer: what a run asks to read (:class:`SourceRequest`), what a
source read (:class:`Records`) and the encoded private data a run is fitted on (:class:`PrivateData`).

Plain dataclasses with no behaviour of their own: the registries and :func:`swflow.sources.open_source` give them
their meaning, and a source or codec in a user's module builds them without importing anything above this layer.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["PrivateData", "Records", "SourceRequest"]


@dataclass(frozen=True)
class SourceRequest:
    """Which records a run reads and which codec encodes them, as the user asked, before anything is read.

    kind : a SOURCES name; location : the dataset's name, a path, or records in memory (an array, a DataFrame)
    codec : a CODECS name; checkpoint : the image codec's autoencoder (a shipped name or a .pt path)
    schema : the table codec's public schema (a Schema, its JSON object or a file); clip : clip values to it
    population : a declared sub-population of a dataset's private split; data_root : where a dataset's files are
    manifold : the user's statement of where rows live ('sphere' or 'ball'), None to read the file's declaration
    require_manifold : refuse rows whose domain neither the file nor the user states (a flow needs it)
    streamed : rows on disk may stay there, read in chunks (a release that is a sum over rows)
    """

    kind: str
    location: Any
    codec: str
    checkpoint: str | None = None
    schema: Any = None
    clip: bool = False
    population: str | None = None
    data_root: str | None = None
    manifold: str | None = None
    require_manifold: bool = False
    streamed: bool = False


@dataclass
class Records:
    """What a source read: the private ``values`` (images, a table, rows or a file of them), their labels, what
    the run may record about them (public facts only: a path, a dataset's name, a declared population) and, for
    rows, the domain their file declares."""

    values: Any
    labels: Any = None
    run_config: dict = field(default_factory=dict)
    manifold: str | None = None
    norm_bound: float | None = None
    notes: tuple[str, ...] = ()  # what the command tells its user about the source (no private value)


@dataclass
class PrivateData:
    """A run's private data, encoded: the rows the release reads, the codec that decodes the flow's particles,
    the records' labels, where the rows live, and what the run records about its source and codec. ``records``
    keeps the private images for an accounted adaptation of the decoder (None for other codecs)."""

    rows: Any
    codec: Any
    labels: Any = None
    manifold: str = "ball"
    norm_bound: float | None = None
    run_config: dict = field(default_factory=dict)
    records: Any = None
    notes: tuple[str, ...] = ()
