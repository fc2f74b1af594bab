"""Tables in, tables out: ``Synthesizer(method, schema=...)`` on a private DataFrame.

    >>> syn = Synthesizer("dpswflow-hist", epsilon=1.0, delta=1e-9, schema=schema).fit(frame)
    >>> syn.sample(1000, seed=1)           # a DataFrame: the schema's columns, every row valid
    >>> syn.save("table.pt"); Synthesizer.load("table.pt")

The run is one path: the frame is checked against the public schema (source); the values that many records of a
sliced column share are named (:class:`~swflow.privacy.values.ValuesTarget`) and become cells of their own; the
columns with more fine cells than the pair tables can afford have their fine one-way histograms released, at a
share of the budget (:class:`~swflow.privacy.oneway.OneWayTarget`), and post-processing sets every column's cells
from them (:mod:`swflow.tables.resolution`; from public rows instead, where given, at no cost); the records are
encoded by the :class:`~swflow.tables.codec.TableCodec` with those cells (codec), their two-way tables on the column
pairs are released once (:class:`~swflow.privacy.marginals.MarginalTarget`: the sliced histogram on pair-block
slices; a named target's tables apart, at a share of their budget, where they are few: table_pairs.py), particles
are fitted to the released tables (:mod:`swflow.tables.flow`), and samples are decoded back to records, each cell by
its fine histogram. Only the releases touch private rows; one ledger composes them, and the
privacy report is every run's (privacy.json).
"""
from __future__ import annotations

import warnings
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import torch

from ..tables.codec import NUMERIC_BINS, TableCodec
from ..tables.flow import MarginalFlowConfig, fit_particles, sample_cells
from ..tables.shrinkage import shrunk_tables
from ..tables.resolution import RESOLUTION_SHARE
from ..tables.rules import keep_rules
from ..tables.schema import Schema
from ..tables.types import present
from .table_cells import RESOLUTIONS, TableCells, resolution_setting
from .table_pairs import TablePairs
from .table_choice import compose_choice, make_choice, restore_selection, schema_note
from .table_measurements import (PAIR_CHOICE, RECORD_COUNT, check_ledger, name_releases, named_ledger,
                                 noise_check, plan, read_numbers, released_numbers)
from .table_public import TablePublicRows
from .table_size import TableSize
from .table_units import TableUnits

__all__ = ["TableSynthesizer", "FORMAT", "METHODS", "MODEL", "POST_PROCESSING_NOTE", "RESOLUTIONS",
           "LITTLE_TO_LEARN_STDS", "warn_little_to_learn"]

FORMAT = "swflow-table-1"
#: what a table run's privacy report leaves out (a table run has no autoencoder: its codec comes from the schema)
TABLE_NOT_ACCOUNTED = ("Not accounted: settings (epsilon, cells, pairs, steps) chosen by looking at private data, and "
                       "any use of the private rows outside this run. The codec comes from the public schema (and "
                       "public rows, where given) only; nothing was trained on private rows.")
POST_PROCESSING_NOTE = ("records drawn from particles fitted to the run's released two-way tables (model.pt): "
                        "post-processing of that run's differentially private output, so its (epsilon, delta) covers "
                        "them and no further privacy was spent")
#: the methods that take a table: the sliced histogram, whose slices on a table are its column pairs
METHODS = ("dpswflow-hist",)


#: a release whose tables count fewer records than this many times the noise std on one count holds little
#: beyond the schema (txhousing's 23 cities at ε = 1 per city: 70 to 600 against 297; docs/tables-design.md)
LITTLE_TO_LEARN_STDS = 2.0


