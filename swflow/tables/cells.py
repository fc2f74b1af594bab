"""One column's cells: how its values map to the cells the release counts, and how a cell becomes a value again.

Every column has a *fine grid* fixed by the public schema alone (:class:`FineGrid`): a categorical column's
categories; the values a numeric column can be written with (whole numbers, or multiples of 10^−decimals where
``decimals`` is declared) when they fit in ``FINE_CELLS`` cells; else two *atoms*, the bounds themselves, and equal
slices between them whose edges are round numbers (the width the narrowest of 1, 2 or 5 × 10^j that fits in
``FINE_CELLS`` cells). The atoms are there because real columns pile up exactly on their bounds (no expenses at all,
visibility "10 miles or more", no rain) and a slice decodes uniformly inside it: the pile would come back smeared over
the first slice, away from the value that every reader of the column counts. The edges are round for the same reason
inside the bounds: values pile up on round numbers (a table top of 56, 12 years of school), and a pile that sits at
the start of its slice decodes at or just above itself, never below it. A column declared ``"scale": "log"`` is sliced
evenly in sign(x)·log(1 + |x|/unit) instead (:func:`log_edges`; the unit is 10^−4 of the bounds' width, as a power of
ten, or the declared step where that is larger), each edge rounded to the roundest number its slice allows: a count on
0 … 200 000 then has a cell for each of its first few hundred values, where equal slices give each 50 of them. A
numeric column declared ``"missing": true`` gives one more cell to the missing value (the last); a sliced column has
at most ``FINE_CELLS`` cells in all. The *coarse cells* that the pair tables count are runs of consecutive fine cells
(numbers) or groups of categories (:class:`ColumnCells`). They come from the schema alone (bins of equally many fine
cells, each category its own cell), or from a release of the fine one-way histograms
(:mod:`swflow.tables.resolution`), or from public rows: never from private rows for free.

Decoding draws a fine cell inside the coarse cell in proportion to the column's fine weights (where it has none,
evenly over the cell's fine cells but not its atoms: ``FineGrid.prior``), then a value inside the fine cell: a
category, a value of the slice written with the declared places (a whole number, or a multiple of 10^−decimals), a
real number uniformly inside the slice, or the missing value. Every value drawn is valid under the schema.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .schema import Column, category_codes

__all__ = ["FINE_CELLS", "FineGrid", "ColumnCells", "log_edges", "crowded"]

#: fine cells of a sliced column (a real column, and an integer column with more whole numbers than this)
FINE_CELLS = 4096
#: a slice's width is one of these times a power of ten (module docstring)
ROUND_WIDTHS = (1.0, 2.0, 5.0)
#: a log scale's unit is this share of the bounds' width, as the power of ten at or below it (FineGrid.log_unit)
LOG_UNIT_SHARE = 1e-4
#: a released atom's piece is this share of the slice it sits in (or of the value) wide: the value and its float32
#: rounding, no other value a column would be written with
ATOM_WIDTH = 1e-6
#: crowded(): the middle half of a column's values inside this share of its bounds' width
CROWDED_SHARE = 0.01


@dataclass(frozen=True)
class FineGrid:
    """The fine cells of ``column``, from its schema alone (module docstring), and of a sliced column the released
    ``atoms``: values strictly inside the bounds that many records share exactly, each a cell one value wide
    between two edges (swflow/privacy/values.py releases them; a sliced column's grid has two cells more an atom)."""

    column: Column
    atoms: tuple[float, ...] = ()

    def __post_init__(self):
        if not self.atoms:
            return
        if not self.sliced:
            raise ValueError(f"column {self.column.name!r} has a cell for every value already: it takes no atoms")
        atoms = np.asarray(self.atoms, dtype=np.float64)
        low, high = self.ends
        if len(atoms) and (not np.isfinite(atoms).all() or (np.diff(atoms) <= 0).any() or atoms[0] <= low
                           or atoms[-1] >= high):
            raise ValueError(f"the atoms of column {self.column.name!r} must be distinct rising numbers strictly "
                             f"inside its bounds {low}..{high}")

    @property
    def step(self) -> float | None:
        """The spacing of the values the column can be written with: 1 (integer), 10^−decimals, or None."""
        c = self.column
        if c.kind != "numeric":
            return None
        return 1.0 if c.integer else None if c.decimals is None else 10.0 ** -c.decimals

    @property
    def whole(self) -> bool:
        """One fine cell per value the column can be written with (the lattice of ``step`` inside the bounds)."""
        if self.step is None:
            return False
        first, last = self._lattice()
        return last - first + 1 + int(self.column.missing) <= FINE_CELLS

    def _lattice(self) -> tuple[int, int]:
        """The first and last multiples of ``step`` inside the bounds, as multiples."""
        c, step = self.column, self.step
        return math.ceil(round(c.low / step, 9)), math.floor(round(c.high / step, 9))

    @property
    def values(self) -> int:
        """Fine cells that hold a value (the missing cell, where declared, comes after them)."""
        c = self.column
        if c.kind == "categorical":
            return len(c.categories)
        if self.whole:
            first, last = self._lattice()
            return last - first + 1
        return len(self.edges) + 1  # the slices and the two atoms

    @property
    def size(self) -> int:
        return self.values + int(self.column.kind == "numeric" and self.column.missing)

    @property
    def sliced(self) -> bool:
        """A numeric column cut into slices between its two atoms (not one cell per value)."""
        return self.column.kind == "numeric" and not self.whole

    @property
    def atom_pieces(self) -> np.ndarray:
        """(len(edges) − 1,) bool: the pieces between the edges that are released atoms (a value each)."""
        edges = self.edges
        return np.isin(edges[:-1], np.asarray(self.atoms, dtype=np.float64)) if self.atoms else np.zeros(
            len(edges) - 1, dtype=bool)

    def slicing(self) -> tuple[float, float, int]:
        """(origin, width, slices) of a linear sliced column: slice k is [origin + k·width, origin + (k+1)·width),
        the width the narrowest round number (``ROUND_WIDTHS`` × 10^j) that covers the bounds in at most
        ``FINE_CELLS`` − 2 − missing slices from a multiple of itself."""
        c = self.column
        room = FINE_CELLS - 2 - int(c.missing)
        power = 10.0 ** math.floor(math.log10((c.high - c.low) / room))
        for width in (m * power * scale for scale in (1, 10, 100) for m in ROUND_WIDTHS):
            origin = math.floor(round(c.low / width, 9)) * width
            slices = math.ceil(round((c.high - origin) / width, 9))
            if slices <= room:
                return origin, width, max(slices, 1)
        raise AssertionError("unreachable: a width of 100 × the plain one always fits")

    @property
    def edges(self) -> np.ndarray:
        """(slices + 1,) rising edges of a sliced column's slices: slice k is [edges[k], edges[k + 1]). Equal round
        slices (:meth:`slicing`) on a linear scale; on a log scale, :func:`log_edges` with the column's
        :attr:`log_unit`. Computed once a column (read-only)."""
        return _edges_of(self)

    @property
    def log_unit(self) -> float:
        """Where a log scale turns linear (|x| ≲ unit): the power of ten at or below 10^−4 of the bounds' width, or
        the column's step where that is larger (a log scale resolves four decades below its top)."""
        c = self.column
        return max(self.step or 0.0, 10.0 ** math.floor(round(math.log10((c.high - c.low) * LOG_UNIT_SHARE), 9)))

    @property
    def ends(self) -> tuple[float, float]:
        """The values of a numeric column's two end cells: the bounds, or the first and last whole (declared-place)
        values. A repeated value strictly between them may become a released atom of a sliced column."""
        c = self.column
        if c.integer:
            return float(math.ceil(c.low)), float(math.floor(c.high))
        return self._lattice_bounds() if self.step is not None else (float(c.low), float(c.high))

    @property
    def prior(self) -> np.ndarray:
        """(size,) the weights that decoding uses where none were released or counted: even over a cell's fine
        cells, but none on the atoms, which a uniform draw inside the bounds reaches with probability 0."""
        prior = np.ones(self.size)
        if self.sliced:
            prior[[0, self.values - 1]] = 0.0
            prior[1:self.values - 1][self.atom_pieces] = 0.0
        return prior

    def index(self, values) -> np.ndarray:
        """(n,) int64 fine cells of checked values (a Series under the schema: categories as declared, numbers
        within the bounds, NaN where missing is declared)."""
        c = self.column
        if c.kind == "categorical":
            return category_codes(values, c.categories)
        x = values.to_numpy(dtype=float, na_value=np.nan)
        absent = np.isnan(x)
        if self.whole:
            cell = np.round(np.where(absent, 0, x) / self.step) - self._lattice()[0]
        else:
            low, high = self.ends
            cell = 1 + self._slice_of(np.where(absent, c.low, x))
            cell = np.where(x == low, 0, np.where(x == high, self.values - 1, cell))
        cell = np.clip(cell, 0, self.values - 1).astype(np.int64)
        return np.where(absent, self.values, cell)

    def draw(self, fine: np.ndarray, rng: np.random.Generator):
        """Values (a numpy array: object for categories, float with NaN for a missing number) for fine cells."""
        c = self.column
        if c.kind == "categorical":
            return np.array(c.categories, dtype=object)[fine]
        absent = fine >= self.values
        fine = np.minimum(fine, self.values - 1)
        if self.whole:
            drawn = np.round((self._lattice()[0] + fine) * self.step, c.decimals or 0)
        else:
            (low, high), edges = self.ends, self.edges
            piece = np.clip(fine - 1, 0, len(edges) - 2)
            left, width = edges[piece], edges[piece + 1] - edges[piece]
            if self.step is not None:  # a value written with the declared places in [left, left + width), not an atom
                step, (first_atom, last_atom) = self.step, self._lattice()  # the atoms, in steps
                first = np.maximum(np.ceil(np.round(left / step, 9)), first_atom + 1)
                last = np.minimum(np.ceil(np.round((left + width) / step, 9)) - 1, last_atom - 1)
                drawn = first + np.floor(rng.uniform(size=len(fine)) * np.maximum(last - first + 1, 0))
                # a slice that holds no such value but an atom's: the atom
                drawn = np.round(np.clip(drawn, first_atom, last_atom) * step, c.decimals or 0)
            else:  # uniform on the part of the slice inside the bounds that index() reads back as the slice
                start, stop = np.maximum(left, c.low), np.minimum(left + width * (1 - 1e-3), c.high)
                drawn = np.clip(start + rng.uniform(size=len(fine)) * (stop - start), c.low, c.high)
            drawn = np.where(self.atom_pieces[piece], np.round(left, c.decimals) if c.decimals is not None else left,
                             drawn)  # a released atom is its value
            drawn = np.where(fine == 0, low, np.where(fine == self.values - 1, high, drawn))
        return np.where(absent, np.nan, drawn)

    def _slice_of(self, x: np.ndarray) -> np.ndarray:
        """(n,) the slice (0 … slices − 1) of each value inside the bounds. A value within 1/2000 of a slice's width
        (and a quarter of the declared step) below its right edge starts the next slice: a value written at a round
        edge is read back as a float32 too (10.2 as 10.1999998, 0.000 04 of a 0.2-wide slice below its edge)."""
        edges = self.edges
        piece = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2)
        right = edges[piece + 1]
        near = 5e-4 * (right - edges[piece])
        if self.step is not None:  # 19.99 in a slice [0, 20) of a column written with 2 places is no 20
            near = np.minimum(near, self.step / 4)
        return piece + ((right - x <= near) & (piece < len(edges) - 2))

    def _lattice_bounds(self) -> tuple[float, float]:
        first, last = self._lattice()
        return round(first * self.step, self.column.decimals), round(last * self.step, self.column.decimals)


