"""How many torch threads a flow's steps should run on, for whoever owns the process.

A flow step of k directions on n particles is a few dozen short tensor passes. With two threads each pass is a
parallel region, and on a shared machine every region waits for a thread the scheduler may not run for a while:
beside two other torch jobs a 10^4-particle step slows 4-200x on two threads and 2.5x on one
(experiments/bench_step.py --load 2). Small steps are therefore best run on one thread; large ones gain from all.

Every flow step runs under this rule, from Python as from the ``swflow`` command: ParticleFlow.step_once and the
table fit set the count for the step (or the fit) and restore the process's own after it, so decoding, FID and
the user's code between steps keep every core. The count is process-wide while a step runs (torch has no other):
a second Python thread doing torch work beside a small step runs on one thread for that long.
``fitting.fit(threads=)`` sets a count for a whole run (a generator's training, a caller's choice).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

__all__ = ["ONE_THREAD_BELOW", "step_threads", "torch_threads"]

ONE_THREAD_BELOW = 1_000_000
"""k·n (directions × particles) below which one thread runs a step at least as fast as two on a quiet 2-core
machine with idle threads sleeping, and keeps its fair share on a busy one (measured in docs/results.md)."""


def step_threads(n_particles: int, n_projections: int) -> int | None:
    """1 for a step of ``n_projections`` directions on ``n_particles`` particles below :data:`ONE_THREAD_BELOW`,
    else None (keep the process's setting)."""
    return 1 if n_particles * n_projections < ONE_THREAD_BELOW else None


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block on ``threads`` torch intra-op threads and restore the previous count after it; None
    leaves the count alone. Process-wide while the block runs: for the owner of the process."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
