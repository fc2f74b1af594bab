"""The libraries a user would pick instead of swflow, on the same rows and with the same scores.

Peers: MST (smartnoise-synth) and PrivBayes (dpmm). Each runs in its *own* virtual environment
(they pin other numpy/torch builds; `make peers-env` makes both under .peers/), through a worker in
experiments/peers/ that reads the private rows from a file and writes samples and what the library
says about its privacy. Both see the rows binned into B bins per coordinate on the declared range
[-1, 1] (no budget spent on bounds), and both account for add/remove neighbours, not swflow's
replace-one: the same noise buys them a smaller ε than it would under replace-one, so the
comparison favours them. Samples are read on the unit sphere (public post-processing; MST's bin
centres are first spread uniformly over their bins).

Benchmarks:
- ``mixture``: 6 clusters on S⁷, 3 000 private rows, SW2 to 3 000 held-out rows on 500 fixed directions
  (experiments/mixture_sphere.py, where swflow's flows are scored the same way);
- ``populations``: the Fashion-MNIST populations of experiments/populations.py (latent SW to the
  population's test latents, class-proportion TV); needs Fashion-MNIST.

Finished cells are kept in --out and a rerun continues.

    make peers-env && python experiments/peers.py [--benchmarks mixture populations] [--epsilons 1 10]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
PEERS = {"mst": ".peers/mst/bin/python", "privbayes": ".peers/privbayes/bin/python"}
SPREAD_BINS = {"mst"}  # peers that return bin centres


def run_peer(peer: str, python: Path, rows: np.ndarray, *, epsilon: float, delta: float, bins: int, n: int,
             seed: int) -> tuple[np.ndarray, dict, float]:
    """Samples (n, d) of ``peer`` fitted on ``rows`` in its own interpreter, its privacy report, seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.save(tmp / "rows.npy", rows.astype(np.float64))
        t0 = time.perf_counter()
        done = subprocess.run([str(python), str(HERE / "peers" / f"{peer}.py"), "--rows", str(tmp / "rows.npy"),
                               "--out", str(tmp / "samples.npy"), "--report", str(tmp / "report.json"),
                               "--epsilon", str(epsilon), "--delta", str(delta), "--bins", str(bins), "--n", str(n),
                               "--seed", str(seed)], capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"{peer} failed:\n{done.stderr[-3000:]}")
        samples = np.load(tmp / "samples.npy")
        report = json.loads((tmp / "report.json").read_text())
    if peer in SPREAD_BINS:  # public randomness: a bin centre becomes a uniform point of its bin
        width = 2.0 / bins
        samples = samples + np.random.default_rng(seed).uniform(-width / 2, width / 2, size=samples.shape)
    samples = samples / np.maximum(np.linalg.norm(samples, axis=1, keepdims=True), 1e-12)
    return samples.astype(np.float32), report, seconds


def _mixture_benchmark(args):
    """(name, private rows, score function) of the mixture on S⁷."""
    sys.path.insert(0, str(HERE))
    from mixture_sphere import mixture

    from swflow import sliced_wasserstein
    from swflow.kernels.sliced import random_directions

    private, held_out = mixture(3000, seed=1), mixture(3000, seed=2)
    theta = random_directions(500, 8, generator=torch.Generator().manual_seed(99))

    def score(samples: np.ndarray) -> dict:
        return {"sw2": float(sliced_wasserstein(torch.from_numpy(samples), held_out, projections=theta))}

    yield "mixture", private.numpy(), score


def _population_benchmarks(args):
    """(name, private rows, score function) per Fashion-MNIST population (experiments/populations.py)."""
    sys.path.insert(0, str(HERE))
    from populations import _classifier, _score

    from autoencoders import default_checkpoint, load_autoencoder
    from swflow.evaluate.runs import load_reference
    from swflow.io.splits import dataset_split
    from autoencoders.encoded import encoded_split
    from swflow.io.populations import proportions

    model, meta = load_autoencoder(default_checkpoint("fashion-mnist"))
    train, labels, halves = dataset_split("fashion-mnist", meta)
    public_rows = halves.public
    classifier = _classifier(train[public_rows], labels[public_rows])
    for name in ("skewed", "footwear"):
        private = encoded_split("fashion-mnist", "private", population=name).latents.numpy()
        ref = load_reference({"dataset": "fashion-mnist", "autoencoder": meta["name"],
                              "autoencoder_sha256": meta["weights_sha256"], "population": {"population": name}})
        yield (f"population {name}", private,
               lambda samples, ref=ref, name=name: _score(samples, ref, model, classifier, proportions(name), 0))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--benchmarks", nargs="+", default=["mixture", "populations"], choices=("mixture", "populations"))
    p.add_argument("--peers", nargs="+", default=list(PEERS), choices=tuple(PEERS))
    p.add_argument("--epsilons", type=float, nargs="+", default=[10.0, 1.0])
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--bins", type=int, default=16, help="bins per coordinate on [-1, 1]")
    p.add_argument("--n", type=int, default=10_000, help="samples per cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--python", action="append", default=[], metavar="PEER=PATH",
                   help="the interpreter of a peer's environment (default: .peers/PEER/bin/python)")
    p.add_argument("--out", default="experiments/out/peers.json")
    p.add_argument("--smoke", action="store_true", help="the mixture at ε = 5, 200 samples, a temporary file (CI; "
                   "peers whose environment is missing are reported and skipped)")
    args = p.parse_args(argv)
    if args.smoke:
        args.benchmarks, args.epsilons, args.n = ["mixture"], [5.0], 200
        args.out = str(Path(tempfile.mkdtemp()) / "peers.json")
    root = HERE.parent
    pythons = {peer: root / path for peer, path in PEERS.items()}
    pythons.update({k: Path(v) for k, v in (item.split("=", 1) for item in args.python)})
    out = Path(args.out)
    cells = json.loads(out.read_text()) if out.exists() else {}
    missing = [peer for peer in args.peers if not pythons[peer].exists()]
    for peer in missing:
        print(f"{peer}: no environment at {pythons[peer]} (make peers-env): skipped")
    benchmarks = {"mixture": _mixture_benchmark, "populations": _population_benchmarks}
    for bench in args.benchmarks:
        for name, private, score in benchmarks[bench](args):
            for peer in (p for p in args.peers if p not in missing):
                for epsilon in args.epsilons:
                    key = f"{name} | {peer} eps={epsilon:g}"
                    if key in cells:
                        continue
                    samples, report, seconds = run_peer(peer, pythons[peer], private, epsilon=epsilon,
                                                        delta=args.delta, bins=args.bins, n=args.n, seed=args.seed)
                    cells[key] = {**score(samples), "seconds": seconds, "privacy": report, "n": args.n,
                                  "bins": args.bins}
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(json.dumps(cells, indent=1) + "\n")
                    print(f"{key:40} " + "  ".join(f"{k} {v:.4f}" for k, v in cells[key].items()
                                                    if isinstance(v, float) and k != "seconds")
                          + f"  ({seconds:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
