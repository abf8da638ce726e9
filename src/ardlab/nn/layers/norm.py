"""BatchNormalization over all axes but the last (channels), with running statistics for inference.

Two passes forward (moments, then normalise-scale-shift) and two backward (per-channel sums, then dx), as
compiled kernels (``kernels``); the normalised input is recomputed from x in backward, not stored.
"""

from __future__ import annotations

import numpy as np

from ardlab.nn import kernels
from ardlab.nn.layers.base import Layer


class BatchNormalization(Layer):
    def __init__(self, momentum: float = 0.99, epsilon: float = 1e-3, name=None):
        super().__init__(name)
        self.momentum, self.epsilon = momentum, epsilon

    def build(self, input_shape):
        c = input_shape[-1]
        self.add_param("gamma", np.ones(c))
        self.add_param("beta", np.zeros(c))
        self.add_state("running_mean", np.zeros(c))
        self.add_state("running_var", np.ones(c))
        return input_shape

    def update_running(self, mean, var) -> None:
        """Move the running statistics towards a training batch's (Keras's rule, `momentum` the share kept)."""
        mo, st = self.momentum, self.state
        st["running_mean"][...] = mo * st["running_mean"] + (1 - mo) * mean
        st["running_var"][...] = mo * st["running_var"] + (1 - mo) * var

    def forward(self, x, training=False):
        c = x.shape[-1]
        X = x.reshape(-1, c)
        if training:
            mean, var = kernels.batch_moments(X)
            self.update_running(mean, var)
        else:
            mean, var = self.state["running_mean"], self.state["running_var"]
        self.batch_stats = training  # backward differs: batch statistics depend on x, running ones do not
        self.mean = np.asarray(mean, dtype=x.dtype)
        self.inv_std = (1.0 / np.sqrt(var + self.epsilon)).astype(x.dtype)
        self.x = X  # backward recomputes the normalised input from x instead of storing it
        y = np.empty_like(X)
        kernels.bn_forward(X, self.mean, self.params["gamma"].astype(x.dtype) * self.inv_std,
                           self.params["beta"].astype(x.dtype), y)
        return y.reshape(x.shape)

    def backward(self, dy):
        dY = dy.reshape(-1, dy.shape[-1])
        dx, dgamma, dbeta = kernels.bn_backward(self.x, dY, self.mean, self.inv_std,
                                                self.params["gamma"].astype(dy.dtype), self.batch_stats)
        self.grads["gamma"][...] = dgamma
        self.grads["beta"][...] = dbeta
        self.x = None
        return dx.reshape(dy.shape)

    def keras_equivalent(self, k, in_shape):
        return k.BatchNormalization(momentum=self.momentum, epsilon=self.epsilon, name=self.name)
