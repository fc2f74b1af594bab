"""Privacy audits: the white-box and black-box canary tables of docs/results.md (swflow/pipeline/audits.py).

    python experiments/audit.py [--runs 300] [--trials 1000000] [--json]
"""
from __future__ import annotations

import argparse
import json
import math

from swflow.pipeline.audits import WHITEBOX_DELTA, audit, whitebox_audit


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=300, help="runs with and without the canary, each")
    ap.add_argument("--trials", type=int, default=1_000_000, help="white-box draws per neighbouring data set")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, outputs in a temporary folder (CI)")
    args = ap.parse_args()
    epsilons = (1.0, 2.0, 4.0)
    cases = [("swf", math.inf), ("dpswflow-r", 1.0), ("dpswflow-r", 4.0), ("dpswflow", 1.0), ("dpswflow", 4.0),
             ("dpswgen", 1.0), ("dpswgen", 4.0)]
    if args.smoke:
        args.runs, args.trials, epsilons, cases = 4, 4_000, (1.0,), [("swf", math.inf), ("dpswflow-r", 1.0)]
    single = [("dpswflow", {}), ("ldp-flow", {}), ("dpswflow-hist", {"count_noise": "discrete-gaussian"}),
              ("dpswflow-hist", {"count_noise": "gaussian"})]
    white = [whitebox_audit(m, e, trials=args.trials, halve_noise=h, **options)
             for m, options in single for e in epsilons for h in (False, True)]
    rows = [audit(m, e, runs=args.runs) for m, e in cases]
    if args.json:
        print(json.dumps({"whitebox": white, "canary": rows}))
        return
    print(f"White-box, worst-case pair, {args.trials}+{args.trials} draws, delta = {WHITEBOX_DELTA:g}:")
    print("| method | claimed eps | audited lower bound | same code with the noise halved |")
    print("|---|---|---|---|")
    for honest, halved in zip(white[::2], white[1::2]):
        name = honest["method"] + (f" ({honest['count_noise']})" if "count_noise" in honest else "")
        print(f"| {name} | {honest['claimed_epsilon']:g} | {honest['audited_epsilon_lower_bound']:.2f} | "
              f"{halved['audited_epsilon_lower_bound']:.2f} |")
    print(f"\nBlack-box canary, {args.runs}+{args.runs} runs:")
    print(f"| method | claimed eps | audited eps lower bound ({args.runs}+{args.runs} runs, 95% CP) |")
    print("|---|---|---|")
    for r in rows:
        claimed = "inf (no noise)" if r["claimed_epsilon"] is None else f"{r['claimed_epsilon']:g}"
        print(f"| {r['method']} | {claimed} | {r['audited_epsilon_lower_bound']:.2f} |")


if __name__ == "__main__":
    main()
