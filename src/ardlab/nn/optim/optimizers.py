"""Optimizers: SGD (momentum, Nesterov, weight decay), RMSProp, Adam, Nadam.

An optimizer updates every (layer, parameter) of a model from the gradients beside it; its state is a dict
of arrays keyed '<layer>/<param>/<slot>' so checkpoints can save and restore it.
"""

from __future__ import annotations

import numpy as np


class Optimizer:
    def __init__(self, lr: float = 0.01, weight_decay: float = 0.0):
        if lr <= 0:
            raise ValueError(f"learning rate must be > 0, got {lr}")
        self.lr, self.weight_decay, self.iterations = lr, weight_decay, 0
        self.state: dict[str, np.ndarray] = {}

    def slot(self, layer, key, name):
        k = f"{layer.name}/{key}/{name}"
        if k not in self.state:
            self.state[k] = np.zeros_like(layer.params[key])
        return self.state[k]

    def step(self, model, lr: float | None = None) -> None:
        lr = self.lr if lr is None else lr
        self.iterations += 1
        for layer, key in model.parameters():
            g = layer.grads[key]
            if self.weight_decay:
                g = g + self.weight_decay * layer.params[key]
            self.update(layer, key, layer.params[key], g, lr)

    def update(self, layer, key, w, g, lr):
        raise NotImplementedError


class SGD(Optimizer):
    def __init__(self, lr=0.01, momentum=0.0, nesterov=False, weight_decay=0.0):
        super().__init__(lr, weight_decay)
        self.momentum, self.nesterov = momentum, nesterov

    def update(self, layer, key, w, g, lr):
        if not self.momentum:
            w -= lr * g
            return
        v = self.slot(layer, key, "velocity")
        v *= self.momentum
        v -= lr * g
        if self.nesterov:
            w += self.momentum * v - lr * g
        else:
            w += v


class RMSProp(Optimizer):
    def __init__(self, lr=0.001, rho=0.9, epsilon=1e-7, weight_decay=0.0):
        super().__init__(lr, weight_decay)
        self.rho, self.epsilon = rho, epsilon

    def update(self, layer, key, w, g, lr):
        s = self.slot(layer, key, "rms")
        s *= self.rho
        s += (1 - self.rho) * g * g
        w -= lr * g / (np.sqrt(s) + self.epsilon)


class Adam(Optimizer):
    def __init__(self, lr=0.001, beta1=0.9, beta2=0.999, epsilon=1e-7, weight_decay=0.0):
        super().__init__(lr, weight_decay)
        self.b1, self.b2, self.epsilon = beta1, beta2, epsilon

    def update(self, layer, key, w, g, lr):
        m, v, t = self.slot(layer, key, "m"), self.slot(layer, key, "v"), self.iterations
        m *= self.b1
        m += (1 - self.b1) * g
        v *= self.b2
        v += (1 - self.b2) * g * g
        mhat = self.direction(m, g, t)
        w -= lr * mhat / (np.sqrt(v / (1 - self.b2 ** t)) + self.epsilon)

    def direction(self, m, g, t):
        return m / (1 - self.b1 ** t)


class Nadam(Adam):
    def direction(self, m, g, t):
        return self.b1 * m / (1 - self.b1 ** (t + 1)) + (1 - self.b1) * g / (1 - self.b1 ** t)


OPTIMIZERS = {"sgd": SGD, "rmsprop": RMSProp, "adam": Adam, "nadam": Nadam}


def get(name: str, **kwargs) -> Optimizer:
    try:
        cls = OPTIMIZERS[name]
    except KeyError:
        raise ValueError(f"unknown optimizer {name!r}; valid: {', '.join(OPTIMIZERS)}") from None
    return cls(**kwargs)
