"""The one estimator API over every method: fit once, sample often, save/load, registry."""
import math

import numpy as np
import pytest
import torch

from swflow.methods.registry import METHODS
from swflow.pipeline.estimator import Synthesizer

SETTINGS = {  # small but private runs of every method
    "swf": {"epsilon": math.inf, "steps": 20, "n_projections": 10, "n_particles": 200},
    "dpswflow-r": {"epsilon": 5.0, "steps": 20, "n_projections": 10, "batch_size": 100, "n_particles": 200},
    "dpswflow": {"epsilon": 5.0, "steps": 20, "n_projections": 8, "pool_size": 12, "n_particles": 200},
    "ldp-flow": {"epsilon": 5.0, "steps": 20, "n_projections": 10, "n_particles": 200},
    "dpswflow-hist": {"epsilon": 5.0, "steps": 20, "n_projections": 8, "n_particles": 200, "delta": 1e-4},
    "dpswgen": {"epsilon": 5.0, "steps": 10, "n_projections": 10, "batch_size": 100},
    "dpsgd-sw-gen": {"epsilon": 5.0, "steps": 5, "n_projections": 10, "batch_size": 50,
                     "activation_clip": 0.5},
    "ldp-sinkhorn-gen": {"epsilon": 5.0, "steps": 5, "batch_size": 64},
}


def _rows():
    x = torch.randn(400, 3, generator=torch.Generator().manual_seed(0))
    return (x / x.norm(dim=1, keepdim=True)).numpy()


def test_every_registered_method_has_settings_here():
    assert set(SETTINGS) == set(METHODS)


@pytest.mark.parametrize("method", list(SETTINGS))
def test_fit_sample_save_load_round_trip(method, tmp_path):
    rows = _rows()
    # the histogram's default noise (OpenDP's discrete Gaussian) takes no seed; sampling is seeded either way
    syn = Synthesizer(method, privacy_seed=None if method == "dpswflow-hist" else 0, **SETTINGS[method]).fit(rows)
    a, b = syn.sample(50, seed=1), syn.sample(50, seed=1)
    assert a.shape == (50, 3) and np.array_equal(a, b) and not np.array_equal(a, syn.sample(50, seed=2))
    report = syn.privacy_report().to_json()
    assert (report["epsilon"] is None) == (method == "swf")
    if method != "swf":
        assert report["epsilon"] <= 5.0 + 1e-9 and report["ledger"]
    releases = len(report["ledger"])
    syn.sample(10, seed=3)
    assert len(syn.privacy_report().ledger) == releases  # sampling spends nothing
    path = syn.save(tmp_path / "m.pt")
    loaded = Synthesizer.load(path)
    assert np.array_equal(loaded.sample(50, seed=1), a)
    assert loaded.privacy_report().to_json() == report
    # no private row in the saved file
    blob = torch.load(path, weights_only=True)
    private = {r.astype(np.float32).tobytes() for r in rows}

    def tensors(x):
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from tensors(v)

    for t in tensors(blob["state"]):
        flat = t.detach().float().reshape(-1).numpy()
        if flat.size >= 3:
            windows = np.lib.stride_tricks.sliding_window_view(flat, 3)
            assert not any(w.tobytes() in private for w in windows)
    with pytest.raises(RuntimeError, match="fitted already"):
        syn.fit(rows)


