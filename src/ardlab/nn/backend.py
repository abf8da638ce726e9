"""Which compute backend new layers use: "numpy" (NumPy + BLAS + numba kernels: the readable reference) or "onednn"
(oneDNN's primitives, ``ardlab.nn.onednn``). Layers are bound to a backend when they are made, so a model keeps
the backend it was built with.

    with backend.use("onednn"):
        model = models.get("alexnet")

New layers default to numpy here (the library's reference: the layer tests in float64 build on it). Training and
the benchmarks choose "auto" by default (``ardlab train --backend``, the config's ``train.backend``): onednn where
its library loads, numpy where it does not; ``resolve`` says which, ``ardlab info`` prints it, and every training
row records the backend that ran. Asking for onednn where it does not load is an error naming the library.
"""

from __future__ import annotations

import contextlib

BACKENDS = ("numpy", "onednn")
AUTO = "auto"
CHOICES = (AUTO, *BACKENDS)  # what a user may ask for
_current = "numpy"


def resolve(name: str) -> str:
    """The backend `name` means here: itself, or for "auto" onednn where oneDNN loads and numpy where not."""
    if name == AUTO:
        from ardlab.nn import onednn

        return "onednn" if onednn.available() else "numpy"
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; valid: {', '.join(CHOICES)}")
    return name


def get() -> str:
    return _current


def set(name: str) -> None:  # noqa: A001 (the module's verb)
    """Make new layers use backend `name` ("auto" resolved; ValueError naming an unknown one; OnednnUnavailable if
    oneDNN does not load here)."""
    global _current
    name = resolve(name)
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
