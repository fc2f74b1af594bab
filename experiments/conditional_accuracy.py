"""Labels: synthetic-to-real accuracy of the class-conditional flow on Fashion-MNIST.

One flow per class on that class's private latents (DPSWflow-r by default; the paper's Fashion-MNIST
settings from swflow/configs/, honest ε), N labelled samples decoded, a small CNN trained on them and
tested on the official test split (`swflow evaluate`). Read it against two references that need no
private data: the same CNN trained on N labelled public-split images, and on those images through
the autoencoder (the decoder's floor for this score). ``--decoder nearest-public`` decodes the flow's
particles to the public image with the nearest code (swflow generate --decoder); its floor is the first
reference. Finished parts are kept in the JSON.

    python experiments/conditional_accuracy.py --epsilon 10 [--method ldp-flow]    # ≈ 15 min on 2 cores
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from autoencoders import default_checkpoint, load_autoencoder
from swflow.cli import main as swflow
from swflow.evaluate.metrics import downstream_accuracy
from swflow.io.data import load_dataset
from swflow.io.splits import dataset_split

CONFIG = Path(__file__).parents[1] / "swflow" / "configs" / "fashion-mnist-dpswflow-r.toml"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epsilon", type=float, default=10.0)
    p.add_argument("--method", default="dpswflow-hist", choices=("dpswflow-r", "dpswflow", "ldp-flow", "dpswflow-hist"))
    p.add_argument("--labels-public", action="store_true", help="treat labels and class counts as public (needed "
                   "by every method but dpswflow-hist); default: labels private")
    p.add_argument("--n", type=int, default=10_000, help="labelled samples (and public images for the references)")
    p.add_argument("--checkpoint", help="autoencoder (default: the dataset's default)")
    p.add_argument("--decoder", choices=("autoencoder", "nearest-public"), default="autoencoder",
                   help="how particles become images (swflow generate --decoder)")
    p.add_argument("--out", default="experiments/out/conditional_accuracy")
    p.add_argument("--smoke", action="store_true", help="tiny sizes, outputs in a temporary folder (CI)")
    args = p.parse_args(argv)
    smoke = ["--steps", "3"] if args.smoke else []
    if args.smoke:
        import tempfile

        args.n, args.out = 200, tempfile.mkdtemp()
    checkpoint = args.checkpoint or default_checkpoint("fashion-mnist")
    out = Path(args.out) / checkpoint
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}

    def record(key, fn):
        if key not in results:
            t0 = time.perf_counter()
            results[key] = {**fn(), "seconds": time.perf_counter() - t0}
            results_path.write_text(json.dumps(results, indent=2) + "\n")
        print(key, json.dumps(results[key]))

    suffix = ("" if args.decoder == "autoencoder" else f" {args.decoder}") + (" labels-public" if args.labels_public
                                                                             else "")
    run = out / f"conditional-{args.method}-eps{args.epsilon:g}{suffix.replace(' ', '-')}"
    # the CNN's rounds and batch (metrics.downstream_accuracy's defaults: 15, 128); smoke: the plumbing only
    cnn = {"epochs": 1, "batch_size": 32} if args.smoke else {"epochs": 15}

    def flow():
        if not (run / "metrics.json").exists():
            config = CONFIG.with_name("fashion-mnist-dpswflow.toml") if args.method == "dpswflow" else CONFIG
            argv = ["generate", "--config", str(config), "--conditional", "--method", args.method,
                    "--epsilon", str(args.epsilon),
                    "--checkpoint", checkpoint, "--n-particles", str(args.n), "--privacy-seed", "0",
                    "--decoder", args.decoder, "--out", str(run), "--resume",
                    # seeded float noise reproduces a figure (the histogram's default noise takes no seed)
                    *(["--steps", "300", "--count-noise", "gaussian"] if args.method == "dpswflow-hist" else []),
                    *(["--labels-public"] if args.labels_public else []), *smoke]
            if not (run / "privacy.json").exists() and swflow(argv) != 0:
                raise SystemExit(f"swflow {' '.join(argv)} failed")
            if args.smoke:  # the script's plumbing, not the CNN's 15 rounds: one round on the samples
                from swflow.io.hdf5 import read_samples

                samples = read_samples(run / "samples.h5")
                test, test_labels = load_dataset("fashion-mnist", part="test")
                test, test_labels = test[:1000], test_labels[:1000]  # plumbing only: a slice keeps CI short
                statement = json.loads((run / "privacy.json").read_text())["statement"]
                return {"accuracy": downstream_accuracy(samples["images"], samples["labels"], test, test_labels,
                                                        **cnn), "statement": statement, "latent_sw": None}
            if swflow(["evaluate", str(run), "--n-fid", "0"]) != 0:
                raise SystemExit("evaluate failed")
        metrics = json.loads((run / "metrics.json").read_text())
        return {"accuracy": metrics["downstream_accuracy"], "statement": metrics["statement"],
                "latent_sw": metrics["latent_sw"], "class_tv": _class_tv(run)}

    def _class_tv(run_dir) -> float:
        """Total variation between the samples' label shares and the private split's (benchmark data: the
        evaluation may read the private labels; nothing here is released)."""
        from swflow.io.hdf5 import read_samples

        images, labels, halves = dataset_split("fashion-mnist", load_autoencoder(checkpoint)[1])
        private = np.bincount(labels[halves.private], minlength=10) / len(halves.private)
        sampled = np.bincount(read_samples(run_dir / "samples.h5")["labels"], minlength=10)
        return float(0.5 * np.abs(sampled / sampled.sum() - private).sum())

    record(f"conditional {args.method} eps={args.epsilon:g}{suffix}", flow)
    model, meta = load_autoencoder(checkpoint)
    train, train_labels = load_dataset("fashion-mnist")
    test, test_labels = load_dataset("fashion-mnist", part="test")
    if args.smoke:
        test, test_labels = test[:1000], test_labels[:1000]
    public = dataset_split("fashion-mnist", meta, images=train, labels=train_labels)[2].public
    pick = public[np.random.default_rng(0).permutation(len(public))[:args.n]]
    record("public images (no private data)",
           lambda: {"accuracy": downstream_accuracy(train[pick], train_labels[pick], test, test_labels,
                                                    **cnn)})
    record("public images through the autoencoder (no private data)",
           lambda: {"accuracy": downstream_accuracy(model.decode_images(model.encode_images(train[pick])),
                                                    train_labels[pick], test, test_labels, **cnn)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
