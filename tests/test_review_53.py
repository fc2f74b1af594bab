"""Issue 53: what an outside review and a hostile probe found. Each test reproduced its finding on main first.

The forgeries edit a finished run's files the way the review did; every one of them was accepted before (the
samples bit-identical to the honest run's) and is refused now.
"""
import json
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from swflow.cli import main
from swflow.privacy import MechanismEvent, epsilon_from_events, statement


def _rows(path, n=400, d=4, seed=0):
    rows = np.random.default_rng(seed).normal(size=(n, d))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    np.save(path, rows.astype(np.float32))
    return path


def _run(tmp, method, *extra):
    rows = _rows(tmp / "rows.npy")
    run = tmp / method
    assert main(["generate", "--data", str(rows), "--manifold", "ball", "--method", method, "--epsilon", "1",
                 "--delta", "1e-5", "--steps", "5", "--n-particles", "60", "--quiet", "--out", str(run), *extra]) == 0
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review53")
    return {"dpswflow-hist": _run(tmp, "dpswflow-hist", "--pool-size", "32", "--bins", "16"),
            "dpswflow": _run(tmp, "dpswflow", "--pool-size", "16", "--n-projections", "8"),
            "ldp-flow": _run(tmp, "ldp-flow", "--n-projections", "8"),
            "dpswflow-r": _run(tmp, "dpswflow-r", "--n-projections", "8", "--batch-size", "100")}


