import os

# The suite's own choice, as the swflow command makes it (the library never does): idle OpenMP threads sleep
# rather than spin, so the suite and the subprocesses it starts share a busy machine fairly.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# `make test` runs two xdist workers on the two cores: one thread each (and in the processes they start),
# so the workers share the cores instead of each spreading over both
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture
def gen():
    return torch.Generator().manual_seed(1234)


def five_gaussians(n: int, generator: torch.Generator, *, std: float = 0.2) -> torch.Tensor:
    centers = torch.tensor([[0.0, 0.0], [2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])
    idx = torch.randint(0, 5, (n,), generator=generator)
    return centers[idx] + std * torch.randn(n, 2, generator=generator)
