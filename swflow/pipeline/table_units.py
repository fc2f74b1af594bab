"""A table run whose privacy unit is an identifier column's unit and all of its rows (swflow/privacy/units.py).

The part of :class:`~swflow.pipeline.tables.TableSynthesizer` that reads the unit column once (to group rows: it is
never synthesized, written or shown), weights each unit's rows (to at most k for the count; by their spread for
the trees and the pair tables), hands the counting releases those weights and the sensitivity they give, and states the unit in the report; and, on load, checks that the saved
settings, the report's unit and its ledger agree. Without a unit, the report says its unit is one row.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from ..privacy.units import ROWS_COLUMN

__all__ = ["TableUnits", "UNIT_NOTE"]

UNIT_NOTE = ("privacy unit: {words}. The count of records counts a unit's rows with weight min(1, {k} / its "
             "rows), so one unit adds at most {k} to it; the fine trees and the pair tables each with the largest "
             "weight that keeps the unit's move of all of that release's G partitions (the trees' levels, or the "
             "tables) within {k}·√G in ℓ2, min(1, {k}·√G / ‖H‖) (H: its rows' counts in their nodes or cells, "
             "which are public; a unit whose rows spread keeps more of them): every release's sensitivity is {k} x "
             "a row's. The repeated-values release, where made, names at most {m} "
             f"value(s) of a column a unit; the pair tables hold one more column, {ROWS_COLUMN!r} (each row's class "
             "of what it stands for among its unit's rows, 1 / its weight, released like any column), which samples "
             "read to undo the down-weighting and drop; add-remove adjacency of units (the number of units and of "
             "rows is private: dataset_size is the released weighted count). The noise is the continuous Gaussian "
             "from the OS CSPRNG (counts moved by up to {k} are outside the discrete Gaussian's account). The "
             "identifier column is read to group rows only: it is not synthesized, and no file holds it")


class TableUnits:
    """Mixed into TableSynthesizer: ``self.unit`` (a UnitBound or None) and, during a fit only, each row's unit."""

    def _set_unit(self, privacy_unit, max_rows_per_unit, *, adjacency, count_noise, secure_noise, privacy_seed):
        """Check the unit settings against the schema and the budget's; return the (adjacency, count noise, secure
        noise) the run uses: add-remove of units, the continuous Gaussian from the OS CSPRNG, where a unit is named
        (each refused when asked otherwise), else the given ones or the defaults."""
        from ..privacy.units import DEFAULT_ROWS_PER_UNIT, UnitBound

        self.unit, self._unit_rows = None, None
        if privacy_unit is None:
            if max_rows_per_unit is not None:
                raise ValueError("max_rows_per_unit bounds the rows of a privacy unit: name its column too "
                                 "(privacy_unit='customer_id', --privacy-unit COLUMN)")
            return adjacency or "replace-one", count_noise or "discrete-gaussian", bool(secure_noise)
        self.unit = UnitBound(privacy_unit, DEFAULT_ROWS_PER_UNIT if max_rows_per_unit is None else max_rows_per_unit)
        if privacy_unit in self.schema.names:
            raise ValueError(f"the privacy unit {privacy_unit!r} is an identifier, never synthesized: leave it out of "
                             "the schema (the run reads it to group rows only)")
        if adjacency not in (None, "add-remove"):
            raise ValueError(f"a privacy unit is protected by adding or removing it with all of its rows (the number "
                             f"of units is private): adjacency 'add-remove', not {adjacency!r}")
        if count_noise not in (None, "gaussian"):
            raise ValueError("a privacy unit moves a count by up to max_rows_per_unit, which the discrete Gaussian's "
                             "account (counts moved by one each) does not cover: its counts take count_noise="
                             "'gaussian', drawn from the OS CSPRNG")
        if secure_noise is False or privacy_seed is not None:
            raise ValueError("a privacy unit's noise is drawn from the OS CSPRNG, which no seed reproduces: leave "
                             "secure_noise and privacy_seed unset")
        return "add-remove", "gaussian", True

    def _repeated_values(self, asked: bool | None) -> bool:
        """Whether the run names repeated values: as asked, else on for rows and off under a unit (a unit names at
        most one value of a column, each picked among all of its own: on the benchmark's unit tables none ever
        reached the threshold, docs/tables-design.md)."""
        if asked not in (None, True, False):
            raise ValueError(f"repeated_values is True, False or None (its default), got {asked!r}")
        return self.unit is None if asked is None else asked

    def _released_schema(self, schema):
        """The schema the releases count: ``schema``, and under a unit one more column, ROWS_COLUMN (each row's class
        of its unit's rows: public categories), so that samples can undo the down-weighting (:meth:`_reweighted`)."""
        from ..privacy.units import row_class_labels
        from ..tables.schema import Column, Schema

        if self.unit is None:
            return schema
        if ROWS_COLUMN in schema.names:
            raise ValueError(f"{ROWS_COLUMN!r} is the name a unit run gives a column of its own: rename that column")
        rows = Column(ROWS_COLUMN, "categorical", categories=tuple(row_class_labels(self.unit.max_rows)))
        return Schema((*schema.columns, rows), schema.rules, schema.ignored)  # ignored columns stay ignored

    @property
    def _contribution(self) -> int:
        """The most one privacy unit adds to a released count: k, or 1 for a row."""
        return 1 if self.unit is None else self.unit.max_rows

    def _unit_split(self, table, *, sharded: bool):
        """``table`` without its unit column (a file is read whole: the unit's rows may lie anywhere in it), each
        row's unit and weight kept for the fit's releases (``self._unit_rows``); ``table`` itself without a unit."""
        from ..privacy.units import no_unit_column, unit_codes, unit_weights
        from ..tables.counted import EngineTable
        from ..tables.files import read_table

        if self.unit is None:
            return table
        if sharded:
            raise ValueError("a privacy unit is not built for torchrun (a unit's rows may lie on several ranks): run "
                             "the table in one process")
        if isinstance(table, EngineTable):  # the engine weights each unit's rows where they are (tables/spark.py)
            if self.repeated_values:
                raise ValueError("under a privacy unit the repeated values are named from each unit's rows in their "
                                 "order, which an engine does not keep: leave repeated_values off (its default "
                                 "under a unit), or count the table with engine='pandas'")
            return table
        frame = read_table(table, schema=self.schema) if isinstance(table, (str, Path)) else table
        if self.unit.column not in frame.columns:
            raise ValueError(no_unit_column(self.unit.column))
        codes = unit_codes(frame[self.unit.column])
        self._unit_rows = codes, unit_weights(codes, max_rows=self.unit.max_rows)
        return self._with_classes(frame.drop(columns=[self.unit.column]))

    def _public_classes(self, public):
        """Public rows under a unit: without the unit's column, if they hold one (an identifier, never read), and
        ROWS_COLUMN set to its first class. Public rows carry no class (their units' weights would be the private
        run's), and none is read: the class column's cells are its public categories, and its tables with every
        column are released whatever the public rows show (table_public._choose_pairs). Without a unit: as given."""
        from ..privacy.units import row_class_labels

        if self.unit is None:
            return public
        public = public.drop(columns=[self.unit.column], errors="ignore")
        return public.assign(**{ROWS_COLUMN: row_class_labels(self.unit.max_rows)[0]})

    def _with_classes(self, frame):
        """``frame`` with ROWS_COLUMN set to each row's class of its weight (privacy.units.row_classes)."""
        from ..privacy.units import row_class_labels, row_classes

        labels = np.array(row_class_labels(self.unit.max_rows), dtype=object)
        return frame.assign(**{ROWS_COLUMN: labels[row_classes(self._unit_rows[1].numpy())]})

    def _spread_units(self, frame):
        """Once the cells are set (public): each unit's weight for the pair tables, the largest that keeps its
        move of all of them within k·√K (privacy.units.spread_weights: more rows of a unit whose rows spread over
        many cells, at the same noise), and ROWS_COLUMN its class; ``frame`` as it is without a unit."""
        from ..privacy.units import spread_weights

        if self.unit is None or self._unit_rows is None:  # no unit, or an engine that weights it where it counts
            return frame
        cells = self.codec.cell_index(self.schema.check(frame, clip=self.clip))
        codes = self._unit_rows[0]
        self._unit_rows = codes, spread_weights(codes, cells, self.pairs, max_rows=self.unit.max_rows,
                                                constant=len(self.schema.columns) - 1)
        return self._with_classes(frame)

    def _records_mass(self, table, records: int) -> float:
        """What the count of records counts: the rows, or their weights' sum under a unit (an engine's sum of it)."""
        if self.unit is None:
            return records
        return table.unit_mass() if self._unit_rows is None else float(self._unit_rows[1].sum())

    def _weighted(self, target):
        """``target`` (a count release) counting each row with its unit's weight, at the unit's sensitivity (an
        engine's rows are weighted by the engine: swflow/tables/spark.py)."""
        if self.unit is None:
            return target
        return target.weighted(None if self._unit_rows is None else self._unit_rows[1], self.unit.max_rows)

    def _trees_weighted(self, target, cells: torch.Tensor):
        """``target`` (the fine trees' release, of the records' fine ``cells`` (m, C)) counting each row with its
        unit's weight by its spread over the trees' levels (privacy.units.tree_weights), at the unit's sensitivity."""
        from ..privacy.units import tree_weights

        if self.unit is None:
            return target
        if self._unit_rows is None:  # an engine weights its rows where it counts them
            return target.weighted(None, self.unit.max_rows)
        weights = tree_weights(self._unit_rows[0], cells[:, target.columns], target.trees,
                               max_rows=self.unit.max_rows)
        return target.weighted(weights, self.unit.max_rows)

    def _tables_mass(self, tables, size: int) -> int:
        """What the released pair ``tables`` count in all: the released size, or under a unit (whose tables weigh
        a unit's rows by their spread, not as the size did) their totals pooled at inverse variance (a table of c
        cells sums noise of variance c·σ²). Post-processing of the release."""
        if self.unit is None:
            return size
        totals = torch.stack([table.sum() for table in tables]).to(torch.float64)
        precisions = torch.tensor([1.0 / table.numel() for table in tables], dtype=torch.float64)
        return max(1, round(float((precisions * totals).sum() / precisions.sum())))

    #: records drawn per record kept when samples undo a unit's down-weighting (sampling importance resampling)
    POOL = 8

    def _reweighted(self, draw_cells, count: int, seed: int):
        """``count`` records' cells drawn by ``draw_cells(n, seed)`` ((n, C) int64): as they are without a unit;
        under one, drawn from POOL × ``count`` in proportion to what each stands for among its unit's rows
        (privacy.units.class_factors of its ROWS_COLUMN class, the last column), so that samples follow the rows'
        law rather than the weighted one the release counted."""
        from ..privacy.units import class_factors

        if self.unit is None:
            return draw_cells(count, seed)
        pool = draw_cells(self.POOL * count, seed)
        drawn = (class_factors() * self._released_classes())[pool[:, -1]]
        if not float(drawn.sum()) > 0:  # the pool holds no class the release reweights: the weighted law, said
            warnings.warn("the released tables give no class of a unit's rows that samples can draw at its factor "
                          "(few units for the noise): these samples follow the unit-weighted law the release "
                          "counted, each unit's rows weighing at most k", stacklevel=3)
            return pool[:count]
        chosen = torch.multinomial(drawn, count, replacement=True, generator=torch.Generator().manual_seed(seed))
        return pool[chosen]

    def _released_classes(self):
        """(ROW_CLASSES,) float64, 1 for the classes of a unit's rows that samples draw at their factor, else 0
        (privacy.units.drawn_classes). Post-processing of the release."""
        from ..privacy.units import drawn_classes

        return drawn_classes(*self._class_counts())

    def estimated_rows(self) -> int:
        """The number of rows the release tells of (post-processing): the released size without a unit; under one
        (the rows' number is private), each drawn class's pooled count times what a row of it stands for
        (privacy.units.class_factors): what the samples' law stands for, and so the default number of samples."""
        from ..privacy.units import class_factors, drawn_classes

        if self.unit is None:
            return self._report.dataset_size
        counts, noise_std = self._class_counts()
        drawn = drawn_classes(counts, noise_std)
        return max(1, round(float((counts.clamp(min=0) * class_factors() * drawn).sum())))

    def _class_counts(self):
        """(each class's count of a unit's rows, its noise std): every (column, rows) table's margin, pooled at
        inverse variance (a table of c cells per class adds noise of variance c·σ² to it)."""
        from ..privacy.marginals import split_tables

        sizes, last = self.codec.sizes, len(self.codec.sizes) - 1
        sigma = self._report.noise_std or 0.0
        margins, precisions = [], []
        for (i, j), table in zip(self.pairs, split_tables(self._counts, sizes, self.pairs)):
            if j == last:
                margins.append(table.sum(dim=0))
                precisions.append(1.0 / max(sizes[i] * sigma ** 2, 1e-300))
        weights = torch.tensor(precisions, dtype=torch.float64)
        pooled = (weights[:, None] * torch.stack(margins)).sum(dim=0) / weights.sum()
        return pooled, float(weights.sum() ** -0.5)

    def _values_per_unit(self) -> int:
        return 1 if self.unit is None else self.unit.max_values

    def _unit_values(self, values, inside: list, noise):
        """The repeated-values release's rows: the records' ``values``, or under a unit its value slots (at most m
        distinct values a unit, chosen by the privacy stream)."""
        from ..privacy.units import unit_value_slots

        if self._unit_rows is None:
            return values
        return unit_value_slots(values, self._unit_rows[0], inside=inside, per_unit=self.unit.max_values,
                                uniform=noise.uniform)

    def _state_unit(self, report):
        """The report with its unit stated (privacy_unit, unit_bound, statement, note); the fit's rows forgotten."""
        from ..privacy.report import with_unit

        self._unit_rows = None  # private: each row's unit and weight live for the fit only
        if self.unit is None:
            return with_unit(report, "one row", None)
        report = with_unit(report, self.unit.words, self.unit.to_json())
        return report.with_notes(unit_note=UNIT_NOTE.format(words=self.unit.words, k=self.unit.max_rows,
                                                            m=self.unit.max_values)) if report.private else report

    def _unit_state(self) -> dict | None:
        return None if self.unit is None else {"column": self.unit.column, "max_rows_per_unit": self.unit.max_rows,
                                               "max_values_per_unit": self.unit.max_values}

    def _restore_unit(self, report, source: str) -> None:
        """The report's unit must be the saved settings' (its words, its bound), and every release must count a unit
        as they say: the repeated values one count each, every other release up to the bound's k. A report that
        names no unit and whose settings name none is of an earlier release: one row."""
        from ..privacy.verify import ClaimMismatch
        from .table_measurements import REPEATED_VALUES

        for at, event in enumerate(report.ledger if report.private else []):
            if event.get("contribution", 1) != (1 if event.get("measurement") == REPEATED_VALUES else
                                                self._contribution):
                raise ClaimMismatch(f"{source}: its release {at + 1} does not count a unit as its settings say "
                                    f"({'one row' if self.unit is None else self.unit.words}): the file was edited; "
                                    "fit again")

        expected = ("one row", None) if self.unit is None else (self.unit.words, self.unit.to_json())
        claimed = report.privacy_unit
        if claimed is None and report.unit_bound is None and self.unit is None:
            claimed = "one row"  # written before privacy units: one row, its releases checked above to count so
        if (claimed, report.unit_bound) != expected:
            raise ClaimMismatch(f"{source}: its report protects {report.privacy_unit!r}, but its settings "
                                f"{'name no privacy unit' if self.unit is None else f'protect {expected[0]!r}'} (or "
                                "their bounds differ): the file was edited; fit again")