def test_clear_errors():
    with pytest.raises(ValueError, match="unknown method"):
        Synthesizer("gan", epsilon=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        Synthesizer("dpswflow-r")
    with pytest.raises(RuntimeError, match="fit"):
        Synthesizer("swf").sample(3)


def test_a_new_method_is_one_module_and_one_registration(tmp_path, monkeypatch, capsys):
    """The registry's promise: a generator written in its own module and registered with one
    MethodSpec is usable from the estimator (fit, sample, save, load) and the budget calculator."""
    import json
    import sys

    from swflow.cli import main
    from swflow.methods.registry import METHODS, MethodSpec

    (tmp_path / "toy_method.py").write_text(
        "from swflow.methods.generators.dpswgen import GeneratorConfig, make_dpswgen\n"
        "from swflow.methods.generators._generator import MLPGenerator as NETWORK\n\n"
        "def build(data, *, privacy, steps, n_projections, batch_size, privacy_seed=None, seed=0, device='cpu',\n"
        "          **options):\n"
        "    return make_dpswgen(data, privacy=privacy, n_projections=n_projections, batch_size=batch_size,\n"
        "                        privacy_seed=privacy_seed, config=GeneratorConfig(steps=steps, seed=seed, **options))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(METHODS, "toy-gen", MethodSpec("toy-gen", "generator", "a toy", "per-step", ("steps", 7),
                                                       "toy_method"))
    syn = Synthesizer("toy-gen", epsilon=5.0, steps=4, n_projections=8, batch_size=100, privacy_seed=0).fit(_rows())
    path = syn.save(tmp_path / "toy.pt")
    assert np.array_equal(Synthesizer.load(path).sample(20, seed=3), syn.sample(20, seed=3))
    report = syn.privacy_report()
    assert report.method == "toy-gen" and report.steps == 4 and report.epsilon <= 5.0
    assert main(["privacy", "--method", "toy-gen", "--epsilon", "5", "--dataset-size", "400", "--dim", "3",
                 "--n-projections", "8", "--batch-size", "100", "--steps", "4", "--json"]) == 0
    calc = json.loads(capsys.readouterr().out)
    assert calc["noise_multiplier"] == pytest.approx(report.noise_multiplier) and calc["releases"] == 4
    sys.modules.pop("toy_method", None)


def test_a_new_flow_method_is_one_module_and_one_registration(tmp_path, monkeypatch, capsys):
    """Flows keep the same promise: a flow written in its own module (here: every release of a batch on
    fresh directions, with a smaller step) and one MethodSpec runs from the estimator and the CLI."""
    import json
    import sys

    from swflow.cli import main
    from swflow.methods.registry import METHODS, MethodSpec

    (tmp_path / "toy_flow.py").write_text(
        "from dataclasses import replace\n"
        "from swflow.simulate.flow import ParticleFlow, Resampled\n"
        "from swflow.privacy import private_target\n\n"
        "def build(data, plan, *, privacy, config, privacy_seed, callbacks, **_):\n"
        "    target = private_target(data, privacy, plan.release, privacy_seed=privacy_seed)\n"
        "    return ParticleFlow(target, Resampled(plan.n_projections), replace(config, step_size=0.5),\n"
        "                        callbacks=callbacks)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(METHODS, "toy-flow", MethodSpec("toy-flow", "flow", "a toy flow", "per-step", ("steps", 6),
                                                        "toy_flow"))
    syn = Synthesizer("toy-flow", epsilon=5.0, n_projections=8, batch_size=100, n_particles=50,
                      privacy_seed=0).fit(_rows())
    report = syn.privacy_report()
    assert report.method == "toy-flow" and report.steps == 6 and report.epsilon <= 5.0
    assert syn.sample(30, seed=1).shape == (30, 3)
    np.save(tmp_path / "rows.npy", _rows())
    assert main(["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "toy-flow",
                 "--epsilon", "5", "--n-projections", "8", "--batch-size", "100", "--n-particles", "50",
                 "--out", str(tmp_path / "run")]) == 0
    written = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert written["method"] == "toy-flow" and written["steps"] == 6 and written["epsilon"] <= 5.0
    sys.modules.pop("toy_flow", None)


def test_readme_methods_table_lists_the_registry():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    table = readme.split("## Methods", 1)[1].split("\n\n", 2)[1]
    names = [line.split("|")[1].strip().strip("`") for line in table.splitlines()[2:]]
    assert sorted(names) == sorted(METHODS)
