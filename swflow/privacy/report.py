"""The privacy report every output carries (privacy.json) and its one-line statement."""
from __future__ import annotations

import json
import math
from pathlib import Path

from .noise import SECURE_CAVEAT
from .release import LocallyReleasedTarget, PrivateTarget

__all__ = ["privacy_report", "statement", "write_report"]

NOT_ACCOUNTED = ("Not accounted: hyperparameters (steps, step size, noise level, projections) chosen "
                 "by looking at private data, and any use of the private split outside this run. "
                 "The autoencoder saw the public split only.")


AMPLIFICATION_NOTE = (
    "diffusion_gamma is the Dobrushin coefficient of ONE Euler-Maruyama step over all particles (004 Thm 3); "
    "it is not applied to epsilon. It contracts only for a fixed previous state, which depends on every "
    "earlier release, and a run also publishes its releases (model.h5) and trajectory: the composed epsilon "
    "above is the guarantee")


def _num(x: float | None):
    return None if x is None or (isinstance(x, float) and math.isinf(x)) else x


def privacy_report(method: str, target: PrivateTarget, *, diffusion_gamma: float | None = None,
                   extra: dict | None = None) -> dict:
    """The output contract's privacy.json as a dict (ε, δ = null when the run is not private)."""
    cal = target.calibration
    ledger = target.ledger
    if cal is None:
        report = {"method": method, "private": False, "epsilon": None, "delta": None,
                  "delta_sensitivity": None, "adjacency": None, "accountant": None,
                  "noise_multiplier": None, "noise_std": 0.0, "sensitivity": None,
                  "sensitivity_bound": None, "sample_rate": None,
                  "batch_size": target.batch_size, "steps": None, "n_projections": None,
                  "dim": target.dim, "norm_bound": None, "diffusion_gamma": None,
                  "dataset_size": target.size, "mode": "non-private",
                  "statement": "not differentially private (no noise on the private data)"}
    else:
        spec, events = cal.spec, ledger.events
        eps = target.epsilon_spent()
        delta = cal.delta_accountant + ledger.delta_sensitivity
        report = {
            "method": method, "private": True, "epsilon": _num(eps), "delta": delta,
            "delta_sensitivity": ledger.delta_sensitivity, "delta_accountant": cal.delta_accountant,
            "adjacency": spec.adjacency, "accountant": cal.accountant_name,
            "noise_multiplier": cal.noise_multiplier,
            "noise_std": max((e.noise_std for e in events), default=None),
            "sensitivity": max((e.sensitivity for e in events), default=None),
            "sensitivity_bound": events[-1].sensitivity_bound if events else spec.sensitivity_bound,
            "sample_rate": cal.plan.rows_per_release / cal.plan.dataset_size,
            "batch_size": cal.plan.sample_size, "sampling": cal.sampling,
            "steps": ledger.releases, "planned_steps": cal.plan.releases,
            "n_projections": cal.plan.n_projections, "dim": cal.plan.dim, "norm_bound": spec.norm_bound,
            "clipped": spec.clip, "diffusion_gamma": diffusion_gamma,
            "dataset_size": cal.plan.dataset_size, "mode": cal.mode,
            "target_epsilon": _num(spec.epsilon), "secure_noise": spec.secure_noise,
            "noise_seed_known": target.noise_seed_known,
            "directions": ("drawn from the secret privacy-noise stream (the probabilistic sensitivity bound needs "
                           "directions independent of the neighbouring pair)" if target.secret_directions else
                           "drawn from the public simulator seed (the spectral bound holds for any directions)"),
            "statement": statement(eps, delta, cal.accountant_name, spec.adjacency),
        }
        if spec.secure_noise:
            report["secure_noise_caveat"] = SECURE_CAVEAT
        if isinstance(target, LocallyReleasedTarget):
            report["release"] = ("local: each record released once as y + N(0, noise_std^2 I) on the identity "
                                 "directions (sensitivity 2R); the same (epsilon, delta) holds per record as local "
                                 "DP, and the flow is post-processing")
        if diffusion_gamma is not None:
            report["amplification_note"] = AMPLIFICATION_NOTE
    report["not_accounted"] = NOT_ACCOUNTED
    report["ledger"] = ledger.state_dict()
    report.update(extra or {})
    return report


def statement(epsilon: float, delta: float, accountant: str, adjacency: str) -> str:
    """The one way ε is written everywhere: "(ε, δ) under ACCOUNTANT, ADJACENCY"."""
    eps = "inf" if math.isinf(epsilon) else f"{epsilon:.3f}"
    return f"({eps}, {delta:.3g})-DP under {accountant}, {adjacency} adjacency"


def write_report(report: dict, directory: str | Path) -> Path:
    path = Path(directory) / "privacy.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
    return path
