import numpy as np
import ot
import pytest
import torch
from scipy.stats import wasserstein_distance

from swflow.kernels.sliced import (cdf, quantile, random_directions, sliced_wasserstein, smoothed_sliced_wasserstein,
                                   transport_1d, wasserstein_1d)


def test_directions_unit_uniform_and_seeded():
    a = random_directions(20000, 3, generator=torch.Generator().manual_seed(0))
    b = random_directions(20000, 3, generator=torch.Generator().manual_seed(0))
    assert a.shape == (3, 20000) and torch.equal(a, b)
    assert torch.allclose(a.norm(dim=0), torch.ones(20000), atol=1e-6)
    # uniform on S^2: mean 0 (std of each coordinate mean = sqrt(1/3/20000) ≈ 0.004)
    assert a.mean(dim=1).abs().max() < 0.02
    # and each coordinate is uniform on [-1, 1] (Archimedes): E[x²] = 1/3
    assert abs(float(a[0].square().mean()) - 1 / 3) < 0.01


@pytest.mark.parametrize("n,m", [(7, 7), (13, 29), (100, 3), (1, 5)])
def test_w1_matches_scipy_unequal_sizes(n, m, gen):
    u = torch.randn(1, n, generator=gen, dtype=torch.float64)
    v = 2 * torch.rand(1, m, generator=gen, dtype=torch.float64) + 0.3
    ours = float(wasserstein_1d(u, v, p=1)[0])
    assert ours == pytest.approx(wasserstein_distance(u[0].numpy(), v[0].numpy()), rel=1e-10)


@pytest.mark.parametrize("n,m", [(50, 50), (40, 70)])
def test_w2_matches_pot_batched(n, m, gen):
    u = torch.randn(5, n, generator=gen, dtype=torch.float64)
    v = torch.randn(5, m, generator=gen, dtype=torch.float64) * 2 + 1
    ours = wasserstein_1d(u, v, p=2).numpy()
    theirs = np.array([ot.wasserstein_1d(u[i].numpy(), v[i].numpy(), p=2) for i in range(5)])
    np.testing.assert_allclose(ours, theirs, rtol=1e-10)


def test_w2_closed_form_shift():
    u = torch.linspace(-1, 1, 101, dtype=torch.float64)[None]
    assert float(wasserstein_1d(u, u + 0.7, p=2)) == pytest.approx(0.49, rel=1e-12)


def test_sliced_matches_pot_on_same_directions(gen):
    x = torch.randn(300, 5, generator=gen, dtype=torch.float64)
    y = torch.randn(200, 5, generator=gen, dtype=torch.float64) + 0.5
    theta = random_directions(64, 5, generator=gen, dtype=torch.float64)
    ours = float(sliced_wasserstein(x, y, projections=theta))
    theirs = ot.sliced_wasserstein_distance(x.numpy(), y.numpy(), projections=theta.numpy())
    assert ours == pytest.approx(float(theirs), rel=1e-9)
    assert float(sliced_wasserstein(x, x, projections=theta)) == 0.0


def test_quantile_and_cdf_are_inverse(gen):
    s = torch.randn(4, 37, generator=gen, dtype=torch.float64).sort(dim=1).values
    levels = torch.rand(4, 100, generator=gen, dtype=torch.float64) * (1 - 1 / 37) + 0.5 / 37
    assert torch.allclose(cdf(s, quantile(s, levels)), levels, atol=1e-12)
    # the order statistics sit at levels (i + 1/2)/m
    assert torch.allclose(quantile(s, (torch.arange(37, dtype=torch.float64) + 0.5) / 37), s)


def test_transport_1d_equal_sizes_matches_sorted_pairs(gen):
    src = torch.randn(3, 50, generator=gen, dtype=torch.float64)
    tgt = torch.randn(3, 50, generator=gen, dtype=torch.float64) * 3 - 1
    src_sorted, tgt_sorted = src.sort(dim=1).values, tgt.sort(dim=1).values
    mapped = transport_1d(src_sorted, tgt_sorted, src_sorted)
    assert torch.allclose(mapped, tgt_sorted)


def test_smoothed_sw_gaussian_closed_form(gen):
    # In 1-D, W2²(N(a, s1²+σ²), N(b, s2²+σ²)) = (a−b)² + (√(s1²+σ²) − √(s2²+σ²))².
    a, s1, b, s2, sigma = 0.0, 1.0, 2.0, 0.5, 0.8
    n = 400_000
    x = a + s1 * torch.randn(n, 1, generator=gen, dtype=torch.float64)
    y = b + s2 * torch.randn(n, 1, generator=gen, dtype=torch.float64)
    theta = torch.ones(1, 1, dtype=torch.float64)
    got = float(smoothed_sliced_wasserstein(x, y, noise_std=sigma, projections=theta, generator=gen))
    exact = ((a - b) ** 2 + ((s1**2 + sigma**2) ** 0.5 - (s2**2 + sigma**2) ** 0.5) ** 2) ** 0.5
    assert got == pytest.approx(exact, abs=0.01)  # Monte-Carlo error ~ 1e-3 at this n
    assert float(smoothed_sliced_wasserstein(x, y, noise_std=0.0, projections=theta)) == \
        pytest.approx(float(sliced_wasserstein(x, y, projections=theta)))


def test_bad_inputs():
    with pytest.raises(ValueError, match="dimension mismatch"):
        sliced_wasserstein(torch.zeros(3, 2), torch.zeros(3, 4), n_projections=3)
    with pytest.raises(ValueError, match="n_projections must be >= 1"):
        random_directions(0, 3)
    with pytest.raises(ValueError, match="empty"):
        wasserstein_1d(torch.zeros(1, 0), torch.zeros(1, 3))
