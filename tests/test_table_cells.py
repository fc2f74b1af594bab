"""A sliced column's fine grid (swflow/tables/cells.py): two atoms at the bounds, round slices between them."""
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from swflow.tables import Schema
from swflow.tables.cells import FINE_CELLS, ROUND_WIDTHS, FineGrid


def _column(low, high, **extra):
    return Schema.from_json({"columns": [{"name": "x", "type": "numeric", "min": low, "max": high, **extra},
                                         {"name": "g", "type": "categorical", "categories": ["a", "b"]}]}).columns[0]


BOUNDS = [(0, 50000, {}), (40, 100, {}), (0, 6, {}), (-1000, 2000, {}), (-20, 120, {"missing": True}),
          (0.5, 30000.5, {"integer": True}), (0, 99999, {"integer": True}), (1e-3, 7.3e8, {}),
          (0, 20000, {"decimals": 2}), (-5, 1000, {"decimals": 3, "missing": True}), (0, 50000, {"decimals": 2})]


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


def _decodes_back(grid: FineGrid, low: float, high: float, decimals: int, rng) -> None:
    """index(draw(cell)) == cell for every fine cell that can hold a value (a slice of a column with declared places
    may hold none but an atom's), each draw inside the bounds and on the declared places; the last value of a
    slice (19.99 before an edge at 20) is in that slice."""
    cells, step = np.arange(grid.size), grid.step
    if step:
        lattice = np.arange(math.ceil(low / step), math.floor(high / step) + 1) * step
        cells = np.unique(grid.index(pd.Series(np.round(lattice, decimals))))
    cells = np.repeat(cells, 10)
    drawn = grid.draw(cells, rng)
    present = ~np.isnan(drawn)
    assert np.array_equal(grid.index(pd.Series(drawn)), cells)
    assert ((drawn[present] >= low) & (drawn[present] <= high)).all()
    if step:
        assert np.allclose(drawn[present] / step, np.round(drawn[present] / step), rtol=0, atol=1e-6)
        inner = grid.edges[1:-1:50]
        below = np.round(inner - step, decimals)
        inner, below = inner[(below > low) & (below < high)], below[(below > low) & (below < high)]  # not an atom
        assert np.array_equal(grid.index(pd.Series(below)), grid.index(pd.Series(inner)) - 1)


@pytest.mark.parametrize("low,high,extra", BOUNDS)
def test_a_value_decodes_back_into_its_own_fine_cell(low, high, extra):
    """index(draw(cell)) == cell for every fine cell that can hold a value, atoms included, and every draw is inside
    the bounds (whole where the column is integer); values written at a round number start their slice."""
    grid = FineGrid(_column(low, high, **extra))
    rng = np.random.default_rng(0)
    _decodes_back(grid, low, high, extra.get("decimals", 0), rng)
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


def _log_column(low, high, **extra):
    return _column(low, high, scale="log", **extra)


def _u(x, unit):
    """sign(x)·log(1 + |x|/unit): the log scale's coordinate, written out here (not the library's)."""
    return math.copysign(math.log1p(abs(x) / unit), x)


@pytest.mark.parametrize("low,high,a,b", [(0, 200, 0.1, 1.0), (0, 200, 1.0, 10.0), (0, 200, 10.0, 100.0),
                                          (-1000, 2000, -100.0, -10.0), (-1000, 2000, 10.0, 100.0),
                                          (0, 3e8, 1e5, 1e6), (0, 3e8, 1e7, 1e8)])
def test_a_log_scale_has_as_many_slices_as_its_share_of_log_1_plus_x_over_unit(low, high, a, b):
    """Slices between a and b: the closed form (u(b) − u(a)) / (u(high) − u(low)) × the slices, within 1 %
    of the slices plus two (the rounding of each edge moves it by less than half its slice)."""
    grid = FineGrid(_log_column(low, high))
    edges, unit = grid.edges, grid.log_unit
    assert unit == 10.0 ** math.floor(math.log10((high - low) / 1e4))
    slices = len(edges) - 1
    expected = slices * (_u(b, unit) - _u(a, unit)) / (_u(high, unit) - _u(low, unit))
    inside = ((edges >= a) & (edges < b)).sum()
    assert abs(inside - expected) <= 0.01 * expected + 2
    assert (np.diff(edges) > 0).all() and edges[0] <= low and edges[-1] >= high
    assert slices + 2 <= FINE_CELLS


@pytest.mark.parametrize("low,high,extra", [(0, 50000, {}), (-1000, 2000, {}), (0, 3e8, {"missing": True}),
                                            (0, 200000, {"integer": True}), (0, 20000, {"decimals": 2}),
                                            (1, 1e6, {"integer": True, "missing": True})])
