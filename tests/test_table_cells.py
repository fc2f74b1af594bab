"""A sliced column's fine grid (swflow/tables/cells.py): two atoms at the bounds, round slices between them."""
import math

import numpy as np
import pandas as pd
import pytest

from swflow.tables import Schema
from swflow.tables.cells import FINE_CELLS, ROUND_WIDTHS, FineGrid


def _column(low, high, **extra):
    return Schema.from_json({"columns": [{"name": "x", "type": "numeric", "min": low, "max": high, **extra},
                                         {"name": "g", "type": "categorical", "categories": ["a", "b"]}]}).columns[0]


BOUNDS = [(0, 50000, {}), (40, 100, {}), (0, 6, {}), (-1000, 2000, {}), (-20, 120, {"missing": True}),
          (0.5, 30000.5, {"integer": True}), (0, 99999, {"integer": True}), (1e-3, 7.3e8, {})]


@pytest.mark.parametrize("low,high,extra", BOUNDS)
def test_the_slices_are_the_narrowest_round_ones_that_fit(low, high, extra):
    """Brute force over every candidate width m·10^j: the grid's width is the narrowest whose slices, from a
    multiple of it, cover the bounds within FINE_CELLS cells (two atoms and the missing cell included)."""
    grid = FineGrid(_column(low, high, **extra))
    origin, width, slices = grid.slicing()
    room = FINE_CELLS - 2 - int(bool(extra.get("missing")))

    def fits(w):
        start = math.floor(low / w + 1e-9) * w
        return math.ceil((high - start) / w - 1e-9) <= room

    candidates = sorted(m * 10.0 ** j for m in ROUND_WIDTHS for j in range(-6, 12))
    assert width == pytest.approx(min(w for w in candidates if fits(w)))
    assert origin <= low < origin + width and origin + slices * width >= high - 1e-9
    assert grid.size == slices + 2 + int(bool(extra.get("missing"))) <= FINE_CELLS


@pytest.mark.parametrize("low,high,extra", BOUNDS)
def test_a_value_decodes_back_into_its_own_fine_cell(low, high, extra):
    """index(draw(cell)) == cell for every fine cell that can hold a value, atoms included, and every draw is inside
    the bounds (whole where the column is integer); values written at a round number start their slice."""
    column = _column(low, high, **extra)
    grid = FineGrid(column)
    rng = np.random.default_rng(0)
    cells = np.arange(grid.size)
    if column.integer:  # the cells that hold a whole number (a slice may hold none but an atom's)
        cells = np.unique(grid.index(pd.Series(np.arange(math.ceil(low), math.floor(high) + 1, dtype=float))))
    cells = np.repeat(cells, 20)
    drawn = grid.draw(cells, rng)
    present = ~np.isnan(drawn)
    assert np.array_equal(grid.index(pd.Series(drawn)), cells)
    assert ((drawn[present] >= low) & (drawn[present] <= high)).all()
    if column.integer:
        assert np.array_equal(drawn[present], np.round(drawn[present]))
    origin, width, _ = grid.slicing()
    for k in range(1, 6):  # round values inside the bounds
        value = origin + width * (grid.values // 2 + k)
        cell = grid.index(pd.Series([value]))[0]
        again = grid.draw(np.full(200, cell), rng)
        assert again.min() >= value - 1e-9 and again.max() < value + width


def test_a_pile_on_a_round_number_is_not_split_across_it():
    """diamonds' table (declared 40 to 100) has 18 % of its rows at exactly 56: decoded from its fine cell, none falls
    below 56 (with 1 022 plain slices of the bounds, 56 sat mid-slice and half of the pile came back below it)."""
    grid = FineGrid(_column(40, 100))
    again = grid.draw(grid.index(pd.Series(np.full(1000, 56.0))), np.random.default_rng(1))
    assert (again >= 56).all() and (again < 56.1).all()
