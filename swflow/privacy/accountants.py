"""Adapters from the ledger to dp-accounting — no accounting by hand.

* ``replace-one`` (n public, fixed-size batches drawn without replacement): dp-accounting's
  ``RdpAccountant(REPLACE_ONE)`` with ``SampledWithoutReplacementDpEvent`` (Wang, Balle &
  Kasiviswanathan 2019). The noise multiplier is relative to the replace-one sensitivity 2R·√H.
* ``zero-out`` (a record replaced by a null record, Poisson batches): every sampled row brings
  its own noisy column, so a sampled null record still adds a pure-noise column, and the absent
  and present cases are not those of a fixed-shape sum. Opacus' add/remove analysis (which assumes
  the absent record adds nothing) does not cover that; dp-accounting's PLD accountant for Poisson
  sampling under REPLACE_ONE does. Its model swaps contributions ±s, a distance of 2s, with s the
  zero-out sensitivity R·√H: an upper bound on the release's loss, tested in tests/test_privacy.py.
* Releases of the whole data set (no sampling) are composed Gaussian mechanisms whatever the
  adjacency (its sensitivity sets the multiplier): dp-accounting RDP; a single one is accounted
  exactly with the analytic Gaussian mechanism (Balle & Wang 2018).
* A single discrete-Gaussian release of integer counts (the sliced histogram's default noise, drawn by
  OpenDP's sampler) is accounted by dp-accounting's privacy loss distribution of the discrete Gaussian,
  composed once per count a neighbour moves (2K counts, each by one). Inside a composition (the histogram
  and a DP-SGD adaptation of the decoder) it enters as the continuous Gaussian of the same multiplier,
  whose Rényi bound it satisfies.
* Several histogram releases of the whole data set, each made once and all with the same noise (a table's fine
  one-way histograms, then its pair tables): Gaussian releases compose exactly as one Gaussian of multiplier
  (Σ z_i⁻²)^(−1/2) (Gaussian differential privacy: μ² adds; Dong, Roth & Su 2022), accounted by the analytic
  Gaussian mechanism; discrete-Gaussian releases by dp-accounting's privacy loss distributions of every count a
  neighbour moves, composed.
* A run with a private choice (rounds of the exponential mechanism, privacy/selection.py: each (ε₀²/8)-zCDP) is
  accounted as a whole by dp-accounting's RDP: its ZCDpEvents composed with its releases' Gaussian events (a
  discrete Gaussian's by the continuous one's Rényi bound). Under replace-one only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from .ledger import SELECTION, MechanismEvent
from .mechanisms import analytic_gaussian_epsilon, discrete_gaussians_epsilon

__all__ = ["ACCOUNTANTS", "Accountant", "accountant_for", "check_combination", "epsilon_from_events"]

from ..core.config import ACCOUNTANTS  # noqa: E402  (the families a user may name in PrivacySpec.accountant)
_ALLOWED_SAMPLING = {"replace-one": ("none", "without-replacement"), "zero-out": ("none", "poisson"),
                     "add-remove": ("none",)}
_FAMILY_FOR = {"without-replacement": "rdp", "poisson": "pld", "none": "rdp"}


@dataclass(frozen=True)
class Accountant:
    """One way of turning a run's events into ε at a δ: what privacy.json names is what computed ε.

    family : the user-facing family it belongs to ('rdp' or 'pld'; the analytic and discrete Gaussian
        are the exact accounts of a single release, inside the 'rdp' family)
    name : the sentence privacy.json carries as ``accountant``
    """

    family: str
    name: str
    _epsilon: Callable[[tuple[MechanismEvent, ...], float], float] = field(repr=False, compare=False)

    def epsilon(self, events: tuple[MechanismEvent, ...], *, delta: float) -> float:
        return self._epsilon(events, delta)


def check_combination(*, adjacency: str, sampling: str, accountant: str | None = None) -> None:
    """Refuse settings whose accountant (None: the default) does not match the adjacency and the batch sampling."""
    if adjacency not in _ALLOWED_SAMPLING:
        raise ValueError(f"unknown adjacency {adjacency!r}; choose 'replace-one', 'zero-out' or 'add-remove'")
    if accountant is not None and accountant not in ACCOUNTANTS:
        raise ValueError(f"unknown accountant {accountant!r}; choose one of {ACCOUNTANTS} (or leave it unset: "
                         "the adjacency and batch sampling decide). Opacus' add/remove accountants assume an "
                         "absent record adds nothing to the release, which per-record noisy columns violate")
    if sampling not in _ALLOWED_SAMPLING[adjacency]:
        raise ValueError(
            f"{sampling!r} sampling does not match {adjacency!r} adjacency: replace-one is accounted "
            "for fixed-size batches drawn without replacement, zero-out for Poisson sampling, add-remove for "
            "releases of a whole table only")
    if accountant is not None and accountant != _FAMILY_FOR[sampling]:
        raise ValueError(f"{sampling!r} sampling under {adjacency!r} is accounted with "
                         f"accountant={_FAMILY_FOR[sampling]!r}, not {accountant!r}")


def _is_single_release(events) -> bool:
    return len(events) == 1 and events[0].count == 1 and events[0].sampling == "none"


def _whole_releases(events, mechanism: str) -> bool:
    """Every event one release of the whole data set with ``mechanism``'s noise."""
    return all(e.count == 1 and e.sampling == "none" and e.mechanism == mechanism for e in events)


def _composed_counts(events, mechanism: str) -> bool:
    """Several histogram releases of the whole data set (a table's trees and pair tables), each once, with
    ``mechanism``'s noise: what the composed accountants cover. Other compositions keep the accountant they had, so
    saved runs re-derive as before."""
    return len(events) > 1 and _whole_releases(events, mechanism) and all(
        e.sensitivity_bound == "histogram" for e in events)


