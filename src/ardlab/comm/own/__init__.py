"""Our own Allreduce algorithms over mpi4py point-to-point, with the call shape of ``comm.Allreduce``.

    from ardlab.comm.own import get
    allreduce = get("own_ring")
    allreduce(comm, sendbuf, recvbuf, op=MPI.SUM)      # or sendbuf=MPI.IN_PLACE

Buffers are C-contiguous NumPy arrays of one dtype and size. The names are the keys of
``ardlab.comm.libraries.OWN_ALGORITHMS``; each maps to the module of the same name without the prefix.
The table's constraints hold here, once: an algorithm the table marks commutative-only refuses a
non-commutative op (the modules themselves assume what the table says).
"""

from __future__ import annotations

import importlib
from typing import Callable

from ardlab.comm.libraries import OWN_ALGORITHMS, OWN_PREFIX


def get(name: str) -> Callable:
    """The `allreduce(comm, sendbuf, recvbuf, op)` function of our algorithm `name`."""
    if name not in OWN_ALGORITHMS:
        raise ValueError(f"unknown own Allreduce algorithm {name!r}; valid: {', '.join(OWN_ALGORITHMS)}")
    entry = OWN_ALGORITHMS[name]
    run = importlib.import_module(f"{__name__}.{name[len(OWN_PREFIX):]}").allreduce
    if not entry.commutative_only:
        return run

    def allreduce(comm, sendbuf, recvbuf, op=None):
        from mpi4py import MPI

        op = MPI.SUM if op is None else op
        entry.check(ranks=comm.Get_size(), commutative=op.Is_commutative())
        run(comm, sendbuf, recvbuf, op)

    allreduce.__doc__ = run.__doc__
    return allreduce
