"""A privacy unit of many rows: one customer, patient or student and all of its rows, protected as one.

Most private tables hold many rows per person (visits, transactions, ratings). A guarantee per row then protects
one visit, and a person with k rows is protected only by group privacy: ε·k, and a δ multiplied by k·e^{(k−1)ε}.
A table run with a privacy unit (``TableSynthesizer(privacy_unit="customer_id", max_rows_per_unit=k)``) protects
one unit and all of its rows under add/remove adjacency of units, by bounding what one unit adds to every release:

* **Rows, weighted.** A unit u with n_u rows has each row counted with one weight w_u for the count of records,
  w_u = min(1, k / n_u), so it adds min(n_u, k) ≤ k: its change to one released partition is a vector of
  non-negative entries summing to at most k, of ℓ2 norm at most k, and the ℓ2 sensitivity of a release of K
  partitions is k·√K (:func:`~swflow.privacy.histogram.histogram_sensitivity` with ``contribution`` k). The weight
  is the expectation of keeping k of the unit's rows at random, without that draw's sampling noise; it depends on
  the unit's own rows only, and never on their order. A unit over the bound is down-weighted, not cut: how many
  rows that touches is private, and not published.
* **Trees and pair tables, weighted by spread.** The fine trees (G levels) and the pair tables (K tables) have the
  same sensitivities, k·√G and k·√K, but their weight is the largest that keeps the unit's move of all of their
  counts within it, w_u = min(1, k·√G / ‖H_u‖₂), H_u the unit's unweighted counts in the levels' nodes or the
  tables' cells (:func:`tree_weights`, :func:`spread_weights`, once the cells are set, :func:`partition_weights`
  for both). The count bound's weight is that worst case (n_u rows in one node of every level, one cell of every
  table: ‖H_u‖ = n_u·√G); a unit whose rows spread keeps more of them at the same noise, never fewer.
* **Values, one slot each.** The repeated-values release (privacy/values.py; under a unit only where asked, since
  it seldom names anything there) counts units, not rows: each unit names at most m = ``max_values_per_unit``
  distinct values of a column (chosen at random by the privacy noise stream where it holds more), each counted
  once, so a unit moves at most m counts of each column by one.
* **Noise.** The weighted counts are not integers, and a count moved by k is outside the discrete Gaussian's
  account (counts moved by one each): a unit's releases take the continuous Gaussian, drawn from the OS CSPRNG,
  accounted exactly by Gaussian differential privacy (the analytic Gaussian of the composed releases).

The pair tables carry one more column, each row's class of its weight (``ROWS_COLUMN``), and samples are drawn in
proportion to what a class's rows stand for (1 / w), so they follow the rows' law rather than the weighted one, up to
the classes' width, where the release shows the class above its noise (:func:`drawn_classes`). k trades the noise
(∝ k) against the down-weighting: docs/tables-design.md, "The unit of privacy".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

__all__ = ["DEFAULT_ROWS_PER_UNIT", "VALUES_PER_UNIT", "OVER_THE_BOUND", "ROWS_COLUMN", "ROW_CLASSES", "UnitBound",
           "unit_words", "unit_codes", "unit_weights", "spread_weights", "tree_weights", "partition_weights",
           "unit_value_slots", "row_class_labels", "row_classes", "class_factors", "CLASS_NOISE_SHARE",
           "CLASS_SURE_STDS", "drawn_classes"]

#: a unit's rows counted at most (max_rows_per_unit) when the owner names none: docs/tables-design.md says how it was chosen
DEFAULT_ROWS_PER_UNIT = 4
#: the distinct values of a column one unit may name in the repeated-values release
VALUES_PER_UNIT = 1
OVER_THE_BOUND = ("a unit with more than max_rows_per_unit rows has each row counted with weight max_rows_per_unit / "
                  "its rows (the expectation of keeping that many at random) in the count of records and the trees, "
                  "and in the pair tables with that weight or more where its rows spread over many cells (the same "
                  "sensitivity); how many units and rows that touches is private and not published")


#: the column a unit run adds to the released tables: what each row stands for among its unit's rows (1 / its weight,
#: n / k under the count bound), in classes written as the rows n that give it under the count bound (released like
#: any column, read back to undo the down-weighting: see ``row_classes``); never in a sample
ROWS_COLUMN = "__rows_of_its_unit__"
#: classes of 1 / w, w a row's weight: 1, then (1, 4], (4, 16], … , the last open (n ≤ k, (k, 4k], … for w = k / n)
ROW_CLASSES = 6
#: the ratio between a class's ends
CLASS_STEP = 4


def row_class_labels(max_rows: int) -> list[str]:
    """The public categories of ROWS_COLUMN for the bound k = ``max_rows``."""
    edges = [max_rows * CLASS_STEP ** c for c in range(ROW_CLASSES - 1)]
    return [f"<= {edges[0]}"] + [f"{a + 1}-{b}" for a, b in zip(edges, edges[1:])] + [f"> {edges[-1]}"]


def row_classes(weights) -> np.ndarray:
    """Each row's class (int64, (m,)) of what it stands for among its unit's rows, 1 / its weight w (array-like,
    (m,), in (0, 1]): 0 where w = 1, else ⌈log_4(1 / w)⌉, the last class holding every smaller weight. Under the
    count bound alone (w = k / n) that is the class of the unit's rows n against k: n ≤ k, (k, 4k], …"""
    inverse = 1.0 / np.asarray(weights, dtype=np.float64)
    classes = np.ceil(np.log(np.maximum(inverse, 1.0)) / np.log(CLASS_STEP) - 1e-12)
    return np.clip(classes, 0, ROW_CLASSES - 1).astype(np.int64)


