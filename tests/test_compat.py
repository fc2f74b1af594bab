"""What the last release wrote still loads (issue 52: modules moved, files did not change): saved Synthesizers of
rows, images and a table, and a run folder, all written by swflow at commit 6977961 (tests/fixtures/)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from swflow import Synthesizer
from swflow.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "release-6977961"


@pytest.mark.parametrize("name, shape", [("rows.pt", (20, 3)), ("images.pt", (20, 1, 8, 8)), ("table.pt", (20, 2))])
def test_a_synthesizer_saved_by_the_last_release_loads_and_samples(name, shape):
    syn = Synthesizer.load(FIXTURES / name)
    samples = syn.sample(20, seed=1)
    assert tuple(samples.shape) == shape
    report = syn.privacy_report()
    assert report.epsilon <= 2.0 + 1e-9 and report.delta <= 1e-5


def test_a_run_folder_of_the_last_release_samples(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "run", run)
    assert main(["sample", str(run), "--n", "30", "--out", str(tmp_path / "more")]) == 0
    claim = json.loads((tmp_path / "more" / "privacy.json").read_text())
    assert claim["epsilon"] == json.loads((run / "privacy.json").read_text())["epsilon"]
    import h5py

    with h5py.File(tmp_path / "more" / "samples.h5") as f:
        latents = f["latents"][:]
    assert latents.shape == (30, 3) and np.isfinite(latents).all()
