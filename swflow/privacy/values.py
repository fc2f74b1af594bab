"""The repeated-values release of a table: which values many records share exactly, chosen privately.

A sliced column (swflow/tables/cells.py) decodes a value uniformly inside its slice, so a value that many records
hold exactly (a payment of 1 000 written as its logarithm, an amount that is a whole number of dollars on a real
column) comes back smeared over its slice. This release names such values, so that each becomes a cell one value
wide of its column's fine grid (an *atom*), before the fine one-way histograms are released on that grid.

Which values exist is itself private: a value only one record holds must not be named. So this is *partition
selection* with the Gaussian mechanism: every value strictly inside a column's bounds that at least k records hold
is counted, the count gets noise of std σ, and the value is released (with its noisy count) only when the noisy
count reaches the threshold τ. A column's two bounds are counted too, whatever their counts, and released with
their noisy counts below τ or not: that they exist is public (the schema's), so naming them reveals nothing, and a
bound is a cell of the fine grid already, where a pile of records often sits (no hours worked, a test's censoring
value at the top of its range) that the trees' noise spreads over its neighbours on few records (issue 94). Two
parts make the guarantee, for neighbours D, D' (one record replaced, or added):

* the values that are candidates for both (the bounds always): their counts move by one in at most two values per
  column (one under add-remove), so over the C columns the counts are a histogram of ℓ2 sensitivity √(2C) (√C),
  the trees' and the pair tables' (the same events, composed by the same accountant, in the one ledger);
* a value strictly inside is a candidate only where at least ``PRE_THRESHOLD`` (k = 2) records hold it (most values
  of a real column are held by one record: they are never noised, which keeps the release fast). The values that
  are candidates on one side only (at most C: the changed record's, held by k records there and k − 1 on the other
  side) are released with probability P(k + Z ≥ τ) each. τ is set so that C · P(Z ≥ τ − k) ≤ δ_values, which the
  ledger charges beside the accountant's δ (the event's ``delta_sensitivity``): the run's δ is the accountant's plus
  δ_values, and the calibration leaves δ_values out of what it hands the accountant.

For the discrete Gaussian Z of scale σ on the integers, P(Z ≥ t) ≤ Φ̄(t/σ) + φ(t/σ)/σ (its normaliser is at least
√(2π)σ by Poisson summation, and its tail sum at most its first term plus the Gaussian integral beyond it); for
the float Gaussian, P(Z ≥ t) = Φ̄(t/σ). What is released afterwards reads the released values only: the atoms are
the kept values inside with the largest noisy counts that the column's tree has room for, and a bound whose noisy
count holds a cell's share of the records becomes a cell of its own (post-processing, swflow/tables/resolution.py).
"""
from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch import Tensor

from .counts import ClaimMismatch, check_integers
from .histogram import CountTarget, ShardedCounts
from .rows import CountedRows

__all__ = ["VALUES_RELEASE", "PRE_THRESHOLD", "absent_value", "ValuesTarget", "ShardedValuesTarget",
           "selection_threshold", "selection_delta", "verify_values"]

VALUES_RELEASE = (
    "one release of the values that records of the columns {columns} share: every value strictly inside a column's "
    "bounds that two records or more hold counted, and the column's two bounds whatever their counts, noise of std "
    "{sigma:.4g} on each count (L2 sensitivity sqrt(2 x {groups}) on the values that are candidates for both "
    "neighbours), a value inside named only where its noisy count reaches {threshold:g}, so that one the changed "
    "record alone makes a candidate is named with probability at most {delta:.3g} (charged to delta); the bounds, "
    "public, released with their noisy counts. Post-processing makes the named values cells of their columns' fine "
    "grids, and a bound whose noisy count holds a cell's share a cell of its own")


#: a value is counted, noised and possibly named only where at least this many records hold it exactly
PRE_THRESHOLD = 2


def absent_value(low: float) -> float:
    """What a missing value is written as in the release's rows (which hold finite numbers only): the float just
    below the column's lower bound, never counted."""
    import numpy as np

    return float(np.nextafter(np.float64(low), -np.inf))


def _strictly_inside(values: Tensor, low: float, high: float) -> Tensor:
    """(k,) bool: which of a column's released or counted ``values`` lie strictly between its bounds (the others are
    the bounds, public candidates counted whatever they hold)."""
    return (values > low) & (values < high)


def _tail(t: float, *, noise_std: float, mechanism: str) -> float:
    """P(Z ≥ t) for the release's noise Z of std ``noise_std`` (an upper bound for the discrete Gaussian)."""
    from scipy.stats import norm

    tail = float(norm.sf(t / noise_std))
    if mechanism == "discrete-gaussian":
        tail += float(norm.pdf(t / noise_std)) / noise_std
    return tail


