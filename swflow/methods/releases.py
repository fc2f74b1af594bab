"""How a method touches the private rows: one small strategy per kind of release.

Each strategy owns the rules that follow from its release: the batch rule, the release plan the
accountant reads, the default step size, the histogram's shape, what model.h5 keeps of each release,
the memory and disk the release needs, and what a read-back check of the released arrays expects.
:class:`~swflow.methods.registry.MethodSpec` holds one instance; nothing outside this module and the registry
compares release names, so a new kind of release is one new class here (see docs/architecture.md).

Kinds: per-step (a batch's noisy projections, or a noisy gradient, each step), pool (every row on a pool
of directions, once), histogram (the noisy K x B counts of every row's projections, once), local (each
record released once with noise, before anything else) and none (the non-private reference).
Torch-free: ``swflow --help`` and the privacy calculator import it.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Release", "PerStep", "Pool", "Histogram", "Local", "NoRelease", "RELEASES"]


@dataclass(frozen=True)
class Release:
    """The base: releases of projected rows, planned per step."""

    name: str
    description: str
    #: fresh directions are released each step (the read-back check expects one release per step)
    per_step: bool = False
    #: the release is a sum of per-row counts: it can stream rows from disk, take a part of a larger data
    #: set (one class of private labels) and share its budget with a DP-SGD decoder adaptation
    of_counts: bool = False
    #: each record is released on its own before anything else (local DP)
    local: bool = False
    #: the release carries noise (False: the non-private reference)
    private: bool = True

    def batch(self, batch_size: int | None, dataset_size: int) -> int | None:
        """Rows per release, None for the whole data set (a batch that covers every row is a full batch)."""
        if batch_size is None or batch_size >= dataset_size:
            return None
        return batch_size

    def step_size(self, *, dataset_size: int, privacy) -> float:
        """The step size h when the run does not give one."""
        return 1.0

    def histogram_shape(self, *, dataset_size: int, privacy, n_directions: int | None, bins: int | None):
        """(K, B) of a histogram release; (n_directions, None) for the others."""
        return n_directions, None

    def release_plan(self, *, steps: int, dataset_size: int, dim: int, n_projections: int,
                     batch_size: int | None = None, pool_size: int | None = None, count_noise: str = "gaussian"):
        """The :class:`~swflow.privacy.ReleasePlan` the accountant reads: ``steps`` releases of a batch."""
        from ..privacy import ReleasePlan

        return ReleasePlan(releases=steps, dataset_size=dataset_size, sample_size=self.batch(batch_size, dataset_size),
                           n_projections=n_projections, dim=dim)

    def resolve(self, *, steps: int, dataset_size: int, dim: int, n_projections: int, privacy,
                batch_size: int | None = None, pool_size: int | None = None, bins: int | None = None):
        """(ReleasePlan, bins): a run's release worked out once, from public quantities and the budget."""
        pool_size, bins = self.histogram_shape(dataset_size=dataset_size, privacy=privacy, n_directions=pool_size,
                                               bins=bins)
        return self.release_plan(steps=steps, dataset_size=dataset_size, dim=dim, n_projections=n_projections,
                                 batch_size=batch_size, pool_size=pool_size, count_noise=privacy.count_noise), bins

    def sketch(self, sketch: int | None) -> int | None:
        """Quantile levels model.h5 keeps per released direction."""
        return sketch

    def footprint(self, plan, *, sketch: int, streamed_chunk: int | None, flow: bool) -> tuple[int, int, int]:
        """Bytes: (memory the release needs, its copy in each checkpoint, model.h5) of the resolved
        :class:`~swflow.methods.plan.RunPlan` ``plan``."""
        k = plan.n_projections
        return 8 * k * plan.rows_per_step, 0, (4 * plan.steps * k * (plan.dim + sketch) if flow else 0)


@dataclass(frozen=True)
class PerStep(Release):
    per_step: bool = True


@dataclass(frozen=True)
class NoRelease(PerStep):
    private: bool = False


@dataclass(frozen=True)
class Pool(Release):
    def batch(self, batch_size, dataset_size):
        return None  # a pool is released whole

    def release_plan(self, *, steps, dataset_size, dim, n_projections, batch_size=None, pool_size=None,
                     count_noise="gaussian"):
        from ..privacy import ReleasePlan

        return ReleasePlan(releases=1, dataset_size=dataset_size, sample_size=None,
                           n_projections=pool_size or n_projections, dim=dim)

    def footprint(self, plan, *, sketch, streamed_chunk, flow):
        directions, dim, m = plan.release.n_projections, plan.dim, plan.dataset_size
        return 8 * directions * (m + dim), 4 * directions * (dim + m), 4 * directions * (dim + sketch)


@dataclass(frozen=True)
class Histogram(Release):
    of_counts: bool = True

    def batch(self, batch_size, dataset_size):
        return None  # every row is counted once

    def step_size(self, *, dataset_size, privacy):
        from ..privacy.histogram import histogram_step_size

        return histogram_step_size(dataset_size=dataset_size, privacy=privacy)

    def histogram_shape(self, *, dataset_size, privacy, n_directions, bins):
        from ..privacy.histogram import histogram_shape

        return histogram_shape(dataset_size=dataset_size, privacy=privacy, n_directions=n_directions, bins=bins)

    def release_plan(self, *, steps, dataset_size, dim, n_projections, batch_size=None, pool_size=None,
                     count_noise="gaussian"):
        """``pool_size`` is the number of directions K (resolved by :meth:`histogram_shape`)."""
        from ..privacy import ReleasePlan

        if pool_size is None:
            raise ValueError("a histogram plan needs its number of directions (pool_size)")
        return ReleasePlan(releases=1, dataset_size=dataset_size, sample_size=None, n_projections=pool_size,
                           dim=dim, noise=count_noise)

    def sketch(self, sketch):
        return None  # its quantile table is already a sketch of TABLE_LEVELS levels

    def footprint(self, plan, *, sketch, streamed_chunk, flow):
        from ..privacy.histogram import COUNT_BLOCK, TABLE_LEVELS

        directions, bins, dim, m = plan.release.n_projections, plan.bins, plan.dim, plan.dataset_size
        rows = min(m, streamed_chunk) if streamed_chunk else m  # on disk: a chunk at a time
        release = 4 * directions * (dim + TABLE_LEVELS) + 8 * directions * bins
        # the rows (or a chunk), the counts' work arrays of one block of rows, the counts, CDFs and quantile table
        memory = 4 * rows * dim + 8 * directions * (2 * min(rows, COUNT_BLOCK) + 4 * bins + TABLE_LEVELS)
        return memory, release, release


@dataclass(frozen=True)
class Local(Release):
    local: bool = True

    def release_plan(self, **_):
        raise ValueError("a local method releases each record once: see privacy.calibrate_local")

    def footprint(self, plan, *, sketch, streamed_chunk, flow):
        rows = 8 * plan.dataset_size * plan.dim
        return rows, rows, 4 * plan.steps * plan.n_projections * (plan.dim + sketch)


RELEASES: dict[str, Release] = {r.name: r for r in (
    PerStep("per-step", "one accounted release of a batch's noisy projections (or noisy gradient) per step"),
    Pool("pool", "one central release of all rows on a pool of directions; later steps are free"),
    Histogram("histogram", "one central release of the noisy K x B count matrix of all rows' projections on K "
              "public directions; later steps are free"),
    Local("local", "each record released once as y + N(0, s^2 I); everything after is post-processing"),
    NoRelease("none", "no privacy (the non-private reference)"),
)}
