"""A finished flow run as a sampler: what model.h5 holds, determinism, no privacy spent, quality."""
import json

import h5py
import numpy as np
import pytest
import torch

from swflow.kernels.sliced import sliced_wasserstein
from swflow.methods.model import FlowModel
from swflow.pipeline.run import run_flow_to_dir
from swflow.pipeline.settings import from_keywords


def _mixture(n, seed):
    g = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[0.5, 0.0], [-0.5, 0.0], [0.0, 0.5]])
    return centres[torch.randint(0, 3, (n,), generator=g)] + 0.08 * torch.randn(n, 2, generator=g)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    data = _mixture(1500, 0)
    settings = from_keywords("dpswflow-r", epsilon=20.0, delta=1e-5, steps=60, n_particles=1000, step_size=1.0,
                             checkpoint_every=20, seed=0, n_projections=30, batch_size=300, privacy_seed=0)
    result = run_flow_to_dir(settings, data, out, progress=False)
    return out, data, result.particles


def test_model_file_holds_no_private_row_and_no_clean_projection(finished_run):
    out, data, _ = finished_run
    rows = data.numpy().astype(np.float32)
    with h5py.File(out / "model.h5") as f:
        assert set(f.keys()) == {"steps", "theta", "released", "sigma"}
        theta, released = f["theta"][:], f["released"][:]
        private = {row.tobytes() for row in rows}
        for name in f:
            values = np.asarray(f[name][:], dtype=np.float32).reshape(-1)
            # no private row appears as any run of d consecutive stored values
            windows = np.lib.stride_tricks.sliding_window_view(values, rows.shape[1])
            assert not any(w.tobytes() in private for w in windows), name
    # the sketches are of noisy values: none equals an un-noised projection of a private row
    for t in range(0, len(theta), 7):
        clean = rows @ theta[t]  # (m, k)
        gap = np.abs(released[t][:, :, None] - clean.T[:, None, :]).min()
        assert gap > 1e-7


def test_sample_is_deterministic_and_spends_nothing(finished_run):
    out, _, _ = finished_run
    before = (out / "privacy.json").read_bytes()
    model = FlowModel.from_run_dir(out)
    a, b, c = model.sample(200, seed=3), model.sample(200, seed=3), model.sample(200, seed=4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert (out / "privacy.json").read_bytes() == before
    report = model.privacy_report().to_json()
    assert report["epsilon"] == json.loads(before)["epsilon"] and "post-processing" in report["post_processing"]


@pytest.mark.parametrize("n", [100, 1000, 10_000])
def test_resampled_particles_are_as_good_as_the_original(finished_run, n):
    out, _, original = finished_run
    held_out = _mixture(3000, 99).double()
    sw = lambda x: float(sliced_wasserstein(x.double(), held_out, n_projections=500,  # noqa: E731
                                            generator=torch.Generator().manual_seed(0)))
    new = FlowModel.from_run_dir(out).sample(n, seed=7)
    # stated tolerance: within 25% + 0.01 of the original run's distance (sampling noise of small n included)
    assert sw(new) <= 1.25 * sw(original) + 0.01 + 0.3 / np.sqrt(n)


def test_unfinished_run_is_refused(tmp_path):
    data = _mixture(300, 1)
    settings = from_keywords("swf", steps=10, n_particles=100, checkpoint_every=5, seed=0, n_projections=10,
                             batch_size=len(data))
    run_flow_to_dir(settings, data, tmp_path, progress=False)
    with h5py.File(tmp_path / "model.h5", "a") as f:
        for name in ("steps", "theta", "released", "sigma"):
            f[name].resize(5, axis=0)
    with pytest.raises(ValueError, match="did not finish"):
        FlowModel.from_run_dir(tmp_path)
    with pytest.raises(FileNotFoundError, match="model.h5"):
        FlowModel.from_run_dir(tmp_path / "nothing")
