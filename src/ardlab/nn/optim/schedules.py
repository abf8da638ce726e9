"""Learning-rate schedules and stopping rules: linear warm-up with step decay, reduce-on-plateau, early
stopping. The plateau and early-stopping rules keep a state that checkpoints save and restore."""

from __future__ import annotations


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
