"""The resolution release of a table: every chosen column's fine one-way histogram, as a tree, released once.

A column's fine cells (swflow/tables/cells.py: its categories, its whole numbers, or its two declared bounds and up
to 4 094 round slices between them) are the leaves of a complete tree of ``branching`` b and ``levels`` L (b^L ≥
leaves; the leaves past the last fine cell are empty by construction). Every level is a partition of the records, so
a record is counted in exactly one node per level: released together, the L levels of every column are a histogram
of K = Σ L groups, and a replaced record moves one unit of count out of one node and into another in each group. ℓ2
sensitivity √(2K) with n fixed and public, the sliced histogram's (privacy/histogram.py): the same noise, the same
events and accountants, one ledger with the pair tables that follow (privacy/marginals.py).

A numeric column's tree (b = 4) lets post-processing read any range of its values from at most 2·(b − 1)·L noisy
nodes rather than from as many leaves as the range covers: its quantiles cost little noise. A categorical column
with many categories is one flat level (b = its categories): its counts are what is wanted.

Post-processing and read-back share one computation (:func:`fit_tree`): the least-squares leaves of every released
level, with their sum fixed at n (and the empty leaves at zero), in two passes over the tree, linear in its nodes
(Hay et al. 2010's computation; a dense solve was O(cells³), 1–2 s a column at 4 096 cells, now about a
millisecond). Those are the best linear unbiased estimates of the fine counts; the residual of the fit is the
projection of the noise on what the tree's identities (every node the sum of its children, every level n) leave
free, so its squared norm over σ² is exactly χ² with (released counts − fine cells + 1) degrees of freedom
(:func:`verify_levels`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .counts import ClaimMismatch, _chi_square, check_integers
from .histogram import CountTarget, ShardedCounts
from .rows import CountedRows

__all__ = ["Tree", "ONEWAY_RELEASE", "OneWayTarget", "ShardedOneWayTarget", "fit_tree", "level_counts", "split_levels", "verify_levels"]

ONEWAY_RELEASE = (
    "one release of fine one-way histograms of the columns {columns}, each as a tree of counts ({groups} levels in "
    "all, a record in one node per level), plus noise of std {sigma:.4g} on every count; L2 sensitivity "
    "sqrt(2 x {groups}). Post-processing sets each column's cells for the pair tables and decodes a cell from it")


@dataclass(frozen=True)
class Tree:
    """The released tree of one column: ``cells`` fine cells as leaves, ``branching`` b, ``levels`` L
    (b^L ≥ cells; level ℓ = 1 … L has b^ℓ nodes, the root is not released)."""

    cells: int
    branching: int
    levels: int

    @classmethod
    def for_cells(cls, cells: int, *, flat: bool) -> "Tree":
        """A flat tree (one level of ``cells`` nodes) or a 4-ary one with the fewest levels that hold them."""
        if cells < 2:
            raise ValueError(f"a released histogram needs at least 2 cells, got {cells}")
        if flat:
            return cls(cells, cells, 1)
        return cls(cells, 4, max(1, math.ceil(math.log(cells, 4) - 1e-12)))

    def nodes(self, level: int) -> int:
        return self.cells if self.levels == 1 else self.branching ** level

    @property
    def size(self) -> int:
        """Released counts: every level's nodes."""
        return sum(self.nodes(level) for level in range(1, self.levels + 1))

    def node_of(self, fine: Tensor, level: int) -> Tensor:
        return fine // self.branching ** (self.levels - level) if self.levels > 1 else fine

    def node_sums(self, leaves: Tensor, level: int) -> Tensor:
        """(nodes(level),) float64: the sum of the fine cells' ``leaves`` (cells,) under each node of ``level``."""
        return torch.zeros(self.nodes(level), dtype=torch.float64).index_add_(
            0, self.node_of(torch.arange(self.cells), level), leaves.to(torch.float64))