def _discrete(events, delta: float, *, moved_per_partition: int = 2) -> float:
    if not _whole_releases(events, "discrete-gaussian"):
        raise ValueError("the discrete Gaussian is accounted for releases of the whole data set, each once")
    if any(e.contribution != 1 for e in events):  # accountant_for refuses these; never account them here
        raise ValueError("the discrete Gaussian's account composes counts moved by one each")
    # a histogram's neighbour moves 2K counts by one each (privacy/histogram.py); K under add-remove
    return discrete_gaussians_epsilon(tuple((e.noise_multiplier, moved_per_partition * e.n_projections)
                                            for e in events), delta=delta)


def _discrete_add_remove(events, delta: float) -> float:
    return _discrete(events, delta, moved_per_partition=1)


def _analytic(events, delta: float) -> float:
    composed = sum(e.noise_multiplier ** -2 for e in events) ** -0.5
    return analytic_gaussian_epsilon(noise_multiplier=composed, delta=delta)


def _dp_accounting_rdp(events, delta: float) -> float:
    import dp_accounting as dpa
    from dp_accounting import rdp

    acc = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    for e in events:
        acc.compose(e.to_dp_event(), e.count)
    return float(acc.get_epsilon(delta))


def _dp_accounting_poisson_substitution(events, delta: float) -> float:
    """Poisson batches under replace-one (substitution) neighbours: dp-accounting's PLD. Unsampled
    releases inside such a run are plain Gaussians, whose REPLACE_ONE PLD doubles the distance; that
    only over-counts, so the bound stays valid."""
    import dp_accounting as dpa
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    for e in events:
        acc.compose(e.to_dp_event(), e.count)
    return float(acc.get_epsilon(delta))


DISCRETE = Accountant("rdp", "dp-accounting PLD of the discrete Gaussian, composed over the 2K counts a record moves",
                      _discrete)
ANALYTIC = Accountant("rdp", "analytic Gaussian mechanism (Balle & Wang 2018)", _analytic)
DISCRETE_COMPOSED = Accountant("rdp", "dp-accounting PLD of the discrete Gaussian, composed over the counts a record "
                               "moves in every release", _discrete)
DISCRETE_ADD_REMOVE = Accountant("rdp", "dp-accounting PLD of the discrete Gaussian, composed over the K counts a "
                                 "record added or removed moves in every release", _discrete_add_remove)
GDP_COMPOSED = Accountant("rdp", "analytic Gaussian mechanism of the composed releases (Gaussian DP: 1/z^2 adds)",
                          _analytic)
RDP_FULL = Accountant("rdp", "dp-accounting RDP, composed Gaussian releases of the whole data set", _dp_accounting_rdp)
RDP_SAMPLED = Accountant("rdp", "dp-accounting RDP, sampling without replacement", _dp_accounting_rdp)
RDP_SELECTION = Accountant("rdp", "dp-accounting RDP, a private choice's exponential-mechanism rounds (zCDP) "
                           "composed with the Gaussian releases", _dp_accounting_rdp)
PLD_POISSON = Accountant("pld", "dp-accounting PLD, Poisson sampling with substitution of a null record",
                         _dp_accounting_poisson_substitution)


def accountant_for(events: tuple[MechanismEvent, ...], *, adjacency: str, requested: str | None = None) -> Accountant:
    """The one accountant that covers ``events`` under ``adjacency`` (``requested``: the family the user
    named, refused when it does not cover them)."""
    for e in events:
        check_combination(adjacency=adjacency, sampling=e.sampling, accountant=requested)
    if any(e.contribution != 1 and e.mechanism == "discrete-gaussian" for e in events):
        raise ValueError("a privacy unit of several rows moves a count by more than one, which the discrete "
                         "Gaussian's account (counts moved by one each) does not cover: its releases take the "
                         "continuous Gaussian (count_noise='gaussian')")
    if any(e.mechanism == SELECTION for e in events):
        if adjacency != "replace-one" or any(e.sampling != "none" or e.contribution != 1 for e in events):
            raise ValueError("a private choice is accounted under replace-one adjacency, beside releases of the whole "
                             "data set with one record a unit")
        return RDP_SELECTION
    if adjacency == "add-remove":
        if not all(e.sensitivity_bound == "histogram" for e in events):
            raise ValueError("add-remove adjacency is accounted for releases of counts of a whole table only")
        if _whole_releases(events, "discrete-gaussian"):
            return DISCRETE_ADD_REMOVE
        if _whole_releases(events, "gaussian"):
            return GDP_COMPOSED if len(events) > 1 else ANALYTIC
        raise ValueError("add-remove adjacency is accounted for releases with one kind of noise")
    if _is_single_release(events):
        return DISCRETE if events[0].mechanism == "discrete-gaussian" else ANALYTIC
    if _composed_counts(events, "discrete-gaussian"):
        return DISCRETE_COMPOSED
    if _composed_counts(events, "gaussian"):
        return GDP_COMPOSED
    if any(e.sampling == "poisson" for e in events):
        return PLD_POISSON
    if all(e.sampling == "none" for e in events):
        return RDP_FULL
    return RDP_SAMPLED


@lru_cache(maxsize=512)
def epsilon_from_events(events: tuple[MechanismEvent, ...], *, delta: float, adjacency: str) -> float:
    """ε at the accountant's share ``delta`` of δ (the sensitivity-bound failures are added by the caller),
    from the accountant that covers the events.

    Memoized: events are immutable, and calibration asks the same question many times.
    """
    if not events:
        return 0.0
    accountant = accountant_for(events, adjacency=adjacency)
    if any(e.noise_multiplier <= 0 for e in events):
        return math.inf
    return accountant.epsilon(events, delta=delta)
