"""Weight initializers (Glorot, He, LeCun: uniform and normal; zeros, ones), seeded through `seed()`."""

from __future__ import annotations

import numpy as np

_rng = np.random.default_rng(0)


def seed(s: int) -> None:
    global _rng
    _rng = np.random.default_rng(s)


def _uniform(limit, shape):
    return _rng.uniform(-limit, limit, shape)


def _normal(std, shape):
    # Truncated at 2 std, as Keras does.
    out = _rng.normal(0, std, shape)
    bad = np.abs(out) > 2 * std
    while bad.any():
        out[bad] = _rng.normal(0, std, bad.sum())
        bad = np.abs(out) > 2 * std
    return out


INITIALIZERS = {
    "glorot_uniform": lambda shape, fi, fo: _uniform(np.sqrt(6 / (fi + fo)), shape),
    "glorot_normal": lambda shape, fi, fo: _normal(np.sqrt(2 / (fi + fo)) / 0.87962566, shape),
    "he_uniform": lambda shape, fi, fo: _uniform(np.sqrt(6 / fi), shape),
    "he_normal": lambda shape, fi, fo: _normal(np.sqrt(2 / fi) / 0.87962566, shape),
    "lecun_uniform": lambda shape, fi, fo: _uniform(np.sqrt(3 / fi), shape),
    "lecun_normal": lambda shape, fi, fo: _normal(np.sqrt(1 / fi) / 0.87962566, shape),
    "zeros": lambda shape, fi, fo: np.zeros(shape),
    "ones": lambda shape, fi, fo: np.ones(shape),
}


def get(name: str):
    try:
        return INITIALIZERS[name]
    except KeyError:
        raise ValueError(f"unknown initializer {name!r}; valid: {', '.join(INITIALIZERS)}") from None
