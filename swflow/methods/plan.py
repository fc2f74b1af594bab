"""From a method's settings to what a run does: worked out once, here, for every entry point.

`swflow generate`, `swflow privacy`, :class:`~swflow.pipeline.estimator.Synthesizer` and the experiments all
ask :func:`resolve` how many steps a run takes, how many rows each release sees, how many directions
a step draws, what the accountant reads of the release (its plan, the histogram's shape) and (for flows)
the step size. None of them works these out on its own, and the methods' builders take the plan
instead of recomputing it, so a rule changes in one place and every entry point follows.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .registry import RunShape, method

__all__ = ["RunPlan", "resolve", "resolve_fixed"]


@dataclass(frozen=True)
class RunPlan:
    """What one run of ``method`` on ``dataset_size`` rows of dimension ``dim`` does, worked out once.

    steps : simulator (or training) steps
    batch_size : rows per release; None when every release sees every row (a full batch, a pool, a histogram)
    n_projections : directions per step
    step_size : the simulator's h (flows); None for generators
    release : the :class:`~swflow.privacy.ReleasePlan` the accountant reads (its K directions for a pool or a
        histogram); None for a local release, which is accounted per record (swflow.privacy.calibrate_local)
    bins : the histogram's B (dpswflow-hist), else None
    """

    method: str
    dataset_size: int
    dim: int
    steps: int
    batch_size: int | None
    n_projections: int
    step_size: float | None
    release: Any = None
    bins: int | None = None

    @property
    def rows_per_step(self) -> int:
        """Rows a step touches: the batch, or all of them."""
        return self.batch_size or self.dataset_size


def resolve(method_name: str, shape: RunShape, *, dataset_size: int, dim: int, privacy,
            step_size: float | None = None) -> RunPlan:
    """The :class:`RunPlan` of ``method_name`` with ``shape`` on ``dataset_size`` rows of dimension ``dim`` under
    ``privacy`` (a :class:`~swflow.privacy.PrivacySpec`: the histogram's shape and step-size rules read the
    budget). ``step_size`` given by the user wins over the method's rule. Raises ValueError for bad settings."""
    spec = method(method_name)
    if dataset_size < 1:
        raise ValueError(f"a run needs at least one private row, got {dataset_size}")
    if dim < 1:
        raise ValueError(f"rows need at least one coordinate, got dim = {dim}")
    batch_size = spec.batch_rows(shape.batch_size)
    steps = spec.run_length(steps=shape.steps, epochs=shape.epochs, dataset_size=dataset_size,
                            batch_size=batch_size)
    if spec.kind == "flow" and step_size is None:
        step_size = spec.step_size(dataset_size=dataset_size, privacy=privacy)
    n_projections = spec.projections(shape.n_projections)
    release, bins = (None, None) if spec.local else spec.release.resolve(
        steps=steps, dataset_size=dataset_size, dim=dim, n_projections=n_projections, privacy=privacy,
        batch_size=batch_size, pool_size=shape.pool_size, bins=shape.bins)
    return RunPlan(method=method_name, dataset_size=dataset_size, dim=dim, steps=steps,
                   batch_size=spec.batch(batch_size, dataset_size), n_projections=n_projections,
                   step_size=step_size if spec.kind == "flow" else None, release=release, bins=bins)


def resolve_fixed(method_name: str, *, steps: int, n_projections: int, dataset_size: int, dim: int, privacy,
                  batch_size: int | None = None, pool_size: int | None = None, bins: int | None = None,
                  step_size: float | None = None) -> RunPlan:
    """:func:`resolve` for a run whose length and directions the caller has fixed already (the library's
    ``make_*`` functions); ``batch_size`` None is a full batch."""
    shape = RunShape(steps=steps, n_projections=n_projections, pool_size=pool_size, bins=bins,
                     batch_size=dataset_size if batch_size is None else batch_size)
    return resolve(method_name, shape, dataset_size=dataset_size, dim=dim, privacy=privacy, step_size=step_size)
