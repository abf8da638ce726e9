"""The compiled timing loop (ardlab.bench.timeloop): rows name their timer and thread level, the loop validates,
and it times only the call: a forced algorithm's 4 B time agrees with IMB-MPI1's own figure, measured alternately
in one test (IMB-MPI1 from the impi-rt wheel, under Intel MPI and under MPICH through the MPICH ABI)."""

import csv
import statistics

import pytest

from ardlab.bench import timeloop, vs_imb
from conftest import ardlab

# A forced algorithm's 4 B time from ardlab's compiled loop is within this of IMB-MPI1's (the issue's "a few
# microseconds"): measured 0.06-1.1 us apart at 4 B for every forced algorithm of both libraries, against 1.5-5.7x
# IMB's time with the Python loop (results/benchmarks/vs_imb.md).
AGREE_US = 3.0


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_rows_name_their_timer_and_thread_level(library, tmp_path):
    out = tmp_path / "b.csv"
    ardlab("bench", "allreduce", "--library", library, "--ranks", 2, "--algorithm", "default,own_ring",
           "--sizes", "64,64K", "--iterations", 20, "--validate", "--timer", "c-loop", "--thread-level", "single",
           "--output", out, "--no-progress")
    got = {(r["algorithm"], r["timer"], r["mpi_thread_level"]) for r in rows(out)}
    assert got == {("default", "c-loop", "single"), ("own_ring", "python", "single")}
    ardlab("bench", "allreduce", "--library", library, "--ranks", 2, "--sizes", "64", "--iterations", 5,
           "--output", out, "--no-progress")
    assert [(r["timer"], r["mpi_thread_level"]) for r in rows(out)] == [("c", "multiple")]  # the defaults


def test_bad_timer_and_thread_level_named():
    for flag, value in (("--timer", "fortran"), ("--thread-level", "several")):
        proc = ardlab("bench", "allreduce", "--library", "mpich", "--sizes", "4", flag, value, check=False)
        assert proc.returncode == 2 and repr(value) in proc.stderr, proc.stderr


def test_build_needs_an_mpi_environment(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"no mpi.h under {tmp_path}"):
        timeloop.build(tmp_path)
    assert not list(tmp_path.rglob("*.so*"))


@pytest.mark.parametrize("library", ["intelmpi", "mpich"])
def test_compiled_loop_agrees_with_imb_at_4_bytes(library, tmp_path):
    """Forced recursive doubling at 4 B, 2 ranks, at IMB's thread level: IMB-MPI1, ardlab's compiled loop and its
    Python loop alternately, 3 times each. The compiled loop's median is within AGREE_US of IMB's, and below the
    Python loop's (which times the interpreter and mpi4py's argument handling too)."""
    imb, c, python = [], [], []
    for _ in range(3):
        (row,) = vs_imb.run_imb(library, "recursive_doubling", [4], 2)
        imb.append(row["avg_us"])
        for timer, into in (("c", c), ("python", python)):
            (row,) = vs_imb.run_ardlab(library, "recursive_doubling", [4], 2, timer)
            into.append(row["avg_us"])
    imb, c, python = (statistics.median(v) for v in (imb, c, python))
    assert abs(c - imb) <= AGREE_US, (imb, c)
    assert python > c, (python, c)


def test_imb_runs_on_mpich_through_the_abi():
    env = vs_imb.imb_env("mpich", "default")
    assert "/mpich/lib" in env["LD_LIBRARY_PATH"].split(":")[0]
