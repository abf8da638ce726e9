"""Checkpoints: weights, BN statistics, optimizer state, epoch/step, schedule state and RNG states, in one .npz.

Written atomically (temporary file in the same folder, fsync, rename), so a run killed while writing never
corrupts the last good checkpoint; `latest` finds the newest complete one. Training resumes at an epoch
boundary; data order and augmentation are seeded by (seed, epoch, rank), so a resumed run reaches the same
weights as an uninterrupted one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from ardlab.results import atomic_open

_NAME = re.compile(r"^ckpt-epoch(\d+)\.npz$")


def save(directory, model, optimizer, *, epoch: int, step: int, extra: dict | None = None) -> Path:
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    arrays = {f"w{i}": w for i, w in enumerate(model.get_weights())}
    arrays.update({f"opt/{k}": v for k, v in optimizer.state.items()})
    rngs = {layer.name: layer.rng.bit_generator.state for layer in model.layers if hasattr(layer, "rng")}
    meta = {"epoch": epoch, "step": step, "optimizer_iterations": optimizer.iterations, "model": model.name,
            "rng": rngs, "extra": extra or {}}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    path = d / f"ckpt-epoch{epoch}.npz"
    with atomic_open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def latest(directory) -> Path | None:
    d = Path(directory)
    found = [(int(m.group(1)), p) for p in d.glob("ckpt-epoch*.npz") if (m := _NAME.match(p.name))] \
        if d.is_dir() else []
    return max(found)[1] if found else None


def load(path, model, optimizer) -> dict:
    """Restore model and optimizer from `path`; return the metadata (epoch, step, extra)."""
    path = Path(path)
    try:
        z = np.load(path)
        meta = json.loads(bytes(z["meta"]).decode())
        n = sum(1 for k in z.files if re.fullmatch(r"w\d+", k))
        weights = [z[f"w{i}"] for i in range(n)]
        opt_state = {k[4:]: z[k].copy() for k in z.files if k.startswith("opt/")}
    except (OSError, KeyError, ValueError, EOFError) as e:
        raise ValueError(f"checkpoint {path} is unreadable ({e})") from None
    if meta["model"] != model.name:
        raise ValueError(f"checkpoint {path} is of model {meta['model']!r}, not {model.name!r}")
    model.set_weights(weights)
    optimizer.state = opt_state
    optimizer.iterations = meta["optimizer_iterations"]
    for layer in model.layers:
        if hasattr(layer, "rng") and layer.name in meta["rng"]:
            layer.rng.bit_generator.state = meta["rng"][layer.name]
    return meta
