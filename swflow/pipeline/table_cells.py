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
from ..tables.schema import Schema

__all__ = ["RESOLUTIONS", "TableCells"]

#: where a table's cells come from: its released fine histograms, public rows, or the schema's equal-width bins
RESOLUTIONS = ("release", "public", "uniform")


class TableCells:
    """Mixed into TableSynthesizer: its cells (``self.codec``), set once per fit or load."""

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
        """Each column's cells: given, or the rule at the noise the pair tables will carry (public quantities)."""
        import math

        from ..privacy.histogram import histogram_sensitivity, one_release_multiplier
        from ..tables.resolution import cells_per_column

        if isinstance(self.cells, int):
            return [self.cells] * len(self.schema.columns)
        z = one_release_multiplier(self.privacy) / math.sqrt(1 - self.resolution_share)
        sigma = z * histogram_sensitivity(len(self.pairs), adjacency=self.privacy.adjacency).value
        rule = cells_per_column(dataset_size=n, pair_noise_std=sigma)
        return [(self.cells or {}).get(name, rule) for name in self.schema.names]

    def _plan_cells(self, n: int) -> list[int]:
        """Set the cells that need no release (the schema's, or public rows'), choose the pairs from public rows
        where given, and return the columns whose fine histograms the run releases."""
        from ..tables.resolution import column_cells, needs_release

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

    def _choose_pairs(self, n: int) -> None:
        """The pairs the public rows show worth their noise at this budget and this public n."""
        from ..privacy.histogram import one_release_multiplier
        from ..tables.pairs import choose_pairs

        public = self._public_frame()
        cells = self.codec.cell_index(public)
        self.pairs = choose_pairs(cells, self.codec.sizes, dataset_size=n,
                                  noise_multiplier=one_release_multiplier(self.privacy))
        self.pairs_chosen_by = (f"{len(public)} public rows: the {len(self.pairs)} most dependent pairs that "
                                "minimise noise plus left-out dependence (swflow.tables.pairs)")

    def _public_frame(self):
        """The public rows, checked against the schema (once)."""
        from ..tables.files import read_table

        if getattr(self, "_public_checked", None) is None:
            public = self.public if hasattr(self.public, "columns") else read_table(self.public, schema=self.schema)
            if len(public) == 0:
                raise ValueError("the public rows are empty: give public rows, or leave public= unset")
            try:
                self._public_checked = self.schema.check(public, clip=self.clip)
            except ValueError as err:
                raise ValueError(f"the public rows do not fit the schema: {err}") from None
        return self._public_checked

    def _public_weights(self) -> list:
        """Each column's fine counts in the public rows (public: no budget)."""
        import numpy as np

        codec = _fine_codec(self.schema)
        fine = codec.cell_index(self._public_frame())
        self._public_weights_used = [np.bincount(fine[:, j], minlength=c.grid.size).astype(float)
                                     for j, c in enumerate(codec.cells)]
        return self._public_weights_used

    def _calibrate(self, n: int, released: list[int], spent: tuple = ()):
        """(the resolution release's calibration or None, the pair tables') for this budget; (None, None) without
        privacy. With a resolution release, the two split the budget (privacy.calibrate_shares); ``spent``: the
        add-remove size release made before them, composed with them (they split what it leaves)."""
        from ..privacy import ReleasePlan, calibrate
        from ..privacy.calibrate import calibrate_shares
        from ..privacy.size import shares_after
        from ..privacy.targets import check_histogram
        from ..tables.resolution import tree_of

        if not self.privacy.private:
            return None, None
        noise = self.privacy.count_noise
        size_private = bool(spent)
        pairs = ReleasePlan(releases=1, dataset_size=n, sample_size=None, n_projections=len(self.pairs),
                            dim=self.codec.dim, noise=noise, size_private=size_private)
        check_histogram(self.privacy, pairs, seed_typed=self.privacy_seed is not None)
        if not released:  # the shares of what the size release, if made, leaves
            return None, (calibrate(self.privacy, pairs) if not spent else
                          calibrate_shares(self.privacy, (pairs,), shares_after((1.0,), spent), spent=spent)[0])
        trees = [tree_of(self.schema.columns[j]) for j in released]
        levels = ReleasePlan(releases=1, dataset_size=n, sample_size=None, n_projections=sum(t.levels for t in trees),
                             dim=sum(t.cells for t in trees), noise=noise, size_private=size_private)
        share = self.resolution_share
        return calibrate_shares(self.privacy, (levels, pairs), shares_after((share, 1 - share), spent), spent=spent)

    def _release_cells(self, table, n: int, released: list[int], calibration, noise, share):
        """The resolution release on the columns ``released``, and the cells it sets (self.codec); the target."""
        from ..privacy import PrivacyLedger
        from ..privacy.oneway import OneWayTarget, ShardedOneWayTarget
        from ..tables.files import TableRows

        fine_codec = _fine_codec(self.schema)
        if isinstance(table, (str, Path)):
            cells = TableRows(table, fine_codec, clip=self.clip)
        else:
            cells = torch.from_numpy(fine_codec.cell_index(self.schema.check(table, clip=self.clip)))
        lo, hi, world = share
        if calibration is not None:  # its plan's rows are the records' cells, one column each
            calibration = replace(calibration, plan=replace(calibration.plan, dim=cells.shape[1]))
        kind = ShardedOneWayTarget if world > 1 else OneWayTarget
        target = kind(cells[lo:hi], calibration, noise=noise, ledger=PrivacyLedger(), columns=released,
                      trees=[_tree(self.schema, j) for j in released], dataset_size=n)
        del cells
        self._released_levels, self._released_columns = target.release_levels(), released
        self.codec = self._codec_from_levels(self._released_levels, released, n)
        return target

    def _codec_from_levels(self, levels, released: list[int], n: int) -> TableCodec:
        """The codec whose cells the released ``levels`` set (post-processing: swflow.tables.resolution)."""
        from ..privacy.oneway import split_levels
        from ..tables.resolution import column_cells, fine_weights

        trees = [_tree(self.schema, j) for j in released]
        weights = dict(zip(released, (fine_weights(counts, tree, total=n)
                                      for counts, tree in zip(split_levels(levels, trees), trees))))
        return TableCodec(self.schema, numeric_bins=self.codec.numeric_bins,
                          cells=[c if j not in weights else column_cells(self.schema.columns[j], weights[j],
                                                                          self._cells_m[j])
                                 for j, c in enumerate(self.codec.cells)])

    def _resolution_note(self, fine) -> str:
        from ..privacy.oneway import ONEWAY_RELEASE

        return ONEWAY_RELEASE.format(columns=[self.schema.names[j] for j in fine.columns], groups=fine.groups,
                                     sigma=fine.levels_noise_std()) + " (released before the pair tables)"

    def _split_note(self) -> str:
        share = self.resolution_share
        whole = "the budget" if self._size is None else "what the count of records leaves"
        return (f"the resolution release takes {share:g} of {whole} and the pair tables {1 - share:g} (of rho in "
                "zCDP, of mu^2 in Gaussian DP: multipliers z/sqrt(share)); the accountant composes them")

    def _resolution_state(self) -> dict:
        """What sets the cells, as released (re-derived on load, never read back as cells)."""
        weights = getattr(self, "_public_weights_used", None)
        return {"mode": self.resolution, "share": self.resolution_share, "cells_per_column": getattr(self, "_cells_m", None),
                "columns": list(getattr(self, "_released_columns", [])), "levels": self._released_levels,
                "public_weights": None if weights is None else [torch.as_tensor(w) for w in weights]}

    def _restore_cells(self, state: dict, report, source: str) -> None:
        """Set the codec's cells from a saved resolution state: the released levels are tested against the
        claimed noise and n (privacy.oneway.verify_levels) and post-processed again; the cells the report
        recorded must be the ones they give."""
        from ..privacy.histogram import histogram_sensitivity
        from ..privacy.oneway import verify_levels
        from ..privacy.verify import ClaimMismatch
        from ..tables.resolution import column_cells

        mode, m, released = state["mode"], state["cells_per_column"], [int(j) for j in state["columns"]]
        if isinstance(m, int):  # files of the first resolution release: one number for every column
            m = [m] * len(self.schema.columns)
        if mode not in RESOLUTIONS or (mode != "uniform" and not (
                isinstance(m, list) and len(m) == len(self.schema.columns) and all(isinstance(k, int) for k in m))):
            raise ClaimMismatch(f"{source}: its resolution {mode!r} is not one swflow writes; fit again")
        self.resolution, self.resolution_share, self._cells_m = mode, float(state["share"]), m
        if mode == "uniform":
            return
        weights = state["public_weights"] or [None] * len(self.schema.columns)
        self.codec = TableCodec(self.schema, numeric_bins=self.codec.numeric_bins,
                                cells=[column_cells(c, None if w is None else torch.as_tensor(w).numpy(), k)
                                       for c, w, k in zip(self.schema.columns, weights, m)])
        if mode == "release" and released:
            levels = torch.as_tensor(state["levels"], dtype=torch.float64)
            trees = [_tree(self.schema, j) for j in released]
            sigma = 0.0
            if report.private:
                events = report.ledger
                groups = sum(t.levels for t in trees)
                if len(events) != 2 + (report.adjacency == "add-remove") or events[1]["n_projections"] != groups or \
                        events[1]["sensitivity"] != histogram_sensitivity(groups, adjacency=report.adjacency).value:
                    raise ClaimMismatch(f"{source}: its ledger does not hold the resolution release its cells come "
                                        "from (one release of the trees of the released columns); fit again")
                sigma = float(events[1]["noise_std"])
                verify_levels(levels, trees, sigma=sigma, source=source, mechanism=events[1]["mechanism"],
                              dataset_size=None if report.adjacency == "add-remove" else report.dataset_size)
            self._released_levels, self._released_columns = levels, released
            self.codec = self._codec_from_levels(levels, released, report.dataset_size)
        if report.run_config.get("cells") != self.codec.sizes or report.run_config.get("resolution_columns") != [
                self.schema.names[j] for j in released]:
            raise ClaimMismatch(f"{source}: the cells its report records are not those its release gives: the file "
                                "was edited; fit again")


def _fine_codec(schema: Schema) -> TableCodec:
    """The codec whose cells are every column's fine grid (what the resolution release counts)."""
    from ..tables.cells import ColumnCells, FineGrid

    return TableCodec(schema, cells=[ColumnCells(FineGrid(c), list(range(FineGrid(c).values + 1)))
                                     for c in schema.columns])


def _tree(schema: Schema, column: int):
    from ..tables.resolution import tree_of

    return tree_of(schema.columns[column])
