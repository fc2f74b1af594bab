"""One estimator for every method: ``Synthesizer(method, epsilon=...)``, ``fit(data)``, ``sample(n, seed=)``,
``privacy_report()``, ``save(path)`` / ``load(path)``.

``fit`` spends the budget once; ``sample`` is post-processing of what was released (a flow replays
its recorded releases, a generator runs its network) and never touches the ledger. A saved file
holds the released quantities or the generator's weights, the settings and the privacy report —
no private row — and loads with ``torch.load(weights_only=True)``.

Rows or images. Without an autoencoder, ``fit`` takes rows (m, d) and ``sample`` returns rows. With
``autoencoder=`` (a shipped checkpoint's name, or the path of your own from ``swflow train-ae``),
``fit`` takes images as they come — an array (n, C, H, W) or (n, H, W[, C]), 8-bit or in [0, 1], or a
folder — read by the same reader as the command line, encodes them with the autoencoder's public
encoder (it saw public images only, so loading it costs nothing), and ``sample`` returns images
(n, C, H, W) in [0, 1] whose codes are ``.latents``.

    >>> syn = Synthesizer("dpswflow-hist", epsilon=1.0, delta=1e-5, autoencoder="digits-adv")
    >>> syn.fit(images)                # e.g. scikit-learn's digits, (n, 8, 8) in [0, 16] / 16
    >>> x = syn.sample(100, seed=1)    # (100, 1, 8, 8) in [0, 1]; x.latents: their codes
    >>> syn.save("model.pt"); Synthesizer.load("model.pt").sample(10, seed=2)

``schema=`` (a table's public schema: swflow/tables) fits a private DataFrame and samples DataFrames; see
:mod:`swflow.pipeline.tables`.

``conditional=True`` fits one flow per class (``fit(data, labels)``; ``sample`` returns ``.labels``).
Labels are private by default: declare the public label set with ``classes=`` (dpswflow-hist only;
see :mod:`swflow.pipeline.conditional`), or pass ``labels_public=True``.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..methods.registry import METHODS

__all__ = ["Synthesizer", "Samples"]

FORMAT = "swflow-synthesizer-5"  # 5: images (an autoencoder reference) and conditional fits; 4: histogram counts
READS = ("swflow-synthesizer-4", FORMAT)  # format 4 files are rows-only unconditional fits: still readable


def _chunk_seed(seed: int, index: int) -> int:
    """The public seed of part ``index`` of a sample drawn with ``seed``."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


class Samples(np.ndarray):
    """Samples as an array — rows (n, d), or images (n, C, H, W) in [0, 1] — with ``.latents`` (their codes;
    the rows themselves without an autoencoder) and ``.labels`` (conditional fits; else None)."""

    latents: np.ndarray
    labels: np.ndarray | None

    @classmethod
    def of(cls, values: np.ndarray, latents: np.ndarray, labels: np.ndarray | None) -> "Samples":
        out = np.asarray(values).view(cls)
        out.latents, out.labels = latents, labels
        return out

    def __array_finalize__(self, obj):
        self.latents = getattr(obj, "latents", None)
        self.labels = getattr(obj, "labels", None)


