"""Sliding windows over NHWC input, shared by convolutions and pooling: output sizes and padding, window views,
and adding per-window gradients back into an input gradient."""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view


def pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def same_padding(size: int, k: int, s: int) -> tuple[int, int, int]:
    """TensorFlow's 'same': (out, pad_before, pad_after)."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2, total - total // 2


def out_and_pads(h: int, w: int, k, s, padding: str):
    kh, kw = k
    sh, sw = s
    if padding == "same":
        ho, pt, pb = same_padding(h, kh, sh)
        wo, pl, pr = same_padding(w, kw, sw)
    elif padding == "valid":
        ho, wo, pt, pb, pl, pr = (h - kh) // sh + 1, (w - kw) // sw + 1, 0, 0, 0, 0
    else:
        raise ValueError(f"padding must be 'same' or 'valid', got {padding!r}")
    if ho < 1 or wo < 1:
        raise ValueError(f"input {h}x{w} is smaller than the {kh}x{kw} window ('{padding}' padding)")
    return ho, wo, (pt, pb, pl, pr)


def windows(xp: np.ndarray, k, s, ho: int, wo: int) -> np.ndarray:
    """View (N, Ho, Wo, kh, kw, C) of the sliding windows of padded NHWC input."""
    v = sliding_window_view(xp, k, axis=(1, 2))[:, : (ho - 1) * s[0] + 1 : s[0], : (wo - 1) * s[1] + 1 : s[1]]
    return v.transpose(0, 1, 2, 4, 5, 3)


def _tap_range(i: int, s: int, pad: int, size: int, out: int) -> tuple[slice, slice] | None:
    """Output positions r whose tap i reads an input cell (0 <= r*s + i - pad < size): (output, input) slices."""
    lo = max(0, -(-(pad - i) // s))
    hi = min(out - 1, (size - 1 + pad - i) // s)
    if lo > hi:
        return None
    first = lo * s + i - pad
    return slice(lo, hi + 1), slice(first, first + (hi - lo) * s + 1, s)


def add_window_grads(dx: np.ndarray, tap, k, s, pads, ho: int, wo: int) -> np.ndarray:
    """Add each tap's window gradient ``tap(i, j)`` (N, Ho, Wo, ...) into the (unpadded) input gradient ``dx``.

    Cells of the padding are skipped, so ``dx`` is the input's own shape and stays contiguous. (The compiled
    ``kernels.col2im`` does the same for the im2row layout of ungrouped convolutions.)
    """
    pt, _, pl, _ = pads
    for i in range(k[0]):
        rows = _tap_range(i, s[0], pt, dx.shape[1], ho)
        for j in range(k[1]):
            cols = _tap_range(j, s[1], pl, dx.shape[2], wo)
            if rows is None or cols is None:
                continue
            dx[:, rows[1], cols[1]] += tap(i, j)[:, rows[0], cols[0]]
    return dx
