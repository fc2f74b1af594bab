"""Keep the flow's per-step buffers in the heap (glibc only).

A flow step allocates and frees a few (k × n) buffers of about a megabyte. Above glibc's mmap
threshold every one of them is a fresh mmap whose pages the kernel zeroes on first touch, and that
page faulting costs more than the step's arithmetic (measured: 2.3 ms of a 3 ms step at n = 10 000,
k = 32 on the 2-core CPU). Raising the threshold to its maximum (32 MiB on 64-bit) and the trim
threshold with it lets freed buffers be reused. Process-wide, harmless for correctness; set
SWFLOW_KEEP_MALLOC=1 to leave the allocator alone.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

__all__ = ["keep_step_buffers"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_LARGEST_MMAP_THRESHOLD = 32 * 1024 * 1024
_done = False


def keep_step_buffers() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; True when it took effect."""
    global _done
    if _done or not sys.platform.startswith("linux") or os.environ.get("SWFLOW_KEEP_MALLOC"):
        return _done
    _done = True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _LARGEST_MMAP_THRESHOLD)
                    and libc.mallopt(_M_TRIM_THRESHOLD, 4 * _LARGEST_MMAP_THRESHOLD))
    except (OSError, AttributeError):  # not glibc (musl, ...): nothing to tune
        return False
