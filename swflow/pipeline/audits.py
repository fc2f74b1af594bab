"""Privacy audits of the real release paths: empirical lower bounds on ε, to compare with the claim.

White-box audit of the single-release mechanisms (DPSWflow's pool, the LDP flow's local
release). It uses the worst-case pair of one-record data sets, D = {R} and D' = {−R}, in one
dimension (‖y − y'‖ = 2R, Θ = ±1, ‖Θ‖₂ = 1), and the likelihood-ratio statistic: the released
value itself, times the direction's sign. One real release of N identical records, through
``make_flow``, gives N independent draws of the one-record mechanism: in a single release every
column gets its own i.i.d. noise at the calibrated σ, and neither the calibration (analytic
Gaussian) nor the sensitivity depends on n. The threshold is chosen on half the draws and
evaluated on the other half (Clopper–Pearson, 95%). ``--halve-noise`` plays a faulty
implementation whose noise is half what it claims: the audit must then exceed the claim.

Black-box canary audit of every mechanism. A small private set D (points near the origin of the unit disc) and its replace-one neighbour D'
(one record replaced by a canary on the unit circle) are given to the full mechanism many times.
Each run releases its final particles (DPSWgen: samples of its generator); the attack statistic is the mean of the 5 largest
projections of the particles on the canary's direction. The best threshold test's TPR/FPR, with
Clopper–Pearson intervals, gives the lower bound

    ε_lb = max over thresholds of log((TPR_low − δ) / FPR_high)     (and the symmetric test),

which must stay ≤ the reported ε for every DP run, and must be clearly > 0 when σ = 0.

    python experiments/audit.py [--runs 300] [--json]   (the tables in docs/results.md)
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import torch

from ..methods.flows import make_flow
from ..methods.generators import GeneratorConfig, make_dpswgen
from ..simulate.flow import FlowConfig
from ..privacy import PrivacySpec
from ..privacy.audit import epsilon_lower_bound

__all__ = ["audit", "composed_whitebox_audit", "resolution_whitebox_audit", "table_whitebox_audit", "whitebox_audit",
           "whitebox_draws", "WHITEBOX_DELTA"]

CANARY = torch.tensor([1.0, 0.0])
DELTA = 1e-4  # below 1/(n ln n) for the 40-record set


def datasets(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    d = 0.15 * torch.randn(n, 2, generator=gen)
    d = d * (0.5 / d.norm(dim=1, keepdim=True).clamp(min=0.5))  # inside the disc of radius 0.5
    neighbour = d.clone()
    neighbour[0] = CANARY
    return d, neighbour


def statistic(particles: torch.Tensor) -> float:
    return float((particles @ CANARY).topk(5).values.mean())


def run_once(data, *, method: str, epsilon: float, steps: int, seed: int) -> float:
    privacy = PrivacySpec(epsilon=epsilon, delta=DELTA) if math.isfinite(epsilon) else PrivacySpec(epsilon=math.inf)
    if method == "dpswgen":  # the released output is the trained generator's samples
        model = make_dpswgen(data, privacy=privacy, config=GeneratorConfig(steps=steps, seed=seed), n_projections=8,
                             batch_size=data.shape[0], privacy_seed=seed).fit(progress=False)
        return statistic(model.sample(data.shape[0], seed=seed))
    flow = make_flow(method, data, privacy=privacy, n_projections=8, pool_size=16 if method == "dpswflow" else None,
                     privacy_seed=seed, progress=False,
                     config=FlowConfig(steps=steps, n_particles=data.shape[0], step_size=1.0, seed=seed))
    return statistic(flow.run().particles)


def audit(method: str, epsilon: float, *, runs: int, n: int = 40, steps: int = 5) -> dict:
    d, d_prime = datasets(n)
    without = np.array([run_once(d, method=method, epsilon=epsilon, steps=steps, seed=s) for s in range(runs)])
    with_canary = np.array([run_once(d_prime, method=method, epsilon=epsilon, steps=steps, seed=runs + s)
                            for s in range(runs)])
    delta = DELTA if math.isfinite(epsilon) else 0.0
    return {"method": method, "claimed_epsilon": epsilon if math.isfinite(epsilon) else None, "runs": runs,
            "audited_epsilon_lower_bound": epsilon_lower_bound(with_canary, without, delta=delta),
            "dataset_size": n, "steps": steps}


WHITEBOX_DELTA = 1e-7  # below 1/n for the 1 000 000-record release


def _honest_multiplier(method: str, epsilon: float, *, trials: int, directions: int, count_noise: str) -> float:
    """The noise multiplier the run's own calibration gives ``method``'s single release at ``epsilon``."""
    from ..methods.plan import resolve_fixed
    from ..privacy import calibrate, calibrate_local

    privacy = PrivacySpec(epsilon=epsilon, delta=WHITEBOX_DELTA, count_noise=count_noise)
    if method == "ldp-flow":
        return calibrate_local(privacy, dataset_size=trials, dim=1).noise_multiplier
    plan = resolve_fixed(method, steps=1, n_projections=1, dataset_size=trials, dim=1, privacy=privacy,
                         pool_size=directions if method == "dpswflow-hist" else 1)
    return calibrate(privacy, plan.release).noise_multiplier


def whitebox_draws(method: str, epsilon: float, record: float, *, trials: int, seed: int, noise_scale: float = 1.0,
                   count_noise: str = "discrete-gaussian", directions: int = 1) -> np.ndarray:
    """``trials`` independent outputs of ``method``'s single release on the one-record set {record} (d = 1),
    read along the release's direction. ``noise_scale`` < 1 plays a faulty implementation: the release
    runs with that fraction of the multiplier its calibration gives for ``epsilon``."""
    z = _honest_multiplier(method, epsilon, trials=trials, directions=directions, count_noise=count_noise)
    privacy = PrivacySpec(noise_multiplier=z * noise_scale, delta=WHITEBOX_DELTA, count_noise=count_noise)
    data = torch.full((trials, 1), record)
    if method == "ldp-flow":
        flow = make_flow("ldp-flow", data, privacy=privacy, n_projections=1, privacy_seed=seed, progress=False,
                         config=FlowConfig(steps=1, n_particles=1))
        return flow.target.released_rows()[:, 0].double().numpy()
    if method == "dpswflow-hist":
        return _histogram_draws(privacy, record, trials=trials, seed=seed, directions=directions)
    if method != "dpswflow":
        raise ValueError(f"the white-box audit covers the single-release mechanisms, not {method}")
    flow = make_flow("dpswflow", data, privacy=privacy, n_projections=1, pool_size=1, privacy_seed=seed,
                     progress=False, config=FlowConfig(steps=1, n_particles=1))
    flow.setup()  # the one release
    pool = flow.strategy.state_dict()
    return (pool["released"][0] * pool["theta"][0, 0]).double().numpy()


def whitebox_audit(method: str, epsilon: float, *, trials: int = 1_000_000, halve_noise: bool = False,
                   seed: int = 0, count_noise: str = "discrete-gaussian") -> dict:
    """White-box audit of one single-release method (dpswflow, ldp-flow, dpswflow-hist; the histogram with
    ``count_noise``, its default the discrete Gaussian)."""
    from ..privacy.audit import split_epsilon_lower_bound

    scale = 0.5 if halve_noise else 1.0
    with_record = whitebox_draws(method, epsilon, 1.0, trials=trials, seed=seed, noise_scale=scale,
                                 count_noise=count_noise)
    without = whitebox_draws(method, epsilon, -1.0, trials=trials, seed=seed + 1, noise_scale=scale,
                             count_noise=count_noise)
    return {"method": method, "claimed_epsilon": epsilon, "trials": trials, "halved_noise": halve_noise,
            "audit": "white-box", **({"count_noise": count_noise} if method == "dpswflow-hist" else {}),
            "audited_epsilon_lower_bound": split_epsilon_lower_bound(with_record, without, delta=WHITEBOX_DELTA)}


def table_whitebox_audit(epsilon: float, *, trials: int = 1_000_000, halve_noise: bool = False, seed: int = 0,
                         count_noise: str = "discrete-gaussian") -> dict:
    """White-box audit of a table's release (:class:`~swflow.privacy.marginals.MarginalTarget`): the worst-case
    pair of one-record tables on two columns of two categories, (0, 0) against (1, 1), one two-way table (K = 1), so
    the record moves two counts. The real target is calibrated to ``epsilon`` (n = 1 public) and every draw goes
    through its noise step; the statistic is the difference of the two moved cells, the optimal test."""
    from ..privacy import NoiseSource, PrivacyLedger, ReleasePlan, calibrate
    from ..privacy.audit import split_epsilon_lower_bound
    from ..privacy.marginals import MarginalTarget, pair_counts

    spec = PrivacySpec(epsilon=epsilon, delta=WHITEBOX_DELTA, count_noise=count_noise)
    plan = ReleasePlan(releases=1, dataset_size=1, sample_size=None, n_projections=1, dim=4, noise=count_noise)

    def draws(cells: tuple[int, int], draw_seed: int) -> np.ndarray:
        record = torch.zeros(1, 4, dtype=torch.float64)
        record[0, cells[0]] = record[0, 2 + cells[1]] = 2 ** -0.5  # the codec's row: one-hot blocks over sqrt(C)
        target = MarginalTarget(record, calibrate(spec, plan), noise=NoiseSource(draw_seed), ledger=PrivacyLedger(),
                                blocks=[(0, 2), (2, 4)], pairs=[(0, 1)])
        counts = pair_counts(target.cells(), target.sizes, target.pairs)
        sigma = target.count_noise_std() * (0.5 if halve_noise else 1.0)
        noisy = target._noisy(counts.expand(trials, -1).contiguous(), sigma)
        return (noisy[:, 0] - noisy[:, 3]).numpy()

    with_record, without = draws((0, 0), seed), draws((1, 1), seed + 1)
    return {"audit": "white-box, table release", "claimed_epsilon": epsilon, "trials": trials,
            "halved_noise": halve_noise, "count_noise": count_noise,
            "audited_epsilon_lower_bound": split_epsilon_lower_bound(with_record, without, delta=WHITEBOX_DELTA)}


def resolution_whitebox_audit(epsilon: float, *, trials: int = 1_000_000, halve: str | None = None, seed: int = 0,
                              count_noise: str = "gaussian", share: float | None = None,
                              part: str | None = None, adjacency: str = "replace-one") -> dict:
    """White-box audit of a table run's releases composed, calibrated together as the run does
    (:func:`_resolution_calibrations`): two repeated values' counts, a column's fine tree at ``share`` of what they
    leave, a pair table (the targets of :func:`_one_record_targets`; under add-remove after the count of records).
    The worst-case pair: replace-one, the record at one value, leaf and cell against the other (two counts moved in
    each release); add-remove, that record or none. Every draw goes through the real noise steps; the statistic is
    the likelihood ratio's. ``halve``: 'size', 'values', 'levels' or 'tables' draws that release with half its noise;
    ``part``: one release alone against the ε its own ledger event gives (a small share moves the composed ε little).
    The selection's δ term is no likelihood ratio: tests/test_table_values.py measures its rate."""
    from ..privacy import NoiseSource
    from ..privacy.accountants import epsilon_from_events
    from ..privacy.audit import split_epsilon_lower_bound
    from ..privacy.marginals import pair_counts
    from ..privacy.oneway import Tree, level_counts
    from ..tables.resolution import RESOLUTION_SHARE

    share = RESOLUTION_SHARE if share is None else share  # the library's own split by default
    removing = adjacency == "add-remove"
    parts = (None, "values", "levels", "tables") + (("size",) if removing else ())
    if halve not in parts or part not in parts:
        raise ValueError(f"halve and part are one of {parts}, got {halve!r} and {part!r}")
    spec = PrivacySpec(epsilon=epsilon, delta=WHITEBOX_DELTA, count_noise=count_noise, adjacency=adjacency)
    tree = Tree(16, 4, 2)
    spent, values_cal, fine_cal, pair_cal = _resolution_calibrations(spec, tree, share, seed=seed)

    def draws(fine: int | None, cell: int, draw_seed: int) -> np.ndarray:
        """The statistic's draws on the one-record set {(fine, cell)} (fine None: the empty set); the record holds
        the first repeated value with fine cell 0, the second with fine cell 15."""
        there = fine is not None
        named, levels, tables = _one_record_targets(fine or 0, cell, tree, (values_cal, fine_cal, pair_cal),
                                                    draw_seed)
        sigmas = {"values": named.count_noise_std(), "levels": levels.count_noise_std(),
                  "tables": tables.count_noise_std(), "size": spent[0].noise_std if removing else 1.0}
        drawn = {name: sigma * (0.5 if halve == name else 1.0) for name, sigma in sigmas.items()}

        def noisy(target, exact, name: str):  # ``trials`` releases of the record's counts (or none's), as released
            return target._noisy(exact.expand(trials, -1).contiguous(), drawn[name])

        noisy_values = noisy(named, torch.tensor([[int(there and fine == 0), int(there and fine != 0)]]), "values")
        noisy_levels = noisy(levels, level_counts(torch.tensor([[fine or 0]]), [tree]).double() * there, "levels")
        noisy_tables = noisy(tables, pair_counts(tables.cells(), tables.sizes, tables.pairs) * there, "tables")
        if removing:  # its value, its node on each level (0, then 4 + 0), its table cell, and the count of records
            moved = {"values": noisy_values[:, 0], "levels": noisy_levels[:, 0] + noisy_levels[:, 4],
                     "tables": noisy_tables[:, 0],
                     "size": _count_draws(int(there), drawn["size"], trials, count_noise, NoiseSource(draw_seed + 13))}
        else:  # the first value against the second; fine cell 0's nodes (level 1: 0; level 2: 4 + 0) against 15's
            moved = {"values": noisy_values[:, 0] - noisy_values[:, 1],
                     "levels": (noisy_levels[:, 0] - noisy_levels[:, 3]) + (noisy_levels[:, 4] - noisy_levels[:, 19]),
                     "tables": noisy_tables[:, 0] - noisy_tables[:, 3]}
        return sum(value * (part in (None, name)) / sigmas[name] ** 2 for name, value in moved.items()).numpy()

    if part is not None:  # a release alone: its own ledger event's ε
        epsilon = epsilon_from_events(spent, delta=WHITEBOX_DELTA, adjacency=adjacency) if part == "size" else \
            _own_epsilon({"values": values_cal, "levels": fine_cal, "tables": pair_cal}[part])
    with_record, without = draws(0, 0, seed), draws(None if removing else 15, 1, seed + 1)
    return {"audit": f"white-box, {part or 'the releases composed'} ({adjacency})", "claimed_epsilon": epsilon,
            "trials": trials, "halved": halve, "count_noise": count_noise, "share": share, "adjacency": adjacency,
            "audited_epsilon_lower_bound": split_epsilon_lower_bound(with_record, without, delta=WHITEBOX_DELTA)}


