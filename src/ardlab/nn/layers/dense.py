"""Dense (fully connected) layer: y = x W + b, one GEMM each way."""

from __future__ import annotations

import numpy as np

from ardlab.nn import initializers, memory
from ardlab.nn.layers.base import Layer


class Dense(Layer):
    def __init__(self, units: int, use_bias: bool = True, kernel_initializer="glorot_uniform", name=None):
        super().__init__(name)
        if units < 1:
            raise ValueError(f"{self.name}: units must be >= 1, got {units}")
        self.units, self.use_bias, self.kernel_initializer = units, use_bias, kernel_initializer

    def build(self, input_shape):
        if len(input_shape) != 1:
            raise ValueError(f"{self.name}: Dense needs flat input (add Flatten), got {input_shape}")
        (d,) = input_shape
        self.add_param("kernel", initializers.get(self.kernel_initializer)((d, self.units), d, self.units))
        if self.use_bias:
            self.add_param("bias", np.zeros(self.units))
        return (self.units,)

    def forward(self, x, training=False):
        self.x = x
        y = x @ self.params["kernel"]
        if self.use_bias:
            y += self.params["bias"]
        return y

    def backward(self, dy):
        self.grads["kernel"][...] = self.x.T @ dy
        if self.use_bias:
            self.grads["bias"][...] = memory.column_sums(dy)
        dx = dy @ self.params["kernel"].T
        self.x = None
        return dx

    def keras_equivalent(self, k, in_shape):
        return k.Dense(self.units, use_bias=self.use_bias, name=self.name)
