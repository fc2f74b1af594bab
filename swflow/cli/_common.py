"""What every command shares: errors, budget and shape options, run lengths, staged output directories."""
from __future__ import annotations

import argparse
import math
from contextlib import contextmanager

from ..options import add_options, values
from ..privacy import PrivacySpec
from ..registry import METHODS, RunShape, method


DATASETS = ("digits", "fashion-mnist", "mnist", "celeba")


class UsageError(ValueError):
    """Bad input from the user: reported as `swflow COMMAND: error: ...` with exit status 2."""


class RunFailed(RuntimeError):
    """A run that failed for a reason other than its input (exit status 1)."""


def privacy_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("privacy")
    budget = g.add_mutually_exclusive_group()
    budget.add_argument("--epsilon", type=float, help="target epsilon: the noise is calibrated to it. inf "
                        "runs the method without noise, and privacy.json then says the run is not private "
                        "(the papers' eps = inf column; swf is always that)")
    budget.add_argument("--noise-multiplier", type=float,
                        help="noise std / sensitivity; the epsilon it buys is reported instead")
    add_options(g, PrivacySpec)  # delta, adjacency, accountant, sensitivity bound, secure noise


def shape_args(p: argparse.ArgumentParser, *, with_data_shape: bool) -> None:
    g = p.add_argument_group("flow shape")
    g.add_argument("--method", default="dpswflow-r", choices=tuple(METHODS),
                   help="; ".join(f"{name}: {spec.summary}" for name, spec in METHODS.items()))
    add_options(g, RunShape, notes={"steps": "(" + ", ".join(f"{m}: {s.default_length[1]} {s.default_length[0]}"
                                                             for m, s in METHODS.items()) + ")"})
    for spec in METHODS.values():  # each method's own options, declared beside its code
        if spec.options is not None:
            add_options(p.add_argument_group(f"{spec.name} options"), spec.option_class())
    if with_data_shape:
        g.add_argument("--dataset-size", type=int, required=True, help="number of private records n")
        g.add_argument("--dim", type=int, required=True, help="dimension d of the rows")


def run_plan(args, n: int, privacy):
    """The run's :class:`~swflow.pipeline.RunPlan` (steps, batch, directions, step size) for n rows."""
    from ..options import values
    from ..pipeline import resolve

    try:
        return resolve(args.method, RunShape(**values(RunShape, args)), dataset_size=n, privacy=privacy,
                       step_size=getattr(args, "step_size", None))
    except ValueError as err:
        raise UsageError(f"--{str(err).replace('_', '-')}") from None


def method_options(args) -> dict:
    """The values of the chosen method's own options (empty for a method without any)."""
    cls = method(args.method).option_class()
    return {} if cls is None else values(cls, args)


def privacy_spec(args):
    eps = args.epsilon
    if eps is None and args.noise_multiplier is None:
        eps = None if method(args.method).private else math.inf
        if eps is None:
            raise UsageError(f"{args.method} is private: give --epsilon or --noise-multiplier")
    if eps is not None and math.isnan(eps):
        raise UsageError("--epsilon is NaN: give a number > 0, or inf for no privacy")
    method(args.method).check_budget(private=args.noise_multiplier is not None or math.isfinite(eps))
    return PrivacySpec(**values(PrivacySpec, args, epsilon=eps, noise_multiplier=args.noise_multiplier,
                                clip=getattr(args, "clip", False)))


@contextmanager
def staged(out: str, *, overwrite: bool = False, resume: bool = False, inputs: tuple = (), commit: bool = True,
           resumable: bool = True):
    """Work in a staging directory that replaces ``out`` only once the command has finished
    (swflow/outdir.py); the checks run before anything on disk changes."""
    from ..outdir import RunDir

    run_dir = RunDir(out, overwrite=overwrite, resume=resume, inputs=inputs, lock=commit, resumable=resumable)
    work = run_dir.open()
    try:
        yield work
    except BaseException:
        run_dir.abandon()
        raise
    if commit:
        run_dir.commit()


def flow_config_args(p: argparse.ArgumentParser) -> None:
    from ..flow import FlowConfig
    from ..options import add_options

    g = p.add_argument_group("simulator")
    add_options(g, FlowConfig, defaults={"manifold": None, "checkpoint_every": 50, "step_size": None},
                notes={"manifold": "(default: sphere with --dataset, the file's declared domain with --data)",
                       "step_size": "(default: 1; dpswflow-hist: 3 when n/z >= 2000, else 1)",
                       "record_every": "(0: about 50 frames over the run)"})
    g.add_argument("--privacy-seed", type=int, default=None,
                   help="privacy-noise seed, for reproducible experiments only: anyone who knows it can reproduce "
                   "the noise (privacy.json then says noise_seed_known: true). Default: a fresh secret seed "
                   "from the OS (under torchrun, drawn by rank 0 and broadcast)")
    g.add_argument("--shard-mode", choices=("exact", "sketch"), default="exact",
                   help="under torchrun: exact global ranks (all-gather) or per-rank quantile sketches")


def flow_config(args, plan):
    """The simulator settings of the command's flags for a :class:`~swflow.pipeline.RunPlan`."""
    from ..flow import FlowConfig
    from ..options import values

    return FlowConfig(**values(FlowConfig, args, steps=plan.steps,
                               record_every=args.record_every or max(1, plan.steps // 50), step_size=plan.step_size,
                               manifold=args.manifold or ("sphere" if getattr(args, "dataset", None) else "ball")))
