"""The privacy report every output carries (privacy.json) and its one-line statement."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from .accountants import accountant_for
from .histogram import HistogramTarget
from .marginals import MarginalTarget, marginal_release
from .noise import SECURE_CAVEAT
from .release import LocallyReleasedTarget, PrivateTarget

__all__ = ["PrivacyReport", "compose", "privacy_report", "statement", "unit_of", "with_unit", "write_report"]

NOT_ACCOUNTED = ("Not accounted: hyperparameters (steps, step size, noise level, projections) chosen "
                 "by looking at private data, and any use of the private split outside this run. "
                 "The autoencoder saw the public split only.")


AMPLIFICATION_NOTE = (
    "diffusion_gamma is the Dobrushin coefficient of ONE Euler-Maruyama step over all particles (004 Thm 3); "
    "it is not applied to epsilon. It contracts only for a fixed previous state, which depends on every "
    "earlier release, and a run also publishes its releases (model.h5) and trajectory: the composed epsilon "
    "above is the guarantee")


HISTOGRAM_RELEASE = (
    "one release of the K x B = {k} x {b} matrix of counts of every private row's projection on K public "
    "directions (B equal bins on [-{r:g}, {r:g}]), plus noise of std noise_std on each count. L2 "
    "sensitivity sqrt(2K): a changed record moves one count between two bins per direction, and under zero-out "
    "the null record is the zero row, which is counted too (n stays fixed and public). Calibrated once; the "
    "counts' post-processing to CDFs and every flow step after the release are free")
DISCRETE_NOTE = ("the counts' noise is OpenDP's discrete Gaussian (exact integer sampling from OpenDP's CSPRNG: "
                 "no floating-point attack surface), accounted by dp-accounting's privacy loss distribution of the "
                 "discrete Gaussian, composed over the 2K counts a record moves")


def _num(x: float | None):
    return None if x is None or (isinstance(x, float) and math.isinf(x)) else x


#: notes: explanations that appear as top-level strings in privacy.json when they apply
NOTE_KEYS = ("release", "secure_noise_caveat", "amplification_note", "particle_post_processing", "post_processing",
             "labels_note", "budget_split", "noise_check", "private_size", "unit_note", "measurements")


@dataclass(frozen=True)
class PrivacyReport:
    """What a DP output guarantees: privacy.json, typed. ``to_json()`` is the file's object.

    ``epsilon`` and ``delta`` are None for a run that is not private (and ``epsilon`` None when a
    noise-multiplier run's ε is unbounded). Fields from ``delta_sensitivity`` to ``directions`` are
    None for non-private runs. ``mechanism`` is the noise ('gaussian' or 'discrete-gaussian') and
    ``bins`` the histogram's B for the sliced-histogram flow (``n_projections`` is then its K).
    ``delta_sensitivity`` is the part of δ charged beside the accountant's ``delta_accountant`` (a probabilistic
    sensitivity bound's failures, a partition selection's chance of naming a value one record holds).
    ``conditional`` holds a class-conditional run's per-class reports
    (``per_class``, ``ledgers``, ``composition``)."""

    method: str
    private: bool
    statement: str
    epsilon: float | None
    delta: float | None
    adjacency: str | None
    accountant: str | None
    noise_multiplier: float | None
    noise_std: float | None
    sensitivity: float | None
    sensitivity_bound: str | None
    sample_rate: float | None
    batch_size: int | None
    steps: int | None
    n_projections: int | None
    dim: int
    norm_bound: float | None
    dataset_size: int
    mode: str
    diffusion_gamma: float | None = None
    delta_sensitivity: float | None = None
    delta_accountant: float | None = None
    sampling: str | None = None
    planned_steps: int | None = None
    clipped: bool | None = None
    target_epsilon: float | None = None
    secure_noise: bool | None = None
    noise_seed_known: bool | None = None
    directions: str | None = None
    mechanism: str | None = None
    bins: int | None = None
    notes: dict = field(default_factory=dict)
    not_accounted: str = NOT_ACCOUNTED
    ledger: list = field(default_factory=list)
    conditional: dict | None = None
    run_config: dict = field(default_factory=dict)
    #: whom the guarantee protects, in words: 'one row' for a table run without a privacy unit, or 'one COLUMN and
    #: all of its rows' (None: a run of rows or images, whose unit is one record of the private split)
    privacy_unit: str | None = None
    #: a privacy unit's bound: {"column", "max_rows_per_unit", "max_values_per_unit", "rows_over_the_bound"}
    unit_bound: dict | None = None

    def __post_init__(self):
        unknown = set(self.notes) - set(NOTE_KEYS)
        if unknown:
            raise ValueError(f"unknown report notes {sorted(unknown)}; notes are {NOTE_KEYS}")

    def to_json(self) -> dict:
        """The privacy.json object (notes and the conditional part as top-level keys)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("notes", "conditional")}
        run_config = out.pop("run_config")
        out.update(self.notes)
        if self.conditional is not None:
            out.update(conditional=True, **self.conditional)
        out["run_config"] = run_config
        return out

    @classmethod
    def from_json(cls, data: dict) -> "PrivacyReport":
        """Read a privacy.json object back (the inverse of :meth:`to_json`)."""
        data = dict(data)
        notes = {key: data.pop(key) for key in NOTE_KEYS if key in data}
        conditional = None
        if data.pop("conditional", False):
            conditional = {key: data.pop(key) for key in CONDITIONAL_KEYS}
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"not a privacy.json of this swflow version: unknown keys {sorted(unknown)}")
        return cls(**data, notes=notes, conditional=conditional)

    def with_notes(self, **notes: str) -> "PrivacyReport":
        return replace(self, notes={**self.notes, **notes})


