"""A finished private flow as a reusable sampler: new particles through what the private data released.

A flow run records, per step, its directions, σ and a quantile sketch of the noisy released
target projections (``model.h5``, see :class:`~swflow.io.hdf5.ReleaseRecorder`). Those are outputs of
the private mechanism, so flowing any number of new particles from μ0 through them is
post-processing: ``sample`` costs no privacy, touches no ledger, and the run's privacy.json holds
for every sample. The replay is the same simulator loop (:class:`~swflow.simulate.flow.ParticleFlow`) with
a strategy that hands back the recorded releases instead of asking a private target.
"""
from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import h5py
import torch
from torch import Tensor

from ..privacy import PrivacyLedger, PrivacyReport
from ..simulate.callbacks import ProgressBar
from ..simulate.flow import FlowConfig, ParticleFlow

__all__ = ["CHUNK", "FlowModel", "ReplayedReleases"]

#: particles a replay moves at once: its step arrays (about 24 bytes per particle and direction) stay near 200 MB
CHUNK = 1 << 18

POST_PROCESSING_NOTE = ("samples drawn from a finished run's recorded releases (model.h5): post-processing of "
                        "that run's differentially private output, so its (epsilon, delta) covers them and no "
                        "further privacy was spent")


class ReplayedReleases:
    """Strategy that returns step t's recorded (theta, released sketch, σ) in order."""

    name = "replayed"

    def __init__(self, theta: Tensor, released: Tensor, sigma: Tensor):
        self.theta, self.released, self.sigma = theta, released, sigma
        self.t = 0

    def setup(self, target, generator, *, dtype, device) -> None:
        self.t = 0

    def next(self, target, generator, *, dtype, device):
        t = self.t
        self.t += 1
        return (self.theta[t].to(device=device, dtype=dtype), self.released[t].to(device=device, dtype=dtype),
                float(self.sigma[t]))

    def state_dict(self) -> dict:
        return {"t": self.t}

    def load_state_dict(self, state: dict) -> None:
        self.t = state["t"]

    def describe(self) -> dict:
        return {"strategy": self.name, "n_projections": int(self.theta.shape[2])}


class _RecordedSource:
    """What ParticleFlow needs of a target, for replay: shape only; nothing private, nothing to spend."""

    calibration = None
    private = False
    batch_size = None

    def __init__(self, dim: int):
        self.dim, self.size = dim, 0
        self.ledger = PrivacyLedger()

    def state_dict(self) -> dict:
        return {"ledger": self.ledger.state_dict(), "noise": {}}