def _one_record_targets(fine: int, cell: int, tree, calibrations: tuple, draw_seed: int) -> tuple:
    """(the repeated values', the fine tree's, the pair table's target) on one record: at the first of two repeated
    values with fine cell 0, else at the second; in ``cell`` of both table columns. ``calibrations``: theirs."""
    from ..privacy import NoiseSource, PrivacyLedger
    from ..privacy.marginals import MarginalTarget
    from ..privacy.oneway import OneWayTarget
    from ..privacy.values import ValuesTarget

    values_cal, fine_cal, pair_cal = calibrations
    named = ValuesTarget(torch.tensor([[1.0 + fine / 15]]), values_cal, noise=NoiseSource(draw_seed + 3),
                         ledger=PrivacyLedger(), inside=[(0.0, 3.0)], delta=WHITEBOX_DELTA / 10)
    levels = OneWayTarget(torch.tensor([[fine]]), fine_cal, noise=NoiseSource(draw_seed), ledger=PrivacyLedger(),
                          trees=[tree], columns=[0])
    record = torch.zeros(1, 4, dtype=torch.float64)
    record[0, cell] = record[0, 2 + cell] = 2 ** -0.5  # the codec's row: one-hot blocks over sqrt(C)
    tables = MarginalTarget(record, pair_cal, noise=NoiseSource(draw_seed + 7), ledger=PrivacyLedger(),
                            blocks=[(0, 2), (2, 4)], pairs=[(0, 1)])
    return named, levels, tables


