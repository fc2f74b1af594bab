"""How dpswflow-hist's defaults were chosen: a grid over K (directions), B (bins) and the step size on
data that is not the benchmark's private data.

Tuning sets (none of them is a set the results tables score):
* ``fm-public``: the shipped Fashion-MNIST encoder's latents of the PUBLIC split (first n rows as the
  pretend-private set, rows 20 000-29 999 as the held-out reference);
* ``mix10``: a 10-cluster mixture on S^7 (spread 0.25; not experiments/mixture_sphere.py's mixture);
* ``mix10-d16``: the same recipe on S^15.

Each cell runs the flow (sphere manifold, 10 000 particles, 300 steps, 32 directions a step) and
scores SW2 to the held-out rows on 500 fixed directions, beside the floor (the pretend-private rows
against the reference). Cells are cached in ``--out`` (a rerun continues where it stopped).

    python experiments/hist_rules.py [--smoke] [--json] [--out experiments/out/hist_rules.json]

``--postprocessing`` instead compares ways to turn one release's noisy counts into CDFs, on the
fm-public rows: the RMS error of each direction's released quantiles (256 levels) against the rows'
own, for the 2-sigma threshold (the default), isotonic regression of the cumulative counts, and the
Euclidean projection of the counts onto the simplex.
"""
from __future__ import annotations

import argparse
import itertools
import json
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import torch

from swflow import sliced_wasserstein
from swflow.kernels.sliced import random_directions
from swflow.pipeline.fitting import fit
from swflow.pipeline.settings import from_keywords

SHAPES = [(32, 16), (64, 16), (64, 32), (128, 32), (128, 64), (256, 64), (512, 128)]


def sphere_mixture(n: int, *, dim: int, clusters: int = 10, spread: float = 0.25, seed: int) -> torch.Tensor:
    centres = torch.nn.functional.normalize(torch.randn(clusters, dim, generator=torch.Generator().manual_seed(7)),
                                            dim=1)
    g = torch.Generator().manual_seed(seed)
    rows = centres[torch.randint(0, clusters, (n,), generator=g)] + spread * torch.randn(n, dim, generator=g)
    return torch.nn.functional.normalize(rows, dim=1)


def fashion_public() -> tuple[torch.Tensor, torch.Tensor]:
    """(pool of pretend-private rows, held-out reference): encoded public split only."""
    from autoencoders.encoded import encoded_split

    rows = encoded_split("fashion-mnist", "public").latents
    return rows[:20_000], rows[20_000:30_000]


def data_sets(smoke: bool) -> dict:
    if smoke:
        return {"mix10": (sphere_mixture(600, dim=8, seed=1), sphere_mixture(600, dim=8, seed=2))}
    return {"fm-public": fashion_public(),
            "mix10": (sphere_mixture(20_000, dim=8, seed=1), sphere_mixture(10_000, dim=8, seed=2)),
            "mix10-d16": (sphere_mixture(20_000, dim=16, seed=1), sphere_mixture(10_000, dim=16, seed=2))}


def _isotonic_cdf(noisy: torch.Tensor, total: float) -> torch.Tensor:
    from scipy.optimize import isotonic_regression

    inner = np.cumsum(noisy.numpy(), axis=1)[:, :-1]
    fitted = np.clip(np.stack([isotonic_regression(r).x for r in inner]), 0, total) / total
    k = noisy.shape[0]
    return torch.from_numpy(np.concatenate([np.zeros((k, 1)), fitted, np.ones((k, 1))], axis=1))


def _simplex_cdf(noisy: torch.Tensor, total: float) -> torch.Tensor:
    c = noisy.numpy()
    u = -np.sort(-c, axis=1)
    excess = np.cumsum(u, axis=1) - total
    fits = u - excess / np.arange(1, c.shape[1] + 1) > 0
    last = c.shape[1] - 1 - np.argmax(fits[:, ::-1], axis=1)
    x = np.maximum(c - (excess[np.arange(len(c)), last] / (last + 1))[:, None], 0)
    cdf = np.concatenate([np.zeros((len(c), 1)), np.cumsum(x, axis=1) / x.sum(axis=1, keepdims=True)], axis=1)
    return torch.from_numpy(cdf)


