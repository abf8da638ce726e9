"""Data set readers: synthetic, scikit-learn's 8x8 digits, MNIST idx(.gz), CIFAR-10 binary batches,
ImageNet-style class folders of JPEG/PNG images, and .npz shards.

Every reader returns a ``Dataset`` of NHWC float32 images and int labels. Nothing is downloaded: users point
at files; a missing or truncated file is an error naming it.
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


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def image_folder(directory, split: str = "train", size=(224, 224)) -> Dataset:
    """ImageNet layout: <directory>/<split>/<class name>/<image>.{jpg,jpeg,png}; classes in sorted order.

    Each image is resized so its shorter side is the target's, then centre-cropped (RGB, [0, 1]). Everything
    is decoded into memory: for a full ImageNet, convert once to .npz shards.
    """
    from PIL import Image, UnidentifiedImageError

    root = Path(directory) / split
    if not root.is_dir():
        raise FileNotFoundError(f"image folder {root} not found (expected <data-path>/{split}/<class>/<image>)")
    classes = sorted(p.name for p in root.iterdir() if p.is_dir())
    if not classes:
        raise ValueError(f"{root} has no class folders")
    h, w = size
    xs, ys = [], []
    for label, cls in enumerate(classes):
        for f in sorted(p for p in (root / cls).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES):
            try:
                with Image.open(f) as im:
                    im = im.convert("RGB")
                    scale = max(h / im.height, w / im.width)
                    im = im.resize((max(w, round(im.width * scale)), max(h, round(im.height * scale))),
                                   Image.BILINEAR)
                    top, left = (im.height - h) // 2, (im.width - w) // 2
                    xs.append(np.asarray(im.crop((left, top, left + w, top + h)), dtype=np.uint8))
            except (UnidentifiedImageError, OSError) as e:
                raise ValueError(f"{f}: not a readable image ({e})") from None
            ys.append(label)
    if not xs:
        raise ValueError(f"no images ({', '.join(IMAGE_SUFFIXES)}) under {root}")
    return Dataset(np.stack(xs).astype(np.float32) / 255, np.array(ys, np.int64), len(classes),
                   f"{Path(directory).name}-{split}")


def npz_shards(directory, split: str = "train") -> Dataset:
    """Shards <directory>/<split>-*.npz, each with arrays x (N, H, W, C; uint8 0-255 or float) and y (N,)."""
    import zipfile

    d = Path(directory)
    files = sorted(d.glob(f"{split}-*.npz"))
    if not files:
        raise FileNotFoundError(f"no shards {split}-*.npz in {d}")
    xs, ys = [], []
    for f in files:
        try:
            with np.load(f) as z:
                if "x" not in z or "y" not in z:
                    raise ValueError(f"{f}: a shard needs arrays 'x' and 'y', has {sorted(z.files)}")
                x, y = z["x"], z["y"]
        except (OSError, EOFError, ValueError, zipfile.BadZipFile) as e:
            if isinstance(e, ValueError) and "a shard needs" in str(e):
                raise
            raise ValueError(f"{f}: unreadable or truncated .npz ({e})") from None
        if x.ndim != 4 or len(x) != len(y):
            raise ValueError(f"{f}: x must be (N, H, W, C) with N = len(y); got x {x.shape}, y {y.shape}")
        if xs and x.shape[1:] != xs[0].shape[1:]:
            raise ValueError(f"{f}: images {x.shape[1:]} differ from the first shard's {xs[0].shape[1:]}")
        xs.append(x.astype(np.float32) / 255 if x.dtype == np.uint8 else x.astype(np.float32))
        ys.append(y.astype(np.int64))
    y = np.concatenate(ys)
    if y.min() < 0:
        raise ValueError(f"negative labels in {d}")
    return Dataset(np.concatenate(xs), y, int(y.max()) + 1, f"{d.name}-{split}")


DATASETS = ("synthetic", "digits", "mnist", "cifar10", "images", "npz")


def load(name: str, path=None, split="train", shape=None, classes=10, n=1024, seed=0) -> Dataset:
    if name == "synthetic":
        return synthetic(tuple(shape or (32, 32, 3)), classes, n, seed)
    if name == "digits":
        return digits(split)
    if name in DATASETS:
        if path is None:
            raise ValueError(f"data set {name!r} needs --data-path (ardlab downloads nothing)")
        if name == "images":
            return image_folder(path, split, tuple(shape[:2]) if shape else (224, 224))
        return {"mnist": mnist, "cifar10": cifar10, "npz": npz_shards}[name](path, split)
    raise ValueError(f"unknown data set {name!r}; valid: {', '.join(DATASETS)}")
