import math

import h5py
import numpy as np
import pytest
import torch

from conftest import five_gaussians
from swflow import FlowConfig, make_flow, sliced_wasserstein
from swflow.io.hdf5 import read_samples, read_trajectory, write_samples
from swflow.privacy import NoiseSource, PrivacySpec
from swflow.simulate.callbacks import Checkpointer, TrajectoryRecorder
from swflow.simulate.flow import ParticleFlow, Presampled, Resampled

PUBLIC = PrivacySpec(epsilon=math.inf)


def _sphere(n, d, gen):
    x = torch.randn(n, d, generator=gen)
    return x / x.norm(dim=1, keepdim=True)


def test_swf_decreases_sw_on_toy(gen):
    y = five_gaussians(1500, gen)
    flow = make_flow("swf", y, privacy=PUBLIC, n_projections=100, progress=False,
                     config=FlowConfig(steps=60, n_particles=1500, diffusion=0.001, seed=1))
    start = float(sliced_wasserstein(flow.particles, y, n_projections=400, generator=gen))
    result = flow.run()
    end = float(sliced_wasserstein(result.particles, y, n_projections=400, generator=gen))
    assert end < 0.25 * start and end < 0.25


def test_holds_still_when_particles_equal_target(gen):
    y = torch.randn(400, 3, generator=gen)
    flow = make_flow("swf", y, privacy=PUBLIC, n_projections=30, progress=False,
                     config=FlowConfig(steps=5, n_particles=400))
    flow.particles = y.clone()
    assert torch.allclose(flow.run().particles, y, atol=1e-5)


def test_private_flow_holds_still_up_to_noise(gen):
    # Smoothing on both sides: the drift of a perfect fit is pure noise and averages out.
    y = _sphere(2000, 4, gen)
    flow = make_flow("dpswflow", y, privacy=PrivacySpec(noise_multiplier=0.05, delta=1e-5),
                     n_projections=40, pool_size=60, privacy_seed=0, progress=False,
                     config=FlowConfig(steps=10, n_particles=2000, step_size=0.5))
    flow.particles = y.clone()
    moved = (flow.run().particles - y).norm(dim=1).mean()
    assert float(moved) < 0.1


def test_presampled_releases_exactly_once(gen, monkeypatch):
    calls = []
    original = NoiseSource.gaussian
    monkeypatch.setattr(NoiseSource, "gaussian", lambda self, *a, **k: calls.append(1) or original(self, *a, **k))
    y = _sphere(500, 5, gen)
    flow = make_flow("dpswflow", y, privacy=PrivacySpec(epsilon=5.0, delta=1e-5), n_projections=10,
                     pool_size=40, privacy_seed=1, progress=False, config=FlowConfig(steps=30, n_particles=300))
    flow.run()
    assert len(calls) == 1 and flow.target.ledger.releases == 1


def test_resampled_releases_every_step(gen):
    y = _sphere(500, 5, gen)
    flow = make_flow("dpswflow-r", y, privacy=PrivacySpec(epsilon=5.0, delta=1e-5), n_projections=10,
                     batch_size=50, privacy_seed=1, progress=False, config=FlowConfig(steps=12, n_particles=100))
    flow.run()
    assert flow.target.ledger.releases == 12


@pytest.mark.parametrize("method,extra", [("dpswflow-r", {"batch_size": 64}), ("dpswflow", {"pool_size": 50}),
                                          ("ldp-flow", {"batch_size": 100})])