class ColumnCells:
    """A column's coarse cells over its fine grid.

    ``starts``: (m + 1,) increasing fine-cell boundaries of the value cells: coarse cell k holds the fine cells
    ``starts[k] … starts[k+1] − 1`` (for numbers, consecutive slices; for categories, ``order`` lists the fine
    cells in the order the groups take them). A declared missing number is one more coarse cell, the last.
    ``weights``: (fine size,) non-negative weights that decoding draws fine cells by inside a coarse cell (None:
    ``grid.prior``).
    """

    def __init__(self, grid: FineGrid, starts, *, order=None, weights=None):
        self.grid = grid
        self.starts = np.asarray(starts, dtype=np.int64)
        values = grid.values
        if self.starts.ndim != 1 or self.starts[0] != 0 or self.starts[-1] != values or (np.diff(self.starts) <= 0).any():
            raise ValueError(f"cell starts must rise from 0 to {values}, got {self.starts.tolist()}")
        self.order = np.arange(values) if order is None else np.asarray(order, dtype=np.int64)
        if sorted(self.order.tolist()) != list(range(values)):
            raise ValueError("order must list each fine cell once")
        self.weights = None if weights is None else np.clip(np.asarray(weights, dtype=np.float64), 0, None)
        if self.weights is not None and self.weights.shape != (grid.size,):
            raise ValueError(f"weights must be ({grid.size},), got {self.weights.shape}")
        position = np.empty(values, dtype=np.int64)
        position[self.order] = np.arange(values)
        self._coarse_of_fine = np.searchsorted(self.starts, position, side="right") - 1
        self.missing = grid.size > values

    @classmethod
    def uniform(cls, column: Column, *, bins: int) -> "ColumnCells":
        """From the schema alone: each category or whole number its own cell when there are at most ``bins`` of
        them (categories always), else ``bins`` runs of equally many fine cells: equal widths on the declared bounds
        (equal in log on a log scale)."""
        grid = FineGrid(column)
        if column.kind == "categorical" or (grid.whole and grid.values <= bins):
            return cls(grid, np.arange(grid.values + 1))
        return cls(grid, np.unique(np.round(np.linspace(0, grid.values, bins + 1)).astype(np.int64)))

    @property
    def size(self) -> int:
        """Coarse cells, the missing cell included."""
        return len(self.starts) - 1 + int(self.missing)

    def __len__(self) -> int:
        return self.size

    def index(self, values) -> np.ndarray:
        """(n,) int64 coarse cells of checked values."""
        fine = self.grid.index(values)
        absent = fine >= self.grid.values
        return np.where(absent, len(self.starts) - 1, self._coarse_of_fine[np.minimum(fine, self.grid.values - 1)])

    def draw(self, cells: np.ndarray, rng: np.random.Generator):
        """Values for coarse cells (n,): a fine cell by the weights inside each, then a value inside it."""
        cells = np.asarray(cells, dtype=np.int64)
        fine = np.empty(len(cells), dtype=np.int64)
        value_cells = len(self.starts) - 1
        weights = self.grid.prior if self.weights is None else self.weights
        for k in np.unique(cells):
            at = np.flatnonzero(cells == k)
            if k == value_cells:  # the missing cell
                fine[at] = self.grid.values
                continue
            members = self.order[self.starts[k]:self.starts[k + 1]]
            p = weights[members]
            p = p / p.sum() if p.sum() > 0 else None
            fine[at] = members[rng.choice(len(members), size=len(at), p=p)] if len(members) > 1 else members[0]
        return self.grid.draw(fine, rng)

    def to_json(self) -> dict:
        out = {"starts": self.starts.tolist()}
        if not np.array_equal(self.order, np.arange(self.grid.values)):
            out["order"] = self.order.tolist()
        if self.weights is not None:
            out["weights"] = self.weights.tolist()
        return out

    @classmethod
    def from_json(cls, column: Column, data: dict) -> "ColumnCells":
        return cls(FineGrid(column), data["starts"], order=data.get("order"), weights=data.get("weights"))


