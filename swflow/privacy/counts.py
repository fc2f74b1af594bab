"""Read-back tests of released counts: a claimed noise std against the counts a histogram or a table release
published (swflow/privacy/verify.py says what the read-back checks and what it cannot prove).

The counts of a true release obey identities (every direction counts the same rows; every table totals n; tables
sharing a column agree on its one-way counts), so their departures from those identities are pure noise, whose
spread the claimed σ fixes: a χ² statistic, refused outside its two-sided 1 − COUNTS_FALSE_REFUSAL range.
"""
from __future__ import annotations

import math

import torch

__all__ = ["COUNTS_FALSE_REFUSAL", "ClaimMismatch", "check_tables", "verify_counts", "verify_tables"]

#: probability that a true histogram release is refused by the χ² test of its counts
COUNTS_FALSE_REFUSAL = 1e-9


class ClaimMismatch(ValueError):
    """A privacy claim that what was released does not support."""


def check_tables(report, noisy_counts: torch.Tensor, released: torch.Tensor, source: str) -> None:
    """Every recorded quantile table row (what the replay reads) must be one that the released counts and the
    claimed σ give (float32 rounding allowed): edited counts, a changed σ (it sets the threshold) or dropped
    directions leave rows that no recomputed table has."""
    from .histogram import TABLE_LEVELS, bin_edges, monotone_cdf, quantile_table

    counts = torch.as_tensor(noisy_counts, dtype=torch.float64)
    levels = (torch.arange(TABLE_LEVELS, dtype=torch.float64) + 0.5) / TABLE_LEVELS
    table = quantile_table(monotone_cdf(counts, noise_std=report.noise_std),
                           bin_edges(counts.shape[1], radius=report.norm_bound), levels).to(torch.float32)
    released = torch.as_tensor(released, dtype=torch.float32)
    if released.ndim != 3 or released.shape[-1] != table.shape[1]:
        raise ClaimMismatch(f"{source}: its released tables have shape {tuple(released.shape)}, not (steps, k, "
                            f"{table.shape[1]}): regenerate the run")
    tolerance = 1e-5 * report.norm_bound * math.sqrt(table.shape[1])
    for t in range(len(released)):
        nearest = torch.cdist(released[t].double(), table.double()).min(dim=1).values
        if bool((nearest > tolerance).any()):
            raise ClaimMismatch(f"{source}: step {t} replays quantile tables that its released counts and the "
                                f"claimed noise std {report.noise_std:.4g} do not give: the counts, the noise or the "
                                "directions were edited; regenerate the run")


def verify_counts(report, noisy_counts: torch.Tensor, *, source: str = "model.h5") -> None:
    """The χ² test of a histogram's released counts (K, B) against the report's n and σ (module docstring)."""
    from scipy.stats import norm

    counts = torch.as_tensor(noisy_counts, dtype=torch.float64)
    if counts.ndim != 2 or (counts.shape[0], counts.shape[1]) != (report.n_projections, report.bins):
        raise ClaimMismatch(f"{source} holds counts of shape {tuple(counts.shape)}, but the report describes "
                            f"K x B = {report.n_projections} x {report.bins}")
    k, b = counts.shape
    sigma = report.noise_std
    if not sigma > 0:
        raise ClaimMismatch(f"{source}: a private histogram release with noise std {sigma}")
    if k < 2:
        raise ClaimMismatch(f"{source}: a histogram on one direction cannot be checked (the counts' test compares "
                            "directions); swflow does not pass such a claim on. Use at least 2 directions")
    sums = counts.sum(dim=1)
    statistic = float(((sums - sums.mean()) ** 2).sum()) / (b * sigma ** 2)
    _chi_square(statistic, k - 1, sigma=sigma, released="counts", source=source,
                disagreement="the released counts' directions disagree on the number of rows by far more than the "
                             "claimed noise allows")
    if "class" in report.run_config:
        return  # one class of a labels-private run: its number of rows is private, the ledger's n is the whole set's
    # every direction counts all n rows: the mean row sum is n plus noise of std σ·sqrt(B/K)
    bound = float(norm.isf(COUNTS_FALSE_REFUSAL / 2)) * sigma * math.sqrt(b / k)
    if abs(float(sums.mean()) - report.dataset_size) > bound:
        raise ClaimMismatch(f"{source}: the released counts do not count the {report.dataset_size} rows the report "
                            "claims (their directions' mean total is further from it than the claimed noise allows): "
                            "the data set size was edited; regenerate the run")


