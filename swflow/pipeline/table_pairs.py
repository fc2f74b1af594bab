"""A table run's pairs and their release: one release of every pair table, or the target's tables apart.

The part of :class:`~swflow.pipeline.tables.TableSynthesizer` that says which pairs the run releases and releases
them (:class:`~swflow.privacy.marginals.MarginalTarget`). A named target's tables (its pair with every column) are
what a classifier trained on the samples learns from. Where they are fewer than TARGET_SHARE of the tables, they are
released apart, at that share of the pair tables' budget (:func:`~swflow.tables.pairs.target_share`): two
measurements, "pair tables" and "target's tables", each a Gaussian of its own σ on whole counts (OpenDP's integer
noise stays integer), composed by the accountant as one Gaussian of the same ρ. On issue 94's made-up tables at
ε = 1 (17 of 153 tables) the target's σ falls by 39 % and the others' rises by 13 %; docs/tables-design.md ("The
target's tables apart") has what that bought and cost. Under a privacy unit the tables stay one release: a unit's
rows are weighted by their spread over all the tables (privacy.units.spread_weights), which bounds its ℓ2 over all
of them, not over each part.
"""
from __future__ import annotations

from dataclasses import replace

import torch

__all__ = ["TablePairs"]


class TablePairs:
    """Mixed into TableSynthesizer: ``self.pairs`` and their release."""

    #: a loaded run: whether its file holds the target's tables apart (None at fit: the rule decides)
    _target_apart = None

    def _widths(self) -> list[int]:
        """Each column's most cells, from the schema: a category column's categories, a number's MAX_CELLS."""
        from ..tables.resolution import MAX_CELLS

        return [len(c.categories) if c.kind == "categorical" else MAX_CELLS for c in self.schema.columns]

    def _pairs(self, pairs, target: str | None) -> list[tuple[int, int]]:
        """The pairs given (names), checked, as column indices; None: the schema's (tables.pairs.schema_pairs)."""
        from ..tables.pairs import schema_pairs

        names = self.schema.names
        if pairs is None:
            return schema_pairs(self._widths(), target=None if target is None else names.index(target))
        if self.unit is not None:  # every column with its unit's rows, which samples read (table_units.py)
            pairs = [*pairs, *((a, names[-1]) for a in names[:-1] if (a, names[-1]) not in map(tuple, pairs))]
        out = []
        for pair in pairs:
            if len(pair) != 2 or any(name not in names for name in pair) or pair[0] == pair[1]:
                raise ValueError(f"a pair names two different columns of the schema {names}, got {pair!r}")
            out.append(tuple(sorted(names.index(name) for name in pair)))
        if len(set(out)) != len(out) or not out:
            raise ValueError("pairs must be distinct, and at least one")
        return out

    def _target_share(self) -> float:
        """The share of the pair tables' budget that the target's tables take in a release of their own, 0 where
        every table is in one release (no target, no privacy, a privacy unit, or the target's tables hold that
        share already)."""
        from ..tables.pairs import target_share

        if not self.privacy.private or self.unit is not None or self.flow.target is None or (
                self._target_apart is False):
            return 0.0
        target = self.schema.names.index(self.flow.target)
        return target_share(self._table_count(), sum(target in pair for pair in self.pairs))

    def _apart(self) -> list[bool]:
        """Whether each of ``self.pairs`` is released with the target's tables (all False in one release)."""
        if not self._target_share():
            return [False] * len(self.pairs)
        target = self.schema.names.index(self.flow.target)
        return [target in pair for pair in self.pairs]

    def _part_pairs(self) -> list[list[tuple[int, int]]]:
        """The pairs of each part's release, in ``self.pairs``' order: [the others' (every pair in one release), the
        target's (none in one release)]."""
        apart = self._apart()
        return [[pair for pair, a in zip(self.pairs, apart) if a == side] for side in (False, True)]

    def _pair_plans(self, tables):
        """(the plans, their shares of the pair tables' budget): ``tables`` (the ReleasePlan of every pair table as
        one release), or the others' and the target's at 1 − s and s."""
        share = self._target_share()
        if not share:
            return (tables,), (1.0,)
        apart = sum(self._apart())
        return (replace(tables, n_projections=tables.n_projections - apart),
                replace(tables, n_projections=apart)), (1 - share, share)

    def _release_pairs(self, rows, n: int, calibrations, noise, share, *, sharded: bool, run_config: dict):
        """Release the pair tables of the codec ``rows`` (the others', then the target's where apart; this rank's
        ``share`` of them under torchrun) and return the privacy report they start; ``self._counts`` holds every
        table in ``self.pairs``' order."""
        from ..privacy import PrivacyLedger, compose, privacy_report
        from ..privacy.marginals import MarginalTarget, ShardedMarginalTarget, marginal_release

        lo, hi, _ = share
        made = []
        for pairs, calibration in zip(self._part_pairs(), calibrations):
            if not pairs:
                continue
            if calibration is not None:  # its plan, with the dimension the cells give the rows
                calibration = replace(calibration, plan=replace(calibration.plan, dim=self.codec.dim))
            kw = dict(noise=noise, ledger=PrivacyLedger(), blocks=self.codec.blocks(), pairs=pairs, dataset_size=n)
            target = (ShardedMarginalTarget(rows[lo:hi], calibration, **kw) if sharded
                      else self._weighted(MarginalTarget(rows, calibration, **kw)))
            target.release_tables()
            made.append(target)
        self._counts = self._merged_counts([t.released_counts for t in made])
        report = privacy_report(self.method, made[0], run_config=run_config)
        if len(made) == 2:
            apart_tables = made[1]
            report = compose(report, apart_tables.ledger.events, target_epsilon=self.privacy.epsilon, note=(
                f"the target's tables ({self.flow.target!r} with every column), released apart at "
                f"{self._target_share():g} of the pair tables' budget: " + marginal_release(
                    apart_tables.pairs, adjacency=self.privacy.adjacency, contribution=self._contribution)))
        return report

    def _warn_no_links(self, tables: list[torch.Tensor], records: float) -> None:
        """Warn where the released ``tables`` (counting ``records``) show no link between their columns beyond their
        noise, neither all of them nor a named target's (swflow.tables.links: post-processing); say how the
        columns' laws pooled over them compare with one release of the one-way counts at this budget, and what to
        do."""
        import statistics
        import warnings

        from ..privacy.histogram import histogram_sensitivity, one_release_multiplier
        from ..tables.links import LINK_LEVEL, departure_p_values, pooled_noise

        sigmas = self._table_noise("this run")
        target = None if self.flow.target is None else self.schema.names.index(self.flow.target)
        subsets = [None] + ([] if target is None else [[target in pair for pair in self.pairs]])
        p_values = departure_p_values(tables, self.codec.sizes, self.pairs, noise_stds=sigmas, dataset_size=records,
                                      subsets=subsets)
        if min(p_values) < LINK_LEVEL:
            return
        alone = one_release_multiplier(self.privacy) * histogram_sensitivity(
            len(self.codec.sizes), adjacency=self.privacy.adjacency, contribution=self._contribution).value
        ratio = statistics.median(s for s in pooled_noise(self.codec.sizes, self.pairs, sigmas) if s) / alone
        warnings.warn(
            f"the {len(tables)} released pair tables depart from their columns' independence no more than their noise "
            f"would make them (chi-square, p = {p_values[0]:.2g}" + ("" if target is None else
                                                                      f"; the target's tables, p = {p_values[1]:.2g}")
            + "): the links between the samples' columns may be noise, and a classifier trained on them may learn "
            f"little. Their columns' laws, pooled over the tables, carry {ratio:.1f} times the noise one release of the "
            "one-way counts would at this budget. "
            + ("Name the column a classifier will predict (--target), r" if target is None else "R")
            + "elease fewer columns, give public rows that choose the pairs (--public-table), or raise epsilon",
            stacklevel=4)

    def _split_note(self, resolution: bool) -> str:
        """How the budget was split, in words: the releases before the pair tables (``resolution``: made), and the
        target's tables where they are apart."""
        share, v = self.resolution_share, self._values_share() if self._atoms else 0.0
        whole = "the budget" if self._size is None else "what the count of records leaves"
        named = f"the repeated-values release takes {v:g} of {whole}, " if v and resolution else ""
        before = f"{named}the resolution release {(1 - v) * share:g} and " if resolution else ""
        apart = self._target_share()
        tables = f"the pair tables {(1 - v) * (1 - share) if resolution else 1:g} of {whole}" + (
            f" (the target's tables {apart:g} of it, released apart, and the others {1 - apart:g})" if apart else "")
        return (f"{before}{tables} (of rho in zCDP, of mu^2 in Gaussian DP: multipliers z/sqrt(share)); the "
                "accountant composes them")

    def _merged_counts(self, released: list[torch.Tensor]) -> torch.Tensor:
        """The released counts of each part (the others', [the target's]) as one run's: every table in
        ``self.pairs``' order, concatenated."""
        from ..privacy.marginals import split_tables

        parts = [iter(split_tables(counts, self.codec.sizes, pairs))
                 for pairs, counts in zip(self._part_pairs(), released)]
        return torch.cat([next(parts[side]).reshape(-1) for side in self._apart()])

    def _parts_counts(self) -> list[torch.Tensor]:
        """``self._counts`` split into the parts' releases as they were made: [the others'(, the target's)]."""
        from ..privacy.marginals import split_tables

        apart = self._apart()
        tables = split_tables(self._counts, self.codec.sizes, self.pairs)
        return [torch.cat([t.reshape(-1) for t, a in zip(tables, apart) if a == side])
                for side in ((False, True) if any(apart) else (False,))]

    def _restore_pairs(self, numbers: dict, source: str) -> torch.Tensor:
        """A loaded run's released counts of every table, in ``self.pairs``' order: one release, or the target's
        tables apart, as its file holds them; a file holding them apart where the settings release them together
        is refused."""
        from ..privacy.verify import ClaimMismatch
        from .table_measurements import PAIR_TABLES, TARGET_TABLES

        self._target_apart = TARGET_TABLES in numbers
        if self._target_apart and not self._target_share():
            raise ClaimMismatch(f"{source}: it holds the target's tables apart, but its settings release every table "
                                "together: the file was edited; fit again")
        released = [torch.as_tensor(numbers[name], dtype=torch.float64)
                    for name in (PAIR_TABLES, TARGET_TABLES) if name in numbers]
        if len(released) == 1:
            return released[0]
        try:
            return self._merged_counts(released)
        except (ValueError, StopIteration) as err:
            raise ClaimMismatch(f"{source}: its two pair releases do not hold its pairs' tables ({err}); fit again"
                                ) from None

    def _table_noise(self, source: str) -> list[float]:
        """The noise std on each of ``self.pairs``' tables, from the report's named ledger (checked against the
        settings' plan first: table_measurements.check_ledger)."""
        from .table_measurements import PAIR_TABLES, TARGET_TABLES, released

        apart = self._apart()
        sigma = {side: float(released(self._report, name, source)["noise_std"])
                 for side, name in ((False, PAIR_TABLES), (True, TARGET_TABLES)) if side in apart}
        return [sigma[side] for side in apart]
