"""The Allreduce call counter (ardlab.bench.callsizes): exact on calls a program makes itself, on every library (its
counts of training runs: tests/test_callcount.py)."""

import pytest

from ardlab.bench import callsizes
from conftest import mpirun

# Known calls: 3 x 10 float64 sums, one 4-int32 max, one in-place 1000-float32 sum and one non-blocking 3-float32 sum
# (mpi4py makes them through the large-count forms where the library has them: MPICH, Intel MPI).
PROGRAM = """
from ardlab.bench import callsizes
callsizes.load_if_asked()
import numpy as np
from mpi4py import MPI
c = MPI.COMM_WORLD
x = np.ones(10); y = np.empty_like(x)
for _ in range(3):
    c.Allreduce(x, y)
c.Allreduce(np.ones(4, np.int32), np.empty(4, np.int32), op=MPI.MAX)
c.Allreduce(MPI.IN_PLACE, np.ones(1000, np.float32))
c.Iallreduce(np.ones(3, np.float32), np.empty(3, np.float32)).Wait()
"""


def test_counts_exactly_what_a_program_calls(library, tmp_path):
    mpirun(library, 2, ["-c", PROGRAM], extra_env={callsizes.ENV: str(tmp_path)})
    table = callsizes.read(tmp_path, 2)
    assert sorted(map(tuple, table[["bytes", "op", "calls"]].values.tolist())) == [
        (12, "sum", 1), (16, "max", 1), (80, "sum", 3), (4000, "sum", 1)]


def test_ranks_that_disagree_are_an_error(tmp_path):
    (tmp_path / "rank0.csv").write_text("bytes,op,calls\n80,sum,3\n")
    (tmp_path / "rank1.csv").write_text("bytes,op,calls\n80,sum,2\n")
    with pytest.raises(RuntimeError, match="rank 1's Allreduce calls differ"):
        callsizes.read(tmp_path, 2)
    with pytest.raises(RuntimeError, match="rank 2 wrote no Allreduce counts"):
        callsizes.read(tmp_path, 3)

