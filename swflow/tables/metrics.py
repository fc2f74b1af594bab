"""How close a synthetic table is to a reference table: marginals, associations, a downstream classifier.

Numbers are read in 10 bins at the reference's deciles, a value that a tenth of the reference holds (a pile) in a bin
of its own, a missing number in one after them; categories as declared (a missing value is a category): the scoring
protocol of docs/tables-benchmark.md. Pure functions of two frames and the schema.
"""
from __future__ import annotations

import itertools

import numpy as np

__all__ = ["discretize", "marginal_tvd", "marginal_errors", "associations", "efficacy"]


#: a value that at least this share of the reference's values hold (a pile, a bin's worth) is a bin of its own
PILE_SHARE = 0.1


def decile_edges(schema, reference) -> dict:
    """Per numeric column, the inner edges of its bins: at the deciles of the reference's values (missing ones
    left out; no value at all: one bin), and a pile's value and the next float after it, so that each value that at
    least PILE_SHARE of them hold is a bin of its own. The deciles alone collapse onto a pile and leave it in one bin
    with the values above it (psid1976's 0 hours worked with the fewest hours of those who work, weather's dry days
    with every rainy one): a release that moved a class off the pile, or onto it, scored as if it had not (issue
    94)."""
    edges = {}
    for c in schema.columns:
        if c.kind == "numeric":
            values = reference[c.name].to_numpy(dtype=float, na_value=np.nan)
            values = values[~np.isnan(values)]
            if not len(values):
                edges[c.name] = np.zeros(0)
                continue
            held, counts = np.unique(values, return_counts=True)
            piles = held[counts >= PILE_SHARE * len(values)]
            edges[c.name] = np.unique(np.concatenate([np.quantile(values, np.linspace(0.1, 0.9, 9)), piles,
                                                      np.nextafter(piles, np.inf)]))
    return edges


def discretize(schema, frame, edges: dict) -> np.ndarray:
    """(n, C) int codes: numbers by ``edges`` (decile_edges), categories by their declared position (-1: not
    declared)."""
    import pandas as pd

    out = []
    for c in schema.columns:
        if c.kind == "numeric":
            values = frame[c.name].to_numpy(dtype=float, na_value=np.nan)
            out.append(np.where(np.isnan(values), len(edges[c.name]) + 1, np.digitize(values, edges[c.name])))
        else:
            lookup = {v: i for i, v in enumerate(c.categories)}
            out.append(np.array([lookup.get(None if pd.isna(v) else v, -1) for v in frame[c.name]]))
    return np.stack(out, axis=1)


def _sizes(schema, edges: dict) -> list[int]:
    return [len(edges[c.name]) + 1 + int(c.missing) if c.kind == "numeric" else len(c.categories)
            for c in schema.columns]


def marginal_tvd(schema, synthetic, reference, *, ways=(1, 2, 3)) -> dict:
    """Mean total variation distance between the two frames' k-way marginals over all k-subsets of columns, for
    each k in ``ways``: {'tvd_1way': ..., ...}."""
    coded = _coded(schema, synthetic, reference)
    return {f"tvd_{k}way": float(np.mean(list(_errors(schema, *coded, k).values()))) for k in ways}


def marginal_errors(schema, synthetic, reference, k: int) -> dict:
    """{column names (a k-tuple): total variation distance between the two frames' k-way marginals on them}, for
    every k-subset of the columns, numbers in 10 bins at the reference's deciles: which marginals a mean hides."""
    return _errors(schema, *_coded(schema, synthetic, reference), k)


def _coded(schema, synthetic, reference) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(synthetic codes, reference codes, cells per column): both frames discretized at the reference's deciles."""
    edges = decile_edges(schema, reference)
    sizes = np.array(_sizes(schema, edges))
    a, b = discretize(schema, synthetic, edges), discretize(schema, reference, edges)
    return np.clip(a, 0, sizes - 1), np.clip(b, 0, sizes - 1), sizes


def _errors(schema, a: np.ndarray, b: np.ndarray, sizes: np.ndarray, k: int) -> dict:
    out = {}
    for cols in itertools.combinations(range(len(sizes)), k):
        shape = sizes[list(cols)]

        def hist(z):
            return np.bincount(np.ravel_multi_index(z[:, cols].T, shape), minlength=int(np.prod(shape))) / len(z)
        out[tuple(schema.names[j] for j in cols)] = 0.5 * float(np.abs(hist(a) - hist(b)).sum())
    return out


