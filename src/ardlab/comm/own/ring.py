"""Ring Allreduce (Patarasuk & Yuan): a ring reduce-scatter, then a ring allgather.

Each of p ranks sends 2(p-1) messages of about n/p elements: bandwidth-optimal, latency grows with p.
Any count works: blocks differ by at most one element, and empty blocks are sent as empty messages.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from ardlab.comm.own._common import TAG_RING, prepare, scratch


def allreduce(comm: MPI.Comm, sendbuf, recvbuf: np.ndarray, op: MPI.Op = MPI.SUM) -> None:
    buf = prepare(sendbuf, recvbuf)
    size, rank = comm.Get_size(), comm.Get_rank()
    if size == 1 or buf.size == 0:
        return
    n = buf.size
    base, extra = divmod(n, size)
    starts = [i * base + min(i, extra) for i in range(size + 1)]
    right, left = (rank + 1) % size, (rank - 1) % size
    tmp = scratch(buf.dtype, base + 1)
    # Reduce-scatter: after p-1 steps rank r holds the full reduction of block (r+1) % p.
    for step in range(size - 1):
        s = (rank - step) % size
        r = (rank - step - 1) % size
        rlen = starts[r + 1] - starts[r]
        comm.Sendrecv(buf[starts[s]:starts[s + 1]], right, TAG_RING,
                      tmp[:rlen], left, TAG_RING)
        op.Reduce_local(tmp[:rlen], buf[starts[r]:starts[r + 1]])
    # Allgather: pass the finished blocks around the ring, straight into place.
    for step in range(size - 1):
        s = (rank - step + 1) % size
        r = (rank - step) % size
        comm.Sendrecv(buf[starts[s]:starts[s + 1]], right, TAG_RING,
                      buf[starts[r]:starts[r + 1]], left, TAG_RING)
