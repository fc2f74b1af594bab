"""Per-step cost of the DPSWflow-r step (the product's heartbeat).

Times one full Euler–Maruyama step (directions, private batch release, particle-side smoothing
— exact on a grid, the default, and 004's one-draw estimator —, drift, update, sphere retraction) at the paper's MNIST size (n = 10 000 particles, d = 8, Nθ = 70,
batch 250) and CelebA size (d = 48, Nθ = 300), next to a naive step written the way the reference
code works (torch.quantile on a 30 000-level percentile grid for both sets, then linear
interpolation), and how the cost grows with n, for DPSWflow-r and for dpswflow-hist (10^3 ... 10^6
particles).

``--load 2`` adds the figures of a shared machine: a dpswflow-hist step (n = 10 000), a 300-step
``Synthesizer`` fit on 3 000 rows, and ``sample(50_000)``, each timed quiet and then beside two other
torch jobs (matrix products on torch's default threads), in fresh processes: from Python as a user's script
runs them (the library steps small flows on one thread where k·n < 10^6, swflow.simulate.threads) with OpenMP's
default waiting policy and with ``OMP_WAIT_POLICY=PASSIVE``, as the ``swflow`` command runs them (PASSIVE, and its
thread rule around the whole run), and on one thread throughout. A fair share of the cores among three jobs is 3x
the quiet time.

    python experiments/bench_step.py [--device cpu|cuda] [--json] [--max-n 1000000] [--load 2]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch

from swflow import FlowConfig
from swflow.kernels.sliced import random_directions
from swflow.privacy import PrivacySpec, ReleasePlan, private_target
from swflow.simulate.flow import ParticleFlow, Resampled

GRID = 30_000


def _interp(x, xp, fp):
    """Row-wise linear interpolation, xp (k, g) increasing."""
    i = torch.searchsorted(xp, x).clamp(1, xp.shape[1] - 1)
    x0, x1 = xp.gather(1, i - 1), xp.gather(1, i)
    y0, y1 = fp.gather(1, i - 1), fp.gather(1, i)
    t = ((x - x0) / (x1 - x0).clamp(min=1e-12)).clamp(0, 1)
    return y0 + t * (y1 - y0)


def naive_step(x, y, k, sigma, batch, gen):
    """Reference-style step: percentile grid + torch.quantile + interpolation."""
    theta = random_directions(k, x.shape[1], generator=gen, device=x.device)
    idx = torch.randperm(y.shape[0], generator=gen, device=gen.device)[:batch].to(y.device)
    py = theta.T @ y[idx].T + sigma * torch.randn(k, batch, generator=gen, device=x.device)
    px = theta.T @ x.T + sigma * torch.randn(k, x.shape[0], generator=gen, device=x.device)
    levels = torch.linspace(0, 1, GRID, device=x.device)
    qx = torch.quantile(px, levels, dim=1).T.contiguous()
    qy = torch.quantile(py, levels, dim=1).T.contiguous()
    cdf = _interp(px.contiguous(), qx, levels.expand(k, -1).contiguous())
    moved = _interp(cdf, levels.expand(k, -1).contiguous(), qy)
    return x + ((moved - px).T @ theta.T) / k


def make_flow(n, d, k, batch, device, steps, smoothing="exact"):
    gen = torch.Generator().manual_seed(0)
    y = torch.randn(30_000, d, generator=gen)
    y = y / y.norm(dim=1, keepdim=True)
    plan = ReleasePlan(releases=steps, dataset_size=30_000, sample_size=batch, n_projections=k, dim=d)
    target = private_target(y, PrivacySpec(noise_multiplier=0.77, delta=1e-6), plan, privacy_seed=0, device=device)
    flow = ParticleFlow(target, Resampled(k), FlowConfig(steps=steps, n_particles=n, device=device,
                                                                    smoothing=smoothing, manifold="sphere"))
    flow.setup()
    return flow, y.to(device)


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def _median_ms(step, reps, device) -> float:
    """Median wall time of ``reps`` calls of ``step`` (ms): robust to other jobs on a shared machine."""
    times = []
    for _ in range(reps):
        _sync(device)
        t = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def time_ours(n, d, k, batch, device, reps, smoothing="exact"):
    flow, _ = make_flow(n, d, k, batch, device, reps + 2, smoothing)
    flow.step_once()
    return _median_ms(flow.step_once, reps, device)


def time_hist(n, d, per_step, directions, bins, device, reps):
    """One dpswflow-hist step (directions picked from the released pool, binned particle ranks, drift,
    retraction) after its one release of the ``directions`` x ``bins`` histogram."""
    from swflow import make_flow

    y = torch.nn.functional.normalize(torch.randn(30_000, d, generator=torch.Generator().manual_seed(0)), dim=1)
    flow = make_flow("dpswflow-hist", y, privacy=PrivacySpec(epsilon=10.0, delta=1e-6, count_noise="gaussian"),
                     n_projections=per_step,
                     pool_size=directions, bins=bins, privacy_seed=0, progress=False,
                     config=FlowConfig(steps=reps + 2, n_particles=n, device=device, manifold="sphere"))
    flow.setup()
    flow.step_once()
    return _median_ms(flow.step_once, reps, device)


def time_naive(n, d, k, batch, device, reps):
    gen = torch.Generator(device=device).manual_seed(0)
    y = torch.nn.functional.normalize(torch.randn(30_000, d, device=device), dim=1)
    state = {"x": naive_step(torch.randn(n, d, device=device), y, k, 0.5, batch, gen)}

    def step():
        state["x"] = naive_step(state["x"], y, k, 0.5, batch, gen)

    return _median_ms(step, reps, device)


def time_shared_cases(reps: int, small: bool, rule: str) -> dict:
    """The three figures of issue 40's shared-machine check, in this process (seconds or ms). ``rule``: the
    process's threads, the library's rule inside each step ("process"), the ``swflow`` command's around the run
    ("command", swflow.simulate.threads.step_threads), or one thread throughout ("one")."""
    from swflow import Synthesizer
    from swflow.simulate.threads import step_threads, torch_threads

    def threads(n_particles: int):
        return {"process": None, "command": step_threads(n_particles, 32), "one": 1}[rule]

    rows = torch.nn.functional.normalize(torch.randn(3_000, 8, generator=torch.Generator().manual_seed(1)), dim=1)
    steps, n_step, n_fit, n_sample = (30, 1_000, 1_000, 5_000) if small else (300, 10_000, 10_000, 50_000)
    with torch_threads(threads(n_step)):
        out = {"hist_step_ms": time_hist(n_step, 8, 32, 256, 64, "cpu", reps)}
    synth = Synthesizer("dpswflow-hist", epsilon=10.0, delta=1e-6, steps=steps, manifold="sphere",
                        count_noise="gaussian", privacy_seed=0, n_particles=n_fit, n_projections=32)
    t = time.perf_counter()
    with torch_threads(threads(n_fit)):
        synth.fit(rows.numpy())
    out["fit_300_steps_s"] = time.perf_counter() - t
    t = time.perf_counter()
    with torch_threads(threads(n_sample)):
        synth.sample(n_sample, progress=False)
    out["sample_50k_s"] = time.perf_counter() - t
    return out


LOADER = "import torch\na = torch.randn(768, 768)\nwhile True:\n    a = torch.tanh(a @ a)\n"


def shared_machine(load: int, reps: int, small: bool) -> dict:
    """Quiet, then beside ``load`` torch jobs; each side in a fresh process per OpenMP waiting policy, and as
    the ``swflow`` command runs (PASSIVE and its step threads)."""
    results = {}
    rules = {"Python, OpenMP default": "process", "Python, PASSIVE": "process", "swflow command": "command",
             "PASSIVE, one thread": "one"}
    for policy, rule in rules.items():
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if policy != "Python, OpenMP default":
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        argv = [sys.executable, __file__, "--cases-only", "--reps", str(reps), *(["--smoke"] if small else []),
                "--threads-rule", rule]

        def measure():
            done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
            return json.loads(done.stdout.strip().splitlines()[-1])

        quiet = measure()
        # the other jobs keep torch's defaults, as a user's notebook or a second run would
        loaders = [subprocess.Popen([sys.executable, "-c", LOADER], env=env) for _ in range(load)]
        try:
            time.sleep(2.0)  # let them start their threads
            loaded = measure()
        finally:
            for p in loaders:
                p.kill()
                p.wait()
        results[policy] = {"quiet": quiet, "loaded": loaded}
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--max-n", type=int, default=1_000_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--load", type=int, default=0,
                    help="also time a step, a fit and sample(50 000) quiet and beside this many torch jobs")
    ap.add_argument("--cases-only", action="store_true", help=argparse.SUPPRESS)  # one side of --load
    ap.add_argument("--threads-rule", default="process", help=argparse.SUPPRESS)  # ... and the steps' threads
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, outputs in a temporary folder (CI)")
    args = ap.parse_args()
    if args.smoke:
        args.reps, args.max_n = 2, 1_000
        args.load = min(args.load, 1)
    if args.cases_only:
        print(json.dumps(time_shared_cases(args.reps, args.smoke, args.threads_rule)))
        return
    dev, reps = args.device, args.reps
    machine = (torch.cuda.get_device_name() if dev == "cuda"
               else f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads")
    out = {"device": dev, "machine": machine, "torch": torch.__version__}
    sizes = {"mnist": (10_000, 8, 70, 250), "celeba": (10_000, 48, 300, 250)}
    if args.smoke:
        sizes = {"mnist": (1_000, 8, 20, 100), "celeba": (1_000, 48, 30, 100)}
    for name, (n, d, k, b) in sizes.items():
        ours = time_ours(n, d, k, b, dev, reps)
        out[f"{name}_sampled_ms_per_step"] = time_ours(n, d, k, b, dev, reps, "sampled")
        naive = time_naive(n, d, k, b, dev, max(3, reps // 4))
        out[f"{name}_ms_per_step"] = ours
        out[f"{name}_naive_ms_per_step"] = naive
        out[f"{name}_speedup"] = naive / ours
    hist_n = 1_000 if args.smoke else 10_000
    for per_step in (32, 70):
        out[f"fashion_hist_m{per_step}_ms_per_step"] = time_hist(hist_n, 8, per_step, 256, 64, dev, reps)
    scaling = []
    n = 1_000
    while n <= args.max_n:
        scaling.append({"n": n, "ms_per_step": time_ours(n, 8, 70, 250, dev, max(2, reps if n <= 10**5 else 3))})
        n *= 10
    out["scaling_mnist_shape"] = scaling
    hist_scaling = []
    n = 1_000
    while n <= args.max_n:
        hist_scaling.append({"n": n, "ms_per_step": time_hist(n, 8, 32, 256, 64, dev, max(2, reps if n <= 10**5 else 5))})
        n *= 10
    out["scaling_hist"] = hist_scaling
    if args.load:
        out["shared_machine"] = shared_machine(args.load, args.reps, args.smoke)
    if args.json:
        print(json.dumps(out))
        return
    print(f"device: {dev} ({machine}), torch {torch.__version__}")
    print(f"median of {reps} steps")
    print(f"{'size':8} {'exact ms/step':>14} {'sampled ms/step':>16} {'naive ms/step':>14} {'speed-up':>9}")
    for name in sizes:
        print(f"{name:8} {out[name + '_ms_per_step']:14.1f} {out[name + '_sampled_ms_per_step']:16.1f} "
              f"{out[name + '_naive_ms_per_step']:14.1f} {out[name + '_speedup']:8.1f}x")
    for per_step in (32, 70):
        print(f"dpswflow-hist, n = {hist_n:,}, d = 8, {per_step} of K = 256 directions a step, B = 64: "
              f"{out[f'fashion_hist_m{per_step}_ms_per_step']:.2f} ms/step")
    print("scaling with n (d = 8, Ntheta = 70, batch 250):")
    prev = None
    for row in scaling:
        ratio = "" if prev is None else f"  x{row['ms_per_step'] / prev:.1f} for x10 particles"
        print(f"  n = {row['n']:>9,}: {row['ms_per_step']:9.1f} ms/step{ratio}")
        prev = row["ms_per_step"]
    print("dpswflow-hist scaling with n (d = 8, 32 of K = 256 directions a step, B = 64):")
    for row in hist_scaling:
        print(f"  n = {row['n']:>9,}: {row['ms_per_step']:9.2f} ms/step ({row['ms_per_step'] / row['n'] * 1e6:.1f} ns/particle)")
    if args.load:
        print(f"shared machine: quiet, then beside {args.load} torch jobs (a fair share is {args.load + 1}x)")
        for policy, r in out["shared_machine"].items():
            for key in r["quiet"]:
                q, l_ = r["quiet"][key], r["loaded"][key]
                print(f"  {policy:22} {key:18} quiet {q:9.3f}  loaded {l_:9.3f}  x{l_ / q:.1f}")


if __name__ == "__main__":
    main()