@functools.lru_cache(maxsize=256)
def _edges_of(grid: FineGrid) -> np.ndarray:
    if grid.atoms:  # the schema's edges, each atom a piece [v, v + ATOM_WIDTH of its slice) inside its slice
        base = FineGrid(grid.column).edges
        atoms = np.asarray(grid.atoms, dtype=np.float64)
        piece = np.clip(np.searchsorted(base, atoms, side="right") - 1, 0, len(base) - 2)
        width = np.maximum(ATOM_WIDTH * (base[piece + 1] - base[piece]), ATOM_WIDTH * np.abs(atoms))
        if grid.step is not None:
            width = np.minimum(width, grid.step / 4)
        edges = np.unique(np.concatenate([base, atoms, np.minimum(atoms + width, base[piece + 1])]))
        edges.flags.writeable = False
        return edges
    c = grid.column
    if c.scale == "log":
        edges = log_edges(c.low, c.high, unit=grid.log_unit, step=grid.step or 0.0,
                          slices=FINE_CELLS - 2 - int(c.missing))
    else:
        origin, width, slices = grid.slicing()
        edges = _tidy((math.floor(round(origin / width, 9)) + np.arange(slices + 1)) * width)
    edges.flags.writeable = False  # shared by every grid of the column
    return edges


def round_down(width: np.ndarray) -> np.ndarray:
    """The largest round number (``ROUND_WIDTHS`` × 10^j) at or below each positive ``width``."""
    power = 10.0 ** np.floor(np.log10(width))
    mantissa = width / power
    return power * np.select([mantissa >= 5 * (1 - 1e-9), mantissa >= 2 * (1 - 1e-9)], [5.0, 2.0], 1.0)


