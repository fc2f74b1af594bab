"""The sliced-histogram release (dpswflow-hist): counts, sensitivity, post-processing, calibration, flow."""
import itertools
import math
import warnings

import numpy as np
import pytest
import torch

from swflow import FlowConfig, make_flow, sliced_wasserstein
from swflow.kernels.drift import binned_drift, sampled_drift
from swflow.kernels.sliced import random_directions
from swflow.privacy import PrivacySpec, histogram_sensitivity
from swflow.privacy import histogram as H

warnings.filterwarnings("ignore", message="delta=")


def test_counts_match_numpy_histogram():
    g = torch.Generator().manual_seed(0)
    rows = torch.nn.functional.normalize(torch.randn(500, 3, generator=g, dtype=torch.float64), dim=1) * 0.9
    theta = random_directions(7, 3, generator=g, dtype=torch.float64)
    counts = H.projection_counts(rows, theta, bins=10, radius=1.0)
    for j in range(7):
        expected, _ = np.histogram((rows @ theta[:, j]).numpy(), bins=10, range=(-1.0, 1.0))
        assert counts[j].tolist() == expected.tolist()


@pytest.mark.parametrize("adjacency", ["replace-one", "zero-out"])
def test_sensitivity_by_brute_force(adjacency):
    # Every neighbour of a 4-row set in d = 2 (replace a row by any of 24 candidates on and inside the unit
    # circle, or by the null record, the zero row, with n fixed): the largest change of the K x B count matrix
    # is the bound, sqrt(2K) under both adjacencies, and it is attained.
    g = torch.Generator().manual_seed(1)
    theta = random_directions(3, 2, generator=g, dtype=torch.float64)
    angles = torch.arange(12, dtype=torch.float64) * (2 * math.pi / 12)
    circle = torch.stack([angles.cos(), angles.sin()], dim=1)
    candidates = torch.cat([circle, 0.4 * circle])
    base = candidates[[0, 5, 14, 20]]
    counts = H.projection_counts(base, theta, bins=6, radius=1.0).double()
    largest = 0.0
    for i, c in itertools.product(range(len(base)), range(len(candidates))):
        if adjacency == "replace-one":
            other = base.clone()
            other[i] = candidates[c]
        else:
            other = base.clone()
            other[i] = 0.0
        diff = H.projection_counts(other, theta, bins=6, radius=1.0).double() - counts
        largest = max(largest, float(diff.norm()))
    bound = histogram_sensitivity(3, adjacency=adjacency).value
    assert bound == pytest.approx(math.sqrt(6))
    assert largest == pytest.approx(bound)


def test_exact_counts_give_the_exact_cdf_and_quantiles():
    counts = torch.tensor([[0.0, 2.0, 6.0, 2.0], [5.0, 0.0, 0.0, 5.0]])
    cdf = H.monotone_cdf(counts, noise_std=0.0)
    assert torch.allclose(cdf, torch.tensor([[0, 0, 0.2, 0.8, 1.0], [0, 0.5, 0.5, 0.5, 1.0]], dtype=torch.float64))
    edges = H.bin_edges(4, radius=1.0)
    levels = torch.tensor([0.1, 0.4, 0.9], dtype=torch.float64)
    table = H.quantile_table(cdf, edges, levels)
    # row 0 strictly increasing on [-0.5, 1]: np.interp inverts it
    assert np.allclose(table[0].numpy(), np.interp(levels.numpy(), cdf[0, 1:].numpy(), edges[1:].numpy()))
    # row 1: half the mass in [-1, -0.5], half in [0.5, 1]; the empty middle is skipped
    assert np.allclose(table[1].numpy(), [-0.9, -0.6, 0.9])


def test_noisy_counts_give_valid_cdfs():
    g = torch.Generator().manual_seed(2)
    noisy = torch.randn(50, 32, generator=g, dtype=torch.float64) * 5 + torch.linspace(-3, 10, 32, dtype=torch.float64)
    cdf = H.monotone_cdf(noisy, noise_std=5.0)
    assert (cdf[:, 0] == 0).all() and (cdf[:, -1] == 1).all()
    assert (torch.diff(cdf, dim=1) >= 0).all()
    # nothing above the threshold: uniform
    assert torch.allclose(H.monotone_cdf(torch.zeros(1, 4), noise_std=1.0),
                          torch.tensor([[0, 0.25, 0.5, 0.75, 1.0]], dtype=torch.float64))


