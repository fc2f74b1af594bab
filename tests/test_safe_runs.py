"""Runs that never lose data and never change their privacy silently (issue 16): one test per case."""
import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
import torch

from swflow.cli import main
from swflow.simulate.flow import ParticleFlow


def _rows(path, n=300, d=3, seed=0):
    rows = np.random.default_rng(seed).normal(size=(n, d))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    np.save(path, rows.astype(np.float32))
    return path


def _generate(rows, out, *extra):
    return main(["generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-r", "--epsilon", "8", "--steps", "12",
                 "--batch-size", "100", "--n-projections", "8", "--n-particles", "200", "--checkpoint-every", "2",
                 "--privacy-seed", "1", "--out", str(out), *extra])


@pytest.fixture
def finished(tmp_path):
    rows = _rows(tmp_path / "rows.npy")
    out = tmp_path / "run"
    assert _generate(rows, out) == 0
    return rows, out


def _snapshot(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("bad", [["--epsilon", "1e-9"], ["--delta", "0.5"], ["nan-data"]])
def test_overwrite_that_fails_leaves_the_finished_run_untouched(finished, bad, tmp_path, capsys):
    rows, out = finished
    before = _snapshot(out)
    if bad == ["nan-data"]:
        broken = np.load(rows)
        broken[3, 1] = np.nan
        np.save(tmp_path / "nan.npy", broken)
        rows, bad = tmp_path / "nan.npy", []
    assert _generate(rows, out, "--overwrite", *bad) == 2
    assert "error:" in capsys.readouterr().err
    assert _snapshot(out) == before
    assert not (tmp_path / ".run.partial").exists()  # nothing half-made is left behind


def test_overwrite_never_deletes_inputs_or_foreign_directories(tmp_path, capsys):
    sandbox = tmp_path / "sbx"
    sandbox.mkdir()
    rows = _rows(sandbox / "rows.npy")
    (sandbox / "notes.txt").write_text("mine")
    assert _generate(rows, sandbox, "--overwrite") == 2
    assert "holds the input" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    assert _generate(rows, other, "--overwrite") == 2
    assert "only swflow run directories" in capsys.readouterr().err
    assert (sandbox / "rows.npy").exists() and (sandbox / "notes.txt").read_text() == "mine"
    assert (other / "notes.txt").read_text() == "mine"


def test_sample_into_its_own_run_is_refused(finished, capsys):
    _, out = finished
    before = _snapshot(out)
    assert main(["sample", str(out), "--n", "10", "--out", str(out), "--overwrite"]) == 2
    assert "holds the input" in capsys.readouterr().err
    assert _snapshot(out) == before


def test_overwrite_replaces_a_run_whole_and_drops_stale_metrics(finished):
    rows, out = finished
    (out / "metrics.json").write_text("{}")  # derived from the old run
    assert _generate(rows, out, "--overwrite", "--epsilon", "6") == 0
    assert not (out / "metrics.json").exists()
    assert json.loads((out / "privacy.json").read_text())["target_epsilon"] == 6.0


def _interrupt_at(monkeypatch, step):
    original = ParticleFlow.step_once

    def interrupted(self):
        if self.step == step:
            raise KeyboardInterrupt
        return original(self)

    monkeypatch.setattr(ParticleFlow, "step_once", interrupted)
    return original


@pytest.mark.parametrize("change,expected", [(["--epsilon", "3"], "epsilon is 3.0 now but 8.0"),
                                             (["data"], "private rows differ"),
                                             (["--n-particles", "150"], "n_particles is 150 now but 200")])
def test_resume_refuses_other_privacy_settings_or_data(tmp_path, monkeypatch, capsys, change, expected):
    rows = _rows(tmp_path / "rows.npy")
    out = tmp_path / "run"
    original = _interrupt_at(monkeypatch, 7)
    assert _generate(rows, out) == 130  # Ctrl-C: one line saying how to resume, no traceback
    assert "interrupted: rerun the same command with --resume" in capsys.readouterr().err
    monkeypatch.setattr(ParticleFlow, "step_once", original)
    assert (tmp_path / ".run.partial" / "checkpoint.pt").exists() and not out.exists()
    if change == ["data"]:
        rows, change = _rows(tmp_path / "other.npy", seed=5), []
    assert _generate(rows, out, "--resume", *change) == 2
    assert expected in capsys.readouterr().err
    assert _generate(tmp_path / "rows.npy", out) == 2  # an interrupted run is not discarded silently
    assert "--resume" in capsys.readouterr().err
    assert _generate(tmp_path / "rows.npy", out, "--resume") == 0  # the run's own settings continue it
    assert json.loads((out / "privacy.json").read_text())["steps"] == 12


def test_resume_of_a_finished_run_is_refused(finished, capsys):
    rows, out = finished
    before = _snapshot(out)
    assert _generate(rows, out, "--resume") == 2
    assert "finished run" in capsys.readouterr().err
    assert _snapshot(out) == before


def test_a_diverging_flow_is_an_error_not_a_result(tmp_path, capsys):
    rows = _rows(tmp_path / "rows.npy")
    assert main(["generate", "--data", str(rows), "--manifold", "ball", "--method", "swf", "--steps", "30", "--step-size", "1e6",
                 "--n-projections", "8", "--n-particles", "100", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "diverged at step" in err and "--step-size" in err
    assert not (tmp_path / "run").exists()


def test_privacy_and_generate_accept_and_refuse_the_same(tmp_path, capsys):
    rows = _rows(tmp_path / "rows.npy")
    shape = ["--dataset-size", "300", "--dim", "3", "--steps", "5"]
    assert main(["privacy", "--method", "swf", "--epsilon", "5", *shape]) == 2
    assert main(["generate", "--data", str(rows), "--manifold", "ball", "--method", "swf", "--epsilon", "5", "--steps", "5",
                 "--out", str(tmp_path / "a")]) == 2
    assert capsys.readouterr().err.count("swf is not private") == 2
    # a batch covering every row means full-batch releases for both
    assert main(["privacy", "--method", "dpswflow-r", "--epsilon", "5", "--batch-size", "500", *shape, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sample_rate"] == 1.0
    # epsilon = inf runs the method without noise and says so
    assert main(["generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-r", "--epsilon", "inf", "--steps", "3",
                 "--n-particles", "50", "--out", str(tmp_path / "free")]) == 0
    report = json.loads((tmp_path / "free" / "privacy.json").read_text())
    assert report["private"] is False and "not differentially private" in report["statement"]


def test_input_types_follow_one_rule(tmp_path, capsys):
    np.save(tmp_path / "complex.npy", np.ones((20, 2), dtype=np.complex64))
    assert main(["generate", "--data", str(tmp_path / "complex.npy"), "--manifold", "ball", "--method", "swf", "--steps", "2",
                 "--out", str(tmp_path / "c")]) == 2
    assert "complex" in capsys.readouterr().err
    np.save(tmp_path / "ints.npy", np.eye(20, 2, dtype=np.int64))
    assert main(["generate", "--data", str(tmp_path / "ints.npy"), "--manifold", "ball", "--method", "swf", "--steps", "2",
                 "--n-particles", "20", "--out", str(tmp_path / "i")]) == 0


def test_every_method_has_a_working_default_length(tmp_path):
    rows = _rows(tmp_path / "rows.npy")
    assert main(["generate", "--data", str(rows), "--manifold", "ball", "--epsilon", "10", "--n-particles", "50", "--n-projections", "8",
                 "--out", str(tmp_path / "default")]) == 0
    report = json.loads((tmp_path / "default" / "privacy.json").read_text())
    assert report["steps"] == 42  # dpswflow-r: 35 epochs of 300 rows in batches of 250


@pytest.mark.parametrize("case", ["batch-zero", "out-is-file", "one-row-generator", "truncated-samples",
                                  "device-bogus", "device-cuda", "huge-particles", "huge-sample", "toml-float",
                                  "toml-bool", "out-empty", "out-inside-run", "epsilon-huge", "bad-privacy-json",
                                  "no-budget", "bins-huge", "pool-huge", "steps-huge", "h5-norm-bound-array"])
def test_bad_input_is_a_clear_error_without_traceback(tmp_path, capsys, case):
    rows = _rows(tmp_path / "rows.npy")
    base = ["generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow", "--epsilon", "5", "--steps", "3",
            "--n-projections", "4", "--out", str(tmp_path / "x")]
    if case == "device-bogus":
        argv = [*base, "--device", "bogus"]
    elif case == "device-cuda":
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
        argv = [*base, "--device", "cuda"]
    elif case == "huge-particles":
        argv = [*base, "--n-particles", "1000000000"]
    elif case in ("toml-float", "toml-bool"):
        (tmp_path / "c.toml").write_text("[flow]\nn_particles = 300.5\n" if case == "toml-float" else
                                         "[shape]\nsteps = true\n")
        argv = [*base, "--config", str(tmp_path / "c.toml")]
    elif case == "no-budget":
        argv = [a for i, a in enumerate(base) if "--epsilon" not in base[max(i - 1, 0):i + 1]]
    elif case in ("bins-huge", "pool-huge"):  # issue 37: a memory error after the settings were accepted
        argv = [*base[:base.index("--method")], "--method", "dpswflow-hist",
                *base[base.index("--method") + 2:], "--bins" if case == "bins-huge" else "--pool-size",
                "1000000000" if case == "bins-huge" else "10000000"]
    elif case == "steps-huge":
        argv = [*base, "--steps", "1000000000000"]
    elif case == "h5-norm-bound-array":
        with h5py.File(tmp_path / "rows.h5", "w") as f:
            f["data"] = np.load(rows)
            f.attrs["domain"], f.attrs["norm_bound"] = "ball", np.array([1.0, 2.0])
        argv = [*base]
        argv[argv.index("--data") + 1] = str(tmp_path / "rows.h5")
        argv.remove("--manifold")
        argv.remove("ball")
    elif case == "out-empty":
        argv = [*base[:-1], ""]
    elif case == "epsilon-huge":
        argv = [*base]
        argv[argv.index("--epsilon") + 1] = "1e7"
    elif case in ("huge-sample", "out-inside-run", "bad-privacy-json"):
        assert _generate(rows, tmp_path / "run") == 0
        capsys.readouterr()
        argv = ["sample", str(tmp_path / "run"), "--n", "10000000000", "--out", str(tmp_path / "x")]
        if case == "out-inside-run":
            argv = ["sample", str(tmp_path / "run"), "--n", "10", "--out", str(tmp_path / "run" / "sub")]
        if case == "bad-privacy-json":
            (tmp_path / "run" / "privacy.json").write_text("{not json")
            argv[3] = "10"
    elif case == "batch-zero":
        argv = ["generate", "--data", str(rows), "--manifold", "ball", "--steps", "2", "--batch-size", "0", "--epsilon", "5",
                "--out", str(tmp_path / "x")]
    elif case == "out-is-file":
        (tmp_path / "file").write_text("")
        argv = ["generate", "--data", str(rows), "--manifold", "ball", "--method", "swf", "--steps", "2", "--out", str(tmp_path / "file")]
    elif case == "one-row-generator":
        np.save(tmp_path / "one.npy", np.load(rows)[:1])
        argv = ["generate", "--data", str(tmp_path / "one.npy"), "--manifold", "ball", "--method", "dpswgen", "--epsilon", "5", "--delta",
                "0.1", "--steps", "2", "--out", str(tmp_path / "g")]
    else:
        assert _generate(rows, tmp_path / "run") == 0
        data = (tmp_path / "run" / "samples.h5").read_bytes()
        (tmp_path / "run" / "samples.h5").write_bytes(data[: len(data) // 3])
        argv = ["evaluate", str(tmp_path / "run"), "--reference", str(rows)]
        capsys.readouterr()
    assert main(argv) == 2, capsys.readouterr()
    err = capsys.readouterr().err
    assert err.startswith(f"swflow {argv[0]}: error:") and "Traceback" not in err
    if case == "no-budget":  # a settings error in the command line's words
        assert "give --epsilon or --noise-multiplier" in err
    leftovers = {p.name for p in tmp_path.iterdir()} - {"rows.npy", "file", "one.npy", "run", "c.toml", "rows.h5"}
    assert not leftovers, leftovers  # no empty output folders


@pytest.mark.slow
def test_killed_again_and_again_the_resumed_run_is_bit_identical(tmp_path):
    """SIGKILL at random moments, resume each time: the result equals an uninterrupted run's."""
    rows = _rows(tmp_path / "rows.npy", n=2000, d=4)
    argv = [sys.executable, "-m", "swflow.cli", "generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-r",
            "--epsilon", "8", "--steps", "1500", "--batch-size", "200", "--n-projections", "16",
            "--n-particles", "3000", "--checkpoint-every", "7", "--privacy-seed", "3", "--seed", "2"]
    subprocess.run([*argv, "--out", str(tmp_path / "clean")], check=True, capture_output=True)
    rng = np.random.default_rng(0)
    out, kills = tmp_path / "killed", 0
    checkpoint = tmp_path / ".killed.partial" / "checkpoint.pt"
    # kill after random steps, read from the run's own checkpoint (not from a clock: any machine load kills alike)
    for target in sorted(rng.integers(100, 1400, size=3)):
        resume = ["--resume"] if checkpoint.parent.exists() else []
        proc = subprocess.Popen([*argv, "--out", str(out), *resume], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        while proc.poll() is None and _checkpoint_step(checkpoint) < target:
            time.sleep(0.02)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
    if not (out / "privacy.json").exists():
        subprocess.run([*argv, "--out", str(out), "--resume"], check=True, capture_output=True)
    assert kills == 3
    with h5py.File(tmp_path / "clean" / "samples.h5") as a, h5py.File(out / "samples.h5") as b:
        assert np.array_equal(a["latents"][:], b["latents"][:])
    clean = json.loads((tmp_path / "clean" / "privacy.json").read_text())
    killed = json.loads((out / "privacy.json").read_text())
    assert clean["epsilon"] == killed["epsilon"] and clean["ledger"] == killed["ledger"]


def _checkpoint_step(path) -> int:
    """The step of a run's checkpoint (-1 while there is none): files are replaced whole, so any read is a step."""
    import torch

    try:
        return int(torch.load(path, weights_only=True)["step"])
    except (FileNotFoundError, RuntimeError, EOFError, KeyError):
        return -1


def test_sample_streams_large_n_in_chunks_with_flat_memory(finished, tmp_path):
    from swflow.methods.model import FlowModel

    _, run = finished
    model = FlowModel.from_run_dir(run)
    chunks = list(model.sample_chunks(25, seed=4, chunk=10))
    assert [len(c) for c in chunks] == [10, 10, 5]
    assert torch_equal(chunks[0], model.sample(10, seed=4))  # small n is unchanged by chunking
    assert not torch_equal(chunks[1], chunks[0])  # each chunk has its own seed
    assert main(["sample", str(run), "--n", "120000", "--out", str(tmp_path / "big")]) == 0
    with h5py.File(tmp_path / "big" / "samples.h5") as f:
        assert f["latents"].shape == (120_000, 3) and np.isfinite(f["latents"][-5:]).all()


def torch_equal(a, b):
    import torch

    return torch.equal(a, b)


def test_a_run_killed_between_its_outputs_and_the_swap_is_never_run_again(finished, tmp_path, capsys):
    rows, out = finished
    staging = tmp_path / ".run.partial"
    os.replace(out, staging)  # as if killed right before the final swap
    before = _snapshot(staging)
    assert _generate(rows, out, "--resume") == 2
    assert "nothing was run again" in capsys.readouterr().err
    assert _snapshot(out) == before and not staging.exists()


def test_a_second_writer_on_a_live_run_is_refused(tmp_path):
    """Two real processes on one --out: the second is refused while the first runs (plain, with --resume,
    with --overwrite), never advised to resume it, and the first run's files stay its own."""
    import torch

    rows = _rows(tmp_path / "rows.npy", n=2000, d=4)
    argv = [sys.executable, "-m", "swflow.cli", "generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-r",
            "--epsilon", "8", "--steps", "100000", "--batch-size", "200", "--n-projections", "16",
            "--n-particles", "3000", "--checkpoint-every", "5", "--out", str(tmp_path / "run")]
    first = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        checkpoint = tmp_path / ".run.partial" / "checkpoint.pt"
        while not checkpoint.exists() and first.poll() is None:  # no deadline: a loaded machine starts late
            time.sleep(0.05)
        assert checkpoint.exists() and first.poll() is None, "the first run did not start"
        for extra in ([], ["--resume"], ["--overwrite"]):
            second = subprocess.run([*argv, *extra], capture_output=True, text=True)
            assert second.returncode == 2, second.stderr
            assert f"another swflow process (pid {first.pid}) is writing" in second.stderr
            assert "pass --resume to continue" not in second.stderr
            assert "a table run, one release, is simply run again" in second.stderr  # table runs refuse --resume
        assert first.poll() is None and checkpoint.exists()
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    state = torch.load(checkpoint, weights_only=True)
    assert sum(e["count"] for e in state["target"]["ledger"]) == state["step"]  # one writer's releases only


def test_resume_carries_the_privacy_seed_and_refuses_another(tmp_path, monkeypatch, capsys):
    rows = _rows(tmp_path / "rows.npy")
    out = tmp_path / "run"
    argv = ["generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-r", "--epsilon", "8", "--steps", "12",
            "--batch-size", "100", "--n-projections", "8", "--n-particles", "200", "--checkpoint-every", "2",
            "--out", str(out)]
    original = _interrupt_at(monkeypatch, 7)
    assert main([*argv, "--privacy-seed", "2"]) == 130
    monkeypatch.setattr(ParticleFlow, "step_once", original)
    assert main([*argv, "--resume", "--privacy-seed", "3"]) == 2
    assert "noise comes from --privacy-seed 2, not --privacy-seed 3" in capsys.readouterr().err
    assert main([*argv, "--resume"]) == 0  # no seed typed: the checkpoint's stream continues
    resumed = json.loads((out / "privacy.json").read_text())
    assert resumed["noise_seed_known"] is True  # seed 2 drew the noise, whoever resumed it
    clean = tmp_path / "clean"
    assert main([*argv[:-1], str(clean), "--privacy-seed", "2"]) == 0
    with h5py.File(clean / "samples.h5") as a, h5py.File(out / "samples.h5") as b:
        assert np.array_equal(a["latents"][:], b["latents"][:])


@pytest.mark.parametrize("tamper", ["epsilon", "noise_multiplier", "accountant", "sigma", "releases"])
def test_sample_rederives_the_claim_and_refuses_an_edited_run(finished, tmp_path, capsys, tamper):
    _, run = finished
    if tamper in ("epsilon", "noise_multiplier", "accountant"):
        report = json.loads((run / "privacy.json").read_text())
        report[tamper] = {"epsilon": 0.1, "accountant": "Opacus RDP, Poisson add/remove"}.get(tamper)
        report[tamper] = report[tamper] or json.loads((run / "privacy.json").read_text())[tamper] * 3
        if tamper == "noise_multiplier":  # a consistent-looking edit of the ledger too
            for e in report["ledger"]:
                e["noise_multiplier"] *= 3
        (run / "privacy.json").write_text(json.dumps(report))
    else:
        with h5py.File(run / "model.h5", "a") as f:
            if tamper == "sigma":
                f["sigma"][3] = 0.0  # one release claimed noisy, recorded noise-free
            else:
                for name in ("steps", "theta", "released", "sigma"):
                    f[name].resize(f[name].shape[0] - 1, axis=0)
    assert main(["sample", str(run), "--n", "20", "--out", str(tmp_path / "more")]) == 2
    err = capsys.readouterr().err
    assert "swflow sample: error:" in err and "Traceback" not in err
    assert not (tmp_path / "more").exists()


def test_a_saved_synthesizer_with_an_edited_claim_is_refused(tmp_path):
    import torch

    from swflow.pipeline.estimator import Synthesizer
    from swflow.privacy.verify import ClaimMismatch

    rows = np.load(_rows(tmp_path / "rows.npy"))
    path = Synthesizer("dpswflow", epsilon=4.0, steps=5, n_projections=4, pool_size=6, n_particles=50,
                       privacy_seed=0).fit(rows).save(tmp_path / "m.pt")
    blob = torch.load(path, weights_only=True)
    blob["report"]["epsilon"] = 0.5
    torch.save(blob, path)
    with pytest.raises(ClaimMismatch, match="claims epsilon = 0.5"):
        Synthesizer.load(path)


def test_one_dimensional_rows_run_to_the_end(tmp_path):
    np.save(tmp_path / "line.npy", np.random.default_rng(0).uniform(-0.9, 0.9, size=(300, 1)).astype(np.float32))
    assert main(["generate", "--data", str(tmp_path / "line.npy"), "--manifold", "ball", "--method", "dpswflow-r", "--epsilon", "5",
                 "--steps", "4", "--n-projections", "2", "--n-particles", "100", "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "samples.png").exists()


def test_full_batch_clipped_gradient_generator():
    from swflow.pipeline.estimator import Synthesizer

    rows = np.random.default_rng(0).normal(size=(3, 2))
    rows /= np.linalg.norm(rows, axis=1, keepdims=True) * 1.01
    syn = Synthesizer("dpsgd-sw-gen", epsilon=1.0, batch_size=3, steps=2, delta=1e-2).fit(rows)
    assert syn.privacy_report().batch_size is None and syn.privacy_report().epsilon <= 1.0


def test_no_row_above_the_bound_and_no_claim_above_the_target():
    import torch

    from swflow.privacy import (NoiseSource, PrivacyLedger, PrivacySpec, PrivateTarget, ReleasePlan, SensitivityBound,
                                calibrate)

    rows = torch.nn.functional.normalize(torch.randn(50, 3, dtype=torch.float64), dim=1) * (1 + 5e-6)
    spec = PrivacySpec(epsilon=1e-9, delta=1e-5)
    cal = calibrate(spec, ReleasePlan(releases=1, dataset_size=50, sample_size=None, n_projections=3, dim=3))
    assert cal.epsilon <= 1e-9
    target = PrivateTarget(rows, cal, noise=NoiseSource(0), ledger=PrivacyLedger())
    largest, sigma = target.release_statistic(  # zero sensitivity: the exact largest norm (a test-only reading)
        lambda batch: batch.norm(dim=1).max().reshape(1), SensitivityBound("spectral", 0.0, 0.0, 0.0))
    assert sigma == 0.0 and float(largest[0]) <= 1.0


def test_a_foreign_staging_folder_is_never_deleted(finished, tmp_path, capsys):
    _, run = finished
    foreign = tmp_path / ".more.partial"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(["sample", str(run), "--n", "10", "--out", str(tmp_path / "more")]) == 2
    assert "was not made by swflow" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text() == "mine"


@pytest.fixture(scope="module")
def histogram_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hist")
    rows = _rows(tmp / "rows.npy")
    run = tmp / "hist"
    assert main(["generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-hist", "--epsilon", "1",
                 "--delta", "1e-5", "--steps", "5", "--n-particles", "60", "--pool-size", "64", "--bins", "16",
                 "--out", str(run)]) == 0
    return run


def _copy_run(run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    return copy


@pytest.mark.parametrize("forgery", ["conditional keys on a plain run", "statement only",
                                     "noise x10 with epsilon recomputed", "unknown key"])
def test_claims_that_used_to_skip_their_checks_are_refused(histogram_run, tmp_path, capsys, forgery):
    """The outside review's forgeries (issue 37): each was accepted by `swflow sample` and written forward."""
    from swflow.privacy import epsilon_from_events, MechanismEvent, statement

    run = _copy_run(histogram_run, tmp_path)
    report = json.loads((run / "privacy.json").read_text())
    if forgery == "conditional keys on a plain run":
        report.update(conditional=True, per_class=[], ledgers={}, composition="x", epsilon=0.01)
    elif forgery == "statement only":
        report["statement"] = report["statement"].replace(f"({report['epsilon']:.3f},", "(0.010,")
    elif forgery == "noise x10 with epsilon recomputed":  # self-consistent: only the released counts can tell
        for e in report["ledger"]:
            e["noise_multiplier"] *= 10
            e["noise_std"] *= 10
        report["noise_multiplier"] *= 10
        report["noise_std"] *= 10
        events = tuple(MechanismEvent(**e) for e in report["ledger"])
        report["epsilon"] = epsilon_from_events(events, delta=report["delta_accountant"], adjacency="replace-one")
        report["target_epsilon"] = report["epsilon"]  # the claim's own target too: only the counts can tell
        report["statement"] = statement(report["epsilon"], report["delta"], report["accountant"], report["adjacency"])
    else:
        report["verified_by"] = "me"
    (run / "privacy.json").write_text(json.dumps(report))
    assert main(["sample", str(run), "--n", "20", "--out", str(tmp_path / "more")]) == 2
    err = capsys.readouterr().err
    assert "swflow sample: error:" in err and "Traceback" not in err
    assert not (tmp_path / "more").exists()
    if forgery == "noise x10 with epsilon recomputed":
        assert "far less noise than the claimed" in err


def test_an_untouched_histogram_run_passes_its_own_checks(histogram_run, tmp_path):
    run = _copy_run(histogram_run, tmp_path)
    assert main(["sample", str(run), "--n", "20", "--out", str(tmp_path / "more")]) == 0
    assert json.loads((tmp_path / "more" / "privacy.json").read_text())["epsilon"] <= 1.0


def test_a_huge_epsilon_is_calibrated_at_once_not_crept_towards():
    # epsilon between 2^19 and the 10^6 maximum made the analytic Gaussian's epsilon inf and calibration creep
    from swflow.privacy import PrivacySpec, ReleasePlan, calibrate

    for eps in (6e5, 1e6):
        cal = calibrate(PrivacySpec(epsilon=eps, delta=1e-6), ReleasePlan(releases=1, dataset_size=3000,
                                                                           sample_size=None, n_projections=64, dim=8))
        assert 0.99 * eps <= cal.epsilon <= eps


def test_a_full_disk_mid_run_stops_cleanly_and_resumes_without_spending_twice(tmp_path, monkeypatch, capsys):
    """Issue 37: a full disk mid-run gave a traceback and a segfault after the release. Now every write checks the
    room first, so the run stops between writes (exit 2, no traceback), keeps its last checkpoint, and --resume
    finishes it with the ledger and particles of an uninterrupted run."""
    from collections import namedtuple

    import swflow.io.resources as resources

    real_disk_usage = resources.shutil.disk_usage
    rows = _rows(tmp_path / "rows.npy")
    argv = ["generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-r", "--epsilon", "5",
            "--steps", "30", "--n-projections", "4", "--n-particles", "200", "--privacy-seed", "3",
            "--checkpoint-every", "5", "--record-every", "1"]
    assert main([*argv, "--out", str(tmp_path / "whole")]) == 0
    usage = namedtuple("usage", "total used free")
    checks = {"n": 0}

    def disk_fills_up(path):
        checks["n"] += 1
        free = 1 << 40 if checks["n"] < 25 else 1 << 20  # the 25th write finds 1 MiB left
        return usage(1 << 41, 0, free)

    monkeypatch.setattr(resources.shutil, "disk_usage", disk_fills_up)
    assert main([*argv, "--out", str(tmp_path / "cut")]) == 2
    err = capsys.readouterr().err
    assert "not enough free disk" in err and "--resume" in err and "Traceback" not in err
    staging = tmp_path / ".cut.partial"
    step = torch.load(staging / "checkpoint.pt", weights_only=True)["step"]
    assert 0 < step < 30 and not (tmp_path / "cut").exists()
    monkeypatch.setattr(resources.shutil, "disk_usage", real_disk_usage)
    assert main([*argv, "--out", str(tmp_path / "cut"), "--resume"]) == 0
    whole, cut = (json.loads((tmp_path / d / "privacy.json").read_text()) for d in ("whole", "cut"))
    assert cut["ledger"] == whole["ledger"] and cut["epsilon"] == whole["epsilon"]
    with h5py.File(tmp_path / "whole" / "samples.h5") as a, h5py.File(tmp_path / "cut" / "samples.h5") as b:
        assert np.array_equal(a["latents"][:], b["latents"][:])


def test_outputs_that_cannot_fit_are_refused_before_any_release(tmp_path, monkeypatch, capsys):
    from collections import namedtuple

    import swflow.io.resources as resources

    rows = _rows(tmp_path / "rows.npy")
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(resources.shutil, "disk_usage", lambda path: usage(1 << 40, 0, 40 << 20))
    # 40 MiB free: model.h5 of 20 000 per-step releases of 70 directions alone needs ~400 MiB
    assert main(["generate", "--data", str(rows), "--manifold", "ball", "--method", "dpswflow-r", "--epsilon", "5",
                 "--steps", "20000", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "model.h5" in err and not (tmp_path / "x").exists() and not (tmp_path / ".x.partial").exists()


def test_the_data_fingerprint_is_the_sha256_of_the_rows_whatever_their_size():
    """Hashed a block of rows at a time (a table's one-hot rows run to GBs): the digest is hashlib's of the shape and
    the float64 bytes of all rows at once, so a checkpoint written before resumes."""
    import hashlib

    import torch

    from swflow.privacy.release import PrivateTarget

    def digest(rows):
        return PrivateTarget._fingerprint_of(rows, None, None, len(rows))["data_sha256"]

    big = torch.randn(40_000, 3)
    for rows in (big, torch.randn(7, 2, dtype=torch.float64)):
        whole = rows.to(torch.float64).numpy()
        assert digest(rows) == hashlib.sha256(repr(whole.shape).encode() + whole.tobytes()).hexdigest()
    changed = big.clone()
    changed[-1, -1] += 1.0  # the last block's last value
    assert digest(changed) != digest(big)
