"""From a method's settings to what a run does: worked out once, here, for every entry point.

`swflow generate`, `swflow privacy`, :class:`~swflow.estimator.Synthesizer` and the experiments all
ask :func:`resolve` how many steps a run takes, how many rows each release sees, how many directions
a step draws and (for flows) the step size. None of them works these out on its own, so a rule
changes in one place and every entry point follows.
"""
from __future__ import annotations

from dataclasses import dataclass

from .registry import RunShape, method

__all__ = ["RunPlan", "resolve"]


@dataclass(frozen=True)
class RunPlan:
    """What one run of ``method`` on ``dataset_size`` rows does.

    steps : simulator (or training) steps
    batch_size : rows per release; None when every release sees every row (a full batch, a pool, a histogram)
    n_projections : directions per step
    step_size : the simulator's h (flows); None for generators
    """

    method: str
    dataset_size: int
    steps: int
    batch_size: int | None
    n_projections: int
    step_size: float | None

    @property
    def rows_per_step(self) -> int:
        """Rows a step touches: the batch, or all of them."""
        return self.batch_size or self.dataset_size


def resolve(method_name: str, shape: RunShape, *, dataset_size: int, privacy, step_size: float | None = None) -> RunPlan:
    """The :class:`RunPlan` of ``method_name`` with ``shape`` on ``dataset_size`` rows under ``privacy``
    (a :class:`~swflow.privacy.PrivacySpec`: the histogram's step-size rule reads the budget).
    ``step_size`` given by the user wins over the method's rule. Raises ValueError for bad settings."""
    spec = method(method_name)
    if dataset_size < 1:
        raise ValueError(f"a run needs at least one private row, got {dataset_size}")
    if shape.batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {shape.batch_size}")
    steps = spec.run_length(steps=shape.steps, epochs=shape.epochs, dataset_size=dataset_size,
                            batch_size=shape.batch_size)
    if spec.kind == "flow" and step_size is None:
        step_size = spec.step_size(dataset_size=dataset_size, privacy=privacy)
    return RunPlan(method=method_name, dataset_size=dataset_size, steps=steps,
                   batch_size=spec.batch(shape.batch_size, dataset_size),
                   n_projections=spec.projections(shape.n_projections),
                   step_size=step_size if spec.kind == "flow" else None)
