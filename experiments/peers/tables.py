"""Worker for experiments/tables_adult.py, run inside the peers' environment (dpmm), never ours.

Reads a table of cell indices (one integer column per schema column, every value in 0..size-1: the public codec's
cells, so numbers arrive binned on their declared bounds and no budget is spent on bounds), fits dpmm's AIM, MST or
PrivBayes at (ε, δ) with every column's domain declared as its categories, samples N rows and writes them with what
the library says about its privacy.
"""
import argparse
import json
from importlib.metadata import version

import numpy as np
import pandas as pd
from dpmm.pipelines import AIMPipeline, MSTPipeline, PrivBayesPipeline

PIPELINES = {"aim": AIMPipeline, "mst": MSTPipeline, "privbayes": PrivBayesPipeline}
NAMES = {"aim": "AIM (McKenna et al. 2022)", "mst": "MST (McKenna et al. 2021)",
         "privbayes": "PrivBayes (Zhang et al. 2017)"}

p = argparse.ArgumentParser()
for name, kind in (("peer", str), ("cells", str), ("sizes", str), ("out", str), ("report", str), ("epsilon", float),
                   ("delta", float), ("n", int), ("seed", int)):
    p.add_argument(f"--{name}", type=kind, required=True)
args = p.parse_args()
cells = np.load(args.cells)
sizes = json.loads(open(args.sizes).read())
columns = [f"c{i}" for i in range(cells.shape[1])]
frame = pd.DataFrame(cells.astype(str), columns=columns)  # strings: dpmm bins integer columns as numbers
domain = {c: {"categories": [str(i) for i in range(k)]} for c, k in zip(columns, sizes)}
pipeline = PIPELINES[args.peer](epsilon=args.epsilon, delta=args.delta, proc_epsilon=None, n_jobs=1)
pipeline.fit(frame, domain=domain, random_state=args.seed)
samples = pipeline.generate(n_records=args.n, random_state=args.seed)[columns].astype(int).to_numpy(dtype=np.int64)
np.save(args.out, samples)
json.dump({"library": f"dpmm {version('dpmm')}", "mechanism": NAMES[args.peer],
           "claims": f"({args.epsilon}, {args.delta})-DP via zCDP, as the library accounts it",
           "adjacency": "add/remove one record (a count moves by 1); swflow counts replace-one, whose marginals "
                        "have sqrt(2) times the sensitivity: the same noise buys the peer a smaller epsilon",
           "domain": "declared: the public codec's cells per column (no budget on bounds or categories)"},
          open(args.report, "w"))
