"""What every command shares: errors, budget and shape options, run lengths, staged output directories."""
from __future__ import annotations

import argparse
import sys

from ..methods.registry import METHODS
from ..core.config import PrivacySpec, RunShape, SimulatorSettings
from ..pipeline.options import add_options


DATASETS = ("digits", "fashion-mnist", "mnist", "celeba")


class UsageError(ValueError):
    """Bad input from the user: reported as `swflow COMMAND: error: ...` with exit status 2."""


def privacy_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("privacy")
    budget = g.add_mutually_exclusive_group()
    budget.add_argument("--epsilon", type=float, help="target epsilon: the noise is calibrated to it. inf "
                        "runs the method without noise, and privacy.json then says the run is not private "
                        "(the papers' eps = inf column; swf is always that)")
    budget.add_argument("--noise-multiplier", type=float,
                        help="noise std / sensitivity; the epsilon it buys is reported instead")
    # delta, adjacency, accountant, sensitivity bound, secure noise; adjacency and count noise left unset when not
    # typed, so that a table run under --privacy-unit can refuse a typed value it cannot honour
    add_options(g, PrivacySpec, defaults={"adjacency": None, "count_noise": None},
                notes={"adjacency": "(default replace-one; add-remove under --privacy-unit)",
                       "count_noise": "(default discrete-gaussian; gaussian under --privacy-unit)"})


def shape_args(p: argparse.ArgumentParser, *, with_data_shape: bool) -> None:
    g = p.add_argument_group("flow shape")
    g.add_argument("--method", default=None, choices=tuple(METHODS),
                   help="default dpswflow-r (dpswflow-hist with --table); "
                   + "; ".join(f"{name}: {spec.summary}" for name, spec in METHODS.items()))
    add_options(g, RunShape, notes={"steps": "(" + ", ".join(f"{m}: {s.default_length[1]} {s.default_length[0]}"
                                                             for m, s in METHODS.items()) + ")"})
    for spec in METHODS.values():  # each method's own options, declared beside its code
        if spec.options is not None:
            add_options(p.add_argument_group(f"{spec.name} options"), spec.option_class())
    if with_data_shape:
        g.add_argument("--dataset-size", type=int, required=True, help="number of private records n")
        g.add_argument("--dim", type=int, required=True, help="dimension d of the rows")


def settings(args, *, manifold: str = "ball", norm_bound: float | None = None):
    """The run's one :class:`~swflow.pipeline.settings.Settings` from the parsed flags (a --config file's values
    arrive as flags, swflow/cli/__init__.py), in one call: :func:`~swflow.pipeline.settings.from_options`."""
    from ..pipeline.settings import from_options

    try:
        return from_options(args.method, vars(args), manifold=manifold, norm_bound=norm_bound,
                            privacy_seed=getattr(args, "privacy_seed", None))
    except ValueError as err:
        raise UsageError(_as_flags(str(err))) from None


def _as_flags(message: str) -> str:
    """A settings error in the words of the command line: a setting named in backticks, a leading one and
    any name_with_underscores become flags (batch_size must be >= 1 -> --batch-size must be >= 1)."""
    import re

    from ..pipeline.settings import home_of

    def flag(match):
        word, quoted = match.group(2), bool(match.group(1))
        known = home_of(word) is not None and (quoted or "_" in word or match.start() == 0)
        return "--" + word.replace("_", "-") if known else match.group(0)

    return re.sub(r"(`?)\b([a-z]+(?:_[a-z]+)*)\b\1", flag, message)


def run_plan(settings, n: int, dim: int):
    """The run's :class:`~swflow.methods.plan.RunPlan` (steps, batch, directions, step size, release) for n rows of
    dimension dim."""
    try:
        return settings.plan(n, dim)
    except ValueError as err:
        raise UsageError(_as_flags(str(err))) from None


def flow_config_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("simulator")
    add_options(g, SimulatorSettings, defaults={"manifold": None, "checkpoint_every": 50},
                notes={"manifold": "(default: sphere with --dataset, the file's declared domain with --data)",
                       "record_every": "(0: about 50 frames over the run)"})
    g.add_argument("--privacy-seed", type=int, default=None,
                   help="privacy-noise seed, for reproducible experiments only: anyone who knows it can reproduce "
                   "the noise (privacy.json then says noise_seed_known: true). Default: a fresh secret seed "
                   "from the OS (under torchrun, drawn by rank 0 and broadcast)")
    g.add_argument("--shard-mode", choices=("exact", "sketch"), default="exact",
                   help="under torchrun: exact global ranks (all-gather) or per-rank quantile sketches")


def say_unchecked(verified) -> None:
    """On stderr, each time: what the read-back of an unsigned run cannot prove (and a signature left unchecked)."""
    for note in verified.unchecked:
        if note.startswith(("unsigned", "signature.json")):
            print(f"note: {note}", file=sys.stderr)
