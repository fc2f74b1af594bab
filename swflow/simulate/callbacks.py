"""Observers of a simulator's run (:class:`~swflow.simulate.simulator.Simulator`: a flow or a generator): the loop
computes, these write.

A callback implements any of the hooks below; the loop calls them in list order (generators call
restore, on_start, on_step and on_end; on_release is a flow's):

    restore(flow) -> bool          before anything runs: load saved state, True when resumed
    on_start(flow, resumed)        after the strategy's setup (and its one-off release, if any)
    on_release(flow, theta, released, sigma)   each step's public directions (d, k) and release (k, m)
    on_step(flow, diagnostic)      after each step; ``diagnostic`` is the step's RMS projected
                                   displacement on the steps the loop measured it, else None
    on_flush(flow)                 buffered output must reach disk (a checkpoint is being written)
    on_failure(flow, error)        a step raised ``error`` (the loop re-raises it after the hooks)
    on_end(flow)                   the last step is done

Nothing here ever sees a private row: only particles, public directions and released values.
"""
from __future__ import annotations

import io
import os
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ..io.hdf5 import ReleaseRecorder, TrajectoryWriter, load_tensors

__all__ = ["FlowCallback", "Checkpointer", "TrajectoryRecorder", "ReleaseLog", "ProgressBar",
           "run_files"]


class FlowCallback:
    """Base class: every hook does nothing."""

    def restore(self, flow) -> bool:
        return False

    def on_start(self, flow, *, resumed: bool) -> None:
        pass

    def on_release(self, flow, theta, released, sigma: float) -> None:
        pass

    def on_step(self, flow, diagnostic: float | None) -> None:
        pass

    def on_flush(self, flow) -> None:
        pass

    def on_failure(self, flow, error: Exception) -> None:
        pass

    def on_end(self, flow) -> None:
        pass


class Checkpointer(FlowCallback):
    """Saves the simulator's ``state_dict()`` to ``path`` every ``every`` steps (default: its
    ``config.checkpoint_every``; 0: never) atomically, and restores it when the file exists. The file holds
    the privacy-noise state: delete it after the run.

    A flow that diverges is rewound: its checkpoint becomes the state right after its release (step 0, marked
    ``rewound``), so a rerun with ``--resume`` and a smaller step size flows again from the same release. What the
    steps read alone (:data:`REWOUND_FREE`) may then change; the release and its noise are the ones already
    drawn, so no privacy is spent again."""

    def __init__(self, path: str | Path, *, every: int | None = None):
        self.path, self._every = Path(path), every
        self._at_release: bytes | None = None  # the state at step 0, serialized (a copy the run cannot change)

    def every(self, flow) -> int:
        return flow.config.checkpoint_every if self._every is None else self._every

    def restore(self, flow) -> bool:
        if not self.path.exists():
            return False
        flow.load_state_dict(load_tensors(self.path, what=f"{flow.kind} checkpoint"))
        return True

    def on_start(self, flow, *, resumed) -> None:
        # a one-off release (pool, histogram, local) happens before the first step: keep it at once, so a
        # resumed run never draws it again (noise that no seed reproduces would be a second release)
        if not resumed and self.every(flow):
            self.save(flow)
        if self.every(flow) and flow.step == 0 and getattr(flow, "rewindable", False):
            buffer = io.BytesIO()
            torch.save(flow.state_dict(), buffer)
            self._at_release = buffer.getvalue()

    def on_failure(self, flow, error: Exception) -> None:
        from .simulator import FlowDiverged

        if isinstance(error, FlowDiverged) and self._at_release is not None:
            state = torch.load(io.BytesIO(self._at_release), weights_only=True)
            state["rewound"] = True
            tmp = self.path.with_suffix(".tmp")
            torch.save(state, tmp)
            os.replace(tmp, self.path)
            error.rewound = True  # what the run's caller tells its user: the release is kept at step 0

    def on_step(self, flow, diagnostic) -> None:
        every = self.every(flow)
        if every and flow.step % every == 0:
            self.save(flow)

    def save(self, flow) -> None:
        from ..io.resources import ensure_free

        for callback in flow.callbacks:  # output files must not run ahead of or behind the checkpoint
            callback.on_flush(flow)
        state = flow.state_dict()
        ensure_free(self.path.parent, _nbytes(state), what="a checkpoint")
        tmp = self.path.with_suffix(".tmp")
        try:
            torch.save(state, tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, self.path)  # an interruption never leaves half a file


def _nbytes(state) -> int:
    """Bytes of the tensors in a (nested) state dict: what saving it writes, give or take a few kB."""
    if isinstance(state, torch.Tensor):
        return state.numel() * state.element_size()
    if isinstance(state, dict):
        return sum(_nbytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(_nbytes(v) for v in state)
    return 64


class TrajectoryRecorder(FlowCallback):
    """Particle snapshots every ``config.record_every`` steps (and at step 0) in an HDF5 file."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._writer: TrajectoryWriter | None = None

    def on_start(self, flow, *, resumed) -> None:
        if not flow.config.record_every:
            return
        self._writer = TrajectoryWriter(self.path, n=flow.config.n_particles, d=flow.dim,
                                        config=flow.describe(), resume_step=flow.step if resumed else None)
        if not resumed:
            self._writer.append(0, flow.particles.cpu().numpy())

    def on_step(self, flow, diagnostic) -> None:
        if self._writer is not None and flow.step % flow.config.record_every == 0:
            self._writer.append(flow.step, flow.particles.cpu().numpy())


class ReleaseLog(FlowCallback):
    """Each step's release (directions, σ, a ``sketch``-level quantile sketch of the noisy values) in
    ``model.h5``, which :class:`swflow.methods.model.FlowModel` replays to sample new particles."""

    def __init__(self, path: str | Path, *, sketch: int | None = 64):
        self.path, self.sketch = Path(path), sketch
        self._recorder: ReleaseRecorder | None = None

    def on_start(self, flow, *, resumed) -> None:
        self._recorder = ReleaseRecorder(self.path, sketch=self.sketch, resume_step=flow.step if resumed else None,
                                         attrs={"flow_config": asdict(flow.config), "dim": flow.dim},
                                         public=flow.target.public_release())

    def on_release(self, flow, theta, released, sigma) -> None:
        self._recorder.add(flow.step, theta, released, sigma)

    def on_flush(self, flow) -> None:
        if self._recorder is not None:
            self._recorder.flush()

    on_end = on_flush


class ProgressBar(FlowCallback):
    """A tqdm bar (with its ETA) labelled with the run's budget, or with ``label``, showing the last measured
    displacement."""

    def __init__(self, label: str | None = None):
        self._bar, self.label = None, label

    def on_start(self, flow, *, resumed) -> None:
        self._bar = tqdm(total=flow.config.steps, initial=flow.step, desc=self.label or f"flow {flow.budget_label()}",
                         unit="step", dynamic_ncols=True)

    def on_step(self, flow, diagnostic) -> None:
        if diagnostic is not None:
            self._bar.set_postfix(sw=f"{diagnostic:.4f}", refresh=False)
        self._bar.update(1)

    def on_end(self, flow) -> None:
        self._bar.close()


def run_files(out: Path, *, sketch: int | None = 64) -> list[FlowCallback]:
    """The callbacks of a run directory: model.h5, trajectory.h5 and checkpoint.pt in ``out``."""
    return [ReleaseLog(out / "model.h5", sketch=sketch), TrajectoryRecorder(out / "trajectory.h5"),
            Checkpointer(out / "checkpoint.pt")]
