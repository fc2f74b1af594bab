import json

import h5py
import pytest
import torch

from swflow import sliced_wasserstein
from swflow.baselines import GeneratorConfig, make_dpswgen
from swflow.cli import main
from swflow.privacy import PrivacySpec, ReleasePlan, calibrate


def _cap(n, gen):
    return torch.nn.functional.normalize(torch.randn(n, 3, generator=gen) * 0.3 + torch.tensor([1.0, 0, 0]), dim=1)


def test_dpswgen_lowers_sw_stays_on_sphere_and_is_accounted_like_dpswflow_r(gen):
    y, held_out = _cap(3000, gen), _cap(3000, gen)
    theta = torch.nn.functional.normalize(torch.randn(3, 500, generator=gen), dim=0)
    spec = PrivacySpec(epsilon=10.0, delta=1e-5)
    model = make_dpswgen(y, privacy=spec, config=GeneratorConfig(steps=200), n_projections=20, batch_size=250,
                         privacy_seed=0)
    before = float(sliced_wasserstein(model.sample(3000), held_out, projections=theta))
    model.fit(progress=False)
    samples = model.sample(3000, seed=1)
    assert torch.allclose(samples.norm(dim=1), torch.ones(3000), atol=1e-5)
    assert float(sliced_wasserstein(samples, held_out, projections=theta)) < 0.5 * before
    assert torch.equal(model.sample(10, seed=4), model.sample(10, seed=4))
    # same shape as a DPSWflow-r run: the privacy package's figure
    plan = ReleasePlan(releases=200, dataset_size=3000, sample_size=250, n_projections=20, dim=3)
    assert model.target.ledger.releases == 200
    assert model.target.epsilon_spent() == pytest.approx(calibrate(spec, plan).epsilon)


def test_generate_dpswgen_writes_outputs(tmp_path):
    out = tmp_path / "gen"
    assert main(["generate", "--dataset", "digits", "--method", "dpswgen", "--epsilon", "8", "--delta", "1e-5",
                 "--steps", "30", "--batch-size", "200", "--n-projections", "16", "--n-particles", "120",
                 "--out", str(out)]) == 0
    report = json.loads((out / "privacy.json").read_text())
    assert report["method"] == "dpswgen" and report["steps"] == 30 and report["epsilon"] <= 8.0
    with h5py.File(out / "samples.h5") as f:
        assert f["latents"].shape == (120, 8) and f["images"].shape == (120, 1, 8, 8)
    assert (out / "samples.png").exists()