class FlowModel:
    """Recorded releases of a finished flow; ``sample(n, seed)`` pushes new particles through them.

    Build it with :meth:`from_run_dir` (a run directory: model.h5 + privacy.json) or from the
    arrays themselves (what :class:`swflow.pipeline.estimator.Synthesizer` saves).
    """

    def __init__(self, *, config: FlowConfig, dim: int, theta: Tensor, released: Tensor, sigma: Tensor,
                 report: PrivacyReport | None = None, public: dict | None = None):
        if len(theta) != config.steps:
            raise ValueError(f"the model holds {len(theta)} of {config.steps} steps: the run did not finish "
                             "(resume it with `swflow generate ... --resume`)")
        public = dict(public or {})
        if report is not None:  # a claim is passed on only when what was released supports it
            from ..privacy.verify import verify_releases, verify_report
            from .registry import method

            verify_report(report, source="privacy.json")
            release = method(report.method).release
            verify_releases(report, theta, sigma, release=release, released=released,
                            noisy_counts=public.get("noisy_counts"), smoothing_std=config.smoothing_std)
        self.config, self.dim, self.report = config, dim, report
        self.theta, self.released, self.sigma, self.public = theta, released, sigma, public

    @property
    def n_projections(self) -> int:
        """Directions per recorded step."""
        return int(self.theta.shape[2])

    @classmethod
    def from_run_dir(cls, run_dir: str | Path) -> "FlowModel":
        from ..privacy.verify import read_verified_report

        run_dir = Path(run_dir)
        path = run_dir / "model.h5"
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: {_why_no_model(run_dir)}")
        return cls.from_file(path, report=read_verified_report(run_dir))

    @classmethod
    def from_file(cls, path: str | Path, *, report: PrivacyReport | None = None) -> "FlowModel":
        try:
            with h5py.File(path, "r") as f:
                arrays = {"config": FlowConfig(**json.loads(f.attrs["flow_config"])), "dim": json.loads(f.attrs["dim"]),
                          "theta": torch.from_numpy(f["theta"][:]), "released": torch.from_numpy(f["released"][:]),
                          "sigma": torch.from_numpy(f["sigma"][:]),
                          "public": {k: torch.from_numpy(v[:]) for k, v in f.get("release", {}).items()}}
        except (OSError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path} is not a readable swflow model file ({err}); regenerate the run") from err
        return cls(**arrays, report=report)

    def state_dict(self) -> dict:
        """Tensors and plain values only (loadable with torch.load(weights_only=True))."""
        return {"flow_config": asdict(self.config), "dim": self.dim, "theta": self.theta,
                "released": self.released, "sigma": self.sigma, "public": self.public}

    @classmethod
    def from_state_dict(cls, state: dict, report: PrivacyReport | None = None) -> "FlowModel":
        return cls(config=FlowConfig(**state["flow_config"]), dim=state["dim"], theta=state["theta"],
                   released=state["released"], sigma=state["sigma"], report=report, public=state.get("public"))

    def replay_label(self) -> str:
        """What a progress bar of this replay says: whose releases it replays, and that it spends nothing."""
        if self.report is None or not self.report.private:
            return "replaying a non-private run"
        eps = "inf" if self.report.epsilon is None else f"{self.report.epsilon:.3f}"
        return f"replaying the eps = {eps} run (no privacy spent)"

    def sample(self, n: int, *, seed: int = 0, device: str | None = None, progress: bool = False) -> Tensor:
        """(n, d) particles: μ0 (seeded) pushed through the recorded steps with the run's h, λ and smoothing."""
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        config = replace(self.config, n_particles=n, seed=seed, record_every=0, checkpoint_every=0,
                         device=device or self.config.device)
        flow = ParticleFlow(_RecordedSource(self.dim), ReplayedReleases(self.theta, self.released, self.sigma),
                            config, callbacks=[ProgressBar(self.replay_label())] if progress else [])
        return flow.run().particles

    def sample_chunks(self, n: int, *, seed: int = 0, chunk: int = CHUNK, device: str | None = None,
                      progress: bool = False):
        """``n`` particles as successive (≤ chunk, d) tensors, so memory stays flat in n (the step's work arrays
        are O(chunk · k)). The first chunk is ``sample(min(n, chunk), seed=seed)``; chunk i > 0 has its own seed
        derived from (seed, i). ``progress``: one bar over all n particles, with its ETA."""
        import numpy as np
        from tqdm.auto import tqdm

        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        several = n > chunk
        with tqdm(total=n, desc=self.replay_label(), unit="particle", unit_scale=True, dynamic_ncols=True,
                  disable=not (progress and several)) as bar:
            for i, start in enumerate(range(0, n, chunk)):
                chunk_seed = seed if i == 0 else int(np.random.SeedSequence([seed, i]).generate_state(1)[0])
                size = min(chunk, n - start)
                yield self.sample(size, seed=chunk_seed, device=device, progress=progress and not several)
                bar.update(size)

    def privacy_report(self) -> PrivacyReport:
        """The original run's report (unchanged by sampling) plus the post-processing note."""
        if self.report is None:
            raise FileNotFoundError("this model has no privacy report (privacy.json missing)")
        return self.report.with_notes(post_processing=POST_PROCESSING_NOTE)


def _why_no_model(run_dir: Path) -> str:
    """Why a run folder holds no model.h5, from its privacy.json (read for this message only), and what to do."""
    import json

    try:
        report = json.loads((run_dir / "privacy.json").read_text())
        run_config = report.get("run_config") or {}
    except (OSError, ValueError, AttributeError):
        report, run_config = {}, {}
    if isinstance(report, dict) and report.get("conditional"):
        return (f"a conditional run keeps one flow per class: draw class C with `swflow sample "
                f"{run_dir}/classes/class-C --n N --out DIR`")
    if isinstance(run_config, dict) and run_config.get("world_size"):
        return ("a torchrun run writes its samples, not its releases (its ranks' steps are not recorded): its "
                "samples.h5 is the output; for a sampler, run the method on one process")
    return ("only flow runs (swf, dpswflow-r, dpswflow, dpswflow-hist, ldp-flow) record their releases; a generator's "
            "samples come from its network, in the run folder's samples.h5")