def log_edges(low: float, high: float, *, unit: float, step: float, slices: int) -> np.ndarray:
    """(≤ slices + 1,) rising edges covering [low, high], equal steps of sign(x)·log(1 + |x|/unit) (a log scale on
    either side of 0, linear within about ``unit`` of it), each edge rounded to a multiple of the largest round
    number that is at most the narrower slice beside it, and at least ``step`` (0: none): values pile up on round
    numbers, and a round edge keeps a pile at the start of its slice. Edges that round alike are merged."""
    def forward(x):
        return np.sign(x) * np.log1p(np.abs(x) / unit)

    target = np.linspace(forward(low), forward(high), slices + 1)
    target = np.sign(target) * np.expm1(np.abs(target)) * unit
    width = np.diff(target)
    rounding = np.maximum(round_down(np.minimum(np.r_[width[0], width], np.r_[width, width[-1]])), step)
    edges = np.round(target / rounding) * rounding
    edges[0] = math.floor(round(low / rounding[0], 9)) * rounding[0]
    edges[-1] = math.ceil(round(high / rounding[-1], 9)) * rounding[-1]
    return np.unique(_tidy(edges))


def _tidy(edges: np.ndarray) -> np.ndarray:
    """Edges written with 12 significant digits: 0.30000000000000004 is 0.3, as the value written at it reads."""
    return np.array([float(f"{edge:.12g}") for edge in edges])


def crowded(column: Column, public) -> bool:
    """Whether PUBLIC values of a linear numeric column crowd into a small part of its bounds: the middle half of
    those strictly between the bounds and the values' own extremes (piles there are atoms, which any scale keeps) spans under
    ``CROWDED_SHARE`` of the width. A hint for the owner (`swflow schema` prints it), never a decision: a count or
    an amount so crowded is worth ``"scale": "log"``; an outlier that set a proposed bound is worth a narrower one."""
    if column.kind != "numeric" or column.temporal is not None or column.scale != "linear":
        return False
    x = np.asarray(public, dtype=np.float64)
    x = x[np.isfinite(x)]
    if len(x) < 20:
        return False
    x = x[(x > max(column.low, x.min())) & (x < min(column.high, x.max()))]  # piles on either extreme: atoms
    if len(x) < 20:
        return False
    low, high = np.quantile(x, [0.25, 0.75])
    return bool(high - low < CROWDED_SHARE * (column.high - column.low))
