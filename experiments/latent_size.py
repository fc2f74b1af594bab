"""Which public autoencoder gives the best *private* pipeline? Score each checkpoint end to end.

For every Fashion-MNIST checkpoint named, at the paper's protocol (N samples against the first N
official test images, TF-Inception pool3):
- ``reconstruction``: the test images through the autoencoder (the decoder's floor);
- ``public``: N public-split images through the autoencoder (what a user gets for free);
- ``uniform``: N points uniform on the sphere, decoded (no data at all);
- ``hist eps=E``: dpswflow-hist on the encoded private split at honest ε = E, δ = 1e-5 (replace-one),
  decoded by the checkpoint.
Each cell also gives latent SW to the encoded test split, so codes of one size can be compared
without Inception. ``--decoder nearest-public`` decodes every cell to the public image with the nearest
code instead (autoencoders.nearest.NearestPublicDecoder: public data only, no privacy cost), and records how
many distinct public images a cell used. A larger code is easier to decode and harder to match privately; this script
measures both at once. Finished cells are kept in the JSON, so an interrupted run resumes.

    python experiments/latent_size.py --checkpoints fashion-mnist-adv2 fashion-mnist-z16-adv   # ≈ 15 min a cell
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from autoencoders import load_autoencoder
from swflow.evaluate.metrics import (FeatureStats, InceptionFeatures, frechet_distance, kernel_inception_distance,
                                     latent_sw, reference_features)
from swflow.evaluate.runs import load_reference
from autoencoders.encoded import encoded_split
from swflow.pipeline.fitting import fit
from swflow.pipeline.settings import from_keywords


def _cells(epsilons: list[float]) -> list[str]:
    return ["reconstruction", "public", "uniform"] + [f"hist eps={e:g}" for e in epsilons]


def _latents_for(cell: str, name: str, args, test_latents) -> tuple[np.ndarray, dict]:
    """The latents (N, d) a cell decodes, and what produced them."""
    if cell == "reconstruction":
        return test_latents[:args.n], {}
    if cell == "public":
        return encoded_split(args.dataset, "public", checkpoint=name).latents.numpy()[:args.n], {}
    if cell == "uniform":  # the trivial answer: no data at all, points spread evenly on the sphere
        x = np.random.default_rng(args.seed).normal(size=(args.n, test_latents.shape[1]))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32), {}
    epsilon = float(cell.split("=")[1])
    private = encoded_split(args.dataset, "private", checkpoint=name).latents
    result = fit(from_keywords("dpswflow-hist", epsilon=epsilon, delta=1e-5, count_noise="gaussian",
                               n_projections=args.n_projections, steps=args.steps, n_particles=args.n,
                               step_size=args.step_size, manifold="sphere", seed=args.seed, privacy_seed=args.seed),
                 private)
    report = result.report
    return result.particles.numpy(), {"epsilon_reported": report.epsilon, "statement": report.statement,
                               "noise_multiplier": report.noise_multiplier}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoints", nargs="+", default=["fashion-mnist-adv2"])
    p.add_argument("--dataset", default="fashion-mnist")
    p.add_argument("--epsilons", type=float, nargs="+", default=[10.0, 1.0])
    p.add_argument("--cells", nargs="+", help="only these cells (default: all): reconstruction, public, uniform, "
                   "'hist eps=E'")
    p.add_argument("--n", type=int, default=10_000, help="samples and test images per FID (paper: 10 000)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--step-size", type=float, default=3.0)
    p.add_argument("--n-projections", type=int, default=70)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--decoder", choices=("gan", "nearest-public"), default="gan",
                   help="the checkpoint's decoder, or the public image with the nearest code")
    p.add_argument("--out", default="experiments/out/latent_size.json")
    p.add_argument("--smoke", action="store_true", help="digits, 20 samples, 3 steps, in a temporary folder (CI)")
    args = p.parse_args(argv)
    if args.smoke:
        import tempfile

        args.dataset, args.checkpoints, args.n, args.steps = "digits", ["digits-adv"], 20, 3
        args.out = str(Path(tempfile.mkdtemp()) / "latent_size.json")
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    extractor = InceptionFeatures()
    for name in args.checkpoints:
        model, meta = load_autoencoder(name)
        test = encoded_split(args.dataset, "test" if args.dataset != "digits" else "public", checkpoint=name)
        held_out = test.latents.numpy()
        reference = load_reference({"dataset": args.dataset, "autoencoder": name})
        real_images = reference.images[:args.n]
        real = reference_features(real_images, key=f"{reference.key}-{len(real_images)}", extractor=extractor)
        decode, nearest = model.decode_images, None
        if args.decoder == "nearest-public":
            from autoencoders.nearest import nearest_public_decoder

            nearest = nearest_public_decoder(model, meta)
            decode = nearest
        for cell in args.cells or _cells(args.epsilons):
            key = f"{name}@{meta['weights_sha256'][:12]}/{cell}/{args.n}" + (f"/{args.decoder}" if nearest else "")
            if key in results:
                print(f"{key}: done already, FID {results[key]['fid']:.2f}")
                continue
            t0 = time.perf_counter()
            latents, extra = _latents_for(cell, name, args, held_out)
            flow_seconds = time.perf_counter() - t0
            with torch.no_grad():
                images = decode(latents)  # reconstruction: the held-out images' own codes, in order
            fake = extractor(images, progress=True)
            kid, kid_se = kernel_inception_distance(real, fake)
            results[key] = {"checkpoint": name, "latent": meta["latent"], "cell": cell, "n": len(images),
                            "fid": frechet_distance(FeatureStats.of(real), FeatureStats.of(fake)), "kid": kid,
                            "kid_standard_error": kid_se,
                            "latent_sw": None if cell == "reconstruction" else latent_sw(latents, held_out,
                                                                                         seed=args.seed),
                            "flow_seconds": flow_seconds, "seconds": time.perf_counter() - t0,
                            "machine": f"{platform.machine()}, {torch.get_num_threads()} threads",
                            "decoder": args.decoder, **extra}
            if nearest is not None:
                results[key]["distinct_public_images"] = int(len(np.unique(nearest.nearest(latents))))
            print(json.dumps({key: results[key]}, indent=2), flush=True)
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.exists():  # keep cells another run of this script wrote meanwhile
                results = {**json.loads(out.read_text()), **results}
            out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'checkpoint':24} {'decoder':15} {'cell':16} {'FID':>7} {'latent SW':>10}")
    for row in results.values():
        sw = "—" if row["latent_sw"] is None else f"{row['latent_sw']:.4f}"
        print(f"{row['checkpoint']:24} {row.get('decoder', 'gan'):15} {row['cell']:16} {row['fid']:7.2f} {sw:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