def level_counts(cells: Tensor, trees: list[Tree], weights: Tensor | None = None) -> Tensor:
    """Exact counts of every level of every column's tree, concatenated.

    Parameters
    ----------
    cells : Tensor, shape (m, C), int64
        Each record's fine cell in each of the C released columns (0 ≤ cells[:, j] < trees[j].cells).
    trees : the C columns' trees
    weights : Tensor, shape (m,), float64, optional: each record's weight (None: one each)

    Returns
    -------
    Tensor, shape (Σ_j trees[j].size,), int64 (float64 with weights): column j's levels 1 … L in order; every level
    sums to m (to the weights' sum).
    """
    parts = [torch.bincount(tree.node_of(cells[:, j], level), weights=weights, minlength=tree.nodes(level))
             for j, tree in enumerate(trees) for level in range(1, tree.levels + 1)]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.int64)


def split_levels(flat: Tensor, trees: list[Tree]) -> list[list[Tensor]]:
    """The concatenated counts of :func:`level_counts` back as each column's list of levels."""
    sizes = [tree.size for tree in trees]
    if flat.ndim != 1 or flat.numel() != sum(sizes):
        raise ValueError(f"expected {sum(sizes)} released counts for these columns, got shape {tuple(flat.shape)}")
    out = []
    for part, tree in zip(flat.split(sizes), trees):
        out.append(list(part.split([tree.nodes(level) for level in range(1, tree.levels + 1)])))
    return out


class OneWayTarget(CountTarget):
    """The private records' fine cells (m, all columns) int64, or a source of them read in chunks
    (``cell_chunks()``), behind ONE release of the trees of the columns ``columns`` (:meth:`release_levels`)."""

    what, unit = "the resolution release", "levels"

    def __init__(self, cells, calibration, *, noise, ledger, trees: list[Tree], columns: list[int],
                 dataset_size: int | None = None):
        self.trees, self.columns = list(trees), list(columns)
        if len(self.trees) != len(self.columns) or not self.trees:
            raise ValueError("one tree per released column, and at least one")
        super().__init__(cells, calibration, noise=noise, ledger=ledger, groups=sum(t.levels for t in self.trees),
                         dataset_size=dataset_size if dataset_size is not None else len(cells))

    def _counts(self) -> Tensor:
        if isinstance(self._data, Tensor):
            return level_counts(self._data[:, self.columns], self.trees, self.weights)
        if self.weights is not None:
            raise ValueError("weighted records are counted in memory, not read from disk in chunks")
        if isinstance(self._data, CountedRows):  # counted where the rows live (swflow/tables/engines.py)
            return self._data.level_counts(self.columns, self.trees)
        total = level_counts(torch.zeros((0, len(self.trees)), dtype=torch.int64), self.trees)
        for _, cells in self._data.cell_chunks():
            total = total + level_counts(cells[:, self.columns], self.trees)
        return total

    def release_levels(self) -> Tensor:
        """The noisy counts of every level (float64, :func:`level_counts`' layout), released once: the ledger
        event first, then the draw."""
        return self._release_counts()


class ShardedOneWayTarget(ShardedCounts, OneWayTarget):
    """One rank's contiguous shard of the records behind the one resolution release (torchrun,
    :class:`~swflow.privacy.histogram.ShardedCounts`). Built with ``dataset_size``, the records of every rank."""


