"""The flow on several processes with torch.distributed (gloo on CPU, NCCL on GPU).

Each rank holds a contiguous shard of the particles (the flow's communicator is a :class:`ProcessGroup`)
and a contiguous shard of the private records. Every rank draws the same public randomness (directions,
particle noise) from the shared seed, so the ranks agree on the directions without talking.

Private release: every rank draws the same batch indices from the shared privacy seed; each
projects the batch members it holds and adds the release noise to those columns only, then one
all-reduce (sum) assembles the released matrix. A record's projection and noise are computed on
the rank that holds it; the ledger is identical on every rank and rank 0 writes the report.

Particle side: the default exact smoothing needs only all-reduces (grid range, binned particle
mass); the sampled estimator (``smoothing='sampled'``) needs global ranks, in one of two modes:
* ``exact``: each rank sorts its own noisy projections and all-gathers the sorted shards; a
  particle's global rank is its rank in its shard plus, per other shard, the count of smaller
  values (searchsorted). The result equals the single-process flow up to float rounding.
* ``sketch``: ranks all-gather only K quantiles per direction of their shard (and their sizes);
  a particle's global CDF level is the size-weighted mean of the shards' piecewise-linear CDFs
  through those quantiles. Each shard CDF is within 1/K of its empirical CDF, so every level is
  within ``level_error_bound(K, n_r) = 1/K + 1/min n_r`` of the exact mode's level (tested).

Checkpoints: one file, written by rank 0, holds every rank's state (:class:`GatheredCheckpointer`), so
a run folder has one writer; a resumed run hands each rank its own state back.

Run under ``torchrun --nproc-per-node N``; ``init_process_group`` is the caller's. A sharded run is an
ordinary one with this communicator: ``fit(settings, rows[lo:hi], plan=plan,
communicator=ProcessGroup(n_particles))``, with ``plan`` resolved on all the rows (see
experiments/bench_distributed.py and ``torchrun swflow generate``).
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import Tensor

from ..kernels.drift import DriftResult, pull_back
from ..kernels.sliced import cdf, quantile, rank_levels, sort_rows
from .callbacks import FlowCallback

__all__ = ["ProcessGroup", "GatheredCheckpointer", "shard_range", "exact_levels", "sketch_levels",
           "level_error_bound"]


class GatheredCheckpointer(FlowCallback):
    """Checkpoints of a sharded flow (:class:`ProcessGroup`) in ONE file that rank 0 writes: every rank's
    ``state_dict()`` gathered to rank 0 every ``config.checkpoint_every`` steps (atomically), and
    scattered back, one state per rank, when a run resumes. Ranks other than 0 pass ``path=None``:
    they never touch the run folder. The file holds the privacy-noise state: delete it after the run."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)

    def restore(self, flow) -> bool:
        from ..io.hdf5 import load_tensors

        states, problem = None, None
        if flow.communicator.rank == 0 and self.path is not None and self.path.exists():
            try:
                saved = load_tensors(self.path, what="distributed flow checkpoint")
                states = saved["ranks"]
                if len(states) != flow.communicator.world:
                    problem = (f"cannot resume: {self.path} was written by {len(states)} processes, and this run has "
                               f"{flow.communicator.world}; rerun with --nproc-per-node {len(states)}")
            except (ValueError, KeyError, TypeError) as err:
                problem = f"cannot resume from {self.path}: {err}"
        news = [states is not None, problem]
        dist.broadcast_object_list(news, src=0)
        if news[1] is not None:
            raise ValueError(news[1])
        if not news[0]:
            return False
        mine = [None]
        dist.scatter_object_list(mine, states if flow.communicator.rank == 0 else None, src=0)
        flow.load_state_dict(mine[0])
        return True

    def on_step(self, flow, diagnostic) -> None:
        every = flow.config.checkpoint_every
        if every and flow.step % every == 0:
            self.save(flow)

    def save(self, flow) -> None:
        for callback in flow.callbacks:  # output files must not run ahead of or behind the checkpoint
            callback.on_flush(flow)
        states = [None] * flow.communicator.world if flow.communicator.rank == 0 else None
        dist.gather_object(flow.state_dict(), states, dst=0)
        if flow.communicator.rank == 0 and self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            torch.save({"world_size": flow.communicator.world, "ranks": states}, tmp)
            os.replace(tmp, self.path)  # an interruption never leaves half a file


def shard_range(n: int, rank: int, world: int) -> tuple[int, int]:
    """[lo, hi) of rank's contiguous share of n items (sizes differ by at most one)."""
    base, extra = divmod(n, world)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (rank < extra)


