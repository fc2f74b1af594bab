import numpy as np
import pytest
import torch
from scipy.stats import norm

from swflow.kernels.drift import clip_rows, exact_smoothed_drift, grid_spacing_ratio, sampled_drift
from swflow.kernels.sliced import project, random_directions, sort_rows


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sort_rows_is_a_sort(dtype, gen):
    x = torch.randn(9, 5001, generator=gen, dtype=dtype)
    x[0, :100] = 0.25  # ties
    values, order = sort_rows(x)
    assert torch.equal(values, x.sort(dim=1).values)
    assert torch.equal(x.gather(1, order), values)
    assert torch.equal(order.sort(dim=1).values, torch.arange(5001).expand(9, -1))


def test_drift_zero_when_particles_equal_target(gen):
    y = torch.randn(300, 4, generator=gen)
    theta = random_directions(40, 4, generator=gen)
    target = project(y, theta).sort(dim=1).values
    result = sampled_drift(project(y, theta), target, theta)
    assert result.drift.abs().max() < 1e-6 and float(result.projected_w2) < 1e-6


def test_drift_of_a_translation_closed_form(gen):
    # Particles = target + c: on every direction the displacement is −⟨c, θ⟩, so
    # v = −(1/k) Θ Θᵀ c for every particle.
    y = torch.randn(500, 3, generator=gen, dtype=torch.float64)
    c = torch.tensor([0.3, -1.0, 0.5], dtype=torch.float64)
    theta = random_directions(25, 3, generator=gen, dtype=torch.float64)
    target = project(y, theta).sort(dim=1).values
    result = sampled_drift(project(y + c, theta), target, theta)
    expected = -(theta @ theta.T @ c) / 25
    assert torch.allclose(result.drift, expected.expand(500, -1), atol=1e-10)


def test_float32_and_float64_agree(gen):
    x = torch.randn(2000, 8, generator=gen, dtype=torch.float64)
    y = torch.randn(250, 8, generator=gen, dtype=torch.float64) * 0.5 + 1
    theta = random_directions(70, 8, generator=gen, dtype=torch.float64)
    p, t = project(x, theta), project(y, theta).sort(dim=1).values
    d64 = sampled_drift(p, t, theta).drift
    d32 = sampled_drift(p.float(), t.float(), theta.float()).drift
    assert torch.allclose(d32.double(), d64, atol=1e-4)
    e64 = exact_smoothed_drift(x, t, theta, noise_std=0.3).drift
    e32 = exact_smoothed_drift(x.float(), t.float(), theta.float(), noise_std=0.3).drift
    assert torch.allclose(e32.double(), e64, atol=1e-4)


def _quadrature_displacement(p: np.ndarray, target_sorted: np.ndarray, sigma: float, at: np.ndarray) -> np.ndarray:
    """E_z Q(F(at + z)) − at by dense trapezoid quadrature over z ∈ [−9σ, 9σ], with the smoothed CDF
    F(t) = mean_l Φ((t − p_l)/σ) summed exactly (scipy) and Q the piecewise-linear quantile through
    the order statistics at levels (i + 1/2)/m (numpy's interp clamps outside, as the flow does)."""
    m = target_sorted.size
    z = np.linspace(-9 * sigma, 9 * sigma, 2401)  # step 0.0075σ: trapezoid error far below the tolerance
    weights = norm.pdf(z, scale=sigma)
    weights /= np.trapezoid(weights, z)
    s = at[:, None] + z[None, :]
    cdf = norm.cdf((s[..., None] - p[None, None, :]) / sigma).mean(axis=-1)
    q = np.interp(cdf, (np.arange(m) + 0.5) / m, target_sorted)
    return np.trapezoid(q * weights, z, axis=1) - at