@pytest.mark.parametrize("smoothing,manifold", [("exact", "sphere"), ("sampled", "ball")])
def test_resume_is_bit_identical(method, extra, smoothing, manifold, gen, tmp_path, monkeypatch):
    y = _sphere(640, 6, gen)
    cfg = FlowConfig(steps=20, n_particles=300, diffusion=0.01, record_every=4, checkpoint_every=5, seed=3,
                     smoothing=smoothing, manifold=manifold)
    kwargs = dict(privacy=PrivacySpec(epsilon=8.0, delta=1e-5), n_projections=12, privacy_seed=9,
                  progress=False, **extra)
    full = make_flow(method, y, config=cfg, callbacks=[TrajectoryRecorder(tmp_path / "a.h5")], **kwargs).run()

    original = ParticleFlow.step_once

    def interrupted(self):
        if self.step == 12:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(ParticleFlow, "step_once", interrupted)
    ck = tmp_path / "ck.pt"
    with pytest.raises(KeyboardInterrupt):
        make_flow(method, y, config=cfg, callbacks=[TrajectoryRecorder(tmp_path / "b.h5"), Checkpointer(ck)],
                  **kwargs).run()
    monkeypatch.setattr(ParticleFlow, "step_once", original)
    resumed_flow = make_flow(method, y, config=cfg,
                             callbacks=[TrajectoryRecorder(tmp_path / "b.h5"), Checkpointer(ck)], **kwargs)
    resumed = resumed_flow.run()
    assert torch.equal(full.particles, resumed.particles)
    a, sa, _ = read_trajectory(tmp_path / "a.h5")
    b, sb, _ = read_trajectory(tmp_path / "b.h5")
    assert np.array_equal(sa, sb) and np.array_equal(a, b) and list(sa) == [0, 4, 8, 12, 16, 20]
    expected = 20 if method == "dpswflow-r" else 1  # dpswflow and ldp-flow release once
    assert resumed_flow.target.ledger.releases == expected  # resuming never resets the ledger


@pytest.mark.parametrize("method", ["dpswflow-r", "dpswflow", "dpswflow-hist", "ldp-flow"])
def test_checkpoint_holds_no_private_row(gen, tmp_path, method):
    """No private row, anywhere in the file's bytes or down any tensor's columns (a whole row matching
    by chance is impossible; single coordinates can match noisy values by chance, so rows are compared)."""
    y = _sphere(200, 4, gen)
    ck = tmp_path / "ck.pt"
    make_flow(method, y, privacy=PrivacySpec(epsilon=5.0, delta=1e-5), n_projections=8,
              batch_size=20 if method == "dpswflow-r" else None, callbacks=[Checkpointer(ck)], progress=False,
              config=FlowConfig(steps=4, n_particles=50, checkpoint_every=2)).run()
    # the file's bytes, and every tensor read column-wise too (a row stored as a column is contiguous there)
    blobs = [ck.read_bytes()]
    for t in _tensors(torch.load(ck, weights_only=True)):
        if t.dtype.is_floating_point and t.ndim >= 2:
            blobs += [t.transpose(-1, -2).contiguous().numpy().astype(dtype).tobytes() for dtype in (np.float32,
                                                                                                     np.float64)]
    for row in y.numpy():
        for dtype in (np.float32, np.float64):
            assert not any(row.astype(dtype).tobytes() in blob for blob in blobs)


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v)


def test_samples_h5_round_trip(tmp_path):
    lat = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    img = np.random.default_rng(1).random((10, 1, 8, 8)).astype(np.float32)
    decode = {lat[i].tobytes(): img[i] for i in range(10)}  # a lookup "decoder", so images are checkable
    write_samples(tmp_path / "s.h5", lat, config={"a": 1}, decoder=lambda z: np.stack([decode[r.tobytes()] for r in z]),
                  labels=np.arange(10))
    back = read_samples(tmp_path / "s.h5")
    # images are stored as 8-bit pixels and read back as floats: within half a grey level
    assert np.array_equal(back["latents"], lat) and np.abs(back["images"] - img).max() <= 0.5 / 255 + 1e-7
    with h5py.File(tmp_path / "s.h5") as f:
        assert f["images"].dtype == np.uint8 and f["images"].attrs["pixel_scale"] == 255
    assert back["config"] == {"a": 1} and list(back["labels"]) == list(range(10))
    # streamed in chunks: the same file
    write_samples(tmp_path / "c.h5", (lat[i:i + 3] for i in range(0, 10, 3)), config={"a": 1},
                  decoder=lambda z: np.stack([decode[r.tobytes()] for r in z]), labels=np.arange(10))
    chunked = read_samples(tmp_path / "c.h5")
    assert np.array_equal(chunked["latents"], lat) and np.array_equal(chunked["images"], back["images"])


def test_sphere_init_and_reproducible_seed(gen):
    y = torch.randn(100, 3, generator=gen)
    cfg = FlowConfig(steps=3, n_particles=50, init="sphere", seed=7)
    a = make_flow("swf", y, privacy=PUBLIC, n_projections=5, config=cfg, progress=False)
    assert torch.allclose(a.particles.norm(dim=1), torch.ones(50))
    b = make_flow("swf", y, privacy=PUBLIC, n_projections=5, config=cfg, progress=False)
    assert torch.equal(a.run().particles, b.run().particles)


