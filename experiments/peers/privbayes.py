"""Worker for experiments/peers.py, run inside the PrivBayes environment (dpmm), never ours.

Reads private rows in [-1, 1]^d, bins each coordinate into B equal bins on the *declared* range
[-1, 1] (uniform binner, no privacy spent on bounds), fits dpmm's PrivBayes at (ε, δ), samples N
rows and writes them with what the library says about its privacy.
"""
import argparse
import json
from importlib.metadata import version

import numpy as np
import pandas as pd
from dpmm.pipelines import PrivBayesPipeline

p = argparse.ArgumentParser()
for name, kind in (("rows", str), ("out", str), ("report", str), ("epsilon", float), ("delta", float),
                   ("bins", int), ("n", int), ("seed", int)):
    p.add_argument(f"--{name}", type=kind, required=True)
args = p.parse_args()
rows = np.load(args.rows)
columns = [f"c{i}" for i in range(rows.shape[1])]
pipeline = PrivBayesPipeline(epsilon=args.epsilon, delta=args.delta, binner_type="uniform", proc_epsilon=None,
                             n_bins=args.bins, n_jobs=1)
pipeline.fit(pd.DataFrame(rows, columns=columns), domain={c: {"lower": -1.0, "upper": 1.0} for c in columns},
             random_state=args.seed)
samples = pipeline.generate(n_records=args.n, random_state=args.seed)[columns].to_numpy(dtype=np.float64)
np.save(args.out, samples)
json.dump({"library": f"dpmm {version('dpmm')}", "mechanism": "PrivBayes (Zhang et al. 2017) on the PGM framework",
           "claims": f"({args.epsilon}, {args.delta})-DP via zCDP: the network by the exponential mechanism on "
                     "mutual information, then noisy conditional marginals",
           "adjacency": "add/remove one record (as the library's sensitivity computation assumes)",
           "bounds": "declared [-1, 1] per coordinate (uniform binner, no budget on bounds)",
           "output": f"values decoded from {args.bins} bins per coordinate by the library's binner"},
          open(args.report, "w"))
