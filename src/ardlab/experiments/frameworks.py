"""Benchmark: ardlab.nn against TensorFlow + Horovod on the same architecture, side by side in one run.

    python -m ardlab.experiments.frameworks [--model alexnet] [--ranks 1,2] [--libraries mpich,openmpi,intelmpi]

For each library and rank count, trains the model once with `ardlab train` (bucketed, default algorithm) and
once with `ardlab train-tf`, synthetic CIFAR-shaped data, the same batch per rank and threads per rank, and
prints img/s and the ratios: ardlab.nn / TF per configuration, and each library's Horovod img/s over the
first library's. Absolute numbers depend on the (shared, noisy) machine; compare the ratios.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

from ardlab.comm.libraries import LIBRARIES


def _row(args: list[str], out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "ardlab.cli", *args, "--no-progress", "--output", str(out)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ardlab {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    with open(out) as f:
        return next(csv.DictReader(f))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="alexnet")
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--libraries", default=",".join(LIBRARIES))
    p.add_argument("--batch-per-rank", type=int, default=32)
    p.add_argument("--threads", type=int, default=1, help="threads per rank")
    p.add_argument("--steps", type=int, default=12, help="timed steps per run (plus warm-up)")
    a = p.parse_args(argv)
    ranks = [int(r) for r in a.ranks.split(",")]
    libs = a.libraries.split(",")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for lib in libs:
            for n in ranks:
                common = ["--library", lib, "--ranks", str(n), "--model", a.model, "--threads", str(a.threads),
                          "--batch-per-rank", str(a.batch_per_rank)]
                nn = _row(["train", *common, "--dataset", "synthetic", "--parallel-mode", "bucketed",
                           "--steps", str(a.steps + 1)], Path(tmp) / "nn.csv")
                tf = _row(["train-tf", *common, "--warmup-batches", "2", "--iterations", str(max(2, a.steps // 4)),
                           "--batches-per-iter", "4"], Path(tmp) / "tf.csv")
                results[lib, n] = (float(nn["img_per_s"]), float(tf["img_per_s"]), float(tf["img_per_s_ci95"]))
                print(f"{lib:9s} x{n}: ardlab.nn {results[lib, n][0]:8.1f} img/s   TF+Horovod "
                      f"{results[lib, n][1]:8.1f} +- {results[lib, n][2]:.1f} img/s   ratio nn/TF "
                      f"{results[lib, n][0] / results[lib, n][1]:.2f}", flush=True)
    print(f"\nHorovod img/s relative to {libs[0]} ({a.model}, batch {a.batch_per_rank}/rank, {a.threads} thread/rank):")
    for n in ranks:
        base = results[libs[0], n][1]
        print(f"  x{n}: " + "  ".join(f"{lib} {results[lib, n][1] / base:.2f}" for lib in libs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
