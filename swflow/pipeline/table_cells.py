"""Where a table run's cells come from: its released fine one-way histograms, public rows, or the schema's bins.

The part of :class:`~swflow.pipeline.tables.TableSynthesizer` that sets the codec's cells before the pair tables
are released (swflow/tables/resolution.py has the post-processing, swflow/privacy/oneway.py the release), and
re-derives them when a saved Synthesizer is loaded.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from ..tables.codec import TableCodec
from ..tables.counted import EngineTable
from ..tables.schema import Schema

__all__ = ["RESOLUTIONS", "TableCells", "resolution_setting"]

#: where a table's cells come from: its released fine histograms, public rows, or the schema's equal-width bins
RESOLUTIONS = ("release", "public", "uniform")


class TableCells:
    """Mixed into TableSynthesizer: its cells (``self.codec``), set once per fit or load."""

    #: a wide table's private choice of pairs (table_choice.py): its plan, and whether its pairs are chosen yet
    _selection, _chosen = None, False

    def _check_cells(self, cells) -> None:
        """``cells``: None (the rule), a number for every column, or {column: number} (the others by the rule)."""
        chosen = cells.values() if isinstance(cells, dict) else [] if cells is None else [cells]
        if any(not isinstance(m, int) or isinstance(m, bool) or m < 2 for m in chosen):
            raise ValueError(f"cells must be whole numbers >= 2 per column, got {cells!r}")
        unknown = set(cells) - set(self.schema.names) if isinstance(cells, dict) else set()
        if unknown:
            raise ValueError(f"cells names columns that the schema lacks: {sorted(unknown)}")
        self.cells = cells

    def _cells_per_column(self, n: int) -> list[int]:
        """Each column's cells: given, or the rule at the noise the pair tables will carry (public quantities); a
        category column's cap (:func:`~swflow.tables.resolution.category_cells`) reads the noise of its count
        pooled over the tables that hold it. The noise is that of one release of every pair table, even where a
        target's tables are released apart (table_pairs.py): read at the others' σ, diamonds' numbers lost a cell
        each at ε = 1 and its 3-way TVD rose from 0.169 to 0.199 (docs/tables-design.md, "The target's tables
        apart")."""
        import math

        from ..privacy.histogram import histogram_sensitivity, one_release_multiplier
        from ..tables.resolution import category_cells, cells_of, cells_per_column

        if isinstance(self.cells, int):
            return [self.cells] * len(self.schema.columns)
        z = one_release_multiplier(self.privacy) / math.sqrt((1 - self.resolution_share) * (1 - self._values_share())
                                                             * (1 - self._choice_share()))
        sigma = z * histogram_sensitivity(self._table_count(), adjacency=self.privacy.adjacency,
                                          contribution=self._contribution).value
        rule = cells_per_column(dataset_size=n, pair_noise_std=sigma)
        tables = [sum(j in pair for pair in self.pairs) for j in range(len(self.schema.columns))]
        return [(self.cells or {}).get(c.name, cells_of(c, rule, categories=category_cells(
                    dataset_size=n, pooled_noise_std=sigma / math.sqrt(max(held, 1)))))
                for c, held in zip(self.schema.columns, tables)]

    def _plan_cells(self, n: int, *, sharded: bool = False) -> list[int]:
        """Set the cells that need no release (the schema's, or public rows'), choose the pairs from public rows
        where given (or plan a wide table's private choice, made once the cells are set), and return the columns
        whose fine histograms the run releases."""
        from ..tables.resolution import column_cells, needs_release
        from .table_choice import plan_choice

        plan_choice(self, n, sharded=sharded)

        if self.resolution == "uniform":
            if self.public is not None:
                self._choose_pairs(n)
            return []
        self._cells_m = per_column = self._cells_per_column(n)
        weights = self._public_weights() if self.public is not None else [None] * len(self.schema.columns)
        self.codec = TableCodec(self.schema, numeric_bins=self.codec.numeric_bins,
                                cells=[column_cells(c, w, m) for c, w, m in zip(self.schema.columns, weights,
                                                                                per_column)])
        if self.public is not None:
            self._choose_pairs(n)
        if self.resolution == "public":
            return []
        return [j for j, (c, m) in enumerate(zip(self.schema.columns, per_column)) if needs_release(c, m)]

    def _calibrate(self, n: int, released: list[int], spent: tuple = ()):
        """(the resolution release's calibrations or None, the pair tables' (the others' or every table's, the target's
        tables' or None: table_pairs.py), a private choice's round multiplier or None) for this budget; (None,
        (None, None), None) without privacy. With a resolution release, the two split the
        budget (privacy.calibrate_shares); ``spent``: the add-remove size release made before them, composed with
        them (they split what it leaves); a private choice of pairs (``self._selection``) takes its share first."""
        from ..privacy import ReleasePlan, calibrate
        from ..privacy.calibrate import calibrate_shares
        from ..privacy.size import shares_after
        from ..privacy.targets import check_histogram
        from ..tables.resolution import tree_of

        if not self.privacy.private:
            return None, (None, None), None
        noise, choice = self.privacy.count_noise, self._selection
        keep = 1 - self._choice_share()
        size_private = bool(spent)
        pairs = ReleasePlan(releases=1, dataset_size=n, sample_size=None, n_projections=self._table_count(),
                            dim=self.codec.dim, noise=noise, size_private=size_private)
        check_histogram(self.privacy, pairs, seed_typed=self.privacy_seed is not None)

        def split(plans, shares, **kw):  # the calibrations, and the choice's multiplier (None without one)
            out = calibrate_shares(self.privacy, plans, shares_after(tuple(f * keep for f in shares), spent),
                                   spent=spent, selection=choice, **kw)
            return (out, None) if choice is None else (out[:-1], out[-1])

        plans, parts = self._pair_plans(pairs)  # one release, or the target's tables apart (table_pairs.py)
        if not released:  # the shares of what the size release, if made, leaves
            if not spent and choice is None and len(plans) == 1:
                return None, (calibrate(self.privacy, pairs), None), None
            tables, chosen = split(plans, parts)
            return None, _two(tables), chosen
        trees = [tree_of(self.schema.columns[j]) for j in released]  # their levels stay whatever atoms come
        levels = ReleasePlan(releases=1, dataset_size=n, sample_size=None, n_projections=sum(t.levels for t in trees),
                             dim=sum(t.cells for t in trees), noise=noise, size_private=size_private)
        share, named = self.resolution_share, self._named_columns(released)
        if not named:
            (fine, *tables), chosen = split((levels, *plans), (share, *((1 - share) * f for f in parts)))
            return (None, fine), _two(tables), chosen
        values = replace(levels, n_projections=len(named) * self._values_per_unit(), dim=len(named))
        v = self._values_share()
        (named_cal, fine, *tables), chosen = split(
            (values, levels, *plans), (v, (1 - v) * share, *((1 - v) * (1 - share) * f for f in parts)),
            reserved_delta=self._values_delta())
        return (named_cal, fine), _two(tables), chosen

    def _choice_share(self) -> float:
        """The share of ρ a private choice of pairs takes (swflow.privacy.selection), 0 without one."""
        return 0.0 if self._selection is None else self._selection.share

    def _table_count(self) -> int:
        """K, the pair tables the run releases: its pairs, and those a private choice has still to add."""
        return len(self.pairs) + (0 if self._selection is None or self._chosen else self._selection.rounds)

    def _values_share(self) -> float:
        """The repeated-values release's share of the budget: VALUES_SHARE where the run makes one (asked, with a
        resolution release, and a sliced column with room for them), else 0."""
        from ..tables.resolution import VALUES_SHARE

        makes_one = self.repeated_values and self.resolution == "release" and any(
            _nameable(c) for c in self.schema.columns)
        return VALUES_SHARE if makes_one else 0.0

    def _values_delta(self) -> float:
        """The δ that naming a value only one record holds may cost: the spec's share for such failures."""
        return self.privacy.delta_sensitivity_share * self.privacy.delta

    def _named_columns(self, released: list[int]) -> list[int]:
        """The released columns whose repeated values are named first (``repeated_values``): the sliced ones whose
        trees have room for them."""
        return [j for j in released if self.repeated_values and _nameable(self.schema.columns[j])]

    def _release_values(self, table, n: int, named: list[int], calibration, noise, share):
        """The repeated-values release (privacy/values.py) on the columns ``named`` of this rank's ``share`` of the
        records; sets their atoms and returns the target."""
        import numpy as np

        from ..privacy.values import absent_value
        from ..tables.cells import FineGrid
        from ..tables.files import TableRows

        columns = [self.schema.columns[j] for j in named]
        lo, hi, world = share
        inside = [FineGrid(c).ends for c in columns]
        if isinstance(table, EngineTable):  # counted where the rows live
            return self._count_values(table.values([c.name for c in columns]), n, named, calibration, noise, inside)
        frames = (TableRows(table, _fine_codec(self.schema), clip=self.clip)[lo:hi].checked_frames()
                  if isinstance(table, (str, Path)) else [(0, self.schema.check(table.iloc[lo:hi], clip=self.clip))])
        parts = [np.stack([np.nan_to_num(frame[c.name].to_numpy(dtype=float, na_value=np.nan),
                                         nan=absent_value(low)) for c, (low, _) in zip(columns, inside)], axis=1)
                 for _, frame in frames]
        values = self._unit_values(torch.from_numpy(np.concatenate(parts)), inside, noise)  # a missing value just
        del parts  # below the bounds: never counted; under a unit, its value slots
        return self._count_values(values, n, named, calibration, noise, inside, sharded=world > 1)

    def _count_values(self, values, n: int, named: list[int], calibration, noise, inside, *, sharded=False):
        """The repeated-values release of ``values`` (the named columns' checked values, in memory or counted
        where they live); sets their atoms and returns the target."""
        from ..privacy import PrivacyLedger
        from ..privacy.values import ShardedValuesTarget, ValuesTarget

        kind = ShardedValuesTarget if sharded else ValuesTarget
        target = kind(values, calibration, noise=noise, ledger=PrivacyLedger(), inside=inside,
                      delta=self._values_delta(), dataset_size=n, per_unit=self._values_per_unit())
        self._released_values = target.release_values()
        self._set_atoms(named)
        return target

    def _set_atoms(self, named: list[int]) -> None:
        from ..tables.resolution import released_atoms

        self._atoms = {j: released_atoms(self.schema.columns[j], values.numpy(), counts.numpy())
                       for j, (values, counts) in zip(named, self._released_values)}

    def _release_cells(self, table, n: int, released: list[int], calibration, noise, share):
        """The resolution release on the columns ``released``, and the cells it sets (self.codec); the target."""
        from ..privacy import PrivacyLedger
        from ..privacy.oneway import OneWayTarget, ShardedOneWayTarget
        from ..tables.files import TableRows

        named_cal, calibration = calibration if calibration is not None else (None, None)
        lo, hi, world = share
        named = self._named_columns(released)
        if named:  # first: the atoms change the grid the trees count
            self._values_target = self._release_values(table, n, named, named_cal, noise, share)
        fine_codec = _fine_codec(self.schema, self._atoms)
        if isinstance(table, (str, Path)):
            cells = TableRows(table, fine_codec, clip=self.clip)
        elif isinstance(table, EngineTable):
            cells = table.rows(fine_codec)
        else:
            cells = torch.from_numpy(fine_codec.cell_index(self.schema.check(table, clip=self.clip)))
        if calibration is not None:  # its plan's rows are the records' cells, one column each
            calibration = replace(calibration, plan=replace(calibration.plan, dim=cells.shape[1]))
        kind = ShardedOneWayTarget if world > 1 else OneWayTarget
        target = self._trees_weighted(kind(cells[lo:hi], calibration, noise=noise, ledger=PrivacyLedger(),
                                           columns=released, trees=[self._tree(j) for j in released],
                                           dataset_size=n), cells)
        del cells
        self._released_levels, self._released_columns = target.release_levels(), released
        self.codec = self._codec_from_levels(self._released_levels, released, n, noise_std=target.count_noise_std(),
                                             counts_total=self.unit is None, warn=True)
        return target

    def _fine_events(self, fine) -> tuple:
        """The ledger events of the releases before the pair tables, in their order: [the values,] the trees."""
        named = getattr(self, "_values_target", None)
        return (*(() if named is None else named.ledger.events), *fine.ledger.events)

    def _tree(self, column: int):
        from ..tables.resolution import tree_of

        return tree_of(self.schema.columns[column], self._atoms.get(column, ()))

    def _codec_from_levels(self, levels, released: list[int], n: int, *, noise_std: float,
                           counts_total: bool, warn: bool = False) -> TableCodec:
        """The codec whose cells the released ``levels`` set (post-processing: swflow.tables.resolution, each node's
        split shrunk against the levels' noise ``noise_std``, 0 for none); ``counts_total``: whether the levels
        count the n records (not a unit's trees weighted by spread); ``warn``: say where the released mass fills a
        sliver of a column's declared bounds. A bound that the repeated-values release counts as a cell's share of
        the records is a pile of its own (resolution.bound_piles; records only: a unit's release counts units)."""
        from ..privacy.oneway import split_levels
        from ..tables.cells import FineGrid
        from ..tables.resolution import bound_piles, column_cells, fine_weights, warn_wide_bounds

        named = dict(zip(self._atoms, getattr(self, "_released_values", []))) if counts_total else {}
        piles = {j: bound_piles(FineGrid(self.schema.columns[j], self._atoms[j]), values.numpy(), counts.numpy(),
                                self._cells_m[j], n) for j, (values, counts) in named.items()}
        trees = [self._tree(j) for j in released]
        weights = {j: fine_weights(counts, tree, total=n, noise_std=noise_std, counts_total=counts_total,
                                   piles=piles.get(j))
                   for j, counts, tree in zip(released, split_levels(levels, trees), trees)}
        if warn:
            warn_wide_bounds(self.schema, weights)
        return TableCodec(self.schema, numeric_bins=self.codec.numeric_bins,
                          cells=[c if j not in weights else column_cells(self.schema.columns[j], weights[j],
                                                                          self._cells_m[j], self._atoms.get(j, ()))
                                 for j, c in enumerate(self.codec.cells)])

    def _resolution_note(self, fine) -> str:
        from ..privacy.oneway import ONEWAY_RELEASE
        from ..privacy.values import VALUES_RELEASE

        note = ONEWAY_RELEASE.format(columns=[self.schema.names[j] for j in fine.columns], groups=fine.groups,
                                     sigma=fine.count_noise_std()) + " (released before the pair tables)"
        named = getattr(self, "_values_target", None)
        if named is None:
            return note
        values = VALUES_RELEASE.format(columns=[self.schema.names[j] for j in self._atoms], groups=len(named.inside),
                                       sigma=named.count_noise_std(), threshold=named.threshold(), delta=named.delta)
        return f"{values} THEN {note}"

    def _resolution_state(self) -> dict:
        """What sets the cells, as released (re-derived on load, never read back as cells)."""
        weights = getattr(self, "_public_weights_used", None)
        return {"mode": self.resolution, "share": self.resolution_share, "cells_per_column": getattr(self, "_cells_m", None),
                "columns": list(getattr(self, "_released_columns", [])),
                "public_weights": None if weights is None else [torch.as_tensor(w) for w in weights],
                "splits": "shrunk", **({} if self.unit is None else {"unit_trees": "spread"})}

    def _restore_cells(self, state: dict, numbers: dict, report, source: str) -> None:
        """Set the codec's cells from a saved resolution state and the released ``numbers`` (by measurement): the
        trees' levels are tested against the claimed noise and n (privacy.oneway.verify_levels) and post-processed
        again; the cells the report recorded must be the ones they give."""
        from ..privacy.oneway import verify_levels
        from ..privacy.verify import ClaimMismatch
        from ..tables.resolution import column_cells
        from .table_measurements import ONE_WAY_TREES, REPEATED_VALUES, released

        mode, m, released_columns = state["mode"], state["cells_per_column"], [int(j) for j in state["columns"]]
        self.repeated_values = REPEATED_VALUES in numbers
        if isinstance(m, int):  # files of the first resolution release: one number for every column
            m = [m] * len(self.schema.columns)
        if mode not in RESOLUTIONS or (mode != "uniform" and not (
                isinstance(m, list) and len(m) == len(self.schema.columns) and all(isinstance(k, int) for k in m))):
            raise ClaimMismatch(f"{source}: its resolution {mode!r} is not one swflow writes; fit again")
        self.resolution, self.resolution_share, self._cells_m = mode, float(state["share"]), m
        if mode == "uniform":
            return
        weights = state["public_weights"] or [None] * len(self.schema.columns)
        if mode == "public" and (len(weights) != len(self.schema.columns) or any(w is None for w in weights)):
            raise ClaimMismatch(f"{source}: its cells are said to come from public rows, but it holds no public "
                                "counts of every column: the file was edited; fit again")
        self.codec = TableCodec(self.schema, numeric_bins=self.codec.numeric_bins,
                                cells=[column_cells(c, None if w is None else torch.as_tensor(w).numpy(), k)
                                       for c, w, k in zip(self.schema.columns, weights, m)])
        if mode == "release" and released_columns:
            levels = torch.as_tensor(numbers[ONE_WAY_TREES], dtype=torch.float64)
            # the trees' event: its K, sensitivity and σ are checked against the settings' plan (check_ledger)
            event = released(report, ONE_WAY_TREES, source) if report.private else None
            self._restore_values(numbers.get(REPEATED_VALUES), released_columns, report, source)
            trees = [self._tree(j) for j in released_columns]
            if report.private:
                verify_levels(levels, trees, sigma=float(event["noise_std"]), source=source,
                              mechanism=event["mechanism"],
                              dataset_size=None if report.adjacency == "add-remove" else report.dataset_size)
            self._released_levels, self._released_columns = levels, released_columns
            # runs saved before the nodes' splits were shrunk (docs/tables-design.md, "Inside a cell") decode as written
            shrunk = report.private and state.get("splits") == "shrunk"
            # a unit's trees counted by their spread (privacy.units.tree_weights) since 2026-11-29; before, by the
            # count bound, their sum the count of records
            self.codec = self._codec_from_levels(levels, released_columns, report.dataset_size,
                                                 noise_std=float(event["noise_std"]) if shrunk else 0.0,
                                                 counts_total=state.get("unit_trees") != "spread")
        if report.run_config.get("cells") != self.codec.sizes or report.run_config.get("resolution_columns") != [
                self.schema.names[j] for j in released_columns] or report.run_config.get("repeated_values_columns", []) != [
                self.schema.names[j] for j in self._atoms]:
            raise ClaimMismatch(f"{source}: the cells its report records are not those its release gives: the file "
                                "was edited; fit again")

    def _restore_values(self, named_state, released_columns: list[int], report, source: str) -> None:
        """The atoms of a saved repeated-values release, its named values and counts tested against its ledger
        event first (privacy.values.verify_values)."""
        from ..privacy.values import verify_values
        from ..privacy.verify import ClaimMismatch
        from ..tables.cells import FineGrid
        from .table_measurements import REPEATED_VALUES, released

        if named_state is None:
            return
        named = self._named_columns(released_columns)
        if not named or len(named_state) != len(named):
            raise ClaimMismatch(f"{source}: its repeated-values release is not one of its sliced columns; fit again")
        self._released_values = [(torch.as_tensor(v, dtype=torch.float64), torch.as_tensor(c, dtype=torch.float64))
                                 for v, c in named_state]
        if report.private:
            verify_values(self._released_values, event=released(report, REPEATED_VALUES, source),
                          columns=len(named), source=source, inside=[FineGrid(self.schema.columns[j]).ends for j in named],
                          per_unit=self._values_per_unit())
        self._set_atoms(named)


def _two(calibrations) -> tuple:
    """The pair tables' calibrations as (the others' or every table's, the target's or None)."""
    return (*calibrations, None)[:2]


def _fine_codec(schema: Schema, atoms: dict | None = None) -> TableCodec:
    """The codec whose cells are every column's fine grid, with its released ``atoms`` ({column: values}; what the
    resolution release counts)."""
    from ..tables.cells import ColumnCells, FineGrid

    grids = [FineGrid(c, tuple((atoms or {}).get(j, ()))) for j, c in enumerate(schema.columns)]
    return TableCodec(schema, cells=[ColumnCells(grid, list(range(grid.values + 1))) for grid in grids])


def _nameable(column) -> bool:
    """Whether the repeated-values release names values of ``column``: a sliced one whose tree has room for them
    (a real column on a log scale fills its tree: naming there bought nothing, issue 76)."""
    from ..tables.cells import FineGrid
    from ..tables.resolution import atom_room

    return FineGrid(column).sliced and atom_room(column) > 0


def resolution_setting(resolution: str | None, share: float, public) -> tuple[str, float]:
    """(where the cells come from, the resolution release's share), checked; the default: public rows where given."""
    resolution = resolution or ("public" if public is not None else "release")
    if resolution not in RESOLUTIONS:
        raise ValueError(f"resolution must be one of {RESOLUTIONS}, got {resolution!r}")
    if resolution == "public" and public is None:
        raise ValueError("resolution='public' sets the cells from public rows: give them (public=...)")
    if not 0 < share < 1:
        raise ValueError(f"resolution_share is a share of the budget in (0, 1), got {share}")
    return resolution, share
