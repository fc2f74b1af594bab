"""Latent SW of finished runs to the encoded *test* split (never the private split).

For each run directory: SW_2 over 2 000 fixed directions between its particles and the test
split's latents under the run's autoencoder, beside the floor given by 10 000 public latents
(what a perfect generator of the training distribution would score).

    python experiments/latent_sw.py runs/A runs/B ... [--json]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from autoencoders import load_autoencoder
from swflow import sliced_wasserstein
from swflow.data import load_dataset, split_indices
from swflow.io import read_samples


def _latents(model, images):
    with torch.no_grad():
        return torch.cat([model.encoder(torch.from_numpy(images[i:i + 2048])) for i in range(0, len(images), 2048)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows, cache = [], {}
    for run in map(Path, args.runs):
        report = json.loads((run / "privacy.json").read_text())
        dataset = report["run_config"]["dataset"]
        if dataset not in cache:
            model, meta = load_autoencoder(report["run_config"]["autoencoder"])
            test, _ = load_dataset(dataset, part="test")
            train, _ = load_dataset(dataset)
            public = split_indices(len(train), seed=meta["split"]["seed"]).public[:10_000]
            theta = torch.nn.functional.normalize(torch.randn(meta["latent"], 2000,
                                                              generator=torch.Generator().manual_seed(0)), dim=0)
            test_z = _latents(model, test)
            floor = float(sliced_wasserstein(_latents(model, train[public]), test_z, projections=theta))
            cache[dataset] = (test_z, theta, floor)
        test_z, theta, floor = cache[dataset]
        particles = torch.from_numpy(read_samples(run / "samples.h5")["latents"])
        rows.append({"run": run.name, "method": report["method"], "epsilon": report["epsilon"],
                     "noise_multiplier": report["noise_multiplier"], "steps": report["steps"],
                     "latent_sw_to_test": float(sliced_wasserstein(particles, test_z, projections=theta)),
                     "public_floor": floor})
    if args.json:
        print(json.dumps(rows))
        return
    print("| run | method | eps (ours) | multiplier | latent SW to test | public floor |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        eps = "inf" if r["epsilon"] is None else f"{r['epsilon']:.2f}"
        z = "-" if r["noise_multiplier"] is None else f"{r['noise_multiplier']:.3f}"
        print(f"| {r['run']} | {r['method']} | {eps} | {z} | {r['latent_sw_to_test']:.4f} | {r['public_floor']:.4f} |")


if __name__ == "__main__":
    main()
