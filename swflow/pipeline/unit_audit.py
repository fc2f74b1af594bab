"""White-box audit of a table run with a privacy unit (swflow/privacy/units.py): one unit of many rows, placed
worst case, against the table without it, through the releases a unit's run calibrates (swflow/pipeline/audits.py
audits one record's)."""
from __future__ import annotations

import numpy as np
import torch

from ..privacy import PrivacySpec
from .audits import WHITEBOX_DELTA, _one_record_targets, _resolution_calibrations

__all__ = ["unit_whitebox_audit"]


def unit_whitebox_audit(epsilon: float, *, max_rows: int = 4, unit_rows: int | None = None, bounded: bool = True,
                        trials: int = 1_000_000, seed: int = 0) -> dict:
    """White-box audit of a table run with a privacy unit (swflow/privacy/units.py): add/remove of one unit of
    ``unit_rows`` rows (default: the bound k = ``max_rows``), placed worst case, every row at the first repeated
    value, in fine cell 0 and in table cell 0, against the table without it. The releases are calibrated as the run
    calibrates them (the count of records first, then the repeated values, the fine tree and the pair table sharing
    what it leaves), their σ that of the real targets weighted at the bound k; every draw goes through their noise
    steps (the continuous Gaussian a unit's run uses), and the statistic is the likelihood ratio's. The unit moves
    its value's count by one and every other release by its rows' mass, min(rows, k) with the bound applied (the
    weights privacy.units computes: by the count bound for the count, and for the tree and the pair table by the
    unit's spread, which for rows in one cell is the same);
    ``bounded=False`` plays a library that forgets it: every row counted once, under the same claim."""
    from ..privacy.audit import split_epsilon_lower_bound
    from ..privacy.oneway import Tree
    from ..privacy.units import spread_weights, tree_weights, unit_weights
    from ..tables.resolution import RESOLUTION_SHARE

    rows = max_rows if unit_rows is None else unit_rows
    spec = PrivacySpec(epsilon=epsilon, delta=WHITEBOX_DELTA, count_noise="gaussian", adjacency="add-remove",
                       secure_noise=True)
    tree = Tree(16, 4, 2)
    spent, *calibrations = _resolution_calibrations(spec, tree, RESOLUTION_SHARE, seed=seed, contribution=max_rows)
    named, levels, tables = _one_record_targets(0, 0, tree, tuple(calibrations), seed)
    levels, tables = levels.weighted(None, max_rows), tables.weighted(None, max_rows)  # σ at the unit's sensitivity
    sigmas = {"values": named.count_noise_std(), "levels": levels.count_noise_std(),
              "tables": tables.count_noise_std(), "size": spent[0].noise_std}
    codes, cells = np.zeros(rows, dtype=np.int64), np.zeros((rows, 2), dtype=np.int64)
    mass = rows * (float(unit_weights(codes, max_rows=max_rows)[0]) if bounded else 1.0)
    # the tree's and the pair table's weights as a run sets them, from the unit's spread: all in one node and one
    # cell, the worst case
    tree_mass = rows * (float(tree_weights(codes, torch.from_numpy(cells[:, :1]), [tree], max_rows=max_rows)[0])
                        if bounded else 1.0)
    table_mass = rows * (float(spread_weights(codes, cells, [(0, 1)], max_rows=max_rows)[0]) if bounded else 1.0)
    # the coordinates the unit moves: its value's count, its node on each of the tree's two levels, its table cell,
    # the count of records; what each moves by
    moved = {"values": (named, 1, 1.0), "levels": (levels, 2, tree_mass), "tables": (tables, 1, table_mass),
             "size": (tables, 1, mass)}

    def draws(there: bool) -> np.ndarray:
        total = np.zeros(trials)
        for name, (target, coordinates, shift) in moved.items():
            exact = torch.full((trials, coordinates), shift * there, dtype=torch.float64)
            noisy = target._noisy(exact, sigmas[name])
            total += (shift * noisy.sum(dim=1) / sigmas[name] ** 2).numpy()
        return total

    return {"audit": f"white-box, a unit of {rows} rows ({'bounded' if bounded else 'NOT bounded'} at {max_rows})",
            "claimed_epsilon": epsilon, "trials": trials, "max_rows_per_unit": max_rows, "unit_rows": rows,
            "bounded": bounded,
            "audited_epsilon_lower_bound": split_epsilon_lower_bound(draws(True), draws(False), delta=WHITEBOX_DELTA)}
