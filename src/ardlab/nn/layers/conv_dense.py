"""Ungrouped convolution (groups = 1, the common case) as im2row + one BLAS GEMM per chunk of images.

The im2row rows are built by a compiled kernel (``kernels.im2row``), chunk by chunk into a cache-sized buffer
the layer keeps (see ``memory``), and rebuilt in backward instead of storing the whole matrix; the input
gradient is one GEMM per chunk gathered back by ``kernels.col2im``. A 1x1 stride-1 convolution uses its input
as the im2row matrix.
"""

from __future__ import annotations

import numpy as np

from ardlab.nn import kernels, memory
from ardlab.nn.layers.conv import Conv2D

# im2row chunks: at most CHUNK_BYTES (to stay in cache) but at least CHUNK_MIN_ROWS rows (to keep GEMMs efficient).
CHUNK_BYTES = 8 << 20
CHUNK_MIN_ROWS = 2048


class DenseConv2D(Conv2D, variant="dense"):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.groups != 1:
            raise ValueError(f"{self.name}: DenseConv2D has groups = 1, got {self.groups} (use Conv2D)")
        self.pointwise = self.k == (1, 1) and self.s == (1, 1)  # im2row rows = the input

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
        flat = self.kept.get("cols", (b * per_image * kk * c,), x.dtype)
        for b0 in range(0, n, b):
            b1 = min(n, b0 + b)
            rows = flat[: (b1 - b0) * per_image * kk * c].reshape(-1, kk * c)
            kernels.im2row(x[b0:b1], *self.k, *self.s, self.pads[0], self.pads[2], ho, wo, rows)
            yield b0, b1, rows

    def forward(self, x, training=False):
        n, ho, wo, c = self._start(x)
        kk, f = self.k[0] * self.k[1], self.filters
        self.x = x  # backward rebuilds the im2row rows chunk by chunk from it
        y = np.empty((n, ho, wo, f), dtype=x.dtype)
        Wm = self.params["kernel"].reshape(kk * c, f)
        for b0, b1, rows in self._chunks(x, ho, wo):
            np.matmul(rows, Wm, out=y[b0:b1].reshape(-1, f))
        if self.use_bias:
            y += self.params["bias"]
        return y

    def backward(self, dy):
        n, ho, wo, f = dy.shape
        kk, c = self.k[0] * self.k[1], self.cin
        dY = dy.reshape(-1, f)
        W = self.params["kernel"]
        self._bias_grad(dY)
        dx = np.empty(self.x_shape, dtype=dy.dtype) if self.need_input_grad else None
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
        return dx
