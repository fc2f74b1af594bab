"""Why private at all: private data from a population that the public split does not match.

For each declared population (swflow/io/populations.py) the private data is that population drawn
from Fashion-MNIST's private half, and the reference is the same population drawn from the test
part; the autoencoder stays the one trained on the broad public split. Rows:

* the free sample: the public split through the autoencoder (what a user has without private data);
* the oracle: public images *of the same population* through the autoencoder (a user cannot have it);
* uniform noise on the sphere, decoded;
* every flow at honest epsilon = 1 and 10 (`swflow generate --dataset ... --population P`).

Columns: latent SW2 to the reference's latents, the total-variation distance between the samples'
class proportions (read by a logistic-regression classifier trained on public images only) and the
population's, and with --n-fid N FID/KID against the reference (0: skipped). Cells are cached in
--out and a rerun continues. ``--decoder nearest-public`` scores the same particles decoded to the public
image with the nearest code (then the free sample and the oracle are public images themselves).

    python experiments/populations.py [--populations skewed footwear] [--n-fid 0] [--json]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from swflow.cli import main as swflow

METHODS = ("dpswflow-hist", "ldp-flow", "dpswflow-r")
FIXED_ROWS = ("free sample (public split decoded)", "oracle (public images of the population)", "uniform on the sphere")


def _classifier(images: np.ndarray, labels: np.ndarray):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(max_iter=300).fit(images.reshape(len(images), -1), labels)


def _tv(predicted: np.ndarray, share: dict[int, float]) -> float:
    classes = sorted(set(share) | set(np.unique(predicted).tolist()))
    return 0.5 * sum(abs(float(np.mean(predicted == c)) - share.get(c, 0.0)) for c in classes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="fashion-mnist")
    ap.add_argument("--populations", nargs="+", default=["skewed", "footwear"])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--n", type=int, default=10_000, help="samples per row")
    ap.add_argument("--n-fid", type=int, default=0, help="FID/KID samples, at most the reference's size (0: skip); "
                    "cached cells without FID get it from their saved samples")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--fixed-rows", nargs="+", default=list(FIXED_ROWS), choices=FIXED_ROWS,
                    help="the rows that need no private data")
    ap.add_argument("--decoder", choices=("autoencoder", "nearest-public"), default="autoencoder",
                    help="how particles become images (swflow generate --decoder)")
    ap.add_argument("--out", default="experiments/out/populations")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="digits, tiny runs, a temporary folder (CI)")
    args = ap.parse_args()
    extra = []
    if args.smoke:
        args.dataset, args.populations, args.epsilons, args.n, args.out = "digits", ["classes-579"], [5.0], 60, \
            tempfile.mkdtemp()
        extra = ["--steps", "3", "--delta", "1e-4"]
    from autoencoders import default_checkpoint, load_autoencoder

    from swflow.evaluate.runs import load_reference
    from autoencoders.encoded import encoded_split
    from swflow.io.populations import population_rows, proportions

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache_path = out / "cells.json"
    cells = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    model, meta = load_autoencoder(default_checkpoint(args.dataset))
    public = encoded_split(args.dataset, "public")
    from swflow.io.splits import dataset_split

    train, train_labels, halves = dataset_split(args.dataset, meta)
    public_rows = halves.public
    classifier = _classifier(train[public_rows], train_labels[public_rows])
    decode, suffix = model.decode_images, ""
    if args.decoder == "nearest-public":
        from autoencoders.nearest import nearest_public_decoder

        decode, suffix = nearest_public_decoder(model, meta), " | nearest-public"
    rng = np.random.default_rng(0)
    for name in args.populations:
        share = proportions(name)
        ref = load_reference({"dataset": args.dataset, "autoencoder": meta["name"],
                              "autoencoder_sha256": meta["weights_sha256"], "population": {"population": name}})
        oracle = population_rows(public.labels, name)  # the same population drawn from the PUBLIC split
        n_fid = min(args.n_fid, len(ref.images))
        rows = dict(zip(FIXED_ROWS, (public.latents.numpy()[rng.permutation(len(public.latents))[:args.n]],
                                     public.latents.numpy()[oracle][:args.n],
                                     _uniform(args.n, public.latents.shape[1], rng))))
        for label in args.fixed_rows:
            key = f"{name} | {label}{suffix}"
            if key not in cells or _lacks_fid(cells[key], n_fid):
                cells[key] = _score(rows[label], ref, decode, classifier, share, n_fid)
                cache_path.write_text(json.dumps(cells, indent=1))
        for method in args.methods:
            for eps in args.epsilons:
                key = f"{name} | {method} eps={eps:g}{suffix}"
                if key in cells and not _lacks_fid(cells[key], n_fid):
                    continue
                run = out / f"{name}-{method}-eps{eps:g}"
                t0 = time.perf_counter()
                if not (run / "samples.h5").exists():
                    argv = ["generate", "--dataset", args.dataset, "--population", name, "--method", method,
                            "--epsilon", str(eps), "--privacy-seed", "0", "--n-particles", str(args.n),
                            "--out", str(run), "--overwrite", *extra,
                            *(["--count-noise", "gaussian"] if method == "dpswflow-hist" else [])]  # seeded: reproducible
                    if swflow(argv) != 0:
                        raise SystemExit(f"swflow {' '.join(argv)} failed")
                from swflow.io.hdf5 import read_samples

                latents = read_samples(run / "samples.h5")["latents"]
                statement = json.loads((run / "privacy.json").read_text())["statement"]
                seconds = cells.get(key, {}).get("seconds", time.perf_counter() - t0)  # the generation's, if cached
                cells[key] = {**_score(latents, ref, decode, classifier, share, n_fid), "statement": statement,
                              "seconds": seconds}
                cache_path.write_text(json.dumps(cells, indent=1))
        cache_path.write_text(json.dumps(cells, indent=1))
        _figure(out / f"{name}{suffix.replace(' | ', '-')}.png", name, rows, out, decode, args)
    if args.json:
        print(json.dumps(cells))
        return
    for key, cell in cells.items():
        fid = "" if cell.get("fid") is None else f"  FID {cell['fid']:.1f}  KID {cell['kid']:.4f}"
        print(f"{key:60} latent SW {cell['latent_sw']:.4f}  class TV {cell['class_tv']:.3f}{fid}")


def _figure(path: Path, name: str, rows: dict, out: Path, decode, args) -> None:
    """Decoded samples side by side: the free sample, the oracle and each method's runs (no private row:
    the oracle is public images, the rest are synthetic)."""
    from swflow.evaluate.animate import save_panels
    from swflow.io.hdf5 import read_samples

    panels = [(label.split(" (")[0], decode(rows[label][:16])) for label in FIXED_ROWS[:2]]
    for method in args.methods:
        for eps in args.epsilons:
            run = out / f"{name}-{method}-eps{eps:g}" / "samples.h5"
            if run.exists():
                latents = read_samples(run)["latents"][:16]
                latents = latents / np.maximum(np.linalg.norm(latents, axis=1, keepdims=True), 1e-12)
                panels.append((f"{method}, eps = {eps:g}", decode(latents.astype(np.float32))))
    save_panels(panels, path, ncol=8)


def _lacks_fid(cell: dict, n_fid: int) -> bool:
    return bool(n_fid) and cell.get("fid_n") != n_fid


def _uniform(n: int, d: int, rng) -> np.ndarray:
    x = rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _score(latents: np.ndarray, ref, decode, classifier, share: dict[int, float], n_fid: int) -> dict:
    from swflow.evaluate.metrics import latent_sw

    latents = latents / np.maximum(np.linalg.norm(latents, axis=1, keepdims=True), 1e-12)
    images = decode(latents.astype(np.float32))
    predicted = classifier.predict(images.reshape(len(images), -1))
    cell = {"latent_sw": latent_sw(latents, ref.latents), "class_tv": _tv(predicted, share), "fid": None, "kid": None}
    if n_fid:
        from swflow.evaluate.metrics import (FeatureStats, InceptionFeatures, frechet_distance,
                                             kernel_inception_distance, reference_features)

        extractor = InceptionFeatures()
        real = reference_features(ref.images[:n_fid], key=f"{ref.key}-{n_fid}", extractor=extractor)
        fake = extractor(images[:n_fid])
        cell["fid"] = frechet_distance(FeatureStats.of(real), FeatureStats.of(fake))
        cell["kid"] = kernel_inception_distance(real, fake)[0]
        cell["fid_n"] = n_fid
    return cell


if __name__ == "__main__":
    main()
