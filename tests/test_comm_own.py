"""Our Allreduce algorithms against MPI's own, with real mpiexec on 1-6 ranks, every library.

The program checks counts 0, 1, p-1, p, p+1, odd and large counts; float32/64 and int32/64; SUM, MAX,
MIN; in place and out of place. Integers must match exactly, floats to 1e-5 (f32) / 1e-12 (f64).
"""

import pytest

from conftest import PROGRAMS, mpirun

PROGRAM = PROGRAMS / "check_own_allreduce.py"


@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 5, 6])
def test_own_algorithms_match_mpi_on_mpich(ranks):
    proc = mpirun("mpich", ranks, [PROGRAM])
    assert "OK" in proc.stdout and f"on {ranks} ranks" in proc.stdout


@pytest.mark.parametrize("library", ["openmpi", "intelmpi"])
@pytest.mark.parametrize("ranks", [3, 4])
def test_own_algorithms_match_mpi_on_other_libraries(library, ranks):
    proc = mpirun(library, ranks, [PROGRAM])
    assert f"on {ranks} ranks" in proc.stdout


@pytest.mark.parametrize("ranks", [2, 3, 5, 6])
def test_noncommutative_op_rejected_by_ring_and_kept_in_order_by_doubling(ranks):
    proc = mpirun("mpich", ranks, [PROGRAMS / "check_noncommutative.py"])
    assert "ring rejected" in proc.stdout and "doubling ok" in proc.stdout and "binomial ok" in proc.stdout
