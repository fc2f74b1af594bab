"""Steps per second and peak memory of the sharded flow on 1 and 2 processes (gloo on CPU).

DPSWflow-r at the MNIST shape (d = 8, Nθ = 70, batch 250, 30 000 private rows), exact and
sketch (K = 256) modes, n particles from 1e5 to 1e6. Each configuration runs in fresh processes
(torch.multiprocessing, one thread per process) for a few steps after one warm-up step.

    python experiments/bench_distributed.py [--sizes 100000,1000000] [--steps 5] [--json]
"""
from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from swflow.methods.flows import build_flow
from swflow.methods.plan import resolve_fixed
from swflow.privacy import PrivacySpec
from swflow.simulate.distributed import ProcessGroup
from swflow.simulate.flow import FlowConfig

ROWS, DIM = 30_000, 8


def _worker(rank, world, store, out, n, steps, mode):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    torch.set_num_threads(1)
    x = torch.randn(ROWS, DIM, generator=torch.Generator().manual_seed(0))
    x = x / x.norm(dim=1, keepdim=True)
    config = FlowConfig(steps=steps + 1, n_particles=n, record_every=0, seed=0)
    privacy = PrivacySpec(epsilon=10.0)
    group = ProcessGroup(n, mode=mode)
    lo, hi = group.shard(ROWS)
    plan = resolve_fixed("dpswflow-r", steps=config.steps, n_projections=70, dataset_size=ROWS, dim=DIM,
                         privacy=privacy, batch_size=250)
    flow = build_flow(x[lo:hi], plan, privacy=privacy, config=config, privacy_seed=0, communicator=group)
    flow.step_once()  # warm-up
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        flow.step_once()
    dist.barrier()
    elapsed = time.perf_counter() - t0
    peak = torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024])  # MiB
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    if rank == 0:
        Path(out).write_text(json.dumps({"steps_per_s": steps / elapsed, "peak_rss_mib_per_rank": float(peak)}))
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, outputs in a temporary folder (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.sizes, args.steps = "2000", 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, args.sizes.split(",")):
            for world, mode in ((1, "exact"), (2, "exact"), (2, "sketch")):
                out, store = Path(tmp) / "out.json", Path(tmp) / f"store-{n}-{world}-{mode}"
                mp.spawn(_worker, args=(world, str(store), str(out), n, args.steps, mode), nprocs=world, join=True)
                rows.append({"n": n, "processes": world, "mode": mode, **json.loads(out.read_text())})
    if args.json:
        print(json.dumps(rows))
        return
    print("n | processes | mode | steps/s | peak RSS per rank (MiB)")
    for r in rows:
        print(f"{r['n']:.0e} | {r['processes']} | {r['mode']} | {r['steps_per_s']:.2f} | {r['peak_rss_mib_per_rank']:.0f}")


if __name__ == "__main__":
    main()
