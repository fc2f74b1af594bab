"""Worker for experiments/tables_bench.py's peers at their best, run inside the peers' environment (dpmm), never ours.

Reads a table of raw values (numbers as floats, NaN where missing; categories as the strings "0", "1", ... of their
declared positions) and each column's declared domain (numbers: the schema's bounds; categories: their positions),
fits dpmm's AIM, MST or PrivBayes with its own private adaptive binner, PrivTree, at dpmm's defaults for it
(``n_bins="auto"``; its share of the budget, 0.1, split over the numeric columns), so that the whole run spends ε:
0.1·ε on the bins and 0.9·ε on the model. Samples N rows and writes them as CSV with what the library says.
"""
import argparse
import json
from importlib.metadata import version

import pandas as pd
from dpmm.pipelines import AIMPipeline, MSTPipeline, PrivBayesPipeline

PIPELINES = {"aim": AIMPipeline, "mst": MSTPipeline, "privbayes": PrivBayesPipeline}
NAMES = {"aim": "AIM (McKenna et al. 2022)", "mst": "MST (McKenna et al. 2021)",
         "privbayes": "PrivBayes (Zhang et al. 2017)"}
#: dpmm's default budget for its binner, as a share of the run's ε here
BINNER_SHARE = 0.1

p = argparse.ArgumentParser()
for name, kind in (("peer", str), ("rows", str), ("domain", str), ("out", str), ("report", str), ("epsilon", float),
                   ("delta", float), ("n", int), ("seed", int)):
    p.add_argument(f"--{name}", type=kind, required=True)
args = p.parse_args()
domain = json.loads(open(args.domain).read())
text = {c: str for c, d in domain.items() if "categories" in d}  # categories travel as the strings of positions
frame = pd.read_csv(args.rows, dtype=text)
binner = BINNER_SHARE * args.epsilon
pipeline = PIPELINES[args.peer](epsilon=args.epsilon - binner, delta=args.delta, proc_epsilon=binner, n_bins="auto",
                                n_jobs=1)
pipeline.fit(frame, domain=domain, random_state=args.seed)
samples = pipeline.generate(n_records=args.n, random_state=args.seed)[list(frame.columns)]
samples.to_csv(args.out, index=False)
json.dump({"library": f"dpmm {version('dpmm')}", "mechanism": NAMES[args.peer] + " with PrivTree bins",
           "claims": f"({args.epsilon}, {args.delta})-DP: the model at ({args.epsilon - binner:g}, {args.delta}) via "
                     f"zCDP as the library accounts it, and PrivTree's pure {binner:g}-DP bins, composed",
           "adjacency": "add/remove one record",
           "domain": "declared: the schema's bounds and categories (no budget on them); bins chosen privately"},
          open(args.report, "w"))