def verify_tables(report, noisy_counts: torch.Tensor, sizes: list[int], pairs: list[tuple[int, int]], *,
                  noise_stds: list[float], source: str, size: tuple[float, float] | None = None,
                  unit_weighted: bool = False) -> None:
    """A table release's noisy counts (the K tables of ``pairs`` of columns with ``sizes`` cells, concatenated as
    :func:`swflow.privacy.marginals.pair_counts` writes them) against the report's n and each table's σ.

    What the true tables must satisfy gives the test pure noise to look at: every table's total is n, and every
    table that holds column i gives the same one-way counts of i. So (a) each total minus n is noise of variance
    cells·σ², and (b) for each column i and cell a, the tables holding i estimate the same count with noise of
    variance (the other column's cells)·σ²: their spread about the inverse-variance mean is pure noise. Both sums
    of squares over their variances are χ², with K and Σ_i k_i·(T_i − 1) degrees of freedom (T_i: the tables
    holding i); the test is two-sided at 1e-9. A claim of much more noise than the counts carry (σ × 10 with ε
    recomputed) lands far in the lower tail, an edited n or edited counts in the upper.

    ``size`` (add-remove, n private): (the released count n̂, its σ). The totals are then tested with n̂ as one
    more estimate of the same number: the spread of the K + 1 estimates about their inverse-variance mean is χ²
    with K degrees of freedom.

    ``unit_weighted`` (a privacy unit's run): the tables weigh each unit's rows by their spread over the tables'
    cells, which neither n̂ (weight min(1, k / rows)) nor any other release does, so their common total is known to
    no other number: the K totals are tested against each other only (χ² with K − 1 degrees of freedom), and
    n̂ is only bounded: a unit's spread weight is at least its count weight, so n̂ may not exceed the tables'
    pooled total by more than the two noises allow (one-sided, at 1e-9). Testing the totals against n̂ as the same
    number refused every true unit run once the noise fell below the gap between the two weightings (ε ≥ 3 on a
    few hundred units). ``noise_stds``: each table's σ, from the ledger's events (a target's tables may be released
    apart at a σ of their own: swflow/pipeline/table_pairs.py); the caller has checked each release's K and σ against
    the run's settings (pipeline.table_measurements.check_ledger)."""
    from .marginals import split_tables

    counts = torch.as_tensor(noisy_counts, dtype=torch.float64)
    try:
        tables = split_tables(counts, sizes, pairs)
    except ValueError as err:
        raise ClaimMismatch(f"{source}: {err}; regenerate the run") from None
    sigmas = [float(s) for s in noise_stds]
    if len(sigmas) != len(pairs) or not all(s > 0 for s in sigmas):
        raise ClaimMismatch(f"{source}: a private release of {len(pairs)} tables at noise stds {sigmas[:3]}…")
    check_integers(counts, report.mechanism, source=source)
    statistic = _totals_statistic(tables, sigmas, report.dataset_size, size, unit_weighted, source=source)
    freedom = len(tables) - unit_weighted
    for column in range(len(sizes)):
        estimates, variances = [], []
        for (i, j), table, std in zip(pairs, tables, sigmas):
            if column in (i, j):
                estimates.append(table.sum(dim=1) if column == i else table.sum(dim=0))
                variances.append(sizes[j if column == i else i] * std ** 2)
        if len(estimates) < 2:
            continue
        statistic += _pooled_spread(torch.stack(estimates), variances)
        freedom += sizes[column] * (len(estimates) - 1)
    if freedom < 1:
        return  # one table of a unit run: nothing of it to compare (its note says UNTESTED)
    _chi_square(statistic, freedom, sigma=max(sigmas), released="tables", source=source,
                disagreement="the released tables disagree with each other" + (
                    "" if unit_weighted else f", or with the {report.dataset_size} rows the report claims,") +
                " by more than the claimed noise allows: the counts" + ("" if unit_weighted else " or the data set "
                                                                         "size") + " were edited")


#: a table release whose noise test cannot refuse a claim of this many times its noise is said to be untested
UNTESTED_FACTOR = 10.0


def table_test_freedom(sizes: list[int], pairs: list[tuple[int, int]], *, unit_weighted: bool = False) -> int:
    """The degrees of freedom of verify_tables' χ²: the K totals (K − 1 where ``unit_weighted``: tested against each
    other only), and Σ_i k_i·(T_i − 1) for the columns held by T_i ≥ 2 tables."""
    held = [sum(column in pair for pair in pairs) for column in range(len(sizes))]
    return len(pairs) - unit_weighted + sum(k * (t - 1) for k, t in zip(sizes, held) if t >= 2)


def detectable_factor(freedom: int) -> float:
    """The smallest c such that a claim of c times the released noise is refused with probability 0.99 by the
    χ² test on ``freedom`` degrees of freedom (its statistic then is χ²/c²; refused below the 1e-9 quantile)."""
    from scipy.stats import chi2

    return math.sqrt(chi2.ppf(0.99, freedom) / chi2.ppf(COUNTS_FALSE_REFUSAL / 2, freedom))


