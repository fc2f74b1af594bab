"""The decoder floor at the paper's protocol: FID and KID of autoencoder reconstructions.

For each checkpoint, the first N official test images are encoded and decoded, and their Inception
features are compared with those of the same N test images (cached once per dataset). No latent
generator that uses this decoder can be expected below its floor. Each finished checkpoint is
written to the JSON at once, so an interrupted run resumes at the next one. Also writes a picture
of test images and their reconstructions (test images are public).

    python experiments/recon_fid.py --checkpoints fashion-mnist fashion-mnist-adv          # ≈ 20 min each
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from autoencoders import load_autoencoder
from swflow.animate import save_panels
from swflow.data import load_dataset
from swflow.metrics import (FeatureStats, InceptionFeatures, frechet_distance, kernel_inception_distance,
                            reference_features)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoints", nargs="+", default=["fashion-mnist", "fashion-mnist-adv"])
    p.add_argument("--n", type=int, default=10_000, help="test images (the paper's protocol: 10 000)")
    p.add_argument("--out", default="experiments/out/recon_fid.json")
    args = p.parse_args(argv)
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    extractor = InceptionFeatures()
    panels, dataset = [], None
    for name in args.checkpoints:
        model, meta = load_autoencoder(name)
        if dataset not in (None, meta["dataset"]):
            raise SystemExit("compare checkpoints of one dataset at a time")
        dataset = meta["dataset"]
        test, _ = load_dataset(dataset, part="test")
        test = test[:args.n]
        recon = model.decode_images(model.encode_images(test))
        if not panels:
            panels.append((f"{dataset} test images", test[:32]))
        panels.append((f"{name} ({meta['architecture']})", recon[:32]))
        key = f"{name}@{meta['weights_sha256'][:12]}/{len(test)}"
        if key in results:
            print(f"{key}: done already, FID {results[key]['fid']:.2f}")
            continue
        real = reference_features(test, key=f"{dataset}-test-{len(test)}", extractor=extractor)
        t0 = time.perf_counter()
        fake = extractor(recon, progress=True)
        kid, kid_se = kernel_inception_distance(real, fake)
        results[key] = {"checkpoint": name, "architecture": meta["architecture"], "n": len(test),
                        "fid": frechet_distance(FeatureStats.of(real), FeatureStats.of(fake)),
                        "kid": kid, "kid_standard_error": kid_se,
                        "test_mse": float(np.mean((recon - test) ** 2)),
                        "inception_seconds": time.perf_counter() - t0, "backend": extractor.backend}
        print(json.dumps({key: results[key]}, indent=2))
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
    save_panels(panels, out.with_suffix(".png"), ncol=16)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
