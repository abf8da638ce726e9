"""Optimizers (SGD with momentum/Nesterov/weight decay, RMSProp, Adam, Nadam) and learning-rate schedules.

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


def warmup_step_schedule(base_lr: float, warmup_steps: int = 0, step_every: int = 0, gamma: float = 0.1):
    """lr(step): linear warm-up over `warmup_steps`, then multiply by `gamma` every `step_every` steps."""

    def lr(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return base_lr * (step + 1) / warmup_steps
        if step_every:
            return base_lr * gamma ** ((step - warmup_steps) // step_every)
        return base_lr

    return lr


class ReduceLROnPlateau:
    """Multiply the learning rate by `factor` when the monitored value (lower is better) has not improved by
    `min_delta` for `patience` epochs; never below `min_scale` of the base rate."""

    def __init__(self, factor: float = 0.1, patience: int = 2, min_delta: float = 1e-4, min_scale: float = 1e-3):
        if not 0 < factor < 1 or patience < 1:
            raise ValueError(f"reduce-on-plateau needs 0 < factor < 1 and patience >= 1, got {factor}, {patience}")
        self.factor, self.patience, self.min_delta, self.min_scale = factor, patience, min_delta, min_scale
        self.scale, self.best, self.wait = 1.0, float("inf"), 0

    def update(self, value: float) -> bool:
        """Record one epoch's value; True if the rate was reduced."""
        if value < self.best - self.min_delta:
            self.best, self.wait = value, 0
            return False
        self.wait += 1
        if self.wait >= self.patience and self.scale > self.min_scale:
            self.scale, self.wait = max(self.scale * self.factor, self.min_scale), 0
            return True
        return False

    def state(self) -> dict:
        return {"scale": self.scale, "best": self.best, "wait": self.wait}

    def restore(self, state: dict) -> None:
        self.scale, self.best, self.wait = state["scale"], state["best"], state["wait"]


class EarlyStopping:
    """Stop when the monitored value (lower is better) has not improved by `min_delta` for `patience` epochs."""

    def __init__(self, patience: int = 3, min_delta: float = 1e-4):
        if patience < 1:
            raise ValueError(f"early stopping needs patience >= 1, got {patience}")
        self.patience, self.min_delta = patience, min_delta
        self.best, self.wait = float("inf"), 0

    def update(self, value: float) -> bool:
        """Record one epoch's value; True if training should stop."""
        if value < self.best - self.min_delta:
            self.best, self.wait = value, 0
        else:
            self.wait += 1
        return self.wait >= self.patience

    def state(self) -> dict:
        return {"best": self.best, "wait": self.wait}

    def restore(self, state: dict) -> None:
        self.best, self.wait = state["best"], state["wait"]