def associations(schema, frame, edges: dict) -> np.ndarray:
    """(C, C) Cramér's V between every pair of columns (numbers in their decile bins); 1 on the diagonal."""
    codes = discretize(schema, frame, edges)
    sizes = _sizes(schema, edges)
    n, count = len(codes), len(sizes)
    v = np.eye(count)
    for i, j in itertools.combinations(range(count), 2):
        table = np.zeros((sizes[i], sizes[j]))
        np.add.at(table, (np.clip(codes[:, i], 0, sizes[i] - 1), np.clip(codes[:, j], 0, sizes[j] - 1)), 1)
        table = table[table.sum(1) > 0][:, table.sum(0) > 0]
        if min(table.shape) < 2:
            continue
        expected = table.sum(1, keepdims=True) * table.sum(0, keepdims=True) / n
        chi2 = float(((table - expected) ** 2 / expected).sum())
        v[i, j] = v[j, i] = np.sqrt(chi2 / (n * (min(table.shape) - 1)))
    return v


def efficacy(schema, synthetic, reference, target: str) -> dict:
    """A gradient-boosted classifier trained on ``synthetic`` predicts ``target``'s last declared category (or top
    decile bin; a missing value is never the class) on ``reference``: accuracy and AUC (None when the synthetic rows
    hold one class only)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score

    names = [c.name for c in schema.columns]
    if target not in names:
        raise ValueError(f"target {target!r} is not a column of the schema {names}")
    edges = decile_edges(schema, reference)
    t = names.index(target)
    features = [i for i in range(len(names)) if i != t]
    train, test = discretize(schema, synthetic, edges), discretize(schema, reference, edges)
    column = schema.columns[t]
    if column.kind == "numeric":  # the top bin the reference reaches: its top decile, or a pile at its maximum
        inner = edges[target]
        reached = test[:, t][test[:, t] <= len(inner)]  # a missing value's bin comes after them
        positive = int(reached.max()) if len(reached) else len(inner)
        named = (f"{target} in its top decile bin (the held-out rows' highest tenth)" if positive == len(inner) else
                 f"{target} = {inner[positive - 1]:g} (a pile at the held-out rows' maximum)")
    else:  # the last declared category that is not the missing value
        positive = max(i for i, c in enumerate(column.categories) if c is not None)
        named = f"{target} = {column.categories[positive]!r} (the last declared category), against the rest"
    y, y_test = train[:, t] == positive, test[:, t] == positive
    if y.all() or not y.any():
        return {"accuracy": None, "auc": None, "positive_class": named}
    sizes = _sizes(schema, edges)
    # the classifier takes at most 255 categories a feature: a column with more is read by its cells' order
    model = HistGradientBoostingClassifier(categorical_features=[sizes[i] <= 255 for i in features], random_state=0)
    model.fit(np.maximum(train[:, features], 0), y)
    x_test = np.maximum(test[:, features], 0)
    return {"accuracy": float(model.score(x_test, y_test)), "positive_class": named,
            "auc": float(roc_auc_score(y_test, model.predict_proba(x_test)[:, 1]))}


#: rows of each frame the closest-record distances compare, at most (a seeded random subset)
CLOSEST_ROWS = 5000


def closest_records(schema, synthetic, private, held_out, *, seed: int = 0, rows: int = CLOSEST_ROWS) -> dict:
    """How close the synthetic records come to the private rows, beside the closeness of held-out rows (records
    the run never saw: the baseline of records that copy nothing). A distance is the number of columns whose bin
    (numbers at the held-out deciles) or category differ; each record's distance is to its closest row. Up to
    ``rows`` of each frame, drawn with ``seed``."""
    rng = np.random.default_rng(seed)
    edges = decile_edges(schema, held_out)
    codes = [discretize(schema, f.iloc[np.sort(rng.choice(len(f), min(rows, len(f)), replace=False))], edges)
             for f in (synthetic, private, held_out)]
    synthetic_codes, private_codes, held_codes = codes
    to_private, held_to_private = _nearest(synthetic_codes, private_codes), _nearest(held_codes, private_codes)
    to_held = _nearest(synthetic_codes, held_codes)
    return {"closest_records": {
        "rows_compared": [len(c) for c in codes],
        "distance": "columns whose decile bin (numbers) or category differ; to the closest row",
        "synthetic_identical_to_a_private_row": float(np.mean(to_private == 0)),
        "held_out_identical_to_a_private_row": float(np.mean(held_to_private == 0)),
        "synthetic_median_distance_to_private": float(np.median(to_private)),
        "held_out_median_distance_to_private": float(np.median(held_to_private)),
        "synthetic_closer_to_private_than_to_held_out": float(np.mean(to_private < to_held)),
        "synthetic_closer_to_held_out_than_to_private": float(np.mean(to_held < to_private))}}


def _nearest(a: np.ndarray, b: np.ndarray, block: int = 256) -> np.ndarray:
    """(len(a),) the fewest columns in which each row of ``a`` differs from a row of ``b`` (int codes)."""
    return np.concatenate([(a[i:i + block, None, :] != b[None, :, :]).sum(axis=2).min(axis=1)
                           for i in range(0, len(a), block)]) if len(a) else np.zeros(0, dtype=int)