def exact_levels(values: Tensor, shards: list[Tensor], rank: int, n: int) -> Tensor:
    """Levels (rank + ½)/n in the union of the sorted ``shards`` (each (k, n_q)) of this rank's
    sorted ``values`` (k, n_r) = shards[rank]; ties go to the lower rank, like a stable sort."""
    own = torch.arange(values.shape[1], device=values.device, dtype=values.dtype).expand_as(values)
    before = sum(torch.searchsorted(s, values, right=q < rank).to(values.dtype)
                 for q, s in enumerate(shards) if q != rank)
    return (own + before + 0.5) / n


def sketch_levels(values: Tensor, sketches: list[Tensor], sizes: list[int]) -> Tensor:
    """Size-weighted mean of the shards' piecewise-linear CDFs through their quantile sketches."""
    n = sum(sizes)
    mass = sum(size * cdf(s, values) for size, s in zip(sizes, sketches))
    return (mass / n).clamp(0.5 / n, 1 - 0.5 / n)


def level_error_bound(sketch: int, smallest_shard: int) -> float:
    """Largest gap between a sketch-mode CDF level and the exact one: each shard's CDF through K
    quantiles is within 1/K of its piecewise-linear empirical CDF, which is within 1/n_r of the
    rank-based level; the size-weighted mean keeps the larger of those bounds."""
    return 1.0 / sketch + 1.0 / smallest_shard


class ProcessGroup:
    """The communicator of a flow whose particles are sharded over the ranks of the default process group
    (the interface of :class:`swflow.simulate.flow.OneProcess`): rank r holds particles [lo, hi) of the n, and the
    particle ranks that 004's one-draw drift needs are global, exact (an all-gather of the sorted shards)
    or from per-rank quantile sketches (``mode='sketch'``, ``sketch`` levels)."""

    sharded = True  # the builders get this rank's contiguous shard of the private rows (shard_range)

    def __init__(self, n_particles: int, *, mode: str = "exact", sketch: int = 256):
        if mode not in ("exact", "sketch"):
            raise ValueError(f"mode must be 'exact' or 'sketch', got {mode!r}")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.n, self.mode, self.sketch = n_particles, mode, sketch
        self.lo, self.hi = shard_range(n_particles, self.rank, self.world)

    def shard(self, n: int) -> tuple[int, int]:
        """This rank's rows [lo, hi) of ``n`` private rows."""
        return shard_range(n, self.rank, self.world)

    def shared_privacy_seed(self, seed: int | None) -> tuple[int, bool]:
        """The privacy seed of every rank (they must draw the same batches) and whether anyone knows it: a
        typed ``seed`` lets whoever knows it reproduce the noise, so without one rank 0 draws a seed from
        the OS and broadcasts it, and nobody sees it."""
        if seed is not None:
            return seed, True
        shared = [int.from_bytes(os.urandom(8), "little") >> 1 if self.rank == 0 else None]
        dist.broadcast_object_list(shared, src=0)
        return shared[0], False

    def keep(self, full: Tensor, dim: int) -> Tensor:
        return full.narrow(dim, self.lo, self.hi - self.lo).clone()  # its own memory, not a view of all n

    def sum(self, t: Tensor) -> Tensor:
        t = t.clone()
        dist.all_reduce(t)
        return t

    def max(self, t: Tensor) -> Tensor:
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t

    def _gather_sorted(self, values: Tensor) -> list[Tensor]:
        """Every rank's (k, n_r) sorted shard (exact) or (k, K) quantile sketch (sketch)."""
        sizes = [0] * self.world
        dist.all_gather_object(sizes, values.shape[1])
        width = max(sizes)
        padded = torch.nn.functional.pad(values, (0, width - values.shape[1]))
        out = [torch.empty_like(padded) for _ in range(self.world)]
        dist.all_gather(out, padded)
        return [o[:, :s].contiguous() for o, s in zip(out, sizes)]

    def _levels(self, values: Tensor) -> Tensor:
        """Global CDF levels (k, n_r) of this rank's sorted noisy projections ``values``."""
        if self.mode == "exact":
            return exact_levels(values, self._gather_sorted(values), self.rank, self.n)
        sketches = self._gather_sorted(quantile(values, rank_levels(self.sketch, device=values.device,
                                                                    dtype=values.dtype)))
        sizes = [0] * self.world
        dist.all_gather_object(sizes, values.shape[1])
        return sketch_levels(values, sketches, sizes)

    def sampled_drift(self, noisy_proj: Tensor, released: Tensor, theta: Tensor) -> DriftResult:
        values, order = sort_rows(noisy_proj)
        displacement_sorted = quantile(released, self._levels(values)) - values
        displacement = torch.empty_like(displacement_sorted).scatter_(1, order, displacement_sorted)
        return pull_back(displacement, theta, self)

    def gather(self, particles: Tensor) -> Tensor:
        return torch.cat(self._gather_sorted(particles.T.contiguous()), dim=1).T.contiguous()
