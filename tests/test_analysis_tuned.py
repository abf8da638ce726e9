"""Tuned selection files: the library itself picks the measured winner per message size.

Proof as for forced algorithms (the probes of ardlab.comm.probe): with a tuned file that names one algorithm
for small messages and another for large ones, small calls reach the first internal function and large calls
the second (gdb breakpoints; Open MPI and Intel MPI). MPICH's file (its built-in tree with Allreduce
replaced) must keep every other collective working: a validated benchmark across the switch passes.
"""

import csv

import pandas as pd
import pytest

from ardlab.analysis import tuned
from ardlab.comm import library
from ardlab.comm.probe import probe
from conftest import ardlab

SWITCH = 1024  # bytes: the first algorithm up to here, the second above


def bench_rows(lib, small, large):
    """Microbenchmark rows in which `small` wins up to SWITCH bytes and `large` above."""
    rows = []
    for size in (64, SWITCH, 16 * SWITCH):
        for alg in (small, large):
            fast = (alg == small) == (size <= SWITCH)
            rows.append({"library": lib, "ranks": 4, "size_bytes": size, "algorithm": alg,
                         "avg_us": 1.0 if fast else 2.0})
    return pd.DataFrame(rows)


def test_ranges_merge_neighbours_and_open_the_last():
    ranges = tuned.best_ranges(bench_rows("openmpi", "recursive_doubling", "ring"), "openmpi", 4)
    assert ranges == [tuned.Range(0, SWITCH, "recursive_doubling"), tuned.Range(SWITCH + 1, tuned.MAX_BYTES, "ring")]


def test_unselectable_and_default_never_chosen():
    df = bench_rows("mpich", "ccl", "default")
    with pytest.raises(ValueError, match="no MPICH measurements of forced algorithms"):
        tuned.best_ranges(df, "mpich", 4)


@pytest.mark.slow
@pytest.mark.parametrize("lib, small, large", [("openmpi", "recursive_doubling", "ring"),
                                               ("intelmpi", "recursive_doubling", "ring_blocking")])
def test_library_follows_the_tuned_file(lib, small, large, tmp_path):
    path = tuned.write(lib, tuned.best_ranges(bench_rows(lib, small, large), lib, 4), 4,
                       tmp_path / f"sel{library(lib).tuning_suffix}")
    env = library(lib).tuned_env(path)
    algs = library(lib).algorithms
    few = probe(lib, "default", ranks=4, count=16, calls=3, extra_env=env)  # 64 B
    many = probe(lib, "default", ranks=4, count=4096, calls=3, extra_env=env)  # 16 KiB
    assert few[algs[small].symbol] >= 3 and few[algs[large].symbol] == 0, few
    assert many[algs[large].symbol] >= 3 and many[algs[small].symbol] == 0, many


@pytest.mark.parametrize("lib, small, large", [("mpich", "recexch", "reduce_scatter_allgather"),
                                               ("openmpi", "recursive_doubling", "segmented_ring"),
                                               ("intelmpi", "nreduce", "ring")])
def test_tuned_benchmark_runs_and_is_labelled(lib, small, large, tmp_path):
    sel = tmp_path / f"sel{library(lib).tuning_suffix}"
    tuned.write(lib, tuned.best_ranges(bench_rows(lib, small, large), lib, 4), 4, sel)
    out = tmp_path / "tuned.csv"
    ardlab("bench", "allreduce", "--library", lib, "--ranks", 4, "--tuned", sel, "--sizes", "4,64,4K,64K",
           "--validate", "--no-progress", "--output", out)
    rows = list(csv.DictReader(open(out)))
    assert [r["algorithm"] for r in rows] == ["tuned"] * 4
    assert all(k in rows[0]["knobs"] for k in library(lib).tuning_env)


def test_mpich_ranges_stay_off_the_sub_communicators_of_node_aware_algorithms(tmp_path):
    """`smp` calls Allreduce again on the node-roots communicator: there our ranges must not apply (they would
    select `smp` once more, which reduces nothing on a communicator without sub-communicators); the built-in tree
    selects there, and on node communicators too."""
    import json

    rows = bench_rows("mpich", "recexch", "smp")
    path = tuned.write("mpich", tuned.best_ranges(rows, "mpich", 4), 4, tmp_path / "sel.json")
    intra = json.loads(path.read_text())["collective=allreduce"]["comm_type=intra"]
    ours = intra["is_commutative=yes"]["is_op_built_in=yes"]["count=any"]["comm_size<=4"]
    assert list(ours) == ["comm_hierarchy=node_roots", "comm_hierarchy=node", "comm_hierarchy=any"]
    assert ours["comm_hierarchy=node_roots"] == ours["comm_hierarchy=node"] == intra["is_commutative=no"]
    assert ours["comm_hierarchy=any"]["avg_msg_size=any"] == {"algorithm=MPIR_Allreduce_intra_smp": {}}
