"""A finished run as a sampler: model-file size, sampling speed and quality of new particles.

DPSWflow-r on the 899 private digits latents (ε = 10, 200 steps, Nθ = 32, batch 100, 900
particles). For each sketch size (quantile levels kept per released direction; 'full' keeps all
100 released values) it prints the size of model.h5, then the latent SW to the held-out public
latents of the original particles and of new ones drawn with `FlowModel.sample` at 1/10×, 1×
and 10× the original count, and the sampling speed for 10⁴–10⁶ particles.

    python experiments/bench_sampler.py [--json]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from swflow.evaluate.metrics import latent_sw
from swflow.methods.flows import make_flow
from swflow.methods.model import FlowModel
from swflow.privacy import PrivacySpec
from swflow.simulate.callbacks import ReleaseLog
from swflow.simulate.flow import FlowConfig


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--speed-sizes", default="10000,100000,1000000")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, outputs in a temporary folder (CI)")
    args = ap.parse_args()
    steps = 200
    if args.smoke:
        args.speed_sizes, steps = "1000", 5
    torch.set_num_threads(2)
    from autoencoders.encoded import encoded_split

    private, _, _, split, _ = tuple(encoded_split("digits", "private"))[:5]
    from autoencoders import load_autoencoder
    from swflow.io.data import load_digits

    model, _ = load_autoencoder("digits")
    with torch.no_grad():
        held_out = model.encoder(torch.from_numpy(load_digits()[0][split.public])).numpy()
    n = 900
    config = FlowConfig(steps=steps, n_particles=n, step_size=1.0, init="sphere", record_every=0, seed=0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for sketch in (16, 64, None):
            path = Path(tmp) / f"model-{sketch}.h5"
            flow = make_flow("dpswflow-r", private, privacy=PrivacySpec(epsilon=10.0, delta=1e-5), config=config,
                             n_projections=32, batch_size=100, privacy_seed=0,
                             callbacks=[ReleaseLog(path, sketch=sketch)], progress=False)
            original = flow.run().particles.numpy()
            sampler = FlowModel.from_file(path)
            row = {"sketch": sketch or "full", "model_bytes": path.stat().st_size,
                   "sw_original": latent_sw(original, held_out)}
            for factor in (0.1, 1, 10):
                row[f"sw_resampled_x{factor:g}"] = latent_sw(sampler.sample(int(n * factor), seed=1).numpy(), held_out)
            rows.append(row)
        speed = {}
        for size in map(int, args.speed_sizes.split(",")):
            t0 = time.perf_counter()
            sampler.sample(size, seed=2)
            speed[size] = size / (time.perf_counter() - t0)
    if args.json:
        print(json.dumps({"quality": rows, "particles_per_s": speed}))
        return
    print("sketch | model.h5 | SW original | SW new ×0.1 | ×1 | ×10")
    for r in rows:
        print(f"{r['sketch']} | {r['model_bytes'] / 1024:.0f} KiB | {r['sw_original']:.4f} | "
              f"{r['sw_resampled_x0.1']:.4f} | {r['sw_resampled_x1']:.4f} | {r['sw_resampled_x10']:.4f}")
    print("sampling (200 steps, full model):", ", ".join(f"{k:.0e}: {v:,.0f} particles/s" for k, v in speed.items()))


if __name__ == "__main__":
    main()
