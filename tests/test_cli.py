import json
import math
from pathlib import Path

import h5py
import numpy as np
import pytest

from swflow import Synthesizer
from swflow.cli import main
from swflow.io.hdf5 import to_pixels


def test_demo_writes_every_file(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--steps", "3", "--n-particles", "200"]) == 0
    for name in ("privacy.json", "samples.h5", "trajectory.h5", "samples.png", "flow.gif", "split_manifest.json"):
        assert (out / name).exists(), name
    report = json.loads((out / "privacy.json").read_text())
    assert report["epsilon"] <= 10.0 and report["steps"] == 3 and report["adjacency"] == "replace-one"
    with h5py.File(out / "samples.h5") as f:
        assert f["latents"].shape == (200, 8) and f["images"].shape == (200, 1, 8, 8)
        assert f["images"].dtype == np.uint8 and f["images"].attrs["pixel_scale"] == 255  # 8-bit pixels
    with h5py.File(out / "trajectory.h5") as f:
        assert f["latents"].shape == (4, 200, 8) and list(f["steps"][:]) == [0, 1, 2, 3]
    assert not (out / "checkpoint.pt").exists()  # holds the noise RNG state: removed after the run
    # the split manifest proves public and private are disjoint
    manifest = json.loads((out / "split_manifest.json").read_text())
    assert manifest["public_size"] + manifest["private_size"] == 1797
    assert "DP under" in capsys.readouterr().out
    assert main(["demo", "--out", str(out)]) == 2  # refuses to overwrite without --overwrite


def test_evaluate_reports_fid_kid_and_their_protocol(tmp_path, monkeypatch):
    import swflow.evaluate.metrics

    monkeypatch.setattr(swflow.evaluate.metrics, "CACHE_DIR", tmp_path / "cache")  # keep the user's cache clean
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--steps", "2", "--n-particles", "60"]) == 0
    assert main(["evaluate", str(out), "--n-fid", "40"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["fid"] > 0 and metrics["fid_n"] == 40 and metrics["kid_standard_error"] >= 0
    assert metrics["fid_protocol"]["samples"] == 40 and "public split" in metrics["fid_protocol"]["reference"]
    assert metrics["fid_protocol"]["backend"] in ("onnxruntime", "torch")
    assert any((tmp_path / "cache" / "fid").iterdir())  # reference features cached


def test_generate_on_vectors_and_refusals(tmp_path, capsys):
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((600, 2)).astype(np.float32) * 0.3
    np.save(tmp_path / "rows.npy", rows)
    args = ["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "dpswflow-r", "--epsilon", "5",
            "--delta", "1e-5", "--steps", "20", "--batch-size", "100", "--n-projections", "20",
            "--n-particles", "300", "--out", str(tmp_path / "run")]
    assert main(args) == 2 and "--clip" in capsys.readouterr().err  # some rows are outside the unit ball
    assert main(args + ["--clip"]) == 0
    report = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert report["clipped"] and report["epsilon"] <= 5.0 and report["steps"] == 20
    assert main(["generate", "--data", str(tmp_path / "missing.npy"), "--manifold", "ball", "--method", "swf", "--steps", "2",
                 "--out", str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_privacy_calculator_both_directions(capsys):
    base = ["privacy", "--method", "dpswflow-r", "--dataset-size", "30000", "--dim", "8", "--epochs", "35", "--json"]
    assert main(base + ["--noise-multiplier", "0.67"]) == 0
    forward = json.loads(capsys.readouterr().out)
    assert forward["epsilon"] == pytest.approx(14.84, abs=0.05) and forward["steps"] == 4200
    assert main(base + ["--epsilon", "10"]) == 0
    back = json.loads(capsys.readouterr().out)
    assert back["noise_multiplier"] == pytest.approx(0.77, abs=0.01) and back["epsilon"] <= 10.0
    assert main(["privacy", "--method", "dpswflow", "--dataset-size", "30000", "--dim", "8", "--steps", "1500",
                 "--n-projections", "25", "--pool-size", "31", "--epsilon", "10", "--json"]) == 0
    pool = json.loads(capsys.readouterr().out)
    assert pool["releases"] == 1 and pool["accountant"].startswith("analytic Gaussian")
    assert main(base + ["--epsilon", "-1"]) == 2


CONFIGS = sorted((Path(__file__).resolve().parents[1] / "swflow" / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configs_map_onto_options(path):
    from swflow.pipeline.settings import build, read_config

    tables = read_config(str(path))
    run = tables.pop("run")
    assert run["method"] in ("dpswflow-r", "dpswflow") and run["dataset"] in ("fashion-mnist", "mnist", "celeba")
    assert ("epsilon" in tables["privacy"]) != ("noise_multiplier" in tables["privacy"])
    settings = build(run["method"], tables)  # every key has its home in the settings tree
    assert settings.shape.n_projections == tables["shape"]["n_projections"]


def test_paper_noise_config_reports_honest_epsilon(capsys):
    """The paper-noise config, read as `generate --config` reads it, buys ε ≈ 14.8 under replace-one, not 10."""
    from swflow.pipeline.settings import read_config

    path = [p for p in CONFIGS if p.name == "fashion-mnist-dpswflow-r-paper-noise.toml"][0]
    config = {k: v for table in read_config(str(path)).values() for k, v in table.items()}
    assert "epsilon" not in config  # the config states a noise level, and the epsilon is what it buys
    assert main(["privacy", "--method", config["method"], "--noise-multiplier", str(config["noise_multiplier"]),
                 "--delta", str(config["delta"]), "--dataset-size", "30000", "--dim", "8",
                 "--epochs", str(config["epochs"]), "--batch-size", str(config["batch_size"]),
                 "--n-projections", str(config["n_projections"]), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["noise_multiplier"] == pytest.approx(0.67) and report["epsilon"] == pytest.approx(14.84, abs=0.05)


def test_command_line_budget_replaces_the_configs(tmp_path):
    config = tmp_path / "run.toml"
    config.write_text('[run]\ndataset = "digits"\nmethod = "dpswflow"\n[privacy]\nepsilon = 8.0\n'
                      '[shape]\nsteps = 5\nn_projections = 10\npool_size = 20\n[flow]\nn_particles = 50\n')
    reports = {}
    for name, flags in (("config", []), ("flag", ["--noise-multiplier", "2.0"])):
        assert main(["generate", "--config", str(config), "--out", str(tmp_path / name), *flags]) == 0
        reports[name] = json.loads((tmp_path / name / "privacy.json").read_text())
    assert reports["config"]["epsilon"] <= 8.0 + 1e-9 and reports["config"]["noise_multiplier"] != 2.0
    assert reports["flag"]["noise_multiplier"] == 2.0 and reports["flag"]["epsilon"] < 8.0


def test_generate_on_digits_dataset(tmp_path, capsys):
    out = tmp_path / "g"
    assert main(["generate", "--dataset", "digits", "--method", "dpswflow", "--epsilon", "8", "--delta", "1e-5",
                 "--steps", "15", "--n-projections", "20", "--pool-size", "40", "--n-particles", "150",
                 "--out", str(out)]) == 0
    report = json.loads((out / "privacy.json").read_text())
    assert report["steps"] == 1 and report["epsilon"] <= 8.0 and report["run_config"]["dataset"] == "digits"
    with h5py.File(out / "samples.h5") as f:
        assert f["images"].shape == (150, 1, 8, 8)
    assert (out / "flow.gif").exists()


def test_encode_then_generate_from_file(tmp_path, capsys):
    assert main(["encode", "--dataset", "digits", "--split", "private", "--out", str(tmp_path / "z.h5")]) == 0
    assert "PRIVATE DATA" in capsys.readouterr().out
    with h5py.File(tmp_path / "z.h5") as f:
        z = f["data"][:]
        assert f.attrs["split"] == "private"
    assert z.shape == (899, 8) and np.allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-5)
    assert main(["generate", "--data", str(tmp_path / "z.h5"), "--manifold", "ball", "--method", "dpswflow-r", "--epsilon", "5",
                 "--delta", "1e-5", "--steps", "4", "--batch-size", "100", "--n-projections", "16",
                 "--n-particles", "100", "--out", str(tmp_path / "run")]) == 0


def test_privacy_calculator_local_and_dpswgen(capsys):
    from swflow.privacy import analytic_gaussian_epsilon

    assert main(["privacy", "--method", "ldp-flow", "--epsilon", "4", "--delta", "1e-6", "--dataset-size", "1000",
                 "--dim", "8", "--json"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert local["noise_std"] == pytest.approx(2 * local["noise_multiplier"])
    assert analytic_gaussian_epsilon(noise_multiplier=local["noise_multiplier"], delta=1e-6) <= 4.0 + 1e-9
    base = ["privacy", "--dataset-size", "30000", "--dim", "8", "--epochs", "35", "--noise-multiplier", "0.67", "--json"]
    assert main(base + ["--method", "dpswgen"]) == 0
    gen = json.loads(capsys.readouterr().out)
    assert main(base + ["--method", "dpswflow-r"]) == 0
    assert json.loads(capsys.readouterr().out)["epsilon"] == gen["epsilon"]


def test_generate_ldp_flow_on_digits(tmp_path):
    out = tmp_path / "ldp"
    assert main(["generate", "--dataset", "digits", "--method", "ldp-flow", "--epsilon", "6", "--delta", "1e-5",
                 "--steps", "20", "--n-projections", "16", "--batch-size", "300", "--n-particles", "200",
                 "--out", str(out)]) == 0
    report = json.loads((out / "privacy.json").read_text())
    assert report["steps"] == 1 and report["epsilon"] <= 6.0 and report["sensitivity"] == pytest.approx(2.0)
    assert report["accountant"].startswith("analytic Gaussian") and (out / "flow.gif").exists()


def test_local_dp_calculator_and_run_agree_and_refuse_zero_out(tmp_path, capsys):
    rows = np.random.default_rng(0).normal(size=(400, 3)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    np.save(tmp_path / "rows.npy", rows)
    base = ["--epsilon", "4", "--delta", "1e-6"]
    assert main(["privacy", "--method", "ldp-flow", *base, "--dataset-size", "400", "--dim", "3", "--json"]) == 0
    calculator = json.loads(capsys.readouterr().out)
    assert main(["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "ldp-flow", *base, "--steps", "3",
                 "--n-particles", "50", "--out", str(tmp_path / "run")]) == 0
    run = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert run["noise_std"] == pytest.approx(calculator["noise_std"], rel=1e-12)
    assert run["noise_std"] == pytest.approx(2 * run["noise_multiplier"])  # sensitivity 2R, R = 1
    capsys.readouterr()
    for command in (["privacy", "--method", "ldp-flow", "--dataset-size", "400", "--dim", "3"],
                    ["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "ldp-flow", "--steps", "3",
                     "--out", str(tmp_path / "zero")],
                    ["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "ldp-sinkhorn-gen", "--steps", "3",
                     "--out", str(tmp_path / "zero-gen")]):
        assert main([*command, *base, "--adjacency", "zero-out"]) == 2
        assert "does not apply to a local release" in capsys.readouterr().err


def test_every_simulator_setting_is_settable_from_each_entry_point(tmp_path, capsys):
    from dataclasses import fields

    from swflow.pipeline.estimator import Synthesizer
    from swflow.pipeline.options import option_fields
    from swflow.simulate.flow import FlowConfig

    names = {f.name for f in option_fields(FlowConfig)}
    assert names == {f.name for f in fields(FlowConfig)} - {"steps"}  # steps come from --steps/--epochs
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    usage = capsys.readouterr().out
    assert all(f"--{n.replace('_', '-')} " in usage for n in names)
    # TOML [flow] is FlowConfig: its values reach the run's configuration
    np.save(tmp_path / "rows.npy", np.random.default_rng(0).normal(size=(40, 3)) / 4)
    config = tmp_path / "c.toml"
    config.write_text('[flow]\ndrift_clip = 0.5\nsmoothing = "sampled"\ndtype = "float64"\nn_particles = 30\n')
    assert main(["generate", "--config", str(config), "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "swf",
                 "--steps", "3", "--out", str(tmp_path / "run")]) == 0
    run = json.loads((tmp_path / "run" / "privacy.json").read_text())["run_config"]
    assert (run["drift_clip"], run["smoothing"], run["dtype"], run["n_particles"]) == (0.5, "sampled", "float64", 30)
    config.write_text('[shape]\nstep_size = 2.0\n')
    assert main(["generate", "--config", str(config), "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "swf",
                 "--steps", "3", "--out", str(tmp_path / "bad")]) == 2
    assert "it belongs in [flow]" in capsys.readouterr().err
    # the estimator takes the same names, and checks them before any budget is spent
    syn = Synthesizer("swf", steps=3, n_particles=30, drift_clip=0.5, smoothing="sampled", dtype="float64")
    assert syn.settings.flow_config(syn.settings.plan(40, 2)) == FlowConfig(steps=3, n_particles=30, drift_clip=0.5,
                                                                         smoothing="sampled", dtype="float64")
    with pytest.raises(ValueError, match="step size"):
        Synthesizer("dpswflow-r", epsilon=5.0, step_size=-1.0)
    # ... and so do the budget and the shape: every keyword has one home
    assert Synthesizer("dpswflow-r", epsilon=5.0, adjacency="zero-out", epochs=2.0).settings.shape.epochs == 2.0
    with pytest.raises(TypeError, match="unknown settings"):
        Synthesizer("dpswflow-r", epsilon=5.0, n_projection=10)


def test_encoded_files_declare_their_domain_and_plain_files_must_say(tmp_path, capsys):
    import h5py

    rows = np.random.default_rng(0).normal(size=(300, 4))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    with h5py.File(tmp_path / "latents.h5", "w") as f:  # as `swflow encode` writes them
        f.create_dataset("data", data=rows.astype(np.float32))
        f.attrs["domain"], f.attrs["norm_bound"], f.attrs["autoencoder"] = "sphere", 1.0, "digits"
    np.save(tmp_path / "rows.npy", rows.astype(np.float32))
    common = ["generate", "--method", "dpswflow-hist", "--epsilon", "5", "--delta", "1e-4", "--steps", "3",
              "--n-particles", "50"]
    assert main([*common, "--data", str(tmp_path / "latents.h5"), "--out", str(tmp_path / "a")]) == 0
    assert "declares its rows on the sphere" in capsys.readouterr().out
    report = json.loads((tmp_path / "a" / "privacy.json").read_text())
    assert report["run_config"]["manifold"] == "sphere"
    assert main([*common, "--data", str(tmp_path / "rows.npy"), "--out", str(tmp_path / "b")]) == 2
    assert "pass --manifold sphere" in capsys.readouterr().err
    assert main([*common, "--data", str(tmp_path / "rows.npy"), "--manifold", "sphere", "--out", str(tmp_path / "b")]) == 0


def test_one_run_plan_for_every_entry_point(capsys):
    """`privacy`, `generate` and the Synthesizer agree on steps and batch, because they all ask swflow.methods.plan."""
    from swflow.methods.registry import RunShape
    from swflow.methods.plan import resolve
    from swflow.privacy import PrivacySpec

    spec = PrivacySpec(epsilon=5.0)
    plan = resolve("dpswflow-r", RunShape(epochs=2.0, batch_size=100), dataset_size=899, dim=8, privacy=spec)
    assert (plan.steps, plan.batch_size, plan.n_projections, plan.step_size) == (math.ceil(2 * 899 / 100), 100, 70, 1.0)
    whole = resolve("dpsgd-sw-gen", RunShape(steps=5, batch_size=5000), dataset_size=899, dim=8, privacy=spec)
    assert whole.batch_size is None and whole.rows_per_step == 899 and whole.step_size is None
    # the release the accountant reads is part of the plan: 18 releases of 100 of 899 rows on 70 directions
    assert (plan.release.releases, plan.release.sample_size, plan.release.n_projections, plan.release.dim) == (
        plan.steps, 100, 70, 8)
    assert main(["privacy", "--method", "dpswflow-r", "--epsilon", "5", "--epochs", "2", "--batch-size", "100",
                 "--dataset-size", "899", "--dim", "8", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["steps"], report["batch_size"]) == (plan.steps, plan.batch_size)
    syn = Synthesizer("dpswflow-r", epsilon=5.0, epochs=2.0, batch_size=100)
    assert syn.settings.plan(899, 8) == plan
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        resolve("dpswflow-r", RunShape(batch_size=0), dataset_size=899, dim=8, privacy=spec)


def test_a_methods_own_options_reach_its_run(tmp_path):
    """dpsgd-sw-gen declares its clips beside its code; the flag, the TOML key and the calculator use them."""
    rows = np.random.default_rng(0).normal(size=(60, 3))
    np.save(tmp_path / "rows.npy", rows / np.linalg.norm(rows, axis=1, keepdims=True))
    config = tmp_path / "c.toml"
    config.write_text('[options]\nactivation_clip = 2.0\n')
    assert main(["generate", "--config", str(config), "--data", str(tmp_path / "rows.npy"), "--manifold", "sphere",
                 "--method", "dpsgd-sw-gen", "--epsilon", "5", "--steps", "2", "--batch-size", "20",
                 "--jacobian-clip", "0.5", "--n-particles", "30", "--out", str(tmp_path / "run")]) == 0
    report = json.loads((tmp_path / "run" / "privacy.json").read_text())
    assert report["sensitivity"] == pytest.approx(4 * 2.0 * 0.5 / 20)  # 4 max(M, R) L / b
    assert report["run_config"]["jacobian_clip"] == 0.5


def test_flags_a_toml_file_and_keywords_build_one_settings_tree(tmp_path, capsys):
    """The three ways in end at the same frozen swflow.pipeline.settings.Settings; a typed flag beats the file."""
    from swflow.cli import build_parser, with_config
    from swflow.cli._common import settings

    flags = ["--method", "dpsgd-sw-gen", "--epsilon", "2", "--delta", "1e-6", "--n-projections", "16",
             "--n-particles", "300", "--seed", "3", "--manifold", "sphere", "--checkpoint-every", "0",
             "--jacobian-clip", "0.5", "--adjacency", "zero-out"]
    parser = build_parser()
    typed = settings(parser.parse_args(["generate", "--data", "x.npy", "--out", "o", *flags]))
    config = tmp_path / "run.toml"
    config.write_text('[run]\nmethod = "dpsgd-sw-gen"\n[privacy]\nepsilon = 2.0\ndelta = 1e-6\nadjacency = "zero-out"\n'
                      '[shape]\nn_projections = 16\n[flow]\nn_particles = 300\nseed = 3\nmanifold = "sphere"\n'
                      'checkpoint_every = 0\n[options]\njacobian_clip = 0.5\n')
    argv = ["generate", "--config", str(config), "--data", "x.npy", "--out", "o"]
    from_file = settings(parser.parse_args(with_config(argv, parser.parse_args(argv))))
    keywords = Synthesizer("dpsgd-sw-gen", epsilon=2.0, delta=1e-6, n_projections=16, n_particles=300, seed=3,
                           manifold="sphere", jacobian_clip=0.5, adjacency="zero-out").settings
    assert typed == from_file == keywords
    assert typed.options.jacobian_clip == 0.5 and typed.privacy.adjacency == "zero-out"
    argv = [*argv, "--n-particles", "40"]
    assert settings(parser.parse_args(with_config(argv, parser.parse_args(argv)))).flow.n_particles == 40
    config.write_text('[shape]\nn_projections = "many"\n')
    assert main(["generate", "--config", str(config), "--data", "x.npy", "--out", str(tmp_path / "o")]) == 2
    assert f"{config}: [shape] n_projections = 'many': expected an integer" in capsys.readouterr().err


def test_nearest_public_decoder_outputs_only_public_images(tmp_path):
    """--decoder nearest-public: every decoded sample, at generate and at sample time, is an image of the public
    split (checked by brute force against the split), and the run records the decoder."""
    from autoencoders import load_autoencoder
    from swflow.io.splits import dataset_split

    out = tmp_path / "g"
    assert main(["generate", "--dataset", "digits", "--method", "dpswflow-hist", "--epsilon", "8", "--delta", "1e-5",
                 "--steps", "5", "--n-particles", "60", "--decoder", "nearest-public", "--out", str(out)]) == 0
    assert json.loads((out / "privacy.json").read_text())["run_config"]["decoder"] == "nearest-public"
    assert main(["sample", str(out), "--n", "30", "--out", str(tmp_path / "more")]) == 0
    _, meta = load_autoencoder("digits")
    images, _, halves = dataset_split("digits", meta)
    public = {image.tobytes() for image in to_pixels(images[halves.public])}  # as 8-bit pictures
    for path in (out / "samples.h5", tmp_path / "more" / "samples.h5"):
        with h5py.File(path) as f:
            decoded = f["images"][:]
        assert len(decoded) in (60, 30) and all(image.tobytes() in public for image in decoded)
    assert main(["generate", "--data", str(out / "samples.h5"), "--decoder", "nearest-public", "--method", "swf",
                 "--out", str(tmp_path / "x")]) == 2


def test_conditional_nearest_public_images_show_their_labels(tmp_path):
    """With --conditional, a sample labelled c is decoded among the public images of class c."""
    from autoencoders import load_autoencoder
    from swflow.io.splits import dataset_split

    out = tmp_path / "c"
    assert main(["generate", "--dataset", "digits", "--conditional", "--method", "dpswflow-hist", "--epsilon", "8",
                 "--delta", "1e-5", "--steps", "3", "--n-particles", "80", "--decoder", "nearest-public",
                 "--out", str(out)]) == 0
    _, meta = load_autoencoder("digits")
    images, labels, halves = dataset_split("digits", meta)
    label_of = {}
    for image, label in zip(to_pixels(images[halves.public]), labels[halves.public]):
        label_of.setdefault(image.tobytes(), set()).add(int(label))
    with h5py.File(out / "samples.h5") as f:
        decoded, sample_labels = f["images"][:], f["labels"][:]
    assert len(set(sample_labels.tolist())) == 10
    assert all(int(c) in label_of.get(image.tobytes(), ()) for image, c in zip(decoded, sample_labels))


def test_a_synthesizer_refuses_settings_it_cannot_honour():
    with pytest.raises(ValueError, match="no trajectory frames or checkpoints"):
        Synthesizer("swf", checkpoint_every=5)


@pytest.mark.parametrize("method", ["dpswflow-hist", "dpswgen"])
def test_generate_reads_no_flag_once_its_settings_exist(tmp_path, monkeypatch, method):
    # the flags become the frozen settings and a request; any read of a flag after that is an error here
    import argparse

    import swflow.cli.generate as generate
    from swflow.cli import build_parser

    class Watched(argparse.Namespace):
        def __getattribute__(self, name):
            if not name.startswith("_") and object.__getattribute__(self, "__dict__").get("_sealed"):
                raise AssertionError(f"the flag {name} was read after the settings were built")
            return object.__getattribute__(self, name)

    built = generate.settings

    def settings_then_seal(args, **kwargs):
        run = built(args, **kwargs)
        args.__dict__["_sealed"] = True
        return run

    monkeypatch.setattr(generate, "settings", settings_then_seal)
    rows = np.random.default_rng(0).normal(size=(300, 4)).astype(np.float32)
    np.save(tmp_path / "rows.npy", rows / np.linalg.norm(rows, axis=1, keepdims=True))
    args = build_parser().parse_args(["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "sphere",
                                      "--method", method, "--epsilon", "5", "--steps", "3", "--n-particles", "50",
                                      "--quiet", "--out", str(tmp_path / "run")])
    watched = Watched(**vars(args))
    assert generate.cmd_generate(watched) == 0 and watched.__dict__["_sealed"]
    assert json.loads((tmp_path / "run" / "privacy.json").read_text())["method"] == method