def test_single_release_calibration_against_dp_accounting():
    import dp_accounting as dpa
    from dp_accounting.pld import pld_privacy_accountant

    rows = torch.nn.functional.normalize(torch.randn(2000, 4, generator=torch.Generator().manual_seed(3)), dim=1)
    for eps in (1.0, 10.0):
        flow = make_flow("dpswflow-hist", rows, privacy=PrivacySpec(epsilon=eps, delta=1e-5, count_noise="gaussian"),
                         n_projections=8, pool_size=64, bins=16, privacy_seed=0, progress=False,
                         config=FlowConfig(steps=2))
        flow.run()
        report = flow.privacy_report("dpswflow-hist")
        assert report.epsilon <= eps and report.steps == 1 and report.bins == 16 and report.n_projections == 64
        assert report.sensitivity == pytest.approx(math.sqrt(2 * 64))
        assert report.noise_std == pytest.approx(report.noise_multiplier * math.sqrt(128))
        # one Gaussian of std z at distance 1 between the neighbours' outputs: dp-accounting's PLD (add/remove
        # relation, distance 1) is a numerical reference for the analytic Gaussian's exact epsilon
        pld = pld_privacy_accountant.PLDAccountant()
        pld.compose(dpa.GaussianDpEvent(report.noise_multiplier))
        assert report.epsilon == pytest.approx(pld.get_epsilon(1e-5), rel=5e-3)


def _release(rows, privacy, *, pool_size, bins, **kwargs):
    flow = make_flow("dpswflow-hist", rows, privacy=privacy, n_projections=8, pool_size=pool_size, bins=bins,
                     progress=False, config=FlowConfig(steps=1), **kwargs)
    flow.run()
    theta = flow.strategy.state_dict()["theta"]
    exact = H.projection_counts(rows, theta, bins=bins, radius=1.0).double()
    return flow, flow.target.released_counts - exact  # the release is public: its noise is readable


def test_release_adds_the_reported_noise():
    rows = torch.nn.functional.normalize(torch.randn(3000, 4, generator=torch.Generator().manual_seed(4)), dim=1)
    flow, noise = _release(rows, PrivacySpec(epsilon=1.0, delta=1e-5, count_noise="gaussian"), pool_size=128, bins=32,
                           privacy_seed=5)
    sigma = flow.privacy_report("dpswflow-hist").noise_std
    # 4 096 draws: the sample std is within 5% of sigma with overwhelming probability (6 standard errors)
    assert float(noise.std()) == pytest.approx(sigma, rel=0.05)
    assert abs(float(noise.mean())) < 6 * sigma / math.sqrt(noise.numel())


def test_default_noise_is_opendp_discrete_gaussian_and_never_seeded():
    rows = torch.nn.functional.normalize(torch.randn(3000, 4, generator=torch.Generator().manual_seed(6)), dim=1)
    flow, noise = _release(rows, PrivacySpec(epsilon=2.0, delta=1e-5), pool_size=128, bins=32)
    report = flow.privacy_report("dpswflow-hist")
    assert torch.equal(noise, noise.round())  # integer counts, integer noise
    assert report.mechanism == "discrete-gaussian" and "discrete Gaussian" in report.accountant
    assert report.epsilon <= 2.0 and report.noise_seed_known is False
    # the discrete Gaussian of scale sigma >= 2 has variance within 1e-6 of sigma^2 (Canonne, Kamath & Steinke
    # 2020, Fact 18): 4 096 draws put the sample std within 5% of sigma (6 standard errors)
    assert float(noise.std()) == pytest.approx(report.noise_std, rel=0.05)
    assert abs(float(noise.mean())) < 6 * report.noise_std / math.sqrt(noise.numel())
    with pytest.raises(ValueError, match="no seed can reproduce"):
        _release(rows, PrivacySpec(epsilon=2.0, delta=1e-5), pool_size=128, bins=32, privacy_seed=1)


def test_discrete_gaussian_epsilon_against_a_brute_force_privacy_profile():
    # K = 1 direction: a neighbour moves 2 counts by one. The exact delta(eps) of the product of two discrete
    # Gaussians N_Z(0, s^2) shifted by (+1, -1) is the sum over the integer plane of (P - e^eps Q)_+, summed here
    # directly. The accounted epsilon must hold (delta_exact <= delta) and be tight (within 1%).
    from swflow.privacy.mechanisms import discrete_gaussian_epsilon

    for multiplier in (1.5, 3.0):
        sigma = multiplier * math.sqrt(2)
        delta = 1e-5
        eps = discrete_gaussian_epsilon(noise_multiplier=multiplier, unit_changes=2, delta=delta)
        x = np.arange(-int(40 * sigma), int(40 * sigma) + 1)
        log_p1 = -x ** 2 / (2 * sigma ** 2)
        log_p1 -= np.log(np.exp(log_p1).sum())
        log_q1 = -(x - 1.0) ** 2 / (2 * sigma ** 2)
        log_q1 -= np.log(np.exp(log_q1).sum())
        log_q2 = log_q1[::-1]  # shifted by -1
        p = np.exp(log_p1[:, None] + log_p1[None, :])
        q = np.exp(log_q1[:, None] + log_q2[None, :])

        def exact_delta(e):
            return max(np.clip(p - np.exp(e) * q, 0, None).sum(), np.clip(q - np.exp(e) * p, 0, None).sum())

        assert exact_delta(eps) <= delta * (1 + 1e-6)
        assert exact_delta(0.99 * eps) > delta  # tight: one percent less would not hold


