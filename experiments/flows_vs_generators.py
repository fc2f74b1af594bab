"""Flows against generators at equal privacy, each at its registry defaults, through the public API.

Data: experiments/mixture_sphere.py's 6-cluster mixture on S^7 (3 000 private rows, 3 000 held out;
the generators' defaults were chosen on another law, experiments/generator_defaults.py). Every method
is fitted by ``swflow.Synthesizer(method, epsilon=E, delta=1e-5, manifold="sphere")`` with nothing
else set, at epsilon = 1, 10 and its no-noise limit (inf; not for the local generator, see below). Reported: SW2 of
10 000 samples to the held-out rows (500 fixed directions), the fit's wall time and the time to draw
10 000 and 100 000 samples (a generator samples by one forward pass, a flow replays its steps). The
floor (the private rows themselves) and uniform noise on the sphere sit beside them. A quality-versus-
time figure is written to --out.

    python experiments/flows_vs_generators.py [--epsilons 1 10] [--out experiments/out/flows_vs_generators]
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import tempfile
import time
from pathlib import Path

import torch

from mixture_sphere import mixture
from swflow import Synthesizer, sliced_wasserstein
from swflow.kernels.sliced import random_directions
from swflow.methods.registry import METHODS

FLOWS = ("swf", "dpswflow-hist", "dpswflow-r")
GENERATORS = ("dpswgen", "dpsgd-sw-gen", "ldp-sinkhorn-gen")


def fit_and_score(method: str, epsilon: float, rows: torch.Tensor, score, *, smoke: bool) -> dict:
    settings = {"epsilon": epsilon, "delta": 1e-5, "manifold": "sphere"}
    if method == "swf":
        settings = {"epsilon": math.inf, "manifold": "sphere"}
    if smoke:
        settings["steps"] = 3
    synth = Synthesizer(method, **settings)  # the defaults, fresh noise (as a user gets)
    t0 = time.perf_counter()
    synth.fit(rows.numpy())
    fit_s = time.perf_counter() - t0
    n_small, n_large = (200, 400) if smoke else (10_000, 100_000)
    t0 = time.perf_counter()
    samples = torch.as_tensor(synth.sample(n_small, progress=False))
    sample_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    synth.sample(n_large, progress=False)
    sample_large_s = time.perf_counter() - t0
    return {"method": method, "kind": METHODS[method].kind, "epsilon": settings["epsilon"], "sw2": score(samples),
            "fit_s": fit_s, "sample_10k_s": sample_s, "sample_100k_s": sample_large_s,
            "report_epsilon": synth.privacy_report().epsilon if method != "swf" else math.inf}


def figure(rows: list[dict], fixed: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    markers = {1.0: "o", 10.0: "s"}
    for method in dict.fromkeys(r["method"] for r in rows):
        for r in (r for r in rows if r["method"] == method and r["epsilon"] in markers):
            colour = "tab:blue" if r["kind"] == "flow" else "tab:red"
            ax.scatter(r["fit_s"], r["sw2"], marker=markers[r["epsilon"]], color=colour)
            ax.annotate(f"{method} ε={r['epsilon']:g}", (r["fit_s"], r["sw2"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    ax.axhline(fixed["uniform_on_sphere"], ls="--", color="grey", lw=1)
    ax.text(ax.get_xlim()[0], fixed["uniform_on_sphere"], " uniform on the sphere", fontsize=7, va="bottom")
    ax.axhline(fixed["floor"], ls=":", color="grey", lw=1)
    ax.text(ax.get_xlim()[0], fixed["floor"], " floor", fontsize=7, va="bottom")
    ax.set(xscale="log", yscale="log", xlabel="fit wall time (s, 2 CPU cores)", ylabel="SW2 to held-out rows",
           title="flows (blue) and generators (red), ε = 1 (o) and 10 (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--methods", nargs="+", default=[*FLOWS, *GENERATORS], choices=[*FLOWS, *GENERATORS])
    ap.add_argument("--out", default="experiments/out/flows_vs_generators")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny runs, a temporary folder (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.out, args.epsilons, args.methods = tempfile.mkdtemp(), [10.0], ["dpswflow-hist", "dpswgen"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, held = mixture(3000, seed=1), mixture(3000, seed=2)
    theta = random_directions(500, 8, generator=torch.Generator().manual_seed(99))

    def score(x):
        return float(sliced_wasserstein(x.float(), held, projections=theta))

    uniform = torch.nn.functional.normalize(torch.randn(10_000, 8, generator=torch.Generator().manual_seed(5)), dim=1)
    fixed = {"floor": score(rows), "uniform_on_sphere": score(uniform)}
    cache = out / "cells.json"
    cells = json.loads(cache.read_text()) if cache.exists() and not args.smoke else {}
    for method in args.methods:
        # the local generator's entropic loss has lambda = 2 s^2, which vanishes as epsilon grows: Sinkhorn at
        # epsilon = 1e6 does not finish in reasonable time, so its no-noise limit (exact OT) is
        # experiments/generator_defaults.py's, not a cell here
        limit = [] if method == "ldp-sinkhorn-gen" else [math.inf]
        for eps in ([math.inf] if method == "swf" else [*args.epsilons, *limit]):
            key = f"{method} eps={eps:g}"
            if key not in cells:
                cells[key] = fit_and_score(method, eps, rows, score, smoke=args.smoke)
                cache.write_text(json.dumps(cells, indent=1))
            if not args.json:
                c = cells[key]
                print(f"{key:28} SW2 {c['sw2']:.4f} ({c['sw2'] / fixed['uniform_on_sphere']:.2f} x uniform)  "
                      f"fit {c['fit_s']:7.1f} s  sample 10k {c['sample_10k_s']:6.2f} s  100k {c['sample_100k_s']:6.2f} s",
                      flush=True)
    figure(list(cells.values()), fixed, out / "flows_vs_generators.png")
    result = {"machine": f"{platform.machine()}, {torch.get_num_threads()} threads", **fixed, "cells": cells}
    (out / "results.json").write_text(json.dumps(result, indent=1))
    if args.json:
        print(json.dumps(result))
    else:
        print(f"floor {fixed['floor']:.4f}, uniform on the sphere {fixed['uniform_on_sphere']:.4f}; "
              f"figure {out / 'flows_vs_generators.png'}")


if __name__ == "__main__":
    main()