CONDITIONAL_KEYS = ("per_class", "ledgers", "composition")


def privacy_report(method: str, target: PrivateTarget, *, diffusion_gamma: float | None = None,
                   notes: dict | None = None, run_config: dict | None = None) -> PrivacyReport:
    """The privacy report of ``target``'s releases so far (ε, δ = None when the run is not private)."""
    cal = target.calibration
    ledger = target.ledger
    common = dict(method=method, dim=target.dim, ledger=ledger.state_dict(), run_config=dict(run_config or {}))
    notes = dict(notes or {})
    if cal is None:
        return PrivacyReport(private=False, epsilon=None, delta=None, adjacency=None, accountant=None,
                             noise_multiplier=None, noise_std=0.0, sensitivity=None, sensitivity_bound=None,
                             sample_rate=None, batch_size=target.batch_size, steps=None, n_projections=None,
                             norm_bound=None, dataset_size=target.size, mode="non-private",
                             statement="not differentially private (no noise on the private data)", notes=notes,
                             **common)
    spec, events = cal.spec, ledger.events
    eps = target.epsilon_spent()
    # the accountant of what was released (a run stopped after one full-batch release is one Gaussian)
    accountant = accountant_for(tuple(events), adjacency=spec.adjacency) if events else cal.accountant
    delta = cal.delta_accountant + ledger.delta_sensitivity
    if spec.secure_noise:
        notes["secure_noise_caveat"] = SECURE_CAVEAT
    if isinstance(target, LocallyReleasedTarget):
        notes["release"] = ("local: each record released once as y + N(0, noise_std^2 I) on the identity "
                            "directions (sensitivity 2R); the same (epsilon, delta) holds per record as local "
                            "DP, and the flow is post-processing")
    if isinstance(target, MarginalTarget):
        notes["release"] = marginal_release(target.pairs, adjacency=spec.adjacency,
                                            contribution=getattr(target, "contribution", 1))
    elif isinstance(target, HistogramTarget):
        notes["release"] = HISTOGRAM_RELEASE.format(k=cal.plan.n_projections, b=target.bins, r=spec.norm_bound)
        if spec.secure_noise and cal.plan.noise == "discrete-gaussian":  # float Gaussian counts keep SECURE_CAVEAT
            notes["secure_noise_caveat"] = DISCRETE_NOTE
    if diffusion_gamma is not None:
        notes["amplification_note"] = AMPLIFICATION_NOTE
    return PrivacyReport(
        private=True, epsilon=_num(eps), delta=delta, delta_sensitivity=ledger.delta_sensitivity,
        delta_accountant=cal.delta_accountant, adjacency=spec.adjacency, accountant=accountant.name,
        noise_multiplier=cal.noise_multiplier, noise_std=events[0].noise_std if events else None,
        sensitivity=events[0].sensitivity if events else None,
        sensitivity_bound=events[0].sensitivity_bound if events else spec.sensitivity_bound,
        sample_rate=cal.plan.rows_per_release / cal.plan.dataset_size, batch_size=cal.plan.sample_size,
        sampling=cal.sampling, steps=ledger.releases, planned_steps=cal.plan.releases,
        n_projections=cal.plan.n_projections, norm_bound=spec.norm_bound, clipped=spec.clip,
        diffusion_gamma=diffusion_gamma, dataset_size=cal.plan.dataset_size, mode=cal.mode,
        target_epsilon=_num(spec.epsilon), secure_noise=spec.secure_noise, noise_seed_known=target.noise_seed_known,
        mechanism=cal.plan.noise, bins=getattr(target, "bins", None),
        directions=_directions_note(target),
        statement=statement(eps, delta, accountant.name, spec.adjacency), notes=notes, **common)