def selection_delta(threshold: float, *, noise_std: float, columns: int, mechanism: str) -> float:
    """C · P(k + Z ≥ τ): the probability that one of the C values that are candidates on one side of neighbours
    only (held by k = PRE_THRESHOLD records there) is named."""
    return columns * _tail(threshold - PRE_THRESHOLD, noise_std=noise_std, mechanism=mechanism)


def selection_threshold(*, noise_std: float, columns: int, delta: float, mechanism: str) -> float:
    """The lowest τ (a whole number for the discrete Gaussian's integer counts) with
    :func:`selection_delta` (τ) ≤ ``delta``."""
    from scipy.stats import norm

    if not (noise_std > 0 and 0 < delta < 1 and columns >= 1):
        raise ValueError(f"a selection threshold needs noise_std > 0, 0 < delta < 1 and columns >= 1, got "
                         f"{noise_std}, {delta}, {columns}")
    threshold = PRE_THRESHOLD + noise_std * float(norm.isf(delta / columns))  # exact for the float Gaussian
    if mechanism != "discrete-gaussian":
        return threshold
    threshold = math.ceil(threshold)
    while selection_delta(threshold, noise_std=noise_std, columns=columns, mechanism=mechanism) > delta:
        threshold += 1  # the discrete bound's extra term: a step or two
    return float(threshold)


class ValuesTarget(CountTarget):
    """The private records' values (m, C) float64 of the C sliced columns (a missing value written as
    :func:`absent_value`), behind ONE release of the values they share (:meth:`release_values`). ``inside``: each
    column's bounds (low, high), counted always, with the candidate values strictly between them; ``delta``: what
    naming a value that the changed record alone makes a candidate may cost (:func:`selection_threshold`)."""

    what, unit = "the repeated-values release", "columns"

    def __init__(self, values: Tensor, calibration, *, noise, ledger, inside: list[tuple[float, float]],
                 delta: float, dataset_size: int | None = None, per_unit: int = 1):
        """``per_unit`` m: the rows of ``values`` are the slots of privacy units, m each (a unit's distinct values
        of a column, at most m of them: swflow/privacy/units.py), so one unit moves up to m counts of every column
        by one each: the release's groups are C·m, and a unit makes at most C·m values candidates alone."""
        if len(inside) != values.shape[1] or not inside:
            raise ValueError("one interval of candidate values per released column, and at least one")
        if not 0 < delta < 1:
            raise ValueError(f"the selection's delta must be in (0, 1), got {delta}")
        if isinstance(per_unit, bool) or not isinstance(per_unit, int) or per_unit < 1:
            raise ValueError(f"per_unit is a whole number >= 1, got {per_unit!r}")
        self.inside, self.delta, self.per_unit = list(inside), float(delta), per_unit
        super().__init__(values, calibration, noise=noise, ledger=ledger, groups=len(self.inside) * per_unit,
                         dataset_size=dataset_size if dataset_size is not None else len(values))

    def _event(self):
        """The count release's event with the selection's δ: naming a value that the changed record alone makes a
        candidate."""
        return replace(super()._event(), delta_sensitivity=self.delta)

    def threshold(self) -> float:
        return selection_threshold(noise_std=self.count_noise_std(), columns=self.groups, delta=self.delta,
                                   mechanism=self._calibration.plan.noise)

    def release_values(self) -> list[tuple[Tensor, Tensor]]:
        """Each column's named values (rising, float64) and their noisy counts (float64), released once: the
        ledger event first (its δ the selection's), then the draw; the column's two bounds among them whatever
        their counts. Without privacy, every value PRE_THRESHOLD records share, and the bounds. Kept as
        ``released`` (public)."""
        self._check_budget()
        distinct = self._candidates(self._distinct())
        if self._calibration is None:
            self.released = [(v, c.to(torch.float64)) for v, c in distinct]
            return self.released
        self.ledger.record(self._event())  # the event first, then the draw
        sigma, threshold = self.count_noise_std(), self.threshold()
        self.released = []
        for (values, counts), (low, high) in zip(distinct, self.inside):
            noisy = self._noisy(counts, sigma) if len(counts) else counts.to(torch.float64)
            kept = (noisy >= threshold) | ~_strictly_inside(values, low, high)
            self.released.append((values[kept], noisy[kept]))
        return self.released

    def _distinct(self) -> list[tuple[Tensor, Tensor]]:
        """Each column's distinct values within its bounds (rising, float64) and their exact counts (int64)."""
        if isinstance(self._data, CountedRows):  # counted where the rows live: the candidates only
            return self._data.distinct_values(list(range(len(self.inside))), self.inside, PRE_THRESHOLD)
        distinct = []
        for j, (low, high) in enumerate(self.inside):
            column = self._data[:, j]
            values, counts = torch.unique(column[(column >= low) & (column <= high)], return_counts=True)
            distinct.append((values.to(torch.float64), counts))
        return distinct

    def _candidates(self, distinct: list[tuple[Tensor, Tensor]]) -> list[tuple[Tensor, Tensor]]:
        """The values inside at least PRE_THRESHOLD records hold, and the two bounds (a count of 0 where no record
        holds one), with their counts (a sharded target's after the sum)."""
        out = []
        for (values, counts), (low, high) in zip(distinct, self.inside):
            inside = _strictly_inside(values, low, high) & (counts >= PRE_THRESHOLD)
            held = [counts[values == bound].sum().reshape(1) for bound in (low, high)]
            low_, high_ = (torch.tensor([bound], dtype=torch.float64) for bound in (low, high))
            out.append((torch.cat([low_, values[inside].to(torch.float64), high_]),
                        torch.cat([held[0], counts[inside], held[1]])))
        return out