def fit_tree(levels: list[Tensor], tree: Tree, *, total: float | None) -> tuple[Tensor, float, int]:
    """The least-squares fine counts of one column's released ``levels``, their sum fixed at ``total`` (n; None
    under add-remove, where n is private: the sum is then free).

    Two passes over the tree, linear in its nodes (the computation of Hay et al. 2010, with the empty leaves past
    the last fine cell held at zero). Up: each node's subtree says its sum is m ± √v (least squares of the counts
    below and at it, the noise's variance as unit): a real leaf is its count with v = 1, an empty one 0 with v = 0,
    and a node whose children's sums add to M with V = Σ v joins its own count y as m = (M + V·y) / (1 + V),
    v = V / (1 + V). Down: the root's sum (``total``, or M when free) is shared among the children in proportion to
    their v, s_c = m_c + v_c · (s − M) / V, which minimises Σ (s_c − m_c)² / v_c given Σ s_c = s.

    Returns (fine counts (tree.cells,) float64 — negative where the noise says so, the caller clips —, the
    residual sum of squares, its degrees of freedom: released counts − cells (+ 1 with a fixed total))."""
    counts = [level.to(torch.float64).reshape(-1) for level in levels]
    if [c.numel() for c in counts] != [tree.nodes(level) for level in range(1, tree.levels + 1)]:
        raise ValueError(f"expected {tree.size} counts for this tree "
                         f"({[tree.nodes(level) for level in range(1, tree.levels + 1)]} a level), got "
                         f"{[c.numel() for c in counts]}")
    real = (torch.arange(counts[-1].numel()) < tree.cells).to(torch.float64)
    means, variances = [counts[-1] * real], [real]  # level L first
    for y in reversed(counts[:-1]):
        below_mean, below_var = _child_sums(means[-1], tree), _child_sums(variances[-1], tree)
        means.append((below_mean + below_var * y) / (1 + below_var))
        variances.append(below_var / (1 + below_var))
    means, variances = means[::-1], variances[::-1]  # level 1 first
    root_mean, root_var = means[0].sum(), variances[0].sum()
    root_sum = root_mean if total is None else torch.tensor(float(total), dtype=torch.float64)
    sums = means[0] + variances[0] * (root_sum - root_mean) / root_var  # root_var > 0: at least 2 real leaves
    for mean, var in zip(means[1:], variances[1:]):
        parent_mean, parent_var = _child_sums(mean, tree), _child_sums(var, tree)
        gap = torch.where(parent_var > 0, (sums - parent_mean) / parent_var.clamp(min=1e-300), 0.0)  # 0: all empty
        sums = mean + var * torch.repeat_interleave(gap, tree.branching)
    fitted = sums[:tree.cells]  # the leaves past the last fine cell are held at zero
    rss = sum(float(((tree.node_sums(fitted, level) - y) ** 2).sum())  # every level's residual, read off the leaves
              for level, y in enumerate(counts, start=1))
    return fitted, rss, int(sum(c.numel() for c in counts) - tree.cells + (total is not None))


def _child_sums(values: Tensor, tree: Tree) -> Tensor:
    """(nodes / b,): each parent's sum of its b children's ``values`` (one level up)."""
    return values.reshape(-1, tree.branching).sum(dim=1)


def verify_levels(noisy: Tensor, trees: list[Tree], *, sigma: float, dataset_size: int | None, source: str,
                  mechanism: str = "gaussian") -> None:
    """The χ² test of released tree counts against the claimed σ and n (module docstring): the residual sum of
    squares of :func:`fit_tree` over σ², summed over the columns, refused outside the two-sided
    1 − COUNTS_FALSE_REFUSAL range (``dataset_size`` None under add-remove: n is private, the trees' sums free)."""
    try:
        levels = split_levels(torch.as_tensor(noisy, dtype=torch.float64), trees)
    except ValueError as err:
        raise ClaimMismatch(f"{source}: {err}; regenerate the run") from None
    if not sigma > 0:
        raise ClaimMismatch(f"{source}: a private resolution release with noise std {sigma}")
    check_integers(torch.as_tensor(noisy, dtype=torch.float64), mechanism, source=source)
    statistic, freedom = 0.0, 0
    for tree, counts in zip(trees, levels):
        _, rss, dof = fit_tree(counts, tree, total=dataset_size)
        statistic, freedom = statistic + rss / sigma ** 2, freedom + dof
    _chi_square(statistic, freedom, sigma=sigma, released="one-way histograms", source=source,
                disagreement=f"the released one-way histograms disagree with their own sums, or with the "
                             f"{dataset_size} rows the report claims, by more than the claimed noise allows: the counts "
                             "or the data set size were edited")