def _resolution_calibrations(spec: PrivacySpec, tree, share: float, *, seed: int, contribution: int = 1) -> tuple:
    """(the events spent first, the repeated values' calibration, the tree's, the pair table's) as a table run makes
    them on one record: under add-remove the count of records is released first and the others split what it
    leaves. The accountant is handed the whole δ (the selection's own δ term is not audited here)."""
    from ..privacy import NoiseSource, PrivacyLedger, ReleasePlan
    from ..privacy.calibrate import calibrate_shares
    from ..privacy.size import release_size, shares_after
    from ..tables.resolution import VALUES_SHARE

    removing = spec.adjacency == "add-remove"
    values = ReleasePlan(releases=1, dataset_size=1, sample_size=None, n_projections=1, dim=1, noise=spec.count_noise,
                         size_private=removing)
    plans = (values, replace(values, n_projections=tree.levels), replace(values, dim=4))
    spent = (release_size(1, spec, NoiseSource(seed + 11, secure=spec.secure_noise), PrivacyLedger(),
                          contribution=contribution)[1],) if removing else ()
    v = VALUES_SHARE
    return (spent, *calibrate_shares(spec, plans, shares_after((v, (1 - v) * share, (1 - v) * (1 - share)), spent),
                                     spent=spent))


def _count_draws(count: int, sigma: float, trials: int, count_noise: str, noise) -> torch.Tensor:
    """(trials,) releases of one count, drawn as swflow.privacy.size.release_size draws it (its mechanism)."""
    if count_noise == "discrete-gaussian":
        return noise.discrete_gaussian(torch.full((trials,), count, dtype=torch.int64), sigma).to(torch.float64)
    return count + noise.gaussian((trials,), sigma, dtype=torch.float64)


