"""Pooling (NHWC): MaxPool2D (compiled kernels), AveragePool2D (vectorised over windows), GlobalAveragePool."""

from __future__ import annotations

import numpy as np

from ardlab.nn import kernels
from ardlab.nn.layers.base import Layer
from ardlab.nn.layers.windows import add_window_grads, out_and_pads, pair, windows


class _Pool2D(Layer):
    def __init__(self, pool_size=2, strides=None, padding: str = "valid", name=None):
        super().__init__(name)
        self.k = pair(pool_size)
        self.s = pair(strides) if strides is not None else self.k
        if padding not in ("same", "valid"):
            raise ValueError(f"{self.name}: padding must be 'same' or 'valid', got {padding!r}")
        self.padding = padding

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{self.name}: pooling needs (H, W, C) input, got {input_shape}")
        h, w, c = input_shape
        ho, wo, self.pads = out_and_pads(h, w, self.k, self.s, self.padding)
        return (ho, wo, c)

    def _windows(self, x, fill):
        """(N, Ho, Wo, kh, kw, C) windows of x padded with `fill`; records the shapes backward uses."""
        n, h, w, c = x.shape
        ho, wo, pads = out_and_pads(h, w, self.k, self.s, self.padding)
        pt, pb, pl, pr = pads
        xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill) if any(pads) else x
        self.x_shape, self.pads = x.shape, pads
        return windows(xp, self.k, self.s, ho, wo)


class MaxPool2D(_Pool2D):
    """Max over the window's cells inside the image; the gradient goes to the first maximum in row-major
    window order (as TensorFlow). Compiled kernels (``kernels``): one pass forward, which keeps the position
    of each maximum (a small integer per output), and one backward."""

    def forward(self, x, training=False):
        n, h, w, c = x.shape
        ho, wo, self.pads = out_and_pads(h, w, self.k, self.s, self.padding)
        self.x_shape = x.shape
        y = np.empty((n, ho, wo, c), dtype=x.dtype)
        self.arg = np.empty(y.shape, dtype=np.int8 if self.k[0] * self.k[1] <= 127 else np.int32)
        kernels.maxpool_forward(x, *self.k, *self.s, self.pads[0], self.pads[2], ho, wo, y, self.arg)
        return y

    def backward(self, dy):
        dx = np.empty(self.x_shape, dtype=dy.dtype)
        kernels.maxpool_backward(dy, self.arg, *self.k, *self.s, self.pads[0], self.pads[2], dx)
        self.arg = None
        return dx

    def keras_equivalent(self, k, in_shape):
        return k.MaxPooling2D(self.k, self.s, padding=self.padding, name=self.name)


class AveragePool2D(_Pool2D):
    """Average over the window; with 'same' padding, padded cells are not counted (as TensorFlow)."""

    def forward(self, x, training=False):
        ones = np.ones((1,) + x.shape[1:3] + (1,), dtype=x.dtype)
        self.count = self._windows(ones, 0).sum(axis=(3, 4))  # (1, Ho, Wo, 1): cells inside the image
        win = self._windows(x, 0)
        return win.sum(axis=(3, 4)) / self.count

    def backward(self, dy):
        g = dy / self.count  # every cell of a window gets the same share
        _, ho, wo, _ = dy.shape
        return add_window_grads(np.zeros(self.x_shape, dtype=dy.dtype), lambda i, j: g, self.k, self.s, self.pads,
                                ho, wo)

    def keras_equivalent(self, k, in_shape):
        return k.AveragePooling2D(self.k, self.s, padding=self.padding, name=self.name)


class GlobalAveragePool(Layer):
    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{self.name}: needs (H, W, C) input, got {input_shape}")
        return (input_shape[2],)

    def forward(self, x, training=False):
        self.x_shape = x.shape
        return x.mean(axis=(1, 2))

    def backward(self, dy):
        n, h, w, c = self.x_shape
        return np.broadcast_to((dy / (h * w))[:, None, None, :], self.x_shape).copy()

    def keras_equivalent(self, k, in_shape):
        return k.GlobalAveragePooling2D(name=self.name)