def warn_little_to_learn(records: float, noise_std: float, *, unit: bool) -> bool:
    """Warn where the released tables count fewer ``records`` (released: post-processing) than LITTLE_TO_LEARN_STDS
    times the noise std ``noise_std`` on each of their counts: samples then follow the noise about as much as the
    data, and may be no closer to it than uniform records over the schema. Whether it warned."""
    if noise_std > 0 and records < LITTLE_TO_LEARN_STDS * noise_std:
        who = "units (people)" if unit else "records"
        warnings.warn(f"the released tables count about {records:,.0f} records against noise of std {noise_std:,.0f} "
                      "on every count: the release holds little beyond the schema, and its samples may be no closer "
                      f"to the data than uniform records over it. Raise epsilon, or fit on more {who}",
                      stacklevel=4)
        return True
    return False


class TableSynthesizer(TableCells, TablePairs, TablePublicRows, TableSize, TableUnits):
    """fit once on a private table, then sample records as often as you like (module docstring)."""

    def __init__(self, method: str = "dpswflow-hist", *, schema: Schema | dict | str | Path,
                 epsilon: float | None = None, delta: float = 1e-9, noise_multiplier: float | None = None,
                 adjacency: str | None = None, count_noise: str | None = None, secure_noise: bool | None = None,
                 privacy_unit: str | None = None, max_rows_per_unit: int | None = None, clip: bool = False,
                 pairs: list[tuple[str, str]] | None = None, public=None, resolution: str | None = None,
                 resolution_share: float = RESOLUTION_SHARE, cells: int | dict | None = None,
                 numeric_bins: int = NUMERIC_BINS,
                 n_particles: int = 2000, steps: int = 1000, lr: float = 0.05, shrink: bool = True, seed: int = 0,
                 privacy_seed: int | None = None, repeated_values: bool | None = None, target: str | None = None):
        """``schema``: the public schema (a :class:`Schema`, its JSON object, or a JSON file); ``pairs``: the column
        pairs whose two-way tables are released (default: from the schema alone, every pair up to 32 columns, then
        neighbours: :func:`~swflow.tables.pairs.schema_pairs`); ``resolution``: where the columns' cells come from
        (RESOLUTIONS; default 'public' with public rows, else 'release': the fine one-way histograms at
        ``resolution_share`` of the budget, of what the repeated values leave where they are named); ``cells``: cells
        per column, for every column or ({name: cells}) for some (default: :func:`~swflow.tables.resolution.cells_of`:
        each category up to 256, or past it where the noise allows; else the rule); ``numeric_bins``: the schema's
        equal-width bins (resolution 'uniform'); ``n_particles``, ``steps``, ``lr``, ``shrink``: the particles'
        fit (:class:`~swflow.tables.flow.MarginalFlowConfig`; ``shrink=False`` fits the released tables as they are:
        for a classifier whose target depends only weakly on the other columns, docs/tables-design.md "Shrinkage"); the
        budget as for every method (``epsilon`` or ``noise_multiplier``, ``delta``, ``adjacency``, ``count_noise``,
        ``secure_noise``, ``privacy_seed``); ``privacy_unit``, ``max_rows_per_unit``: protect one unit of an identifier
        column and all of its rows, each unit counting as at most that many rows (swflow/privacy/units.py);
        ``repeated_values``: first name, privately, the values a sliced column's records share
        (:mod:`swflow.privacy.values`; a tenth of the budget and of δ), each then decoded as itself (default: on,
        but off under a privacy unit, where a unit names at most one value of a column and none reached the
        threshold on the benchmark's unit tables: docs/tables-design.md); ``target``: a column a classifier will
        predict, whose tables are fitted as released, never shrunk, and released apart where few (table_pairs.py)."""
        from ..privacy import PrivacySpec

        if method not in METHODS:
            raise ValueError(f"a table is synthesized by {' or '.join(METHODS)}, not {method!r}: its release is the "
                             "sliced histogram on pairs of columns")
        if not isinstance(schema, Schema):
            schema = Schema.from_json(schema) if isinstance(schema, dict) else Schema.read(schema)
        if len(schema.columns) < 2:
            raise ValueError(f"a table needs at least 2 columns (its release is two-way tables of column pairs); the "
                             f"schema declares {len(schema.columns)}: add a column, or release one column's values "
                             "as rows with swflow generate --data")
        self.method, self.schema = method, schema
        adjacency, count_noise, secure_noise = self._set_unit(
            privacy_unit, max_rows_per_unit, adjacency=adjacency, count_noise=count_noise, secure_noise=secure_noise,
            privacy_seed=privacy_seed)
        self.user_schema, self.schema = schema, self._released_schema(schema)
        if target is not None and target not in schema.names:
            raise ValueError(f"target names a column of the schema {schema.names}, got {target!r}")
        self.codec = TableCodec(self.schema, numeric_bins=numeric_bins)  # the released schema (a unit adds a column)
        if pairs is not None and public is not None:
            raise ValueError("give pairs, or public rows that choose them, not both")
        self.pairs, self.public = self._pairs(pairs, target), public
        self.pairs_chosen_by = schema_note(self, given=pairs is not None, target=target)
        self.resolution, self.resolution_share = resolution_setting(resolution, resolution_share, public)
        self._check_cells(cells)
        self._released_levels = None  # the resolution release (noisy tree counts), when one was made
        self.repeated_values, self._atoms = self._repeated_values(repeated_values), {}  # {column: its atoms}
        self.privacy = PrivacySpec(epsilon=epsilon, delta=delta, noise_multiplier=noise_multiplier,
                                   adjacency=adjacency, count_noise=count_noise, secure_noise=secure_noise)
        self.clip, self.privacy_seed = clip, privacy_seed
        self.flow = MarginalFlowConfig(n_particles=n_particles, steps=steps, lr=lr, seed=seed, shrink=shrink,
                                       target=target)
        self._particles = self._report = self._counts = None

    # -- fit ---------------------------------------------------------------------------------------
    def fit(self, table, *, progress: bool | str = False, sharded: bool = False,
            engine: str | None = None) -> "TableSynthesizer":
        """Spend the budget once on the private ``table``: a DataFrame, a CSV / Parquet file read in chunks (memory
        flat in its length), files (a glob, a URI) or a DuckDB relation or Spark DataFrame that an engine counts where
        they are (``engine`` 'pandas', 'duckdb' or 'spark'; default: swflow.tables.engines.choose_engine).
        ``progress``: True shows the fit's bar; 'auto' only when its first steps say it takes over a minute (with
        an estimate), for a caller that wants quiet unless it is long. ``sharded``: under torchrun (an initialized
        torch.distributed group), each rank counts its contiguous share of the records, the exact tables are summed
        over the ranks and rank 0 draws the noise: every rank holds the release one process makes on all the
        records, and fits the same particles to it (a wide table's pairs are then the schema's, never chosen)."""
        from ..tables.engines import engine_table

        if self._particles is not None:
            raise RuntimeError("this Synthesizer is fitted already; fitting again would spend the budget twice — "
                               "make a new one")
        self.engine, table = engine_table(table, self.user_schema, engine=engine, clip=self.clip, unit=self.unit,
                                          sharded=sharded)
        n = self._release(table, sharded=sharded)
        self._note_measurements(plan(self, n), fitted=True)
        self._particles = self._fit_to_release(progress=progress, warn=True)
        return self

    def _release(self, table, *, sharded: bool) -> int:
        """Every release of the private rows ``table`` (as engine_table gives it), composed in one report; the n
        every later step reads."""
        from ..privacy import NoiseSource, compose
        from .distributed import rank_share
        from ..sources import SourceRequest, open_source
        from ..tables.files import record_count
        from ..tables.source import TableSource

        table = self._unit_split(table, sharded=sharded)  # a unit's rows weighted; its identifiers kept out
        records = record_count(table, self.codec, clip=self.clip)  # private under add-remove: counted, released
        share = rank_share(records) if sharded else (0, records, 1)
        noise = NoiseSource(self.privacy_seed, secure=self.privacy.secure_noise)
        n, spent = self._public_size(self._records_mass(table, records), noise, sharded=sharded)  # later steps read
        released = self._plan_cells(n, sharded=sharded)
        fine_cal, calibrations, chosen = self._calibrate(n, released, spent)
        fine = self._release_cells(table, n, released, fine_cal, noise, share) if released else None
        table = self._spread_units(table)  # a unit's weight for the pair tables, now that the cells are set
        data = open_source(SourceRequest("table", table, "table", clip=self.clip),
                           codec=TableSource(self.codec, clip=self.clip))
        rows = data.rows
        make_choice(self, rows, n, noise, chosen)
        run_config = self._run_config(n, released)
        if sharded:
            run_config["world_size"] = share[2]
        self._report = replace(self._release_pairs(rows, n, calibrations, noise, share, sharded=sharded,
                                                   run_config=run_config), not_accounted=TABLE_NOT_ACCOUNTED)
        del rows, data
        if fine is not None and self.privacy.private:
            self._report = compose(self._report, self._fine_events(fine), target_epsilon=self.privacy.epsilon,
                                   note=self._resolution_note(fine))
        if self.privacy.private and (fine is not None or self._target_share()):
            self._report = self._report.with_notes(budget_split=self._split_note(fine is not None))
        self._compose_size(spent)
        compose_choice(self, chosen)
        self._report = self._state_unit(self._report)
        return n

    def _note_measurements(self, planned, *, fitted: bool = False) -> None:
        """Say in the report what each release counts and what a read-back can test of it (derived from the run's
        settings, never taken from a file); ``fitted``: the ledger this fit made is named after them."""
        if self._report.private:
            if fitted:
                self._report = name_releases(self._report, planned)
            self._report = self._report.with_notes(
                measurements="; ".join(f"{m.name}: {m.counts}" for m in planned), noise_check=noise_check(planned))

    def _fit_to_release(self, *, progress: bool | str = False, warn: bool = False) -> list:
        """The particles fitted to the released tables (shrunk unless ``shrink=False``, swflow.tables.shrinkage), from
        public things only: the released counts, the report's σ and n, the settings. Deterministic: load() refits
        them rather than read particles a file could have replaced. ``warn``: say so where the noise swamps what
        the tables count (:func:`warn_little_to_learn`), or where no table shows a link beyond it (table_pairs.py)."""
        from ..privacy.marginals import split_tables
        from ..simulate.threads import step_threads, torch_threads

        sizes, report = self.codec.sizes, self._report
        target_column = None if self.flow.target is None else self.schema.names.index(self.flow.target)
        targets = split_tables(self._counts, sizes, self.pairs)
        mass = self._tables_mass(targets, report.dataset_size)
        if warn and report.private and not warn_little_to_learn(mass, report.noise_std, unit=self.unit is not None):
            self._warn_no_links(targets, mass)
        if report.private and self.flow.shrink:
            priors = [None if p is None else torch.from_numpy(p) for p in self.codec.priors()]
            if self.unit is not None:  # a unit's rows: never toward each class alike (samples weight a class by it)
                priors[-1] = None
            shrunk = shrunk_tables(targets, sizes, self.pairs, noise_std=report.noise_std, dataset_size=mass,
                                   priors=priors)
            targets = [raw if target_column in pair else table for raw, table, pair in zip(targets, shrunk, self.pairs)]
        # small steps on one thread, restored after (a busy machine's spinning OpenMP threads: 3-25x slower from Python)
        with torch_threads(step_threads(self.flow.n_particles, self.codec.dim)):
            return fit_particles(targets, sizes, self.pairs, dataset_size=mass, config=self.flow,
                                 target=target_column, progress=progress)

    def _run_config(self, n: int, released: list[int]) -> dict:
        return {"method": self.method, "table": True, "dataset_size": n, "columns": self.schema.names,
                "pairs": [[self.schema.names[i], self.schema.names[j]] for i, j in self.pairs],
                "pairs_chosen_by": self.pairs_chosen_by, "resolution": self.resolution,
                "privacy_unit": self._unit_state(),
                "resolution_columns": [self.schema.names[j] for j in released],
                "repeated_values_columns": [self.schema.names[j] for j in self._atoms],
                "resolution_share": self.resolution_share if released else 0.0,
                "cells_per_column": getattr(self, "_cells_m", None), "cells": self.codec.sizes,
                "numeric_bins": self.codec.numeric_bins, "clipped": _clipped(self.clip), **asdict(self.flow)}

    # -- use ---------------------------------------------------------------------------------------
    def _fitted(self):
        if self._particles is None:
            raise RuntimeError("fit the Synthesizer first: fit(table)")

    def sample(self, n: int, *, seed: int = 0, conditions: dict | None = None, rules: bool = True, spark=None):
        """``n`` new records (a DataFrame of the schema's columns, every row valid): post-processing of the release.
        ``conditions`` ({column: value}, e.g. ``{"sex": "Female"}``): every record holds those values, the others follow
        the particles' law given their cells (a value the schema refuses, or the release gives no support, is refused).
        The schema's rules hold in every record (``rules=False``: none is kept): records that break one are drawn
        again, the share drawn again kept in ``self.rejected``. ``spark`` (a session): a Spark DataFrame of the records
        ``swflow sample`` writes, drawn on the executors chunk by chunk (swflow.pipeline.spark_samples)."""
        if spark is not None:
            from .spark_samples import sample_dataframe

            return sample_dataframe(self, n, spark=spark, seed=seed, conditions=conditions, rules=rules)
        import pandas as pd

        self._fitted()
        cells, values = {}, {}
        for name, value in (conditions or {}).items():
            if name not in self.user_schema.names:
                raise ValueError(f"a condition names a column of the schema {self.user_schema.names}, got {name!r}")
            j = self.schema.names.index(name)
            try:  # the value as the schema reads it (a declared category, a number inside the bounds)
                checked = Schema((self.schema.columns[j],)).check(pd.DataFrame({name: [value]}))[name]
            except ValueError as err:
                raise ValueError(f"condition {name} = {value!r} is not a value the schema allows: "
                                 f"{str(err).split('; pass --clip')[0]}") from None  # a condition is never clipped
            places = self.schema.columns[j].decimals
            if places is not None and round(float(checked.iloc[0]), places) != float(checked.iloc[0]):
                raise ValueError(f"condition {name} = {value!r}: {name} is written with {places} decimal places")
            cells[j], values[name] = int(self.codec.cells[j].index(checked)[0]), checked.iloc[0]

        def draw(count: int, draw_seed: int):
            drawn = self._reweighted(lambda k, s: sample_cells(self._particles, k, seed=s, conditions=cells), count,
                                     draw_seed)
            frame = self.codec.decode_cells(drawn.numpy(), seed=draw_seed)[self.user_schema.names]
            for name, value in values.items():  # a cell may hold several values: every record holds the asked one
                frame[name] = present(self.schema.columns[self.schema.names.index(name)],
                                      np.array([value] * count, dtype=object))
            return frame

        kept = self.user_schema if rules else replace(self.user_schema, rules=())
        frame, self.rejected = keep_rules(draw, n, kept, seed=seed)  # the share that broke a rule
        return frame

    def privacy_report(self):
        """The :class:`~swflow.privacy.PrivacyReport` of the fit (``.to_json()`` for privacy.json)."""
        self._fitted()
        return self._report.with_notes(post_processing=POST_PROCESSING_NOTE)

    # -- persistence -------------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Everything released (the noisy tables and levels), the settings, the report and the fitted particles (read
        back only where vouched for: table_particles.py); no private row; loads with ``weights_only=True``."""
        self._fitted()
        path = Path(path)
        torch.save({"format": FORMAT, "method": self.method, "schema": self.user_schema.to_json(),
                    "privacy": asdict(self.privacy), "clip": self.clip, "pairs": [list(p) for p in self.pairs],
                    "numeric_bins": self.codec.numeric_bins, "flow": asdict(self.flow),
                    "report": self._report.to_json(), "measurements": released_numbers(self),
                    "particles": self._particles, "resolution": self._resolution_state(), "unit": self._unit_state()},
                   path)
        return path

    @classmethod
    def load(cls, path: str | Path, *, blob: dict | None = None, progress: bool | str = False,
             stored: bool = False) -> "TableSynthesizer":
        """A saved table Synthesizer, its claim re-derived from the ledger and the released tables tested against it
        (:func:`swflow.privacy.verify.verify_tables`), refused when anything disagrees; its particles refitted to
        the release, or, with ``stored`` (the caller vouches for the file: table_particles.py), read from it."""
        from ..io.hdf5 import load_tensors
        from ..privacy import PrivacyReport
        from ..privacy.units import ROWS_COLUMN
        from ..privacy.verify import ClaimMismatch, verify_report, verify_tables
        from .table_particles import stored_particles

        blob = blob if blob is not None else load_tensors(path, what="saved Synthesizer")
        try:
            if blob.get("format") != FORMAT:
                raise ValueError(f"format {blob.get('format')!r}, not {FORMAT}")
            privacy, unit = dict(blob["privacy"]), blob.get("unit")  # files of earlier releases: one row
            names = Schema.from_json(blob["schema"]).names + [ROWS_COLUMN] * (unit is not None)  # ignored: none
            syn = cls(blob["method"], schema=blob["schema"], clip=blob["clip"], numeric_bins=blob["numeric_bins"],
                      privacy_unit=None if unit is None else unit["column"],
                      max_rows_per_unit=None if unit is None else unit["max_rows_per_unit"],
                      pairs=[(names[i], names[j]) for i, j in blob["pairs"]],
                      **{k: privacy[k] for k in ("epsilon", "delta", "noise_multiplier", "adjacency", "count_noise",
                                                 "secure_noise")}, **blob["flow"])
            numbers = read_numbers(blob)
            report = named_ledger(PrivacyReport.from_json(blob["report"]), numbers, str(path))
            verify_report(report, source=str(path))
            syn._restore_unit(report, str(path))
            size = syn._restore_size(numbers.get(RECORD_COUNT), report, str(path))
            restore_selection(syn, numbers.get(PAIR_CHOICE), report.dataset_size, str(path))
            # files of earlier releases had the schema's equal-width bins only
            syn._restore_cells(blob.get("resolution", {"mode": "uniform", "share": RESOLUTION_SHARE,
                                                       "cells_per_column": None, "columns": []}), numbers, report,
                               str(path))
            counts = syn._restore_pairs(numbers, str(path))  # one release, or the target's tables apart
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
            if isinstance(err, ClaimMismatch):
                raise
            raise ClaimMismatch(f"{path} is not a readable saved table Synthesizer ({err}); fit again") from None
        planned = check_ledger(syn, report, str(path))
        syn._report, syn._counts, syn._stored = syn._state_unit(report), counts, blob.get("particles")
        if report.private:  # each table at its own σ (the target's apart: table_pairs.py), as the ledger says
            verify_tables(report, counts, syn.codec.sizes, syn.pairs, source=str(path), size=size,
                          unit_weighted=syn.unit is not None, noise_stds=syn._table_noise(str(path)))
        syn._note_measurements(planned)
        syn._particles = (stored_particles(syn._stored, syn.codec.sizes, str(path)) if stored
                          else syn._fit_to_release(progress=progress))
        return syn


def _clipped(clip: bool) -> str:
    """What privacy.json says of values outside the schema's bounds."""
    return ("clipped to the schema's bounds (--clip); how many were is private and not published" if clip else
            "none: a value outside the schema's bounds stops the run")


MODEL = "model.pt"  # a table run's saved Synthesizer: the released tables, the fitted particles, the report
