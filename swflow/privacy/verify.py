"""Read-back checks: a privacy claim is re-derived from what was released, never copied on trust.

A finished flow's ``privacy.json`` and ``model.h5`` (or a saved Synthesizer) are inputs like any other:
they can be edited. Before ``swflow sample`` or ``Synthesizer.load`` passes a claim on, it recomputes
it from the recorded mechanism and refuses the file when anything disagrees:

* ε from the report's own ledger, with the accountant the adjacency and sampling call for, and
  δ = δ_accountant + the ledger's sensitivity failures;
* every ledger event's σ = multiplier × sensitivity, and the histogram's sensitivity √(2K) / √K;
* for releases of noisy projections, each recorded step's σ from the recorded directions: the
  spectral bound ‖Θ‖₂ gives the sensitivity, so a step recorded with σ = 0 (or any other σ than the
  calibrated one) is caught; the number of recorded releases equals the ledger's.
"""
from __future__ import annotations

import math

import torch

from .accountants import accountant_for, epsilon_from_events
from .histogram import histogram_sensitivity
from .ledger import MechanismEvent
from .sensitivity import adjacency_factor, spectral_bound

__all__ = ["ClaimMismatch", "verify_report", "verify_releases"]

_RTOL = 1e-6


class ClaimMismatch(ValueError):
    """A privacy claim that what was released does not support."""


def _close(a: float, b: float, rtol: float = _RTOL) -> bool:
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)


def verify_report(report, *, source: str = "the privacy report") -> None:
    """Refuse ``report`` (a PrivacyReport) unless its ε, δ and noise follow from its own ledger."""
    def refuse(what: str):
        raise ClaimMismatch(f"{source} is inconsistent: {what}. The file was edited or corrupted; regenerate it "
                            "from the run (nothing was sampled)")

    if report.conditional is not None:
        return  # per-class reports are checked when each class's file is read
    if not report.private:
        if report.ledger or report.epsilon is not None:
            refuse("it says 'not private' but carries a budget or releases")
        return
    try:
        events = tuple(MechanismEvent(**e) for e in report.ledger)
    except TypeError as err:
        refuse(f"its ledger is malformed ({err})")
    if not events:
        refuse("it claims privacy but records no release")
    for e in events:
        if not _close(e.noise_std, e.noise_multiplier * e.sensitivity):
            refuse(f"a release's noise std {e.noise_std} is not its multiplier {e.noise_multiplier} times its "
                   f"sensitivity {e.sensitivity}")
        if e.sensitivity_bound == "histogram":
            expected = histogram_sensitivity(e.n_projections, adjacency=report.adjacency).value
            if not _close(e.sensitivity, expected):
                refuse(f"the histogram's sensitivity {e.sensitivity} is not {expected} for K = {e.n_projections}")
    try:
        accountant = accountant_for(events, adjacency=report.adjacency)
    except ValueError as err:
        refuse(f"its releases cannot be accounted under {report.adjacency!r} ({err})")
    if report.accountant != accountant.name:
        refuse(f"it names the accountant {report.accountant!r}, but its releases are accounted by {accountant.name!r}")
    epsilon = epsilon_from_events(events, delta=report.delta_accountant, adjacency=report.adjacency)
    claimed = math.inf if report.epsilon is None else report.epsilon
    if not (_close(epsilon, claimed, 1e-4) or (math.isinf(epsilon) and math.isinf(claimed))):
        refuse(f"it claims epsilon = {claimed}, but its releases give {epsilon}")
    delta = report.delta_accountant + sum(e.count * e.delta_sensitivity for e in events)
    if not _close(delta, report.delta):
        refuse(f"it claims delta = {report.delta}, but its releases give {delta}")


def verify_releases(report, theta: torch.Tensor, sigma: torch.Tensor, *, releases_per_step: bool,
                    source: str = "model.h5") -> None:
    """Check the recorded per-step σ (steps,) on directions ``theta`` (steps, d, k) against ``report``.

    ``releases_per_step``: every step was its own release of noisy projections (dpswflow-r, swf); otherwise
    the steps replay one release (a pool, a local release or a histogram), whose σ is checked through
    the ledger alone."""
    if not report.private or report.conditional is not None or not releases_per_step:
        return
    events = [MechanismEvent(**e) for e in report.ledger]
    if len(sigma) != sum(e.count for e in events):
        raise ClaimMismatch(f"{source} records {len(sigma)} releases but the privacy report accounts for "
                            f"{sum(e.count for e in events)}: regenerate the run")
    event = events[-1]
    factor = adjacency_factor(report.adjacency, report.norm_bound)
    for t in range(len(sigma)):
        if event.sensitivity_bound == "spectral":
            expected = event.noise_multiplier * factor * math.sqrt(spectral_bound(theta[t].double()))
        else:
            expected = event.noise_std
        # the recorded directions are float32: allow their rounding
        if not _close(float(sigma[t]), expected, 1e-4):
            raise ClaimMismatch(f"{source}: step {t} was recorded with noise std {float(sigma[t]):.6g}, but the "
                                f"calibrated mechanism adds {expected:.6g}: the file was edited; regenerate the run")
