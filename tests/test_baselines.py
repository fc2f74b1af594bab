import json
import math

import h5py
import ot
import pytest
import torch

from swflow import sliced_wasserstein
from swflow.cli import main
from swflow.methods.generators import GeneratorConfig, SinkhornConfig, make_dpswgen, make_ldp_sinkhorn_gen
from swflow.privacy import PrivacySpec, ReleasePlan, analytic_gaussian_epsilon, calibrate


def _cap(n, gen):
    return torch.nn.functional.normalize(torch.randn(n, 3, generator=gen) * 0.3 + torch.tensor([1.0, 0, 0]), dim=1)


def test_dpswgen_lowers_sw_stays_on_sphere_and_is_accounted_like_dpswflow_r(gen):
    y, held_out = _cap(3000, gen), _cap(3000, gen)
    theta = torch.nn.functional.normalize(torch.randn(3, 500, generator=gen), dim=0)
    spec = PrivacySpec(epsilon=10.0, delta=1e-5)
    model = make_dpswgen(y, privacy=spec, config=GeneratorConfig(steps=60), n_projections=20, batch_size=250,
                         privacy_seed=0)
    before = float(sliced_wasserstein(model.sample(3000), held_out, projections=theta))
    model.fit(progress=False)
    samples = model.sample(3000, seed=1)
    assert torch.allclose(samples.norm(dim=1), torch.ones(3000), atol=1e-5)
    assert float(sliced_wasserstein(samples, held_out, projections=theta)) < 0.5 * before
    assert torch.equal(model.sample(10, seed=4), model.sample(10, seed=4))
    # same shape as a DPSWflow-r run: the privacy package's figure
    plan = ReleasePlan(releases=60, dataset_size=3000, sample_size=250, n_projections=20, dim=3)
    assert model.target.ledger.releases == 60
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


def _half_circle(n, gen):
    t = torch.rand(n, generator=gen) * math.pi
    return torch.stack([torch.cos(t), torch.sin(t)], 1) * 0.9 + 0.01 * torch.randn(n, 2, generator=gen)


def _w2(a, b):
    w = lambda n: torch.full((n,), 1.0 / n, dtype=torch.float64)  # noqa: E731
    return float(ot.emd2(w(len(a)), w(len(b)), ot.dist(a.double(), b.double()))) ** 0.5


def test_ldp_sinkhorn_gen_releases_once_and_learns(gen):
    y, held_out = _half_circle(1000, gen), _half_circle(500, gen)
    spec = PrivacySpec(noise_multiplier=0.1, delta=1e-5)  # σ = 0.2: small against the radius 0.9
    model = make_ldp_sinkhorn_gen(y, privacy=spec, privacy_seed=0,
                                  config=SinkhornConfig(steps=60, batch_size=64, on_sphere=False))
    before = _w2(model.sample(500), held_out)
    model.fit(progress=False)
    assert model.target.ledger.releases == 1
    assert model.target.epsilon_spent() == pytest.approx(
        analytic_gaussian_epsilon(noise_multiplier=0.1, delta=model.target.calibration.delta_accountant))
    assert model.regularization == pytest.approx(2 * model.target.local_noise_std ** 2)
    assert _w2(model.sample(500, seed=1), held_out) < before


@pytest.mark.slow
def test_matched_entropic_beats_unregularized_on_half_circle(gen):
    # 002 §IV-A: from Gaussian-privatized samples, the entropic loss with λ = 2σ² recovers the clean
    # half-circle better (in W2) than the unregularized OT loss, which fits the noisy data.
    y, held_out = _half_circle(2000, gen), _half_circle(1000, gen)
    result = {}
    for loss in ("entropic", "wasserstein"):
        model = make_ldp_sinkhorn_gen(y, privacy=PrivacySpec(noise_multiplier=0.1, delta=1e-5), privacy_seed=0,
                                      config=SinkhornConfig(steps=400, loss=loss, on_sphere=False))
        result[loss] = _w2(model.fit(progress=False).sample(1000, seed=1), held_out)
    assert result["entropic"] < result["wasserstein"]


def test_generate_ldp_sinkhorn_gen(tmp_path):
    out = tmp_path / "ls"
    assert main(["generate", "--dataset", "digits", "--method", "ldp-sinkhorn-gen", "--epsilon", "6", "--delta",
                 "1e-5", "--steps", "10", "--batch-size", "64", "--n-particles", "50", "--out", str(out)]) == 0
    report = json.loads((out / "privacy.json").read_text())
    assert report["steps"] == 1 and "local" in report["release"] and report["epsilon"] <= 6.0


@pytest.mark.parametrize("method", ["dpswgen", "dpsgd-sw-gen", "ldp-sinkhorn-gen"])
def test_generator_resume_is_bit_identical_and_keeps_the_ledger(method, tmp_path, monkeypatch):
    from swflow.methods.generators import (ClippedGradientConfig, GeneratorConfig, SinkhornConfig, make_dpsgd_sw_gen,
                                           make_dpswgen, make_ldp_sinkhorn_gen)
    from swflow.privacy import PrivacySpec

    x = torch.randn(300, 3, generator=torch.Generator().manual_seed(0))
    data = x / x.norm(dim=1, keepdim=True)
    spec = PrivacySpec(epsilon=5.0, delta=1e-5)

    def make(steps):
        if method == "dpswgen":
            return make_dpswgen(data, privacy=spec, config=GeneratorConfig(steps=steps), n_projections=8,
                                batch_size=50, privacy_seed=1)
        if method == "dpsgd-sw-gen":
            return make_dpsgd_sw_gen(data, privacy=spec, config=ClippedGradientConfig(steps=steps, hidden=(16,)),
                                     n_projections=8, batch_size=50, privacy_seed=1)
        return make_ldp_sinkhorn_gen(data, privacy=spec, config=SinkhornConfig(steps=steps, batch_size=32),
                                     privacy_seed=1)

    straight = make(6).fit(progress=False)
    ckpt = tmp_path / "checkpoint.pt"
    done, adam_step = [], torch.optim.Adam.step

    def dies_in_the_fifth_update(optimizer, *args, **kwargs):  # a kill after the fifth release
        if len(done) == 4:
            raise KeyboardInterrupt
        done.append(1)
        return adam_step(optimizer, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", dies_in_the_fifth_update)
    with pytest.raises(KeyboardInterrupt):
        make(6).fit(progress=False, checkpoint_path=ckpt, checkpoint_every=2)
    monkeypatch.undo()
    resumed = make(6).fit(progress=False, checkpoint_path=ckpt, checkpoint_every=2)  # a fresh process
    assert resumed.step == 6
    assert torch.equal(resumed.sample(20, seed=0), straight.sample(20, seed=0))
    assert resumed.target.ledger.state_dict() == straight.target.ledger.state_dict()
