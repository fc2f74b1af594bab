"""swflow evaluate / compare / animate, and class-conditional generation."""
import json

import numpy as np
import pytest
import torch

from swflow.cli import main
from swflow.io.hdf5 import read_samples
from swflow.pipeline.conditional import class_shares, run_conditional_to_dir
from swflow.pipeline.settings import from_keywords
from swflow.privacy import PrivacySpec, ReleasePlan, calibrate


def _two_blobs(seed=0, n=400):
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) % 3 == 0).astype(int)  # classes of 266 and 134 rows
    rows = rng.normal(scale=0.1, size=(n, 2)) + np.where(labels[:, None] == 1, [0.5, 0.0], [-0.5, 0.0])
    return rows.astype(np.float32), labels


def test_conditional_epsilon_is_the_per_class_epsilon(tmp_path):
    rows, labels = _two_blobs()
    spec = PrivacySpec(noise_multiplier=1.0, delta=1e-5)
    settings = from_keywords("dpswflow-r", noise_multiplier=1.0, delta=1e-5, steps=40, n_particles=300, step_size=1.0,
                             record_every=4, seed=0, n_projections=10, batch_size=60, privacy_seed=0)
    report = run_conditional_to_dir(settings, torch.from_numpy(rows), labels, tmp_path, classes=[0, 1],
                                    labels_public=True, progress=False).to_json()
    assert report == json.loads((tmp_path / "privacy.json").read_text())
    per_class = {c["class"]: c for c in report["per_class"]}
    # the unconditional sample rate in each class (batch 60 of 400 -> 40 of 266 and 20 of 134); each
    # class's ε is what the accountant gives that class's releases on their own
    assert per_class[0]["batch_size"] == 40 and per_class[1]["batch_size"] == 20
    for c, size, batch in ((0, 266, 40), (1, 134, 20)):
        alone = calibrate(spec, ReleasePlan(releases=40, dataset_size=size, sample_size=batch, n_projections=10, dim=2))
        assert per_class[c]["epsilon"] == pytest.approx(alone.epsilon, rel=1e-9)
    assert report["epsilon"] == max(c["epsilon"] for c in report["per_class"])
    assert "labels and class counts public" in report["adjacency"] and report["composition"]
    samples = read_samples(tmp_path / "samples.h5")
    counts = np.bincount(samples["labels"])
    assert counts.sum() == 300 and abs(counts[0] - 199.5) <= 1  # particles follow the (public) class counts
    # each class's particles went to its own blob (blobs at x = ±0.5). At this noise (σ ≈ 5 on batches
    # of 20-40) one class's mean moves by ~0.3 between seeds, so the test reads the separation,
    # which stayed above 0.5 over seeds 0-4 with both particle-side estimators
    means = [samples["latents"][samples["labels"] == c, 0].mean() for c in (0, 1)]
    assert means[1] - means[0] > 0.4


def test_private_labels_need_a_count_release_and_publish_no_class_size(tmp_path):
    rows, labels = _two_blobs()
    rows = rows / np.linalg.norm(rows, axis=1, keepdims=True).clip(min=1.0)
    common = dict(epsilon=5.0, delta=1e-5, steps=30, n_particles=300, step_size=1.0, record_every=10, seed=0)
    with pytest.raises(ValueError, match="labels_public"):
        run_conditional_to_dir(from_keywords("dpswflow-r", n_projections=10, batch_size=60, **common),
                               torch.from_numpy(rows), labels, tmp_path / "r", classes=[0, 1], progress=False)
    hist = from_keywords("dpswflow-hist", n_projections=8, pool_size=16, bins=16, **common)
    with pytest.raises(ValueError, match="label set"):
        run_conditional_to_dir(hist, torch.from_numpy(rows), labels, tmp_path / "r", classes=[0, 2], progress=False)
    # the public label set has a third class that holds no record: it is released like the others
    report = run_conditional_to_dir(hist, torch.from_numpy(rows), labels, tmp_path / "h", classes=[0, 1, 2],
                                    progress=False).to_json()
    assert report["composition"].startswith("one Gaussian mechanism") and report["adjacency"] == "replace-one"
    assert all("size" not in entry for entry in report["per_class"])
    ledgers = [report["ledgers"][str(c)] for c in (0, 1, 2)]
    same = ("noise_multiplier", "sensitivity", "n_projections", "mechanism")
    assert all(len(ledger) == 1 and all(ledger[0][f] == ledgers[0][0][f] for f in same) for ledger in ledgers)
    assert {ledger[0]["dataset_size"] for ledger in ledgers} == {400}  # the public n, never a class size
    estimated = {e["class"]: e["estimated_size"] for e in report["per_class"]}
    sigma = report["noise_std"]
    # each estimate is the mean of 16 row sums, noise std sigma * sqrt(B / K) = sigma: within 6 of them
    assert abs(estimated[0] - 266) < 6 * sigma and abs(estimated[1] - 134) < 6 * sigma
    assert abs(estimated[2]) < 6 * sigma
    samples = read_samples(tmp_path / "h" / "samples.h5")
    assert len(samples["latents"]) == 300 and set(np.unique(samples["labels"])) <= {0, 1, 2}
    for c in (0, 1, 2):  # nothing in the class folders says how many records a class has
        assert json.loads((tmp_path / "h" / "classes" / f"class-{c}" / "privacy.json").read_text())["dataset_size"] == 400


