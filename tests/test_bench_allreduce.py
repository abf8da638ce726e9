"""`ardlab bench allreduce`: real sweeps on every library, tidy CSV, clear errors, atomic output."""

import csv
import os
import signal
import subprocess
import sys
import time

import pytest

from ardlab.comm import algorithms
from ardlab.results import BENCH_COLUMNS, write_csv
from conftest import ardlab

SIZES = "4,64,4K,64K,1M"


def read(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        assert r.fieldnames == BENCH_COLUMNS
        return list(r)


@pytest.mark.parametrize("ranks", [2, 4])
def test_sweep_validate(library, ranks, tmp_path):
    out = tmp_path / "sweep.csv"
    ardlab("bench", "allreduce", "--library", library, "--ranks", ranks, "--sweep", "--validate",
           "--sizes", SIZES, "--iterations", 5, "--warmup", 1, "--output", out, "--no-progress")
    rows = read(out)
    measured = {r["algorithm"] for r in rows}
    table = algorithms(library)
    # Everything applicable on one node is measured; several-node algorithms are left out.
    assert measured == {n for n, a in table.items() if not a.multi_node_only}
    for r in rows:
        assert r["library"] == library and int(r["ranks"]) == ranks and r["nodes"] == "1"
        assert r["implementation"] == table[r["algorithm"]].implementation
        assert 0 < float(r["min_us"]) <= float(r["avg_us"]) <= float(r["max_us"])
        assert r["timer"] == ("c" if r["implementation"] == "native" else "python")
        # Intel MPI names the file it loaded (its CPU's, for the shared-memory fabric of one node); the others none
        if library == "intelmpi":
            assert r["mpi_tuning_file"].startswith("tuning_") and r["mpi_tuning_file"].endswith("_shm.dat")
        else:
            assert r["mpi_tuning_file"] == "builtin"
        if r["implementation"] == "native" and r["algorithm"] != "default":
            for k, v in table[r["algorithm"]].env.items():
                assert f"{k}={v}" in r["knobs"]
    sizes = {int(r["size_bytes"]) for r in rows if r["algorithm"] == "own_ring"}
    assert sizes == {4, 64, 4096, 65536, 1 << 20}


def test_in_mpi_mode_under_own_launcher(tmp_path):
    """The cluster path: the launcher (here mpiexec; srun on clusters) starts `ardlab bench --in-mpi`."""
    from conftest import mpirun

    out = tmp_path / "inner.csv"
    mpirun("openmpi", 3, ["-m", "ardlab.cli", "bench", "allreduce", "--in-mpi", "--algorithm", "ring,own_rabenseifner",
                          "--sizes", "4K,64K", "--iterations", 3, "--validate", "--output", out, "--no-progress"],
           algorithm="ring")
    rows = read(out)
    assert [(r["algorithm"], r["size_bytes"]) for r in rows] == [
        ("ring", "4096"), ("ring", "65536"), ("own_rabenseifner", "4096"), ("own_rabenseifner", "65536")]


def test_in_mpi_rows_carry_the_transport_their_launchers_probe_handed_over(tmp_path):
    """A launch ardlab does not start cannot be probed from inside: `ardlab transport --shell` probes one of the same
    shape and prints the settings that hand its result to the --in-mpi launch's rows; without them the rows say ""."""
    import shlex

    from conftest import ardlab, mpirun

    exports = ardlab("transport", "--library", "mpich", "--ranks", 2, "--shell", timeout=300).stdout
    settings = dict(shlex.split(ln.removeprefix("export "))[0].split("=", 1) for ln in exports.splitlines())
    assert settings == {"ARDLAB_TRANSPORT_INTRA_NODE": "shm:posix", "ARDLAB_TRANSPORT_INTER_NODE": ""}, exports
    argv = ["-m", "ardlab.cli", "bench", "allreduce", "--in-mpi", "--sizes", "4K", "--iterations", 3, "--no-progress",
            "--no-own", "--output"]
    mpirun("mpich", 2, [*argv, tmp_path / "given.csv"], extra_env=settings)
    mpirun("mpich", 2, [*argv, tmp_path / "not.csv"])
    assert {(r["transport_intra_node"], r["transport_inter_node"]) for r in read(tmp_path / "given.csv")} == \
        {("shm:posix", "")}
    assert {(r["transport_intra_node"], r["transport_inter_node"]) for r in read(tmp_path / "not.csv")} == {("", "")}


def test_in_mpi_sweep_runs_the_forced_algorithm_and_ours(tmp_path):
    from conftest import mpirun

    out = tmp_path / "inner-sweep.csv"
    mpirun("mpich", 2, ["-m", "ardlab.cli", "bench", "allreduce", "--in-mpi", "--sweep", "--sizes", "4,4K",
                        "--iterations", 3, "--validate", "--output", out, "--no-progress"], algorithm="tree")
    from ardlab.comm.libraries import OWN_ALGORITHMS

    assert {r["algorithm"] for r in read(out)} == {"tree", *OWN_ALGORITHMS}


def test_in_mpi_refuses_an_unforced_native_algorithm(tmp_path):
    from ardlab.comm import launch

    proc = launch.run("mpich", 2, ["-m", "ardlab.cli", "bench", "allreduce", "--in-mpi", "--algorithm", "ring",
                                   "--sizes", "4K", "--output", tmp_path / "x.csv", "--no-progress"])
    assert proc.returncode != 0
    assert "must be forced at launch; missing settings: MPIR_CVAR_DEVICE_COLLECTIVES=none" in proc.stderr
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.parametrize("args, message", [
    (["--library", "mvapich"], "invalid choice: 'mvapich' (choose from 'mpich', 'openmpi', 'intelmpi')"),
    (["--library", "mpich", "--algorithm", "bogus"], "unknown Allreduce algorithm 'bogus' for MPICH; valid: default"),
    (["--library", "mpich", "--algorithm", "smp"], "'smp' needs several nodes"),
    (["--library", "mpich", "--ranks", "4", "--algorithm", "reduce_scatter_allgather", "--sizes", "4"],
     "needs count >= largest power of two <= ranks (= 4 at 4 ranks); got count=1 (message size 4 B)"),
    (["--library", "mpich", "--sizes", "4,12Q"], "cannot parse message size '12Q'"),
    (["--library", "mpich", "--ranks", "0"], "ranks must be >= 1, got 0"),
    (["--library", "mpich", "--sizes", "6"], "message sizes [6] are not multiples of the float32 element size"),
    ([], "--library is required"),
])
def test_bad_input_is_named(args, message, tmp_path):
    proc = ardlab("bench", "allreduce", *args, "--output", tmp_path / "x.csv", check=False, timeout=60)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not (tmp_path / "x.csv").exists()


def test_killed_run_leaves_no_result(tmp_path):
    out = tmp_path / "killed.csv"
    proc = subprocess.Popen([sys.executable, "-m", "ardlab.cli", "bench", "allreduce", "--library", "mpich",
                             "--ranks", "2", "--sweep", "--sizes", "4:1M", "--output", str(out), "--no-progress"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(3)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".csv")]


def test_atomic_writer_keeps_the_old_file_on_error(tmp_path):
    out = tmp_path / "r.csv"
    out.write_text("previous good result\n")

    def rows():
        yield {c: 1 for c in BENCH_COLUMNS}
        raise RuntimeError("run died midway")

    with pytest.raises(RuntimeError):
        write_csv(out, BENCH_COLUMNS, rows())
    assert out.read_text() == "previous good result\n"
    assert list(tmp_path.iterdir()) == [out]


def test_iterations_follow_the_byte_budget():
    from ardlab.bench.allreduce import iterations_for

    assert iterations_for(4) == 1000 and iterations_for(1 << 20) == 256 and iterations_for(64 << 20) == 10
    assert iterations_for(1 << 20, budget_mib=64) == 64 and iterations_for(4, max_iterations=200) == 200
    assert iterations_for(64 << 20, budget_mib=1) == 10 and iterations_for(1 << 20, 7) == 7


def test_the_measurement_options_are_declared_once():
    """Each of the microbenchmark's measurement options is a field of its Plan: the CLI's options, make_plan's
    keywords and the workflow config's keys (with the field's default and choices) are made from it; an unknown one
    is refused by name."""
    import argparse

    from ardlab.bench import allreduce
    from ardlab.cli import _bench_allreduce_parser
    from ardlab.study.config import schema

    parser = argparse.ArgumentParser()
    _bench_allreduce_parser(parser)
    cli = {a.dest: a for a in parser._actions}
    schema_props = schema()["properties"]["microbench"]["properties"]
    for name, f in allreduce.OPTIONS.items():
        assert cli[name].default == f.default and cli[name].help == f.metadata["help"], name
        if f.metadata["schema"]:
            assert schema_props[name]["default"] == f.default, name
    assert schema_props["dtype"]["enum"] == list(allreduce.DTYPES)
    assert schema_props["iterations"]["type"] == ["integer", "null"] and schema_props["iterations"]["minimum"] == 1
    assert "skip_inapplicable" not in schema_props  # the workflow decides it
    plan = allreduce.make_plan("mpich", algorithm_names=None, sweep=False, sizes=[8], ranks=2, budget_mib=8)
    assert (plan.budget_mib, plan.max_iterations, plan.dtype) == (8, allreduce.MAX_ITERATIONS, "float32")
    with pytest.raises(ValueError, match=r"unknown microbenchmark options \['budget'\]"):
        allreduce.make_plan("mpich", algorithm_names=None, sweep=False, sizes=[8], ranks=2, budget=8)
