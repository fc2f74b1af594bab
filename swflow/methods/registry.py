"""Every method, once: what it is, how it touches the private rows, how long it runs by default and
where its code lives. `swflow generate`, `swflow privacy`, :func:`swflow.make_flow`,
:func:`swflow.methods.generators.make_generator` and :class:`swflow.pipeline.estimator.Synthesizer` read this list, so
the calculator cannot disagree with a run.

Adding a generator: write its module with ``build(data, *, privacy, steps, n_projections, batch_size,
privacy_seed, seed, device, **options)`` and ``NETWORK`` (the network class a saved Synthesizer
rebuilds), and add one :class:`MethodSpec` to :data:`METHODS`. A flow is a module whose
``build(data, plan, *, privacy, config, privacy_seed, callbacks, **_)`` turns the resolved
:class:`~swflow.methods.plan.RunPlan` into a ParticleFlow, plus one spec (its ``releases`` names a strategy of
swflow.methods.releases). Modules are imported on first use.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

from ..core.config import RunShape
from .releases import RELEASES, Release

__all__ = ["MethodSpec", "RunShape", "METHODS", "RELEASES", "method", "check_budget", "release_sketch"]


@dataclass(frozen=True)
class MethodSpec:
    """One method.

    name : the `--method` name
    kind : 'flow' (particles; a FlowModel replays it) or 'generator' (a trained network)
    summary : one line for `--help` and the README
    releases : a key of :data:`RELEASES`
    default_length : ('epochs', E) passes over the rows in batches, or ('steps', K) (004 App. C.5
        where the paper has a setting)
    module : where its code lives: "package.module" (its ``build`` function builds a run) or
        "package.module:function"
    noise_on : what the Gaussian noise is added to: 'projections' or 'gradient'
    default_projections : directions per step when the run does not say
    default_batch : rows per step when the run does not say
    """

    name: str
    kind: str
    summary: str
    releases: str
    default_length: tuple[str, int]
    module: str
    noise_on: str = "projections"
    default_projections: int = 70
    default_batch: int = 250
    # runs under torchrun with the private rows sharded over the ranks (swflow.simulate.distributed)
    sharded: bool = False
    options: str | None = None  # "module:Dataclass" whose fields with a help text are the method's own options

    def __post_init__(self):
        if self.kind not in ("flow", "generator") or self.releases not in RELEASES:
            raise ValueError(f"bad method spec {self}")

    @property
    def release(self) -> Release:
        """The strategy of its kind of release (swflow.methods.releases): batch rule, plan, step size, footprint."""
        return RELEASES[self.releases]

    @property
    def local(self) -> bool:
        return self.release.local

    def check_budget(self, *, private: bool) -> None:
        """The one rule for which budgets a method takes: the non-private reference never runs private;
        a local release needs a finite budget; every other method runs private, or noise-free at
        epsilon = inf (then privacy.json says the run is not private)."""
        if not self.release.private and private:
            raise ValueError(f"{self.name} is not private (sigma = 0): use dpswflow-r or dpswflow for a finite "
                             "epsilon")
        if self.local and not private:
            raise ValueError(f"{self.name} is a local release: it needs a finite epsilon or a noise multiplier "
                             "(use swf for no privacy)")

    def projections(self, n_projections: int | None) -> int:
        """Directions per step: the run's, else the method's default."""
        if n_projections is not None and n_projections < 1:
            raise ValueError(f"n_projections must be >= 1, got {n_projections}")
        return self.default_projections if n_projections is None else n_projections

    def batch_rows(self, batch_size: int | None) -> int:
        """Rows per step asked for: the run's, else the method's default (a full batch when it covers every row)."""
        if batch_size is not None and batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        return self.default_batch if batch_size is None else batch_size

    def step_size(self, *, dataset_size: int, privacy) -> float:
        """The step size h when the run does not give one (the release's rule)."""
        return self.release.step_size(dataset_size=dataset_size, privacy=privacy)

    def batch(self, batch_size: int | None, dataset_size: int) -> int | None:
        """Rows per release, None for the whole data set: the rule of every entry point."""
        return self.release.batch(batch_size, dataset_size)

    def run_length(self, *, steps: int | None, epochs: float | None, dataset_size: int, batch_size: int) -> int:
        """Steps of a run: ``steps``, else ``epochs`` over the rows in batches, else the default length."""
        if steps is not None:
            if steps < 1:
                raise ValueError(f"steps must be >= 1, got {steps}")
            return steps
        kind, value = ("epochs", epochs) if epochs is not None else self.default_length
        if kind == "steps":
            return value
        if not value > 0:
            raise ValueError(f"epochs must be > 0, got {value}")
        return max(1, math.ceil(value * dataset_size / min(batch_size, dataset_size)))

    @property
    def private(self) -> bool:
        """False for the non-private reference, which runs only at epsilon = inf."""
        return self.release.private

    def load(self):
        """The method's module (imported on first use)."""
        return importlib.import_module(self.module.partition(":")[0])

    def option_class(self):
        """The dataclass of the method's own options, or None."""
        if self.options is None:
            return None
        module, _, name = self.options.partition(":")
        return getattr(importlib.import_module(module), name)

    def builder(self):
        """The function that builds a run of the method: ``module:function``, or the module's ``build``.
        A flow's builder returns a ParticleFlow (see swflow.methods.flows.build_central), a generator's a
        trained-generator object (see swflow.methods.generators.dpswgen.build)."""
        return getattr(self.load(), self.module.partition(":")[2] or "build")


METHODS: dict[str, MethodSpec] = {spec.name: spec for spec in (
    MethodSpec("swf", "flow", "sliced Wasserstein flow of Liutkus et al. (sigma = 0, no privacy)",
               "none", ("steps", 500), "swflow.methods.flows:build_central", sharded=True),
    MethodSpec("dpswflow-r", "flow", "DP flow, fresh directions + one private batch release per step (004 Alg. 1)",
               "per-step", ("epochs", 35), "swflow.methods.flows:build_central", sharded=True),
    MethodSpec("dpswflow", "flow", "DP flow, one release of a direction pool, free later steps (004 Alg. 2)",
               "pool", ("steps", 1500), "swflow.methods.flows:build_central"),
    MethodSpec("dpswflow-hist", "flow", "DP flow toward a sliced histogram: one noisy release of the K x B "
               "counts of the rows' projections on public directions; no deconvolution, free later steps",
               "histogram", ("steps", 300), "swflow.methods.histogram", default_projections=32, sharded=True),
    MethodSpec("ldp-flow", "flow", "local DP: each record released once as y + N(0, s^2 I); the flow smooths "
               "the particle side only, so it deconvolves the noise", "local", ("steps", 1500),
               "swflow.methods.flows:build_local"),
    MethodSpec("dpswgen", "generator", "MLP generator trained with the DP-smoothed SW loss, accounted like "
               "dpswflow-r (004 §4.2)", "per-step", ("epochs", 35), "swflow.methods.generators.dpswgen"),
    MethodSpec("dpsgd-sw-gen", "generator", "generator trained by DP-SGD on the exact SW gradient with "
               "activation and Jacobian clipping (000 Thm 4.1)", "per-step", ("epochs", 25),
               "swflow.methods.generators.dpsgd_sw", noise_on="gradient",
               options="swflow.core.config:ClippedGradientOptions"),
    # batches of 1000: exact OT between minibatches is biased, less so for larger ones (generator_defaults.py)
    MethodSpec("ldp-sinkhorn-gen", "generator", "generator trained on locally released rows with entropic OT, "
               "lambda = 2 s^2 (002)", "local", ("steps", 400), "swflow.methods.generators.ldp_sinkhorn",
               default_batch=1000),
)}


def sharded_methods() -> tuple[str, ...]:
    """The methods that run with their particles and private rows sharded over torch.distributed ranks."""
    return tuple(name for name, spec in METHODS.items() if spec.sharded)


def method(name: str) -> MethodSpec:
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {sorted(METHODS)}")
    return METHODS[name]


def check_budget(name: str, *, private: bool) -> None:
    method(name).check_budget(private=private)


def release_sketch(name: str, sketch: int | None = 64) -> int | None:
    """Quantile levels model.h5 keeps per released direction for method ``name``: ``sketch`` for releases of
    projected rows, every level for a histogram's quantile table (already a sketch of TABLE_LEVELS levels)."""
    return method(name).release.sketch(sketch)
