"""004 Table 1 on Fashion-MNIST (or MNIST): FID of DPSWgen, DPSWflow-r and DPSWflow at ε = ∞, 10, 5.

Every cell is a `swflow generate` run with the paper's settings from swflow/configs/
followed by `swflow evaluate`; cells already scored are skipped, an interrupted cell resumes
from its checkpoint. Private cells run twice:
  honest   the noise our replace-one accountant needs for the nominal ε (what the ε column means);
  paper    the paper's noise (multipliers 0.67 / 0.8 for the resampled methods, the classical
           Gaussian σ = sqrt(2 ln(1.25/δ))/ε for DPSWflow), with the ε it really buys.
Both are reported with the ε under the paper's accounting (Poisson moments accountant via
Opacus; classical Gaussian for DPSWflow) and under ours (replace-one, fixed-size batches).
Extra rows: the LDP flow, and three references that need no private data at all: real
public-split images, the public split through the autoencoder (what a private method must beat:
it is free), and the test images' own reconstructions (the decoder's floor). Every cell records
the seconds it took (generation and evaluation).

On 2 CPU cores one cell at the paper's protocol (10 000 particles, FID on 10 000 samples) takes
about 20-30 min, mostly the Inception network; --seeds, --n-fid and --n-particles budget it, and
the output says so. The issue-17 table (honest noise, one seed, the sharper decoder):

    python experiments/table1.py --seeds 1 --noise honest --checkpoint fashion-mnist-adv
    python experiments/table1.py --device cuda                                 # the full table on a GPU
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swflow.cli import main as swflow

CONFIGS = Path(__file__).parents[1] / "swflow" / "configs"
PAPER_FID = {  # 004 Table 1 (ε = ∞ / 10 / 5)
    "fashion-mnist": {"dpswgen": (138, 170, 199), "dpswflow-r": (42, 88, 98), "dpswflow": (96, 98, 129)},
    "mnist": {"dpswgen": (114, 124, 198), "dpswflow-r": (21, 70, 114), "dpswflow": (73, 118, 171)},
}
PAPER_MULTIPLIER = {10.0: 0.67, 5.0: 0.8}  # App. C.5, resampled methods
DELTA = 1e-5
SMOKE_FLAGS: list[str] = []  # extra generate flags of a --smoke run


@dataclass(frozen=True)
class Cell:
    row: str        # method name in the table
    method: str     # swflow --method
    config: str     # TOML in swflow/configs
    column: float   # nominal ε (inf for none)
    noise: str      # 'none' | 'honest' | 'paper'

    @property
    def name(self) -> str:
        eps = "inf" if math.isinf(self.column) else f"eps{self.column:g}"
        return f"{self.row}-{eps}-{self.noise}"


ROWS = ("dpswgen", "dpswflow-r", "dpswflow")


def cells(dataset: str, extra: bool, rows: tuple[str, ...] = ROWS) -> list[Cell]:
    out = []
    for method in rows:
        row = method
        base = f"{dataset}-dpswflow.toml" if method == "dpswflow" else f"{dataset}-dpswflow-r.toml"
        eps5 = base if method == "dpswflow" else f"{dataset}-dpswflow-r-eps5.toml"  # 20 epochs at ε = 5
        out.append(Cell(row, method, base, math.inf, "none"))
        for column, config in ((10.0, base), (5.0, eps5)):
            out += [Cell(row, method, config, column, "honest"), Cell(row, method, config, column, "paper")]
    if extra:
        out += [Cell("ldp-flow", "ldp-flow", f"{dataset}-dpswflow-r.toml", e, "honest") for e in (10.0, 5.0)]
    return out


def budget_args(cell: Cell, delta: float) -> list[str]:
    if cell.noise == "none":
        return ["--epsilon", "inf"]
    if cell.noise == "honest":
        return ["--epsilon", str(cell.column)]
    if cell.method == "dpswflow":  # the paper's classical Gaussian calibration
        return ["--noise-multiplier", str(math.sqrt(2 * math.log(1.25 / delta)) / cell.column)]
    return ["--noise-multiplier", str(PAPER_MULTIPLIER[cell.column])]


def paper_accounting_epsilon(report: dict) -> float | None:
    """ε of the run's noise under the paper's accounting: Opacus RDP with Poisson sampling for the
    resampled methods (moments accountant), the classical Gaussian bound for DPSWflow."""
    if not report.get("private") or report["method"] == "ldp-flow":
        return None
    z = report["noise_multiplier"]
    if report["method"] == "dpswflow":
        return math.sqrt(2 * math.log(1.25 / report["delta_accountant"])) / z
    from opacus.accountants import RDPAccountant

    acc = RDPAccountant()
    acc.history = [(z, report["sample_rate"], report["steps"])]
    return acc.get_epsilon(delta=report["delta_accountant"])


def quiet(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return fn(*args)


def _timed(path: Path, key: str, argv: list[str]) -> None:
    """Run ``swflow argv`` and add its seconds under ``key`` in the JSON file ``path``."""
    t0 = time.perf_counter()
    if quiet(swflow, argv) != 0:
        raise RuntimeError(f"swflow {' '.join(argv)} failed")
    times = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**times, key: time.perf_counter() - t0}))


def run_cell(cell: Cell, out: Path, *, dataset: str, seed: int, n_particles: int, n_fid: int, device: str,
             data_root: str | None, checkpoint: str) -> dict:
    run_dir = out / "cells" / f"{cell.name}-s{seed}"
    seconds = out / "cells" / f"{cell.name}-s{seed}.seconds.json"  # beside the run: outputs are replaced whole
    root = ["--data-root", data_root] if data_root else []
    if not (run_dir / "metrics.json").exists():
        if not (run_dir / "privacy.json").exists():
            argv = ["generate", "--config", str(CONFIGS / cell.config), "--method", cell.method, "--out", str(run_dir),
                    "--resume", "--seed", str(seed), "--privacy-seed", str(10_000 + seed), "--checkpoint", checkpoint,
                    "--n-particles", str(n_particles), "--delta", str(DELTA), "--device", device,
                    *budget_args(cell, DELTA), *root, *SMOKE_FLAGS]
            _timed(seconds, "generate", argv)
        _timed(seconds, "evaluate", ["evaluate", str(run_dir), "--n-fid", str(n_fid), "--device", device, *root])
    metrics = json.loads((run_dir / "metrics.json").read_text())
    report = json.loads((run_dir / "privacy.json").read_text())
    times = json.loads(seconds.read_text()) if seconds.exists() else {}
    return {"cell": cell.name, "row": cell.row, "column": cell.column, "noise": cell.noise, "seed": seed,
            "seconds": sum(times.values()) or None, "kid": metrics.get("kid"),
            "fid": metrics.get("fid"), "latent_sw": metrics["latent_sw"], "precision": metrics["latent_precision"],
            "recall": metrics["latent_recall"], "epsilon_ours": report.get("epsilon"),
            "epsilon_paper_accounting": paper_accounting_epsilon(report),
            "noise_multiplier": report.get("noise_multiplier"), "statement": report["statement"]}


def floors(out: Path, *, dataset: str, n_fid: int, device: str, data_root: str | None, checkpoint: str) -> list[dict]:
    """References that need no private data, against the first ``n_fid`` test images: real public-split
    images, the same images through the autoencoder, and the test images' own reconstructions. Each
    row is saved when done, so an interrupted run keeps the finished ones."""
    from autoencoders import load_autoencoder
    from swflow.evaluate.metrics import (FeatureStats, InceptionFeatures, frechet_distance, kernel_inception_distance,
                                         reference_features)
    from swflow.io.data import load_dataset
    from swflow.io.splits import dataset_split

    path = out / f"floors-{n_fid}.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    model, meta = load_autoencoder(checkpoint)
    train, _ = load_dataset(dataset, root=data_root)
    test, _ = load_dataset(dataset, part="test", root=data_root)
    public = train[dataset_split(dataset, meta, images=train)[2].public]
    public = public[np.random.default_rng(0).permutation(len(public))[:n_fid]]
    extractor = InceptionFeatures(device=device)
    real = reference_features(test[:n_fid], key=f"{dataset}-test-{n_fid}", extractor=extractor)
    for name, make in (("real public images", lambda: public),
                       ("public split through the autoencoder", lambda: model.decode_images(model.encode_images(public))),
                       ("test images' reconstructions", lambda: model.decode_images(model.encode_images(test[:n_fid])))):
        if any(r["row"] == name for r in rows):
            continue
        t0 = time.perf_counter()
        fake = extractor(make(), progress=True)
        kid, _ = kernel_inception_distance(real, fake)
        rows.append({"row": name, "fid": frechet_distance(FeatureStats.of(real), FeatureStats.of(fake)), "kid": kid,
                     "seconds": time.perf_counter() - t0})
        path.write_text(json.dumps(rows, indent=2))
    return rows


def fmt(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def eps_text(value) -> str:
    return "—" if value is None else f"{value:.2f}"  # None: no such accounting (the LDP flow has no paper figure)


def markdown(results: list[dict], floor_rows: list[dict], *, dataset: str, budget: str) -> str:
    lines = [f"{dataset}, FID vs the test set ({budget}); paper = 004 Table 1 (10 000 samples, 5 runs).",
             "", "| method | noise | ε = ∞ | ε = 10 | ε = 5 | paper ∞ / 10 / 5 | ε ours at 10 / 5 | ε paper's accounting at 10 / 5 |",
             "|---|---|---|---|---|---|---|---|"]
    order = list(dict.fromkeys(r["row"] for r in results))
    for row in order:
        for noise in ("honest", "paper"):
            cells_ = [r for r in results if r["row"] == row and r["noise"] in (noise, "none")]
            if not any(r["noise"] == noise for r in cells_):
                continue
            by_col = {c: [r for r in cells_ if r["column"] == c] for c in (math.inf, 10.0, 5.0)}
            fid = [fmt([r["fid"] for r in by_col[c]]) for c in (math.inf, 10.0, 5.0)]
            ours = " / ".join(eps_text(by_col[c][0]["epsilon_ours"]) if by_col[c] else "—" for c in (10.0, 5.0))
            paper_acc = " / ".join(eps_text(by_col[c][0]["epsilon_paper_accounting"]) if by_col[c] else "—"
                                   for c in (10.0, 5.0))
            paper = " / ".join(map(str, PAPER_FID.get(dataset, {}).get(row, ()))) or "—"
            lines.append(f"| {row} | {noise} | {' | '.join(fid)} | {paper} | {ours} | {paper_acc} |")
    for f in floor_rows:
        lines.append(f"| {f['row']} (no private data) | — | {f['fid']:.1f} | | | | | |")
    lines += ["", "| cell | FID | KID | seconds |", "|---|---|---|---|"]
    lines += [f"| {r['cell']} s{r['seed']} | {r['fid']:.1f} | {r['kid'] or float('nan'):.4f} | "
              f"{r['seconds'] or float('nan'):.0f} |" for r in results if r["fid"] is not None]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", choices=("fashion-mnist", "mnist"), default="fashion-mnist")
    ap.add_argument("--data-root", help="directory of the dataset's idx files (MNIST needs it)")
    ap.add_argument("--out", default="experiments/out/table1")
    ap.add_argument("--seeds", type=int, default=5, help="generation runs per cell (paper: 5)")
    ap.add_argument("--n-fid", type=int, default=10_000, help="samples and test images for FID (paper: 10 000)")
    ap.add_argument("--n-particles", type=int, default=10_000, help="particles / samples per run (paper: 10 000)")
    ap.add_argument("--no-extra", action="store_true", help="only the paper's three rows")
    ap.add_argument("--rows", default=",".join(ROWS), help="paper rows to run, in this order")
    ap.add_argument("--noise", default="honest,paper", help="which noise settings of the private cells to run")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--checkpoint", help="autoencoder (default: the dataset's default checkpoint)")
    ap.add_argument("--smoke", action="store_true", help="one private cell (ε = 10) of 3 steps, FID on 20 images, in a temporary folder")
    args = ap.parse_args()
    if args.smoke:
        import tempfile

        args.out, args.seeds, args.n_fid, args.n_particles = tempfile.mkdtemp(), 1, 20, 20
        args.rows, args.noise, args.no_extra = "dpswflow", "honest", True
        SMOKE_FLAGS.extend(["--steps", "3"])
    from autoencoders import default_checkpoint

    checkpoint = args.checkpoint or default_checkpoint(args.dataset)
    if args.n_fid > args.n_particles:
        raise SystemExit("--n-fid cannot exceed --n-particles")
    out = Path(args.out) / args.dataset / checkpoint
    out.mkdir(parents=True, exist_ok=True)
    budget = (f"{args.seeds} seed(s), FID on {args.n_fid} samples, {args.n_particles} particles per run, "
              f"device {args.device}, autoencoder {checkpoint}")
    rows = tuple(r for r in args.rows.split(",") if r)
    if not set(rows) <= set(ROWS):
        raise SystemExit(f"--rows takes a subset of {','.join(ROWS)}")
    noise = set(args.noise.split(",")) | {"none"}
    floor_rows = floors(out, dataset=args.dataset, n_fid=args.n_fid, device=args.device, data_root=args.data_root,
                        checkpoint=checkpoint)
    todo = [(c, s) for c in cells(args.dataset, not args.no_extra, rows) if c.noise in noise
            and (not args.smoke or c.column == 10.0) for s in range(args.seeds)]
    results = []
    for i, (cell, seed) in enumerate(todo, 1):
        print(f"[{i}/{len(todo)}] {cell.name} seed {seed}", file=sys.stderr, flush=True)
        results.append(run_cell(cell, out, dataset=args.dataset, seed=seed, n_particles=args.n_particles,
                                n_fid=args.n_fid, device=args.device, data_root=args.data_root,
                                checkpoint=checkpoint))
        (out / "results.json").write_text(json.dumps({"budget": budget, "cells": results}, indent=2))
    table = markdown(results, floor_rows, dataset=args.dataset, budget=budget)
    (out / "table1.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
