"""Conv2D (NHWC, stride, same/valid padding, groups incl. depthwise) as im2row + one BLAS GEMM per group.

Ungrouped convolutions (the common case) build the im2row rows with a compiled kernel (``kernels.im2row``),
chunk by chunk into a cache-sized buffer the layer keeps (see ``memory``), and rebuild them in backward instead
of storing the whole matrix; the input gradient is one GEMM per chunk gathered back by ``kernels.col2im``.
Grouped and depthwise convolutions use NumPy window views, one batched GEMM over groups, and ``col2im`` below.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ardlab.nn import initializers, kernels, memory
from ardlab.nn.layers.base import Layer


# im2row chunks: at most CHUNK_BYTES (to stay in cache) but at least CHUNK_MIN_ROWS rows (to keep GEMMs efficient).
CHUNK_BYTES = 8 << 20
CHUNK_MIN_ROWS = 2048


def _pair(v) -> tuple[int, int]:
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


def col2im(dx: np.ndarray, tap, k, s, pads, ho: int, wo: int) -> np.ndarray:
    """Add each tap's window gradient ``tap(i, j)`` (N, Ho, Wo, ...) into the (unpadded) input gradient ``dx``.

    Cells of the padding are skipped, so ``dx`` is the input's own shape and stays contiguous.
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


