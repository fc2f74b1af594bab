"""What quality to expect before any private row is used: public rows run as if they were private.

`swflow preview PUBLIC --schema S --epsilon 1 10` (and the owner's page's Preview step) splits the public rows in
two halves by a fixed seed, releases one half at each ε exactly as a run would release the private table, and
scores the samples against the other half: the mean 3-way TVD (and, with a target, a classifier's AUC), beside the
floor (the first half itself scored against the second) and independent columns (each column drawn alone from
the first half). Everything here reads public rows only; no privacy is spent. A private table larger than the half
does better: a count's noise does not grow with the rows it counts.
"""
from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass

__all__ = ["PreviewLine", "preview_quality"]


@dataclass(frozen=True)
class PreviewLine:
    """One row of a preview: ``label`` ('floor', 'independent columns' or 'ε = …'), its mean 3-way TVD against the
    held-back half, the AUC on the target (None without one, or where the samples hold one class), and the public
    rows each release counted (the half)."""

    label: str
    epsilon: float | None
    tvd_3way: float
    auc: float | None
    rows: int

    def to_json(self) -> dict:
        return asdict(self)


def preview_quality(public, schema, *, epsilons=(1.0, 10.0), delta: float = 1e-9, target: str | None = None,
                    seed: int = 0, steps: int | None = None) -> list[PreviewLine]:
    """The preview of ``public`` (a DataFrame of public rows under ``schema``, a Schema) at each of ``epsilons``
    (module docstring): the floor, independent columns, then one line an ε."""
    import numpy as np

    from ..tables.metrics import efficacy, marginal_tvd
    from .tables import TableSynthesizer

    checked = schema.check(public, clip=True)
    if len(checked) < 20:
        raise ValueError(f"a preview splits the public rows in two halves: give at least 20 public rows, not "
                         f"{len(checked)}")
    if not epsilons or any(not e > 0 for e in epsilons):
        raise ValueError(f"a preview runs at one or more epsilons > 0, got {list(epsilons)}")
    order = np.random.default_rng(seed).permutation(len(checked))
    half = len(checked) // 2
    first, second = checked.iloc[order[:half]], checked.iloc[order[half:]]

    def line(label: str, epsilon, samples) -> PreviewLine:
        auc = None if target is None else efficacy(schema, samples, second, target)["auc"]
        return PreviewLine(label, epsilon, marginal_tvd(schema, samples, second, ways=(3,))["tvd_3way"], auc, half)

    rng = np.random.default_rng(seed + 1)
    independent = first.apply(lambda column: column.to_numpy()[rng.integers(0, half, half)])
    lines = [line("floor (the first half itself)", None, first), line("independent columns", None, independent)]
    options = {} if steps is None else {"steps": steps}
    for epsilon in epsilons:
        syn = TableSynthesizer(schema=schema, epsilon=float(epsilon), delta=min(delta, 0.5 / half), target=target,
                               count_noise="gaussian", privacy_seed=seed, **options)  # public rows: a typed seed
        with warnings.catch_warnings():  # a half of a few hundred rows is small for any ε: the line says how small
            warnings.simplefilter("ignore")
            syn.fit(first)
        lines.append(line(f"ε = {epsilon:g}", float(epsilon), syn.sample(half, seed=seed)))
    return lines
