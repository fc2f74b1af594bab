"""Flow versus generator at the same ε: SW to held-out clean data, on the 2-D toy and on the digits.

Methods: swf (ε = ∞), dpswflow-r, dpswflow, dpswgen (central DP, replace-one) and ldp-flow,
ldp-sinkhorn-gen (local DP: every record released once; a much stronger guarantee at the same ε).
Toy: 5-Gaussian mixture inside the unit disc, 2 000 private records, held-out = a fresh sample.
Digits: the 899 private latents of the shipped autoencoder; held-out = the 898 public latents
(digits has no test split). Settings are modest so the table runs in a few minutes on 2 cores.

    python experiments/compare_methods.py [--json]
"""
from __future__ import annotations

import argparse
import json
import math
import warnings

import torch

from swflow import sliced_wasserstein
from swflow.methods.generators import GeneratorConfig, SinkhornConfig, make_dpswgen, make_ldp_sinkhorn_gen
from swflow.pipeline.fitting import fit
from swflow.pipeline.settings import from_keywords
from swflow.privacy import PrivacySpec

EPSILONS = (math.inf, 10.0, 5.0)
DELTA = 1e-5


def toy(n: int, gen: torch.Generator) -> torch.Tensor:
    centers = torch.tensor([[0.0, 0.0], [0.5, 0.5], [-0.5, 0.5], [0.5, -0.5], [-0.5, -0.5]])
    return centers[torch.randint(0, 5, (n,), generator=gen)] + 0.05 * torch.randn(n, 2, generator=gen)


def digits_latents() -> tuple[torch.Tensor, torch.Tensor]:
    from autoencoders import load_autoencoder
    from swflow.io.data import load_dataset
    from swflow.io.splits import dataset_split

    images, _ = load_dataset("digits")
    model, meta = load_autoencoder("digits")
    _, _, split = dataset_split("digits", meta, images=images, labels=None)
    with torch.no_grad():
        return model.encoder(torch.from_numpy(images[split.private])), model.encoder(torch.from_numpy(images[split.public]))


def run(method: str, data: torch.Tensor, eps: float, *, on_sphere: bool, steps: int, k: int, batch: int) -> torch.Tensor:
    spec = PrivacySpec(epsilon=eps, delta=DELTA, clip=not on_sphere)
    n = data.shape[0]
    init = "sphere" if on_sphere else "normal"
    if method in ("swf", "dpswflow-r", "ldp-flow", "dpswflow"):
        shape = {"pool_size": 2 * k} if method == "dpswflow" else {"batch_size": batch}  # >= n: a full batch
        settings = from_keywords(method, epsilon=eps, delta=DELTA, clip=not on_sphere, n_projections=k, steps=steps,
                                 step_size=1.0, n_particles=n, init=init, privacy_seed=0, **shape)
        return fit(settings, data).particles
    if method == "dpswgen":
        return make_dpswgen(data, privacy=spec, n_projections=k, batch_size=min(batch, n), privacy_seed=0,
                            config=GeneratorConfig(steps=steps)).fit(progress=False).sample(n, seed=1)
    return make_ldp_sinkhorn_gen(data, privacy=spec, privacy_seed=0,
                                 config=SinkhornConfig(steps=min(steps, 150), batch_size=128,
                                                       on_sphere=on_sphere)).fit(progress=False).sample(n, seed=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, outputs in a temporary folder (CI)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    gen = torch.Generator().manual_seed(0)
    private_digits, public_digits = digits_latents()
    problems = {
        "toy": dict(data=toy(2000, gen), held_out=toy(2000, gen), on_sphere=False, steps=200, k=50, batch=500),
        "digits": dict(data=private_digits, held_out=public_digits, on_sphere=True, steps=100, k=64, batch=899),
    }
    if args.smoke:
        problems = {"toy": dict(data=toy(300, gen), held_out=toy(300, gen), on_sphere=False, steps=2, k=8, batch=100)}
    rows = []
    for name, p in problems.items():
        theta = torch.nn.functional.normalize(torch.randn(p["data"].shape[1], 1000, generator=gen), dim=0)
        floor = float(sliced_wasserstein(p["data"], p["held_out"], projections=theta))
        for method in ("swf", "dpswflow-r", "dpswflow", "dpswgen", "ldp-flow", "ldp-sinkhorn-gen"):
            for eps in EPSILONS:
                if (method == "swf") != math.isinf(eps):
                    continue
                out = run(method, p["data"], eps, on_sphere=p["on_sphere"], steps=p["steps"], k=p["k"], batch=p["batch"])
                rows.append({"problem": name, "method": method, "epsilon": None if math.isinf(eps) else eps,
                             "sw_to_held_out": float(sliced_wasserstein(out, p["held_out"], projections=theta)),
                             "private_data_floor": floor})
    if args.json:
        print(json.dumps(rows))
        return
    for name in problems:
        sub = [r for r in rows if r["problem"] == name]
        print(f"\n{name}: SW to held-out clean data (private data itself: {sub[0]['private_data_floor']:.3f})")
        print("| method | eps = inf | eps = 10 | eps = 5 |")
        print("|---|---|---|---|")
        for method in dict.fromkeys(r["method"] for r in sub):
            cells = {r["epsilon"]: r["sw_to_held_out"] for r in sub if r["method"] == method}
            fmt = lambda e: f"{cells[e]:.3f}" if e in cells else "-"  # noqa: E731
            print(f"| {method} | {fmt(None)} | {fmt(10.0)} | {fmt(5.0)} |")


if __name__ == "__main__":
    main()
