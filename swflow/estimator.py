"""One estimator for every method: ``Synthesizer(method, epsilon=...)``, ``fit(data)``, ``sample(n, seed=)``,
``privacy_report()``, ``save(path)`` / ``load(path)``.

``fit`` spends the budget once; ``sample`` is post-processing of what was released (a flow replays
its recorded releases, a generator runs its network) and never touches the ledger. A saved file
holds the released quantities or the generator's weights, the settings and the privacy report —
no private row — and loads with ``torch.load(weights_only=True)``.

    >>> syn = Synthesizer("dpswflow-r", epsilon=8.0, steps=200, n_projections=30, batch_size=250)
    >>> syn.fit(rows)                  # rows: (m, d) in the unit ball
    >>> x = syn.sample(5000, seed=1)   # as often as you like, no further privacy cost
    >>> syn.save("model.pt"); Synthesizer.load("model.pt").sample(10, seed=2)
"""
from __future__ import annotations

import math
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from .registry import METHODS, RunShape

__all__ = ["Synthesizer", "SynthesizerParams"]

FORMAT = "swflow-synthesizer-2"  # 2: settings grouped as params["privacy"], ["shape"], ["flow"]


@dataclass
class SynthesizerParams:
    """Settings of a Synthesizer, grouped by the configuration each belongs to: ``privacy`` holds
    :class:`~swflow.privacy.PrivacySpec`'s fields, ``shape`` those of :class:`~swflow.registry.RunShape`
    (steps, epochs, n_projections, pool_size, batch_size) and ``flow`` those of
    :class:`~swflow.flow.FlowConfig` (flows only). :class:`Synthesizer` sorts its keywords by name."""

    method: str
    privacy: dict = field(default_factory=dict)
    shape: dict = field(default_factory=dict)
    flow: dict = field(default_factory=dict)
    sketch: int | None = 64  # flows: quantile levels kept per released direction
    seed: int = 0
    privacy_seed: int | None = None
    device: str = "cpu"
    options: dict = field(default_factory=dict)  # extra fields of the generator's config dataclass

    def __post_init__(self):
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {sorted(METHODS)}")
        if self.privacy.get("epsilon") is None and self.privacy.get("noise_multiplier") is None:
            if METHODS[self.method].private:
                raise ValueError(f"{self.method} needs epsilon= or noise_multiplier= (epsilon=math.inf: no privacy)")
            self.privacy = {**self.privacy, "epsilon": math.inf}
        # bad settings fail here, not after the budget is spent
        METHODS[self.method].check_budget(private=self.privacy_spec().private)
        self.run_shape()
        self.flow_config(None)

    def privacy_spec(self):
        from .privacy import PrivacySpec

        return PrivacySpec(**self.privacy)

    def run_shape(self) -> RunShape:
        return RunShape(**self.shape)

    def run_plan(self, dataset_size: int):
        """What a fit on ``dataset_size`` rows does (swflow.pipeline.resolve)."""
        from .pipeline import resolve

        return resolve(self.method, self.run_shape(), dataset_size=dataset_size, privacy=self.privacy_spec(),
                       step_size=self.flow.get("step_size"))

    def flow_config(self, plan):
        """The simulator settings of ``plan`` (None: only check the flow settings, before any data)."""
        from .flow import FlowConfig

        flow = dict(self.flow)
        if plan is not None:
            flow["step_size"] = plan.step_size
        return FlowConfig(steps=1 if plan is None else plan.steps, seed=self.seed, device=self.device, **flow)


