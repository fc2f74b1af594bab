"""Worker for experiments/peers.py, run inside the MST environment (smartnoise-synth), never ours.

Reads private rows in [-1, 1]^d, bins each coordinate into B equal bins on the *declared* range
[-1, 1] (no privacy spent on bounds), fits smartnoise-synth's MST at (ε, δ), samples N rows (bin
centres) and writes them with what the library says about its privacy.
"""
import argparse
import json
from importlib.metadata import version

import numpy as np
import pandas as pd
from snsynth.mst import MSTSynthesizer
from snsynth.transform import BinTransformer, TableTransformer

p = argparse.ArgumentParser()
for name, kind in (("rows", str), ("out", str), ("report", str), ("epsilon", float), ("delta", float),
                   ("bins", int), ("n", int), ("seed", int)):
    p.add_argument(f"--{name}", type=kind, required=True)
args = p.parse_args()
np.random.seed(args.seed)  # MST draws its noise and samples from numpy's global generator
rows = np.load(args.rows)
columns = [f"c{i}" for i in range(rows.shape[1])]
transformer = TableTransformer([BinTransformer(bins=args.bins, lower=-1.0, upper=1.0) for _ in columns])
synth = MSTSynthesizer(epsilon=args.epsilon, delta=args.delta)
synth.fit(pd.DataFrame(rows, columns=columns), transformer=transformer, preprocessor_eps=0.0)
samples = np.asarray(synth.sample(args.n), dtype=np.float64)
np.save(args.out, samples)
json.dump({"library": f"smartnoise-synth {version('smartnoise-synth')}", "mechanism": "MST (McKenna et al. 2021)",
           "claims": f"({args.epsilon}, {args.delta})-DP via zCDP (rho from cdp_rho), Gaussian noise on all 1-way "
                     "and the selected 2-way marginals, selection by the exponential mechanism",
           "adjacency": "add/remove one record (a count moves by 1); under replace-one the marginals' "
                        "sensitivity is sqrt(2) times larger, so the same noise buys a larger epsilon",
           "bounds": "declared [-1, 1] per coordinate (no budget on bounds)",
           "output": f"bin centres of {args.bins} bins per coordinate"}, open(args.report, "w"))
