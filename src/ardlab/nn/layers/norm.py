"""BatchNormalization over all axes but the last (channels), with running statistics for inference."""

from __future__ import annotations

import numpy as np

from ardlab.nn.layers.base import Layer


class BatchNormalization(Layer):
    def __init__(self, momentum: float = 0.99, epsilon: float = 1e-3, name=None):
        super().__init__(name)
        self.momentum, self.epsilon = momentum, epsilon

    def build(self, input_shape):
        c = input_shape[-1]
        self.add_param("gamma", np.ones(c))
        self.add_param("beta", np.zeros(c))
        self.running_mean = np.zeros(c, dtype=self.dtype)
        self.running_var = np.ones(c, dtype=self.dtype)
        return input_shape

    def set_dtype(self, dtype):
        super().set_dtype(dtype)
        self.running_mean = self.running_mean.astype(self.dtype)
        self.running_var = self.running_var.astype(self.dtype)

    def forward(self, x, training=False):
        axes = tuple(range(x.ndim - 1))
        if training:
            mean = x.mean(axis=axes)
            var = x.var(axis=axes)
            m = self.momentum
            self.running_mean = (m * self.running_mean + (1 - m) * mean).astype(self.dtype)
            self.running_var = (m * self.running_var + (1 - m) * var).astype(self.dtype)
        else:
            mean, var = self.running_mean, self.running_var
        self.batch_stats = training  # backward differs: batch statistics depend on x, running ones do not
        self.inv_std = (1.0 / np.sqrt(var + self.epsilon)).astype(x.dtype)
        self.xhat = (x - mean) * self.inv_std
        return self.xhat * self.params["gamma"] + self.params["beta"]

    def backward(self, dy):
        axes = tuple(range(dy.ndim - 1))
        n = dy.size // dy.shape[-1]
        self.grads["beta"][...] = dy.sum(axis=axes)
        self.grads["gamma"][...] = (dy * self.xhat).sum(axis=axes)
        dxhat = dy * self.params["gamma"]
        if not self.batch_stats:
            self.xhat = None
            return (dxhat * self.inv_std).astype(dy.dtype)
        dx = (self.inv_std / n) * (n * dxhat - dxhat.sum(axis=axes) - self.xhat * (dxhat * self.xhat).sum(axis=axes))
        self.xhat = None
        return dx.astype(dy.dtype)