def noise_check_note(sizes: list[int], pairs: list[tuple[int, int]], *, unit_weighted: bool = False) -> str:
    """What the read-back's noise test can see in a table release of these ``pairs``: said plainly where it cannot
    (one table, or tables that share no column: only their K totals can be tested)."""
    freedom = table_test_freedom(sizes, pairs, unit_weighted=unit_weighted)
    factor = detectable_factor(freedom) if freedom >= 1 else math.inf
    if factor > UNTESTED_FACTOR:
        return (f"UNTESTED: the released tables share too little (chi-square on {freedom} degrees of freedom) for a "
                "read-back to test the claimed noise: a file claiming far more noise than it carries, with its "
                "epsilon recomputed, would pass. Trust this epsilon only from a run you made; release more than one "
                "table sharing a column to make it testable")
    return (f"tested on read-back: the released tables' chi-square on {freedom} degrees of freedom refuses a claim "
            f"of {factor:.2g} times the noise they carry (with probability 0.99), and an edited n or edited counts")


def _totals_statistic(tables: list, sigmas: list[float], dataset_size: int, size, unit_weighted: bool, *,
                      source: str) -> float:
    """The χ² part of verify_tables' totals (each table's noise std in ``sigmas``): against n (replace-one), pooled
    with n̂ (add-remove), or among themselves with n̂ bounded one-sided (``unit_weighted``)."""
    totals, variances = [[float(t.sum())] for t in tables], [t.numel() * s ** 2 for t, s in zip(tables, sigmas)]
    if unit_weighted:
        if size is not None:
            _at_most_tables(totals, variances, size, source=source)
        return _pooled_spread(torch.tensor(totals, dtype=torch.float64), variances)
    if size is None:
        return sum((total - dataset_size) ** 2 / v for (total,), v in zip(totals, variances))
    return _pooled_spread(torch.tensor(totals + [[float(size[0])]], dtype=torch.float64), variances + [size[1] ** 2])


def _at_most_tables(totals: list[list[float]], variances: list[float], size: tuple[float, float], *,
                    source: str) -> None:
    """A unit run's released count of records n̂ (``size``: value, σ) against its pair tables' totals, each a unit's
    rows at a weight no smaller than n̂'s: refused when n̂ exceeds their inverse-variance mean by more than the
    1 − COUNTS_FALSE_REFUSAL quantile of the two noises."""
    from scipy.stats import norm

    precision = sum(1.0 / v for v in variances)
    mean = sum(total / v for (total,), v in zip(totals, variances)) / precision
    if size[0] - mean > float(norm.isf(COUNTS_FALSE_REFUSAL)) * math.sqrt(1.0 / precision + size[1] ** 2):
        raise ClaimMismatch(f"{source}: its released count of records is larger than its pair tables' total by more "
                            "than their noise allows (every unit weighs at least as much in the tables as in that "
                            "count): the count or the data set size was edited; regenerate the run")


def _pooled_spread(estimates: torch.Tensor, variances: list[float]) -> float:
    """Σ_t (x_t − x̄)² / v_t for T independent estimates (T, k) of the same k numbers, x̄ their inverse-variance
    mean: χ² with (T − 1)·k degrees of freedom when the variances are right."""
    weights = torch.tensor([1.0 / v for v in variances], dtype=torch.float64)
    mean = (weights[:, None] * estimates).sum(dim=0) / weights.sum()
    return float((weights[:, None] * (estimates - mean) ** 2).sum())


def check_integers(counts: torch.Tensor, mechanism: str, *, source: str) -> None:
    """The discrete Gaussian adds integers to integer counts: a release it made holds whole numbers only."""
    if mechanism == "discrete-gaussian" and not bool(torch.equal(counts, counts.round())):
        raise ClaimMismatch(f"{source}: its counts are not whole numbers, but the release it claims (the discrete "
                            "Gaussian) adds integer noise to integer counts: the mechanism or the counts were edited; "
                            "regenerate the run")


def _chi_square(statistic: float, freedom: int, *, sigma: float, released: str, disagreement: str,
                source: str) -> None:
    """Refuse a χ² ``statistic`` of ``freedom`` degrees of freedom outside its two-sided 1 − COUNTS_FALSE_REFUSAL
    range: below it, the release carries far less noise than claimed; above it, ``disagreement``. The lower tail
    only where it can see a forgery (:func:`detectable_factor` at most UNTESTED_FACTOR): on few degrees of freedom
    it has no power, and integer counts tie (a two-column table's total equal to the released n under add-remove,
    a few per cent of draws) at a statistic of exactly 0, below any quantile."""
    from scipy.stats import chi2

    low, high = chi2.ppf(COUNTS_FALSE_REFUSAL / 2, freedom), chi2.isf(COUNTS_FALSE_REFUSAL / 2, freedom)
    if statistic < low and detectable_factor(freedom) <= UNTESTED_FACTOR:
        raise ClaimMismatch(f"{source}: the released {released} carry far less noise than the claimed std {sigma:.4g} "
                            f"(chi-square {statistic:.4g} on {freedom} degrees of freedom, below {low:.4g}): the "
                            "claim was edited; regenerate the run")
    if statistic > high:
        raise ClaimMismatch(f"{source}: {disagreement} (chi-square {statistic:.4g} on {freedom} degrees of freedom, "
                            f"above {high:.4g}); regenerate the run")
