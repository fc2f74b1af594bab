"""What a numeric column loses in its fine grid alone, before any noise (issue 58).

A sliced column decodes uniformly inside a fine slice, so a value that many rows share exactly comes back spread
over its slice, and where that slice straddles one of the scorer's decile edges, part of the pile lands on the
wrong side. This script decodes each benchmark table's private rows through a column's fine grid, without noise,
and scores the one-way TVD at the held-out deciles (as `swflow evaluate --against` does) for:

- ``plain``: 1 024 equal slices of the declared bounds, decoded uniformly inside each (the first release's grid);
- ``swflow``: the library's grid (swflow/tables/cells.py: the bounds as atoms, round slices between them).

Only columns that are sliced are listed (a whole-number column or one with declared decimals that fits is exact).

    make tables-data
    python experiments/tables_grid.py                 # every benchmark table
    python experiments/tables_grid.py --tables medexp
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def one_way_tvd(values: np.ndarray, decoded: np.ndarray, edges: np.ndarray) -> float:
    """TVD between two columns' histograms in the bins that ``edges`` cut (missing values left out)."""
    keep = ~np.isnan(values)
    a = np.bincount(np.digitize(values[keep], edges), minlength=len(edges) + 1) / keep.sum()
    b = np.bincount(np.digitize(decoded[keep], edges), minlength=len(edges) + 1) / keep.sum()
    return float(0.5 * np.abs(a - b).sum())


def plain_slices(values: np.ndarray, low: float, high: float, rng, slices: int = 1024) -> np.ndarray:
    """``values`` decoded uniformly inside their slice of ``slices`` equal slices of [low, high]."""
    width = (high - low) / slices
    cell = np.clip(np.floor((values - low) / width), 0, slices - 1)
    return low + (cell + rng.uniform(size=len(values))) * width


def grid_losses(private: pd.DataFrame, held_out: pd.DataFrame, schema) -> list[dict]:
    from swflow.tables.cells import FineGrid
    from swflow.tables.metrics import decile_edges

    edges = decile_edges(schema, held_out)
    rows = []
    for column in schema.columns:
        grid = FineGrid(column) if column.kind == "numeric" else None
        if grid is None or not grid.sliced:
            continue
        values = private[column.name].to_numpy(dtype=float, na_value=np.nan)
        rng = np.random.default_rng(0)
        decoded = grid.draw(grid.index(private[column.name]), rng).astype(float)
        plain = plain_slices(values, column.low, column.high, rng)
        rows.append({"column": column.name, "plain": one_way_tvd(values, plain, edges[column.name]),
                     "swflow": one_way_tvd(values, decoded, edges[column.name]),
                     "width": float(np.median(np.diff(grid.edges)))})  # a log scale's slices differ: the median
    return rows


def main(argv=None) -> None:
    from tables_bench import REPORT, TUNE, read

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tables", nargs="+", default=[*TUNE, *REPORT])
    p.add_argument("--data-dir", default=str(HERE.parent / "data" / "tables"))
    p.add_argument("--smoke", action="store_true", help="one made-up column (CI)")
    args = p.parse_args(argv)
    if args.smoke:  # a made-up column: a fifth of it at exactly 56, the rest log-normal, declared 0 to 1 000
        from swflow.tables import Schema

        schema = Schema.from_json({"columns": [{"name": "x", "type": "numeric", "min": 0, "max": 1000},
                                               {"name": "g", "type": "categorical", "categories": ["a", "b"]}]})

        def made_up(seed):
            rng = np.random.default_rng(seed)
            x = np.where(rng.uniform(size=2000) < 0.2, 56.0, rng.lognormal(4, 1, 2000).clip(0, 1000))
            return pd.DataFrame({"x": x, "g": rng.choice(["a", "b"], 2000)})
        tables = {"made-up": (made_up(0), made_up(1), schema)}
    else:
        tables = {name: read(name, Path(args.data_dir)) for name in args.tables}
    print("| table | column | slice width (median) | one-way TVD, plain 1 024 slices | swflow's grid |")
    print("|---|---|---|---|---|")
    for name, (private, held_out, schema) in tables.items():
        for row in grid_losses(private, held_out, schema):
            print(f"| {name} | {row['column']} | {row['width']:.3g} | {row['plain']:.3f} | {row['swflow']:.3f} |")


if __name__ == "__main__":
    main()
