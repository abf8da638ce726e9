"""Shape and regularisation layers: Flatten, Dropout; merges: Add (residual), Concatenate (channels)."""

from __future__ import annotations

import numpy as np

from ardlab.nn.layers.base import Layer


class Flatten(Layer):
    def build(self, input_shape):
        return (int(np.prod(input_shape)),)

    def forward(self, x, training=False):
        self.x_shape = x.shape
        return x.reshape(x.shape[0], -1)

    def backward(self, dy):
        return dy.reshape(self.x_shape)

    def keras_equivalent(self, k, in_shape):
        return k.Flatten(name=self.name)


class Dropout(Layer):
    """Inverted dropout; its random stream is seeded per layer so runs repeat exactly."""

    def __init__(self, rate: float, seed: int = 0, name=None):
        super().__init__(name)
        if not 0 <= rate < 1:
            raise ValueError(f"{self.name}: dropout rate must be in [0, 1), got {rate}")
        self.rate, self.rng = rate, np.random.default_rng(seed)

    def forward(self, x, training=False):
        if not training or self.rate == 0:
            self.mask = None
            return x
        self.mask = (self.rng.random(x.shape) >= self.rate).astype(x.dtype) / (1 - self.rate)
        return x * self.mask

    def backward(self, dy):
        return dy if self.mask is None else dy * self.mask

    def keras_equivalent(self, k, in_shape):
        return k.Dropout(self.rate, name=self.name)


class Add(Layer):
    multi_input = True

    def build(self, input_shapes):
        if len(set(map(tuple, input_shapes))) != 1:
            raise ValueError(f"{self.name}: Add needs equal shapes, got {input_shapes}")
        self.n = len(input_shapes)
        return input_shapes[0]

    def forward(self, xs, training=False):
        out = xs[0].copy()
        for x in xs[1:]:
            out += x
        return out

    def backward(self, dy):
        return [dy] * self.n

    def keras_equivalent(self, k, in_shape):
        return k.Add(name=self.name)


class Concatenate(Layer):
    """Concatenate along the last (channel) axis."""

    multi_input = True

    def build(self, input_shapes):
        if len({tuple(s[:-1]) for s in input_shapes}) != 1:
            raise ValueError(f"{self.name}: Concatenate needs equal shapes but the last axis, got {input_shapes}")
        self.splits = np.cumsum([s[-1] for s in input_shapes])[:-1]
        return tuple(input_shapes[0][:-1]) + (int(sum(s[-1] for s in input_shapes)),)

    def forward(self, xs, training=False):
        return np.concatenate(xs, axis=-1)

    def backward(self, dy):
        return np.split(dy, self.splits, axis=-1)

    def keras_equivalent(self, k, in_shape):
        return k.Concatenate(axis=-1, name=self.name)
