"""Benchmark: ardlab.nn against tf.keras training the same architecture in one process, side by side.

    .envs/mpich/bin/python -m ardlab.experiments.vs_tensorflow [--models resnet20,vgg11,alexnet] [--batch 64]
        [--threads 2] [--backends numpy,onednn] [--rounds 3]

Each (model, variant) runs in its own subprocess (so peak memory, ru_maxrss, is its own), in interleaved rounds
(every variant of a model once per round, in a shuffled order; the ratios to tf.keras are taken within a
round): the ardlab.nn model on each backend, and its layer-by-layer tf_keras translation
(ardlab.horovod.models.from_ardlab) with a compiled
(tf.function) SGD step; the same batch, the same thread count (BLAS / TensorFlow intra- and inter-op),
synthetic CIFAR-shaped data, warm-up steps excluded. Prints img/s and peak memory of both and their ratios,
then ardlab.nn's per-layer profile per backend (forward, backward, share of the step). Needs a library environment's
Python
(TensorFlow is there).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ardlab.comm.launch import thread_env


def _ardlab(model_name: str, batch: int, steps: int, warmup: int, backend_name: str = "numpy") -> dict:
    import numpy as np

    from ardlab.nn import backend, initializers, losses, models, optim

    initializers.seed(0)
    with backend.use(backend_name):
        model = models.get(model_name, (32, 32, 3), 10)
    opt = optim.get("sgd", lr=0.01, momentum=0.9)
    loss_fn = losses.get("categorical_crossentropy")
    rng = np.random.default_rng(0)
    x = rng.random((batch, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, batch)
    times = []
    for i in range(warmup + steps):
        if i == warmup:
            model.timing = {}
        t0 = time.perf_counter()
        _, d = loss_fn(model.forward(x, training=True), y)
        model.backward(d)
        opt.step(model)
        times.append(time.perf_counter() - t0)
    per_step = sum(times[warmup:]) / steps
    layers = [(name, f / steps, b / steps) for name, (f, b) in model.timing.items()]
    return {"img_per_s": batch / per_step, "step_s": per_step, "layers": layers}


def _tensorflow(model_name: str, batch: int, steps: int, warmup: int, threads: int) -> dict:
    import numpy as np
    import tensorflow as tf

    from ardlab.horovod import models as kmodels  # sets TF_USE_LEGACY_KERAS first
    from ardlab.nn import models

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    tf.keras.utils.set_random_seed(0)
    model = kmodels.from_ardlab(models.get(model_name, (32, 32, 3), 10))
    opt = tf.keras.optimizers.SGD(0.01, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    step = kmodels.plain_step(tf, model, loss_fn, opt)

    rng = np.random.default_rng(0)
    x = tf.constant(rng.random((batch, 32, 32, 3), dtype=np.float32))
    y = tf.constant(rng.integers(0, 10, batch))
    times = []
    for _ in range(warmup + steps):
        t0 = time.perf_counter()
        float(step(x, y))
        times.append(time.perf_counter() - t0)
    per_step = sum(times[warmup:]) / steps
    return {"img_per_s": batch / per_step, "step_s": per_step}


def _child(args) -> int:
    import resource

    if args.framework == "ardlab.nn":
        out = _ardlab(args.model, args.batch, args.steps, args.warmup, args.backend)
    else:
        out = _tensorflow(args.model, args.batch, args.steps, args.warmup, args.threads)
    out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out))
    return 0


VARIANTS = {"numpy": "ardlab.nn/numpy", "onednn": "ardlab.nn/onednn"}  # ardlab.nn's backends; and tensorflow


def _run_child(fw: str, backend: str, m: str, a, env) -> dict:
    proc = subprocess.run([sys.executable, "-m", "ardlab.experiments.vs_tensorflow", "--child", fw, "--backend",
                           backend, "--model", m, "--batch", str(a.batch), "--threads", str(a.threads), "--steps",
                           str(a.steps), "--warmup", str(a.warmup)], capture_output=True, text=True, env=env)
    line = [s for s in proc.stdout.splitlines() if s.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        raise RuntimeError(f"{fw} ({backend}) {m} failed:\n{proc.stderr[-2000:]}")
    return json.loads(line[0][7:])


def main(argv: list[str] | None = None) -> int:
    import random
    import statistics

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="resnet20,vgg11,alexnet")
    p.add_argument("--backends", default="numpy,onednn", help="ardlab.nn backends to measure beside tf.keras")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds: each runs every variant of a model "
                   "once, in a shuffled order; ratios are taken within a round")
    p.add_argument("--seed", type=int, default=0, help="seed of the rounds' orders")
    p.add_argument("--output", metavar="DIR", help="also write nn_vs_tensorflow.{csv,md} and "
                   "nn_layer_profile.{csv,md} there (e.g. results/experiments)")
    p.add_argument("--child", choices=["ardlab.nn", "tensorflow"], dest="framework", help=argparse.SUPPRESS)
    p.add_argument("--backend", default="numpy", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.framework:
        return _child(a)
    backends = a.backends.split(",")
    bad = [b for b in backends if b not in VARIANTS]
    if bad:
        raise SystemExit(f"unknown backend {bad[0]!r}; valid: {', '.join(VARIANTS)}")
    if a.rounds < 1:
        raise SystemExit(f"--rounds must be >= 1, got {a.rounds}")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **thread_env(a.threads)}
    print(f"batch {a.batch}, {a.threads} threads, CIFAR shapes, {a.steps} timed steps after {a.warmup} warm-up, "
          f"{a.rounds} interleaved rounds (ratios within a round; median [min, max] over rounds)")
    rng = random.Random(a.seed)
    profiles, summary, layer_rows = {}, [], []
    for m in a.models.split(","):
        variants = [("ardlab.nn", b) for b in backends] + [("tensorflow", "tensorflow")]
        runs = {v: [] for v in variants}
        for _ in range(a.rounds):
            order = variants[:]
            rng.shuffle(order)
            for fw, b in order:
                runs[fw, b].append(_run_child(fw, b if fw == "ardlab.nn" else "numpy", m, a, env))
        tf = runs["tensorflow", "tensorflow"]
        for b in backends:
            nn = runs["ardlab.nn", b]
            ratio = [n["img_per_s"] / t["img_per_s"] for n, t in zip(nn, tf)]
            mem = [n["peak_mib"] / t["peak_mib"] for n, t in zip(nn, tf)]
            row = {"model": m, "backend": b, "batch": a.batch, "threads": a.threads, "rounds": a.rounds,
                   "nn_img_per_s": statistics.median(n["img_per_s"] for n in nn),
                   "tf_img_per_s": statistics.median(t["img_per_s"] for t in tf),
                   "nn_over_tf": statistics.median(ratio), "nn_over_tf_min": min(ratio), "nn_over_tf_max": max(ratio),
                   "nn_peak_mib": statistics.median(n["peak_mib"] for n in nn),
                   "tf_peak_mib": statistics.median(t["peak_mib"] for t in tf),
                   "nn_over_tf_peak_memory": statistics.median(mem)}
            summary.append(row)
            profiles[m, b] = nn[-1]
            print(f"{m:10s} {VARIANTS[b]:17s} {row['nn_img_per_s']:8.1f} img/s, tf.keras {row['tf_img_per_s']:8.1f}: "
                  f"{row['nn_over_tf']:.2f}x [{row['nn_over_tf_min']:.2f}, {row['nn_over_tf_max']:.2f}]; peak memory "
                  f"{row['nn_peak_mib']:.0f} / {row['tf_peak_mib']:.0f} MiB ({row['nn_over_tf_peak_memory']:.2f}x)",
                  flush=True)
    for (m, b), nn in profiles.items():
        total = nn["step_s"]
        print(f"\n{VARIANTS[b]} {m}: where a step goes ({total * 1e3:.1f} ms; layers over 2% of the step)")
        for name, f, bw in sorted(nn["layers"], key=lambda r: -(r[1] + r[2])):
            layer_rows.append({"model": m, "backend": b, "layer": name, "forward_ms": f * 1e3, "backward_ms": bw * 1e3,
                               "share_of_step": (f + bw) / total})
            if (f + bw) / total >= 0.02:
                print(f"  {name:28s} forward {f * 1e3:7.2f} ms  backward {bw * 1e3:7.2f} ms  "
                      f"{100 * (f + bw) / total:5.1f}%")
        rest = total - sum(f + bw for _, f, bw in nn["layers"])
        print(f"  {'(loss, update, other)':28s} {rest * 1e3:7.2f} ms  {100 * rest / total:5.1f}%")
    if a.output:
        from ardlab.results import save_table

        for path in save_table(summary, Path(a.output) / "nn_vs_tensorflow.csv") + save_table(
                layer_rows, Path(a.output) / "nn_layer_profile.csv"):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
