"""TensorFlow + Horovod (`ardlab train-tf`) on each MPI library, with real mpiexec runs.

- Weights after k steps on 2-3 ranks are bitwise identical across ranks and equal to one process on the global
  batch (float32; rtol 1e-4, atol 1e-5: only the summation order differs).
- The forced MPI algorithm is the one Horovod's Allreduce reaches (the foundation's probes, around train-tf).
- Rows for default and two forced algorithms per library; clear errors for bad input.
"""

import csv
import sys

import numpy as np
import pytest

from ardlab.comm import library as lib_entry
from ardlab.comm.probe import probe
from conftest import ardlab

pytestmark = pytest.mark.tf

GLOBAL_BATCH = 24
STEPS = ["--warmup-batches", 1, "--iterations", 2, "--batches-per-iter", 2]  # 5 steps


def train_tf(library, ranks, tmp_path, *extra, algorithm="default", check=True):
    out = tmp_path / f"{library}-{ranks}-{algorithm}.csv"
    proc = ardlab("train-tf", "--library", library, "--ranks", ranks, "--algorithm", algorithm, "--threads", 1,
                  "--model", "simplecnn", "--dataset", "digits", "--batch-per-rank", GLOBAL_BATCH // ranks,
                  *STEPS, "--no-progress", "--output", out, *extra, check=check, timeout=600)
    return proc, out


def weights(path):
    with np.load(path) as f:
        return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tf1")
    train_tf("mpich", 1, tmp, "--save-weights", tmp / "w{rank}.npz")
    return weights(tmp / "w0.npz")


@pytest.mark.parametrize("library, ranks", [
    ("mpich", 2), pytest.param("openmpi", 3, marks=pytest.mark.slow), ("intelmpi", 2)])
def test_weights_equal_across_ranks_and_one_process(one_process, library, ranks, tmp_path):
    train_tf(library, ranks, tmp_path, "--save-weights", tmp_path / "w{rank}.npz")
    per_rank = [weights(tmp_path / f"w{r}.npz") for r in range(ranks)]
    for r in range(1, ranks):
        for a, b in zip(per_rank[0], per_rank[r]):
            np.testing.assert_array_equal(a, b, err_msg=f"rank {r} differs from rank 0")
    assert len(per_rank[0]) == len(one_process)
    for got, ref in zip(per_rank[0], one_process):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)
    assert not np.allclose(per_rank[0][0], weights_at_start(library, tmp_path)[0]), "training did not move"


def weights_at_start(library, tmp_path):
    train_tf(library, 1, tmp_path / "start", "--save-weights", tmp_path / "start" / "w.npz", "--lr", 0)
    return weights(tmp_path / "start" / "w.npz")


def _program():
    return list(map(str, ["-m", "ardlab.cli", "train-tf", "--in-mpi", "--model", "simplecnn", "--dataset", "digits",
                          "--batch-per-rank", 8, "--threads", 1, *STEPS, "--no-progress"]))


