"""A table run's fitted particles as model.pt stores them, read back only where something vouches for them.

The particles are post-processing of the released tables, and load() makes them again from the release (a fit of
seconds to minutes). A file's stored particles save that fit, but a forger could store anything there, private
rows included, and no check of the released counts would see it. So they are read only where the owner's
signature covers model.pt, or where this machine's `swflow verify` refitted them from the release and found them
equal (swflow.io.verified remembers that model.pt by its SHA-256); everywhere else load() refits.
"""
from __future__ import annotations

import torch

__all__ = ["stored_particles", "same_particles"]


def stored_particles(stored, sizes: list[int], source: str) -> list[torch.Tensor]:
    """The particles a file stores, checked for shape and for being probabilities: one (N, sizes[j]) tensor a
    column, every row non-negative and summing to 1."""
    from ..privacy.verify import ClaimMismatch

    if not isinstance(stored, (list, tuple)) or len(stored) != len(sizes):
        raise ClaimMismatch(f"{source} stores no particles of this run's {len(sizes)} columns: refit them (load "
                            "without stored particles)")
    out = [torch.as_tensor(p) for p in stored]
    count = out[0].shape[0] if out and out[0].ndim == 2 else -1
    for column, (p, size) in enumerate(zip(out, sizes)):
        if p.ndim != 2 or tuple(p.shape) != (count, size) or not torch.isfinite(p).all() or bool((p < 0).any()) \
                or not torch.allclose(p.sum(dim=1), torch.ones(count, dtype=p.dtype), atol=1e-4):
            raise ClaimMismatch(f"{source}: its stored particles of column {column} are not {count} probability "
                                f"rows of {size} cells: the file was edited; fit again")
    return out


def same_particles(stored, refitted: list[torch.Tensor]) -> bool:
    """Whether a file's stored particles are, bit for bit, those the release gives again."""
    return stored is not None and len(stored) == len(refitted) and all(
        torch.equal(torch.as_tensor(a), b) for a, b in zip(stored, refitted))
