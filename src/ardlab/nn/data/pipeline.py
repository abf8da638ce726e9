"""The input pipeline: per-rank shards of seeded shuffled global batches, augmentation (random crop and
horizontal flip) and prefetching in a background thread so loading overlaps compute."""

from __future__ import annotations

import numpy as np

from ardlab.nn.data.formats import Dataset


def prefetch(iterable, depth: int = 2):
    """Iterate `iterable` in a background thread, `depth` items ahead, so loading overlaps compute.

    An exception in the producer is raised in the consumer at the point it would have occurred.
    """
    import queue
    import threading

    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    done = object()
    stop = threading.Event()

    def produce():
        try:
            for item in iterable:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(done)
        except BaseException as e:  # handed to the consumer, never lost
            q.put(e)

    t = threading.Thread(target=produce, daemon=True, name="ardlab-prefetch")
    t.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


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