def class_factors() -> Tensor:
    """(ROW_CLASSES,) float64: what a released row of each class stands for among the unit's rows, 1 / its weight
    (n / k, at the class's geometric middle 4^(c − 1/2); 1 where n ≤ k). Samples drawn in proportion to it follow
    the rows' law again rather than the weighted one (within a class, up to the class's spread)."""
    classes = torch.arange(ROW_CLASSES, dtype=torch.float64)
    return torch.where(classes == 0, torch.ones_like(classes), float(CLASS_STEP) ** (classes - 0.5))


#: a class is drawn at its factor where that factor times its count's noise is at most this share of the released
#: mass of every class, or where its count stands above CLASS_SURE_STDS of its noise (:func:`drawn_classes`)
CLASS_NOISE_SHARE = 0.25
CLASS_SURE_STDS = 3.0


def drawn_classes(counts: Tensor, noise_std: float) -> Tensor:
    """(ROW_CLASSES,) float64: 1 for the classes whose rows samples draw at their factor f_c (:func:`class_factors`),
    else 0, from each class's released count (``counts``, (ROW_CLASSES,)) and that count's noise std σ_p.

    The first class is always kept. Class c is kept where its count stands above 2·σ_p (THRESHOLD_STDS, as the
    histograms' counts are) and either f_c·σ_p, the noise it adds to the rows it stands for, is at most
    CLASS_NOISE_SHARE of M, the released mass of every class (Σ of the counts clipped at zero, a lower bound on the
    rows, all weights being ≤ 1), or its count stands above CLASS_SURE_STDS·σ_p (an empty class does in 1 run in
    740). With the 2σ test alone, a high class that the noise lifted past it (1 run in 44 for each empty class)
    took most samples from a few particles, drawn at up to 4^4.5 their share; with the quarter of the mass alone,
    real classes of many rows were dropped where k is small (docs/tables-design.md, "The unit of privacy").
    Post-processing of the release."""
    from .histogram import THRESHOLD_STDS

    factors = class_factors()
    mass = float(counts.clamp(min=0).sum())
    sure = counts > CLASS_SURE_STDS * noise_std
    quiet = factors * noise_std <= CLASS_NOISE_SHARE * mass
    kept = ((counts > THRESHOLD_STDS * noise_std) & (sure | quiet)).to(torch.float64)
    kept[0] = 1.0
    return kept


def unit_words(column: str) -> str:
    """The privacy unit of a run grouped by ``column``, as privacy.json and the statement write it."""
    return f"one {column} and all of its rows"


