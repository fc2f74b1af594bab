"""A library call never moves the caller's global random stream (it seeds its own networks inside)."""
import numpy as np
import pytest
import torch

from swflow.evaluate.metrics import downstream_accuracy
from swflow.methods.generators import ClippedGradientConfig, GeneratorConfig, make_dpsgd_sw_gen, make_dpswgen
from swflow.privacy import PrivacySpec


def _rows(n: int) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.randn(n, 3, generator=torch.Generator().manual_seed(0)), dim=1)


def test_seeded_networks_leave_the_global_generator_where_it_was():
    torch.manual_seed(123)
    expected_next = torch.rand(5)  # what the user's stream yields next, untouched
    torch.manual_seed(123)
    spec = PrivacySpec(epsilon=10.0, delta=1e-5)
    make_dpswgen(_rows(200), privacy=spec, config=GeneratorConfig(steps=2), n_projections=4, batch_size=50,
                 privacy_seed=0).fit(progress=False)
    make_dpsgd_sw_gen(_rows(200), privacy=spec, config=ClippedGradientConfig(steps=2), n_projections=4,
                      batch_size=50, privacy_seed=0).fit(progress=False)
    images = np.random.default_rng(0).random((40, 1, 8, 8), dtype=np.float32)
    downstream_accuracy(images, np.arange(40) % 2, images[:10], np.arange(10) % 2, epochs=1)
    assert torch.equal(torch.rand(5), expected_next)


def test_the_seeded_networks_do_not_depend_on_the_callers_stream():
    spec = PrivacySpec(epsilon=10.0, delta=1e-5)
    draws = []
    for user_seed in (1, 2):
        torch.manual_seed(user_seed)
        model = make_dpswgen(_rows(200), privacy=spec, config=GeneratorConfig(steps=1), n_projections=4,
                             batch_size=50, privacy_seed=0)
        draws.append(model.sample(8, seed=3))
    assert torch.equal(*draws)


def test_thread_rule_and_context():
    from swflow.simulate.threads import ONE_THREAD_BELOW, step_threads, torch_threads

    assert step_threads(10_000, 32) == 1 and step_threads(ONE_THREAD_BELOW, 1) is None
    before = torch.get_num_threads()
    with torch_threads(None):
        assert torch.get_num_threads() == before
    try:
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            raise KeyError("inside")
    except KeyError:
        pass
    assert torch.get_num_threads() == before  # restored, also after an error
    with pytest.raises(ValueError, match="threads"):
        with torch_threads(0):
            pass


def test_small_flow_steps_run_on_one_thread_from_the_command_and_from_python_and_give_the_count_back(
        tmp_path, monkeypatch):
    """A 200-particle step of 32 directions (k·n below swflow.simulate.threads.ONE_THREAD_BELOW) runs on one torch
    thread, in a fit and in a replay, from `swflow generate` and `swflow sample` as from Synthesizer.fit and
    .sample; the process's two threads are back after each (the issue 96 probe: from Python they were not set)."""
    from swflow import Synthesizer
    from swflow.cli import main
    from swflow.simulate.flow import ParticleFlow

    seen = []
    step = ParticleFlow._step

    def counting(flow):
        seen.append(torch.get_num_threads())
        return step(flow)

    monkeypatch.setattr(ParticleFlow, "_step", counting)
    np.save(tmp_path / "rows.npy", _rows(400).numpy())
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert main(["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "sphere", "--method",
                     "dpswflow-hist", "--epsilon", "10", "--steps", "3", "--n-particles", "200", "--quiet",
                     "--out", str(tmp_path / "run")]) == 0
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
        seen.clear()
        assert main(["sample", str(tmp_path / "run"), "--n", "300", "--quiet", "--out", str(tmp_path / "s")]) == 0
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
        seen.clear()
        synth = Synthesizer("dpswflow-hist", epsilon=10.0, delta=1e-6, steps=3, n_particles=200, n_projections=32,
                            manifold="sphere").fit(_rows(400).numpy())
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
        seen.clear()
        synth.sample(300, progress=False)
        assert seen == [1, 1, 1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_pictures_leave_the_callers_matplotlib_backend_and_figures_alone(tmp_path):
    """In a fresh process with the svg backend chosen by the user: drawing panels, scatters and scatter frames
    keeps that backend and opens no pyplot figure (pyplot's backend is process-wide)."""
    import os
    import subprocess
    import sys

    from PIL import Image

    script = f"""
import sys, matplotlib, numpy as np
from swflow.evaluate.animate import save_panels, save_scatter, scatter_frames
images = np.random.default_rng(0).random((4, 1, 8, 8), dtype=np.float32)
save_panels([("a", images), ("", None), ("b", images)], r"{tmp_path / 'panels.png'}", ncol=2, columns=2)
save_scatter(np.random.default_rng(1).normal(size=(50, 2)), r"{tmp_path / 'scatter.png'}")
scatter_frames(np.random.default_rng(2).normal(size=(3, 20, 2)), np.arange(3), frames=2)
print(matplotlib.get_backend(), "matplotlib.pyplot" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "MPLBACKEND": "svg"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["svg", "False"]
    # 3 panels, 2 a row: two rows of 3.6 x 4.0 inches at 110 dpi
    assert Image.open(tmp_path / "panels.png").size == (792, 880)
