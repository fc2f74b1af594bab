"""Private data the public data never saw: Fashion-MNIST footwear (classes 5, 7, 9) as the private
population, with an autoencoder whose public split had no footwear at all.

The checkpoint ``fashion-mnist-no-footwear`` is trained like the default (``swflow train-ae --dataset
fashion-mnist --exclude-classes 5 7 9``, then ``swflow train-decoder``). The private data is
``--population footwear`` from the private split; the reference is the test footwear. Rows:

* the free sample: the public split through the no-footwear autoencoder (no footwear at all);
* frozen unseen: ``dpswflow-hist`` through the no-footwear autoencoder;
* adapted: the same, with ``--adapt-decoder`` (DP-SGD on the private footwear, one total budget);
* adapted by critic: ``--adapt-objective critic`` (a DP-SGD critic of the private footwear teaches the decoder),
  600 steps at decoder learning rate 5e-4, the settings that were best without noise on the public stand-in;
* seen classes: ``dpswflow-hist`` through ``--seen`` (default ``fashion-mnist``: its public split has footwear,
  and it decodes with a pixel-loss decoder as ``fashion-mnist-no-footwear`` does; give a sampling-decoder pair,
  ``--unseen fashion-mnist-no-footwear-adv --seen fashion-mnist-adv2``, to compare sharp decoders);
* reconstructions of the private footwear through the no-footwear autoencoder: the best a frozen
  decoder can do. Computed from private images, so scored for the docs only and never drawn.

Each at total epsilon 1 and 10: FID/KID against the test footwear (--n-fid, 3 000 by default: the test
part has 3 000 footwear images), latent SW to the test footwear's codes (each row in its own
autoencoder's space), class TV (a logistic regression on public images reads the samples' classes;
footwear is 1/3 each) and the copy rate (``swflow evaluate``). Cells are cached in --out and a rerun
continues; a figure per row (no private image in it).

    python experiments/unseen_classes.py [--unseen CKPT] [--seen CKPT] [--epsilons 1 10] [--n-fid 3000] [--json]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from swflow.cli import main as swflow

POPULATION = "footwear"
RUNS = {  # row -> (checkpoint, extra generate arguments). Compare checkpoints of one decoder kind (both pixel-loss
    # or both sampling), so that the rows differ only in what the public split held
    "frozen unseen": ("{unseen}", []),
    "adapted": ("{unseen}", ["--adapt-decoder"]),
    "adapted by critic": ("{unseen}", ["--adapt-decoder", "--adapt-objective", "critic", "--adapt-steps", "600",
                                       "--adapt-lr", "5e-4"]),
    "seen classes": ("{seen}", []),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unseen", default="fashion-mnist-no-footwear", help="the checkpoint that never saw footwear")
    ap.add_argument("--seen", help="the seen-classes checkpoint (default: the dataset's pixel-loss one, "
                    "fashion-mnist)")
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--n", type=int, default=3_000, help="samples per row")
    ap.add_argument("--n-fid", type=int, default=3_000, help="FID/KID samples (0: skip)")
    ap.add_argument("--rows", nargs="+", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--out", default="experiments/out/unseen_classes")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="digits, a tiny unseen checkpoint, tiny runs (CI)")
    args = ap.parse_args()
    global POPULATION
    dataset, extra, adapt_extra = "fashion-mnist", [], []
    if args.smoke:
        dataset, args.epsilons, args.n, args.n_fid, args.out = "digits", [5.0], 60, 0, tempfile.mkdtemp()
        extra, adapt_extra = ["--steps", "3", "--delta", "1e-4"], ["--adapt-steps", "2", "--adapt-batch-size", "8"]
        POPULATION = "classes-579"  # footwear's classes, declared for any dataset: the digits stand-in
        args.unseen = _smoke_checkpoint(Path(args.out))
    from autoencoders import load_autoencoder

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / "cells.json"
    cells = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    unseen_model, unseen_meta = load_autoencoder(args.unseen)
    if not unseen_meta.get("excluded_classes"):
        raise SystemExit(f"{args.unseen} names no excluded classes: train it with swflow train-ae --exclude-classes")
    classifier = _public_classifier(dataset)

    def save():
        cache_path.write_text(json.dumps(cells, indent=1))

    # rows that need no private data, and the reconstructions (private: scored, never drawn or written)
    fixed = _fixed_rows(dataset, args.unseen, unseen_model, unseen_meta, args.n)
    for label, images in fixed.items():
        if label not in cells or cells[label].get("fid_n") != args.n_fid:
            cells[label] = _score_images(images, dataset, classifier, args.n_fid)
            save()
    for row in args.rows:
        checkpoint, row_extra = RUNS[row]
        checkpoint = checkpoint.format(unseen=args.unseen, seen=args.seen or dataset)
        for eps in args.epsilons:
            key = f"{row} eps={eps:g}"
            run = out / f"{row.replace(' ', '-')}-eps{eps:g}"
            if key in cells and cells[key].get("fid_n") == args.n_fid:
                continue
            t0 = time.perf_counter()
            if not (run / "samples.h5").exists():
                argv = ["generate", "--dataset", dataset, "--population", POPULATION, "--method", "dpswflow-hist",
                        "--epsilon", str(eps), "--n-particles", str(args.n), "--out", str(run), "--overwrite",
                        "--quiet", "--checkpoint", checkpoint, *row_extra, *extra,
                        *(adapt_extra if "--adapt-decoder" in row_extra else [])]
                if swflow(argv) != 0:
                    raise SystemExit(f"swflow {' '.join(argv)} failed")
            seconds = cells.get(key, {}).get("seconds", time.perf_counter() - t0)
            cells[key] = {**_score_run(run, classifier, args.n_fid), "seconds": seconds,
                          "statement": json.loads((run / "privacy.json").read_text())["statement"]}
            save()
    _figure(out / "unseen_classes.png", fixed, out, args)
    if args.json:
        print(json.dumps(cells))
        return
    for key, cell in cells.items():
        fid = "" if cell.get("fid") is None else f"  FID {cell['fid']:6.1f}  KID {cell['kid']:.4f}"
        copy = "" if cell.get("copy_rate") is None else f"  copy rate {cell['copy_rate']:.3f}"
        print(f"{key:48} latent SW {cell.get('latent_sw', float('nan')):.4f}  class TV {cell['class_tv']:.3f}"
              f"{fid}{copy}")


def _smoke_checkpoint(out: Path) -> str:
    """A tiny digits autoencoder that never saw digits 5, 7 and 9 (the smoke test's unseen checkpoint)."""
    argv = ["train-ae", "--dataset", "digits", "--name", "digits-no-579", "--epochs", "1", "--exclude-classes",
            "5", "7", "9", "--out-dir", str(out)]
    if swflow(argv) != 0:
        raise SystemExit("train-ae failed")
    return str(out / "digits-no-579.pt")


def _public_classifier(dataset: str):
    """Logistic regression on the full public split (an instrument of the benchmark, not part of a run)."""
    from sklearn.linear_model import LogisticRegression

    from autoencoders import default_checkpoint, load_autoencoder
    from swflow.io.splits import dataset_split

    _, meta = load_autoencoder(default_checkpoint(dataset))
    train, labels, halves = dataset_split(dataset, meta)
    public = train[halves.public]
    return LogisticRegression(max_iter=300).fit(public.reshape(len(public), -1), labels[halves.public])


def _fixed_rows(dataset: str, checkpoint: str, model, meta, n: int) -> dict[str, np.ndarray]:
    from swflow.io.splits import dataset_split
    from swflow.io.populations import population_rows

    train, labels, halves = dataset_split(dataset, meta)
    rng = np.random.default_rng(0)
    public = train[halves.public]
    public = public[rng.permutation(len(public))[:n]]
    private_footwear = train[halves.private][population_rows(labels[halves.private], POPULATION)][:n]
    return {"free sample (public split, no footwear, decoded)": model.decode_images(model.encode_images(public)),
            "reconstructions of the private footwear (docs only)":
                model.decode_images(model.encode_images(private_footwear))}


def _footwear_reference(dataset: str):
    from swflow.io.data import load_dataset
    from swflow.io.populations import population_rows

    test, test_labels = load_dataset(dataset, part="test")
    return test[population_rows(test_labels, POPULATION)]


def _class_tv(images: np.ndarray, classifier) -> float:
    from swflow.io.populations import proportions

    share = proportions(POPULATION)
    predicted = classifier.predict(images.reshape(len(images), -1))
    classes = sorted(set(share) | set(np.unique(predicted).tolist()))
    return 0.5 * sum(abs(float(np.mean(predicted == c)) - share.get(c, 0.0)) for c in classes)


def _score_images(images: np.ndarray, dataset: str, classifier, n_fid: int) -> dict:
    cell = {"class_tv": _class_tv(images, classifier), "fid": None, "kid": None, "fid_n": n_fid}
    if n_fid:
        from swflow.evaluate.metrics import (FeatureStats, InceptionFeatures, frechet_distance,
                                             kernel_inception_distance, reference_features)

        ref = _footwear_reference(dataset)[:n_fid]
        extractor = InceptionFeatures()
        real = reference_features(ref, key=f"{dataset}-test-{POPULATION}-{len(ref)}", extractor=extractor)
        fake = extractor(images[:n_fid])
        cell["fid"] = frechet_distance(FeatureStats.of(real), FeatureStats.of(fake))
        cell["kid"] = kernel_inception_distance(real, fake)[0]
    return cell


def _score_run(run: Path, classifier, n_fid: int) -> dict:
    """swflow evaluate's FID/KID, latent SW and copy rate, and the class TV of the run's decoded samples."""
    from swflow.cli.autoencoder import run_decoder
    from swflow.io.hdf5 import read_samples

    if swflow(["evaluate", str(run), "--n-fid", str(n_fid), "--quiet"]) != 0:
        raise SystemExit(f"swflow evaluate {run} failed")
    metrics = json.loads((run / "metrics.json").read_text())
    decode = run_decoder(json.loads((run / "privacy.json").read_text())["run_config"], run)
    images = decode(_on_sphere(read_samples(run / "samples.h5")["latents"]))
    return {"class_tv": _class_tv(images, classifier), "fid": metrics.get("fid"), "kid": metrics.get("kid"),
            "fid_n": n_fid, "latent_sw": metrics.get("latent_sw"), "copy_rate": metrics.get("owner_only", {}).get("copy_rate")}


def _on_sphere(latents: np.ndarray) -> np.ndarray:
    return (latents / np.maximum(np.linalg.norm(latents, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def _figure(path: Path, fixed: dict, out: Path, args) -> None:
    """16 samples a panel: the free sample and every run, a row of panels per method (synthetic images only; the
    reconstructions of private images are never drawn)."""
    from swflow.cli.autoencoder import run_decoder
    from swflow.evaluate.animate import save_panels
    from swflow.io.hdf5 import read_samples

    label = next(k for k in fixed if k.startswith("free sample"))
    # a row of panels per method, a column per epsilon; the free sample has no epsilon: alone on the first row
    panels = [("free sample (no footwear)", fixed[label][:16])] + [("", None)] * (len(args.epsilons) - 1)
    for row in args.rows:
        for eps in args.epsilons:
            run = out / f"{row.replace(' ', '-')}-eps{eps:g}"
            if (run / "samples.h5").exists():
                decode = run_decoder(json.loads((run / "privacy.json").read_text())["run_config"], run)
                panels.append((f"{row}, eps = {eps:g}", decode(_on_sphere(read_samples(run / "samples.h5")["latents"][:16]))))
            else:
                panels.append(("", None))  # keeps the columns' epsilons aligned
    save_panels(panels, path, ncol=4, columns=len(args.epsilons))


if __name__ == "__main__":
    main()
