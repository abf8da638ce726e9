"""Data sets: synthetic, scikit-learn's 8x8 digits, MNIST idx(.gz), CIFAR-10 binary batches.

Every loader returns a ``Dataset`` of NHWC float32 images in [0, 1] (or standardised) and int labels;
``batches`` shards by rank, shuffles with a seed and applies augmentation. Nothing is downloaded: users
point at files; a missing or truncated file is an error naming it.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class Dataset:
    x: np.ndarray  # (N, H, W, C) float32
    y: np.ndarray  # (N,) int64
    classes: int
    name: str

    def __len__(self) -> int:
        return len(self.y)


def synthetic(shape=(32, 32, 3), classes=10, n=1024, seed=0) -> Dataset:
    rng = np.random.default_rng(seed)
    return Dataset(rng.random((n, *shape), dtype=np.float32), rng.integers(0, classes, n), classes, "synthetic")


def digits(split: str = "train", test_fraction: float = 0.25, seed: int = 0) -> Dataset:
    """scikit-learn's 1797 8x8 handwritten digits (a real data set shipped with the package)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[..., None]
    idx = np.random.default_rng(seed).permutation(len(x))
    cut = int(len(x) * (1 - test_fraction))
    sel = idx[:cut] if split == "train" else idx[cut:]
    return Dataset(x[sel], d.target[sel].astype(np.int64), 10, f"digits-{split}")


def _open(path: Path):
    if not path.exists():
        raise FileNotFoundError(f"data file not found: {path}")
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_idx(path) -> np.ndarray:
    """An IDX file (MNIST format), optionally gzipped."""
    path = Path(path)
    with _open(path) as f:
        data = f.read()
    if len(data) < 4 or data[:2] != b"\x00\x00":
        raise ValueError(f"{path}: not an IDX file (bad magic)")
    dtype = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}.get(data[2])
    if dtype is None:
        raise ValueError(f"{path}: unknown IDX element type 0x{data[2]:02x}")
    ndim = data[3]
    dims = struct.unpack(f">{ndim}I", data[4 : 4 + 4 * ndim])
    body = np.frombuffer(data, dtype=dtype, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"{path}: truncated: header says {dims} = {int(np.prod(dims))} values, file has {body.size}")
    return body.reshape(dims)


def mnist(directory, split: str = "train") -> Dataset:
    d = Path(directory)
    prefix = "train" if split == "train" else "t10k"

    def find(stem):
        for name in (f"{stem}", f"{stem}.gz"):
            if (d / name).exists():
                return d / name
        raise FileNotFoundError(f"MNIST file {stem}[.gz] not found in {d}")

    x = read_idx(find(f"{prefix}-images-idx3-ubyte"))
    y = read_idx(find(f"{prefix}-labels-idx1-ubyte"))
    if len(x) != len(y):
        raise ValueError(f"MNIST in {d}: {len(x)} images but {len(y)} labels")
    return Dataset((x.astype(np.float32) / 255)[..., None], y.astype(np.int64), 10, f"mnist-{split}")


CIFAR_RECORD = 1 + 32 * 32 * 3


def cifar10(directory, split: str = "train") -> Dataset:
    """CIFAR-10 binary version: data_batch_1..5.bin / test_batch.bin, records of label + 3072 bytes CHW."""
    d = Path(directory)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] if split == "train" else ["test_batch.bin"]
    files = [d / n for n in names if (d / n).exists()]
    if not files:
        raise FileNotFoundError(f"no CIFAR-10 binary batches ({', '.join(names)}) in {d}")
    xs, ys = [], []
    for p in files:
        raw = np.fromfile(p, dtype=np.uint8)
        if raw.size % CIFAR_RECORD:
            raise ValueError(f"{p}: truncated: {raw.size} bytes is not a multiple of the {CIFAR_RECORD}-byte record")
        rec = raw.reshape(-1, CIFAR_RECORD)
        ys.append(rec[:, 0].astype(np.int64))
        xs.append(rec[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
    y = np.concatenate(ys)
    if y.max() >= 10:
        raise ValueError(f"CIFAR-10 labels in {d} exceed 9 (max {y.max()}): not CIFAR-10 binary files?")
    return Dataset(np.concatenate(xs).astype(np.float32) / 255, y, 10, f"cifar10-{split}")


def load(name: str, path=None, split="train", shape=None, classes=10, n=1024, seed=0) -> Dataset:
    if name == "synthetic":
        return synthetic(tuple(shape or (32, 32, 3)), classes, n, seed)
    if name == "digits":
        return digits(split)
    if name in ("mnist", "cifar10"):
        if path is None:
            raise ValueError(f"data set {name!r} needs --data-path (ardlab downloads nothing)")
        return mnist(path, split) if name == "mnist" else cifar10(path, split)
    raise ValueError(f"unknown data set {name!r}; valid: synthetic, digits, mnist, cifar10")


def augment(x: np.ndarray, rng: np.random.Generator, crop_pad: int = 4, flip: bool = True) -> np.ndarray:
    """Random crop (after zero padding by crop_pad) and horizontal flip, vectorised over the batch."""
    n, h, w, c = x.shape
    if crop_pad:
        xp = np.pad(x, ((0, 0), (crop_pad, crop_pad), (crop_pad, crop_pad), (0, 0)))
        oy = rng.integers(0, 2 * crop_pad + 1, n)
        ox = rng.integers(0, 2 * crop_pad + 1, n)
        rows = oy[:, None] + np.arange(h)[None, :]
        cols = ox[:, None] + np.arange(w)[None, :]
        x = xp[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
    if flip:
        f = rng.random(n) < 0.5
        x = x.copy()
        x[f] = x[f, :, ::-1]
    return x


def batches(ds: Dataset, global_batch: int, rank: int, size: int, epoch: int, seed: int = 0, shuffle=True,
            augment_fn=None):
    """Yield this rank's (x, y) slice of each global batch; every rank sees the same permutation."""
    if global_batch % size:
        raise ValueError(f"global batch {global_batch} is not divisible by {size} ranks")
    per = global_batch // size
    idx = np.random.default_rng((seed, epoch)).permutation(len(ds)) if shuffle else np.arange(len(ds))
    rng = np.random.default_rng((seed, epoch, rank, 1))
    for start in range(0, len(idx) - global_batch + 1, global_batch):
        sel = np.sort(idx[start + rank * per : start + (rank + 1) * per])
        x = ds.x[sel]
        if augment_fn is not None:
            x = augment_fn(x, rng)
        yield x, ds.y[sel]
