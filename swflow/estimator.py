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

import tempfile
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from .registry import METHODS

__all__ = ["Synthesizer"]

FORMAT = "swflow-synthesizer-4"  # 4: a histogram keeps its released counts (read-back check); 3: the settings tree


class Synthesizer:
    """fit once on private rows, then sample as often as you like."""

    def __init__(self, method: str, *, privacy_seed: int | None = None, sketch: int | None = 64, **settings):
        """``settings``: any field of :class:`~swflow.privacy.PrivacySpec` (epsilon, delta, adjacency, ...),
        :class:`~swflow.registry.RunShape` (steps, epochs, n_projections, batch_size, pool_size, bins),
        :class:`~swflow.flow.SimulatorSettings` (n_particles, step_size, manifold, smoothing, seed, device,
        ...) and the method's own options, as keywords; ``privacy_seed`` (reproducible noise, for experiments
        only) and ``sketch`` (flows: quantile levels kept per released direction). Defaults are those of the
        command line: steps from the method's default length, batches of 250. The resolved
        :class:`~swflow.settings.Settings` is ``self.settings``; bad settings fail here, before any data."""
        from .settings import build, split_keywords

        self.settings = build(method, split_keywords(method, settings), privacy_seed=privacy_seed, sketch=sketch)
        if self.settings.flow.record_every or self.settings.flow.checkpoint_every:
            raise ValueError("a Synthesizer writes no trajectory frames or checkpoints (its fit is in memory): "
                             "leave record_every and checkpoint_every at 0, or run `swflow generate`")
        self._sampler = None  # FlowModel or a generator network with .sample(n, seed=)
        self._report = None  # PrivacyReport of the fit

    @property
    def kind(self) -> str:
        return METHODS[self.settings.method].kind

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
        s, plan = self.settings, self.settings.plan(data.shape[0])
        with tempfile.TemporaryDirectory() as tmp:
            log = ReleaseLog(Path(tmp) / "model.h5", sketch=release_sketch(s.method, s.sketch))
            flow = make_flow(s.method, data, privacy=s.privacy, config=s.flow_config(plan),
                             n_projections=plan.n_projections, pool_size=s.shape.pool_size,
                             batch_size=plan.batch_size, bins=s.shape.bins, privacy_seed=s.privacy_seed,
                             callbacks=[log], progress=progress)
            flow.run()
            self._report = flow.privacy_report(s.method)
            self._sampler = FlowModel.from_file(Path(tmp) / "model.h5", report=self._report)

    def _fit_generator(self, data: torch.Tensor, progress: bool) -> None:
        from .baselines import make_generator
        from .privacy import privacy_report

        s, plan = self.settings, self.settings.plan(data.shape[0])
        model = make_generator(s.method, data, privacy=s.privacy, steps=plan.steps,
                               n_projections=plan.n_projections, batch_size=plan.rows_per_step,
                               privacy_seed=s.privacy_seed, seed=s.flow.seed, device=s.flow.device,
                               **s.option_values())
        model.fit(progress=progress)
        self._report = privacy_report(s.method, model.target, run_config={"method": s.method, **asdict(model.config)})
        self._sampler = model.generator

    # -- use -------------------------------------------------------------------------------------
    def _fitted(self):
        if self._sampler is None:
            raise RuntimeError("call fit(data) first (or Synthesizer.load(path))")
        return self._sampler

    def sample(self, n: int, *, seed: int = 0, progress: bool = True) -> np.ndarray:
        """(n, d) synthetic rows; post-processing of the fitted release (no privacy cost). A flow replays its
        releases in chunks (memory stays flat in n) under one progress bar with an ETA (``progress=False``
        silences it)."""
        sampler = self._fitted()
        if self.kind != "flow":
            return sampler.sample(n, seed=seed).detach().cpu().numpy()
        out = np.empty((n, sampler.dim), dtype=np.float32)
        start = 0
        for part in sampler.sample_chunks(n, seed=seed, progress=progress):
            out[start:start + len(part)] = part.detach().cpu().numpy()
            start += len(part)
        return out

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
        torch.save({"format": FORMAT, "settings": self.settings.to_tables(), "report": self._report.to_json(),
                    "state": state}, path)
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> "Synthesizer":
        from .io import load_tensors

        blob = load_tensors(path, what="saved Synthesizer", map_location=device)
        if str(blob.get("format", "")).startswith("swflow-synthesizer-") and blob["format"] != FORMAT:
            raise ValueError(f"{path} was saved by another swflow version ({blob['format']}, this one reads "
                             f"{FORMAT}): load it with that version, or fit again")
        if blob.get("format") != FORMAT:
            raise ValueError(f"{path} is not a saved swflow Synthesizer (format {blob.get('format')!r})")
        from .settings import build

        tables = dict(blob["settings"])
        method, privacy_seed, sketch = tables.pop("method"), tables.pop("privacy_seed"), tables.pop("sketch")
        syn = cls.__new__(cls)
        syn.settings = build(method, {**tables, "flow": {**tables["flow"], "device": device}},
                             privacy_seed=privacy_seed, sketch=sketch)
        syn._sampler = syn._report = None
        from .privacy import PrivacyReport

        from .privacy.verify import verify_report

        syn._report = PrivacyReport.from_json(blob["report"])
        verify_report(syn._report, source=str(path))
        if syn.kind == "flow":
            from .model import FlowModel

            syn._sampler = FlowModel.from_state(blob["state"], report=syn._report)
        else:
            state = blob["state"]
            network = METHODS[syn.settings.method].load().NETWORK  # the method's module says what it trains
            if state["network"] != network.__name__:
                raise ValueError(f"{path} holds a {state['network']}, but {syn.settings.method} trains a "
                                 f"{network.__name__}")
            syn._sampler = network(**state["init_kwargs"], device=device)
            syn._sampler.load_state_dict(state["weights"])
            syn._sampler.eval()
        return syn
