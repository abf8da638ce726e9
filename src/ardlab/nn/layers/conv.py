"""Conv2D (NHWC, stride, same/valid padding, groups incl. depthwise) as im2row + one BLAS GEMM per group.

The im2row matrix is built into a buffer the layer keeps between steps (see ``memory``). The input gradient is
one batched GEMM giving a contiguous (N, Ho, Wo, C) block per kernel tap, added into the padded gradient tap by
tap: rows of Wo*C contiguous floats instead of C-float pieces of a 6-D window array.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ardlab.nn import initializers, memory
from ardlab.nn.layers.base import Layer


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


def col2im(dxp: np.ndarray, tap, k, s, ho: int, wo: int) -> np.ndarray:
    """Add each tap's window gradient ``tap(i, j)`` (N, Ho, Wo, ...) into the padded input gradient ``dxp``."""
    for i in range(k[0]):
        for j in range(k[1]):
            dxp[:, i : i + (ho - 1) * s[0] + 1 : s[0], j : j + (wo - 1) * s[1] + 1 : s[1]] += tap(i, j)
    return dxp


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
        pt, pb, pl, pr = self.pads
        if not any(self.pads):
            return x
        return np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))

    def forward(self, x, training=False):
        n, h, w, c = x.shape
        ho, wo, _ = out_and_pads(h, w, self.k, self.s, self.padding)
        xp = self._pad(x)
        self.xp_shape, self.x_shape, self.ho, self.wo = xp.shape, x.shape, ho, wo
        g, kk = self.groups, self.k[0] * self.k[1]
        cols = windows(xp, self.k, self.s, ho, wo)  # (N, Ho, Wo, kh, kw, C) view
        m = n * ho * wo
        W = self.params["kernel"]
        if g == 1:
            buf = self.buffers.get("cols", cols.shape, xp.dtype)
            np.copyto(buf, cols)
            self.cols = buf.reshape(m, kk * c)
            y = self.cols @ W.reshape(kk * c, self.filters)
        else:
            cg = c // g
            # (g, M, kh*kw*cg) and (g, kh*kw*cg, F/g): one batched GEMM over groups.
            grouped = cols.reshape(n, ho, wo, self.k[0], self.k[1], g, cg).transpose(5, 0, 1, 2, 3, 4, 6)
            buf = self.buffers.get("cols", grouped.shape, xp.dtype)
            np.copyto(buf, grouped)
            self.cols = buf.reshape(g, m, kk * cg)
            Wg = W.reshape(kk * cg, g, self.filters // g).transpose(1, 0, 2)
            y = np.matmul(self.cols, Wg).transpose(1, 0, 2).reshape(m, self.filters)
        if self.use_bias:
            y += self.params["bias"]
        return y.reshape(n, ho, wo, self.filters)

    def backward(self, dy):
        n, ho, wo, f = dy.shape
        g, kk, c = self.groups, self.k[0] * self.k[1], self.cin
        dY = dy.reshape(-1, f)
        W = self.params["kernel"]
        if self.use_bias:
            self.grads["bias"][...] = dY.sum(axis=0)
        kh, kw = self.k
        if g == 1:
            self.grads["kernel"][...] = (self.cols.T @ dY).reshape(W.shape)
            self.cols = None
            if not self.need_input_grad:  # the model's first layer: skip the dx GEMM and scatter
                return None
            dxp = np.zeros(self.xp_shape, dtype=dy.dtype)
            # (kk, M, C): one contiguous block per tap.
            dc = np.matmul(dY, W.reshape(kk, c, f).transpose(0, 2, 1),
                           out=memory.scratch.get("conv_dcols", (kk, n * ho * wo, c), dY.dtype))
            col2im(dxp, lambda i, j: dc[i * kw + j].reshape(n, ho, wo, c), self.k, self.s, ho, wo)
        else:
            cg, fg = c // g, f // g
            dYg = np.ascontiguousarray(dY.reshape(-1, g, fg).transpose(1, 0, 2))  # (g, M, fg)
            dWg = np.matmul(self.cols.transpose(0, 2, 1), dYg)  # (g, kk*cg, fg)
            self.grads["kernel"][...] = dWg.transpose(1, 0, 2).reshape(W.shape)
            self.cols = None
            if not self.need_input_grad:
                return None
            Wg = W.reshape(kk * cg, g, fg).transpose(1, 0, 2)
            dc = np.matmul(dYg, Wg.transpose(0, 2, 1)).reshape(g, n, ho, wo, kh, kw, cg)
            dxp = np.zeros(self.xp_shape, dtype=dy.dtype)
            dxp_g = dxp.reshape(*dxp.shape[:3], g, cg)
            col2im(dxp_g, lambda i, j: dc[:, :, :, :, i, j].transpose(1, 2, 3, 0, 4), self.k, self.s, ho, wo)
        pt, pb, pl, pr = self.pads
        h, w = self.x_shape[1], self.x_shape[2]
        return dxp[:, pt : pt + h, pl : pl + w, :]
