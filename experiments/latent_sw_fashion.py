"""Fashion-MNIST latent SW of the private flows at honest ε = 10 and 5, with the current defaults.

Each cell is ``swflow generate`` on the private split's latents (the shipped autoencoder, the
sphere manifold, exact smoothing) with the paper's settings from swflow/configs, then
``swflow evaluate --n-fid 0``: SW2 to the encoded *test* split on 1 000 seeded directions. Beside
them: the trivial answers (uniform noise on the sphere, the encoded public split) scored the same
way. Cells resume (a finished cell is read back, an interrupted one continues).

    python experiments/latent_sw_fashion.py [--out experiments/out/latent_sw] [--smoothing exact] [--json]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from swflow.cli import main as swflow

CELLS = [  # (name, config, extra flags)
    ("dpswflow-r eps=10", "fashion-mnist-dpswflow-r.toml", []),
    ("dpswflow-r eps=5", "fashion-mnist-dpswflow-r-eps5.toml", []),
    ("dpswflow eps=10", "fashion-mnist-dpswflow.toml", []),
    ("dpswflow eps=5", "fashion-mnist-dpswflow.toml", ["--epsilon", "5"]),
    ("ldp-flow eps=10", "fashion-mnist-dpswflow-r.toml", ["--method", "ldp-flow", "--steps", "1500"]),
    ("ldp-flow eps=5", "fashion-mnist-dpswflow-r.toml", ["--method", "ldp-flow", "--steps", "1500", "--epsilon", "5"]),
]
CONFIGS = Path(__file__).parents[1] / "swflow" / "configs"


def trivial_answers(seed: int = 0) -> dict:
    """SW2 to the encoded test split of uniform noise on the sphere and of the encoded public split."""
    import torch

    from swflow.evaluate.metrics import latent_sw
    from swflow.evaluate.runs import load_reference

    from autoencoders import load_autoencoder

    from swflow.io.data import load_dataset
    from swflow.io.splits import dataset_split

    model, meta = load_autoencoder("fashion-mnist")
    ref = load_reference({"dataset": "fashion-mnist", "autoencoder": meta["name"],
                          "autoencoder_sha256": meta["weights_sha256"]})
    images, _ = load_dataset("fashion-mnist")
    public = dataset_split("fashion-mnist", meta, images=images)[2].public[:10_000]
    with torch.no_grad():
        pub = torch.cat([model.encoder(torch.from_numpy(images[public][i:i + 1024]))
                         for i in range(0, len(public), 1024)]).numpy()
    rng = np.random.default_rng(seed)
    uniform = rng.normal(size=(10_000, pub.shape[1]))
    uniform /= np.linalg.norm(uniform, axis=1, keepdims=True)
    return {"public split (10 000 encoded rows)": latent_sw(pub, ref.latents, seed=seed),
            "uniform on the sphere": latent_sw(uniform, ref.latents, seed=seed)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="experiments/out/latent_sw")
    ap.add_argument("--smoothing", choices=("exact", "sampled"), default="exact")
    ap.add_argument("--manifold", choices=("sphere", "ball"), default="sphere")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="one tiny cell, outputs in a temporary folder (CI)")
    args = ap.parse_args()
    cells, smoke = CELLS, []
    if args.smoke:
        import tempfile

        args.out, cells = tempfile.mkdtemp(), [CELLS[0]]
        smoke = ["--steps", "3", "--n-particles", "100"]
    out = Path(args.out)
    rows = {}
    for name, config, extra in cells:
        run = out / f"{name.replace(' ', '_').replace('=', '')}-{args.smoothing}-{args.manifold}"
        metrics = run / "metrics.json"
        t0 = time.perf_counter()
        if not metrics.exists():
            flags = ["generate", "--config", str(CONFIGS / config), "--out", str(run), "--privacy-seed", "0",
                     "--smoothing", args.smoothing, "--manifold", args.manifold, *extra, *smoke]
            if run.exists():
                flags.append("--resume")
            if swflow(flags) != 0 or swflow(["evaluate", str(run), "--n-fid", "0"]) != 0:
                raise SystemExit(f"cell {name} failed")
        m = json.loads(metrics.read_text())
        rows[name] = {"latent_sw": m["latent_sw"], "epsilon": m["epsilon"], "statement": m["statement"],
                      "seconds": time.perf_counter() - t0}
    result = {"cells": rows, "trivial": trivial_answers(), "smoothing": args.smoothing, "manifold": args.manifold}
    if args.json:
        print(json.dumps(result))
        return
    for name, row in rows.items():
        print(f"{name:20} latent SW {row['latent_sw']:.4f}   {row['statement']}")
    for name, value in result["trivial"].items():
        print(f"{name:34} latent SW {value:.4f}")


if __name__ == "__main__":
    main()