@pytest.mark.parametrize("relative_sigma", [0.01, 0.1, 0.5, 1.0, 3.0, 10.0])
def test_exact_smoothing_matches_quadrature(relative_sigma, gen):
    # particles: a skewed two-bump sample; target: a shifted, narrower one (spread ≈ 1)
    n, m = 400, 90
    x = torch.cat([torch.randn(n // 2, 1, generator=gen, dtype=torch.float64) * 0.4 - 0.8,
                   torch.randn(n - n // 2, 1, generator=gen, dtype=torch.float64) * 0.9 + 0.7])
    y = torch.randn(m, 1, generator=gen, dtype=torch.float64) * 0.6 + 0.3
    theta = torch.ones(1, 1, dtype=torch.float64)
    spread = float(x.std())
    sigma = relative_sigma * spread
    p, t = project(x, theta), project(y, theta).sort(dim=1).values
    got = exact_smoothed_drift(x, t, theta, noise_std=sigma).drift[:, 0].numpy()
    pick = np.arange(0, n, 16)
    ref = _quadrature_displacement(p[0].numpy(), t[0].numpy(), sigma, p[0].numpy()[pick])
    # tolerance: 2e-3 of the data spread (the documented O((Δ/σ)²) bound at Δ = σ/12 is ~1e-3 here)
    assert np.abs(got[pick] - ref).max() < 2e-3 * spread


def test_exact_smoothing_is_the_mean_of_the_sampled_estimator(gen):
    # Monte Carlo: the average of many one-draw drifts converges to the exact expectation.
    x = torch.randn(300, 3, generator=gen, dtype=torch.float64)
    y = torch.randn(200, 3, generator=gen, dtype=torch.float64) * 0.5 + 0.4
    theta = random_directions(6, 3, generator=gen, dtype=torch.float64)
    sigma = 0.7
    p, t = project(x, theta), project(y, theta).sort(dim=1).values
    exact = exact_smoothed_drift(x, t, theta, noise_std=sigma).drift
    draws = 4000
    total = torch.zeros_like(exact)
    for _ in range(draws):
        total += sampled_drift(p + sigma * torch.randn(p.shape, generator=gen, dtype=p.dtype), t, theta).drift
    mc = total / draws
    # the one-draw drift has per-coordinate std below ~1 here: 6 standard errors = 6/sqrt(4000) ≈ 0.095
    assert (mc - exact).abs().max() < 0.1
    assert (mc - exact).abs().mean() < 0.02


def test_at_the_target_exact_smoothing_adds_no_scatter(gen):
    # Particles already distributed as the data; one step's release: 250 rows' projections plus
    # N(0, σ²) with σ ≫ the data's spread (the private regime). The one-draw drift reads the
    # release's quantile error (∝ σ/√b) at an independent level for every particle: it scatters
    # the particles (the extra diffusion of issue 14). The exact drift averages over levels and
    # moves all particles nearly alike. Measured at this seed: scatter 0.004 vs 0.117.
    x = torch.randn(3000, 4, generator=gen, dtype=torch.float64) * 0.3
    y = torch.randn(250, 4, generator=gen, dtype=torch.float64) * 0.3
    theta = random_directions(20, 4, generator=gen, dtype=torch.float64)
    sigma = 5.0
    released = (project(y, theta) + sigma * torch.randn(20, 250, generator=gen, dtype=torch.float64)).sort(dim=1).values
    exact = exact_smoothed_drift(x, released, theta, noise_std=sigma).drift
    noisy = project(x, theta) + sigma * torch.randn(20, 3000, generator=gen, dtype=torch.float64)
    sampled = sampled_drift(noisy, released, theta).drift

    def scatter(drift):
        return float((drift - drift.mean(dim=0)).norm(dim=1).pow(2).mean().sqrt())

    assert scatter(exact) < 0.015 and scatter(sampled) > 0.06


def test_exact_smoothing_grid_resolution():
    points, ratio = grid_spacing_ratio(2.0, 0.5)
    assert ratio >= 12 and points >= 256
    points, ratio = grid_spacing_ratio(100.0, 1e-4)  # beyond the cap: coarser, and it says so
    assert points == 1 << 15 and ratio < 12


def test_exact_smoothing_refuses_zero_sigma(gen):
    p = torch.randn(2, 10, generator=gen)
    with pytest.raises(ValueError, match="sorting"):
        exact_smoothed_drift(p.T, p.sort(dim=1).values, torch.eye(2), noise_std=0.0)


def test_clip_rows():
    x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    out = clip_rows(x, 1.0)
    assert torch.allclose(out.norm(dim=1), torch.tensor([1.0, 0.5]))
