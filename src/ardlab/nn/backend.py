"""Which compute backend new layers use: "numpy" (NumPy + BLAS + numba kernels: the readable reference) or "onednn"
(oneDNN's primitives, ``ardlab.nn.onednn``). Layers are bound to a backend when they are made, so a model keeps
the backend it was built with.

    with backend.use("onednn"):
        model = models.get("alexnet")
"""

from __future__ import annotations

import contextlib

BACKENDS = ("numpy", "onednn")
_current = "numpy"


def get() -> str:
    return _current


def set(name: str) -> None:  # noqa: A001 (the module's verb)
    """Make new layers use backend `name` (ValueError naming an unknown one; OnednnUnavailable if oneDNN does not
    load here)."""
    global _current
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")
    if name == "onednn":
        from ardlab.nn import onednn

        onednn.lib()  # its layers are registered by ardlab.nn.layers
    _current = name


@contextlib.contextmanager
def use(name: str):
    before = _current
    set(name)
    try:
        yield
    finally:
        set(before)
