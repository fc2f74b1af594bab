"""The number of records, released once: all an add-remove table run knows of n.

Under add-remove adjacency (the peers' unit: a neighbouring table has one record more or one less) n itself is
private. A table run then spends SIZE_SHARE of its budget (of ρ in zCDP, of μ² in Gaussian DP) on one noisy count
of its records (sensitivity 1), first; every later step reads that estimate n̂, never n: the cells rule, the pairs'
choice, δ's advice, the calibration of the other releases (composed with this one by the accountant), the
particles' normalisation and the default number of samples. The read-back tests the pair tables' totals against
n̂ (swflow.privacy.counts.verify_tables).
"""
from __future__ import annotations

import math

import torch

from .histogram import histogram_sensitivity, one_release_multiplier
from .ledger import MechanismEvent

__all__ = ["SIZE_SHARE", "release_size", "public_size", "shares_after", "size_event"]

#: the share of the budget the count of records takes: its σ is z/√0.02 ≈ 7z (±30 records at ε = 1), which moves
#: no table; the rest is the other releases'
SIZE_SHARE = 0.02


def shares_after(shares: tuple[float, ...], spent: tuple) -> tuple[float, ...]:
    """The later releases' ``shares`` of what the size releases already ``spent`` (their events) leave."""
    left = 1 - SIZE_SHARE * len(spent)
    return tuple(share * left for share in shares)


def public_size(released: float) -> int:
    """The whole number of records a released count stands for (at least 1)."""
    return max(1, round(float(released)))


def size_event(privacy, size: int, *, contribution: int = 1) -> MechanismEvent:
    """The ledger event of the count of records released as ``size`` (public): multiplier z/√SIZE_SHARE (z: the
    budget's one-release multiplier; ``privacy`` a PrivacySpec), sensitivity ``contribution`` (the most one privacy
    unit adds to the count). Pure: a saved run's is derived again from its settings."""
    multiplier = one_release_multiplier(privacy) / math.sqrt(SIZE_SHARE)
    sensitivity = histogram_sensitivity(1, adjacency="add-remove", contribution=contribution).value
    return MechanismEvent(noise_multiplier=multiplier, noise_std=multiplier * sensitivity, sensitivity=sensitivity,
                          sensitivity_bound="histogram", delta_sensitivity=0.0, sampling="none", sample_size=size,
                          dataset_size=size, n_projections=1, mechanism=privacy.count_noise, contribution=contribution)


def release_size(n: float, privacy, noise, ledger, *, contribution: int = 1) -> tuple[float, MechanismEvent]:
    """(n + noise, its ledger event, recorded in ``ledger``): the count of the ``n`` private records released once
    (:func:`size_event`), the ``privacy.count_noise`` mechanism drawn by ``noise`` (a NoiseSource). ``contribution``:
    the most one privacy unit adds to ``n`` (its rows' weights, swflow/privacy/units.py), the sensitivity."""
    sigma = size_event(privacy, 1, contribution=contribution).noise_std
    if privacy.count_noise == "discrete-gaussian":
        if contribution != 1:
            raise ValueError("a privacy unit's records are counted with the continuous Gaussian")
        released = float(noise.discrete_gaussian(torch.tensor([n], dtype=torch.int64), sigma)[0])
    else:
        released = n + float(noise.gaussian((1,), sigma, dtype=torch.float64)[0])
    event = size_event(privacy, public_size(released), contribution=contribution)
    ledger.record(event)
    return released, event
