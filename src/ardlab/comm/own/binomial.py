"""Binomial-tree reduce to rank 0, then binomial-tree broadcast: 2 log2(p) steps of the whole vector.

Works for any p without folding, and keeps rank order, so non-commutative ops work.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ardlab.comm.own._common import TAG_BIN, combine, prepare, scratch


def allreduce(comm: MPI.Comm, sendbuf, recvbuf: np.ndarray, op: MPI.Op = MPI.SUM) -> None:
    buf = prepare(sendbuf, recvbuf)
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1 or buf.size == 0:
        return
    tmp = scratch(buf.dtype, buf.size)
    mask = 1
    while mask < size:  # reduce: the data of ranks [rank, rank + 2*mask) gathers at rank
        if rank & mask:
            comm.Send(buf, dest=rank - mask, tag=TAG_BIN)
            break
        src = rank + mask
        if src < size:
            comm.Recv(tmp, source=src, tag=TAG_BIN)
            combine(op, tmp, buf, incoming_is_lower=False)
        mask <<= 1
    mask = 1
    while mask < size:  # broadcast from rank 0 along the same tree
        if rank & mask:
            comm.Recv(buf, source=rank - mask, tag=TAG_BIN)
            break
        mask <<= 1
    mask >>= 1
    while mask > 0:
        if rank + mask < size:
            comm.Send(buf, dest=rank + mask, tag=TAG_BIN)
        mask >>= 1
