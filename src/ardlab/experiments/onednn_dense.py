"""Benchmark: the onednn backend's training step with Dense on oneDNN (its matmuls) against Dense on NumPy's BLAS.

    .envs/mpich/bin/python -m ardlab.experiments.onednn_dense [--models vgg11,alexnet] [--batch 64] [--threads 2]
        [--rounds 6] [--output results/experiments/nn/nn_onednn_dense.csv]

Why it is its own measurement: on the onednn backend the convolutions run in oneDNN's OpenMP threads; a Dense
layer on BLAS runs in OpenBLAS's own threads, and each pool's threads spin for a while after their work, taking
the cores from the other. Each (model, Dense placement) runs in its own process (so the other's threads do not
exist there), in interleaved rounds (a shuffled order per round; the ratio taken within the round), the same
batch, the same thread count for both pools, warm-up steps excluded. Prints the median step of each and the
ratio BLAS / oneDNN (above 1: the oneDNN Dense is faster), median [min, max] over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

from ardlab.comm.launch import thread_env
from ardlab.experiments import add_round_arguments, save_rows, spread


def _child(model_name: str, dense: str, batch: int, steps: int, warmup: int) -> float:
    import numpy as np

    from ardlab.nn import backend, initializers, losses, models, optim
    from ardlab.nn.layers.base import BACKEND_VARIANTS
    from ardlab.nn.layers.dense import Dense

    if dense == "blas":  # this process's onednn models keep NumPy's Dense
        BACKEND_VARIANTS.pop((Dense, "onednn"))
    initializers.seed(0)
    with backend.use("onednn"):
        model = models.get(model_name, (32, 32, 3), 10)
    kinds = {type(layer).__name__ for layer in model.layers if isinstance(layer, Dense)}
    if kinds != {"OnednnDense" if dense == "onednn" else "Dense"}:
        raise RuntimeError(f"{model_name}: Dense layers are {kinds}, expected them on {dense}")
    opt, loss_fn = optim.get("sgd", lr=0.01, momentum=0.9), losses.get("categorical_crossentropy")
    rng = np.random.default_rng(0)
    x, y = rng.random((batch, 32, 32, 3), dtype=np.float32), rng.integers(0, 10, batch)
    times = []
    for _ in range(warmup + steps):
        t0 = time.perf_counter()
        _, d = loss_fn(model.forward(x, training=True), y)
        model.backward(d)
        opt.step(model)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[warmup:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="vgg11,alexnet")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    add_round_arguments(p, 6)
    p.add_argument("--child", nargs=2, metavar=("MODEL", "DENSE"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(_child(*a.child, a.batch, a.steps, a.warmup)))
        return 0
    if a.rounds < 1:
        raise SystemExit(f"--rounds must be >= 1, got {a.rounds}")
    env = {**os.environ, **thread_env(a.threads)}
    rng, rows = random.Random(a.seed), []
    print(f"batch {a.batch}, {a.threads} threads (OpenMP and BLAS), {a.steps} timed steps after {a.warmup}, "
          f"{a.rounds} interleaved rounds")
    for m in a.models.split(","):
        steps = {"onednn": [], "blas": []}
        for _ in range(a.rounds):
            order = list(steps)
            rng.shuffle(order)
            for dense in order:
                proc = subprocess.run([sys.executable, "-m", "ardlab.experiments.onednn_dense", "--child", m, dense,
                                       "--batch", str(a.batch), "--steps", str(a.steps), "--warmup", str(a.warmup)],
                                      capture_output=True, text=True, env=env)
                line = [s for s in proc.stdout.splitlines() if s.startswith("RESULT ")]
                if proc.returncode != 0 or not line:
                    raise RuntimeError(f"{m} (Dense on {dense}) failed:\n{proc.stderr[-2000:]}")
                steps[dense].append(json.loads(line[0][7:]))
        ratio = [b / o for b, o in zip(steps["blas"], steps["onednn"])]
        row = {"model": m, "batch": a.batch, "threads": a.threads, "rounds": a.rounds,
               "step_ms_dense_onednn": 1e3 * statistics.median(steps["onednn"]),
               "step_ms_dense_blas": 1e3 * statistics.median(steps["blas"]),
               **spread("blas_over_onednn", ratio)}
        rows.append(row)
        print(f"{m:9s} step with Dense on oneDNN {row['step_ms_dense_onednn']:.0f} ms, on BLAS "
              f"{row['step_ms_dense_blas']:.0f} ms: {row['blas_over_onednn']:.2f}x [{min(ratio):.2f}, "
              f"{max(ratio):.2f}]", flush=True)
    save_rows(rows, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
