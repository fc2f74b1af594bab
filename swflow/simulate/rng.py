"""Torch's global random generator belongs to the user: library code that must draw from it (a network's
weight initialisation, dropout) runs inside :func:`keeps_global_rng`, which puts the caller's state back."""
from __future__ import annotations

import contextlib
import functools

import torch

__all__ = ["keeps_global_rng", "seeded"]


@contextlib.contextmanager
def seeded(seed: int):
    """A block that draws from torch's global generators seeded with ``seed`` (a network's weight
    initialisation), after which the caller's generator states are back as they were."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        yield


def keeps_global_rng(fn):
    """Decorate ``fn``, which may seed and draw from torch's global generators (CPU, and CUDA when in use): the
    caller's generator states are restored when it returns or raises, so calling it never moves the user's
    random stream, and its own draws do not depend on what the user drew before."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with torch.random.fork_rng():
            return fn(*args, **kwargs)

    return wrapper