def test_a_log_scale_has_round_edges_and_decodes_each_value_back_into_its_cell(low, high, extra):
    """Each edge is a multiple of a round number (1, 2, 5 × 10^j) no wider than the narrower slice beside it and
    no finer than the declared step; index(draw(cell)) == cell, inside the bounds, whole where declared integer;
    a value written at an edge (also as a float32) starts its slice."""
    column = _log_column(low, high, **extra)
    grid = FineGrid(column)
    edges = grid.edges
    width = np.diff(edges)
    narrower = np.minimum(np.r_[width[0], width], np.r_[width, width[-1]])
    step = 1.0 if column.integer else 10.0 ** -extra["decimals"] if "decimals" in extra else 0.0
    candidates = np.array(sorted(m * 10.0 ** j for m in ROUND_WIDTHS for j in range(-8, 10)))
    for edge, room in zip(edges[1:-1], narrower[1:-1]):
        fits = candidates[(candidates <= max(room, step) * (1 + 1e-9)) & (candidates >= step * (1 - 1e-9))]
        assert any(abs(edge / r - round(edge / r)) < 1e-6 for r in fits), edge
    _decodes_back(grid, low, high, extra.get("decimals", 0), np.random.default_rng(0))
    inner = edges[1:-2][::97]
    starts = grid.index(pd.Series(inner))
    assert np.array_equal(starts, grid.index(pd.Series(inner.astype(np.float32).astype(float))))
    assert np.array_equal(starts, 1 + np.searchsorted(edges, inner))


def test_a_log_scale_gives_small_counts_a_cell_each_and_keeps_a_heavy_tail_s_deciles():
    """Votes (whole numbers on 0 … 200 000, most of them small): each of the first 300 whole numbers has a fine cell
    of its own, and a log-normal column decoded from its fine cells keeps its deciles (one-way TVD at the deciles
    of fresh draws below 0.01, by numpy's histogram), where equal slices of the bounds lose a tenth of it."""
    rng = np.random.default_rng(5)
    votes = np.minimum(np.round(rng.lognormal(3.5, 1.6, 20000)), 200000)
    held_out = np.minimum(np.round(rng.lognormal(3.5, 1.6, 20000)), 200000)
    edges = np.unique(np.quantile(held_out, np.linspace(0, 1, 11)))
    edges[0], edges[-1] = -np.inf, np.inf

    def tvd(decoded):
        return 0.5 * np.abs(np.histogram(votes, edges)[0] - np.histogram(decoded, edges)[0]).sum() / len(votes)

    losses = {}
    for scale in ("linear", "log"):
        grid = FineGrid(_column(0, 200000, integer=True, scale=scale))
        losses[scale] = tvd(grid.draw(grid.index(pd.Series(votes)), rng))
    assert losses["log"] < 0.01 and losses["linear"] > 0.1, losses
    grid = FineGrid(_log_column(0, 200000, integer=True))
    assert len(np.unique(grid.index(pd.Series(np.arange(300.0))))) == 300


def test_a_log_scale_is_declared_on_numbers_only_and_round_trips():
    column = _log_column(0, 1000, integer=True)
    assert column.scale == "log" and Schema.from_json({"columns": [column.to_json()]}).columns[0] == column
    assert "scale" not in _column(0, 1000).to_json()
    with pytest.raises(ValueError, match="scale"):
        _column(0, 1000, scale="sqrt")
    with pytest.raises(ValueError, match="scale"):
        Schema.from_json({"columns": [{"name": "d", "type": "date", "min": "2000-01-01", "max": "2030-12-31",
                                       "scale": "log"}]})
    with pytest.raises(ValueError, match="scale"):
        Schema.from_json({"columns": [{"name": "g", "type": "categorical", "categories": ["a"], "scale": "log"}]})


def test_the_proposer_hints_at_a_log_scale_for_crowded_columns_only(tmp_path, capsys):
    """`swflow schema` prints a hint on stderr for a column whose public values crowd into a corner of their range
    (a count: the middle half of its values within 1 % of it), not for a spread column nor for one piled on its
    maximum (an atom, which any scale keeps); stdout stays the schema's JSON."""
    import json

    from swflow.cli import main
    from swflow.tables.cells import crowded

    rng = np.random.default_rng(2)
    votes = np.round(rng.lognormal(3.5, 1.6, 3000))
    votes[0] = 200000.0  # one film's many votes set the proposed bound
    visibility = np.where(rng.uniform(size=3000) < 0.8, 10.0, rng.uniform(0, 10, 3000).round(2))
    frame = pd.DataFrame({"votes": votes, "height": rng.uniform(100, 200, 3000), "visibility": visibility})
    frame.to_csv(tmp_path / "public.csv", index=False)
    assert main(["schema", str(tmp_path / "public.csv")]) == 0
    out, err = capsys.readouterr()
    schema = Schema.from_json(json.loads(out))
    assert "'votes'" in err and "height" not in err and "visibility" not in err and "scale" in err
    flags = {c.name: crowded(c, frame[c.name]) for c in schema.columns}
    assert flags == {"votes": True, "height": False, "visibility": False}
    assert not crowded(replace(schema.columns[0], scale="log"), frame["votes"])  # declared already
