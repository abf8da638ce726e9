"""Pooling (NHWC): MaxPool2D, AveragePool2D (vectorised over windows), GlobalAveragePool."""

from __future__ import annotations

import numpy as np

from ardlab.nn.layers.base import Layer
from ardlab.nn.layers.conv import _pair, col2im, out_and_pads, windows


class _Pool2D(Layer):
    def __init__(self, pool_size=2, strides=None, padding: str = "valid", name=None):
        super().__init__(name)
        self.k = _pair(pool_size)
        self.s = _pair(strides) if strides is not None else self.k
        if padding not in ("same", "valid"):
            raise ValueError(f"{self.name}: padding must be 'same' or 'valid', got {padding!r}")
        self.padding = padding

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{self.name}: pooling needs (H, W, C) input, got {input_shape}")
        h, w, c = input_shape
        ho, wo, self.pads = out_and_pads(h, w, self.k, self.s, self.padding)
        return (ho, wo, c)

    def _pad(self, x, fill):
        """The input padded with `fill` as the padding mode needs; records the shapes backward uses."""
        n, h, w, c = x.shape
        ho, wo, pads = out_and_pads(h, w, self.k, self.s, self.padding)
        pt, pb, pl, pr = pads
        xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=fill) if any(pads) else x
        self.x_shape, self.xp_shape, self.ho, self.wo, self.pads = x.shape, xp.shape, ho, wo, pads
        return xp

    def _windows(self, x, fill):
        return windows(self._pad(x, fill), self.k, self.s, self.ho, self.wo)  # (N, Ho, Wo, kh, kw, C)

    def _crop(self, dxp):
        pt, _, pl, _ = self.pads
        return dxp[:, pt : pt + self.x_shape[1], pl : pl + self.x_shape[2], :]


class MaxPool2D(_Pool2D):
    """Max over the window; the gradient goes to the first maximum in row-major window order (as TensorFlow).

    One pass per window tap over strided views (no window copy): for 2x2 pooling, four passes over an array
    a quarter of the input's size.
    """

    def _taps(self, xp):
        (kh, kw), (sh, sw) = self.k, self.s
        for i in range(kh):
            for j in range(kw):
                yield i * kw + j, xp[:, i : i + (self.ho - 1) * sh + 1 : sh, j : j + (self.wo - 1) * sw + 1 : sw, :]

    def forward(self, x, training=False):
        self.xp = self._pad(x, -np.inf)
        taps = self._taps(self.xp)
        _, first = next(taps)
        self.y = first.copy()
        for _, v in taps:
            np.maximum(self.y, v, out=self.y)
        return self.y

    def backward(self, dy):
        overlap = self.s[0] < self.k[0] or self.s[1] < self.k[1]
        # Windows that tile the padded input exactly write every cell once: no zero-fill needed.
        tiled = self.s == self.k and self.xp_shape[1:3] == (self.ho * self.k[0], self.wo * self.k[1])
        dxp = (np.empty if tiled else np.zeros)(self.xp_shape, dtype=dy.dtype)
        free = np.ones(self.y.shape, dtype=bool)  # windows whose maximum has not been routed yet
        for (_, xv), (_, dv) in zip(self._taps(self.xp), self._taps(dxp)):
            hit = xv == self.y
            hit &= free
            free ^= hit
            if overlap:
                dv += np.where(hit, dy, 0)
            else:
                np.multiply(dy, hit, out=dv)
        self.xp = self.y = None
        return self._crop(dxp)


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
        return col2im(np.zeros(self.x_shape, dtype=dy.dtype), lambda i, j: g, self.k, self.s, self.pads, ho, wo)


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
