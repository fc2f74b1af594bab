"""Adapters from the ledger to real accountants (dp-accounting, Opacus) — no accounting by hand.

* ``replace-one`` (n public, fixed-size batches drawn without replacement): dp-accounting's
  ``RdpAccountant(REPLACE_ONE)`` with ``SampledWithoutReplacementDpEvent`` (Wang, Balle &
  Kasiviswanathan 2019). The noise multiplier is relative to the replace-one sensitivity 2R·√H.
* ``zero-out`` (a record replaced by a null record, Poisson sampling): Opacus' RDP or PRV
  accountant, whose Poisson-subsampled Gaussian analysis covers this relation.
* A ledger holding a single un-subsampled release is a plain Gaussian mechanism: its ε is the
  exact analytic-Gaussian value (Balle & Wang 2018), whatever accountant was named.
"""
from __future__ import annotations

import math
import warnings
from functools import lru_cache

from .ledger import MechanismEvent
from .mechanisms import analytic_gaussian_epsilon

__all__ = ["ACCOUNTANTS", "check_combination", "accountant_name", "epsilon_from_events"]

ACCOUNTANTS = ("rdp", "prv")
_ALLOWED_SAMPLING = {"replace-one": ("none", "without-replacement"), "zero-out": ("none", "poisson")}


def check_combination(*, adjacency: str, accountant: str, sampling: str) -> None:
    """Refuse settings whose accountant does not match the adjacency and the batch sampling."""
    if adjacency not in _ALLOWED_SAMPLING:
        raise ValueError(f"unknown adjacency {adjacency!r}; choose 'replace-one' or 'zero-out'")
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant!r}; choose one of {ACCOUNTANTS}")
    if sampling not in _ALLOWED_SAMPLING[adjacency]:
        raise ValueError(
            f"{sampling!r} sampling does not match {adjacency!r} adjacency: replace-one is accounted "
            "for fixed-size batches drawn without replacement, zero-out for Poisson sampling")
    if adjacency == "replace-one" and accountant == "prv":
        raise ValueError("the PRV accountant (Opacus) covers Poisson sampling under zero-out only; "
                         "use accountant='rdp' with replace-one")


def accountant_name(*, adjacency: str, accountant: str, events: tuple[MechanismEvent, ...]) -> str:
    if _is_single_release(events):
        return "analytic Gaussian mechanism (Balle & Wang 2018)"
    if all(e.sampling == "none" for e in events):
        library = "dp-accounting" if adjacency == "replace-one" else "Opacus"
        return f"{library} RDP, composed Gaussian releases of the whole data set"
    if adjacency == "replace-one":
        return "dp-accounting RDP, sampling without replacement"
    return "Opacus PRV, Poisson sampling" if accountant == "prv" else "Opacus RDP, Poisson sampling"


def _is_single_release(events) -> bool:
    return len(events) == 1 and events[0].count == 1 and events[0].sampling == "none"


@lru_cache(maxsize=512)
def epsilon_from_events(events: tuple[MechanismEvent, ...], *, delta: float, adjacency: str,
                        accountant: str = "rdp") -> float:
    """ε at the accountant's share ``delta`` of δ (the sensitivity-bound failures are added by the caller).

    Memoized: events are immutable, and calibration asks the same question many times.
    """
    if not events:
        return 0.0
    for e in events:
        check_combination(adjacency=adjacency, accountant=accountant, sampling=e.sampling)
    if any(e.noise_multiplier <= 0 for e in events):
        return math.inf
    if _is_single_release(events):
        return analytic_gaussian_epsilon(noise_multiplier=events[0].noise_multiplier, delta=delta)
    if adjacency == "replace-one":
        return _dp_accounting_replace_one(events, delta)
    return _opacus_zero_out(events, delta, accountant)


def _dp_accounting_replace_one(events, delta: float) -> float:
    import dp_accounting as dpa
    from dp_accounting import rdp

    acc = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    for e in events:
        base = dpa.GaussianDpEvent(e.noise_multiplier)
        if e.sampling == "without-replacement":
            base = dpa.SampledWithoutReplacementDpEvent(e.dataset_size, e.sample_size, base)
        acc.compose(base, e.count)
    return float(acc.get_epsilon(delta))


def _opacus_zero_out(events, delta: float, accountant: str) -> float:
    from opacus.accountants import PRVAccountant, RDPAccountant

    acc = PRVAccountant() if accountant == "prv" else RDPAccountant()
    acc.history = [(e.noise_multiplier, e.sample_rate if e.sampling == "poisson" else 1.0, e.count)
                   for e in events]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns about optimal orders at the range's edge
        return float(acc.get_epsilon(delta))
