"""fit: settings and private rows in, a fitted flow or generator and its privacy report out.

The one way a run is made, for the :class:`~swflow.pipeline.estimator.Synthesizer`, the command line and the
experiments: :meth:`Settings.plan <swflow.pipeline.settings.Settings.plan>` resolves the run once
(:func:`swflow.methods.plan.resolve`), the method's builder takes that plan, and the shared simulator loop
(:mod:`swflow.simulate.simulator`) runs it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from torch import Tensor

from ..kernels.drift import LOCAL, OneProcess
from ..methods.registry import method as method_spec
from ..privacy import PrivacyReport
from ..simulate.callbacks import FlowCallback
from ..simulate.threads import torch_threads
from ..core.config import FlowConfig
from ..methods.plan import RunPlan
from .settings import Settings

__all__ = ["RunResult", "fit"]


@dataclass
class RunResult:
    """What :func:`fit` returns.

    plan : the resolved :class:`~swflow.methods.plan.RunPlan`
    report : the privacy report of the run (privacy.json's contents)
    particles : a flow's (n, d) particles after its last step; None for a generator
    generator : a generator method's trained model (``.sample(n, seed=)``); None for a flow
    diagnostics : a flow's (step, RMS projected displacement) on about 100 steps
    """

    plan: RunPlan
    report: PrivacyReport
    particles: Tensor | None = None
    generator: Any = None
    diagnostics: list[tuple[int, float]] = field(default_factory=list)


def fit(settings: Settings, data, *, plan: RunPlan | None = None, config: FlowConfig | None = None,
        callbacks: Sequence[FlowCallback] = (), run_config: dict | None = None, progress: bool = False,
        threads: int | None = None, part_of_larger: bool = False, communicator: OneProcess = LOCAL) -> RunResult:
    """Run ``settings`` on the private rows ``data`` (m, d): spend the budget once.

    ``plan`` defaults to ``settings.plan(m, d)`` and a flow's ``config`` to ``settings.flow_config(plan)``;
    ``callbacks`` observe the run (checkpoints, files: :func:`swflow.simulate.callbacks.run_files`); ``run_config``
    is added to the report's record of the run. ``threads``: torch threads while the steps run
    (:mod:`swflow.simulate.threads`; None leaves the process's setting alone). ``part_of_larger``: ``data`` is one
    part (a class) of a data set of ``plan.dataset_size`` rows whose own size stays private (histogram
    releases only, :mod:`swflow.pipeline.conditional`). ``communicator``: a flow's particles sharded over
    torch.distributed ranks (:class:`swflow.simulate.distributed.ProcessGroup`; ``data`` is then this rank's
    shard and ``plan`` is resolved on all the rows); the result's particles are all of them, on every rank."""
    from ..privacy import privacy_report

    plan = plan or settings.plan(*data.shape)
    if method_spec(settings.method).kind == "generator":
        if communicator.sharded:
            raise ValueError(f"{settings.method} is a generator: only flows run sharded over processes")
        from ..methods.generators import make_generator

        model = make_generator(settings.method, data, privacy=settings.privacy, steps=plan.steps,
                               n_projections=plan.n_projections, batch_size=plan.rows_per_step,
                               privacy_seed=settings.privacy_seed, seed=settings.flow.seed,
                               device=settings.flow.device, **settings.option_values())
        with torch_threads(threads):
            model.fit(progress=progress, callbacks=callbacks)
        report = privacy_report(settings.method, model.target,
                                run_config={"method": settings.method, **asdict(model.config), **(run_config or {})})
        return RunResult(plan, report, generator=model)
    from ..methods.flows import build_flow

    flow = build_flow(data, plan, privacy=settings.privacy, config=config or settings.flow_config(plan),
                      privacy_seed=settings.privacy_seed, callbacks=callbacks, progress=progress,
                      part_of_larger=part_of_larger, communicator=communicator)
    with torch_threads(threads):
        result = flow.run()
    particles = flow.gather_particles() if communicator.sharded else result.particles
    return RunResult(plan, flow.privacy_report(settings.method, run_config), particles=particles,
                     diagnostics=result.diagnostics)