def compose(report: PrivacyReport, events, *, note: str, target_epsilon: float | None = None) -> PrivacyReport:
    """``report`` with more releases of the same private data appended to its ledger (``events``: MechanismEvent),
    its ε and δ recomputed from all of them by the accountant they call for, and ``note`` added to its release
    note. The first release's fields stay the report's main ones."""
    from .accountants import epsilon_from_events
    from .ledger import MechanismEvent

    ledger = [*report.ledger, *(e.state() for e in events)]
    everything = tuple(MechanismEvent(**e) for e in ledger)
    epsilon = epsilon_from_events(everything, delta=report.delta_accountant, adjacency=report.adjacency)
    accountant = accountant_for(everything, adjacency=report.adjacency).name
    delta = report.delta_accountant + sum(e.count * e.delta_sensitivity for e in everything)
    return replace(report, ledger=ledger, epsilon=_num(epsilon), delta=delta, accountant=accountant,
                   delta_sensitivity=delta - report.delta_accountant, steps=sum(e.count for e in everything),
                   target_epsilon=target_epsilon if target_epsilon is not None else report.target_epsilon,
                   statement=statement(epsilon, delta, accountant, report.adjacency, unit_of(report)),
                   notes={**report.notes, "release": f"{report.notes.get('release', '')} THEN {note}".strip()})


def _directions_note(target: PrivateTarget) -> str:
    if target.secret_directions:
        return ("drawn from the secret privacy-noise stream (the probabilistic sensitivity bound needs directions "
                "independent of the neighbouring pair)")
    if isinstance(target, MarginalTarget):
        return "the column pairs of the public schema (a table's sensitivity does not depend on them)"
    if isinstance(target, HistogramTarget):
        return "drawn from the public simulator seed (the histogram's sensitivity does not depend on them)"
    return "drawn from the public simulator seed (the spectral bound holds for any directions)"


def statement(epsilon: float, delta: float, accountant: str, adjacency: str, unit: str | None = None) -> str:
    """The one way ε is written everywhere: "(ε, δ) under ACCOUNTANT, ADJACENCY", and "of UNIT" where the
    run protects a privacy unit of several rows (``unit``: the report's ``privacy_unit`` then)."""
    eps = "inf" if math.isinf(epsilon) else f"{epsilon:.3f}"
    return f"({eps}, {delta:.3g})-DP under {accountant}, {adjacency} adjacency" + (f" of {unit}" if unit else "")


def unit_of(report: PrivacyReport) -> str | None:
    """The privacy unit a report's statement names: its ``privacy_unit`` where a unit bound holds, else None (one
    record or one row: the statement says nothing more)."""
    return report.privacy_unit if report.unit_bound is not None else None


def with_unit(report: PrivacyReport, words: str, bound: dict | None) -> PrivacyReport:
    """``report`` protecting ``words`` (its ``privacy_unit``) under ``bound`` (its ``unit_bound``; None for one
    row), the statement written again to name it."""
    unit = replace(report, privacy_unit=words, unit_bound=bound)
    if not report.private:
        return unit
    return replace(unit, statement=statement(math.inf if report.epsilon is None else report.epsilon, report.delta,
                                             report.accountant, report.adjacency, unit_of(unit)))


def write_report(report: PrivacyReport, directory: str | Path) -> Path:
    path = Path(directory) / "privacy.json"
    path.write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return path
