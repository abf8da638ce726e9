"""Run under mpiexec: order-preserving algorithms give MPI's answer for a non-commutative op.

The op composes 2x2 matrices (non-commutative); ring must refuse it with a clear error.
"""

import numpy as np
from mpi4py import MPI

from ardlab.comm.own import get


def matmul(inbuf, inoutbuf, datatype):
    a = np.frombuffer(inbuf, dtype=np.float64).reshape(-1, 2, 2)
    b = np.frombuffer(inoutbuf, dtype=np.float64).reshape(-1, 2, 2)
    b[...] = a @ b


comm = MPI.COMM_WORLD
rank = comm.Get_rank()
op = MPI.Op.Create(matmul, commute=False)
rng = np.random.default_rng(rank)
x = rng.standard_normal((5, 2, 2))
ref = np.empty_like(x)
comm.Allreduce(x, ref, op=op)
for name, label in (("own_recursive_doubling", "doubling"), ("own_binomial", "binomial")):
    out = np.empty_like(x)
    get(name)(comm, x, out, op)
    assert np.allclose(out, ref, rtol=1e-12, atol=1e-12), (name, rank)
    if rank == 0:
        print(label, "ok", flush=True)
try:
    get("own_ring")(comm, x, np.empty_like(x), op)
except ValueError as e:
    assert "needs a commutative operation" in str(e)
    if rank == 0:
        print("ring rejected", flush=True)
