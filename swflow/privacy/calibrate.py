"""Privacy settings, the shape of a run's releases, and calibration between ε and the multiplier.

Calibration is a pure search: it builds fresh events for a candidate multiplier and asks the
accountant, never mutating a ledger.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import torch
from scipy.optimize import brentq

from .accountants import ACCOUNTANTS, Accountant, accountant_for, check_combination, epsilon_from_events
from .ledger import NOISES, MechanismEvent
from .mechanisms import analytic_gaussian_multiplier
from .sensitivity import ADJACENCIES, BOUNDS, SensitivityBound, projection_sensitivity

#: the largest epsilon a private run may claim; above it the guarantee is void and the report would be
#: unreadable (the accountants return inf), so such runs are refused
MAX_EPSILON = 1e6

__all__ = ["MAX_EPSILON", "PrivacySpec", "ReleasePlan", "Calibration", "calibrate", "calibrate_local",
           "noise_multiplier_for"]


@dataclass(frozen=True)
class PrivacySpec:
    """What the user asks for. Give ``epsilon`` (calibrate the noise) or ``noise_multiplier``
    (report the ε it buys); ``epsilon=inf`` with no multiplier runs without privacy.

    adjacency : 'replace-one' (default, the papers' setting) or 'zero-out'
    accountant : None (default: the one that covers the adjacency and batch sampling), 'rdp'
        (dp-accounting RDP: replace-one, or no sampling) or 'pld' (dp-accounting PLD: zero-out, Poisson)
    sensitivity_bound : 'spectral' (default: ‖Θ‖₂ of the drawn directions, deterministic),
        'bernstein' (003 Lemma 2, costs δθ per release) or 'clt' (004 Eq. 23, a normal
        approximation that under-covers: offered to reproduce the paper, with a warning)
    norm_bound : R, rows must have norm ≤ R (R = 1 for latents on the unit sphere)
    clip : clip rows outside the ball to norm R instead of refusing them
    delta_sensitivity_share : part of δ spent on the failure probability of a probabilistic bound
    secure_noise : draw privacy noise from the OS CSPRNG
    count_noise : the noise of a release of counts (the sliced histogram): 'discrete-gaussian' (default,
        OpenDP's exact sampler) or 'gaussian' (float noise, seeded or with ``secure_noise``)
    """

    epsilon: float | None = None
    delta: float = field(default=1e-5, metadata={"help": "total delta; must be below 1/n"})
    noise_multiplier: float | None = None
    adjacency: str = field(default="replace-one", metadata={
        "choices": ADJACENCIES,
        "help": "replace-one: fixed-size batches, dp-accounting RDP (the papers' setting); zero-out: Poisson "
                "batches, dp-accounting PLD for Poisson substitution (a sampled null record still adds a noise "
                "column, which Opacus' add/remove bound does not cover)"})
    accountant: str | None = field(default=None, metadata={
        "choices": ACCOUNTANTS,
        "help": "default: the one that covers the adjacency and sampling (rdp for replace-one or full batches, "
                "pld for zero-out with Poisson batches); any other is refused"})
    sensitivity_bound: str = field(default="spectral", metadata={
        "choices": BOUNDS,
        "help": "spectral: ||Theta||_2 of the drawn directions (deterministic); bernstein: 003 Lemma 2 (spends "
                "part of delta); clt: the paper's normal approximation (not a proof)"})
    norm_bound: float = 1.0
    clip: bool = False
    delta_sensitivity_share: float = 0.1
    secure_noise: bool = field(default=False, metadata={
        "help": "draw privacy noise from the OS CSPRNG (not reproducible)"})
    count_noise: str = field(default="discrete-gaussian", metadata={
        "choices": NOISES,
        "help": "noise on released counts (dpswflow-hist): discrete-gaussian, exact integer noise from OpenDP's "
                "sampler (no floating-point attack surface; not reproducible from a seed), or gaussian, float noise "
                "(from the seeded privacy stream, or the OS CSPRNG with --secure-noise)"})

    def __post_init__(self):
        if (self.epsilon is None) == (self.noise_multiplier is None):
            raise ValueError("give exactly one of epsilon= (target budget) or noise_multiplier= "
                             "(report the budget it buys); epsilon=inf runs without privacy")
        if self.epsilon is not None and not (self.epsilon > 0):
            raise ValueError(f"epsilon must be > 0 (inf for no privacy), got {self.epsilon}")
        if self.epsilon is not None and MAX_EPSILON < self.epsilon < math.inf:
            raise ValueError(f"epsilon = {self.epsilon:g} protects nothing (above {MAX_EPSILON:g}): give a "
                             "meaningful budget, or inf for a run that says it is not private")
        if self.noise_multiplier is not None and not (self.noise_multiplier > 0 and
                                                      math.isfinite(self.noise_multiplier)):
            raise ValueError(f"noise_multiplier must be a finite number > 0, got {self.noise_multiplier}")
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta}")
        if self.sensitivity_bound not in BOUNDS:
            raise ValueError(f"sensitivity_bound must be one of {BOUNDS}, "
                             f"got {self.sensitivity_bound!r}")
        if not 0 < self.delta_sensitivity_share < 1:
            raise ValueError("delta_sensitivity_share must be in (0, 1)")
        if not (self.norm_bound > 0 and math.isfinite(self.norm_bound)):
            raise ValueError(f"norm_bound must be a finite number > 0, got {self.norm_bound}")
        if self.count_noise not in NOISES:
            raise ValueError(f"count_noise must be one of {NOISES}, got {self.count_noise!r}")

    @property
    def private(self) -> bool:
        return self.noise_multiplier is not None or math.isfinite(self.epsilon)


@dataclass(frozen=True)
class ReleasePlan:
    """How often, and on what subsample, a method releases projected private rows.

    releases : number of releases (flow steps for DPSWflow-r, 1 for DPSWflow's pool)
    dataset_size : private records
    sample_size : rows per release (expected size under Poisson); None = the whole data set
    n_projections : directions per release
    dim : dimension of the rows
    noise : 'gaussian', or 'discrete-gaussian' (integer counts, OpenDP; one release of every row)
    """

    releases: int
    dataset_size: int
    sample_size: int | None
    n_projections: int
    dim: int
    noise: str = "gaussian"

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


def plan_events(plan: ReleasePlan, *, adjacency: str, multiplier: float, bound: str,
                delta_theta: float) -> tuple[MechanismEvent, ...]:
    """The events a run of shape ``plan`` will record (sensitivity values do not enter ε)."""
    return (MechanismEvent(noise_multiplier=multiplier, noise_std=0.0, sensitivity=0.0,
                           sensitivity_bound=bound,
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
        step = rtol / 4
        while _single_epsilon(plan, z, delta, adjacency) > epsilon:
            z *= 1 + step
            step *= 2
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
    if spec.delta >= 1.0 / n:
        raise ValueError(f"delta={spec.delta} >= 1/n = {1.0 / n:.3g} allows releasing a whole record; "
                         f"choose delta well below 1/n (e.g. {10 ** math.floor(math.log10(0.1 / n)):.0e})")
    if n > 1 and spec.delta > 1.0 / (n * math.log(n)):
        warnings.warn(f"delta={spec.delta} is above 1/(n ln n) = {1.0 / (n * math.log(n)):.3g}; "
                      "the usual advice is delta << 1/n", stacklevel=2)
    check_combination(adjacency=spec.adjacency, sampling=plan.sampling(spec.adjacency), accountant=spec.accountant)
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
    nudge = 1e-6
    while mode == "epsilon" and eps > spec.epsilon:  # the accountant's last digits: never report above the target
        z *= 1 + nudge
        nudge *= 2  # geometric: a few steps whatever the gap
        events = plan_events(plan, adjacency=spec.adjacency, multiplier=z, bound=bound, delta_theta=delta_theta)
        eps = epsilon_from_events(events, delta=delta_acc, adjacency=spec.adjacency)
    if not eps <= MAX_EPSILON:
        raise ValueError(f"this run's noise buys epsilon above {MAX_EPSILON:g}, which protects nothing: use a "
                         "larger noise multiplier or a finite epsilon, or epsilon=inf for a run that says it is "
                         "not private")
    return Calibration(spec=spec, plan=plan, noise_multiplier=z, mode=mode, delta_theta=delta_theta,
                       delta_accountant=delta_acc, epsilon=eps,
                       accountant=accountant_for(events, adjacency=spec.adjacency, requested=spec.accountant))


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
