"""Checks before spending: will the particles fit in memory and the outputs on disk?

A run that releases private data and then fails for want of memory or disk has spent its budget for
nothing, so the commands check first, from the request's size alone, and print an estimate when a
request is large. The estimates are upper bounds of the dominant arrays (float32 particles, the
step's (k × n) work arrays, the outputs before compression).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["MAX_STEPS", "OutOfSpace", "check_device", "check_fits", "check_run", "ensure_free", "physical_memory"]

#: bytes per particle and direction of a flow step's work arrays (projections, grid cell, weights, drift)
_STEP_BYTES = 24
_LARGE = 2 << 30  # say so when a request needs more than 2 GiB
#: the longest run swflow starts: beyond it a flow is a typo, or days of computing
MAX_STEPS = 10_000_000
_MARGIN = 16 << 20  # what HDF5's metadata and a checkpoint's temporary copy may need beyond the data


class OutOfSpace(OSError):
    """A file of the run would not fit on its disk: stopped before writing, so every file stays readable."""


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX
        return None


def check_device(device: str) -> None:
    """Refuse a device torch cannot use, with what to do."""
    import torch

    try:
        kind = torch.device(device).type
    except RuntimeError:
        raise ValueError(f"device must be 'cpu' or 'cuda' (or 'cuda:N'), got {device!r}") from None
    if kind not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda' (or 'cuda:N'), got {device!r}")
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device (torch.cuda.is_available() is False); use "
                         "--device cpu, or install a CUDA build of torch on a machine with a GPU")


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:.1f} GiB" if n >= 2 ** 30 else f"{n / 2 ** 20:.0f} MiB"


def check_fits(*, n: int, dim: int, n_projections: int = 0, image_values: int = 0, frames: int = 0,
               out: str | Path | None = None, resident: int | None = None) -> None:
    """Refuse ``n`` particles (rows of ``dim``) when the step's arrays exceed the machine's memory, or the
    outputs (latents, ``image_values`` floats per decoded image, ``frames`` trajectory frames) its free disk.
    ``resident``: particles held in memory at once (default all ``n``; ``sample`` streams chunks)."""
    if n < 1:
        raise ValueError(f"the number of particles must be >= 1, got {n}")
    held = n if resident is None else min(n, resident)
    memory = 4 * held * (3 * dim) + _STEP_BYTES * held * n_projections
    total = physical_memory()
    if total is not None and memory > 0.8 * total:
        raise ValueError(f"{n} particles need about {_gib(memory)} of memory for a flow step, more than this machine "
                         f"has ({_gib(total)}); ask for fewer particles, or sample more later in chunks with "
                         "`swflow sample RUN --n N` (streamed, no privacy cost)")
    disk = 4 * n * (dim * (1 + frames) + image_values)
    if out is not None:
        parent = Path(out).resolve().parent
        while not parent.exists():
            parent = parent.parent
        free = shutil.disk_usage(parent).free
        if disk > free:
            raise ValueError(f"the outputs of {n} samples need up to {_gib(disk)} on disk and {parent} has "
                             f"{_gib(free)} free; free some space or ask for fewer samples")
    if max(memory, disk) > _LARGE:
        print(f"note: {n} particles: about {_gib(memory)} of memory and up to {_gib(disk)} of outputs")


def ensure_free(directory: str | Path, needed: int, *, what: str) -> None:
    """Refuse to write ``needed`` bytes of ``what`` into ``directory`` unless its disk has room for them plus a
    margin. Checked before every write of a run's files, so a full disk stops a run between writes: HDF5 files
    are never left half-written (a failed HDF5 write can crash the interpreter at exit), the last checkpoint
    stays, and ``--resume`` continues without spending anything twice."""
    free = shutil.disk_usage(directory).free
    if needed + _MARGIN > free:
        import errno

        raise OutOfSpace(errno.ENOSPC, f"not enough free disk for {what} ({(needed + _MARGIN) / 2 ** 20:.0f} MiB "
                         f"needed, {free / 2 ** 20:.0f} MiB free in {directory}): free some space and rerun the same "
                         "command with --resume; the run continues from its last checkpoint and spends nothing twice")


def check_run(*, settings, plan, dim: int, image_values: int, out: str | Path, footprint: tuple[int, int, int],
              flow: bool) -> None:
    """Refuse a run whose release, step arrays or files (samples, trajectory, model.h5, checkpoints) would not fit
    in this machine's memory or on ``out``'s disk, before any private row is read for a release; print an estimate
    when a request is large. ``settings``/``plan``: the run's Settings and RunPlan; ``footprint``: the release's
    bytes (in memory, in each checkpoint, in model.h5), as its strategy counts them; ``flow``: a flow (with a
    trajectory and model.h5), not a generator."""
    if plan.steps > MAX_STEPS:
        raise ValueError(f"steps = {plan.steps} is more than {MAX_STEPS:g}: the flows here settle within thousands of "
                         "steps; ask for fewer")
    n, m, k = settings.flow.n_particles, plan.dataset_size, plan.n_projections
    frames = 51
    release_memory, release_disk, model_disk = footprint
    memory = 4 * n * 3 * dim + _STEP_BYTES * n * k + release_memory
    total = physical_memory()
    if total is not None and memory > 0.8 * total:
        raise ValueError(f"this run needs about {_gib(memory)} of memory (particles, step arrays and the release of "
                         f"{m} rows), more than this machine has ({_gib(total)}): ask for fewer particles, directions "
                         "(--pool-size) or bins (--bins)")
    samples = n * (4 * dim + image_values)  # images as 8-bit pixels
    disk = samples + (4 * frames * n * dim + model_disk + 2 * (4 * n * dim + release_disk) if flow
                      else 0)
    parent = Path(out).resolve().parent
    while not parent.exists():
        parent = parent.parent
    free = shutil.disk_usage(parent).free
    if disk + _MARGIN > free:
        raise ValueError(f"this run's files (samples, trajectory, model.h5 and checkpoints) need up to {_gib(disk)} "
                         f"and {parent} has {_gib(free)} free; free some space, or ask for fewer particles or steps")
    if max(memory, disk) > _LARGE:
        print(f"note: this run needs about {_gib(memory)} of memory and up to {_gib(disk)} of files")
