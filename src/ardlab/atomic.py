"""Atomic file writes: the final name only ever holds a complete file.

The content goes to a temporary file in the same folder, which is flushed, fsynced and renamed over the
target; a run killed midway leaves at most a stray temporary file (never matched by readers), and the
previous file under that name, if any, stays intact.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs):
    """`open` for writing whose result appears under `path` only when the block completes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
