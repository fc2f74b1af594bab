import json
import math

import dp_accounting as dpa
import numpy as np
import pytest
import torch
from dp_accounting import pld, rdp
from opacus.accountants import RDPAccountant
from scipy import stats

from swflow import FlowConfig, make_flow
from swflow.kernels.sliced import random_directions
from swflow.privacy import (BudgetExhausted, MechanismEvent, NoiseSource, PrivacyLedger, PrivacyReport, PrivacySpec,
                            PrivateTarget, ReleasePlan, analytic_gaussian_epsilon, analytic_gaussian_multiplier,
                            bernstein_bound, calibrate, classical_gaussian_multiplier, clt_bound, diffusion_gamma,
                            epsilon_from_events, noise_multiplier_for, privacy_report, spectral_bound)
from swflow.privacy.accountants import check_combination

pytestmark = pytest.mark.filterwarnings("ignore:delta=.*is above 1/")

MNIST = ReleasePlan(releases=4200, dataset_size=30000, sample_size=250, n_projections=70, dim=8)


def _squared_gains(k, d, draws, seed=0):
    """H = ‖uᵀΘ‖² for a fixed unit u and `draws` independent Θ of k uniform directions.

    By rotation invariance u = e_1, and for θ = g/‖g‖ with g ~ N(0, I_d),
    ⟨e_1, θ⟩² = g_1² / (g_1² + χ²_{d−1}) (the construction test_squared_projection_is_beta checks
    against explicit directions), drawn directly to avoid building (draws, d, k) arrays.
    """
    rng = np.random.default_rng(seed)
    first = rng.standard_normal((draws, k)) ** 2
    return (first / (first + rng.chisquare(d - 1, size=(draws, k)))).sum(axis=1)


@pytest.mark.parametrize("d", [3, 8, 48])
def test_squared_projection_is_beta(d, gen):
    theta = random_directions(200_000, d, generator=gen, dtype=torch.float64)
    h = theta[0].square().numpy()  # squared projection of u = e_1 on uniform directions
    assert h.mean() == pytest.approx(1 / d, rel=0.02)
    assert h.var() == pytest.approx(2 * (d - 1) / (d**2 * (d + 2)), rel=0.03)
    assert stats.kstest(h, stats.beta(0.5, (d - 1) / 2).cdf).pvalue > 1e-4
    assert stats.kstest(_squared_gains(1, d, 200_000), stats.beta(0.5, (d - 1) / 2).cdf).pvalue > 1e-4


@pytest.mark.parametrize("k,d", [(10, 8), (70, 8), (300, 48)])
def test_bernstein_bound_failure_rate(k, d):
    delta_theta = 0.01
    h = _squared_gains(k, d, 40_000)
    fail = float((h > bernstein_bound(k, d, delta_theta=delta_theta)).mean())
    assert fail <= delta_theta


def test_clt_bound_under_covers_so_it_is_not_the_default():
    # The paper's normal approximation ignores the right skew of H: at δθ = 1e-2 its failure rate
    # is measured above nominal by many binomial standard errors, while Bernstein holds.
    delta_theta, draws = 0.01, 100_000
    h = _squared_gains(70, 8, draws)
    fail = float((h > clt_bound(70, 8, delta_theta=delta_theta)).mean())
    print(f"CLT bound at delta_theta={delta_theta}: measured failure rate {fail:.4f}")
    assert fail > delta_theta + 4 * math.sqrt(delta_theta * (1 - delta_theta) / draws)
    assert float((h > bernstein_bound(70, 8, delta_theta=delta_theta)).mean()) <= delta_theta
    assert PrivacySpec(epsilon=1.0).sensitivity_bound == "spectral"
    with pytest.raises(ValueError, match="k > 30"):
        clt_bound(20, 8, delta_theta=0.01)
    with pytest.warns(UserWarning, match="normal approximation"):
        calibrate(PrivacySpec(epsilon=10.0, sensitivity_bound="clt"), MNIST)


