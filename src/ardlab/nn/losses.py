"""Losses returning (mean loss, gradient w.r.t. the model output): softmax cross-entropy (fused, stable),
binary cross-entropy on logits, mean squared error."""

from __future__ import annotations

import numpy as np


class SoftmaxCrossEntropy:
    """Categorical cross-entropy on logits; labels are class indices or one-hot rows."""

    name = "categorical_crossentropy"

    def __call__(self, logits: np.ndarray, labels: np.ndarray, scale_n: int | None = None):
        n = scale_n or logits.shape[0]
        z = logits - logits.max(axis=1, keepdims=True)
        logsum = np.log(np.exp(z).sum(axis=1, keepdims=True))
        logp = z - logsum
        onehot = labels if labels.ndim == 2 else np.eye(logits.shape[1], dtype=logits.dtype)[labels]
        loss = -(onehot * logp).sum() / n
        grad = (np.exp(logp) - onehot) / n
        return float(loss), grad.astype(logits.dtype)


class BinaryCrossEntropy:
    """Binary cross-entropy on logits (sigmoid fused): stable for large |logit|."""

    name = "binary_crossentropy"

    def __call__(self, logits, labels, scale_n=None):
        n = scale_n or logits.shape[0]
        y = labels.reshape(logits.shape).astype(logits.dtype)
        loss = (np.maximum(logits, 0) - logits * y + np.log1p(np.exp(-np.abs(logits)))).sum() / n
        grad = (0.5 * (1 + np.tanh(0.5 * logits)) - y) / n
        return float(loss), grad.astype(logits.dtype)


class MeanSquaredError:
    name = "mse"

    def __call__(self, pred, target, scale_n=None):
        n = scale_n or pred.shape[0]
        d = pred - target.reshape(pred.shape)
        per = d[0].size
        return float((d * d).sum() / (n * per)), (2 * d / (n * per)).astype(pred.dtype)


LOSSES = {c.name: c for c in (SoftmaxCrossEntropy, BinaryCrossEntropy, MeanSquaredError)}


DIVERGED = 1e4  # a training loss above this (or not finite) stops the run: its times would measure nothing


def check_loss(loss: float, where: str, lr: float) -> None:
    """FloatingPointError naming the loss, `where` it happened and the learning rate, when training diverged."""
    import math

    if not math.isfinite(loss) or loss > DIVERGED:
        raise FloatingPointError(f"loss is {loss} ({where}): lower the learning rate (now {lr}) or check the data")


def get(name: str):
    try:
        return LOSSES[name]()
    except KeyError:
        raise ValueError(f"unknown loss {name!r}; valid: {', '.join(LOSSES)}") from None


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    y = labels if labels.ndim == 1 else labels.argmax(axis=1)
    return float((logits.argmax(axis=1) == y).mean())


def top_k_hits(logits: np.ndarray, labels: np.ndarray, k: int = 5) -> int:
    """How many samples have their label among the k largest logits (all of them when k >= classes)."""
    if len(logits) == 0:
        return 0
    y = labels if labels.ndim == 1 else labels.argmax(axis=1)
    topk = np.argpartition(-logits, min(k, logits.shape[1]) - 1, axis=1)[:, :k]
    return int((topk == y[:, None]).any(axis=1).sum())


def top_k_accuracy(logits: np.ndarray, labels: np.ndarray, k: int = 5) -> float:
    return top_k_hits(logits, labels, k) / len(logits)
