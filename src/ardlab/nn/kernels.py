"""Compiled (numba) kernels for the memory-bound steps NumPy can only do in many small pieces.

Measured on ResNet-20 (batch 64, 2 threads, NumPy only): of a 470 ms training step, building im2row rows took
95 ms, adding window gradients back (col2im) 67 ms and BatchNormalization 100 ms, while the GEMMs took 177 ms.
Their NumPy forms copy C-float pieces (16-64 channels) one strided slice at a time, and BatchNormalization
makes five or six passes over its data. Here each is one or two passes over contiguous memory, with the
window's padding handled in place (no padded copy). Compiled code is cached next to this file, or under
NUMBA_CACHE_DIR where the package folder is read-only (the images set it).
"""

from __future__ import annotations

import numba
import numpy as np

# Serial: run in parallel (numba prange, 2 threads) they were no faster in a training step, because their
# threads and OpenBLAS's (which spin for a while after each GEMM) took the same cores from each other.
_jit = numba.njit(cache=True, nogil=True)


@_jit
def im2row(x, kh, kw, sh, sw, pt, pl, ho, wo, out):
    """out[(b*ho + oh)*wo + ow, (i*kw + j)*C + c] = x[b, oh*sh + i - pt, ow*sw + j - pl, c], 0 in the padding."""
    n, h, w, c = x.shape
    for b in range(n):
        for oh in range(ho):
            for ow in range(wo):
                r = (b * ho + oh) * wo + ow
                for i in range(kh):
                    ih = oh * sh + i - pt
                    for j in range(kw):
                        iw = ow * sw + j - pl
                        base = (i * kw + j) * c
                        if 0 <= ih < h and 0 <= iw < w:
                            for ch in range(c):
                                out[r, base + ch] = x[b, ih, iw, ch]
                        else:
                            for ch in range(c):
                                out[r, base + ch] = 0


@_jit
def col2im(dcols, kh, kw, sh, sw, pt, pl, ho, wo, dx):
    """dx[b, ih, iw, c] = sum over the windows that read (ih, iw) of their rows of dcols (im2row's layout).

    A gather per input cell: each cell is written once, so no zero-fill pass and no scatter.
    """
    n, h, w, c = dx.shape
    for b in range(n):
        for ih in range(h):
            for iw in range(w):
                for ch in range(c):
                    dx[b, ih, iw, ch] = 0
                for i in range(kh):
                    t = ih + pt - i
                    if t < 0 or t % sh != 0 or t // sh >= ho:
                        continue
                    oh = t // sh
                    for j in range(kw):
                        u = iw + pl - j
                        if u < 0 or u % sw != 0 or u // sw >= wo:
                            continue
                        r = (b * ho + oh) * wo + u // sw
                        base = (i * kw + j) * c
                        for ch in range(c):
                            dx[b, ih, iw, ch] += dcols[r, base + ch]


@_jit
def batch_moments(X):
    """Per-channel mean and (biased) variance of X (rows, C): two passes, accumulated in float64."""
    m, c = X.shape
    mean = np.zeros(c)
    for r in range(m):
        for ch in range(c):
            mean[ch] += X[r, ch]
    mean /= m
    var = np.zeros(c)
    for r in range(m):
        for ch in range(c):
            var[ch] += (X[r, ch] - mean[ch]) ** 2
    return mean, var / m


@_jit
def bn_forward(X, mean, scale, shift, out):
    """out = (X - mean) * scale + shift, per channel (scale = gamma / std, shift = beta)."""
    m, c = X.shape
    for r in range(m):
        for ch in range(c):
            out[r, ch] = (X[r, ch] - mean[ch]) * scale[ch] + shift[ch]


@_jit
def _bn_grad_sums(X, dY, mean, inv_std):
    """Per channel, in float64: sum(dY) and sum(dY * xhat), xhat = (X - mean) * inv_std recomputed (not stored)."""
    m, c = X.shape
    sums = np.zeros((2, c))
    for r in range(m):
        for ch in range(c):
            d = dY[r, ch]
            sums[0, ch] += d
            sums[1, ch] += d * (X[r, ch] - mean[ch]) * inv_std[ch]
    return sums


@_jit
def _bn_dx(X, dY, mean, inv_std, a, b, scale, dx):
    """dx = scale * (dY - a - xhat * b), per channel."""
    m, c = X.shape
    for r in range(m):
        for ch in range(c):
            xhat = (X[r, ch] - mean[ch]) * inv_std[ch]
            dx[r, ch] = scale[ch] * (dY[r, ch] - a[ch] - xhat * b[ch])


def bn_backward(X, dY, mean, inv_std, gamma, batch_stats: bool):
    """(dx, dgamma, dbeta) of BatchNormalization from its input X (rows, C), not a stored normalised copy."""
    dbeta, dgamma = _bn_grad_sums(X, dY, mean, inv_std)
    m = X.shape[0]
    dx = np.empty_like(dY)
    if batch_stats:  # dx = gamma * inv_std / m * (m dy - sum(dy) - xhat sum(dy xhat))
        _bn_dx(X, dY, mean, inv_std, dbeta / m, dgamma / m, gamma * inv_std, dx)
    else:  # running statistics do not depend on x
        zero = np.zeros_like(dbeta)
        _bn_dx(X, dY, mean, inv_std, zero, zero, gamma * inv_std, dx)
    return dx, dgamma, dbeta


@_jit
def maxpool_forward(x, kh, kw, sh, sw, pt, pl, ho, wo, y, arg):
    """y = max over each window's cells inside the image; arg = the tap (i*kw + j) of its first maximum in
    row-major window order (as TensorFlow routes the gradient)."""
    n, h, w, c = x.shape
    for b in range(n):
        for oh in range(ho):
            for ow in range(wo):
                for ch in range(c):
                    y[b, oh, ow, ch] = -np.inf
                    arg[b, oh, ow, ch] = -1
                for i in range(kh):
                    ih = oh * sh + i - pt
                    if ih < 0 or ih >= h:
                        continue
                    for j in range(kw):
                        iw = ow * sw + j - pl
                        if iw < 0 or iw >= w:
                            continue
                        for ch in range(c):
                            v = x[b, ih, iw, ch]
                            if v > y[b, oh, ow, ch] or arg[b, oh, ow, ch] < 0:
                                y[b, oh, ow, ch] = v
                                arg[b, oh, ow, ch] = i * kw + j


@_jit
def maxpool_backward(dy, arg, kh, kw, sh, sw, pt, pl, dx):
    """dx = each window's gradient added at its first maximum (overlapping windows add up)."""
    n, ho, wo, c = dy.shape
    for b in range(n):
        dx[b] = 0
        for oh in range(ho):
            for ow in range(wo):
                for ch in range(c):
                    t = arg[b, oh, ow, ch]
                    dx[b, oh * sh + t // kw - pt, ow * sw + t % kw - pl, ch] += dy[b, oh, ow, ch]