@dataclass(frozen=True)
class UnitBound:
    """A table run's privacy unit: the identifier ``column`` (read to group rows; never synthesized or written), the
    rows one unit adds to every release at most (``max_rows``, k) and the values it names per column
    (``max_values``)."""

    column: str
    max_rows: int = DEFAULT_ROWS_PER_UNIT
    max_values: int = VALUES_PER_UNIT

    def __post_init__(self):
        if not isinstance(self.column, str) or not self.column:
            raise ValueError(f"privacy_unit names the identifier column that groups a unit's rows, got {self.column!r}")
        for name, value in (("max_rows_per_unit", self.max_rows), ("max_values_per_unit", self.max_values)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} is a whole number >= 1, got {value!r}")

    @property
    def words(self) -> str:
        return unit_words(self.column)

    def to_json(self) -> dict:
        """privacy.json's ``unit_bound``."""
        return {"column": self.column, "max_rows_per_unit": self.max_rows, "max_values_per_unit": self.max_values,
                "rows_over_the_bound": OVER_THE_BOUND}

    @classmethod
    def from_json(cls, data: dict) -> "UnitBound":
        return cls(data["column"], data["max_rows_per_unit"], data["max_values_per_unit"])


#: the refusal of rows without a unit, on every engine
UNITLESS_ROWS = ("the privacy unit's column has rows without a unit (missing identifiers): every row must name its "
                 "unit; drop those rows or give each its own identifier")


def no_unit_column(column: str) -> str:
    """The refusal of a table that lacks the privacy unit's column, on every engine."""
    return f"the table has no privacy-unit column {column!r}: name the column that identifies each row's unit"


def unit_codes(ids) -> np.ndarray:
    """Each row's unit as a code 0 … U − 1 (int64, (m,)), from the identifier column ``ids`` (a pandas Series).
    A row without a unit is refused: it could not be bounded (the error names no row and no identifier)."""
    import pandas as pd

    if ids.isna().any():
        raise ValueError(UNITLESS_ROWS)
    codes, _ = pd.factorize(ids, sort=False)
    return codes.astype(np.int64)


def unit_weights(codes: np.ndarray, *, max_rows: int) -> Tensor:
    """Each row's weight min(1, k / n_u), n_u its unit's rows (float64, (m,)): a unit adds min(n_u, k) in all.

    Parameters
    ----------
    codes : np.ndarray, shape (m,), int64, each row's unit 0 … U − 1
    max_rows : k
    """
    rows = np.bincount(codes)
    return torch.from_numpy(np.minimum(1.0, max_rows / rows[codes].astype(np.float64)))


def spread_weights(codes: np.ndarray, cells: np.ndarray, pairs: list[tuple[int, int]], *, max_rows: int,
                   constant: int | None = None) -> Tensor:
    """Each row's weight for the pair tables: its unit's w_u = min(1, k·√K / ‖H_u‖₂), H_u the unit's unweighted
    counts in all K tables ``pairs`` (float64, (m,)).

    A unit then moves the K tables by w_u·H_u, of ℓ2 norm at most k·√K: the sensitivity the count bound alone
    gives (:func:`unit_weights`, w = k / n_u), which is the worst case, a unit's n_u rows in one cell of every
    table (‖H_u‖ = n_u·√K). A unit whose rows spread over many cells (a student's ratings of many lecturers, a
    city's months) has a smaller norm and keeps more of its rows at the same noise: never fewer, since
    ‖H_u‖ ≤ n_u·√K. The weight reads the unit's own rows and the public cells only.

    Parameters
    ----------
    codes : np.ndarray, shape (m,), int64: each row's unit 0 … U − 1
    cells : np.ndarray, shape (m, C), int64: each row's cell in each column (of the released cells: public)
    pairs : the K released tables' columns
    max_rows : k
    constant : a column the same for all of a unit's rows whatever it holds (the class of its weight, set from
        this weight): its tables count the unit's rows as its other column's one-way table does
    """
    partitions = []
    for pair in pairs:
        key = np.zeros(len(codes), dtype=np.int64)
        for column in (c for c in pair if c != constant):
            key = key * (int(cells[:, column].max(initial=0)) + 1) + cells[:, column]
        partitions.append(key)
    return partition_weights(codes, partitions, max_rows=max_rows)