def _copy(run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    return copy


def _consistent(report, scale_noise=1.0, **ledger_edits):
    """Edit the ledger, then recompute every field a careful forger would: ε, its target, the statement."""
    for e in report["ledger"]:
        e["noise_multiplier"] *= scale_noise
        e["noise_std"] *= scale_noise
        e.update(ledger_edits)
    main_event = report["ledger"][0]
    for key in ("noise_multiplier", "noise_std", "sensitivity", "n_projections", "dataset_size"):
        report[key] = main_event[key]
    report["sample_rate"] = main_event["sample_size"] / main_event["dataset_size"]
    events = tuple(MechanismEvent(**e) for e in report["ledger"])
    report["epsilon"] = report["target_epsilon"] = epsilon_from_events(
        events, delta=report["delta_accountant"], adjacency=report["adjacency"])
    report["statement"] = statement(report["epsilon"], report["delta"], report["accountant"], report["adjacency"])
    return report


def _refused(run, tmp_path, capsys, *, expect: str | None = None):
    assert main(["sample", str(run), "--n", "20", "--quiet", "--out", str(tmp_path / "more")]) == 2
    err = capsys.readouterr().err
    assert "swflow sample: error:" in err and "Traceback" not in err
    assert not (tmp_path / "more").exists()
    if expect:
        assert expect in err


def test_every_untouched_run_passes_its_checks(runs, tmp_path):
    for method, run in runs.items():
        assert main(["sample", str(run), "--n", "20", "--quiet", "--out", str(tmp_path / method)]) == 0


# -- 1. DP-SGD noise never comes from torch's global generator -------------------------------------------------
@pytest.mark.parametrize("secure", [False, True])
def test_dp_sgd_noise_is_not_replayed_by_a_global_torch_seed(secure):
    from autoencoders.adapt import dp_sgd_optimizer
    from swflow.core.config import AdaptSettings
    from swflow.privacy import NoiseSource

    def noise_of_one_step():
        torch.manual_seed(123)  # what any user code may do before a run
        parameter = torch.nn.Parameter(torch.zeros(64))
        optimizer = dp_sgd_optimizer([parameter], multiplier=1.0, settings=AdaptSettings(), batch=1, lr=0.1,
                                     noise=NoiseSource(None, secure=secure))
        parameter.summed_grad = torch.zeros(64)
        optimizer.add_noise()
        return parameter.grad.clone()

    first, second = noise_of_one_step(), noise_of_one_step()
    assert first.abs().sum() > 0 and not torch.equal(first, second)


def test_a_typed_privacy_seed_still_reproduces_the_dp_sgd_noise():
    from swflow.privacy import NoiseSource

    a, b = NoiseSource(5).torch_generator(), NoiseSource(5).torch_generator()
    assert torch.equal(torch.randn(8, generator=a), torch.randn(8, generator=b))
    assert not torch.equal(torch.randn(8, generator=NoiseSource(5).torch_generator()),
                           torch.randn(8, generator=NoiseSource(6).torch_generator()))


# -- 2 and 7. forgeries ------------------------------------------------------------------------------------------
def test_a_histogram_relabelled_as_dpswflow_with_ten_times_the_noise_is_refused(runs, tmp_path, capsys):
    run = _copy(runs["dpswflow-hist"], tmp_path)
    report = _consistent(json.loads((run / "privacy.json").read_text()), scale_noise=10)
    report["method"] = report["run_config"]["method"] = "dpswflow"
    (run / "privacy.json").write_text(json.dumps(report))
    _refused(run, tmp_path, capsys, expect="labelled 'dpswflow'")


def test_ten_times_the_noise_with_noise_added_to_one_cell_per_direction_is_refused(runs, tmp_path, capsys):
    run = _copy(runs["dpswflow-hist"], tmp_path)
    report = _consistent(json.loads((run / "privacy.json").read_text()), scale_noise=10)
    (run / "privacy.json").write_text(json.dumps(report))
    with h5py.File(run / "model.h5", "a") as f:  # the row sums then spread as the claimed noise would make them
        counts = f["release/noisy_counts"][:]
        counts[:, 0] += np.random.default_rng(0).normal(0, report["noise_std"] * 4, size=len(counts))
        f["release/noisy_counts"][...] = counts
    _refused(run, tmp_path, capsys, expect="quantile tables")


def test_half_the_directions_claimed_as_the_whole_release_is_refused(runs, tmp_path, capsys):
    from swflow.privacy.histogram import histogram_sensitivity

    run = _copy(runs["dpswflow-hist"], tmp_path)
    report = json.loads((run / "privacy.json").read_text())
    k = report["n_projections"] // 2
    sensitivity = histogram_sensitivity(k, adjacency="replace-one").value
    multiplier = report["noise_std"] / sensitivity
    report = _consistent(report, n_projections=k, sensitivity=sensitivity, noise_multiplier=multiplier)
    (run / "privacy.json").write_text(json.dumps(report))
    with h5py.File(run / "model.h5", "a") as f:
        counts = f["release/noisy_counts"][:k]
        del f["release/noisy_counts"]
        f["release/noisy_counts"] = counts
    _refused(run, tmp_path, capsys, expect="quantile tables")


def test_a_raised_dataset_size_is_refused(runs, tmp_path, capsys):
    for method in ("dpswflow-hist", "dpswflow-r"):
        run = _copy(runs[method], tmp_path / method)
        report = json.loads((run / "privacy.json").read_text())
        n = report["dataset_size"] * 100
        report = _consistent(report, dataset_size=n, **({"sample_size": n} if method == "dpswflow-hist" else {}))
        (run / "privacy.json").write_text(json.dumps(report))
        _refused(run, tmp_path, capsys, expect="rows")
        report["run_config"]["dataset_size"] = n  # the run configuration edited too: the counts still tell
        if method == "dpswflow-hist":
            (run / "privacy.json").write_text(json.dumps(report))
            _refused(run, tmp_path, capsys, expect="do not count")


@pytest.mark.parametrize("method", ["dpswflow", "ldp-flow"])
def test_ten_times_the_noise_of_a_one_shot_release_is_refused(runs, tmp_path, capsys, method):
    run = _copy(runs[method], tmp_path)
    report = _consistent(json.loads((run / "privacy.json").read_text()), scale_noise=10)
    (run / "privacy.json").write_text(json.dumps(report))
    _refused(run, tmp_path, capsys)


def test_an_edited_epsilon_below_its_own_target_is_refused(runs, tmp_path, capsys):
    run = _copy(runs["dpswflow"], tmp_path)
    report = json.loads((run / "privacy.json").read_text())
    target = report["target_epsilon"]
    report = _consistent(report, scale_noise=10)
    report["target_epsilon"] = target
    (run / "privacy.json").write_text(json.dumps(report))
    _refused(run, tmp_path, capsys, expect="far below the target")


def test_one_direction_cannot_be_checked_and_is_refused(tmp_path, capsys):
    run = _run(tmp_path, "dpswflow-hist", "--pool-size", "1", "--n-projections", "1", "--bins", "8")
    _refused(run, tmp_path, capsys, expect="one direction")


def test_evaluate_and_compare_report_only_a_verified_claim(runs, tmp_path, capsys):
    run = _copy(runs["dpswflow-hist"], tmp_path)
    reference = tmp_path / "held.npy"
    _rows(reference, seed=1)
    assert main(["evaluate", str(run), "--reference", str(reference), "--n-fid", "0", "--quiet"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["epsilon"] = 0.1  # metrics.json edited: compare takes the claim from the verified privacy.json
    (run / "metrics.json").write_text(json.dumps(metrics))
    capsys.readouterr()
    assert main(["compare", str(run)]) == 0
    assert "0.1 |" not in capsys.readouterr().out
    report = json.loads((run / "privacy.json").read_text())
    report["epsilon"] = 0.1
    (run / "privacy.json").write_text(json.dumps(report))
    for command in (["evaluate", str(run), "--reference", str(reference), "--n-fid", "0", "--quiet"],
                    ["compare", str(run)]):
        assert main(command) == 2
        assert "claims epsilon = 0.1" in capsys.readouterr().err


@pytest.mark.parametrize("garbage", ['"a list"', '[1, 2]', '{"epsilon": "0.5"}'])
def test_a_malformed_privacy_json_is_a_clear_error(runs, tmp_path, capsys, garbage):
    run = _copy(runs["dpswflow-hist"], tmp_path)
    if garbage.startswith("{"):
        report = json.loads((run / "privacy.json").read_text())
        report.update(json.loads(garbage))
        garbage = json.dumps(report)
    (run / "privacy.json").write_text(garbage)
    for command in (["sample", str(run), "--n", "5", "--quiet", "--out", str(tmp_path / "x")], ["compare", str(run)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert "error:" in err and "Traceback" not in err


def test_saved_synthesizers_with_more_noise_claimed_are_refused(tmp_path):
    from swflow.pipeline.estimator import Synthesizer
    from swflow.privacy.verify import ClaimMismatch

    rows = np.load(_rows(tmp_path / "rows.npy"))
    for method, options in (("dpswflow", dict(pool_size=8, n_projections=4)), ("dpswgen", dict(n_projections=4))):
        path = Synthesizer(method, epsilon=1.0, steps=4, n_particles=40, privacy_seed=0, **options).fit(rows).save(
            tmp_path / f"{method}.pt")
        blob = torch.load(path, weights_only=True)
        blob["report"] = _consistent(blob["report"], scale_noise=10)  # its target too: the settings still say 1
        torch.save(blob, path)
        with pytest.raises(ClaimMismatch):
            Synthesizer.load(path)


# -- 4. no exact private statistic in a run that says it publishes none ----------------------------------------
def test_a_population_run_with_private_labels_records_no_class_count(tmp_path):
    assert main(["generate", "--dataset", "digits", "--population", "skewed", "--conditional", "--method",
                 "dpswflow-hist", "--epsilon", "5", "--delta", "1e-4", "--steps", "3", "--n-particles", "60",
                 "--quiet", "--out", str(tmp_path / "r")]) == 0
    text = (tmp_path / "r" / "privacy.json").read_text()
    population = json.loads(text)["run_config"]["population"]
    assert set(population) == {"population", "proportions", "size", "drawn_from"}
    assert "class_counts" not in text and "rows_sha256" not in text


# -- 3. the demo shows only what is released, or public --------------------------------------------------------
def test_no_demo_picture_comes_from_a_noiseless_fit_on_private_rows(tmp_path, monkeypatch):
    import swflow.pipeline.fitting as fitting
    from autoencoders.encoded import encoded_split

    private = encoded_split("digits", "private").latents
    fits, real_fit = [], fitting.fit

    def watched(settings, data, **kwargs):
        fits.append((settings.privacy.private, data))
        return real_fit(settings, data, **kwargs)

    monkeypatch.setattr(fitting, "fit", watched)
    import swflow.pipeline.run as run_module

    monkeypatch.setattr(run_module, "fit", watched)
    assert main(["demo", "--out", str(tmp_path / "demo"), "--steps", "3", "--n-particles", "64"]) == 0
    assert any(is_private for is_private, _ in fits)
    private_rows = {row.tobytes() for row in private.numpy()}
    for is_private, data in fits:
        if not is_private:  # a noiseless fit may only see public rows
            assert not any(row.tobytes() in private_rows for row in data.numpy())
    report = json.loads((tmp_path / "demo" / "privacy.json").read_text())
    assert report["noise_seed_known"] is False


# -- 5. texts that say what ran ------------------------------------------------------------------------------------
def test_the_secure_caveat_names_the_noise_that_was_drawn(tmp_path):
    from swflow.privacy.noise import SECURE_CAVEAT

    rows = np.load(_rows(tmp_path / "rows.npy"))
    from swflow.pipeline.estimator import Synthesizer

    for count_noise, expected in (("gaussian", "floating-point attacks"), ("discrete-gaussian", "no floating-point")):
        report = Synthesizer("dpswflow-hist", epsilon=1.0, steps=2, n_particles=20, count_noise=count_noise,
                             secure_noise=True, pool_size=8, bins=8).fit(rows).privacy_report()
        caveat = report.notes["secure_noise_caveat"]
        assert expected in caveat and report.mechanism == count_noise
        assert (caveat == SECURE_CAVEAT) == (count_noise == "gaussian")
        assert "zCDP" not in caveat


# -- 9. errors about private rows say how many and what to do, never a value or an index ---------------------------
def test_errors_about_private_rows_show_no_value_and_no_index(tmp_path, capsys):
    rows = np.load(_rows(tmp_path / "rows.npy"))
    rows[7] *= 4.1672  # one row far outside the ball: its norm is a private value
    np.save(tmp_path / "big.npy", rows)
    rows[11, 2] = np.nan
    np.save(tmp_path / "nan.npy", rows)
    for name, secret in (("big.npy", "4.16"), ("nan.npy", "11")):
        assert main(["generate", "--data", str(tmp_path / name), "--manifold", "ball", "--method", "dpswflow-hist",
                     "--epsilon", "1", "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert "1 private row(s)" in err or "1 row(s)" in err
        assert secret not in err and "[" not in err


# -- 10-12. the probe's crashes, lost work and silently ignored settings ----------------------------------------------
@pytest.mark.parametrize("flags,expected", [(["--epochs", "0"], "epochs must be a whole number >= 1"),
                                            (["--batch-size", "0"], "batch_size must be a whole number >= 1"),
                                            (["--latent", "0"], "latent must be a whole number >= 1")])
def test_train_ae_refuses_zero_sizes_with_a_clear_error(tmp_path, capsys, flags, expected):
    assert main(["train-ae", "--dataset", "digits", "--name", "z", "--out-dir", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and not (tmp_path / "z.pt").exists()


def test_train_ae_never_replaces_a_finished_checkpoint_silently(tmp_path, capsys):
    (tmp_path / "mine.pt").write_bytes(b"finished weights")
    assert main(["train-ae", "--dataset", "digits", "--name", "mine", "--out-dir", str(tmp_path), "--epochs",
                 "1"]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert (tmp_path / "mine.pt").read_bytes() == b"finished weights"


def test_settings_that_would_be_ignored_are_refused(tmp_path, capsys):
    from autoencoders.encoded import encoded_split
    from swflow.core.config import AdaptSettings

    with pytest.raises(ValueError, match="adapt_share sets the decoder's adaptation, which is off"):
        AdaptSettings(adapt_share=0.5)
    assert AdaptSettings(adapt_decoder=True, adapt_share=0.5).adapt_share == 0.5
    with pytest.raises(ValueError, match="declared for fashion-mnist, not 'digits'"):
        encoded_split("digits", "private", population="footwear")
    rows = _rows(tmp_path / "rows.npy")
    assert main(["generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-hist", "--epsilon", "1",
                 "--adapt-share", "0.5", "--out", str(tmp_path / "r")]) == 2
    assert "turn on --adapt-decoder" in capsys.readouterr().err


def test_an_hdf5_group_where_rows_belong_is_a_clear_error(tmp_path, capsys):
    with h5py.File(tmp_path / "g.h5", "w") as f:
        f.create_group("data")
    assert main(["generate", "--data", str(tmp_path / "g.h5"), "--manifold", "ball", "--method", "dpswflow-r",
                 "--epsilon", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "is an HDF5 group" in err and "Traceback" not in err


def test_a_conditional_report_without_its_parts_is_a_clear_error(runs, tmp_path, capsys):
    run = _copy(runs["dpswflow-hist"], tmp_path)
    report = json.loads((run / "privacy.json").read_text())
    report["conditional"] = True
    (run / "privacy.json").write_text(json.dumps(report))
    assert main(["sample", str(run), "--n", "5", "--quiet", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "not a readable privacy report" in err and "Traceback" not in err


def test_a_saved_synthesizer_draws_the_same_images_for_the_same_seed_and_keeps_an_absolute_path(tmp_path,
                                                                                                 monkeypatch):
    from autoencoders import CHECKPOINT_DIR
    from swflow.io.data import example_images
    from swflow.pipeline.estimator import Synthesizer

    images, _ = example_images()
    monkeypatch.chdir(CHECKPOINT_DIR)
    syn = Synthesizer("dpswflow-hist", epsilon=2.0, delta=1e-5, autoencoder="digits-adv.pt", steps=5,
                      n_particles=50).fit(images)
    first, again = syn.sample(20, seed=3, progress=False), syn.sample(20, seed=3, progress=False)
    assert np.array_equal(first.latents, again.latents) and np.array_equal(np.asarray(first), np.asarray(again))
    path = syn.save(tmp_path / "s.pt")
    monkeypatch.chdir(tmp_path)  # another folder: the relative path would no longer resolve
    loaded = Synthesizer.load(path)
    assert np.array_equal(np.asarray(loaded.sample(20, seed=3, progress=False)), np.asarray(first))


# -- 8. every entry point refuses what one of them refuses ---------------------------------------------------------
def test_a_dataset_checkpoints_public_images_are_refused_as_private_by_the_command(tmp_path, capsys):
    from autoencoders import load_autoencoder
    from swflow.io.splits import dataset_split
    from swflow.pipeline.estimator import Synthesizer

    _, meta = load_autoencoder("digits-adv")
    images, _, halves = dataset_split("digits", meta)
    public = images[halves.public][:200]
    np.save(tmp_path / "pub.npy", public)
    assert main(["generate", "--images", str(tmp_path / "pub.npy"), "--checkpoint", "digits-adv", "--method",
                 "dpswflow-hist", "--epsilon", "1", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "200 of the 200 images" in err and "public images digits-adv was trained on" in err
    assert not (tmp_path / "r").exists()
    with pytest.raises(ValueError, match="200 of the 200 images"):  # the Synthesizer, through the same check
        Synthesizer("dpswflow-hist", epsilon=1.0, autoencoder="digits-adv").fit(public)


def test_train_ae_resumed_after_a_kill_is_bit_identical(tmp_path, monkeypatch):
    # finding 11: killed right after an epoch's checkpoint, the resumed training draws the batches the
    # uninterrupted one draws (the permutation stream is saved with the checkpoint), so the weights are the same
    import autoencoders.train as train
    from autoencoders import TrainConfig, train_autoencoder
    from swflow.io.data import load_digits, split_indices

    images, _ = load_digits()
    split = split_indices(len(images), seed=0)
    config = TrainConfig(architecture="digits8", latent=8, epochs=3, batch_size=64, patience=10)
    whole = train_autoencoder("ae", images, split, dataset="digits", config=config, out_dir=tmp_path / "whole",
                              progress=False)
    save = train._save_partial

    def save_then_die(*args, **kwargs):
        save(*args, **kwargs)
        raise KeyboardInterrupt  # the process dies right after the first epoch's checkpoint

    monkeypatch.setattr(train, "_save_partial", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        train_autoencoder("ae", images, split, dataset="digits", config=config, out_dir=tmp_path / "killed",
                          progress=False)
    assert (tmp_path / "killed" / "ae.partial.pt").exists()
    monkeypatch.setattr(train, "_save_partial", save)
    resumed = train_autoencoder("ae", images, split, dataset="digits", config=config, out_dir=tmp_path / "killed",
                                progress=False)
    assert resumed["weights_sha256"] == whole["weights_sha256"]
    assert resumed["validation_mse"] == whole["validation_mse"] and resumed["epochs_run"] == 3


def test_train_ae_killed_in_the_decoder_stage_resumes_there(tmp_path, monkeypatch, capsys):
    # finding 11: the rerun of the same command keeps the finished pixel-loss stage and resumes the decoder from
    # its partial (it retrained the first stage and then refused its own partial)
    import functools
    import os

    import autoencoders.adversarial as adversarial
    from swflow.io.data import load_digits

    images, _ = load_digits()
    np.save(tmp_path / "public.npy", images[:300])
    monkeypatch.setattr(adversarial, "AdversarialConfig",
                        functools.partial(adversarial.AdversarialConfig, eval_every=2, val_size=30))
    command = ["train-ae", "--images", str(tmp_path / "public.npy"), "--name", "mine", "--size", "8", "--epochs",
               "2", "--decoder-steps", "6", "--out-dir", str(tmp_path / "ckpt")]
    replace = os.replace

    def replace_then_die(src, dst):
        replace(src, dst)
        if Path(dst).name == "mine.partial.pt":
            raise KeyboardInterrupt  # killed right after the decoder stage's first save

    monkeypatch.setattr(os, "replace", replace_then_die)
    assert main(command) == 130
    monkeypatch.setattr(os, "replace", replace)
    first = (tmp_path / "ckpt" / "mine-mse.pt").read_bytes()
    restore, resumed_at = adversarial._restore, []

    def spy(*args, **kwargs):
        state = restore(*args, **kwargs)
        resumed_at.append(state["step"])
        return state

    monkeypatch.setattr(adversarial, "_restore", spy)
    assert main(command) == 0, capsys.readouterr().err
    assert "pixel-loss stage is finished" in capsys.readouterr().out
    assert resumed_at == [2]  # the decoder went on from its step-2 save
    assert (tmp_path / "ckpt" / "mine-mse.pt").read_bytes() == first  # the first stage was kept, not retrained
    assert (tmp_path / "ckpt" / "mine.pt").exists() and not (tmp_path / "ckpt" / "mine.partial.pt").exists()


def test_a_diverged_run_resumes_from_its_release_with_a_smaller_step(tmp_path, capsys):
    # finding 12: a diverged histogram run kept a checkpoint that no rerun could use but --overwrite, which
    # releases again. Its checkpoint is now rewound to the release: --resume with a smaller step flows again from
    # the same noisy counts, and the run is the one a first run at that step size makes (no second release)
    rows = np.random.default_rng(0).normal(size=(300, 4))
    np.save(tmp_path / "rows.npy", (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32))
    common = ["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "dpswflow-hist",
              "--epsilon", "1", "--steps", "30", "--n-particles", "200", "--checkpoint-every", "5", "--quiet",
              "--count-noise", "gaussian", "--privacy-seed", "11"]
    assert main([*common, "--step-size", "1000", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "diverged" in err and "--resume" in err and "no further privacy cost" in err
    assert not (tmp_path / "run").exists()
    assert main([*common, "--step-size", "1", "--out", str(tmp_path / "run"), "--resume"]) == 0
    assert main([*common, "--step-size", "1", "--out", str(tmp_path / "fresh")]) == 0
    with h5py.File(tmp_path / "run" / "samples.h5") as a, h5py.File(tmp_path / "fresh" / "samples.h5") as b:
        assert np.array_equal(a["latents"][:], b["latents"][:])
    with h5py.File(tmp_path / "run" / "model.h5") as a, h5py.File(tmp_path / "fresh" / "model.h5") as b:
        assert np.array_equal(a["release/noisy_counts"][:], b["release/noisy_counts"][:])
        assert json.loads(a.attrs["flow_config"])["step_size"] == 1
    resumed, fresh = (json.loads((tmp_path / d / "privacy.json").read_text()) for d in ("run", "fresh"))
    assert resumed["ledger"] == fresh["ledger"] and resumed["epsilon"] == fresh["epsilon"]
    assert main(["sample", str(tmp_path / "run"), "--n", "50", "--out", str(tmp_path / "more")]) == 0


def test_a_rewound_checkpoint_still_refuses_other_release_settings(tmp_path, capsys):
    rows = np.random.default_rng(1).normal(size=(300, 4))
    np.save(tmp_path / "rows.npy", (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32))
    common = ["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "dpswflow-hist",
              "--epsilon", "1", "--steps", "30", "--checkpoint-every", "5", "--quiet", "--count-noise", "gaussian",
              "--privacy-seed", "11", "--out", str(tmp_path / "run")]
    assert main([*common, "--n-particles", "200", "--step-size", "1000"]) == 2
    capsys.readouterr()
    assert main([*common, "--n-particles", "300", "--step-size", "1", "--resume"]) == 2
    assert "n_particles" in capsys.readouterr().err


def test_sample_on_a_conditional_run_says_where_its_flows_are(tmp_path, capsys):
    # finding 12: `swflow sample` on a conditional run blamed "made with another version"; it names the class flows
    run = tmp_path / "cond"
    assert main(["generate", "--dataset", "digits", "--conditional", "--method", "dpswflow-hist", "--epsilon", "8",
                 "--steps", "5", "--n-particles", "100", "--quiet", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["sample", str(run), "--n", "20", "--out", str(tmp_path / "more")]) == 2
    err = capsys.readouterr().err
    assert "conditional run keeps one flow per class" in err and "classes/class-C" in err
    assert "version" not in err
    assert main(["sample", str(run / "classes" / "class-3"), "--n", "20", "--out", str(tmp_path / "three")]) == 0


def test_sample_on_a_torchrun_run_says_it_records_no_releases(tmp_path, capsys):
    # a torchrun run (world_size in its run_config) writes samples but no model.h5: the message says so
    rows = np.random.default_rng(2).normal(size=(200, 3))
    np.save(tmp_path / "rows.npy", (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32))
    run = tmp_path / "ranks"
    assert main(["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "sphere", "--method",
                 "dpswflow-hist", "--epsilon", "2", "--steps", "5", "--n-particles", "50", "--quiet",
                 "--out", str(run)]) == 0
    (run / "model.h5").unlink()  # what rank 0 of a torchrun run leaves: no release log
    report = json.loads((run / "privacy.json").read_text())
    report["run_config"].update(world_size=2, shard_mode="exact")
    (run / "privacy.json").write_text(json.dumps(report))
    capsys.readouterr()
    assert main(["sample", str(run), "--n", "20", "--out", str(tmp_path / "more")]) == 2
    err = capsys.readouterr().err
    assert "torchrun run writes its samples, not its releases" in err and "version" not in err


def test_the_copy_rate_against_private_images_sits_in_an_owner_only_section(tmp_path):
    # what to build: the copy rate and its threshold are computed against the private split without noise, so
    # metrics.json files them under owner_only, labelled; nothing at its top level comes from private rows
    run = tmp_path / "run"
    assert main(["generate", "--dataset", "digits", "--method", "dpswflow-hist", "--epsilon", "4", "--steps", "5",
                 "--n-particles", "100", "--quiet", "--out", str(run)]) == 0
    assert main(["evaluate", str(run), "--n-fid", "0", "--quiet"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert "copy_rate" not in metrics and "copy_threshold" not in metrics
    owner = metrics["owner_only"]
    assert owner["note"].startswith("OWNER ONLY") and 0 <= owner["copy_rate"] <= 1 and owner["copy_threshold"] > 0
    assert "private split" in owner["copy_note"]
