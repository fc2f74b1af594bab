"""Resolution that follows the data: each column's cells set from its released fine histogram (or from public rows).

The pair tables can only afford a few cells per column (their noise grows with the cells), so where a column's
cells fall decides what survives: equal-width bins on wide declared bounds put most of a skewed column in one cell.
Here the cells come from the column's fine one-way histogram, released first at a share of the budget
(swflow/privacy/oneway.py), or counted on public rows at no cost:

0. Before the trees, the values that many records of a sliced column share are named (swflow/privacy/values.py);
   :func:`released_atoms` makes them atoms of the column's grid (cells one value wide) within its tree's leaves.
   The same release counts the column's two bounds: :func:`bound_piles` makes one that holds a cell's share a pile,
   taken out of the trees before their fit and given its own count (:func:`fine_weights`).
1. :func:`fine_weights`: the released tree's least-squares fine counts (:func:`~swflow.privacy.oneway.fit_tree`),
   allocated top-down: a node's mass goes to its children in proportion to their fitted counts clipped at zero, or
   evenly over its fine cells when none is positive, that split shrunk toward the even one by James–Stein's factor
   of the children's departure from it against the noise (a node whose children differ by the noise alone shares
   evenly; a pile stands). No threshold: reading counts below 2σ as zero (to keep the
   noise of empty leaves out of a number's empty tails) zeroed true mass at small n·ε and cost more than it saved
   on the tuning tables (mean 3-way TVD at ε = 1, clipped / thresholded at 2σ: medexp 0.315 / 0.387, k401ksubs
   0.126 / 0.159, diamonds 0.172 / 0.179, cps1988 0.065 / 0.062; equal at ε = 10; docs/tables-design.md).
2. :func:`column_cells`: a number's m cells start at the weights' quantiles k/m; a fine cell that holds more than
   1/m of the column (a pile: a censoring value, zero amounts, a code) is a cell of its own, cut on both sides, so
   its neighbours below and above keep cells of their own; a category column with more categories than
   its cells keeps its largest but one as cells and merges the rest into one; a declared missing number keeps its
   own cell.
3. Decoding draws a fine cell inside a cell by the weights (:class:`~swflow.tables.cells.ColumnCells`).

The number of cells m follows the budget and n (:func:`cells_per_column`): a pair table of m × m cells over n
records holds about n/m² records a cell, against its noise σ_pair; m is the largest with n/m² ≥ ``CELLS_RULE``·σ_pair,
clamped to [``MIN_CELLS``, ``MAX_CELLS``]. A category column is not cut by that rule (:func:`cells_of`): it keeps
every category as a cell of its own, up to ``MAX_CATEGORY_CELLS``, and past it all of them where the noise allows
(:func:`category_cells`). Quantile cells merge neighbouring numbers, which
resemble each other; merged categories are ranked by their noisy counts only, so an area or a storm lands in a cell
with others that share nothing with it, and the decoder draws it back inside that cell independently of every other
column: a bias that no budget removes. Its own cell costs noise instead (its row of a pair table), and the noise
cost less on the two tables that showed it (storms' 260 names, txhousing's 46 areas) and on two tables held back
until the rule was fixed (hsb82's schools, insteval's students and lecturers; docs/tables-design.md).
Everything here reads released counts or public rows only.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..privacy.oneway import Tree, fit_tree
from .cells import ColumnCells, FineGrid
from .schema import Column

__all__ = ["atom_room", "warn_wide_bounds", "NARROW_SHARE", "RESOLUTION_SHARE", "VALUES_SHARE", "CELLS_RULE", "MIN_CELLS", "MAX_CELLS", "MAX_CATEGORY_CELLS",
           "CATEGORY_CELLS_CEILING", "category_cells",
           "cells_per_column", "cells_of", "needs_release", "tree_of", "released_atoms", "bound_piles", "fine_weights",
           "column_cells"]

#: the share of the budget (of ρ, or of μ²) that the fine one-way histograms take; with CELLS_RULE chosen on the
#: benchmark's tuning tables only (experiments/tables_resolution.py; docs/tables-design.md)
RESOLUTION_SHARE = 0.3
#: the share of the budget that the repeated-values release takes (``repeated_values``, on by default), before the
#: resolution release and the pair tables split the rest (chosen on the tuning tables: docs/tables-design.md)
VALUES_SHARE = 0.1
#: records a pair-table cell should hold per unit of its noise std (the cells rule)
CELLS_RULE = 4.0
MIN_CELLS, MAX_CELLS = 6, 32
#: a category column keeps this many of its categories as cells of their own whatever the noise (beyond, all of them
#: where :func:`category_cells` allows, else its largest but one and a cell for the rest)
MAX_CATEGORY_CELLS = 256
#: the most cells a category column gets, as many as a number's fine grid has (cells.FINE_CELLS): a cap on the
#: fit's memory and cost (each particle holds a law over every column's cells; a table, cells × its partner's)
CATEGORY_CELLS_CEILING = 4096


def cells_per_column(*, dataset_size: int, pair_noise_std: float) -> int:
    """m = ⌊√(n / (CELLS_RULE · σ_pair))⌋ in [MIN_CELLS, MAX_CELLS] (MAX_CELLS without noise)."""
    if not pair_noise_std > 0:
        return MAX_CELLS
    return int(min(MAX_CELLS, max(MIN_CELLS, math.floor(math.sqrt(dataset_size / (CELLS_RULE * pair_noise_std))))))


def category_cells(*, dataset_size: float, pooled_noise_std: float) -> int:
    """How many categories a column may keep as cells of their own past MAX_CATEGORY_CELLS: as many as give a
    category, on average, CELLS_RULE × the noise std of its count pooled over the column's tables (the numbers' rule,
    records per cell against noise, read on the count the particles start from), n / (CELLS_RULE · σ_pooled), up to
    CATEGORY_CELLS_CEILING (the ceiling without noise)."""
    if not pooled_noise_std > 0:
        return CATEGORY_CELLS_CEILING
    return int(min(CATEGORY_CELLS_CEILING, dataset_size / (CELLS_RULE * pooled_noise_std)))


def cells_of(column: Column, cells: int, *, categories: int = 0) -> int:
    """``column``'s number of cells where the rule gives ``cells``: a category column's every category where they
    are at most MAX_CATEGORY_CELLS or at most ``categories`` (:func:`category_cells`), else MAX_CATEGORY_CELLS (its
    largest but one, and one cell for the rest); at least ``cells`` (fewer categories are each a cell anyway). Any
    other column's ``cells``.

    All or nothing past MAX_CATEGORY_CELLS: a column with every category a cell needs no one-way release (its share
    of the budget goes to the pair tables), where a few more cells still pay for one and still merge the rest
    (insteval's students and lecturers at ε = 1: 494 cells each, 3-way TVD 0.591 against 0.581 at 256;
    docs/tables-design.md, "Many categories")."""
    if column.kind != "categorical":
        return cells
    values = FineGrid(column).values
    return max(cells, values if values <= max(MAX_CATEGORY_CELLS, categories) else MAX_CATEGORY_CELLS)


def needs_release(column: Column, cells: int) -> bool:
    """Whether ``column`` has more fine cells than ``cells``: a number (not a whole-number column with at most that
    many values) or a categorical column with more categories."""
    grid = FineGrid(column)
    return grid.values > cells


def tree_of(column: Column, atoms: tuple[float, ...] = ()) -> Tree:
    """The released tree of a column's fine cells: flat for categories, 4-ary for numbers. Its levels are those of
    the schema's grid, whatever ``atoms`` were released (:func:`released_atoms` keeps them within its leaves), so
    the budget is calibrated before they are known."""
    plain = Tree.for_cells(FineGrid(column).size, flat=column.kind == "categorical")
    return plain if not atoms else Tree(FineGrid(column, tuple(atoms)).size, plain.branching, plain.levels)


def atom_room(column: Column) -> int:
    """How many named values a column's tree has spare leaves for (an atom adds at most two fine cells): none where
    its fine grid fills the tree (a real column on a log scale), so the run names no value there."""
    tree = tree_of(column)
    return (tree.branching ** tree.levels - tree.cells) // 2


def released_atoms(column: Column, values, counts) -> tuple[float, ...]:
    """A sliced column's atoms from its released repeated ``values`` and their noisy ``counts``
    (swflow/privacy/values.py): those strictly inside its bounds (the bounds are cells already) with the largest
    counts that its tree has leaves for (:func:`atom_room`), rising. Post-processing of the release."""
    values, counts = np.asarray(values, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    low, high = FineGrid(column).ends
    inside = (values > low) & (values < high)
    values, counts = values[inside], counts[inside]
    return tuple(float(v) for v in np.sort(values[np.argsort(-counts, kind="stable")[:atom_room(column)]]))


def bound_piles(grid: FineGrid, values, counts, cells: int, total: float) -> dict[int, float]:
    """{fine cell: count} of a sliced column's bounds (on ``grid``) whose noisy count in the repeated-values release
    (``values``, ``counts``) holds more than a cell's share of its ``total`` records (1/``cells``, the pile rule
    of :func:`column_cells`), for :func:`fine_weights`; two that claim more than every record scaled to share them.
    A release without the bounds (written before they were counted) gives none.

    A bound is a fine cell already, but on few records the trees' noise spreads a pile there over its neighbours:
    psid1976's 0 hours worked (162 of 376 private records) came back as 0.5 % of the samples at ε = 1; the bound's
    count, one value of a release of a few columns, carries σ 65 where a tree's node carries 128
    (docs/tables-design.md, "Piles"). Post-processing of the release."""
    values, counts = np.asarray(values, dtype=np.float64), np.asarray(counts, dtype=np.float64)
    piles = {}
    for cell, bound in zip((0, grid.values - 1), grid.ends):
        count = counts[values == bound]
        if len(count) and float(count[0]) > total / cells:
            piles[cell] = float(count[0])
    held = sum(piles.values())
    return {cell: count * min(1.0, total / held) for cell, count in piles.items()}


def fine_weights(levels: list[torch.Tensor], tree: Tree, *, total: float, noise_std: float = 0.0,
                 counts_total: bool = True, piles: dict[int, float] | None = None) -> np.ndarray:
    """(tree.cells,) non-negative weights summing to ``total``, from one column's released ``levels`` (step 1 of
    the module docstring; exact counts are followed as they are). ``counts_total``: whether the levels count
    ``total`` records, the least-squares fit's root then held at it; False where they count a mass of their own (a
    privacy unit's trees, each unit weighted by its spread: privacy.units.tree_weights), whose sum the fit leaves
    free (held at ``total`` instead, the weights' shape followed a smaller mass by pulling every node down alike).

    ``noise_std`` (σ of the released counts; 0 for exact ones): each node's split among its children is shrunk
    toward the even split (by fine cells) by the positive-part James–Stein factor of its children's departure from
    it (:func:`_node_splits`), so a node whose children differ by about the noise shares its mass evenly and a pile
    or a real slope stands.

    ``piles`` ({fine cell: count}, :func:`bound_piles`): cells that another release counts, each taken out of every
    node above it before the fit, the rest fitted at ``total`` less their sum, then set to their counts. Setting a
    pile's weight alone and scaling the others would keep the mass the trees' noise spread from it over its
    neighbours there (psid1976's hours at ε = 10: 1 to 19 hours worked a cell of its own, that almost no one
    works)."""
    if piles:
        cells, held = torch.tensor(list(piles)), torch.tensor(list(piles.values()), dtype=torch.float64)
        levels = [level.to(torch.float64) - torch.zeros(len(level), dtype=torch.float64).index_add_(
            0, tree.node_of(cells, depth), held) for depth, level in enumerate(levels, start=1)]
        rest = total - sum(piles.values())
        weights = fine_weights(levels, tree, total=rest, noise_std=noise_std, counts_total=counts_total)
        weights[list(piles)] = 0.0  # what the fit left there is the pile's count's noise
        weights *= rest / max(float(weights.sum()), 1e-300)
        weights[list(piles)] = list(piles.values())
        return weights
    fitted, _, _ = fit_tree(levels, tree, total=total if counts_total else None)
    mass = torch.tensor([float(total)], dtype=torch.float64)
    for level in range(1, tree.levels + 1):
        nodes = tree.nodes(level)
        parent = torch.arange(nodes) // (tree.branching if level > 1 else nodes)
        share = _node_splits(tree.node_sums(fitted, level), tree.node_sums(torch.ones(tree.cells), level), parent,
                             len(mass), noise_var=noise_std ** 2)
        mass = mass[parent] * share
    return mass.numpy()[:tree.cells]  # the leaves past the last fine cell hold nothing


def _node_splits(value: torch.Tensor, real: torch.Tensor, parent: torch.Tensor, parents: int, *,
                 noise_var: float) -> torch.Tensor:
    """(nodes,): each node's share of its parent's mass, from the nodes' fitted counts ``value`` and fine cells
    ``real`` (``parent``: each node's parent of ``parents``).

    Without noise, the fitted counts clipped at zero, in proportion (evenly by fine cells where none is positive).
    With noise, that split is moved toward the even one e: s = e + λ (clipped split − e), λ = max(0, 1 − (b − 1)·σ²
    / ‖d‖²) for a parent's b children holding fine cells and their departure d = value − (Σ value)·e. A fitted
    count's variance is at most σ² (a leaf's; a node's is less, pooled with its subtree), so λ errs toward even.
    At ε = 1 the clipped splits of a continuous column's deep nodes are mostly noise: ISLR's credit default's
    balance and income came back 0.050 and 0.059 from the scorer's deciles (AIM: 0.026 and 0.041), the private rows
    decoded through those weights as badly (docs/tables-design.md, "Inside a cell")."""
    def per_parent(x):
        return torch.zeros(parents, dtype=torch.float64).index_add_(0, parent, x)

    kept = value.clamp(min=0)
    kept_sum, even = per_parent(kept)[parent], real / per_parent(real)[parent].clamp(min=1)
    split = torch.where(kept_sum > 0, kept / kept_sum.clamp(min=1e-300), even)
    if not noise_var > 0:
        return split
    departure = torch.where(real > 0, value - per_parent(value)[parent] * even, 0.0)
    energy, live = per_parent(departure ** 2), per_parent((real > 0).to(torch.float64))
    keep = (1 - (live - 1).clamp(min=0) * noise_var / energy.clamp(min=1e-300)).clamp(min=0)
    return even + keep[parent] * (split - even)


def column_cells(column: Column, weights: np.ndarray | None, cells: int,
                 atoms: tuple[float, ...] = ()) -> ColumnCells:
    """A column's cells from its fine ``weights`` on the grid with ``atoms`` (step 2; None: the schema's defaults
    with ``cells`` bins)."""
    if weights is None or not needs_release(column, cells):
        return ColumnCells.uniform(column, bins=cells)
    grid = FineGrid(column, tuple(atoms))
    values = np.clip(np.asarray(weights, dtype=np.float64)[:grid.values], 0, None)
    if column.kind == "categorical":
        order = np.argsort(-values, kind="stable")
        return ColumnCells(grid, [*range(cells), grid.values], order=order, weights=weights)
    total = values.sum()
    if not total > 0:
        return ColumnCells(grid, np.unique(np.round(np.linspace(0, grid.values, cells + 1)).astype(np.int64)),
                           weights=None)
    cdf = np.cumsum(values) / total
    ends = np.searchsorted(cdf, np.arange(1, cells) / cells, side="left") + 1
    # a pile (a fine cell of more than 1/m of the column) is a cell of its own, cut on both sides: the quantiles
    # alone cut after it, and merged every value below it into its cell (a class beside it lost its link)
    piles = np.flatnonzero(values > total / cells)
    cuts = np.concatenate([[0], np.clip(ends, 1, grid.values), piles, piles + 1, [grid.values]])
    return ColumnCells(grid, np.unique(np.clip(cuts, 0, grid.values)), weights=weights)


#: a linear numeric column whose released mass, all but 5 %, lies in under this share of its fine cells is warned of
NARROW_SHARE = 0.01


def warn_wide_bounds(schema, weights: dict) -> None:
    """Warn (post-processing of the released trees, no privacy spent) where a linear numeric column's released rows
    fill under NARROW_SHARE of its declared bounds: a count or an amount then wants "scale": "log", or public
    knowledge narrower bounds; its cells are set from the release either way."""
    import warnings

    for j, w in weights.items():
        column = schema.columns[j]
        if column.kind != "numeric" or column.temporal or column.scale != "linear" or len(w) < 200:
            continue
        share = np.cumsum(w) / max(float(np.sum(w)), 1e-300)
        filled = int(np.searchsorted(share, 0.975)) - int(np.searchsorted(share, 0.025)) + 1
        if filled < NARROW_SHARE * len(w):
            warnings.warn(f"column {column.name!r}: the released counts put all but 5 % of the rows in under "
                          f"{NARROW_SHARE:.0%} of its declared bounds [{column.low:g}, {column.high:g}]: declare "
                          '"scale": "log" if it is a count or an amount, or narrower bounds where public knowledge '
                          "allows (docs/tables.md)", UserWarning, stacklevel=2)
