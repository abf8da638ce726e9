"""Data parallelism: 2 and 3 ranks with global batch B reach the weights of 1 rank with batch B.

Every parallel mode (blocking, non-blocking, bucketed) with the native Allreduce and our own, on both backends;
numpy in float64, tolerance rtol 1e-9 / atol 1e-11 (only the summation order differs); onednn in float32 (its
only precision), rtol 1e-4 / atol 1e-6. Also: digits convergence >= 97%.
"""

import csv

import numpy as np
import pytest

from conftest import PROGRAMS, ardlab, mpirun

TOLERANCE = {"numpy": {"rtol": 1e-9, "atol": 1e-11}, "onednn": {"rtol": 1e-4, "atol": 1e-6}}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    refs = {}

    def get(backend):
        if backend not in refs:
            path = tmp_path_factory.mktemp("dp") / f"ref-{backend}.npz"
            mpirun("mpich", 1, [PROGRAMS / "check_data_parallel.py", path, backend])
            refs[backend] = dict(np.load(path))
        return refs[backend]
    return get


@pytest.mark.parametrize("library, ranks, backend", [("mpich", 2, "numpy"), ("mpich", 3, "numpy"),
                                                     ("openmpi", 3, "numpy"), ("intelmpi", 2, "numpy"),
                                                     ("mpich", 2, "onednn"), ("openmpi", 3, "onednn")])
def test_data_parallel_equals_one_process(reference, library, ranks, backend, tmp_path):
    path = tmp_path / "dp.npz"
    mpirun(library, ranks, [PROGRAMS / "check_data_parallel.py", path, backend])
    got, want = dict(np.load(path)), reference(backend)
    assert got.keys() == want.keys()
    for key in got:
        np.testing.assert_allclose(got[key], want[key], err_msg=key, **TOLERANCE[backend])


@pytest.mark.parametrize("library, algorithm, mode, backend", [("openmpi", "own_ring", "nonblocking", "onednn"),
                                                               ("mpich", "ring", "blocking", "numpy"),
                                                               ("intelmpi", "default", "bucketed", None)])
def test_train_row_names_the_allreduce_used(library, algorithm, mode, backend, tmp_path):
    """The row names library, algorithm, mode and the backend that ran (no --backend: auto, which is onednn in
    these environments: the wheel is in every one)."""
    out = tmp_path / "row.csv"
    ardlab("train", "--library", library, "--ranks", 2, "--algorithm", algorithm, "--parallel-mode", mode,
           "--model", "simplecnn", "--dataset", "synthetic", "--input-shape", "8x8x1", "--global-batch", 16,
           "--steps", 3, "--no-progress", *(["--backend", backend] if backend else []), "--output", out)
    (row,) = list(csv.DictReader(open(out)))
    assert (row["library"], row["algorithm"], row["parallel_mode"], row["backend"]) == (library, algorithm, mode,
                                                                                         backend or "onednn")
    if algorithm == "ring":
        assert "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring" in row["knobs"]


def test_digits_converges(tmp_path):
    out = tmp_path / "row.csv"
    ardlab("train", "--library", "mpich", "--ranks", 2, "--model", "simplecnn", "--dataset", "digits",
           "--global-batch", 32, "--epochs", 6, "--optimizer", "adam", "--lr", 0.002, "--no-progress",
           "--parallel-mode", "bucketed", "--output", out)
    (row,) = list(csv.DictReader(open(out)))
    assert row["framework"] == "ardlab.nn" and row["ranks"] == "2" and row["parallel_mode"] == "bucketed"
    assert float(row["final_accuracy"]) >= 0.97, row
    assert float(row["final_accuracy"]) <= float(row["final_top5_accuracy"]) <= 1, row  # top-5 on the test set


@pytest.mark.parametrize("args, message", [
    (["--model", "resnet7"], "argument --model: invalid choice: 'resnet7'"),
    (["--dataset", "imagenet22k"], "argument --dataset: invalid choice: 'imagenet22k'"),
    (["--optimizer", "lion"], "argument --optimizer: invalid choice: 'lion'"),
    (["--global-batch", "5"], "global batch 5 is not divisible by 2 ranks"),
    (["--dataset", "mnist"], "needs --data-path"),
    (["--dataset", "cifar10", "--data-path", "/nonexistent"], "no CIFAR-10 binary batches"),
    (["--lr", "1e9", "--optimizer", "sgd"], "loss is"),
    (["--parallel-mode", "async"], "argument --parallel-mode: invalid choice: 'async'"),
    (["--algorithm", "bogus"], "unknown Allreduce algorithm 'bogus' for MPICH"),
])
def test_bad_training_input(args, message, tmp_path):
    base = ["train", "--library", "mpich", "--ranks", 2, "--model", "simplecnn", "--dataset", "digits",
            "--global-batch", 32, "--steps", 30, "--no-progress", "--output", tmp_path / "r.csv"]
    proc = ardlab(*base, *args, check=False, timeout=120)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert not (tmp_path / "r.csv").exists()
