"""How to split epsilon between the histogram release and the decoder's DP-SGD adaptation (``adapt_share``),
chosen on a public shift, never on private rows.

The shift: the checkpoint that never saw some classes (``fashion-mnist-no-footwear``: no sandals, sneakers or
ankle boots) and, as stand-in private data, the PUBLIC split's images of exactly those classes. They are public
(using them costs no privacy) yet new to the checkpoint, as a user's private classes would be. Half of them
play the private data; the other half is the reference the samples are scored against (FID/KID). For each
total epsilon, the frozen decoder (the whole budget on the histogram) and the adaptation at several shares;
the default is the share with the lowest FID averaged over the epsilons.

The Synthesizer refuses public images as private data (a record is public or private, not both), so this
script calls the same steps it takes: the budget split (autoencoders.adapt.split_budget), the
histogram flow on the codes (swflow.pipeline.fitting.fit) and DP-SGD on the decoder
(autoencoders.adapt.adapt_decoder).

    python experiments/adapt_share.py [--shares 0.25 0.5 0.75] [--epsilons 1 10] [--n 2000] [--json]
    python experiments/adapt_share.py --objective critic --adapt-steps 600 --adapt-lr 5e-4 --shares 0.1 0.5 0.9

``--objective critic`` measures the DP-critic objective (its cells are cached under their own keys).
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from autoencoders.adapt import adapt_decoder, split_budget
from swflow.pipeline.fitting import fit
from swflow.pipeline.settings import from_keywords
from swflow.privacy import NoiseSource


def stand_in(dataset: str, meta: dict, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(stand-in private images, reference images): the public split's images of the classes the checkpoint
    never saw, shuffled (seeded) and cut in two halves of at most ``n``."""
    from swflow.io.splits import dataset_split

    images, labels, halves = dataset_split(dataset, meta)
    public, public_labels = images[halves.public], labels[halves.public]
    unseen = public[np.isin(public_labels, meta["excluded_classes"])]
    unseen = unseen[np.random.default_rng(0).permutation(len(unseen))]
    half = min(n, len(unseen) // 2)
    return unseen[:half], unseen[half:2 * half]


def samples(model, images: np.ndarray, *, epsilon: float, share: float | None, n: int, extra: dict) -> np.ndarray:
    """``n`` images of a dpswflow-hist run on ``images`` at total ``epsilon``: with the frozen decoder
    (``share`` None) or with the decoder adapted on ``share`` of epsilon."""
    adapt = {} if share is None else {"adapt_decoder": True, "adapt_share": share}
    if share is None:  # the frozen decoder: no adaptation settings (they would be refused as ignored)
        extra = {k: v for k, v in extra.items() if not k.startswith("adapt_")}
    settings = from_keywords("dpswflow-hist", epsilon=epsilon, **{"delta": 1e-5, **extra}, count_noise="gaussian",
                             n_particles=n, manifold="sphere", privacy_seed=0, **adapt)
    codes = torch.from_numpy(model.encode_images(images))
    if share is None:
        return model.decode_images(fit(settings, codes).particles.numpy())
    histogram_spec, multiplier = split_budget(settings.privacy, settings.plan(*codes.shape).release, settings.adapt)
    particles = fit(replace(settings, privacy=histogram_spec), codes).particles
    adapted, _, _ = adapt_decoder(model, images, particles.numpy(), multiplier=multiplier, settings=settings.adapt,
                                  adjacency=settings.privacy.adjacency, noise=NoiseSource(0 + 7919),
                                  progress=False)  # the seeds a run with privacy_seed 0 uses
    return adapted.decode_images(particles.numpy())


def score(fake: np.ndarray, real_features, extractor) -> dict:
    """FID and KID of ``fake`` against the reference's Inception features (None without an extractor)."""
    from swflow.evaluate.metrics import FeatureStats, frechet_distance, kernel_inception_distance

    if extractor is None:
        return {"fid": None, "kid": None}
    features = extractor(fake)
    return {"fid": frechet_distance(FeatureStats.of(real_features), FeatureStats.of(features)),
            "kid": kernel_inception_distance(real_features, features)[0]}


def _key(eps: float, share: float | None, objective: str, extra: dict) -> str:
    """A cell's name in the cache: the pixel objective's keep their first form; the critic's name its settings."""
    if share is None:
        return f"eps={eps:g} frozen"
    tail = "" if objective == "pixel" else (f" critic steps={extra.get('adapt_steps', 'default')} "
                                            f"lr={extra.get('adapt_lr', 'default')}")
    return f"eps={eps:g} share={share:g}{tail}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--unseen", default="fashion-mnist-no-footwear", help="a checkpoint that never saw some classes")
    ap.add_argument("--shares", type=float, nargs="+", default=[0.25, 0.5, 0.75])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--n", type=int, default=2_000, help="stand-in private images, reference images and samples")
    ap.add_argument("--objective", choices=["pixel", "critic"], default="pixel", help="the adaptation's objective")
    ap.add_argument("--adapt-steps", type=int, help="DP-SGD steps (default: the library's)")
    ap.add_argument("--adapt-lr", type=float, help="the decoder's learning rate (default: the library's)")
    ap.add_argument("--out", default="experiments/out/adapt_share")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="digits, a tiny unseen checkpoint, tiny runs (CI)")
    args = ap.parse_args()
    from autoencoders import load_autoencoder
    from swflow.evaluate.metrics import InceptionFeatures

    extra = {"adapt_objective": args.objective, **({"adapt_steps": args.adapt_steps} if args.adapt_steps else {}),
             **({"adapt_lr": args.adapt_lr} if args.adapt_lr else {})}
    if args.smoke:
        from unseen_classes import _smoke_checkpoint

        args.out = tempfile.mkdtemp()
        args.unseen, args.n, args.shares, args.epsilons = _smoke_checkpoint(Path(args.out)), 40, [0.5], [5.0]
        extra = {**extra, "steps": 3, "delta": 1e-4, "adapt_steps": 2, "adapt_batch_size": 8}
    model, meta = load_autoencoder(args.unseen)
    if not meta.get("excluded_classes"):
        raise SystemExit(f"{args.unseen} names no excluded classes: train it with swflow train-ae --exclude-classes")
    private, reference = stand_in(meta["dataset"], meta, args.n)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cells.json"
    cells = json.loads(cache.read_text()) if cache.exists() else {}
    extractor = None if args.smoke else InceptionFeatures()  # the smoke run checks the pipeline, not the scores
    real = None if extractor is None else extractor(reference)
    for eps in args.epsilons:
        for share in [None, *args.shares]:
            key = _key(eps, share, args.objective, extra)
            if key in cells and cells[key]["n"] == args.n:
                continue
            t0 = time.perf_counter()
            fake = samples(model, private, epsilon=eps, share=share, n=args.n, extra=extra)
            cells[key] = {**score(fake, real, extractor), "n": args.n, "seconds": time.perf_counter() - t0}
            cache.write_text(json.dumps(cells, indent=1))
            if not args.json and extractor is not None:
                print(f"{key:22} FID {cells[key]['fid']:7.2f}  KID {cells[key]['kid']:.4f}  "
                      f"({cells[key]['seconds']:.0f} s)", flush=True)
    if extractor is None:
        print(json.dumps({"cells": cells}))
        return
    mean_fid = {share: float(np.mean([cells[_key(eps, share, args.objective, extra)]["fid"] for eps in args.epsilons]))
                for share in args.shares}
    best = min(mean_fid, key=mean_fid.get)
    result = {"checkpoint": meta["name"], "excluded_classes": meta["excluded_classes"], "cells": cells,
              "mean_fid_by_share": {f"{s:g}": v for s, v in mean_fid.items()}, "best_share": best}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"mean FID over epsilon {', '.join(f'{s:g}: {v:.2f}' for s, v in mean_fid.items())}; best share {best:g}")


if __name__ == "__main__":
    main()
