"""Grouped and depthwise convolution (groups > 1): NumPy window views of the padded input, one batched GEMM
over groups forward and backward, and the input gradient added back window by window (``windows``)."""

from __future__ import annotations

import numpy as np

from ardlab.nn.layers.conv import Conv2D
from ardlab.nn.layers.windows import add_window_grads, windows


class GroupedConv2D(Conv2D, variant="grouped"):
    def _pad(self, x):
        """The input inside a kept zero-bordered buffer: only the interior is written."""
        pt, pb, pl, pr = self.pads
        if not any(self.pads):
            return x
        n, h, w, c = x.shape
        xp = self.kept.get("padded", (n, h + pt + pb, w + pl + pr, c), x.dtype, fill=0)
        xp[:, pt : pt + h, pl : pl + w] = x
        return xp

    def forward(self, x, training=False):
        n, ho, wo, c = self._start(x)
        g, kk, f = self.groups, self.k[0] * self.k[1], self.filters
        cg, xp = c // g, self._pad(x)
        # (g, M, kh*kw*cg) and (g, kh*kw*cg, F/g): one batched GEMM over groups.
        cols = windows(xp, self.k, self.s, ho, wo)  # (N, Ho, Wo, kh, kw, C) view
        grouped = cols.reshape(n, ho, wo, self.k[0], self.k[1], g, cg).transpose(5, 0, 1, 2, 3, 4, 6)
        buf = self.kept.get("grouped", grouped.shape, xp.dtype)
        np.copyto(buf, grouped)
        self.cols = buf.reshape(g, n * ho * wo, kk * cg)
        Wg = self.params["kernel"].reshape(kk * cg, g, f // g).transpose(1, 0, 2)
        y = np.matmul(self.cols, Wg).transpose(1, 0, 2).reshape(n, ho, wo, f)
        if self.use_bias:
            y += self.params["bias"]
        return y

    def backward(self, dy):
        n, ho, wo, f = dy.shape
        g, kk, c = self.groups, self.k[0] * self.k[1], self.cin
        kh, kw = self.k
        dY = dy.reshape(-1, f)
        W = self.params["kernel"]
        self._bias_grad(dY)
        cg, fg = c // g, f // g
        dYg = np.ascontiguousarray(dY.reshape(-1, g, fg).transpose(1, 0, 2))  # (g, M, fg)
        dWg = np.matmul(self.cols.transpose(0, 2, 1), dYg)  # (g, kk*cg, fg)
        self.grads["kernel"][...] = dWg.transpose(1, 0, 2).reshape(W.shape)
        self.cols = None
        if not self.need_input_grad:
            return None
        dx = np.zeros(self.x_shape, dtype=dy.dtype)
        Wg = W.reshape(kk * cg, g, fg).transpose(1, 0, 2)
        dc = np.matmul(dYg, Wg.transpose(0, 2, 1)).reshape(g, n, ho, wo, kh, kw, cg)
        add_window_grads(dx.reshape(*dx.shape[:3], g, cg), lambda i, j: dc[:, :, :, :, i, j].transpose(1, 2, 3, 0, 4),
                         self.k, self.s, self.pads, ho, wo)
        return dx