class ShardedValuesTarget(ShardedCounts, ValuesTarget):
    """One rank's contiguous shard of the records behind the one repeated-values release (torchrun): every rank's
    distinct values and counts are gathered and summed, so every rank holds the counts one process makes on all
    the records, and rank 0 draws the noise and shares it (:class:`~swflow.privacy.histogram.ShardedCounts`).
    Built with ``dataset_size``, the records of every rank."""

    def _distinct(self) -> list[tuple[Tensor, Tensor]]:
        import torch.distributed as dist

        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, super()._distinct())
        merged = []
        for parts in zip(*gathered):
            values, inverse = torch.unique(torch.cat([v for v, _ in parts]), return_inverse=True)
            counts = torch.zeros(len(values), dtype=torch.int64).index_add_(
                0, inverse, torch.cat([c for _, c in parts]))
            merged.append((values, counts))
        return merged


def verify_values(released: list[tuple[Tensor, Tensor]], *, event: dict, columns: int,
                  inside: list[tuple[float, float]], source: str, per_unit: int = 1) -> None:
    """Refuse a repeated-values release that its ledger event does not allow: the event's K must be the C columns
    (times ``per_unit``, the values a privacy unit may name in each) and its δ positive; every named value within
    its column's bounds, the values rising; every noisy count of a value strictly inside at or above the threshold
    that the event's σ and δ give (an edited count, or a δ claimed smaller than the threshold paid for, is refused;
    a bound's count, public whatever it is, may be anything); integer counts for the discrete Gaussian. A release
    written before the bounds were counted holds none."""
    if len(released) != columns or event["n_projections"] != columns * per_unit or event.get("contribution", 1) != 1:
        raise ClaimMismatch(f"{source}: its repeated-values release is not one of its {columns} sliced columns"
                            f"{'' if per_unit == 1 else f' with {per_unit} values a unit'}; fit again")
    sigma, delta, mechanism = float(event["noise_std"]), float(event["delta_sensitivity"]), event["mechanism"]
    if not (sigma > 0 and 0 < delta < 1):
        raise ClaimMismatch(f"{source}: a private repeated-values release with noise std {sigma} and delta {delta}")
    threshold = selection_threshold(noise_std=sigma, columns=columns * per_unit, delta=delta, mechanism=mechanism)
    for (values, counts), (low, high) in zip(released, inside):
        values, counts = torch.as_tensor(values, dtype=torch.float64), torch.as_tensor(counts, dtype=torch.float64)
        if values.shape != counts.shape or values.ndim != 1 or not torch.isfinite(values).all() or (
                values.diff() <= 0).any() or (len(values) and (values[0] < low or values[-1] > high)):
            raise ClaimMismatch(f"{source}: its named values are not distinct rising values within their bounds; "
                                "the file was edited: fit again")
        inside = _strictly_inside(values, low, high)
        if bool(inside.any()) and float(counts[inside].min()) < threshold:
            raise ClaimMismatch(f"{source}: a named value's noisy count is below the threshold {threshold:g} that "
                                f"its noise (std {sigma:.4g}) and delta {delta:.3g} set: the counts or the claim "
                                "were edited; fit again")
        check_integers(counts, mechanism, source=source)