def test_spectral_bound_is_worst_case(gen):
    theta = random_directions(70, 8, generator=gen, dtype=torch.float64)
    u = torch.randn(5000, 8, generator=gen, dtype=torch.float64)
    u = u / u.norm(dim=1, keepdim=True)
    assert float((u @ theta).square().sum(dim=1).max()) <= spectral_bound(theta) + 1e-9


def test_analytic_gaussian_against_pld_and_classical():
    # Independent reference: dp-accounting's PLD (add/remove, sensitivity 1) of a Gaussian.
    for z in (0.8, 2.0, 5.0):
        acc = pld.PLDAccountant(dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)
        acc.compose(dpa.GaussianDpEvent(z))
        assert analytic_gaussian_epsilon(noise_multiplier=z, delta=1e-5) == pytest.approx(
            acc.get_epsilon(1e-5), rel=5e-3)
    # Balle & Wang 2018: analytic calibration needs less noise than the classical one, ε = 1, δ = 1e-5.
    analytic = analytic_gaussian_multiplier(epsilon=1.0, delta=1e-5)
    classical = classical_gaussian_multiplier(epsilon=1.0, delta=1e-5)
    assert analytic == pytest.approx(3.73, abs=0.01) and classical == pytest.approx(4.84, abs=0.01)
    assert analytic_gaussian_epsilon(noise_multiplier=analytic, delta=1e-5) <= 1.0
    with pytest.raises(ValueError, match="only valid for 0 < epsilon <= 1"):
        classical_gaussian_multiplier(epsilon=2.0, delta=1e-5)


def _events(plan, z):
    return (MechanismEvent(noise_multiplier=z, noise_std=0.0, sensitivity=0.0, sensitivity_bound="spectral",
                           delta_sensitivity=0.0, sampling=plan.sampling("replace-one"),
                           sample_size=plan.rows_per_release, dataset_size=plan.dataset_size,
                           n_projections=plan.n_projections, count=plan.releases),)


def test_replace_one_equals_dp_accounting_direct():
    ours = epsilon_from_events(_events(MNIST, 0.67), delta=1e-5, adjacency="replace-one")
    acc = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.SampledWithoutReplacementDpEvent(30000, 250, dpa.GaussianDpEvent(0.67)), 4200)
    assert ours == acc.get_epsilon(1e-5)
    assert ours == pytest.approx(14.84, abs=0.05)  # DESIGN.md: the paper's "ε = 10" setting


def _pld_poisson_substitution(z, q, steps, delta):
    from dp_accounting.pld import pld_privacy_accountant

    acc = pld_privacy_accountant.PLDAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    acc.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), steps)
    return acc.get_epsilon(delta)


def test_zero_out_is_accounted_as_poisson_substitution_not_add_remove():
    # A sampled null record still adds a pure-noise column, so add/remove (Opacus) does not cover
    # the release; zero-out is recomputed here with dp-accounting's PLD for Poisson substitution.
    plan = ReleasePlan(releases=4200, dataset_size=30000, sample_size=250, n_projections=70, dim=8)
    cal = calibrate(PrivacySpec(noise_multiplier=0.67, delta=1e-5, adjacency="zero-out"), plan)
    assert cal.accountant.family == "pld" and cal.accountant.name.startswith("dp-accounting PLD")
    assert cal.epsilon == pytest.approx(_pld_poisson_substitution(0.67, 250 / 30000, 4200, 1e-5), rel=1e-9)
    assert cal.epsilon == pytest.approx(11.38, abs=0.02)  # the figure in issue 15
    opacus = RDPAccountant()
    opacus.history = [(0.67, 250 / 30000, 4200)]
    assert opacus.get_epsilon(1e-5) < cal.epsilon - 1.5  # what the add/remove bound would have claimed


