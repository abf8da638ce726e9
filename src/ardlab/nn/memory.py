"""Reusing memory across training steps: glibc's malloc settings and per-owner buffers.

A training step allocates and frees the same large arrays (im2row matrices, activations, gradients) every step.
By default glibc hands blocks above its adaptive mmap threshold back to the kernel when they are freed, so the
next step page-faults every page in again, and the kernel zeroes each one. Measured at ResNet-20's first stage
(batch 64, 2 threads): building the im2row matrix took 27 ms into fresh memory and 3.4 ms into reused memory.

``keep_freed_memory`` raises the mmap threshold to glibc's maximum (32 MiB on 64-bit) and keeps freed memory
in the heap; arrays larger than that are kept by their owner in a ``KeptArrays`` and reused while their shape
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


class KeptArrays:
    """Named arrays kept between calls; ``get`` returns the kept one while its shape and dtype still fit."""

    def __init__(self):
        self._arrays: dict[str, np.ndarray] = {}

    def get(self, name: str, shape, dtype, fill=None) -> np.ndarray:
        """The kept array, or a new one (filled with ``fill`` if given: callers may rely on cells they never
        write keeping it)."""
        a = self._arrays.get(name)
        if a is None or a.shape != tuple(shape) or a.dtype != dtype:
            a = self._arrays[name] = np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)
        return a

    def prefix(self, name: str, size: int, dtype, fill=None) -> np.ndarray:
        """The first `size` elements of a kept flat array that only grows, so that callers needing different
        sizes in turn (every layer of a model) share one array instead of replacing it at each call."""
        a = self._arrays.get(name)
        if a is None or a.size < size or a.dtype != dtype:
            a = self._arrays[name] = np.empty(size, dtype) if fill is None else np.full(size, fill, dtype)
        return a[:size]


# Scratch space for arrays used and dropped within one layer call (never returned to the caller).
scratch = KeptArrays()


def column_sums(X: np.ndarray) -> np.ndarray:
    """Sums over the rows of a 2-D array as one BLAS matrix-vector product with a kept ones vector
    (measured: 0.25 ms for 65536 x 16 float32 against 1.24 ms for NumPy's axis-0 sum)."""
    return scratch.prefix("ones", X.shape[0], X.dtype, fill=1) @ X
