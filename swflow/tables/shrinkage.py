"""The released pair tables shrunk toward what the other tables say, before the particles are fitted to them.

A released table T of c cells carries noise of energy c·σ². Shrunk toward a centre C that its own noise does not
touch, by the positive-part James–Stein factor,

    T̂ = C + λ (T − C),    λ = max(0, 1 − c·σ² / ‖T − C‖²),

a table whose departure from C is mostly noise takes C, and one whose departure stands far above the noise stays as
released (λ ≈ 1). Two kinds of centre, both read off the release:

* **independence**: the product of the two columns' one-way laws, each pooled over every table that holds it (each
  margin weighted by the inverse of its noise variance): far more precise than any one table;
* **independence given a third column k**: Σ_c P(i, k = c) P(j, k = c) / P(k = c), from the released (i, k) and
  (j, k) tables, whose noise is independent of T's, brought to the pooled one-way laws by two sweeps of
  proportional fitting. Where two columns are linked only through a third (a card holder's balance and income,
  through being a student), that is what their table is without its noise, and independence is not.

Each table takes independence, unless a third column's centre is nearer than it by more than twice the noise of
that comparison (the nearest of many noisy centres is nearer by chance). On credit card default at ε = 1 and 10 that
took the 3-way TVD from 0.084 to 0.080 and 0.070 to 0.065 (two draws, the same noise), and on the four tuning tables
from 0.145 to 0.143 at ε = 1, within 0.001 at ε = 10 (docs/tables-design.md, "Shrinkage toward a third column").
Everything here is post-processing of the release and of the public σ and n.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

__all__ = ["shrunk_tables", "pooled_laws", "conditional_centre"]

#: sweeps of proportional fitting that bring a conditional centre to the pooled one-way laws
FITTING_SWEEPS = 2
#: a third column's centre is taken where its departure energy is below independence's by more than this many stds
#: of the difference's noise (2σ‖C − P‖, the released table's noise seen along the two centres' difference)
CENTRE_STDS = 2.0


def shrunk_tables(tables: list[Tensor], sizes: list[int], pairs: list[tuple[int, int]], *, noise_std: float,
                  dataset_size: int, priors: list[Tensor | None] | None = None) -> list[Tensor]:
    """The released tables, each shrunk toward its nearest centre (module docstring) by the positive-part
    James–Stein factor: T̂ = C + λ (T − C), λ = max(0, 1 − cells·σ² / ‖T − C‖²).

    A column with a prior (a public law over its cells: each category alike, or each stretch of a number's declared
    bounds alike, :meth:`~swflow.tables.codec.TableCodec.priors`) has its pooled counts m
    shrunk toward it, by James–Stein's factor 1 − (cells − 2)·v / ‖m − prior·n‖² for the pooled counts' noise
    variance v = σ² / Σ 1/cells_other (none for two cells, where it would not dominate), and each of its tables is
    then C̃ + λ (T − C): the departure and λ measured from the centre C on the pooled margins, C̃ the same centre on
    the shrunk ones, so that a table whose departure is shrunk away carries the shrunk margin, not its noisy one. A
    column of many categories with a few records each (hsb82's 160 schools, 11 private rows a school, pooled noise
    of 28 a count at ε = 1) is otherwise pure noise in its margin, and every pair table carries it.

    Parameters
    ----------
    tables : K tensors (sizes[i], sizes[j]) of noisy counts, for ``pairs``
    noise_std : σ of the noise on each count (0: the tables are returned as they are)
    priors : per column, None or a (sizes[c],) law its pooled one-way counts are shrunk toward
    """
    if not noise_std > 0:
        return tables
    margins, shrunk = _margins(tables, sizes, pairs, noise_std=noise_std, dataset_size=dataset_size, priors=priors)
    laws = {pair: _joint_law(table) for pair, table in zip(pairs, tables)}
    out = []
    for (i, j), table in zip(pairs, tables):
        centre, given = _nearest_centre(table, laws, i, j, margins, dataset_size=dataset_size, noise_std=noise_std)
        departure = table - centre
        keep = _keep(departure, table.numel() * noise_std ** 2)
        if given is None:
            out.append(torch.outer(shrunk[i], shrunk[j]).to(table.dtype) * dataset_size + keep * departure)
        else:
            out.append(conditional_centre(laws, i, j, given, shrunk[i], shrunk[j], dataset_size).to(table.dtype)
                       + keep * departure)
    return out


def _nearest_centre(table: Tensor, laws: dict, i: int, j: int, margins: list, *, dataset_size: float,
                    noise_std: float) -> tuple[Tensor, int | None]:
    """(the centre the (i, j) ``table`` is shrunk toward, on the pooled ``margins``; the third column it is given,
    None for independence): the nearest third column's centre among those nearer than independence by more than
    CENTRE_STDS stds of the comparison's noise (the difference of the two departure energies moves with the table's
    noise by 2⟨ε, P − C⟩, of std 2σ‖P − C‖), else independence."""
    independent = torch.outer(margins[i], margins[j]).to(table.dtype) * dataset_size
    baseline = _energy(table - independent)
    centre, given, least = independent, None, baseline
    for k in range(len(margins)):
        candidate = conditional_centre(laws, i, j, k, margins[i], margins[j], dataset_size)
        if candidate is None:
            continue
        energy, comparison_std = _energy(table - candidate), 2 * noise_std * _energy(candidate - independent) ** 0.5
        if energy < least and energy < baseline - CENTRE_STDS * comparison_std:
            centre, given, least = candidate.to(table.dtype), k, energy
    return centre, given


def conditional_centre(laws: dict, i: int, j: int, k: int, law_i: Tensor, law_j: Tensor,
                       dataset_size: float) -> Tensor | None:
    """(sizes[i], sizes[j]) float64: n · Σ_c P(i, k = c) P(j, k = c) / P(k = c), the (i, j) table were i and j
    independent given k, from the released tables' ``laws`` ({pair: law or None}, :func:`_joint_law`) of (i, k) and
    (j, k) (either order), then brought to the one-way laws ``law_i`` and ``law_j`` by FITTING_SWEEPS sweeps of
    proportional fitting. None where k is i or j or either table was not released (or holds nothing)."""
    if k in (i, j):
        return None
    first, second = _oriented(laws, i, k), _oriented(laws, j, k)
    if first is None or second is None:
        return None
    share_k = 0.5 * (first.sum(dim=0) + second.sum(dim=0))  # P(k), the two tables' margins averaged
    centre = (first / share_k.clamp(min=1e-12)) @ second.T
    rows, columns = law_i.to(torch.float64) * dataset_size, law_j.to(torch.float64) * dataset_size
    for _ in range(FITTING_SWEEPS):
        centre = centre * (rows / centre.sum(dim=1).clamp(min=1e-12))[:, None]
        centre = centre * (columns / centre.sum(dim=0).clamp(min=1e-12))[None, :]
    return centre


def _oriented(laws: dict, a: int, b: int) -> Tensor | None:
    """The law of the released (a, b) table as (sizes[a], sizes[b]), or None."""
    if (a, b) in laws:
        return laws[(a, b)]
    return None if laws.get((b, a)) is None else laws[(b, a)].T


def _joint_law(table: Tensor) -> Tensor | None:
    """A released table clipped at zero, as a law (float64, summing to 1); None where it holds nothing."""
    table = table.to(torch.float64)
    return _clipped_law(table) if float(table.clamp(min=0).sum()) > 0 else None


def _energy(values: Tensor) -> float:
    return float((values ** 2).sum())


def _margins(tables, sizes: list[int], pairs, *, noise_std: float, dataset_size: int, priors):
    """(pooled, shrunk): per column, its one-way law pooled over the tables (:func:`_pooled_counts`), and the law its
    tables are given (shrunk toward its prior where it has one); None for a column in no table. A cell whose prior
    is NaN (the cell of a category column's rest) keeps its pooled count, and the others are shrunk toward the prior
    at the mass the count of records leaves them (n less that cell's count: one count's noise, where the sum of
    theirs would carry a noise for each)."""
    margins, shrunk = [], []
    for column in range(len(sizes)):
        pooled, weight = _pooled_counts(tables, sizes, pairs, column)
        if pooled is None:
            margins.append(None)
            shrunk.append(None)
            continue
        margins.append(_law(pooled))
        if priors is None or priors[column] is None:
            shrunk.append(margins[-1])
            continue
        prior = priors[column].to(pooled.dtype)
        free = torch.isnan(prior)
        prior = prior.nan_to_num(0.0)
        left = max(dataset_size - float(pooled[free].sum()), 0.0)
        center = torch.where(free, pooled, prior / max(float(prior.sum()), 1e-12) * left)
        noise_energy = (int((~free).sum()) - 2) * noise_std ** 2 / weight  # James–Stein's p − 2: none below 3
        shrunk.append(_law(center + _keep(pooled - center, noise_energy) * (pooled - center)))
    return margins, shrunk


def pooled_laws(tables: list[Tensor], sizes: list[int], marginals: list[tuple[int, ...]]) -> list[Tensor | None]:
    """Each column's one-way law (the nearest law of its counts' total, :func:`_law`) pooled over every released
    table that holds it (:func:`_pooled_counts`); None for a column in none. Post-processing of the release."""
    laws = []
    for column in range(len(sizes)):
        pooled, _ = _pooled_counts(tables, sizes, marginals, column)
        laws.append(None if pooled is None else _law(pooled))
    return laws


def _pooled_counts(tables, sizes: list[int], marginals, column: int) -> tuple[Tensor | None, float]:
    """(``column``'s one-way counts pooled over the tables that hold it, the sum of their weights): each table's
    margin weighted by the inverse of its noise variance, the number of cells of its other columns."""
    estimates, weights = [], []
    for columns, table in zip(marginals, tables):
        if column in columns:
            axis = columns.index(column)
            estimates.append(table.sum(dim=[a for a in range(table.ndim) if a != axis]))
            weights.append(1.0 / math.prod(sizes[c] for c in columns if c != column))
    if not estimates:
        return None, 0.0
    return sum(w * e for w, e in zip(weights, estimates)) / sum(weights), sum(weights)


def _law(counts: Tensor) -> Tensor:
    """Noisy one-way counts as a law (summing to 1): their least-squares nearest non-negative counts of the same
    total (one level subtracted from every count, then those below it set to zero), not each clipped at zero. Where
    many small counts carry a noise far above them (insteval's 255 lecturers a cell each, σ ≈ 106 a pooled count
    against about 18 records), clipping each at zero adds about 0.4 of that noise (σ/√(2π)) to every one of them, and
    their share of the law with it."""
    dtype, counts = counts.dtype, counts.to(torch.float64)
    total = float(counts.sum())
    if not total > 0:
        return _clipped_law(counts).to(dtype)
    ordered = torch.sort(counts, descending=True).values
    excess = torch.cumsum(ordered, 0) - total
    kept = int(torch.nonzero(ordered - excess / torch.arange(1, len(ordered) + 1, dtype=torch.float64) > 0).max()) + 1
    law = (counts - float(excess[kept - 1]) / kept).clamp(min=0)
    return (law / float(law.sum())).to(dtype)


def _clipped_law(counts: Tensor) -> Tensor:
    """Counts clipped at zero, as a law (summing to 1)."""
    counts = counts.clamp(min=0)
    return counts / max(float(counts.sum()), 1e-12)


def _keep(departure: Tensor, noise_energy: float) -> float:
    """The positive-part James–Stein factor max(0, 1 − noise_energy / ‖departure‖²) of a departure from a center."""
    energy = _energy(departure)
    return max(0.0, 1.0 - noise_energy / energy) if energy > 0 else 0.0
