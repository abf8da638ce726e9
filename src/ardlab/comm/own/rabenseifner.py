"""Rabenseifner's Allreduce: recursive-halving reduce-scatter, then recursive-doubling allgather.

About 2 log2(p) messages and 2(p-1)/p * n elements sent per rank: good for large messages at any p.
Non-powers of two use the fold of recursive doubling. The vector is cut into pof2 blocks that differ
by at most one element, so any count works (blocks may be empty).
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ardlab.comm.own._common import TAG_RAB, fold_in, fold_out, prepare, real_rank, scratch
from ardlab.comm.ranks import pof2_floor


def allreduce(comm: MPI.Comm, sendbuf, recvbuf: np.ndarray, op: MPI.Op = MPI.SUM) -> None:
    buf = prepare(sendbuf, recvbuf)
    size = comm.Get_size()
    if size == 1 or buf.size == 0:
        return
    pof2 = pof2_floor(size)
    rem = size - pof2
    newrank = fold_in(comm, buf, op, pof2, TAG_RAB)
    if newrank >= 0:
        n = buf.size
        base, extra = divmod(n, pof2)
        starts = [i * base + min(i, extra) for i in range(pof2 + 1)]
        tmp = scratch(buf.dtype, n - n // 2 + 1)
        lo, hi = 0, pof2  # the blocks this rank is responsible for
        dist = pof2 // 2
        while dist >= 1:  # halving: keep the half named by this bit of newrank
            dst = real_rank(newrank ^ dist, rem)
            mid = (lo + hi) // 2
            if newrank & dist:
                keep, give = (mid, hi), (lo, mid)
            else:
                keep, give = (lo, mid), (mid, hi)
            k0, k1 = starts[keep[0]], starts[keep[1]]
            comm.Sendrecv(buf[starts[give[0]]:starts[give[1]]], dst, TAG_RAB,
                          tmp[:k1 - k0], dst, TAG_RAB)
            op.Reduce_local(tmp[:k1 - k0], buf[k0:k1])
            lo, hi = keep
            dist //= 2
        dist = 1
        while dist < pof2:  # doubling: swap finished halves with the partner
            dst = real_rank(newrank ^ dist, rem)
            width = hi - lo
            other = (hi, hi + width) if not newrank & dist else (lo - width, lo)
            comm.Sendrecv(buf[starts[lo]:starts[hi]], dst, TAG_RAB,
                          buf[starts[other[0]]:starts[other[1]]], dst, TAG_RAB)
            lo, hi = min(lo, other[0]), max(hi, other[1])
            dist *= 2
    fold_out(comm, buf, pof2, TAG_RAB)
