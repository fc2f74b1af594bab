"""Nothing swflow loads may run code: a pickle payload planted in every kind of file it reads is refused,
and the payload never runs."""
import os

import numpy as np
import pytest
import torch

from swflow import FlowConfig, make_flow
from swflow.privacy import PrivacySpec
from swflow.simulate.callbacks import Checkpointer


class Payload:
    """Unpickling this creates the file named in MARKER: proof that code ran."""

    def __reduce__(self):
        return (os.mknod, (os.environ["SWFLOW_TEST_MARKER"],))


@pytest.fixture
def plant(tmp_path, monkeypatch):
    marker = tmp_path / "code-ran"
    monkeypatch.setenv("SWFLOW_TEST_MARKER", str(marker))

    def write(path):
        torch.save({"step": 1, "evil": Payload()}, path)
        return path

    yield write
    assert not marker.exists(), "a loaded file ran code"


def _rows(n=40, d=3):
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(0))
    return x / x.norm(dim=1, keepdim=True) * 0.9


def test_flow_checkpoint(plant, tmp_path):
    path = plant(tmp_path / "checkpoint.pt")
    flow = make_flow("dpswflow-r", _rows(), privacy=PrivacySpec(epsilon=5.0, delta=1e-3), n_projections=4,
                     batch_size=10, privacy_seed=0, progress=False, callbacks=[Checkpointer(path)],
                     config=FlowConfig(steps=3, n_particles=20))
    with pytest.raises(ValueError, match="not a readable"):
        flow.run()


def test_generator_checkpoint(plant, tmp_path):
    from swflow.methods.generators import make_generator

    path = plant(tmp_path / "checkpoint.pt")
    model = make_generator("dpswgen", _rows(), privacy=PrivacySpec(epsilon=5.0, delta=1e-3), steps=3, n_projections=4,
                           batch_size=10, privacy_seed=0)
    with pytest.raises(ValueError, match="not a readable"):
        model.fit(progress=False, checkpoint_path=path)


def test_autoencoder_partial(plant, tmp_path):
    from autoencoders import TrainConfig, train_autoencoder
    from swflow.io.data import split_indices

    plant(tmp_path / "tiny.partial.pt")
    images = np.random.default_rng(0).random((40, 1, 8, 8), dtype=np.float32)
    with pytest.raises(ValueError, match="not a readable"):
        train_autoencoder("tiny", images, split_indices(40, seed=0), dataset="digits", out_dir=tmp_path,
                          progress=False, config=TrainConfig(architecture="digits8", latent=2, epochs=1))


def test_saved_synthesizer(plant, tmp_path):
    from swflow.pipeline.estimator import Synthesizer

    path = plant(tmp_path / "model.pt")
    with pytest.raises(ValueError, match="not a readable"):
        Synthesizer.load(path)


def test_no_weights_only_false_anywhere():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    offenders = [str(p) for folder in ("swflow", "autoencoders", "experiments", "tests") for p in (root / folder).rglob("*.py")
                 if "weights_only=" + "False" in p.read_text()]
    assert offenders == []


@pytest.mark.parametrize("content", ["payload", "truncated"])
def test_resume_from_a_planted_or_truncated_checkpoint_is_an_error(plant, tmp_path, capsys, content):
    from swflow.cli import main

    rows = np.asarray(_rows(300), dtype=np.float32)
    np.save(tmp_path / "rows.npy", rows)
    staging = tmp_path / ".run.partial"
    staging.mkdir()
    (staging / ".swflow-run").write_text("{}")
    if content == "payload":
        plant(staging / "checkpoint.pt")
    else:
        torch.save({"step": 1, "particles": torch.zeros(10, 3)}, staging / "checkpoint.pt")
        data = (staging / "checkpoint.pt").read_bytes()
        (staging / "checkpoint.pt").write_bytes(data[: len(data) // 2])
    assert main(["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "dpswflow-r",
                 "--epsilon", "5", "--steps", "3", "--n-projections", "4", "--out", str(tmp_path / "run"),
                 "--resume"]) == 2
    err = capsys.readouterr().err
    assert "not a readable flow checkpoint" in err and "Traceback" not in err
