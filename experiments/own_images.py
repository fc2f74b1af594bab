"""Your own images, measured: a dataset's public images handed to ``swflow train-ae --images`` as PNG files, as a
user would, and the decoded public images scored against the shipped default checkpoint's.

1. Writes the first --n images of the public split (Fashion-MNIST: 28×28, unpadded) as PNG files into
   OUT/public, and the test images into OUT/test (public and test images only: no private row is read).
2. Runs ``swflow train-ae --images OUT/public --size 32 --name NAME`` at its defaults (extra flags after
   ``--``), and times it.
3. Encodes and decodes the first --n-fid public images through the new checkpoint (read as PNG files) and
   through the shipped default (read as the dataset's loader reads them), and scores both with FID against
   the test images (each read the same way as its decoded images). Writes OUT/own_images.json.

    python experiments/own_images.py [--n 10000] [--n-fid 5000] [--out DIR] [-- --decoder-steps 6000]

Measured numbers: docs/decoder.md ("Your own images").
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np


def write_pngs(images: np.ndarray, folder: Path, crop: int) -> None:
    """Images (n, 1, H, W) in [0, 1] as 8-bit PNG files, ``crop`` pixels cut from each side (the loader's
    zero padding), named in order."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    for i, image in enumerate(images):
        pixels = image[0, crop:image.shape[1] - crop, crop:image.shape[2] - crop]
        Image.fromarray((pixels * 255).round().astype(np.uint8)).save(folder / f"{i:05d}.png")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="fashion-mnist")
    ap.add_argument("--n", type=int, default=10_000, help="public images written as PNG files")
    ap.add_argument("--n-fid", type=int, default=5_000, help="decoded public images scored (0: no FID)")
    ap.add_argument("--name", default="fm-png")
    ap.add_argument("--out", default="experiments/out/own_images")
    ap.add_argument("--smoke", action="store_true", help="digits at 8×8, a tiny training, no FID (CI)")
    ap.add_argument("train_flags", nargs="*", help="after --: more flags for swflow train-ae")
    args = ap.parse_args()
    size, crop, flags = 32, 2, list(args.train_flags)
    if args.smoke:
        args.dataset, args.n, args.n_fid, args.out, size, crop = "digits", 200, 0, tempfile.mkdtemp(), 8, 0
        flags = ["--epochs", "1", "--decoder-steps", "3", *flags]

    from autoencoders import default_checkpoint, load_autoencoder
    from swflow.cli import main as swflow
    from swflow.io.data import load_dataset
    from swflow.io.images import load_images
    from swflow.io.splits import dataset_split

    out = Path(args.out)
    shipped, shipped_meta = load_autoencoder(default_checkpoint(args.dataset))
    train, _, halves = dataset_split(args.dataset, shipped_meta)
    public = train[halves.public[:args.n]]
    if not (out / "public").is_dir():
        write_pngs(public, out / "public", crop)
    models = out / "models"
    t0 = time.perf_counter()
    if not (models / f"{args.name}.pt").exists():
        argv = ["train-ae", "--images", str(out / "public"), "--size", str(size), "--name", args.name,
                "--out-dir", str(models), *flags]
        if swflow(argv) != 0:
            raise SystemExit(f"swflow {' '.join(argv)} failed")
    own, own_meta = load_autoencoder(models / f"{args.name}.pt")
    result = {"dataset": args.dataset, "public_images": len(public), "train_flags": flags,
              "train_seconds_this_session": round(time.perf_counter() - t0, 1),
              "decoder_cost": own_meta.get("cost"), "encoder_cost": own_meta["encoder_from"].get("cost")}
    if args.n_fid:
        from swflow.evaluate.metrics import FeatureStats, InceptionFeatures, frechet_distance, reference_features

        test, _ = load_dataset(args.dataset, part="test")
        if not (out / "test").is_dir():
            write_pngs(test, out / "test", crop)
        extractor = InceptionFeatures()
        test_as_png = reference_features(load_images(out / "test", size=size), key=f"{args.dataset}-test-png",
                                         extractor=extractor)
        test_as_loaded = reference_features(test, key=f"{args.dataset}-test", extractor=extractor)

        def fid(fake, real):
            return frechet_distance(FeatureStats.of(real), FeatureStats.of(extractor(fake, progress=True)))

        pngs, loaded = load_images(out / "public", size=size)[:args.n_fid], public[:args.n_fid]
        result.update({"n_fid": args.n_fid,
                       f"fid_{args.name}": fid(own.decode_images(own.encode_images(pngs)), test_as_png),
                       f"fid_{shipped_meta['name']}": fid(shipped.decode_images(shipped.encode_images(loaded)),
                                                          test_as_loaded)})
    (out / "own_images.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
