"""The compiled timing loop (ardlab.bench.timeloop): rows name their timer and thread level, the loop validates,
and it times only the call: a forced algorithm's 4 B time agrees with IMB-MPI1's own figure, measured alternately
in one test (IMB-MPI1 from the impi-rt wheel, under Intel MPI and under MPICH through the MPICH ABI)."""

import csv
import statistics
import subprocess
import sys

import pytest

from ardlab.bench import timeloop
from ardlab.experiments import vs_imb
from conftest import ardlab

# A forced algorithm's 4 B time from ardlab's compiled loop is within this of IMB-MPI1's (the issue's "a few
# microseconds"): measured 0.06-1.1 us apart at 4 B for every forced algorithm of both libraries, against 1.5-5.7x
# IMB's time with the Python loop (results/experiments/vs_imb/vs_imb.md).
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
    # the buffers as IMB's malloc gets them (no NumPy huge-page advice), said in every row
    assert all("NUMPY_MADVISE_HUGEPAGE=0" in r["knobs"].split(";") for r in rows(out))
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


def test_imb_arguments_replace_and_add_flags():
    args = vs_imb.imb_arguments(4, ("-sync", "0", "-off_cache", "-1"))
    assert args[args.index("-npmin") + 1] == "4"
    assert args[args.index("-sync") + 1] == "0" and args.count("-sync") == 1
    assert args[-2:] == ["-off_cache", "-1"]


def test_agreement_needs_the_ratio_within_ten_percent_and_a_difference_its_interval():
    assert vs_imb.agreement(1.08, 0.7, 1.5) == "within 10%"
    assert vs_imb.agreement(1.3, 1.15, 1.6) == "differs"
    assert vs_imb.agreement(0.7, 0.5, 0.85) == "differs"
    assert vs_imb.agreement(1.3, 0.95, 1.6) == "not resolved"
    assert vs_imb.agreement(1.3, float("nan"), float("nan")) == "not resolved"


def test_unknown_tools_are_named():
    proc = subprocess.run([sys.executable, "-m", "ardlab.experiments.vs_imb", "--tools", "imb,osu"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "'osu'" in proc.stderr, proc.stderr


def test_a_run_can_keep_some_algorithms_and_names_one_it_does_not_check():
    assert vs_imb.cross_checked(["intelmpi", "mpich"], ("recursive_doubling",)) == [
        ("intelmpi", "recursive_doubling"), ("mpich", "recursive_doubling")]
    assert len(vs_imb.cross_checked(["mpich"])) == len(vs_imb.ALGORITHMS["mpich"])
    proc = subprocess.run([sys.executable, "-m", "ardlab.experiments.vs_imb", "--libraries", "intelmpi", "--algorithms",
                           "reduce_bcast,rabenseifner"], capture_output=True, text=True)
    assert proc.returncode == 2 and "['rabenseifner']" in proc.stderr and "intelmpi: default" in proc.stderr, \
        proc.stderr


def test_pooled_runs_keep_each_runs_rounds_apart():
    import pandas as pd

    one = pd.DataFrame({"tool": ["imb", "c", "imb", "c"], "round": [0, 0, 1, 1], "avg_us": [1.0, 1.1, 1.0, 1.2]})
    two = pd.DataFrame({"tool": ["imb", "c"], "round": [0, 0], "avg_us": [2.0, 2.1]})
    pooled = vs_imb.pooled_rounds([one, two])
    assert pooled["round"].tolist() == [0, 0, 1, 1, 2, 2]
    assert pooled.avg_us.tolist() == [1.0, 1.1, 1.0, 1.2, 2.0, 2.1]