def _own_epsilon(calibration) -> float:
    """The ε of one calibrated release alone (its ledger event, without the releases it is composed with)."""
    from ..privacy.accountants import epsilon_from_events
    from ..privacy.calibrate import plan_events

    event = plan_events(calibration.plan, adjacency=calibration.spec.adjacency,
                        multiplier=calibration.noise_multiplier, bound="spectral", delta_theta=0.0)
    return epsilon_from_events(event, delta=WHITEBOX_DELTA, adjacency=calibration.spec.adjacency)


def _histogram_draws(privacy: PrivacySpec, record: float, *, trials: int, seed: int, directions: int) -> np.ndarray:
    """Likelihood-ratio statistic of ``trials`` independent sliced-histogram releases of the one-record set
    {record} in d = 1 (every direction is +1, two bins: the record at +1 sits in the upper bin, at -1 in the
    lower). The target is the real calibrated one, and every draw goes through its own noise step (OpenDP's
    discrete Gaussian, or the seeded float Gaussian): one (K, 2) release per trial, stacked. The statistic
    sums (upper - lower) over the directions, the optimal test for this pair."""
    from ..privacy.histogram import projection_counts

    flow = make_flow("dpswflow-hist", torch.full((1, 1), record), privacy=privacy, n_projections=1,
                     pool_size=directions, bins=2, privacy_seed=None if privacy.count_noise != "gaussian" else seed,
                     progress=False, config=FlowConfig(steps=1, n_particles=1))
    theta = torch.ones(1, directions, dtype=torch.float64)
    counts = projection_counts(torch.full((1, 1), record, dtype=torch.float64), theta, bins=2, radius=1.0)
    noisy = flow.target.noisy_draws(counts.expand(trials, -1, -1), theta)
    return (noisy[:, :, 1] - noisy[:, :, 0]).sum(dim=1).numpy()


