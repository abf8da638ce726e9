"""Reusing memory across training steps: glibc's malloc settings and per-owner buffers.

A training step allocates and frees the same large arrays (im2row matrices, activations, gradients) every step.
By default glibc hands blocks above its adaptive mmap threshold back to the kernel when they are freed, so the
next step page-faults every page in again, and the kernel zeroes each one. Measured at ResNet-20's first stage
(batch 64, 2 threads): building the im2row matrix took 27 ms into fresh memory and 3.4 ms into reused memory.

``keep_freed_memory`` raises the mmap threshold to glibc's maximum (32 MiB on 64-bit) and keeps freed memory
in the heap; arrays larger than that are kept by their owner in a ``Buffers`` and reused while their shape
stays the same. Peak memory does not grow: these arrays are alive at the peak of a step anyway.
"""

from __future__ import annotations

import ctypes
import ctypes.util

import numpy as np

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # from glibc's malloc.h
MMAP_THRESHOLD_MAX = 32 << 20  # glibc refuses larger values on 64-bit
TRIM_THRESHOLD = 1 << 30

_tuned: bool | None = None


def keep_freed_memory() -> bool:
    """Apply the malloc settings once per process; True where they took effect (glibc), False elsewhere."""
    global _tuned
    if _tuned is None:
        name = ctypes.util.find_library("c")
        libc = ctypes.CDLL(name) if name else None
        mallopt = getattr(libc, "mallopt", None)
        # musl and macOS have no mallopt: their allocators are left as they are (a speed setting only).
        _tuned = bool(mallopt) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(
            mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _tuned


class Buffers:
    """Named arrays kept between calls; ``get`` returns the kept one while its shape and dtype still fit."""

    def __init__(self):
        self._arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, shape, dtype, zero: bool = False) -> np.ndarray:
        """The kept array, or a new one (zero-filled if ``zero``; callers rely on unwritten cells staying 0)."""
        a = self._arrays.get(name)
        if a is None or a.shape != tuple(shape) or a.dtype != dtype:
            a = self._arrays[name] = (np.zeros if zero else np.empty)(shape, dtype)
        return a

    def clear(self) -> None:
        self._arrays.clear()


# Scratch space for arrays used and dropped within one layer call (never returned to the caller).
scratch = Buffers()
