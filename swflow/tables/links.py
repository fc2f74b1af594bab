"""Whether a table release shows any link between its columns beyond its noise (issue 94, item 3).

Each released pair table T (a × b cells, noise of std σ_t on every count) is compared with the table its columns'
laws give if they were independent, C = n · p_i p_jᵀ, each law pooled over every table that holds its column
(:func:`~swflow.tables.shrinkage.pooled_laws`). Where every pair of columns is independent and the laws exact, each
T − C is its noise alone, and Σ_t ‖T − C‖² / σ_t² over the tables is about χ². :func:`departure_p_value` is that
χ²'s upper tail: small where some table departs from its columns' independence by
more than its noise explains. Everything here reads released numbers only (post-processing).

The sum's degrees of freedom are its mean without a link (:func:`_null_mean`), less than the cells' number: the laws,
read off the same tables, take some of their noise. Without a link the p-value is uniform where the noise is small
against the counts (checked by Monte Carlo in tests/test_target_tables.py), and high where it swamps them (psid1976's
376 rows at ε = 1: a median of 0.8 on exactly independent tables), where the warning it drives is then apt anyway.
On the benchmark's tables at ε = 1 (privacy seeds 0 and 1, and one release of fresh noise; docs/tables-design.md,
"A release that shows no link"): psid1976 0.94, 0.91, 0.33 (its target's tables 0.048 and 0.78), caravan 5e-4,
4e-5, 0.038, resumes 5e-5, 3e-5, 0.10 (both where a classifier learns nothing at ε = 1), hsb82 2e-4 and 1e-7,
medexp 1e-9 and 6e-7, default, fertility, txhousing and insteval below 1e-70; no other table warns.
"""
from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["LINK_LEVEL", "departure_p_value", "departure_p_values", "pooled_noise"]

#: the p-value below which a release is said to show links beyond its noise
LINK_LEVEL = 0.01


def departure_p_value(tables: list[Tensor], sizes: list[int], pairs: list[tuple[int, int]], *,
                      noise_stds: list[float], dataset_size: float, only: list[bool] | None = None) -> float:
    """The χ² upper tail of the released ``tables``' departures from their columns' independence (module docstring):
    K tensors (sizes[i], sizes[j]) for ``pairs``, each table's noise std in ``noise_stds``, n = ``dataset_size``;
    ``only``: the tables summed (default: all; the laws are pooled over all of them either way). The degrees of
    freedom are what the sum's mean is without a link (:func:`_null_mean`), not the cells' number."""
    return departure_p_values(tables, sizes, pairs, noise_stds=noise_stds, dataset_size=dataset_size,
                              subsets=[only])[0]


def departure_p_values(tables: list[Tensor], sizes: list[int], pairs: list[tuple[int, int]], *,
                       noise_stds: list[float], dataset_size: float, subsets: list[list[bool] | None]) -> list[float]:
    """:func:`departure_p_value` for each of ``subsets`` of the tables (None: all), each table's departure and
    null mean computed once."""
    from scipy.stats import chi2

    from .shrinkage import pooled_laws

    if not len(tables) == len(pairs) == len(noise_stds) or not all(s > 0 for s in noise_stds):
        raise ValueError("need one table and one positive noise std for each pair")
    laws = pooled_laws(tables, sizes, pairs)
    pooled = _law_weights(sizes, pairs, noise_stds)
    statistics, means = [], []
    for t, ((i, j), table, sigma) in enumerate(zip(pairs, tables, noise_stds)):
        independent = dataset_size * torch.outer(laws[i], laws[j]).to(torch.float64)
        statistics.append(float(((table.to(torch.float64) - independent) ** 2).sum()) / sigma ** 2)
        means.append(_null_mean(t, sizes, pairs, noise_stds, laws, pooled))
    out = []
    for only in subsets:
        kept = [k for k in range(len(tables)) if only is None or only[k]]
        freedom = sum(means[k] for k in kept)
        out.append(float(chi2.sf(sum(statistics[k] for k in kept), freedom)) if freedom > 0 else 1.0)
    return out


def _law_weights(sizes: list[int], pairs: list[tuple[int, int]], noise_stds: list[float]) -> list[tuple[float, float]]:
    """Per column, (W, V): the sum of the weights w_s = 1 / (the other column's cells) at which
    :func:`~swflow.tables.shrinkage.pooled_laws` averages its tables' margins, and the noise variance V = Σ_s w_s·σ_s²
    / W² that average carries on each of its counts ((0, 0) for a column in no table)."""
    weight, spread = [0.0] * len(sizes), [0.0] * len(sizes)
    for (i, j), sigma in zip(pairs, noise_stds):
        for column, other in ((i, j), (j, i)):
            weight[column] += 1.0 / sizes[other]
            spread[column] += sigma ** 2 / sizes[other]
    return [(w, v / w ** 2 if w else 0.0) for w, v in zip(weight, spread)]


def _null_mean(t: int, sizes: list[int], pairs: list[tuple[int, int]], noise_stds: list[float], laws,
               pooled: list[tuple[float, float]]) -> float:
    """E‖T − C‖² / σ_t² of table ``t`` = (i, j), a × b cells, without a link, to first order in the noise.

    Column i's law p is its tables' margins averaged at weights w_s = 1 / (the other column's cells), W_i their sum,
    then made to sum to one: its counts carry noise ẽ_i = ê_i − p·Σê_i, ê_i of variance V_i = Σ_s w_s·σ_s² / W_i² a
    cell (``pooled``: each column's (W, V), :func:`_law_weights`), table t's own row margins in it at weight (1/b) /
    W_i. T − C = E_t − ẽ_i qᵀ − p ẽ_jᵀ, so its mean square over σ_t² is a·b − 2(a − 1) / (b·W_i) − 2(b − 1) / (a·W_j)
    (the laws take some of the table's own noise) + [‖q‖²·V_i·(a − 2 + a‖p‖²) + ‖p‖²·V_j·(b − 2 + b‖q‖²)] / σ_t² (they
    spread their own over it) + 2c·(1 − a‖p‖² − b‖q‖² + a·b·‖p‖²‖q‖²), c = 1 / (a·b·W_i·W_j) (the one cell the two
    margins share)."""
    (i, j), sigma = pairs[t], noise_stds[t]
    a, b = sizes[i], sizes[j]
    (w_i, v_i), (w_j, v_j) = pooled[i], pooled[j]
    pp, qq = float((laws[i].double() ** 2).sum()), float((laws[j].double() ** 2).sum())
    spread = qq * v_i * (a - 2 + a * pp) + pp * v_j * (b - 2 + b * qq)
    shared = 2 / (a * b * w_i * w_j) * (1 - a * pp - b * qq + a * b * pp * qq)
    return a * b - 2 * (a - 1) / (b * w_i) - 2 * (b - 1) / (a * w_j) + spread / sigma ** 2 + shared


def pooled_noise(sizes: list[int], pairs: list[tuple[int, int]], noise_stds: list[float]) -> list[float | None]:
    """Each column's count noise std once its one-way counts are pooled at inverse variance over the tables that
    hold it (a table adds the noise of its other column's cells: variance cells · σ_t²); None for a column in none."""
    precision = [0.0] * len(sizes)
    for (i, j), sigma in zip(pairs, noise_stds):
        precision[i] += 1.0 / (sizes[j] * sigma ** 2)
        precision[j] += 1.0 / (sizes[i] * sigma ** 2)
    return [p ** -0.5 if p > 0 else None for p in precision]