def tree_weights(codes: np.ndarray, cells: Tensor, trees: list, *, max_rows: int) -> Tensor:
    """Each row's weight for the fine trees (privacy.oneway): as :func:`spread_weights` for the tables, the largest
    that keeps a unit's move of all G levels of every tree within k·√G, the sensitivity the count bound gives (a
    unit's rows in one leaf: k / n_u); more where its rows spread over the nodes (a student's ratings of many
    lecturers: insteval's trees count 4.6 times the count bound's mass at k = 4). ``cells``: (m, C) int64, each
    row's fine cell in each tree's column, in the order of ``trees``."""
    partitions = [tree.node_of(cells[:, j], level).numpy() for j, tree in enumerate(trees)
                  for level in range(1, tree.levels + 1)]
    return partition_weights(codes, partitions, max_rows=max_rows)


def partition_weights(codes: np.ndarray, partitions: list[np.ndarray], *, max_rows: int) -> Tensor:
    """Each row's weight min(1, k·√G / ‖H_u‖₂) (float64, (m,)), H_u its unit's unweighted counts in the G
    ``partitions`` of the rows (each (m,) int64 ≥ 0: a row's cell in a released table or a tree's level). A unit
    then moves the G counts by w_u·H_u, of ℓ2 norm at most k·√G, and exactly that where its rows all share a cell
    in every partition and number more than k."""
    units = int(codes.max()) + 1 if len(codes) else 0
    squares = np.zeros(units, dtype=np.float64)
    for part in partitions:
        key = codes * (int(part.max(initial=0)) + 1) + part
        order = np.argsort(key, kind="stable")
        _, first, counts = np.unique(key[order], return_index=True, return_counts=True)
        squares += np.bincount(codes[order[first]], weights=counts.astype(np.float64) ** 2, minlength=units)
    bound = max_rows * np.sqrt(len(partitions))
    weights = np.minimum(1.0, bound / np.sqrt(np.maximum(squares, 1.0)))
    return torch.from_numpy(weights[codes])


def unit_value_slots(values: Tensor, codes: np.ndarray, *, inside: list[tuple[float, float]], per_unit: int,
                     uniform) -> Tensor:
    """The repeated-values release's rows under a unit: U·m slots (m = ``per_unit``), slot s of unit u holding in
    column j the s-th of u's distinct values within the bounds ``inside[j]`` (at most m, chosen at random where u
    holds more), or just below its lower bound (values.absent_value: never counted) where it has fewer.

    Parameters
    ----------
    values : Tensor, shape (m_rows, C), float64: each row's value of the C released columns
    codes : np.ndarray, shape (m_rows,), int64: each row's unit
    inside : the C columns' bounds (low, high)
    per_unit : m
    uniform : a function n -> Tensor (n,) of uniforms in (0, 1): the privacy noise stream's
        (:meth:`~swflow.privacy.noise.NoiseSource.uniform`), so the choice is random whatever the rows' order

    Returns
    -------
    Tensor, shape (U·m, C), float64: counting the distinct values of its columns counts units, at most m each.
    """
    import pandas as pd

    from .values import absent_value

    units = int(codes.max()) + 1 if len(codes) else 0
    slots = np.empty((units * per_unit, len(inside)), dtype=np.float64)
    held = []
    for j, (low, high) in enumerate(inside):
        slots[:, j] = absent_value(low)
        column = values[:, j].numpy()
        kept = (column >= low) & (column <= high)
        held.append(pd.DataFrame({"unit": codes[kept], "column": j, "value": column[kept]}).drop_duplicates())
    # one key per (unit, column, value), drawn unit by unit: a unit's choice reads its own keys only
    held = pd.concat(held).sort_values("unit", kind="stable") if held else pd.DataFrame()
    held["key"] = uniform(len(held)).numpy() if len(held) else np.zeros(0)
    held = held.sort_values("key", kind="stable")
    held["slot"] = held.groupby(["unit", "column"]).cumcount()
    held = held[held["slot"] < per_unit]
    slots[held["unit"].to_numpy() * per_unit + held["slot"].to_numpy(), held["column"].to_numpy()] = \
        held["value"].to_numpy()
    return torch.from_numpy(slots)