def test_poisson_substitution_pld_bounds_the_column_release():
    # One step, one record: with probability q its column appears, N(Δ, σ²) in D against N(0, σ²) in
    # D' (the null record); otherwise neither world has it. That pair's exact hockey-stick divergence
    # is q·δ_G(ε'), ε' = log(1 + (e^ε − 1)/q), δ_G the Gaussian one (closed form, Balle & Wang).
    from dp_accounting.pld import privacy_loss_distribution as pld

    z, q = 0.67, 1 / 120
    bound = pld.from_gaussian_mechanism(z, sampling_prob=q, neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    mu = 1 / z
    for eps in (0.0, 0.01, 0.1, 0.5, 1.0, 2.0):
        inner = math.log1p(math.expm1(eps) / q)
        exact = q * (stats.norm.cdf(mu / 2 - inner / mu) - math.exp(inner) * stats.norm.cdf(-mu / 2 - inner / mu))
        assert bound.get_delta_for_epsilon(eps) >= exact * (1 - 1e-9)


@pytest.mark.parametrize("target", [10.0, 5.0])
def test_calibration_round_trip(target):
    z = noise_multiplier_for(epsilon=target, delta=1e-5, plan=MNIST, adjacency="replace-one")
    cal = calibrate(PrivacySpec(noise_multiplier=z, delta=1e-5), MNIST)
    eps = epsilon_from_events(_events(MNIST, z), delta=1e-5, adjacency="replace-one")
    assert 0.99 * target <= eps <= target
    assert cal.epsilon <= target * 1.01  # with 10% of δ kept for the sensitivity bound
    if target == 10.0:
        assert z == pytest.approx(0.77, abs=0.01)  # DESIGN.md's measured multiplier


def test_each_release_shape_is_accounted_by_the_accountant_it_names():
    from swflow.privacy.accountants import accountant_for

    def events(count, sampling, sample_size):
        return (MechanismEvent(noise_multiplier=1.5, noise_std=0.0, sensitivity=0.0, sensitivity_bound="spectral",
                               delta_sensitivity=0.0, sampling=sampling, sample_size=sample_size,
                               dataset_size=1000, n_projections=8, count=count),)

    one = events(1, "none", 1000)  # one Gaussian: delta(eps) of the analytic Gaussian (Balle & Wang, Thm 8)
    acc = accountant_for(one, adjacency="replace-one")
    eps = acc.epsilon(one, delta=1e-5)
    mu = 1 / 1.5
    assert stats.norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * stats.norm.cdf(-mu / 2 - eps / mu) == \
        pytest.approx(1e-5, rel=1e-3)
    assert acc.name.startswith("analytic Gaussian")
    full = events(20, "none", 1000)  # composed full releases: RDP of twenty Gaussians
    rdp_full = rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    rdp_full.compose(dpa.GaussianDpEvent(1.5), 20)
    acc = accountant_for(full, adjacency="replace-one")
    assert acc.epsilon(full, delta=1e-5) == rdp_full.get_epsilon(1e-5) and "whole data set" in acc.name
    poisson = events(20, "poisson", 100)
    acc = accountant_for(poisson, adjacency="zero-out")
    assert acc.family == "pld" and acc.epsilon(poisson, delta=1e-5) == pytest.approx(
        _pld_poisson_substitution(1.5, 0.1, 20, 1e-5), rel=1e-9)
    with pytest.raises(ValueError, match="accountant='pld'"):
        accountant_for(poisson, adjacency="zero-out", requested="rdp")


def test_single_release_calibration_is_analytic():
    plan = ReleasePlan(releases=1, dataset_size=30000, sample_size=None, n_projections=31, dim=8)
    cal = calibrate(PrivacySpec(epsilon=10.0, delta=1e-5), plan)
    assert cal.accountant.name.startswith("analytic Gaussian")
    assert 9.99 <= cal.epsilon <= 10.0


def test_ledger_adds_up_and_report_fields(gen):
    y = torch.randn(400, 5, generator=gen)
    y = y / y.norm(dim=1, keepdim=True)
    flow = make_flow("dpswflow-r", y, privacy=PrivacySpec(epsilon=6.0, delta=1e-5, sensitivity_bound="bernstein"),
                     n_projections=12,
                     batch_size=40, progress=False, config=FlowConfig(steps=15, n_particles=50))
    flow.run()
    cal, ledger = flow.target.calibration, flow.target.ledger
    assert ledger.releases == 15 and len(ledger) == 1
    assert ledger.delta_sensitivity == pytest.approx(15 * cal.delta_theta)
    typed = privacy_report("dpswflow-r", flow.target, diffusion_gamma=1.0)
    report = typed.to_json()
    assert PrivacyReport.from_json(json.loads(json.dumps(report))) == typed  # privacy.json reads back exactly
    assert report["statement"] == typed.statement and report["amplification_note"] == typed.notes[
        "amplification_note"]
    assert report["delta"] == pytest.approx(1e-5) and report["epsilon"] <= 6.0
    assert report["epsilon"] == pytest.approx(cal.epsilon)
    for key in ("epsilon", "delta", "delta_sensitivity", "adjacency", "accountant", "noise_multiplier",
                "noise_std", "sensitivity", "sensitivity_bound", "sample_rate", "batch_size", "steps",
                "n_projections", "dim", "norm_bound", "diffusion_gamma", "dataset_size"):
        assert key in report
    assert report["noise_std"] == pytest.approx(cal.noise_multiplier * 2 * math.sqrt(
        bernstein_bound(12, 5, delta_theta=cal.delta_theta)))


def test_presampled_epsilon_does_not_depend_on_steps(gen):
    y = torch.randn(400, 5, generator=gen)
    y = y / y.norm(dim=1, keepdim=True)
    eps = []
    for steps in (3, 40):
        flow = make_flow("dpswflow", y, privacy=PrivacySpec(noise_multiplier=3.0, delta=1e-5), n_projections=8,
                         pool_size=20, progress=False, config=FlowConfig(steps=steps, n_particles=30))
        flow.run()
        eps.append(flow.target.epsilon_spent())
    assert eps[0] == eps[1] and flow.target.ledger.releases == 1


def test_mismatched_settings_are_refused():
    with pytest.raises(ValueError, match="unknown accountant.*Opacus"):
        check_combination(adjacency="zero-out", accountant="prv", sampling="poisson")
    with pytest.raises(ValueError, match="accountant='rdp'"):
        check_combination(adjacency="replace-one", accountant="pld", sampling="without-replacement")
    with pytest.raises(ValueError, match="accountant='pld'"):
        check_combination(adjacency="zero-out", accountant="rdp", sampling="poisson")
    with pytest.raises(ValueError, match="does not match"):
        check_combination(adjacency="replace-one", accountant="rdp", sampling="poisson")
    with pytest.raises(ValueError, match="does not match"):
        check_combination(adjacency="zero-out", accountant="rdp", sampling="without-replacement")
    with pytest.raises(ValueError, match="unknown adjacency"):
        calibrate(PrivacySpec(epsilon=1.0, adjacency="swap-two"), MNIST)
    # add-remove makes n private: accounted for a table's releases of counts only (tests/test_table_adjacency.py)
    with pytest.raises(ValueError, match="does not match 'add-remove'"):
        calibrate(PrivacySpec(epsilon=1.0, adjacency="add-remove"), MNIST)


def test_bad_budget_inputs(gen):
    for kwargs, match in (({"epsilon": 0.0}, "epsilon must be > 0"), ({"epsilon": -1.0}, "epsilon must be > 0"),
                          ({"epsilon": 1.0, "delta": 0.0}, "delta must be in"),
                          ({"epsilon": 1.0, "noise_multiplier": 1.0}, "exactly one")):
        with pytest.raises(ValueError, match=match):
            PrivacySpec(**kwargs)
    with pytest.raises(ValueError, match="delta=0.01 >= 1/n"):
        calibrate(PrivacySpec(epsilon=1.0, delta=0.01), MNIST.__class__(10, 1000, 10, 5, 3))
    with pytest.raises(ValueError, match="at least once"):
        ReleasePlan(releases=0, dataset_size=10, sample_size=None, n_projections=3, dim=2)
    with pytest.raises(ValueError, match="batch size 20 must be between"):
        ReleasePlan(releases=1, dataset_size=10, sample_size=20, n_projections=3, dim=2)


def test_unbounded_rows_refused_unless_clipped(gen):
    y = torch.randn(300, 4, generator=gen) * 3
    cfg = FlowConfig(steps=2, n_particles=10)
    with pytest.raises(ValueError, match="norm above R=1"):
        make_flow("dpswflow-r", y, privacy=PrivacySpec(epsilon=5.0, delta=1e-5), n_projections=5,
                  batch_size=30, config=cfg)
    flow = make_flow("dpswflow-r", y, privacy=PrivacySpec(epsilon=5.0, delta=1e-5, clip=True), n_projections=5,
                     batch_size=30, config=cfg, progress=False)
    assert _largest_norm(flow.target) <= 1.0 + 1e-6


def _largest_norm(target) -> float:
    """The largest norm among the rows a target holds, read through the one door rows leave by
    (release_statistic) with a zero-sensitivity bound, so no noise hides it (a test-only reading)."""
    from swflow.privacy import SensitivityBound

    value, sigma = target.release_statistic(lambda batch: batch.norm(dim=1).max().reshape(1),
                                            SensitivityBound(kind="spectral", squared_gain=0.0, factor=0.0,
                                                             failure_probability=0.0))
    assert sigma == 0.0
    return float(value[0])


def test_release_beyond_plan_is_refused(gen):
    y = torch.randn(100, 3, generator=gen)
    y = y / y.norm(dim=1, keepdim=True)
    plan = ReleasePlan(releases=2, dataset_size=100, sample_size=10, n_projections=4, dim=3)
    target = PrivateTarget(y, calibrate(PrivacySpec(epsilon=2.0, delta=1e-5), plan), noise=NoiseSource(0),
                           ledger=PrivacyLedger(), batch_size=10)
    theta = random_directions(4, 3, generator=gen)
    target.release(theta)
    target.release(theta)
    with pytest.raises(BudgetExhausted):
        target.release(theta)
    assert target.ledger.releases == 2


def test_release_noise_has_calibrated_std(gen):
    # With a single row at the origin every released value is pure noise: check its law.
    plan = ReleasePlan(releases=1, dataset_size=1, sample_size=None, n_projections=2000, dim=3)
    cal = calibrate(PrivacySpec(noise_multiplier=1.5, delta=0.5, sensitivity_bound="spectral"), plan)
    target = PrivateTarget(torch.zeros(1, 3), cal, noise=NoiseSource(0), ledger=PrivacyLedger())
    theta = random_directions(2000, 3, generator=gen)
    values, sigma = target.release(theta)
    assert sigma == pytest.approx(1.5 * 2 * math.sqrt(spectral_bound(theta)))
    assert stats.kstest(values.flatten().numpy() / sigma, "norm").pvalue > 1e-4


def test_secure_noise_is_standard_normal():
    z = NoiseSource(secure=True).gaussian((100_000,), 2.0, dtype=torch.float64).numpy()
    assert stats.kstest(z / 2.0, "norm").pvalue > 1e-4
    assert NoiseSource(secure=True).subset_without_replacement(50, 50).sort().values.tolist() == list(range(50))


def test_diffusion_amplification():
    assert diffusion_gamma(drift_clip=None, step_size=1.0, diffusion=0.1, n_particles=10) == 1.0
    assert diffusion_gamma(drift_clip=1.0, step_size=1.0, diffusion=0.0, n_particles=10) == 1.0
    # one particle, 1-D: TV(N(0, s²), N(Δ, s²)) = 2Φ(Δ/2s) − 1, checked by numerical integration
    g = diffusion_gamma(drift_clip=0.05, step_size=1.0, diffusion=0.5, n_particles=1)
    s, gap = 1.0, 0.1
    xs = np.linspace(-10, 10, 200_001)
    tv = 0.5 * np.trapezoid(np.abs(stats.norm.pdf(xs, 0, s) - stats.norm.pdf(xs, gap, s)), xs)
    assert g == pytest.approx(tv, rel=1e-6)
    # it grows with the number of particles
    assert diffusion_gamma(drift_clip=0.05, step_size=1.0, diffusion=0.5, n_particles=10_000) > 0.99


def test_zero_out_flow_uses_poisson_batches_and_the_substitution_accountant(gen):
    y = torch.nn.functional.normalize(torch.randn(1000, 4, generator=gen), dim=1)
    spec = PrivacySpec(epsilon=3.0, delta=1e-5, adjacency="zero-out")
    flow = make_flow("dpswflow-r", y, privacy=spec, n_projections=8, batch_size=100, privacy_seed=0,
                     progress=False, config=FlowConfig(steps=25, n_particles=100))
    # the flow's own releases: (k, b) values, b the batch each one saw
    theta = flow.target.directions(8, generator=gen, device="cpu", dtype=torch.float32)
    sizes = [flow.target.release(theta)[0].shape[1] for _ in range(25)]
    assert len(set(sizes)) > 1 and abs(np.mean(sizes) - 100) < 15  # Poisson: random sizes, mean q·n
    event = flow.target.ledger.events[0]
    assert event.sampling == "poisson" and flow.target.ledger.releases == 25
    z = flow.target.calibration.noise_multiplier
    assert flow.target.epsilon_spent() == pytest.approx(_pld_poisson_substitution(z, 0.1, 25, 1e-5), rel=1e-9)
    assert flow.target.epsilon_spent() <= 3.0


def test_ldp_flow_epsilon_is_the_local_gaussian(gen):
    from swflow.privacy import local_gaussian_std

    y = torch.nn.functional.normalize(torch.randn(500, 3, generator=gen), dim=1)
    flow = make_flow("ldp-flow", y, privacy=PrivacySpec(epsilon=4.0, delta=1e-5), n_projections=8, privacy_seed=0,
                     progress=False, config=FlowConfig(steps=5, n_particles=50))
    flow.run()
    z, sigma = local_gaussian_std(epsilon=4.0, delta=1e-5 * 0.99999, norm_bound=1.0)
    report = privacy_report("ldp-flow", flow.target).to_json()
    assert report["noise_std"] == pytest.approx(flow.target.local_noise_std)
    assert report["sensitivity"] == pytest.approx(2.0) and report["steps"] == 1
    assert report["epsilon"] <= 4.0 and report["epsilon"] == pytest.approx(4.0, rel=1e-6)
    assert report["noise_std"] == pytest.approx(sigma, rel=1e-3) and "local" in report["release"]


@pytest.mark.parametrize("bound,secret", [("spectral", False), ("bernstein", True)])
def test_probabilistic_bounds_draw_directions_from_the_secret_stream(bound, secret, gen):
    from swflow.kernels.sliced import random_directions

    y = torch.nn.functional.normalize(torch.randn(400, 5, generator=gen), dim=1)
    drawn = []
    for privacy_seed in (1, 2):
        flow = make_flow("dpswflow-r", y, privacy=PrivacySpec(epsilon=5.0, delta=1e-5, sensitivity_bound=bound),
                         n_projections=6, batch_size=50, privacy_seed=privacy_seed, progress=False,
                         config=FlowConfig(steps=2, n_particles=20, seed=7))
        release = flow.target.release
        flow.target.release = lambda theta, release=release: drawn.append(theta.clone()) or release(theta)
        flow.run()
        report = flow.privacy_report("dpswflow-r").to_json()
        assert ("secret privacy-noise stream" in report["directions"]) == secret
        assert report["noise_seed_known"] is True
    # the public simulator stream (seed 7, after the initial particles) would give the same Θ for any privacy seed
    public = torch.Generator().manual_seed(7)
    torch.randn(20, 5, generator=public, dtype=torch.float64)  # the initial particles come first
    expected = random_directions(6, 5, generator=public)
    assert torch.equal(drawn[0], drawn[2]) != secret  # same public seed: same Θ unless drawn in secret
    assert torch.allclose(drawn[0], expected) != secret


def test_noise_seed_known_only_when_a_seed_is_given(gen):
    y = torch.nn.functional.normalize(torch.randn(200, 3, generator=gen), dim=1)
    for privacy_seed, known in ((None, False), (3, True)):
        flow = make_flow("dpswflow", y, privacy=PrivacySpec(epsilon=5.0, delta=1e-5), n_projections=4, pool_size=6,
                         privacy_seed=privacy_seed, progress=False, config=FlowConfig(steps=2, n_particles=20))
        flow.run()
        assert flow.privacy_report("dpswflow").noise_seed_known is known
    assert NoiseSource(5, secure=True).seed_known is False
