"""Which pairs of columns a table run releases: every pair, or those that public rows say are worth their noise.

The release adds Gaussian noise of σ = z·√(2K) to every cell of K two-way tables (sensitivity √(2K) under
replace-one, √K under add-remove, k·√K for a privacy unit of k rows; z the multiplier the budget buys), so on a
wide table each extra pair costs every other pair precision: 435 pairs for 30 columns. The schema alone cannot tell pairs apart, so without public rows every pair
is released, up to a budget of MAX_SCHEMA_PAIRS tables (:func:`schema_pairs`: beyond it, neighbours in the schema;
and never a table of more than MAX_TABLE_CELLS cells whose columns are in others). Public rows (never private ones) can: a pair's *dependence* is the total variation between its public
two-way table and the product of its public one-way tables, what the pair's marginal loses if it is not measured.
:func:`choose_pairs` ranks pairs by dependence and releases the K most dependent ones (and, for a column in
none of them, its own most dependent pair: a column must have a marginal), the K that minimises

    Σ over released pairs of √(2/π)·σ(K)·cells / (2n)   +   Σ over the others of their dependence,

the expected total variation that Gaussian noise σ(K) puts on a released table of n counts, plus the dependence
left unmeasured. Every term is public: the public rows, the schema's cells, n (public under replace-one) and z.
Ties keep more pairs, and without noise every pair is kept.

Measured on made-up tables with dependence among their columns, never on Adult: `python experiments/tables_pairs.py`
(docs/tables-design.md). With 30 columns at ε = 1 the rule keeps a fraction of the 435 pairs and cuts the mean 3-way TVD
against every pair; with 10 columns, or at ε = 10, it keeps (nearly) every pair, as it should.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["pair_dependence", "choose_pairs", "schema_pairs", "MAX_SCHEMA_PAIRS", "MAX_TABLE_CELLS"]

#: the most tables the schema-alone rule releases: every pair up to 32 columns (C(32, 2) = 496)
MAX_SCHEMA_PAIRS = 496
#: the most cells a table the schema-alone rule releases may have: 256 × 256, the largest that category columns of
#: up to MAX_CATEGORY_CELLS (tables/resolution.py) give
MAX_TABLE_CELLS = 256 * 256


def schema_pairs(widths: list[int]) -> list[tuple[int, int]]:
    """The pairs released without public rows, from the schema alone (``widths``: each column's most cells, a
    category column's categories): every pair while there are at most MAX_SCHEMA_PAIRS of them; beyond (a wide
    table: 200 columns have 19 900 pairs, each costing every other its precision and the fit its time), each column
    with the next w columns in the schema's order, w = ⌊496 / C⌋ ≥ 1: about 496 tables, every column in up to 2w
    of them. The schema's order is the only public hint of which columns belong together (owners write related
    columns side by side); public rows choose better (choose_pairs).

    A pair whose table could hold more than MAX_TABLE_CELLS cells (two columns of many categories: insteval's 2 972
    students by 2 160 lecturers, 6.4 million cells over 36 710 private rows) is left out where both of its columns
    are in other tables: it costs the fit N × its cells every step, and holds a record in one cell of 175."""
    columns = len(widths)
    if columns < 2:
        raise ValueError("a table needs at least two columns to have pairs")
    pairs = list(itertools.combinations(range(columns), 2))
    if len(pairs) > MAX_SCHEMA_PAIRS:
        width = max(1, MAX_SCHEMA_PAIRS // columns)
        pairs = [(i, j) for i, j in pairs if j - i <= width]
    for pair in sorted(pairs, key=lambda p: -widths[p[0]] * widths[p[1]]):
        held = [sum(c in other for other in pairs) for c in pair]
        if widths[pair[0]] * widths[pair[1]] > MAX_TABLE_CELLS and min(held) > 1:
            pairs.remove(pair)
    return pairs


def pair_dependence(cells: np.ndarray, sizes: list[int]) -> dict[tuple[int, int], float]:
    """{(i, j): TV distance between the rows' (i, j) two-way table and the product of its one-way tables}, for every
    pair i < j. ``cells``: (m, C) int, each row's cell in each column (``sizes[j]`` cells in column j)."""
    if cells.ndim != 2 or cells.shape[1] != len(sizes) or len(cells) == 0:
        raise ValueError(f"cells must be (m >= 1, {len(sizes)}) cell indices, got shape {cells.shape}")
    out = {}
    for i, j in itertools.combinations(range(len(sizes)), 2):
        joint = np.bincount(cells[:, i] * sizes[j] + cells[:, j], minlength=sizes[i] * sizes[j])
        joint = joint.reshape(sizes[i], sizes[j]) / len(cells)
        out[(i, j)] = 0.5 * float(np.abs(joint - np.outer(joint.sum(1), joint.sum(0))).sum())
    return out


def choose_pairs(public_cells: np.ndarray, sizes: list[int], *, dataset_size: int, noise_multiplier: float,
                 moved: int = 2, fixed_tables: int = 0) -> list[tuple[int, int]]:
    """The pairs to release (module docstring), from public rows' cells ``public_cells`` ((m, C) int), the columns'
    cell counts ``sizes``, the private table's public size n = ``dataset_size`` and the release's noise multiplier z
    (0 without noise; a privacy unit's k·z). Every column keeps at least its most dependent pair: a column in no
    released table would have no marginal at all. σ(K) = z·√(moved·K): a record moves ``moved`` counts of each
    table (2 under replace-one, 1 under add-remove), and K counts ``fixed_tables`` released whatever is chosen (a
    privacy unit's tables of each column with its rows' class)."""
    if len(sizes) < 2:
        raise ValueError("a table needs at least two columns to have pairs")
    if dataset_size < 1 or not noise_multiplier >= 0 or moved not in (1, 2) or fixed_tables < 0:
        raise ValueError(f"need dataset_size >= 1, noise_multiplier >= 0, moved 1 or 2 and fixed_tables >= 0, got "
                         f"{dataset_size}, {noise_multiplier}, {moved}, {fixed_tables}")
    dependence = pair_dependence(public_cells, sizes)
    ranked = sorted(dependence, key=lambda p: (-dependence[p], p))
    noise_cost = np.array([math.sqrt(2 / math.pi) * sizes[i] * sizes[j] / (2 * dataset_size) for i, j in ranked])
    measured = np.array([dependence[p] for p in ranked])
    first = {}  # each column's first (most dependent) pair, by its rank
    for rank, pair in enumerate(ranked):
        for column in pair:
            first.setdefault(column, rank)
    first_ranks = np.array(sorted(set(first.values())))
    cost_sum, dependence_sum = np.cumsum(noise_cost), np.cumsum(measured)
    best, best_error = len(ranked), math.inf
    for k in range(1, len(ranked) + 1):
        # the k most dependent pairs, plus the first pair of each column none of them covers (ranked after k)
        extra = first_ranks[first_ranks >= k]
        noise = noise_multiplier * math.sqrt(moved * (k + len(extra) + fixed_tables)) * (
            cost_sum[k - 1] + noise_cost[extra].sum())
        error = noise + dependence_sum[-1] - dependence_sum[k - 1] - measured[extra].sum()
        if error <= best_error * (1 + 1e-12):  # ties: the most pairs
            best, best_error = k, error
    extra = [ranked[r] for r in first_ranks[first_ranks >= best]]
    return ranked[:best] + extra
