"""Our own Allreduce algorithms over mpi4py point-to-point, with the call shape of ``comm.Allreduce``.

    from ardlab.comm.own import get
    allreduce = get("own_ring")
    allreduce(comm, sendbuf, recvbuf, op=MPI.SUM)      # or sendbuf=MPI.IN_PLACE

Buffers are C-contiguous NumPy arrays of one dtype and size. The names are the keys of
``ardlab.comm.libraries.OWN_ALGORITHMS``; each maps to the module of the same name without the prefix.
"""

from __future__ import annotations

import importlib
from typing import Callable

from ardlab.comm.libraries import OWN_ALGORITHMS, OWN_PREFIX


def get(name: str) -> Callable:
    """The `allreduce(comm, sendbuf, recvbuf, op)` function of our algorithm `name`."""
    if name not in OWN_ALGORITHMS:
        raise ValueError(f"unknown own Allreduce algorithm {name!r}; valid: {', '.join(OWN_ALGORITHMS)}")
    module = importlib.import_module(f"{__name__}.{name[len(OWN_PREFIX):]}")
    return module.allreduce
