"""`torchrun --nproc-per-node 2 swflow generate`, the command users run: it finishes, equals the one-process
run, writes one run folder (rank 0's), and resumes after the whole job is killed."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

SWFLOW = str(Path(sys.executable).with_name("swflow"))
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
pytestmark = pytest.mark.skipif(not (Path(SWFLOW).exists() and Path(TORCHRUN).exists()
                                     and Path("/proc/self/cmdline").exists()),
                                reason="needs the swflow and torchrun commands beside the interpreter, and Linux")


def _args(rows: Path, out: Path, method: str, steps: int) -> list[str]:
    return ["generate", "--data", str(rows), "--manifold", "ball", "--method", method, "--epsilon", "5",
            "--delta", "1e-5", "--steps", str(steps), "--n-particles", "400", "--n-projections", "8",
            "--batch-size", "150", "--privacy-seed", "3", "--checkpoint-every", "2", "--out", str(out),
            *(["--count-noise", "gaussian"] if method == "dpswflow-hist" else [])]  # a seed reproduces float noise


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1"}


def _torchrun(args: list[str], **kwargs):
    return [TORCHRUN, "--standalone", "--nproc-per-node", "2", SWFLOW, *args]


def _latents(run: Path) -> np.ndarray:
    with h5py.File(run / "samples.h5", "r") as f:
        return f["latents"][:]


def _kill_everything_writing(out: Path) -> None:
    """SIGKILL every process whose command line names ``out`` (Linux /proc)."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(out).encode() in (proc / "cmdline").read_bytes():
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    g = np.random.default_rng(0)
    x = g.normal(size=(500, 4))
    x = x / np.linalg.norm(x, axis=1, keepdims=True) * g.uniform(0.2, 1.0, size=(500, 1))
    path = tmp_path_factory.mktemp("rows") / "rows.npy"
    np.save(path, x.astype(np.float32))
    return path


@pytest.mark.parametrize("method", ["dpswflow-hist", "dpswflow-r"])
def test_torchrun_generate_equals_one_process_and_writes_one_folder(tmp_path, rows, method):
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run([SWFLOW, *_args(rows, one, method, 12)], check=True, env=_env(), capture_output=True)
    done = subprocess.run(_torchrun(_args(rows, two, method, 12)), env=_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    np.testing.assert_allclose(_latents(two), _latents(one), rtol=0, atol=1e-5)
    a, b = (json.loads((run / "privacy.json").read_text()) for run in (one, two))
    assert (a["epsilon"], a["ledger"]) == (b["epsilon"], b["ledger"])
    assert b["run_config"]["world_size"] == 2
    # one writer: only the finished folder is left, with no checkpoint and no per-rank file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "two"]
    assert not list(two.glob("checkpoint*"))


def test_torchrun_refuses_an_occupied_out_on_every_rank(tmp_path, rows):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    done = subprocess.run(_torchrun(_args(rows, out, "dpswflow-hist", 4)), env=_env(), capture_output=True, text=True)
    assert done.returncode != 0
    assert "exists and is not empty" in done.stderr
    assert (out / "notes.txt").read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_torchrun_killed_mid_run_resumes_to_the_one_process_result(tmp_path, rows):
    steps = 400
    one, two = tmp_path / "one", tmp_path / "two"
    subprocess.run([SWFLOW, *_args(rows, one, "dpswflow-r", steps)], check=True, env=_env(), capture_output=True)
    checkpoint = tmp_path / ".two.partial" / "checkpoint.pt"
    job = subprocess.Popen(_torchrun(_args(rows, two, "dpswflow-r", steps)), env=_env(), start_new_session=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not checkpoint.exists() and job.poll() is None:
            time.sleep(0.005)
    finally:
        _kill_everything_writing(two)  # torchrun and both ranks, at once (the ranks run in sessions of their own)
        job.wait()
    assert not two.exists(), "the run finished before it could be killed: raise `steps`"
    saved = torch.load(checkpoint, weights_only=True)
    assert saved["world_size"] == 2 and 0 < saved["ranks"][0]["step"] < steps
    resumed = subprocess.run(_torchrun([*_args(rows, two, "dpswflow-r", steps), "--resume"]), env=_env(),
                             capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    np.testing.assert_allclose(_latents(two), _latents(one), rtol=0, atol=1e-5)
    a, b = (json.loads((run / "privacy.json").read_text()) for run in (one, two))
    assert b["ledger"] == a["ledger"] and b["epsilon"] == a["epsilon"]  # nothing spent twice, nothing lost
    assert not (tmp_path / ".two.partial").exists()
    shutil.rmtree(one)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_torchrun_table_run_counts_each_shard_once_and_equals_one_process(tmp_path, suffix):
    # issue 51: each rank reads and counts its own share of the records (from the file, in chunks), rank 0 adds
    # the noise once: the released tables, the claim and the samples are the one-process run's
    from swflow.tables import example_table
    from swflow.tables.files import write_table

    frame, schema = example_table(1501, seed=4)  # an odd count: the two shares differ in size
    write_table(frame, tmp_path / f"private{suffix}")
    (tmp_path / "schema.json").write_text(json.dumps(schema.to_json()))
    args = ["generate", "--table", str(tmp_path / f"private{suffix}"), "--schema", str(tmp_path / "schema.json"),
            "--method", "dpswflow-hist", "--epsilon", "1", "--delta", "1e-9", "--count-noise", "gaussian",
            "--privacy-seed", "5", "--steps", "60"]
    one = subprocess.run([SWFLOW, *args, "--out", str(tmp_path / "one")], env=_env(), capture_output=True, text=True)
    assert one.returncode == 0, one.stderr
    two = subprocess.run(_torchrun([*args, "--out", str(tmp_path / "two")]), env=_env(), capture_output=True,
                         text=True)
    assert two.returncode == 0, two.stderr[-3000:]
    saved = [torch.load(tmp_path / run / "model.pt", weights_only=True) for run in ("one", "two")]
    assert torch.equal(torch.as_tensor(saved[0]["measurements"]["pair tables"]),
                       torch.as_tensor(saved[1]["measurements"]["pair tables"]))
    claims = [json.loads((tmp_path / run / "privacy.json").read_text()) for run in ("one", "two")]
    assert claims[0]["ledger"] == claims[1]["ledger"] and claims[0]["epsilon"] == claims[1]["epsilon"]
    assert claims[1]["dataset_size"] == 1501 and claims[1]["run_config"]["world_size"] == 2
    assert (tmp_path / "one" / f"samples{suffix}").read_bytes() == (tmp_path / "two" / f"samples{suffix}").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no staging left behind
