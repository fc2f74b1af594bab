import pytest
import torch


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


def five_gaussians(n: int, generator: torch.Generator, *, std: float = 0.2) -> torch.Tensor:
    centers = torch.tensor([[0.0, 0.0], [2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])
    idx = torch.randint(0, 5, (n,), generator=generator)
    return centers[idx] + std * torch.randn(n, 2, generator=generator)
