import pytest
import torch

from swflow.drift import clip_rows, smoothed_drift
from swflow.sliced import project, random_directions, sort_rows


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
    result = smoothed_drift(project(y, theta), target, theta)
    assert result.drift.abs().max() < 1e-6 and float(result.projected_w2) < 1e-6


def test_drift_of_a_translation_closed_form(gen):
    # Particles = target + c: on every direction the displacement is −⟨c, θ⟩, so
    # v = −(1/k) Θ Θᵀ c for every particle.
    y = torch.randn(500, 3, generator=gen, dtype=torch.float64)
    c = torch.tensor([0.3, -1.0, 0.5], dtype=torch.float64)
    theta = random_directions(25, 3, generator=gen, dtype=torch.float64)
    target = project(y, theta).sort(dim=1).values
    result = smoothed_drift(project(y + c, theta), target, theta)
    expected = -(theta @ theta.T @ c) / 25
    assert torch.allclose(result.drift, expected.expand(500, -1), atol=1e-10)


def test_float32_and_float64_agree(gen):
    x = torch.randn(2000, 8, generator=gen, dtype=torch.float64)
    y = torch.randn(250, 8, generator=gen, dtype=torch.float64) * 0.5 + 1
    theta = random_directions(70, 8, generator=gen, dtype=torch.float64)
    p, t = project(x, theta), project(y, theta).sort(dim=1).values
    d64 = smoothed_drift(p, t, theta).drift
    d32 = smoothed_drift(p.float(), t.float(), theta.float()).drift
    assert torch.allclose(d32.double(), d64, atol=1e-4)


def test_clip_rows():
    x = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    out = clip_rows(x, 1.0)
    assert torch.allclose(out.norm(dim=1), torch.tensor([1.0, 0.5]))
