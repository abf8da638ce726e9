"""Activations: ReLU, LeakyReLU, Sigmoid, Tanh, Softmax (elementwise, in place where safe)."""

from __future__ import annotations

import numpy as np

from ardlab.nn.layers.base import Layer


class ReLU(Layer):
    """Backward reads the kept output (positive exactly where the input was): no mask is stored."""

    def forward(self, x, training=False):
        self.y = np.maximum(x, 0)
        return self.y

    def backward(self, dy):
        dx = np.multiply(dy, self.y > 0)
        self.y = None
        return dx

    def keras_equivalent(self, k, in_shape):
        return k.ReLU(name=self.name)


class LeakyReLU(Layer):
    def __init__(self, alpha: float = 0.3, name=None):
        super().__init__(name)
        self.alpha = alpha

    def forward(self, x, training=False):
        self.mask = x > 0
        return np.where(self.mask, x, self.alpha * x).astype(x.dtype)

    def backward(self, dy):
        return np.where(self.mask, dy, self.alpha * dy).astype(dy.dtype)

    def keras_equivalent(self, k, in_shape):
        return k.LeakyReLU(self.alpha, name=self.name)


class Sigmoid(Layer):
    def forward(self, x, training=False):
        self.y = 0.5 * (1 + np.tanh(0.5 * x))  # stable for large |x|
        return self.y

    def backward(self, dy):
        return dy * self.y * (1 - self.y)

    def keras_equivalent(self, k, in_shape):
        return k.Activation("sigmoid", name=self.name)


class Tanh(Layer):
    def forward(self, x, training=False):
        self.y = np.tanh(x)
        return self.y

    def backward(self, dy):
        return dy * (1 - self.y * self.y)

    def keras_equivalent(self, k, in_shape):
        return k.Activation("tanh", name=self.name)


class Softmax(Layer):
    """Softmax over the last axis. For training, prefer the fused loss (losses.SoftmaxCrossEntropy)."""

    def forward(self, x, training=False):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        self.y = e / e.sum(axis=-1, keepdims=True)
        return self.y

    def backward(self, dy):
        return self.y * (dy - (dy * self.y).sum(axis=-1, keepdims=True))

    def keras_equivalent(self, k, in_shape):
        return k.Softmax(name=self.name)