def test_binned_drift_matches_sorted_ranks():
    g = torch.Generator().manual_seed(7)
    x = torch.nn.functional.normalize(torch.randn(4000, 5, generator=g, dtype=torch.float64), dim=1)
    theta = random_directions(6, 5, generator=g, dtype=torch.float64)
    target = torch.sort(torch.randn(6, 300, generator=g, dtype=torch.float64) * 0.3, dim=1).values
    exact = sampled_drift(theta.T @ x.T, target, theta).drift
    binned = binned_drift(x, target, theta).drift
    # one grid cell holds ~4000 * 2/4096 / (spread) particles: levels move by < 1e-3, the drift by less
    assert float((exact - binned).abs().max()) < 5e-3
    assert float((exact - binned).abs().mean()) < 5e-4


def test_flow_reaches_a_two_cluster_target():
    # Noise-free histogram flow on the circle: lands near the target; at eps = 5 it stays well below uniform.
    g = torch.Generator().manual_seed(8)
    centres = torch.tensor([[1.0, 0.0], [-0.6, 0.8]], dtype=torch.float32)
    rows = torch.nn.functional.normalize(centres[torch.randint(0, 2, (6000,), generator=g)]
                                         + 0.15 * torch.randn(6000, 2, generator=g), dim=1)
    held_out = torch.nn.functional.normalize(centres[torch.randint(0, 2, (3000,), generator=g)]
                                             + 0.15 * torch.randn(3000, 2, generator=g), dim=1)
    uniform = torch.nn.functional.normalize(torch.randn(3000, 2, generator=g), dim=1)
    proj = random_directions(200, 2, generator=g)
    sw = lambda a: float(sliced_wasserstein(a, held_out, projections=proj))  # noqa: E731
    floor = sw(rows[:3000])
    for eps in (math.inf, 5.0):
        flow = make_flow("dpswflow-hist", rows, privacy=PrivacySpec(epsilon=eps, delta=1e-5, count_noise="gaussian"),
                         n_projections=8, privacy_seed=0, progress=False,
                         config=FlowConfig(steps=150, n_particles=3000, manifold="sphere", step_size=1.0))
        score = sw(flow.run().particles)
        assert score < (3 * floor if math.isinf(eps) else 0.25 * sw(uniform)), (eps, score, floor)


def test_default_shape_rule_reads_only_public_quantities():
    spec = PrivacySpec(epsilon=1.0, delta=1e-6)
    small, large = H.histogram_shape(dataset_size=1500, privacy=spec), H.histogram_shape(dataset_size=30_000, privacy=spec)
    assert small[0] <= large[0] and small[1] <= large[1]
    assert H.histogram_shape(dataset_size=1500, privacy=spec, n_directions=100, bins=7) == (100, 7)
    with pytest.raises(ValueError, match="at least 2 bins"):
        H.histogram_shape(dataset_size=1500, privacy=spec, bins=1)


def test_rows_on_disk_give_the_counts_and_flow_of_rows_in_memory(tmp_path):
    # dpswflow-hist reads an HDF5 file in chunks (larger than memory is fine): counts identical to the
    # in-memory path with a tiny chunk size, and the same flow
    import h5py

    from swflow.privacy.rows import StreamedRows

    rows = torch.nn.functional.normalize(torch.randn(2001, 4, generator=torch.Generator().manual_seed(9)), dim=1) * 0.9
    with h5py.File(tmp_path / "rows.h5", "w") as f:
        f["data"] = rows.numpy()
    spec = PrivacySpec(epsilon=2.0, delta=1e-5, count_noise="gaussian")
    config = FlowConfig(steps=10, n_particles=200)
    flows = [make_flow("dpswflow-hist", data, privacy=spec, config=config, n_projections=8, pool_size=32, bins=16,
                       privacy_seed=3, progress=False)
             for data in (rows, StreamedRows(tmp_path / "rows.h5", chunk_rows=7))]
    results = [flow.run() for flow in flows]
    # the same seeded noise on both: equal noisy counts mean equal exact counts
    assert torch.equal(flows[0].target.released_counts, flows[1].target.released_counts)
    assert torch.equal(results[0].particles, results[1].particles)


def test_a_row_outside_the_ball_in_a_late_chunk_is_refused_before_any_release(tmp_path):
    import h5py

    from swflow.privacy.rows import StreamedRows

    rows = torch.nn.functional.normalize(torch.randn(500, 3, generator=torch.Generator().manual_seed(10)), dim=1)
    rows[470] *= 3.0
    with h5py.File(tmp_path / "rows.h5", "w") as f:
        f["data"] = rows.numpy()
    flow = make_flow("dpswflow-hist", StreamedRows(tmp_path / "rows.h5", chunk_rows=100),
                     privacy=PrivacySpec(epsilon=2.0, delta=1e-4), config=FlowConfig(steps=2), n_projections=4,
                     progress=False)
    with pytest.raises(ValueError, match="rows from 400 on .* norm above R"):
        flow.run()
    assert len(flow.target.ledger) == 0  # nothing was released
