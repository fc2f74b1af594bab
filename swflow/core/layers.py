"""The layers of swflow and of the public models beside it, bottom first (docs/architecture.md draws them).

A module may import from its own layer and the layers below it, never from above; tests/test_layers.py checks
every import (inside functions too), and experiments/trace_generate.py counts a run's calls that climb.
"""
from __future__ import annotations

__all__ = ["LAYERS", "layer_of"]

#: (name, module prefixes): the first layer whose prefix matches a module is its layer
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("swflow.core", "swflow")),  # the shared vocabulary; "swflow" itself only names its lazy exports
    ("kernels", ("swflow.kernels",)),     # pure math on tensors
    ("io", ("swflow.io",)),               # files, datasets, splits, output folders
    ("privacy", ("swflow.privacy",)),     # sensitivity, noise, ledger, accountants, releases, read-back checks
    ("simulate", ("swflow.simulate",)),   # the one simulator loop, callbacks, communicators
    ("autoencoders", ("autoencoders",)),  # the public models: image autoencoders, their training, the image codecs
    ("methods", ("swflow.methods",)),     # what each method is: registry, plans, builders, generators
    ("tables", ("swflow.tables",)),       # schema, table codec and source, the particles of a table release
    ("evaluate", ("swflow.evaluate",)),   # metrics, pictures, animations
    ("sources", ("swflow.sources",)),     # where private records come from and which codec encodes them
    ("pipeline", ("swflow.pipeline",)),   # from settings and a source to a finished run; the Synthesizer
    ("app", ("swflow.app",)),             # the data owner's page: each step runs the swflow command it shows
    ("cli", ("swflow.cli",)),             # the swflow command
)


def layer_of(module: str) -> int:
    """The index in :data:`LAYERS` of ``module`` (a dotted name); len(LAYERS) for a module outside them."""
    best, rank = -1, len(LAYERS)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    return rank