@pytest.mark.slow
@pytest.mark.parametrize("library_name, forced, other", [
    ("intelmpi", "ring", "recursive_doubling"),
])
def test_forced_algorithm_reaches_horovod_allreduce(library_name, forced, other):
    # Horovod's own tiny control Allreduces (bit vectors) may take another path in the library; the
    # gradient Allreduce, at least one fused call per step, must reach the forced function, and must not
    # when another algorithm is forced. Open MPI's: test_driver_switched's Horovod test launches it forced to ring and
    # to recursive_doubling under the same breakpoints (its references) and requires each launch to reach its own
    # function only.
    sym = lib_entry(library_name).algorithms[forced].symbol
    env = {"HOROVOD_CACHE_CAPACITY": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    hits = probe(library_name, forced, ranks=2, program=_program(), timeout=600, extra_env=env)
    assert hits[sym] >= 5, hits
    hits = probe(library_name, other, ranks=2, program=_program(), timeout=600, extra_env=env)
    assert hits[sym] == 0, hits


def test_forced_algorithm_reaches_horovod_allreduce_mpich():
    # 'smp' needs several nodes: on one node MPICH reports, per call, that it cannot be applied.
    hits = probe("mpich", "smp", ranks=2, program=_program(), timeout=600,
                 extra_env={"HOROVOD_CACHE_CAPACITY": "0", "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert hits["fallback:smp"] >= 5, hits
    assert probe("mpich", "default", ranks=2, program=_program(), timeout=600,
                 extra_env={"TF_CPP_MIN_LOG_LEVEL": "2"}) == {}


ROWS = [("mpich", "default"), ("mpich", "ring"), ("mpich", "recursive_doubling"),
        ("openmpi", "default"), ("openmpi", "ring"), ("openmpi", "rabenseifner"),
        ("intelmpi", "default"), ("intelmpi", "ring"), ("intelmpi", "recursive_doubling")]


@pytest.mark.parametrize("library, algorithm", [
    pytest.param(lib, alg, marks=() if alg == "default" else pytest.mark.slow) for lib, alg in ROWS])
def test_summary_row_per_library_and_algorithm(library, algorithm, tmp_path):
    _, out = train_tf(library, 2, tmp_path, "--fusion-threshold-mb", 4, "--compute-batches", 2, algorithm=algorithm)
    (row,) = list(csv.DictReader(open(out)))
    assert (row["framework"], row["library"], row["algorithm"], row["ranks"]) == ("tensorflow", library, algorithm, "2")
    assert float(row["img_per_s"]) > 0 and row["steps"] == "5"
    # the timed batches' seconds split into compute alone (measured after them) and what the Allreduce added (a
    # difference of two timings: on one node it is small, and noise may make it negative)
    assert float(row["compute_s"]) > 0 and float(row["allreduce_s"]) > -float(row["compute_s"])
    assert 0 <= float(row["final_accuracy"]) <= float(row["final_top5_accuracy"]) <= 1
    assert f"HOROVOD_FUSION_THRESHOLD={4 << 20}" in row["knobs"]


@pytest.mark.parametrize("args, message", [
    (["--model", "resnet7"], "argument --model: invalid choice: 'resnet7'"),
    (["--algorithm", "own_ring"], "only the library's native algorithms"),
    (["--algorithm", "warp"], "warp"),
])
def test_bad_input_before_launch(args, message, tmp_path):
    proc = ardlab("train-tf", "--library", "mpich", "--ranks", 2, *args, check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


def test_image_too_small_for_model(tmp_path):
    proc = ardlab("train-tf", "--library", "mpich", "--ranks", 1, "--model", "keras_inceptionv3", "--image-size", 32,
                  "--no-progress", check=False)
    assert proc.returncode != 0
    assert "model keras_inceptionv3 needs images of at least 75x75" in proc.stderr + proc.stdout


def test_environment_without_horovod():
    # The driver environment (.envs/tools) has no TensorFlow: the error says so and how to fix it.
    proc = ardlab("train-tf", "--in-mpi", "--model", "simplecnn", check=False)
    assert proc.returncode == 2 and "has no TensorFlow/Horovod" in proc.stderr, proc.stderr
    assert sys.prefix in proc.stderr


def test_run_settings_join_horovods_knobs():
    """A run's own settings (a config's library_env) reach the plan beside Horovod's knobs; one that is a Horovod
    knob is refused (which of the two would win is not the caller's to guess)."""
    from ardlab.horovod.train import plan as run_plan

    plan = run_plan("openmpi", ranks=2, options={"model": "simplecnn"}, knobs={"fusion_threshold_mb": 64.0},
                    env={"OMPI_MCA_btl_tcp_eager_limit": "8388608"})
    assert plan.env["OMPI_MCA_btl_tcp_eager_limit"] == "8388608" and plan.env["HOROVOD_AUTOTUNE"] == "0"
    with pytest.raises(ValueError, match="HOROVOD_AUTOTUNE is Horovod's knob"):
        run_plan("openmpi", ranks=2, options={"model": "simplecnn"}, env={"HOROVOD_AUTOTUNE": "1"})
