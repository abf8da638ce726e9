"""Run under mpiexec: every own algorithm against MPI's Allreduce, many counts, dtypes and ops.

Prints 'OK <n> checks' on rank 0; any mismatch raises (non-zero exit through MPI abort).
"""

import sys

import numpy as np
from mpi4py import MPI

from ardlab.comm import OWN_ALGORITHMS
from ardlab.comm.own import get

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
counts = [0, 1, 2, 3, size - 1, size, size + 1, 7, 31, 1000, 4097]
dtypes = [np.float32, np.float64, np.int32, np.int64]
ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
names = sys.argv[1:] or list(OWN_ALGORITHMS)
checks = 0
for name in names:
    allreduce = get(name)
    for count in sorted(set(c for c in counts if c >= 0)):
        for dtype in dtypes:
            for opname, op in ops.items():
                rng = np.random.default_rng(1000 * rank + count)
                if np.issubdtype(dtype, np.integer):
                    x = rng.integers(-1000, 1000, count).astype(dtype)
                else:
                    x = rng.standard_normal(count).astype(dtype)
                ref = np.empty_like(x)
                comm.Allreduce(x, ref, op=op)
                out = np.full_like(x, 99)
                allreduce(comm, x, out, op=op)
                inplace = x.copy()
                allreduce(comm, MPI.IN_PLACE, inplace, op=op)
                for got, how in ((out, "out of place"), (inplace, "in place")):
                    if np.issubdtype(dtype, np.integer) or opname != "sum":
                        ok = np.array_equal(got, ref)
                    else:
                        tol = 1e-5 if dtype == np.float32 else 1e-12
                        ok = np.allclose(got, ref, rtol=tol, atol=tol * size)
                    if not ok:
                        print(f"FAIL {name} {how} count={count} dtype={np.dtype(dtype).name} op={opname} "
                              f"rank={rank}/{size}", flush=True)
                        comm.Abort(1)
                    checks += 1
comm.Barrier()
if rank == 0:
    print(f"OK {checks} checks on {size} ranks", flush=True)
