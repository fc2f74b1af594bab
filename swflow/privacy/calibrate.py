"""Privacy settings, the shape of a run's releases, and calibration between ε and the multiplier.

Calibration is a pure search: it builds fresh events for a candidate multiplier and asks the
accountant, never mutating a ledger.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace

import torch
from scipy.optimize import brentq

from ..core.config import MAX_EPSILON, NOISES, PrivacySpec
from .accountants import Accountant, accountant_for, check_combination, epsilon_from_events
from .ledger import SELECTION, MechanismEvent
from .mechanisms import analytic_gaussian_multiplier
from .selection import SELECTION_BOUND
from .sensitivity import SensitivityBound, projection_sensitivity

__all__ = ["MAX_EPSILON", "PrivacySpec", "ReleasePlan", "SelectionPlan", "Calibration", "calibrate",
           "calibrate_shares", "calibrate_local", "noise_multiplier_for"]


@dataclass(frozen=True)
class ReleasePlan:
    """How often, and on what subsample, a method releases projected private rows.

    releases : number of releases (flow steps for DPSWflow-r, 1 for DPSWflow's pool)
    dataset_size : private records
    sample_size : rows per release (expected size under Poisson); None = the whole data set
    n_projections : directions per release
    dim : dimension of the rows
    noise : 'gaussian', or 'discrete-gaussian' (integer counts, OpenDP; one release of every row)
    size_private : the caller treats n as private and uses a released estimate of it (a table run): what
        add-remove adjacency needs; ``dataset_size`` is then that estimate
    """

    releases: int
    dataset_size: int
    sample_size: int | None
    n_projections: int
    dim: int
    noise: str = "gaussian"
    size_private: bool = False

    def __post_init__(self):
        if self.releases < 1:
            raise ValueError(f"the run must release at least once (steps >= 1), got {self.releases}")
        if self.dataset_size < 1:
            raise ValueError("the private data set is empty")
        if self.sample_size is not None and not 1 <= self.sample_size <= self.dataset_size:
            raise ValueError(f"batch size {self.sample_size} must be between 1 and the data set size "
                             f"{self.dataset_size}")
        if self.n_projections < 1 or self.dim < 1:
            raise ValueError("n_projections and dim must be >= 1")
        if self.noise not in NOISES:
            raise ValueError(f"noise must be one of {NOISES}, got {self.noise!r}")
        if self.noise == "discrete-gaussian" and (self.releases, self.sample_size) != (1, None):
            raise ValueError("the discrete Gaussian is accounted for one release of every row only")

    def sampling(self, adjacency: str) -> str:
        if self.sample_size is None or self.sample_size == self.dataset_size:
            return "none"
        return "without-replacement" if adjacency == "replace-one" else "poisson"

    @property
    def rows_per_release(self) -> int:
        return self.dataset_size if self.sample_size is None else self.sample_size


@dataclass(frozen=True)
class SelectionPlan:
    """A private choice made beside a split budget's releases (privacy/selection.py): ``rounds`` rounds of the
    exponential mechanism among ``candidates``, together the fraction ``share`` of ρ, on ``dataset_size`` records."""

    rounds: int
    candidates: int
    share: float
    dataset_size: int

    def __post_init__(self):
        if not 1 <= self.rounds <= self.candidates or not 0 < self.share < 1 or self.dataset_size < 1:
            raise ValueError(f"a choice needs 1 <= rounds <= candidates, a share in (0, 1) and records, got {self}")

    def multiplier(self, z: float) -> float:
        """A round's multiplier (2/ε₀) when the budget's one-release multiplier is ``z``: the R rounds together are
        (share / (2z²))-zCDP, a Gaussian's of multiplier z/√share."""
        return z * math.sqrt(self.rounds / self.share)

    def event(self, multiplier: float, sensitivity: float = 0.0) -> MechanismEvent:
        return MechanismEvent(noise_multiplier=multiplier, noise_std=multiplier * sensitivity, sensitivity=sensitivity,
                              sensitivity_bound=SELECTION_BOUND, delta_sensitivity=0.0, sampling="none",
                              sample_size=self.dataset_size, dataset_size=self.dataset_size,
                              n_projections=self.candidates, count=self.rounds, mechanism=SELECTION)


def plan_events(plan: ReleasePlan, *, adjacency: str, multiplier: float, bound: str,
                delta_theta: float) -> tuple[MechanismEvent, ...]:
    """The events a run of shape ``plan`` will record (sensitivity values do not enter ε). Under add-remove every
    release is one of counts (a table's: nothing else is accounted so)."""
    return (MechanismEvent(noise_multiplier=multiplier, noise_std=0.0, sensitivity=0.0,
                           sensitivity_bound="histogram" if adjacency == "add-remove" else bound,
                           delta_sensitivity=delta_theta, sampling=plan.sampling(adjacency),
                           sample_size=plan.rows_per_release, dataset_size=plan.dataset_size,
                           n_projections=plan.n_projections, count=plan.releases, mechanism=plan.noise),)


def _single_epsilon(plan: ReleasePlan, multiplier: float, delta: float, adjacency: str) -> float:
    events = plan_events(plan, adjacency=adjacency, multiplier=multiplier, bound="spectral", delta_theta=0.0)
    return epsilon_from_events(events, delta=delta, adjacency=adjacency)


def noise_multiplier_for(*, epsilon: float, delta: float, plan: ReleasePlan, adjacency: str,
                         rtol: float = 1e-3) -> float:
    """Smallest multiplier (to relative ``rtol``) whose accounted ε ≤ ``epsilon``.

    ε(z) decreases in z. A bracket is grown geometrically, Brent's method solves
    log ε(z) = log ε* in log z, and the answer is nudged up until the accountant confirms
    ε ≤ ε*: the returned multiplier never overshoots the budget.
    """
    if plan.releases == 1 and plan.sampling(adjacency) == "none":
        z = analytic_gaussian_multiplier(epsilon=epsilon, delta=delta)
        if plan.noise == "gaussian":
            return z
        # the discrete Gaussian needs a hair more noise than the continuous one (< 0.5% here): step up from it
        step, start = rtol / 4, z
        while _single_epsilon(plan, z, delta, adjacency) > epsilon:
            z *= 1 + step
            step *= 2
            _check_reach(z, start, epsilon=epsilon, delta=delta)
        return z

    def eps(z: float) -> float:
        events = plan_events(plan, adjacency=adjacency, multiplier=z, bound="spectral", delta_theta=0.0)
        return epsilon_from_events(events, delta=delta, adjacency=adjacency)

    lo, hi = 0.25, 1.0
    while eps(hi) > epsilon:
        lo, hi = hi, hi * 4.0
        if hi > 1e4:
            raise ValueError(f"no noise multiplier below 1e4 reaches epsilon={epsilon}; "
                             "raise epsilon or lower the number of steps")
    while eps(lo) <= epsilon:
        hi, lo = lo, lo / 4.0
        if lo < 1e-4:
            return hi
    gap = lambda log_z: math.log(eps(math.exp(log_z))) - math.log(epsilon)  # noqa: E731
    z = math.exp(brentq(gap, math.log(lo), math.log(hi), xtol=rtol / 4)) * (1 + rtol / 4)
    while eps(z) > epsilon:
        z *= 1 + rtol / 4
    return z


def _check_reach(z: float, start: float, *, epsilon: float, delta: float) -> None:
    """Refuse a calibration whose multiplier has grown far past the Gaussian's without reaching the target: the
    accountant cannot give this ε at this δ (or what was already spent takes it), and more noise would only use
    memory and time."""
    if z > 4 * start:
        raise ValueError(f"the accountant does not reach epsilon = {epsilon:g} at delta = {delta:.3g} with up to 4 "
                         "times the Gaussian's noise (what an earlier release spent may take it all): ask for a "
                         "larger epsilon or delta")


@dataclass(frozen=True)
class Calibration:
    """A spec resolved against a plan: the multiplier, the δ split and the planned ε."""

    spec: PrivacySpec
    plan: ReleasePlan
    noise_multiplier: float
    mode: str  # 'epsilon' | 'noise_multiplier'
    delta_theta: float  # failure probability of the sensitivity bound, per release
    delta_accountant: float
    accountant: Accountant  # the one that covers the planned releases (and the family the spec named)
    epsilon: float  # accounted ε for the planned releases, at delta_accountant

    @property
    def sampling(self) -> str:
        return self.plan.sampling(self.spec.adjacency)

    def sensitivity(self, theta: torch.Tensor | None = None) -> SensitivityBound:
        return projection_sensitivity(kind=self.spec.sensitivity_bound,
                                      k=self.plan.n_projections, d=self.plan.dim,
                                      adjacency=self.spec.adjacency, norm_bound=self.spec.norm_bound,
                                      delta_theta=self.delta_theta, theta=theta)

    def event(self, sensitivity: SensitivityBound, sample_size: int) -> MechanismEvent:
        return MechanismEvent(noise_multiplier=self.noise_multiplier,
                              noise_std=self.noise_multiplier * sensitivity.value,
                              sensitivity=sensitivity.value, sensitivity_bound=sensitivity.kind,
                              delta_sensitivity=sensitivity.failure_probability, sampling=self.sampling,
                              sample_size=sample_size, dataset_size=self.plan.dataset_size,
                              n_projections=self.plan.n_projections, mechanism=self.plan.noise)


def calibrate(spec: PrivacySpec, plan: ReleasePlan) -> Calibration | None:
    """Resolve ``spec`` for ``plan``; None for a non-private spec (ε = ∞)."""
    if not spec.private:
        return None
    n = plan.dataset_size
    # where n is private (a released count), no message may carry it: each refused try would print a fresh one
    if spec.delta >= 1.0 / n:
        raise ValueError(f"delta={spec.delta} allows releasing a whole record (it is not below 1/n for the released "
                         "count of records); choose delta far below 1 / (the number of records you expect)"
                         if plan.size_private else
                         f"delta={spec.delta} >= 1/n = {1.0 / n:.3g} allows releasing a whole record; "
                         f"choose delta well below 1/n (e.g. {min(1e-9, 10 ** math.floor(math.log10(0.1 / n))):.0e}, "
                         "as the guides do)")
    if n > 1 and spec.delta > 1.0 / (n * math.log(n)):
        warnings.warn("delta is above 1/(n ln n) for the released count of records; the usual advice is delta << 1/n"
                      if plan.size_private else
                      f"delta={spec.delta} is above 1/(n ln n) = {1.0 / (n * math.log(n)):.3g}; "
                      "the usual advice is delta << 1/n", stacklevel=2)
    check_combination(adjacency=spec.adjacency, sampling=plan.sampling(spec.adjacency), accountant=spec.accountant)
    if spec.adjacency == "add-remove" and not plan.size_private:
        raise ValueError("add-remove adjacency makes n private: only table runs (swflow generate --table, "
                         "TableSynthesizer) estimate n from a released count; other runs use n in their "
                         "settings and are accounted under replace-one or zero-out")
    bound = spec.sensitivity_bound
    if bound == "clt":
        if plan.n_projections <= 30:
            raise ValueError("the CLT bound needs more than 30 projections per release; "
                             "use 'spectral' or 'bernstein'")
        warnings.warn("sensitivity_bound='clt' is a normal approximation: its measured failure rate "
                      "exceeds the nominal delta_theta (tests/test_privacy.py); use 'spectral' or "
                      "'bernstein' for a proven bound", stacklevel=2)
    delta_theta = 0.0 if bound == "spectral" else spec.delta_sensitivity_share * spec.delta / plan.releases
    delta_acc = spec.delta - plan.releases * delta_theta
    if spec.noise_multiplier is not None:
        z, mode = spec.noise_multiplier, "noise_multiplier"
    else:
        z, mode = noise_multiplier_for(epsilon=spec.epsilon, delta=delta_acc, plan=plan,
                                       adjacency=spec.adjacency), "epsilon"
    events = plan_events(plan, adjacency=spec.adjacency, multiplier=z, bound=bound, delta_theta=delta_theta)
    eps = epsilon_from_events(events, delta=delta_acc, adjacency=spec.adjacency)
    nudge, start = 1e-6, z
    while mode == "epsilon" and eps > spec.epsilon:  # the accountant's last digits: never report above the target
        z *= 1 + nudge
        nudge *= 2  # geometric: a few steps whatever the gap
        _check_reach(z, start, epsilon=spec.epsilon, delta=delta_acc)
        events = plan_events(plan, adjacency=spec.adjacency, multiplier=z, bound=bound, delta_theta=delta_theta)
        eps = epsilon_from_events(events, delta=delta_acc, adjacency=spec.adjacency)
    if not eps <= MAX_EPSILON:
        raise ValueError(f"this run's noise buys epsilon above {MAX_EPSILON:g}, which protects nothing: use a "
                         "larger noise multiplier or a finite epsilon, or epsilon=inf for a run that says it is "
                         "not private")
    return Calibration(spec=spec, plan=plan, noise_multiplier=z, mode=mode, delta_theta=delta_theta,
                       delta_accountant=delta_acc, epsilon=eps,
                       accountant=accountant_for(events, adjacency=spec.adjacency, requested=spec.accountant))


def calibrate_shares(spec: PrivacySpec, plans: tuple[ReleasePlan, ...], shares: tuple[float, ...], *,
                     spent: tuple[MechanismEvent, ...] = (), reserved_delta: float = 0.0,
                     selection: SelectionPlan | None = None) -> tuple | None:
    """Several histogram releases of the whole data set, each made once (a table's fine one-way histograms, then its pair
    tables), splitting one budget: release i has multiplier z / √share_i, so that it takes the fraction share_i of
    ρ (zCDP) or of μ² (Gaussian DP), and together they compose as one Gaussian of multiplier z. z is the smallest
    whose composed ε (the accountant of :func:`~swflow.privacy.accountants.accountant_for`) meets the target, or
    the given ``spec.noise_multiplier``. None for a non-private spec. Every returned calibration carries the
    composed ε and accountant. ``spent``: releases of the same records already made (an add-remove table's size),
    composed with these; ``shares`` are then what is left to split (they add up to less than 1). ``reserved_delta``:
    the part of δ a release charges beside the accountant (a partition selection's, privacy/values.py), left out of
    the accountant's δ. ``selection``: a private choice taking its share of ρ beside them (``shares`` then add up
    to 1 less its share); its round multiplier (2/ε₀) is returned after the calibrations."""
    chosen = selection.share if selection is not None else 0.0
    if len(plans) != len(shares) or not plans or any(not 0 < f <= 1 for f in shares) or (
            abs(sum(shares) + chosen - 1) > 1e-9 if not spent else not sum(shares) + chosen < 1):
        raise ValueError(f"shares must be positive and add up to 1 (less with spent releases), one per release; got "
                         f"{shares}" + (f" beside a choice's {chosen}" if selection is not None else ""))
    if any((plan.releases, plan.sample_size) != (1, None) for plan in plans):
        raise ValueError("a split budget is for releases of the whole data set, each made once")
    if not 0 <= reserved_delta < spec.delta:
        raise ValueError(f"the reserved delta {reserved_delta} must be below the run's delta {spec.delta}")
    # the checks on δ, n and the accountant; z for one release, at the accountant's share of δ
    single = calibrate(replace(spec, delta=spec.delta - reserved_delta) if reserved_delta else spec, plans[-1])
    if single is None:
        return None

    def composed(z: float) -> tuple[tuple[MechanismEvent, ...], float]:
        events = tuple(spent) + tuple(plan_events(plan, adjacency=spec.adjacency, multiplier=z / math.sqrt(f),
                                                  bound="histogram", delta_theta=0.0)[0]
                                      for plan, f in zip(plans, shares))
        events += () if selection is None else (selection.event(selection.multiplier(z)),)
        return events, epsilon_from_events(events, delta=single.delta_accountant, adjacency=spec.adjacency)

    z = single.noise_multiplier
    if selection is not None and single.mode == "epsilon":  # RDP accounts the whole run: more than the Gaussian's
        z = _raise_to(lambda m: composed(m)[1], z, epsilon=spec.epsilon, delta=single.delta_accountant)
    events, eps = composed(z)
    nudge = 1e-6
    while single.mode == "epsilon" and eps > spec.epsilon:  # the discrete PLD needs a hair more: never overshoot
        z *= 1 + nudge
        nudge *= 2
        _check_reach(z, single.noise_multiplier, epsilon=spec.epsilon, delta=single.delta_accountant)
        events, eps = composed(z)
    accountant = accountant_for(events, adjacency=spec.adjacency, requested=spec.accountant)
    out = tuple(Calibration(spec=spec, plan=plan, noise_multiplier=z / math.sqrt(f), mode=single.mode,
                            delta_theta=0.0, delta_accountant=single.delta_accountant, accountant=accountant,
                            epsilon=eps) for plan, f in zip(plans, shares))
    return out if selection is None else (*out, selection.multiplier(z))


def _raise_to(eps, z: float, *, epsilon: float, delta: float, rtol: float = 1e-6) -> float:
    """The smallest multiplier from ``z`` up whose ``eps`` (decreasing) is at most ``epsilon``, to ``rtol``."""
    if eps(z) <= epsilon:
        return z
    hi = z
    while eps(hi) > epsilon:
        hi *= 1.5
        _check_reach(hi, z, epsilon=epsilon, delta=delta)
    gap = lambda log_z: math.log(eps(math.exp(log_z))) - math.log(epsilon)  # noqa: E731
    return math.exp(brentq(gap, math.log(z), math.log(hi), xtol=rtol))


def calibrate_local(spec: PrivacySpec, *, dataset_size: int, dim: int) -> Calibration:
    """The local release: every record once as y + N(0, σ² I) on the identity directions.

    Local DP protects any two values of one record, so the sensitivity is 2R whatever adjacency a
    central run would use; ``zero-out`` (R) is refused rather than silently halving the noise.
    Used by every local method and by ``swflow privacy``, so the calculator and the run agree.
    """
    if not spec.private:
        raise ValueError("a local release needs a finite epsilon or a noise multiplier")
    if spec.adjacency != "replace-one":
        raise ValueError("local DP protects any two values of one record (sensitivity 2R); "
                         f"adjacency={spec.adjacency!r} does not apply to a local release: leave it 'replace-one'")
    if spec.sensitivity_bound != "spectral":
        raise ValueError("the local release uses identity directions, whose spectral bound (2R) is exact; "
                         "leave sensitivity_bound='spectral'")
    plan = ReleasePlan(releases=1, dataset_size=dataset_size, sample_size=None, n_projections=dim, dim=dim)
    return calibrate(spec, plan)