class Synthesizer:
    """fit once on private rows, images or a table, then sample as often as you like."""

    def __new__(cls, method: str = "dpswflow-hist", *args, schema=None, **kwargs):
        if schema is not None:  # a table: its own estimator (swflow/pipeline/tables.py), the same interface
            from .tables import TableSynthesizer

            return TableSynthesizer(method, *args, schema=schema, **kwargs)
        return super().__new__(cls)

    def __init__(self, method: str, *, autoencoder: str | Path | None = None, conditional: bool = False,
                 classes: Sequence[int] | None = None, labels_public: bool = False, privacy_seed: int | None = None,
                 sketch: int | None = 64, **settings):
        """``settings``: any field of :class:`~swflow.core.config.PrivacySpec` (epsilon, delta, adjacency, ...),
        :class:`~swflow.core.config.RunShape` (steps, epochs, n_projections, batch_size, pool_size, bins),
        :class:`~swflow.core.config.SimulatorSettings` (n_particles, step_size, manifold, smoothing, seed, device,
        ...) and the method's own options, as keywords; ``privacy_seed`` (reproducible noise, for experiments
        only) and ``sketch`` (flows: quantile levels kept per released direction). Defaults are those of the
        command line: steps from the method's default length, its default batch (250; ldp-sinkhorn-gen 1000).
        ``autoencoder``: fit on images (see the module's docstring); its codes lie on the unit sphere, so the flow
        runs there.
        ``conditional``, ``classes`` (the public label set), ``labels_public``: one flow per class. The resolved
        :class:`~swflow.pipeline.settings.Settings` is ``self.settings``; bad settings fail here, before any data."""
        from .settings import from_keywords

        if autoencoder is not None:
            if settings.get("manifold", "sphere") != "sphere":
                raise ValueError("an autoencoder's codes lie on the unit sphere: leave manifold unset (or 'sphere')")
            settings = {**settings, "manifold": "sphere"}
        self.settings = from_keywords(method, privacy_seed=privacy_seed, sketch=sketch, **settings)
        if self.settings.flow.record_every or self.settings.flow.checkpoint_every:
            raise ValueError("a Synthesizer writes no trajectory frames or checkpoints (its fit is in memory): "
                             "leave record_every and checkpoint_every at 0, or run `swflow generate`")
        if conditional and self.kind != "flow":
            raise ValueError(f"conditional=True fits one flow per class; {method} is not a flow method")
        if (classes is not None or labels_public) and not conditional:
            raise ValueError("classes and labels_public apply to conditional=True only")
        if conditional and not labels_public and classes is None:
            raise ValueError("with private labels, declare the public label set: classes=range(10), say (which "
                             "classes occur is private), or pass labels_public=True")
        self.conditional, self.labels_public = conditional, labels_public
        self.classes = None if classes is None else sorted({int(c) for c in classes})
        if autoencoder is not None and Path(autoencoder).suffix == ".pt" and Path(autoencoder).exists():
            autoencoder = Path(autoencoder).resolve()  # a saved Synthesizer finds it again from any folder
        self._autoencoder_ref = None if autoencoder is None else str(autoencoder)
        self._autoencoder = self._load_autoencoder() if autoencoder is not None else None
        self._adapted = False  # the decoder was adapted to the private images (inside the budget)
        self._sampler = None  # FlowModel, a generator network, or {label: FlowModel}
        self._shares = None  # a conditional fit: each class's share of the samples
        self._report = None  # PrivacyReport of the fit

    @property
    def kind(self) -> str:
        return METHODS[self.settings.method].kind

    def _load_autoencoder(self, expected_sha256: str | None = None):
        from autoencoders import load_autoencoder

        model, meta = load_autoencoder(self._autoencoder_ref, expected_sha256=expected_sha256)
        return model, meta

    # -- fit -------------------------------------------------------------------------------------
    def fit(self, data, labels=None, *, progress: bool = False) -> "Synthesizer":
        """Spend the budget once: on rows ``data`` (m, d) — array or tensor — or, with an autoencoder, on images
        (an array, or a folder); ``labels`` (m,) for a conditional fit."""
        if self._sampler is not None:
            raise RuntimeError("this Synthesizer is fitted already; fitting again would spend the budget twice — "
                               "make a new one")
        adapt = self.settings.adapt.adapt_decoder
        if adapt and (self._autoencoder is None or self.conditional
                      or not METHODS[self.settings.method].release.of_counts):
            raise ValueError("adapt_decoder fine-tunes an autoencoder's decoder on the private images: it needs "
                             "autoencoder=..., the dpswflow-hist method and no conditional fit")
        private = self._open(data)
        data, images = private.rows, (private.records if adapt else None)
        if images is not None:
            self._fit_adapted(data, images, progress)
        elif self.conditional:
            if labels is None:
                raise ValueError("a conditional fit needs labels: fit(data, labels)")
            labels = np.asarray(labels)
            if labels.shape != (data.shape[0],):
                raise ValueError(f"need one label per private record: {labels.shape} labels for {data.shape[0]}")
            self._fit_conditional(data, labels, progress)
        elif labels is not None:
            raise ValueError("labels are for conditional=True")
        else:
            self._sampler, self._report = self._fit_one(self.settings, data, progress)
        return self

    def _open(self, data):
        """The private data through the one data path (swflow.sources.open_source): rows as given (an array, a
        tensor, an h5py dataset, ChunkedRows, or a .npy/.npz/.h5 file), or images encoded by the autoencoder."""
        from ..core.sources import SourceRequest
        from ..sources import open_source

        if self._autoencoder is None:
            return open_source(SourceRequest("rows", data, "identity"))
        from autoencoders.codec import AutoencoderCodec

        codec = AutoencoderCodec(*self._autoencoder, reference=self._autoencoder_ref)
        return open_source(SourceRequest("images", data, "autoencoder"), codec=codec)

    def _fit_adapted(self, data: torch.Tensor, images: np.ndarray, progress: bool) -> None:
        """The histogram flow and a DP-SGD adaptation of the decoder in one budget (autoencoders/adapt.py)."""
        from dataclasses import replace

        from autoencoders.adapt import adapt_decoder, split_budget
        from ..privacy import NoiseSource, compose
        from .run import adapt_note, with_budget_split

        s = self.settings
        histogram_spec, multiplier = split_budget(s.privacy, s.plan(*data.shape).release, s.adapt)
        self._sampler, report = self._fit_one(replace(s, privacy=histogram_spec), data, progress)  # its share
        noise = NoiseSource(None if s.privacy_seed is None else s.privacy_seed + 7919, secure=s.privacy.secure_noise)
        codes = self._sampler.sample(s.flow.n_particles, seed=s.flow.seed).cpu().numpy()  # released: post-processing
        adapted, event, _ = adapt_decoder(self._autoencoder[0], images, codes, multiplier=multiplier,
                                          settings=s.adapt, adjacency=s.privacy.adjacency, noise=noise,
                                          seed=s.flow.seed, progress=progress)
        self._autoencoder = (adapted, self._autoencoder[1])
        self._adapted = True
        composed = compose(report, [event], target_epsilon=s.privacy.epsilon,
                           note=adapt_note(s.adapt, event, multiplier, secure=s.privacy.secure_noise).replace(
                               " (decoder.pt, decoder.json)", " (saved with the Synthesizer)"))
        self._report = with_budget_split(report, composed, s.adapt.adapt_share)

    def _fit_conditional(self, data: torch.Tensor, labels: np.ndarray, progress: bool) -> None:
        from .conditional import combine, estimated_size, plan_classes

        s = self.settings
        classes = self.classes if self.classes is not None else np.unique(labels).tolist()
        plan = s.plan(len(labels), data.shape[1])  # every class runs the whole data set's steps, as `generate --conditional`
        runs = plan_classes(s.method, labels, classes, privacy=s.privacy, n_particles=s.flow.n_particles,
                            seed=s.flow.seed, pool_size=s.shape.pool_size, bins=s.shape.bins,
                            batch_size=plan.batch_size, privacy_seed=s.privacy_seed,
                            labels_public=self.labels_public)
        models, reports = {}, []
        for run in runs:
            own, own_plan = run.fit_inputs(s, plan)
            models[run.label], report = self._fit_one(own, data[torch.as_tensor(run.rows)], progress, plan=own_plan,
                                                      part_of_larger=run.dataset_size is not None,
                                                      run_config={"class": run.label})
            reports.append(report)
        estimates = [] if self.labels_public else [
            estimated_size(models[r.label].public["noisy_counts"]) if rep.private else float(r.rows.sum())
            for r, rep in zip(runs, reports)]
        fitted_latents = [np.zeros((r.n_particles, data.shape[1]), np.float32) for r in runs]  # only their count
        self._report, _, sample_labels = combine(s.method, runs, reports, fitted_latents, estimates,
                                                 s.flow.n_particles, None, labels_public=self.labels_public)
        self._class_reports = {r.label: rep for r, rep in zip(runs, reports)}
        counts = {c: int((sample_labels == c).sum()) for c in models}
        total = sum(counts.values())
        self._shares = {c: k / total for c, k in counts.items()}
        self._sampler = models

    @staticmethod
    def _fit_one(settings, data: torch.Tensor, progress: bool, *, plan=None, part_of_larger: bool = False,
                 run_config: dict | None = None):
        """One flow or generator (swflow.pipeline.fitting.fit, ``plan``, ``part_of_larger`` and ``run_config`` as
        there): (its sampler, its report). A flow's sampler is a FlowModel of its recorded releases; a generator's, its network."""
        from ..methods.registry import release_sketch
        from ..simulate.callbacks import ReleaseLog
        from .fitting import fit
        from ..methods.model import FlowModel

        if METHODS[settings.method].kind == "generator":
            result = fit(settings, data, progress=progress)
            return result.generator.generator, result.report
        with tempfile.TemporaryDirectory() as tmp:
            log = ReleaseLog(Path(tmp) / "model.h5", sketch=release_sketch(settings.method, settings.sketch))
            report = fit(settings, data, plan=plan, callbacks=[log], progress=progress, run_config=run_config,
                         part_of_larger=part_of_larger).report
            return FlowModel.from_file(Path(tmp) / "model.h5", report=report), report

    # -- use -------------------------------------------------------------------------------------
    def _fitted(self):
        if self._sampler is None:
            raise RuntimeError("call fit(data) first (or Synthesizer.load(path))")
        return self._sampler

    def sample(self, n: int, *, seed: int = 0, progress: bool = True) -> Samples:
        """n samples; post-processing of the fitted release (no privacy cost): rows (n, d), or with an
        autoencoder images (n, C, H, W) in [0, 1] with their codes as ``.latents``; ``.labels`` for a
        conditional fit. A flow replays its releases in chunks (memory stays flat in n) under one progress
        bar with an ETA (``progress=False`` silences it)."""
        sampler = self._fitted()
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        labels = None
        if self.conditional:
            from .conditional import class_shares

            order = sorted(sampler)
            sizes = class_shares(np.asarray([self._shares[c] for c in order]), n, at_least_one=False)
            parts = [self._replay(sampler[c], int(k), seed=seed + c, progress=progress) for c, k in zip(order, sizes)
                     if k]
            latents = np.concatenate(parts) if parts else np.zeros((0, self._dim()), np.float32)
            labels = np.concatenate([np.full(int(k), c) for c, k in zip(order, sizes) if k])
        elif self.kind == "flow":
            latents = self._replay(sampler, n, seed=seed, progress=progress)
        else:
            latents = sampler.sample(n, seed=seed).detach().cpu().numpy()
        if self._autoencoder is None:
            return Samples.of(latents, latents, labels)
        return Samples.of(self._decode(latents, progress, seed=seed), latents, labels)

    def _dim(self) -> int:
        return next(iter(self._sampler.values())).dim if isinstance(self._sampler, dict) else self._sampler.dim

    @staticmethod
    def _replay(model, n: int, *, seed: int, progress: bool) -> np.ndarray:
        out = np.empty((n, model.dim), dtype=np.float32)
        start = 0
        for part in model.sample_chunks(n, seed=seed, progress=progress):
            out[start:start + len(part)] = part.detach().cpu().numpy()
            start += len(part)
        return out

    def _decode(self, latents: np.ndarray, progress: bool, *, seed: int) -> np.ndarray:
        """Images of ``latents``; a sampling decoder's noise is seeded from ``seed`` (chunk i from (seed, i)), so
        ``sample(n, seed=s)`` gives the same images on every call."""
        from tqdm.auto import tqdm

        model, _ = self._autoencoder
        chunk = 4096
        starts = tqdm(range(0, len(latents), chunk), desc="decoding", unit="chunk",
                      disable=not progress or len(latents) <= chunk)
        parts = [model.decode_images(latents[i:i + chunk], seed=_chunk_seed(seed, i)) for i in starts]
        return np.clip(np.concatenate(parts), 0.0, 1.0)

    def privacy_report(self):
        """The :class:`~swflow.privacy.PrivacyReport` of the fit (``.to_json()`` for privacy.json)."""
        self._fitted()
        from ..methods.model import POST_PROCESSING_NOTE

        return self._report.with_notes(post_processing=POST_PROCESSING_NOTE)

    # -- persistence -----------------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        sampler = self._fitted()
        if self.conditional:
            state = {"classes": {str(c): {"model": m.state_dict(), "report": self._class_reports[c].to_json(),
                                          "share": self._shares[c]} for c, m in sampler.items()}}
        elif self.kind == "flow":
            state = sampler.state_dict()
        else:
            state = {"network": type(sampler).__name__, "init_kwargs": sampler.init_kwargs,
                     "weights": {k: v.cpu() for k, v in sampler.state_dict().items()}}
        autoencoder = None
        if self._autoencoder is not None:
            meta = self._autoencoder[1]
            autoencoder = {"ref": self._autoencoder_ref, "name": meta["name"], "sha256": meta["weights_sha256"]}
            if self._adapted:  # trained on private data inside the budget: its weights travel with the release
                autoencoder["adapted_decoder"] = {k: v.cpu() for k, v in self._autoencoder[0].decoder.state_dict().items()}
        path = Path(path)
        torch.save({"format": FORMAT, "settings": self.settings.to_tables(), "report": self._report.to_json(),
                    "state": state, "autoencoder": autoencoder,
                    "conditional": {"on": self.conditional, "classes": self.classes,
                                    "labels_public": self.labels_public}}, path)
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: str = "cpu") -> "Synthesizer":
        """A saved Synthesizer, its privacy claim re-derived from the releases it holds (and refused when it does
        not follow); its autoencoder is found again by name or path and checked by sha256."""
        from ..io.hdf5 import load_tensors

        blob = load_tensors(path, what="saved Synthesizer", map_location=device)
        form = str(blob.get("format", ""))
        from .tables import FORMAT as TABLE_FORMAT, TableSynthesizer

        if form == TABLE_FORMAT:
            return TableSynthesizer.load(path, blob=blob)
        if form.startswith("swflow-synthesizer-") and form not in READS:
            raise ValueError(f"{path} was saved by another swflow version ({form}; this one reads "
                             f"{', '.join(READS)}): load it with that version, or fit again")
        if form not in READS:
            raise ValueError(f"{path} is not a saved swflow Synthesizer (format {blob.get('format')!r})")
        from .saved import class_samplers, sampler, verified_report
        from .settings import build

        tables = dict(blob["settings"])
        method, privacy_seed, sketch = tables.pop("method"), tables.pop("privacy_seed"), tables.pop("sketch")
        syn = cls.__new__(cls)
        syn.settings = build(method, {**tables, "flow": {**tables["flow"], "device": device}},
                             privacy_seed=privacy_seed, sketch=sketch)
        conditional = blob.get("conditional") or {"on": False, "classes": None, "labels_public": False}
        syn.conditional, syn.classes, syn.labels_public = (conditional["on"], conditional["classes"],
                                                          conditional["labels_public"])
        autoencoder = blob.get("autoencoder")
        syn._autoencoder_ref = None if autoencoder is None else autoencoder["ref"]
        syn._autoencoder = None if autoencoder is None else syn._load_autoencoder(expected_sha256=autoencoder["sha256"])
        syn._adapted = autoencoder is not None and "adapted_decoder" in autoencoder
        if syn._adapted:
            syn._autoencoder[0].decoder.load_state_dict(autoencoder["adapted_decoder"])
        syn._shares = None
        syn._report = verified_report(blob, syn.settings, adapted=syn._adapted, source=str(path))
        if syn.conditional:
            syn._sampler, syn._class_reports, syn._shares = class_samplers(blob["state"], syn._report,
                                                                           source=str(path))
        else:
            syn._sampler = sampler(blob["state"], syn._report, syn.settings.method, device=device,
                                   source=str(path))
        return syn