def composed_whitebox_audit(epsilon: float, *, trials: int = 1_000_000, share: float = 0.5,
                            halve_dp_sgd_noise: bool = False, count_noise: str = "discrete-gaussian",
                            seed: int = 0) -> dict:
    """White-box audit of a run that composes a histogram release with a DP-SGD adaptation
    (autoencoders/adapt.py):
    the budget ``epsilon`` split by the run's own rule (``share`` to DP-SGD), one release of each on the
    worst-case pair of one-record sets. The histogram's draws come from its real calibrated target's noise step;
    the DP-SGD step's from Opacus's DPOptimizer (``add_noise`` on a sum of clipped gradients +C or −C, the
    replace pair's). The statistic is the likelihood-ratio one of the product mechanism: each part's value
    weighted by its mean difference over its variance. ``halve_dp_sgd_noise`` runs the DP-SGD step with half
    its calibrated noise: the audit must then exceed the claim."""
    from autoencoders.adapt import dp_sgd_optimizer, split_budget
    from ..core.config import AdaptSettings
    from ..privacy.accountants import epsilon_from_events
    from ..privacy.audit import split_epsilon_lower_bound
    from ..methods.plan import resolve_fixed
    from ..privacy.histogram import projection_counts
    from ..privacy.noise import NoiseSource

    settings = AdaptSettings(adapt_decoder=True, adapt_share=share, adapt_steps=1, adapt_batch_size=trials)
    spec = PrivacySpec(epsilon=epsilon, delta=WHITEBOX_DELTA, count_noise=count_noise)
    plan = resolve_fixed("dpswflow-hist", steps=1, n_projections=1, dataset_size=trials, dim=1, privacy=spec,
                         pool_size=1).release
    histogram_spec, z_d = split_budget(spec, plan, settings)
    from autoencoders.adapt import adaptation_event
    from ..privacy import calibrate, plan_events

    z_h = calibrate(histogram_spec, plan).noise_multiplier
    claimed = epsilon_from_events((*plan_events(plan, adjacency="replace-one", multiplier=z_h, bound="histogram",
                                                delta_theta=0.0),
                                   adaptation_event(multiplier=z_d, settings=settings, dataset_size=trials,
                                                    adjacency="replace-one")),
                                  delta=WHITEBOX_DELTA, adjacency="replace-one")
    clip = settings.adapt_clip
    z_run = z_d * (0.5 if halve_dp_sgd_noise else 1.0)

    def draws(record: float, draw_seed: int) -> np.ndarray:
        privacy = PrivacySpec(noise_multiplier=z_h, delta=WHITEBOX_DELTA, count_noise=count_noise)
        flow = make_flow("dpswflow-hist", torch.full((1, 1), record), privacy=privacy, n_projections=1, pool_size=1,
                         bins=2, privacy_seed=None if count_noise != "gaussian" else draw_seed, progress=False,
                         config=FlowConfig(steps=1, n_particles=1))
        theta = torch.ones(1, 1, dtype=torch.float64)
        counts = projection_counts(torch.full((1, 1), record, dtype=torch.float64), theta, bins=2, radius=1.0)
        noisy = flow.target.noisy_draws(counts.expand(trials, -1, -1), theta)
        histogram = (noisy[:, 0, 1] - noisy[:, 0, 0]).numpy()  # mean ±2, variance 2 sigma_h^2
        sigma_h = flow.target.noise_std(theta)
        parameter = torch.nn.Parameter(torch.zeros(trials, dtype=torch.float64))
        optimizer = dp_sgd_optimizer([parameter], multiplier=z_run, settings=settings, batch=1, lr=settings.adapt_lr,
                                     noise=NoiseSource(draw_seed))
        parameter.summed_grad = torch.full((trials,), clip * record, dtype=torch.float64)  # ±C: the pair's sums
        optimizer.add_noise()
        step = parameter.grad.detach().numpy()  # mean ±C, std 2 z_run C
        sigma_d = 2.0 * z_run * clip
        return histogram * (2.0 / sigma_h ** 2) + step * (2.0 * clip / sigma_d ** 2)

    with_record, without = draws(1.0, seed), draws(-1.0, seed + 1)
    return {"audit": "white-box, histogram + DP-SGD", "claimed_epsilon": claimed, "target_epsilon": epsilon,
            "share": share, "trials": trials, "halved_dp_sgd_noise": halve_dp_sgd_noise, "count_noise": count_noise,
            "audited_epsilon_lower_bound": split_epsilon_lower_bound(with_record, without, delta=WHITEBOX_DELTA)}
