"""Declared private populations: when the private data is not the public population.

On the paper's benchmark the public and private halves are drawn from one distribution, so the
public split, decoded, is a free sample that no private method can beat. A user's private data comes
from *their* population. A population here is a subset of a dataset's private split, drawn with
fixed class proportions, with the matching subset of the test part as its reference; the public
split (and the autoencoder trained on it) stays the broad population. No method is told the
proportions: they are a property of the data, declared in the run's manifest.

* ``skewed``: all ten classes, proportions falling geometrically from about 32% (class 0) to 1% (class 9);
* ``footwear``: Fashion-MNIST's sandals, sneakers and ankle boots (classes 5, 7, 9), a third each (declared for
  Fashion-MNIST only: on another dataset those classes are not footwear);
* ``classes-579``: classes 5, 7 and 9, a third each, on any labelled dataset (the digits stand-in of the
  footwear benchmarks' smoke runs).
"""
from __future__ import annotations

import numpy as np

__all__ = ["POPULATIONS", "POPULATION_DATASETS", "check_population", "proportions", "population_rows", "describe"]

_RATIO = (0.01 / 0.30) ** (1 / 9)  # class c weighs RATIO**c: 30 : 1 between the first and the last class
POPULATIONS = {
    "skewed": {c: _RATIO ** c for c in range(10)},
    "footwear": {5: 1.0, 7: 1.0, 9: 1.0},
    "classes-579": {5: 1.0, 7: 1.0, 9: 1.0},
}


#: the datasets a population is declared for (footwear is Fashion-MNIST's classes 5, 7, 9); None: any labelled set
POPULATION_DATASETS = {"skewed": None, "footwear": ("fashion-mnist",), "classes-579": None}


def check_population(name: str, dataset: str) -> None:
    """Refuse a population that is not declared for ``dataset`` (footwear on digits would draw digits 5, 7, 9)."""
    proportions(name)
    allowed = POPULATION_DATASETS.get(name)
    if allowed is not None and dataset not in allowed:
        raise ValueError(f"population {name!r} is declared for {', '.join(allowed)}, not {dataset!r}; choose one of "
                         f"{sorted(n for n, d in POPULATION_DATASETS.items() if d is None or dataset in d)}")


def proportions(name: str) -> dict[int, float]:
    """The declared class proportions of population ``name`` (they sum to 1)."""
    if name not in POPULATIONS:
        raise ValueError(f"unknown population {name!r}; choose one of {sorted(POPULATIONS)}")
    weights = POPULATIONS[name]
    total = sum(weights.values())
    return {c: w / total for c, w in weights.items()}


def population_rows(labels: np.ndarray, name: str, *, seed: int = 0) -> np.ndarray:
    """Positions (into ``labels``) of the largest subset with the declared proportions, drawn without
    replacement (seeded). Class counts are the proportions times the size, rounded by largest remainder,
    so they are met to within one row per class."""
    labels = np.asarray(labels)
    share = proportions(name)
    available = {c: int((labels == c).sum()) for c in share}
    if min(available.values()) == 0:
        raise ValueError(f"population {name!r} needs classes {sorted(share)}; some have no rows here")
    size = int(min(available[c] / p for c, p in share.items()))
    exact = np.array([size * share[c] for c in share])
    counts = np.floor(exact).astype(int)
    for i in np.argsort(exact - counts)[::-1][: size - counts.sum()]:
        counts[i] += 1
    counts = np.minimum(counts, [available[c] for c in share])
    rng = np.random.default_rng(seed)
    picked = [rng.choice(np.flatnonzero(labels == c), size=k, replace=False) for c, k in zip(share, counts)]
    return np.sort(np.concatenate(picked))


def describe(name: str, rows: np.ndarray) -> dict:
    """The manifest entry of a drawn population: its declaration (name, declared proportions) and its size n, which
    is public as every run's n is. Never the drawn class counts or a hash of the drawn rows: with private labels
    those are exact private statistics that the run says it does not publish."""
    return {"population": name, "proportions": {str(c): p for c, p in proportions(name).items()},
            "size": int(rows.size)}