def test_class_histograms_together_move_by_sqrt_2k_when_a_record_changes_class():
    # Brute force over every record of a small labelled set and every other label and position: the per-class
    # count matrices, stacked, change by at most sqrt(2K) in l2 (K counts out of one class, K into another, or
    # 2K within one), so one noise level sigma = z sqrt(2K) on every class covers a label change.
    from swflow.kernels.sliced import random_directions
    from swflow.privacy.histogram import histogram_sensitivity, projection_counts

    g = torch.Generator().manual_seed(0)
    k, bins, classes = 5, 6, (0, 1, 2)
    theta = random_directions(k, 2, generator=g, dtype=torch.float64)
    rows = torch.nn.functional.normalize(torch.randn(7, 2, generator=g, dtype=torch.float64), dim=1) * 0.9
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 0])
    candidates = torch.nn.functional.normalize(torch.randn(6, 2, generator=g, dtype=torch.float64), dim=1)

    def stacked(x, y):
        return torch.cat([projection_counts(x[y == c], theta, bins=bins, radius=1.0) for c in classes]).double()

    base, largest = stacked(rows, labels), 0.0
    for i in range(len(rows)):
        for c in classes:
            for point in (*candidates, rows[i]):
                x, y = rows.clone(), labels.clone()
                x[i], y[i] = point, c
                largest = max(largest, float((stacked(x, y) - base).norm()))
    assert largest == pytest.approx(histogram_sensitivity(k, adjacency="replace-one").value)


def test_class_shares_sum_and_proportions():
    shares = class_shares(np.array([5, 3, 2]), 11)
    assert shares.sum() == 11 and list(shares) == [6, 3, 2]
    assert class_shares(np.array([1000, 1]), 10).min() == 1


def test_evaluate_compare_and_animate_a_2d_run(tmp_path, capsys):
    rows, _ = _two_blobs()
    np.save(tmp_path / "rows.npy", rows[:300])
    np.save(tmp_path / "held_out.npy", rows[300:])
    run = tmp_path / "run"
    assert main(["generate", "--data", str(tmp_path / "rows.npy"), "--manifold", "ball", "--method", "swf", "--steps", "30",
                 "--n-projections", "20", "--n-particles", "300", "--record-every", "3", "--out", str(run)]) == 0
    assert main(["evaluate", str(run), "--n-fid", "0"]) == 2  # a --data run needs --reference
    assert "--reference" in capsys.readouterr().err
    assert main(["evaluate", str(run), "--reference", str(tmp_path / "held_out.npy")]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["latent_sw"] < 0.1 and metrics["latent_precision"] > 0.5 and "fid" not in metrics
    capsys.readouterr()
    assert main(["compare", str(run)]) == 0
    table = capsys.readouterr().out
    assert "| swf | ∞ |" in table.replace(str(run) + " ", "").replace(f"| {run} ", "| ")
    assert main(["compare", str(tmp_path)]) == 2  # not evaluated: says what to run
    assert main(["animate", str(run), "--frames", "4", "--reference", str(tmp_path / "held_out.npy")]) == 0
    from PIL import Image

    with Image.open(run / "flow.gif") as gif:
        assert gif.n_frames == 4


def test_conditional_digits_run_has_labels_and_downstream_accuracy(tmp_path, capsys):
    out = tmp_path / "cond"
    # labels private (the default): one histogram per class of the public label set 0-9
    assert main(["generate", "--dataset", "digits", "--conditional", "--method", "dpswflow-hist", "--epsilon", "10",
                 "--delta", "1e-5", "--steps", "40", "--n-particles", "1000", "--out", str(out)]) == 0
    assert "labels private" in json.loads((out / "privacy.json").read_text())["composition"]
    assert main(["evaluate", str(out), "--n-fid", "0"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    # ten classes from the flow: far above the 0.1 of guessing
    assert metrics["downstream_accuracy"] > 0.4
    assert main(["generate", "--dataset", "digits", "--conditional", "--method", "dpswflow-r", "--epsilon", "10",
                 "--steps", "6", "--out", str(tmp_path / "r")]) == 2
    assert "--labels-public" in capsys.readouterr().err
    public = tmp_path / "public"
    assert main(["generate", "--dataset", "digits", "--conditional", "--labels-public", "--method", "dpswflow-r",
                 "--epsilon", "10", "--steps", "6", "--batch-size", "2000", "--n-projections", "64",
                 "--n-particles", "500", "--init", "sphere", "--privacy-seed", "0", "--out", str(public)]) == 0
    assert "labels and class counts public" in json.loads((public / "privacy.json").read_text())["adjacency"]
    assert main(["generate", "--dataset", "digits", "--conditional", "--method", "dpswgen", "--epsilon", "10",
                 "--steps", "2", "--out", str(tmp_path / "g")]) == 2
    assert "not a flow method" in capsys.readouterr().err
    assert not (tmp_path / "g").exists() and not (tmp_path / ".g.partial").exists()
