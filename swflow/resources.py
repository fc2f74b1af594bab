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

__all__ = ["check_device", "check_fits", "physical_memory"]

#: bytes per particle and direction of a flow step's work arrays (projections, grid cell, weights, drift)
_STEP_BYTES = 24
_LARGE = 2 << 30  # say so when a request needs more than 2 GiB


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
    return f"{n / 2 ** 30:.1f} GiB"


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
