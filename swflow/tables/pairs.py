"""Which pairs of columns a table run releases: every pair, or those that public rows say are worth their noise.

The release adds Gaussian noise of σ = z·√(2K) to every cell of K two-way tables (sensitivity √(2K) under
replace-one, √K under add-remove, k·√K for a privacy unit of k rows; z the multiplier the budget buys), so on a
wide table each extra pair costs every other pair precision: 435 pairs for 30 columns. The schema alone cannot tell
pairs apart, so without public rows every pair is released, up to a budget of MAX_SCHEMA_PAIRS tables
(:func:`schema_pairs`: beyond it, neighbours in the schema, or, where the budget makes it informative, half of the
tables chosen privately by the data: swflow/pipeline/table_choice.py; and never a table of more than
MAX_TABLE_CELLS cells whose columns are in others). Public rows (never private ones) can: a pair's *dependence* D is the total variation
between its public two-way table and the product of its public one-way tables, what the pair's marginal loses if it
is not measured. :func:`choose_pairs` ranks pairs by dependence and releases the K most dependent ones (and, for a
column in none of them, its own most dependent pair: a column must have a marginal), the K that minimises

    Σ over released pairs of √((κ·N)² + ((1 − κ)·D)²)   +   Σ over the others of D,

N = √(2/π)·σ(K)·cells / (2n) the expected total variation that Gaussian noise σ(K) puts on a released table of n
counts, and κ the share of the table that its shrinkage toward independence keeps (swflow.tables.shrinkage,
positive-part James–Stein: about θ² / (θ² + cells·σ(K)²) for a departure of energy θ² = n²·‖p(a, b) − p(a) p(b)‖²,
and a little more by chance): the table's expected error once shrunk (:func:`released_error`), plus the dependence
left unmeasured. A table whose departure stands far above its noise pays its whole noise; one whose departure is far
below it becomes its centre and loses its dependence, as if it were left out; a pair of many cells is not left out
for its size alone. Every term is public: the public rows, the schema's cells, n (public under replace-one) and z.
Ties keep more pairs, and without noise every pair is kept.

Measured on made-up tables with dependence among their columns (`python experiments/tables_pairs.py`) and on real
tables with the private rows standing in for public ones (docs/tables-design.md, "Public rows choose the pairs"):
with 30 made-up columns at ε = 1 the rule keeps 170 of the 435 pairs and cuts the mean 3-way TVD against every
pair; with 10 columns, or at ε = 10, it keeps (nearly) every pair, as it should. Priced at its whole noise N (the
rule before shrinkage was counted), a table of many cells cost more than it held: storms at ε = 1 kept 12 of its
66 pairs and scored 0.07 of 3-way TVD above every pair; this rule keeps 40, 0.006 above.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

__all__ = ["pair_dependence", "pair_departures", "choose_pairs", "released_error", "schema_pairs", "target_share",
           "MAX_SCHEMA_PAIRS", "MAX_TABLE_CELLS", "TARGET_SHARE"]

#: positive-part James–Stein keeps about CHANCE_KEPT/√cells of a table of pure noise (its factor is above 0
#: where the noise's energy happens to exceed its mean): fitted to its Monte Carlo TV distance over 4 to 2 500
#: cells, checked from 4 to 400 in tests/test_table_pairs.py
CHANCE_KEPT = 0.5
#: the most tables the schema-alone rule releases: every pair up to 32 columns (C(32, 2) = 496)
MAX_SCHEMA_PAIRS = 496
#: the most cells a table the schema-alone rule releases may have: 256 × 256, the largest that category columns of
#: up to MAX_CATEGORY_CELLS (tables/resolution.py) give
MAX_TABLE_CELLS = 256 * 256
#: the least share of the pair tables' budget (of ρ, or of μ²) that a named target's tables take, released apart
#: where they are fewer than that share of the tables (docs/tables-design.md, "The target's tables apart")
TARGET_SHARE = 0.3


def target_share(tables: int, target_tables: int) -> float:
    """The share of the pair tables' budget that a target's ``target_tables`` of the ``tables`` tables take in a
    release of their own: TARGET_SHARE where they are fewer than that share of the tables (each then carries less
    noise than the others: σ ∝ √(K_t / share)), else 0, one release for all (they hold that share already)."""
    if not 0 <= target_tables <= tables:
        raise ValueError(f"the target's tables are some of the tables: got {target_tables} of {tables}")
    return TARGET_SHARE if 0 < target_tables < TARGET_SHARE * tables else 0.0


def schema_pairs(widths: list[int], *, target: int | None = None) -> list[tuple[int, int]]:
    """The pairs released without public rows, from the schema alone (``widths``: each column's most cells, a
    category column's categories): every pair while there are at most MAX_SCHEMA_PAIRS of them; beyond (a wide
    table: 200 columns have 19 900 pairs, each costing every other its precision and the fit its time), each column
    with the next w columns in the schema's order, w = ⌊496 / C⌋ ≥ 1: about 496 tables, every column in up to 2w
    of them. The schema's order is the only public hint of which columns belong together (owners write related
    columns side by side); public rows choose better (choose_pairs). A ``target`` column (a classifier's, by its
    index) keeps its pair with every column, and the neighbours are then each column with the next one only (w = 1),
    so that about half of the tables are the target's: its links are the ones a classifier needs, the schema's order
    left most of them out (an 86-column table whose target was measured with 10 columns of 85), and each neighbour's
    table costs them precision (σ ∝ √K). On that table, 169 tables in place of 495 took the AUC of a classifier
    trained on the samples from 0.57–0.65 to 0.63–0.68 at ε = 10, for 0.008 of 3-way TVD (docs/tables-design.md).

    A pair whose table could hold more than MAX_TABLE_CELLS cells (two columns of many categories: insteval's 2 972
    students by 2 160 lecturers, 6.4 million cells over 36 710 private rows) is left out where both of its columns
    are in other tables: it costs the fit N × its cells every step, and holds a record in one cell of 175."""
    columns = len(widths)
    if columns < 2:
        raise ValueError("a table needs at least two columns to have pairs")
    pairs = list(itertools.combinations(range(columns), 2))
    if len(pairs) > MAX_SCHEMA_PAIRS:
        width = 1 if target is not None else max(1, MAX_SCHEMA_PAIRS // columns)
        pairs = [(i, j) for i, j in pairs if j - i <= width or target in (i, j)]
    for pair in sorted(pairs, key=lambda p: -widths[p[0]] * widths[p[1]]):
        held = [sum(c in other for other in pairs) for c in pair]
        if widths[pair[0]] * widths[pair[1]] > MAX_TABLE_CELLS and min(held) > 1:
            pairs.remove(pair)
    return pairs


def pair_dependence(cells: np.ndarray, sizes: list[int]) -> dict[tuple[int, int], float]:
    """{(i, j): TV distance between the rows' (i, j) two-way table and the product of its one-way tables}, for every
    pair i < j. ``cells``: (m, C) int, each row's cell in each column (``sizes[j]`` cells in column j)."""
    return {pair: tv for pair, (tv, _) in pair_departures(cells, sizes).items()}


def pair_departures(cells: np.ndarray, sizes: list[int]) -> dict[tuple[int, int], tuple[float, float]]:
    """{(i, j): (the TV distance of :func:`pair_dependence`, the squared ℓ2 distance Σ (p(a, b) − p(a) p(b))²)} for
    every pair i < j, in laws (the rows' share of each cell). ``cells``: (m, C) int."""
    if cells.ndim != 2 or cells.shape[1] != len(sizes) or len(cells) == 0:
        raise ValueError(f"cells must be (m >= 1, {len(sizes)}) cell indices, got shape {cells.shape}")
    out = {}
    for i, j in itertools.combinations(range(len(sizes)), 2):
        joint = np.bincount(cells[:, i] * sizes[j] + cells[:, j], minlength=sizes[i] * sizes[j])
        joint = joint.reshape(sizes[i], sizes[j]) / len(cells)
        departure = joint - np.outer(joint.sum(1), joint.sum(0))
        out[(i, j)] = (0.5 * float(np.abs(departure).sum()), float((departure ** 2).sum()))
    return out


def released_error(dependence: np.ndarray, energy: np.ndarray, cells: np.ndarray, *, variance: float,
                   dataset_size: int) -> np.ndarray:
    """The expected TV distance from its pair's law that a released table keeps once shrunk toward independence
    (swflow.tables.shrinkage), per table: √((κ·N)² + ((1 − κ)·D)²), with N = √(2/π)·σ·cells / (2n) the noise's own TV
    distance on an unshrunk table and D its ``dependence``. κ = λ + (1 − λ)·CHANCE_KEPT/√cells is the share of the
    table that shrinkage keeps: λ = θ² / (θ² + cells·σ²) what an oracle keeps of a departure of ``energy`` θ²
    (counts², n²·‖p(a, b) − p(a) p(b)‖²), and the rest what positive-part James–Stein keeps by chance where the noise
    happens to be large. κ ≈ 1 (a departure far above the noise): the table keeps its noise; κ ≈ 0: it is its centre,
    and loses its dependence as if left out. Within 30 % of the Monte Carlo TVD of positive-part James–Stein from 4 to
    400 cells and from no departure to one far above the noise (tests/test_table_pairs.py).

    All arrays (K,); ``variance``: σ², the same for every table."""
    noise = np.sqrt(2 / np.pi * variance) * cells / (2 * dataset_size)
    oracle = energy / np.maximum(energy + cells * variance, 1e-300)
    kept = oracle + (1 - oracle) * CHANCE_KEPT / np.sqrt(cells)
    return np.hypot(kept * noise, (1 - kept) * dependence)


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
    departures = pair_departures(public_cells, sizes)
    ranked = sorted(departures, key=lambda p: (-departures[p][0], p))
    cells = np.array([sizes[i] * sizes[j] for i, j in ranked], dtype=float)
    measured = np.array([departures[p][0] for p in ranked])
    energy = np.array([departures[p][1] for p in ranked]) * float(dataset_size) ** 2  # θ², in counts
    first = {}  # each column's first (most dependent) pair, by its rank
    for rank, pair in enumerate(ranked):
        for column in pair:
            first.setdefault(column, rank)
    first_ranks = np.array(sorted(set(first.values())))
    best, best_error = len(ranked), math.inf
    for k in range(1, len(ranked) + 1):
        # the k most dependent pairs, plus the first pair of each column none of them covers (ranked after k)
        released = np.arange(len(ranked)) < k
        released[first_ranks[first_ranks >= k]] = True
        variance = noise_multiplier ** 2 * moved * (released.sum() + fixed_tables)
        error = np.where(released, released_error(measured, energy, cells, variance=variance,
                                                  dataset_size=dataset_size), measured).sum()
        if error <= best_error * (1 + 1e-12):  # ties: the most pairs
            best, best_error = k, error
    extra = [ranked[r] for r in first_ranks[first_ranks >= best]]
    return ranked[:best] + extra
