"""The one loop of every method: resume, a one-off set-up, steps, hooks.

Flows (:class:`swflow.simulate.flow.ParticleFlow`) and generators
(:class:`swflow.methods.generators.TrainedGenerator`) are simulators: each implements
:meth:`Simulator.step_once` and its state, and the loop, checkpoints
(:class:`swflow.simulate.callbacks.Checkpointer`), resume and progress
(:class:`swflow.simulate.callbacks.ProgressBar`) are the same for both. Callbacks observe the run; the loop does no I/O.
"""
from __future__ import annotations

from dataclasses import asdict
from typing import Any, Sequence

__all__ = ["FlowDiverged", "Simulator", "target_state"]


class FlowDiverged(ValueError):
    """The particles became non-finite or left every sensible bound (the run's checkpoint, if any, is rewound to
    its release: :class:`~swflow.simulate.callbacks.Checkpointer`)."""


class Simulator:
    """Base of flows and generators.

    A subclass has ``config`` (with ``steps``), ``step`` (steps done) and ``callbacks``, and implements
    :meth:`step_once` (one step, advancing ``step``; it may return a scalar diagnostic), :meth:`state_dict`
    and :meth:`load_state_dict` (everything a resumed run needs to continue bit-identically, including the
    privacy ledger and noise state) and :meth:`budget_label`; :meth:`setup` runs once before the first step
    of a fresh or resumed run (a one-off release happens there)."""

    kind = "simulator"  # what its checkpoints are called in messages
    step: int = 0
    callbacks: Sequence = ()

    def setup(self) -> None:
        """Before the first step of this process's run (after any restore)."""

    def step_once(self) -> Any:
        raise NotImplementedError

    def state_dict(self) -> dict:
        raise NotImplementedError

    def load_state_dict(self, state: dict) -> None:
        raise NotImplementedError

    def budget_label(self) -> str:
        raise NotImplementedError

    def check_config(self, saved: dict, *, free: tuple[str, ...] = ()) -> None:
        """Refuse a checkpoint whose ``config`` (its ``asdict``) is not this run's, naming what differs; the
        settings in ``free`` may differ (a checkpoint rewound to its release: what only the steps read)."""
        now = asdict(self.config)
        differ = [f"{k} is {now.get(k)} now but {saved.get(k)} in the checkpoint"
                  for k in sorted(set(now) | set(saved)) if now.get(k) != saved.get(k) and k not in free]
        if differ:
            raise ValueError(f"cannot resume: the {self.kind} configuration differs: " + "; ".join(differ))

    def simulate(self) -> list[tuple[int, float]]:
        """Run (or continue, when a callback restores a checkpoint) to ``config.steps``; (step, diagnostic)
        on about 100 steps (a host sync there only)."""
        steps = self.config.steps
        resumed = any([callback.restore(self) for callback in self.callbacks])
        self.setup()
        for callback in self.callbacks:
            callback.on_start(self, resumed=resumed)
        diagnostics: list[tuple[int, float]] = []
        every = max(1, steps // 100)
        try:
            while self.step < steps:
                measured = self.step_once()
                value = None
                if measured is not None and (self.step % every == 0 or self.step == steps):
                    value = float(measured)
                    diagnostics.append((self.step, value))
                for callback in self.callbacks:
                    callback.on_step(self, value)
        except Exception as error:
            for callback in self.callbacks:
                callback.on_failure(self, error)
            raise
        for callback in self.callbacks:
            callback.on_end(self)
        return diagnostics


def target_state(checkpoint: dict) -> dict:
    """A checkpoint's private-target state (its ledger and noise); checkpoints written before the simulators
    shared one spelling kept them under two keys."""
    if "target" in checkpoint:
        return checkpoint["target"]
    return {"ledger": checkpoint["ledger"], "noise": checkpoint["privacy_noise"]}
