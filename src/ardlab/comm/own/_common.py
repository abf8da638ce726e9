"""Shared plumbing of our Allreduce algorithms: buffer checks, reusable scratch space, rank folding."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

# One tag per algorithm keeps concurrent traffic of other code on the same communicator apart.
TAG_RING, TAG_RD, TAG_RAB, TAG_BIN = 7301, 7302, 7303, 7304

_scratch: dict[np.dtype, np.ndarray] = {}


def scratch(dtype: np.dtype, count: int) -> np.ndarray:
    """A reusable temporary array of `count` elements (grown on demand, never shrunk)."""
    buf = _scratch.get(dtype)
    if buf is None or buf.size < count:
        buf = np.empty(max(count, 1), dtype=dtype)
        _scratch[dtype] = buf
    return buf[:count]


def prepare(sendbuf, recvbuf) -> np.ndarray:
    """Copy sendbuf into recvbuf (unless in place) and return recvbuf as a flat view."""
    if not isinstance(recvbuf, np.ndarray):
        raise TypeError(f"recvbuf must be a NumPy array, got {type(recvbuf).__name__}")
    if not recvbuf.flags.c_contiguous:
        raise ValueError("recvbuf must be C-contiguous")
    if sendbuf is not MPI.IN_PLACE:
        if not isinstance(sendbuf, np.ndarray):
            raise TypeError(f"sendbuf must be a NumPy array or MPI.IN_PLACE, got {type(sendbuf).__name__}")
        if sendbuf.dtype != recvbuf.dtype or sendbuf.size != recvbuf.size:
            raise ValueError(
                f"sendbuf ({sendbuf.dtype}, {sendbuf.size}) and recvbuf ({recvbuf.dtype}, {recvbuf.size}) differ"
            )
        np.copyto(recvbuf.reshape(-1), sendbuf.reshape(-1))
    return recvbuf.reshape(-1)


def combine(op: MPI.Op, incoming: np.ndarray, mine: np.ndarray, incoming_is_lower: bool) -> None:
    """mine <- incoming (op) mine in rank order: lower ranks' data on the left of a non-commutative op."""
    if incoming_is_lower or op.Is_commutative():
        op.Reduce_local(incoming, mine)  # mine = incoming op mine
    else:
        op.Reduce_local(mine, incoming)  # incoming = mine op incoming
        mine[...] = incoming


def fold_in(comm: MPI.Comm, buf: np.ndarray, op: MPI.Op, pof2: int, tag: int) -> int:
    """Fold the first 2*(p - pof2) ranks pairwise so that pof2 ranks remain; return the new rank or -1.

    Even ranks below 2*rem hand their data to the next odd rank and sit out (new rank -1).
    """
    rank, size = comm.Get_rank(), comm.Get_size()
    rem = size - pof2
    if rank < 2 * rem:
        if rank % 2 == 0:
            comm.Send(buf, dest=rank + 1, tag=tag)
            return -1
        tmp = scratch(buf.dtype, buf.size)
        comm.Recv(tmp, source=rank - 1, tag=tag)
        combine(op, tmp, buf, incoming_is_lower=True)
        return rank // 2
    return rank - rem


def fold_out(comm: MPI.Comm, buf: np.ndarray, pof2: int, tag: int) -> None:
    """Return the result to the ranks that sat out of the power-of-two core."""
    rank, size = comm.Get_rank(), comm.Get_size()
    rem = size - pof2
    if rank < 2 * rem:
        if rank % 2:
            comm.Send(buf, dest=rank - 1, tag=tag)
        else:
            comm.Recv(buf, source=rank + 1, tag=tag)


def real_rank(newrank: int, rem: int) -> int:
    """The communicator rank of power-of-two-core rank `newrank` after `fold_in`."""
    return newrank * 2 + 1 if newrank < rem else newrank + rem