def postprocessing(rows: torch.Tensor, *, shapes=((256, 64), (64, 32)), epsilons=(10.0, 1.0)) -> dict:
    """RMS quantile error per direction of three post-processings of one noisy release of ``rows``."""
    from swflow.privacy.histogram import bin_edges, histogram_sensitivity, monotone_cdf, projection_counts, quantile_table
    from swflow.privacy.mechanisms import analytic_gaussian_multiplier

    rows = rows.double()
    g = torch.Generator().manual_seed(0)
    levels = (torch.arange(256, dtype=torch.float64) + 0.5) / 256
    out = {}
    for eps, (k, b) in itertools.product(epsilons, shapes):
        theta = random_directions(k, rows.shape[1], generator=g, dtype=torch.float64)
        counts = projection_counts(rows, theta, bins=b, radius=1.0).double()
        sigma = analytic_gaussian_multiplier(epsilon=eps, delta=1e-5) * histogram_sensitivity(k, adjacency="replace-one").value
        noisy = counts + sigma * torch.randn(counts.shape, generator=g, dtype=torch.float64)
        truth = torch.quantile((rows @ theta).T, levels, dim=1).T
        for name, cdf in (("threshold", monotone_cdf(noisy, noise_std=sigma)),
                          ("isotonic", _isotonic_cdf(noisy, float(len(rows)))),
                          ("simplex", _simplex_cdf(noisy, float(len(rows))))):
            table = quantile_table(cdf, bin_edges(b, radius=1.0), levels)
            out[f"eps={eps:g} K={k} B={b} {name}"] = float((table - truth).square().mean().sqrt())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1500, 5000, 20_000])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--step-sizes", type=float, nargs="+", default=[1.0, 3.0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--n-particles", type=int, default=10_000)
    ap.add_argument("--out", default="experiments/out/hist_rules.json")
    ap.add_argument("--smoke", action="store_true", help="a tiny grid (CI)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--postprocessing", action="store_true", help="compare CDF post-processings instead")
    args = ap.parse_args()
    if args.postprocessing:
        rows = sphere_mixture(3000, dim=8, seed=1) if args.smoke else fashion_public()[0]
        result = postprocessing(rows, shapes=((32, 16),) if args.smoke else ((256, 64), (64, 32)))
        print(json.dumps(result, indent=1))
        return
    shapes = SHAPES
    if args.smoke:
        args.sizes, args.epsilons, args.step_sizes, args.steps, args.n_particles = [500], [1.0], [3.0], 10, 300
        shapes, args.out = [(32, 16)], None
    warnings.simplefilter("ignore", UserWarning)  # delta vs 1/(n ln n) at the smallest n

    cache_path = Path(args.out) if args.out else None
    cache = json.loads(cache_path.read_text()) if cache_path and cache_path.exists() else {}
    out = {"machine": f"{platform.machine()}, {torch.get_num_threads()} threads", "cells": cache}
    for name, (pool, reference) in data_sets(args.smoke).items():
        theta = random_directions(500, pool.shape[1], generator=torch.Generator().manual_seed(99))
        for n in args.sizes:
            private = pool[:n]
            floor_key = f"{name} n={n} floor"
            cache.setdefault(floor_key, float(sliced_wasserstein(private, reference, projections=theta)))
            for eps, (k, b), h in itertools.product(args.epsilons, shapes + [(None, None)], args.step_sizes):
                # (None, None): the default shape; seeded float noise, so that a cell reproduces
                settings = from_keywords("dpswflow-hist", epsilon=eps, delta=1e-5, count_noise="gaussian",
                                         n_projections=32, pool_size=k, bins=b, steps=args.steps, step_size=h,
                                         n_particles=args.n_particles, manifold="sphere", seed=0, privacy_seed=0)
                plan = settings.plan(n, private.shape[1])
                key = f"{name} n={n} eps={eps:g} K={plan.release.n_projections} B={plan.bins} h={h:g}"
                if key not in cache:
                    t0 = time.perf_counter()
                    particles = fit(settings, private, plan=plan).particles
                    cache[key] = float(sliced_wasserstein(particles, reference, projections=theta))
                    if not args.json:
                        print(f"{key}: SW2 {cache[key]:.4f} (floor {cache[floor_key]:.4f}, "
                              f"{time.perf_counter() - t0:.1f} s)", flush=True)
                    if cache_path:
                        cache_path.parent.mkdir(parents=True, exist_ok=True)
                        cache_path.write_text(json.dumps(cache, indent=1))
    if args.json:
        print(json.dumps(out))


if __name__ == "__main__":
    main()
