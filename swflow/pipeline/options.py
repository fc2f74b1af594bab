"""Command-line options, TOML keys and keyword arguments derived from a configuration dataclass.

A field takes part when its metadata has a ``help`` text (and optionally ``choices``): the option is
``--field-name``, its type the field's annotation, its default the field's default. So the help
text, the type and the default are written once, beside the field, for argparse, the TOML tables
and :class:`swflow.pipeline.estimator.Synthesizer` alike.
"""
from __future__ import annotations

import argparse
from dataclasses import MISSING, Field, fields

__all__ = ["option_fields", "field_type", "add_options", "values"]

_TYPES = {"int": int, "float": float, "str": str, "bool": bool}


def field_type(f: Field) -> type | None:
    """The plain type of a field's annotation (``float | None`` -> float), or None when it has none."""
    return _TYPES.get(str(f.type).split("|")[0].strip())


def option_fields(cls) -> list[Field]:
    """The fields of dataclass ``cls`` that are options (they carry a help text)."""
    return [f for f in fields(cls) if "help" in f.metadata]


def add_options(group, cls, *, defaults: dict | None = None, notes: dict | None = None) -> None:
    """Add ``--field-name`` for every option field of ``cls`` to an argparse group.

    ``defaults`` overrides a field's default for the command line (e.g. None = resolved later);
    ``notes`` appends a command-line remark to a field's help."""
    defaults, notes = defaults or {}, notes or {}
    for f in option_fields(cls):
        flag = "--" + f.name.replace("_", "-")
        help_text = f.metadata["help"] + (f" {notes[f.name]}" if f.name in notes else "")
        default = defaults.get(f.name, f.default)
        kind = field_type(f)
        if kind is bool:
            group.add_argument(flag, action="store_true", default=default, help=help_text)
            continue
        if kind is None:
            raise TypeError(f"{cls.__name__}.{f.name}: no command-line type for {f.type!r}")
        if default is not MISSING and default is not None:
            help_text += " (default %(default)s)"
        group.add_argument(flag, type=kind, choices=f.metadata.get("choices"),
                           default=None if default is MISSING else default, help=help_text)


def values(cls, namespace: argparse.Namespace | dict, **overrides) -> dict:
    """Keyword arguments for ``cls`` from parsed options (a Namespace or a dict), with overrides. An option left
    None whose field has a default of its own (one that ``add_options`` was told to leave unset, so that a caller
    can tell a typed value from the default) takes the field's default."""
    source = vars(namespace) if isinstance(namespace, argparse.Namespace) else namespace
    unset = {f.name for f in option_fields(cls) if source.get(f.name) is None and f.default not in (MISSING, None)}
    return {**{f.name: source[f.name] for f in option_fields(cls) if f.name in source and f.name not in unset},
            **overrides}