class Synthesizer:
    """fit once on private rows, then sample as often as you like."""

    def __init__(self, method: str, **params):
        """``params``: any field of :class:`~swflow.privacy.PrivacySpec` (epsilon, delta, adjacency, ...),
        :class:`~swflow.registry.RunShape` (steps, epochs, n_projections, batch_size, pool_size) and, for
        flows, :class:`~swflow.flow.FlowConfig` (n_particles, step_size, manifold, smoothing, ...), plus
        ``sketch``, ``seed``, ``privacy_seed``, ``device`` and a generator's ``options``. Defaults are
        those of the command line: steps from the method's default length, batches of 250."""
        from .flow import FlowConfig
        from .options import option_fields
        from .privacy import PrivacySpec

        groups = {"privacy": {f.name for f in fields(PrivacySpec)}, "shape": {f.name for f in fields(RunShape)},
                  "flow": {f.name for f in option_fields(FlowConfig)} - {"seed", "device", "record_every",
                                                                          "checkpoint_every"}}
        grouped = {group: {**params.pop(group, {}), **{k: params.pop(k) for k in list(params) if k in names}}
                   for group, names in groups.items()}
        own = {f.name for f in fields(SynthesizerParams)} - set(groups) - {"method"}
        if set(params) - own:
            raise TypeError(f"unknown settings {sorted(set(params) - own)}; a Synthesizer takes the fields of "
                            f"PrivacySpec, RunShape and FlowConfig, and {sorted(own)}")
        self.params = SynthesizerParams(method=method, **grouped, **params)
        self._sampler = None  # FlowModel or a generator network with .sample(n, seed=)
        self._report = None  # PrivacyReport of the fit

    @property
    def kind(self) -> str:
        return METHODS[self.params.method].kind

    # -- fit -------------------------------------------------------------------------------------
    def fit(self, data, *, progress: bool = False) -> "Synthesizer":
        """Spend the budget on ``data`` (m, d) — array or tensor of private rows — once."""
        if self._sampler is not None:
            raise RuntimeError("this Synthesizer is fitted already; fitting again would spend the budget twice — "
                               "make a new one")
        from .data import as_rows

        data = torch.as_tensor(as_rows(data.detach().cpu().numpy() if isinstance(data, torch.Tensor) else data))
        if data.ndim != 2:
            raise ValueError(f"data must be (rows, dims), got shape {tuple(data.shape)}")
        if self.kind == "flow":
            self._fit_flow(data, progress)
        else:
            self._fit_generator(data, progress)
        return self

    def _fit_flow(self, data: torch.Tensor, progress: bool) -> None:
        from .callbacks import ReleaseLog, release_sketch
        from .methods import make_flow
        from .model import FlowModel
        p, shape, plan = self.params, self.params.run_shape(), self.params.run_plan(data.shape[0])
        with tempfile.TemporaryDirectory() as tmp:
            log = ReleaseLog(Path(tmp) / "model.h5", sketch=release_sketch(p.method, p.sketch))
            flow = make_flow(p.method, data, privacy=p.privacy_spec(), config=p.flow_config(plan),
                             n_projections=plan.n_projections, pool_size=shape.pool_size,
                             batch_size=plan.batch_size, bins=shape.bins, privacy_seed=p.privacy_seed,
                             callbacks=[log], progress=progress)
            flow.run()
            self._report = flow.privacy_report(p.method)
            self._sampler = FlowModel.from_file(Path(tmp) / "model.h5", report=self._report)

    def _fit_generator(self, data: torch.Tensor, progress: bool) -> None:
        from .baselines import make_generator
        from .privacy import privacy_report

        p, plan = self.params, self.params.run_plan(data.shape[0])
        model = make_generator(p.method, data, privacy=p.privacy_spec(), steps=plan.steps,
                               n_projections=plan.n_projections, batch_size=plan.rows_per_step,
                               privacy_seed=p.privacy_seed, seed=p.seed, device=p.device, **p.options)
        model.fit(progress=progress)
        self._report = privacy_report(p.method, model.target, run_config={"method": p.method, **asdict(model.config)})
        self._sampler = model.generator

    # -- use -------------------------------------------------------------------------------------
    def _fitted(self):
        if self._sampler is None:
            raise RuntimeError("call fit(data) first (or Synthesizer.load(path))")
        return self._sampler

    def sample(self, n: int, *, seed: int = 0) -> np.ndarray:
        """(n, d) synthetic rows; post-processing of the fitted release (no privacy cost)."""
        return self._fitted().sample(n, seed=seed).detach().cpu().numpy()

    def privacy_report(self):
        """The :class:`~swflow.privacy.PrivacyReport` of the fit (``.to_json()`` for privacy.json)."""
        self._fitted()
        from .model import POST_PROCESSING_NOTE

        return self._report.with_notes(post_processing=POST_PROCESSING_NOTE)

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        sampler = self._fitted()
        if self.kind == "flow":
            state = sampler.state()
        else:
            state = {"network": type(sampler).__name__, "init_kwargs": sampler.init_kwargs,
                     "weights": {k: v.cpu() for k, v in sampler.state_dict().items()}}
        path = Path(path)
        torch.save({"format": FORMAT, "params": asdict(self.params), "report": self._report.to_json(),
                    "state": state}, path)
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> "Synthesizer":
        from .io import load_tensors

        blob = load_tensors(path, what="saved Synthesizer", map_location=device)
        if blob.get("format") != FORMAT:
            raise ValueError(f"{path} is not a saved swflow Synthesizer (format {blob.get('format')!r})")
        params = dict(blob["params"])
        syn = cls(params.pop("method"), **{**params, "device": device})
        from .privacy import PrivacyReport

        from .privacy.verify import verify_report

        syn._report = PrivacyReport.from_json(blob["report"])
        verify_report(syn._report, source=str(path))
        if syn.kind == "flow":
            from .model import FlowModel

            syn._sampler = FlowModel.from_state(blob["state"], report=syn._report)
        else:
            state = blob["state"]
            network = METHODS[syn.params.method].load().NETWORK  # the method's module says what it trains
            if state["network"] != network.__name__:
                raise ValueError(f"{path} holds a {state['network']}, but {syn.params.method} trains a "
                                 f"{network.__name__}")
            syn._sampler = network(**state["init_kwargs"], device=device)
            syn._sampler.load_state_dict(state["weights"])
            syn._sampler.eval()
        return syn
