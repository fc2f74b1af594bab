"""The decoder floor at the paper's protocol: FID and KID of autoencoder reconstructions.

For each checkpoint, the first N held-out images are encoded and decoded, and their Inception
features are compared with those of the same N images (cached once per dataset). Held out means
what `swflow evaluate` compares runs with: the official test part, or for digits (which has none)
the public split, which the autoencoders were trained on, so there the floor is in-sample. No latent
generator that uses this decoder can be expected below its floor. Each finished checkpoint is
written to the JSON at once, so an interrupted run resumes at the next one. Also writes a picture
of held-out images and their reconstructions (never a private row).

    python experiments/recon_fid.py --checkpoints fashion-mnist fashion-mnist-adv fashion-mnist-adv2  # ≈ 15-30 min each
    python experiments/recon_fid.py --checkpoints digits digits-adv --out experiments/out/recon_fid_digits.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from autoencoders import load_autoencoder
from swflow.evaluate.animate import save_panels
from swflow.evaluate.metrics import (FeatureStats, InceptionFeatures, frechet_distance, kernel_inception_distance,
                                     reference_features)
from swflow.evaluate.runs import load_reference


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoints", nargs="+", default=["fashion-mnist", "fashion-mnist-adv", "fashion-mnist-adv2"])
    p.add_argument("--n", type=int, default=10_000, help="held-out images (the paper's protocol: 10 000)")
    p.add_argument("--out", default="experiments/out/recon_fid.json")
    p.add_argument("--smoke", action="store_true", help="20 digits, outputs in a temporary folder (CI)")
    args = p.parse_args(argv)
    if args.smoke:
        import tempfile

        args.checkpoints, args.n, args.out = ["digits"], 20, str(Path(tempfile.mkdtemp()) / "recon_fid.json")
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    extractor = InceptionFeatures()
    panels, dataset = [], None
    for name in args.checkpoints:
        model, meta = load_autoencoder(name)
        if dataset not in (None, meta["dataset"]):
            raise SystemExit("compare checkpoints of one dataset at a time")
        dataset = meta["dataset"]
        reference = load_reference({"dataset": dataset, "autoencoder": name})
        held_out = reference.images[:args.n]
        recon = model.decode_images(model.encode_images(held_out))
        if not panels:
            panels.append((reference.description.split(" (")[0], held_out[:32]))
        panels.append((f"{name} ({meta['architecture']})", recon[:32]))
        key = f"{name}@{meta['weights_sha256'][:12]}/{len(held_out)}"
        if key in results:
            print(f"{key}: done already, FID {results[key]['fid']:.2f}")
            continue
        real = reference_features(held_out, key=f"{reference.key}-{len(held_out)}", extractor=extractor)
        t0 = time.perf_counter()
        fake = extractor(recon, progress=True)
        kid, kid_se = kernel_inception_distance(real, fake)
        results[key] = {"checkpoint": name, "architecture": meta["architecture"], "n": len(held_out),
                        "reference": reference.description,
                        "fid": frechet_distance(FeatureStats.of(real), FeatureStats.of(fake)),
                        "kid": kid, "kid_standard_error": kid_se,
                        "mse": float(np.mean((recon - held_out) ** 2)),
                        "inception_seconds": time.perf_counter() - t0, "backend": extractor.backend}
        print(json.dumps({key: results[key]}, indent=2))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
    save_panels(panels, out.with_suffix(".png"), ncol=8)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
