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


def _paid_example(n: int = 1500):
    """(frame, schema JSON): swflow's example table with a log-normal ``pay`` column, whose repeated values the
    repeated-values release names (a run with values, trees and pair tables)."""
    import numpy as np

    from swflow.tables.example import example_table

    frame, schema = example_table(n, seed=4)
    frame["pay"] = np.round(np.random.default_rng(1).lognormal(7, 1, n))
    columns = schema.to_json()["columns"] + [{"name": "pay", "type": "numeric", "min": 0, "max": 100000}]
    return frame, {"columns": columns}


@pytest.fixture
def paid_example():
    """The function ``_paid_example(n)``: (frame, schema JSON) of n rows."""
    return _paid_example


@pytest.fixture(scope="session")
def saved_table_runs(tmp_path_factory):
    """{adjacency: (the fitted TableSynthesizer, the blob of its saved model.pt)} on ``_paid_example()`` at ε = 1, for
    replace-one and add-remove: repeated values, trees, pair tables [and the count of records]. Read-only: copy a
    blob before editing it."""
    from swflow.pipeline.tables import TableSynthesizer

    frame, schema = _paid_example()
    out = {}
    for adjacency in ("replace-one", "add-remove"):
        syn = TableSynthesizer(schema=schema, epsilon=1.0, delta=1e-9, adjacency=adjacency, count_noise="gaussian",
                               steps=20, privacy_seed=5).fit(frame)
        path = syn.save(tmp_path_factory.mktemp(adjacency) / "model.pt")
        out[adjacency] = syn, torch.load(path, weights_only=True)
    return out
