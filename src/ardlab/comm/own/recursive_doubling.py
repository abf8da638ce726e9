"""Recursive-doubling Allreduce: log2(p) exchanges of the whole vector.

Latency-optimal for small messages. Non-powers of two use the usual fold: the first 2*(p - pof2) ranks
combine pairwise first and get the result back at the end. Keeps rank order, so non-commutative ops work.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ardlab.comm.own._common import TAG_RD, combine, fold_in, fold_out, prepare, real_rank, scratch
from ardlab.comm.ranks import pof2_floor


def allreduce(comm: MPI.Comm, sendbuf, recvbuf: np.ndarray, op: MPI.Op = MPI.SUM) -> None:
    buf = prepare(sendbuf, recvbuf)
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1 or buf.size == 0:
        return
    pof2 = pof2_floor(size)
    rem = size - pof2
    newrank = fold_in(comm, buf, op, pof2, TAG_RD)
    if newrank >= 0:
        tmp = scratch(buf.dtype, buf.size)
        mask = 1
        while mask < pof2:
            dst = real_rank(newrank ^ mask, rem)
            comm.Sendrecv(buf, dst, TAG_RD, tmp, dst, TAG_RD)
            combine(op, tmp, buf, incoming_is_lower=dst < rank)
            mask <<= 1
    fold_out(comm, buf, pof2, TAG_RD)
