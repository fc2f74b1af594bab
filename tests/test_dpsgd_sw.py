"""Clipped DP-SW-gradient generator (000/001): R-weights, exact gradients, sensitivity, privacy, learning."""
import numpy as np
import pytest
import torch
from scipy.stats import wasserstein_distance

from swflow.kernels.sliced import sliced_wasserstein
from swflow.methods.generators.dpsgd_sw import (ClippedGradientConfig, gradient_sensitivity, make_dpsgd_sw_gen,
                                                r_weights, w2_gradient_source)
from swflow.privacy import PrivacySpec, ReleasePlan, calibrate


def test_r_weights_closed_form_and_marginals():
    torch.testing.assert_close(r_weights(5, 5), torch.eye(5, dtype=torch.float64) / 5)
    r = r_weights(4, 6)
    torch.testing.assert_close(r.sum(1), torch.full((4,), 1 / 4, dtype=torch.float64))
    torch.testing.assert_close(r.sum(0), torch.full((6,), 1 / 6, dtype=torch.float64))
    assert r[0, 0] == pytest.approx(1 / 6) and r[0, 1] == pytest.approx(1 / 4 - 1 / 6) and r[0, 2] == 0


def test_prop_3_1_and_gradient_match_scipy():
    rng = np.random.default_rng(0)
    u, v = rng.normal(size=7), rng.normal(size=5) + 0.3
    # Prop 3.1: sum_ij R[rank u_i, rank v_j] (u_i - v_j)^2 is W2^2 (scipy computes W2 from the quantile functions)
    r = r_weights(7, 5).numpy()
    su, sv = np.argsort(np.argsort(u)), np.argsort(np.argsort(v))
    w2 = sum(r[su[i], sv[j]] * (u[i] - v[j]) ** 2 for i in range(7) for j in range(5))
    grid = np.linspace(0, 1, 200001)[1:-1]
    w2_scipy = np.mean((np.quantile(u, grid, method="inverted_cdf") - np.quantile(v, grid, method="inverted_cdf")) ** 2)
    assert w2 == pytest.approx(w2_scipy, rel=1e-3)
    assert np.sqrt(w2) >= wasserstein_distance(u, v) - 1e-12  # W2 >= W1
    # Prop 3.2 against central finite differences of W2^2 (ranks fixed for a small step)
    grad = w2_gradient_source(torch.tensor(u)[None], torch.tensor(v)[None])[0].numpy()

    def w2_of(vv):
        svv = np.argsort(np.argsort(vv))
        return sum(r[su[i], svv[j]] * (u[i] - vv[j]) ** 2 for i in range(7) for j in range(5))

    for j in range(5):
        e = np.zeros(5); e[j] = 1e-6
        assert grad[j] == pytest.approx((w2_of(v + e) - w2_of(v - e)) / 2e-6, rel=1e-5, abs=1e-8)


def _rows(n, seed=0):
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True)


def test_released_gradient_sensitivity_holds_for_neighbours():
    """Replace one row of the batch: the (noise-free) gradient moves by at most 4 max(M,R) L / b."""
    config = ClippedGradientConfig(steps=1, jacobian_clip=0.5, activation_clip=1.0)
    gen = make_dpsgd_sw_gen(_rows(40).float(), privacy=PrivacySpec(epsilon=float("inf")), config=config,
                            n_projections=20, batch_size=40)
    z = torch.randn(30, config.noise_dim, generator=torch.Generator().manual_seed(1))
    theta = torch.nn.functional.normalize(torch.randn(3, 20, generator=torch.Generator().manual_seed(2)), dim=0)
    h, jac, clip = gen.clipped_jacobians(z)
    jac = jac * clip[:, None, None]
    assert (torch.linalg.matrix_norm(jac, ord=2) <= 0.5).all()  # an SVD checks the Gram-eigenvalue norm
    v = theta.T @ h.T

    def gradient(batch):
        a = w2_gradient_source(theta.T @ batch.T, v).T @ theta.T / 20
        return torch.einsum("mdp,md->p", jac, a)

    batch = _rows(40).float()
    bound = gradient_sensitivity(activation_clip=1.0, jacobian_clip=0.5, norm_bound=1.0, batch_size=40).value
    worst = 0.0
    for seed in range(200):
        other = batch.clone()
        other[seed % 40] = _rows(1, seed + 100)[0].float() * (seed % 3 != 0)  # also the zero row
        worst = max(worst, float((gradient(batch) - gradient(other)).norm()))
    assert 0 < worst <= bound


def test_epsilon_equals_privacy_package_and_generator_learns():
    rng = np.random.default_rng(0)
    centres = np.array([[1.0, 0, 0], [0, 1.0, 0]])
    data = centres[rng.integers(0, 2, 600)] + 0.05 * rng.normal(size=(600, 3))
    data = torch.tensor(data / np.linalg.norm(data, axis=1, keepdims=True), dtype=torch.float32)
    spec = PrivacySpec(epsilon=8.0, delta=1e-5)
    config = ClippedGradientConfig(steps=150, lr=3e-3, jacobian_clip=1.0, seed=0)
    gen = make_dpsgd_sw_gen(data, privacy=spec, config=config, n_projections=20, batch_size=100, privacy_seed=0)
    before = float(sliced_wasserstein(gen.sample(600, seed=5).double(), data.double(), n_projections=200,
                                      generator=torch.Generator().manual_seed(0)))
    gen.fit(progress=False)
    after = float(sliced_wasserstein(gen.sample(600, seed=5).double(), data.double(), n_projections=200,
                                     generator=torch.Generator().manual_seed(0)))
    expected = calibrate(spec, ReleasePlan(releases=150, dataset_size=600, sample_size=100, n_projections=20, dim=3))
    assert gen.target.epsilon_spent() == pytest.approx(expected.epsilon, rel=1e-9) and expected.epsilon <= 8.0
    assert gen.target.ledger.releases == 150
    assert after < 0.7 * before
    assert torch.allclose(gen.sample(50).norm(dim=1), torch.ones(50), atol=1e-5)  # on the sphere
    with pytest.raises(ValueError, match="replace-one"):
        make_dpsgd_sw_gen(data, privacy=PrivacySpec(epsilon=8.0, adjacency="zero-out"), config=config,
                          n_projections=20, batch_size=100)