@pytest.mark.parametrize("make,match", [
    (lambda y: FlowConfig(steps=0), "steps must be >= 1"),
    (lambda y: FlowConfig(steps=1, step_size=0.0), "step size h must be > 0"),
    (lambda y: FlowConfig(steps=1, diffusion=-1.0), "lambda must be >= 0"),
    (lambda y: FlowConfig(steps=1, init="uniform"), "init must be one of"),
    (lambda y: Resampled(0), "n_projections must be >= 1"),
    (lambda y: Presampled(5, 6), "cannot be drawn from a pool"),
])
def test_bad_settings(make, match, gen):
    with pytest.raises(ValueError, match=match):
        make(None)


def test_bad_data(gen):
    cfg = FlowConfig(steps=2, n_particles=10)
    y = torch.randn(20, 3, generator=gen)
    bad = y.clone()
    bad[4, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or inf"):
        make_flow("swf", bad, privacy=PUBLIC, n_projections=3, config=cfg)
    with pytest.raises(ValueError, match="empty"):
        make_flow("swf", torch.zeros(0, 3), privacy=PUBLIC, n_projections=3, config=cfg)
    with pytest.raises(ValueError, match="2-D"):
        make_flow("swf", torch.zeros(5), privacy=PUBLIC, n_projections=3, config=cfg)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        make_flow("swf", y, privacy=PUBLIC, n_projections=3, batch_size=0, config=cfg)
    # the rule of every entry point: a batch that covers every row is a full batch
    assert make_flow("swf", y, privacy=PUBLIC, n_projections=3, batch_size=50, config=cfg).target.batch_size is None
    with pytest.raises(ValueError, match="unknown method 'sfw'"):
        make_flow("sfw", y, privacy=PUBLIC, n_projections=3, config=cfg)
    with pytest.raises(ValueError, match="is a generator, not a flow"):
        make_flow("dpswgen", y, privacy=PUBLIC, n_projections=3, config=cfg)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_same_code_on_each_device(device, gen):
    y = torch.nn.functional.normalize(torch.randn(2000, 4, generator=gen) * 0.3 + torch.tensor([1.0, 0, 0, 0]), dim=1)
    flow = make_flow("dpswflow-r", y, privacy=PrivacySpec(epsilon=20.0, delta=1e-5), n_projections=16,
                     batch_size=500, privacy_seed=0, progress=False,
                     config=FlowConfig(steps=20, n_particles=400, device=device))
    start = float(sliced_wasserstein(flow.particles.cpu(), y, n_projections=200, generator=gen))
    particles = flow.run().particles
    assert particles.device.type == device and particles.dtype == torch.float32
    assert float(sliced_wasserstein(particles.cpu(), y, n_projections=200, generator=gen)) < start


def _small_mixture(n, gen):
    centers = torch.tensor([[0.0, 0.0], [0.5, 0.5], [-0.5, 0.5], [0.5, -0.5], [-0.5, -0.5]])
    return centers[torch.randint(0, 5, (n,), generator=gen)] + 0.05 * torch.randn(n, 2, generator=gen)


def test_ldp_flow_releases_once_and_deconvolves(gen, monkeypatch):
    calls = []
    original = NoiseSource.gaussian
    monkeypatch.setattr(NoiseSource, "gaussian", lambda self, *a, **k: calls.append(a[0]) or original(self, *a, **k))
    y, held_out = _small_mixture(3000, gen), _small_mixture(3000, gen)
    theta = torch.nn.functional.normalize(torch.randn(2, 500, generator=gen), dim=0)
    spec = PrivacySpec(noise_multiplier=0.1, delta=1e-5, clip=True)
    results = {}
    for smoothing in (None, 0.0):  # None: smooth the particle side with the release's sigma
        flow = make_flow("ldp-flow", y, privacy=spec, n_projections=40, privacy_seed=0, progress=False,
                         config=FlowConfig(steps=200, n_particles=3000, smoothing_std=smoothing))
        results[smoothing] = float(sliced_wasserstein(flow.run().particles, held_out, projections=theta))
        assert flow.target.ledger.releases == 1
    assert calls == [(2, 3000), (2, 3000)]  # one release of every row (d x n on identity directions) per run, nothing per step
    noisy = float(sliced_wasserstein(flow.target.released_rows(), held_out, projections=theta))
    assert results[0.0] > 0.8 * noisy  # without particle smoothing the flow just copies the noisy rows
    assert results[None] < 0.5 * results[0.0]  # with it, the flow deconvolves


def test_sphere_manifold_keeps_particles_on_the_sphere_at_no_privacy_cost(gen, tmp_path):
    from swflow.pipeline.run import run_flow_to_dir
    from swflow.pipeline.settings import from_keywords

    y = _sphere(800, 5, gen)
    reports = {}
    for manifold in ("sphere", "ball"):
        out = tmp_path / manifold
        out.mkdir()
        settings = from_keywords("dpswflow-r", epsilon=4.0, delta=1e-5, n_projections=10, batch_size=100,
                                 privacy_seed=2, steps=15, n_particles=400, step_size=2.0, manifold=manifold,
                                 record_every=5)
        result = run_flow_to_dir(settings, y, out, progress=False)
        reports[manifold] = result.report
        norms = result.particles.norm(dim=1)
        if manifold == "sphere":
            assert torch.allclose(norms, torch.ones_like(norms), atol=1e-5)
            frames, _, _ = read_trajectory(out / "trajectory.h5")
            assert np.allclose(np.linalg.norm(frames, axis=-1), 1.0, atol=1e-5)  # from the first frame on
        else:
            assert (norms - 1).abs().max() > 0.05  # the free flow does leave the sphere
    sphere, ball = reports["sphere"], reports["ball"]
    assert sphere.epsilon == ball.epsilon and sphere.ledger == ball.ledger  # same releases
    assert "retracted onto the unit sphere" in sphere.notes["particle_post_processing"]
    assert ball.notes["particle_post_processing"] == "none"
    assert sphere.run_config["manifold"] == "sphere" and sphere.run_config["init"] == "sphere"


def test_sphere_manifold_refuses_a_contradicting_init():
    with pytest.raises(ValueError, match="init"):
        FlowConfig(steps=1, manifold="sphere", init="normal")


def test_a_checkpoint_in_the_layout_before_the_shared_simulator_still_resumes(gen):
    """Checkpoints of runs interrupted before the simulators shared one spelling kept the target's ledger and
    noise under 'ledger' and 'privacy_noise'; they resume to the same particles and the same budget."""
    y = _sphere(600, 4, gen)

    def flow():
        return make_flow("dpswflow-r", y, privacy=PrivacySpec(epsilon=5.0, delta=1e-5), n_projections=6,
                         batch_size=100, privacy_seed=3, progress=False,
                         config=FlowConfig(steps=6, n_particles=200, manifold="sphere"))

    straight = flow()
    straight.run()
    first = flow()
    for _ in range(3):
        first.step_once()
    state = first.state_dict()
    target = state.pop("target")
    old = {**state, "ledger": target["ledger"], "privacy_noise": target["noise"]}
    resumed = flow()
    resumed.load_state_dict(old)
    resumed.run()
    assert torch.equal(resumed.particles, straight.particles)
    assert resumed.target.ledger.state_dict() == straight.target.ledger.state_dict()


def test_swf_with_a_smoothing_std_smooths_the_target_side_by_that_std_without_a_claim():
    # 004 4.1's smoothed flow without privacy: the released projections are the batch's plus N(0, sigma^2)
    # (Monte Carlo: 200 directions x 400 rows of zeros; the std's standard error is 0.7 / sqrt(160 000) = 0.002)
    from swflow.privacy import FixedNoiseTarget

    rows = torch.zeros(1000, 3)
    flow = make_flow("swf", rows, privacy=PrivacySpec(epsilon=math.inf), n_projections=200, batch_size=400,
                     privacy_seed=3, progress=False, config=FlowConfig(steps=2, n_particles=50, smoothing_std=0.7))
    assert isinstance(flow.target, FixedNoiseTarget)
    theta = torch.nn.functional.normalize(torch.randn(3, 200, generator=torch.Generator().manual_seed(0)), dim=0)
    values, sigma = flow.target.release(theta)
    assert values.shape == (200, 400) and sigma == 0.7
    assert abs(float(values.std()) - 0.7) < 0.01 and abs(float(values.mean())) < 0.01
    assert len(flow.target.ledger) == 0  # no release is recorded: no privacy claim