class Conv2D(Layer):
    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "same", groups: int = 1,
                 use_bias: bool = True, kernel_initializer="he_uniform", name=None):
        super().__init__(name)
        if filters < 1 or groups < 1 or filters % groups:
            raise ValueError(f"{self.name}: filters ({filters}) must be a positive multiple of groups ({groups})")
        if padding not in ("same", "valid"):
            raise ValueError(f"{self.name}: padding must be 'same' or 'valid', got {padding!r}")
        self.filters, self.k, self.s = filters, _pair(kernel_size), _pair(strides)
        self.padding, self.groups, self.use_bias = padding, groups, use_bias
        self.kernel_initializer = kernel_initializer
        self.buffers = memory.Buffers()  # the im2row matrix, reused while the input shape stays the same
        self.pointwise = self.k == (1, 1) and self.s == (1, 1)  # im2row rows = the input

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{self.name}: Conv2D needs (H, W, C) input, got {input_shape}")
        h, w, c = input_shape
        if c % self.groups:
            raise ValueError(f"{self.name}: input channels ({c}) must be a multiple of groups ({self.groups})")
        self.cin = c
        ho, wo, self.pads = out_and_pads(h, w, self.k, self.s, self.padding)
        fan_in = self.k[0] * self.k[1] * c // self.groups
        fan_out = self.k[0] * self.k[1] * self.filters // self.groups
        shape = (self.k[0], self.k[1], c // self.groups, self.filters)
        self.add_param("kernel", initializers.get(self.kernel_initializer)(shape, fan_in, fan_out))
        if self.use_bias:
            self.add_param("bias", np.zeros(self.filters))
        return (ho, wo, self.filters)

    def _pad(self, x):
        """The input inside a kept zero-bordered buffer (grouped convolutions): only the interior is written."""
        pt, pb, pl, pr = self.pads
        if not any(self.pads):
            return x
        n, h, w, c = x.shape
        xp = self.buffers.get("padded", (n, h + pt + pb, w + pl + pr, c), x.dtype, fill=0)
        xp[:, pt : pt + h, pl : pl + w] = x
        return xp

    def _chunks(self, x, ho: int, wo: int):
        """(first image, last image + 1, im2row rows) per chunk of images: (images * Ho * Wo, kh*kw*C).

        A 1x1 stride-1 convolution's im2row matrix is its input; others are built chunk by chunk (compiled
        kernel, padding written as zeros) into one kept buffer small enough to stay in cache, so the GEMM that
        follows reads it from there.
        """
        n, c, kk = x.shape[0], x.shape[3], self.k[0] * self.k[1]
        if self.pointwise:
            yield 0, n, x.reshape(-1, c)
            return
        row_bytes = kk * c * x.itemsize
        per_image = ho * wo
        b = min(n, max(CHUNK_BYTES // (per_image * row_bytes), -(-CHUNK_MIN_ROWS // per_image), 1))
        flat = self.buffers.get("cols", (b * per_image * kk * c,), x.dtype)
        for b0 in range(0, n, b):
            b1 = min(n, b0 + b)
            rows = flat[: (b1 - b0) * per_image * kk * c].reshape(-1, kk * c)
            kernels.im2row(x[b0:b1], *self.k, *self.s, self.pads[0], self.pads[2], ho, wo, rows)
            yield b0, b1, rows

    def forward(self, x, training=False):
        n, h, w, c = x.shape
        ho, wo, _ = out_and_pads(h, w, self.k, self.s, self.padding)
        self.x_shape, self.ho, self.wo = x.shape, ho, wo
        g, kk, f = self.groups, self.k[0] * self.k[1], self.filters
        W = self.params["kernel"]
        if g == 1:
            self.x = x  # backward rebuilds the im2row rows chunk by chunk from it
            y = np.empty((n, ho, wo, f), dtype=x.dtype)
            Wm = W.reshape(kk * c, f)
            for b0, b1, rows in self._chunks(x, ho, wo):
                np.matmul(rows, Wm, out=y[b0:b1].reshape(-1, f))
        else:
            cg, xp = c // g, self._pad(x)
            # (g, M, kh*kw*cg) and (g, kh*kw*cg, F/g): one batched GEMM over groups.
            cols = windows(xp, self.k, self.s, ho, wo)  # (N, Ho, Wo, kh, kw, C) view
            grouped = cols.reshape(n, ho, wo, self.k[0], self.k[1], g, cg).transpose(5, 0, 1, 2, 3, 4, 6)
            buf = self.buffers.get("grouped", grouped.shape, xp.dtype)
            np.copyto(buf, grouped)
            self.cols = buf.reshape(g, n * ho * wo, kk * cg)
            Wg = W.reshape(kk * cg, g, f // g).transpose(1, 0, 2)
            y = np.matmul(self.cols, Wg).transpose(1, 0, 2).reshape(n, ho, wo, f)
        if self.use_bias:
            y += self.params["bias"]
        return y

    def backward(self, dy):
        n, ho, wo, f = dy.shape
        g, kk, c = self.groups, self.k[0] * self.k[1], self.cin
        dY = dy.reshape(-1, f)
        W = self.params["kernel"]
        if self.use_bias:
            self.grads["bias"][...] = memory.column_sums(dY)
        kh, kw = self.k
        dx = (np.empty if g == 1 else np.zeros)(self.x_shape, dtype=dy.dtype) if self.need_input_grad else None
        if g == 1:
            dW = np.zeros((kk * c, f), dtype=dy.dtype)
            Wt = W.reshape(kk * c, f).T
            per_image = ho * wo
            for b0, b1, rows in self._chunks(self.x, ho, wo):
                dYb = dY[b0 * per_image : b1 * per_image]
                dW += rows.T @ dYb
                if dx is None:  # the model's first layer: no input gradient needed
                    continue
                if self.pointwise:  # the rows are the input itself: the gradient GEMM writes dx directly
                    np.matmul(dYb, Wt, out=dx[b0:b1].reshape(-1, c))
                    continue
                flat = memory.scratch.prefix("conv_dcols", rows.size, dy.dtype)
                dcols = np.matmul(dYb, Wt, out=flat.reshape(rows.shape))
                kernels.col2im(dcols, *self.k, *self.s, self.pads[0], self.pads[2], ho, wo, dx[b0:b1])
            self.grads["kernel"][...] = dW.reshape(W.shape)
            self.x = None
        else:
            cg, fg = c // g, f // g
            dYg = np.ascontiguousarray(dY.reshape(-1, g, fg).transpose(1, 0, 2))  # (g, M, fg)
            dWg = np.matmul(self.cols.transpose(0, 2, 1), dYg)  # (g, kk*cg, fg)
            self.grads["kernel"][...] = dWg.transpose(1, 0, 2).reshape(W.shape)
            self.cols = None
            if dx is None:
                return None
            Wg = W.reshape(kk * cg, g, fg).transpose(1, 0, 2)
            dc = np.matmul(dYg, Wg.transpose(0, 2, 1)).reshape(g, n, ho, wo, kh, kw, cg)
            col2im(dx.reshape(*dx.shape[:3], g, cg), lambda i, j: dc[:, :, :, :, i, j].transpose(1, 2, 3, 0, 4),
                   self.k, self.s, self.pads, ho, wo)
        return dx
