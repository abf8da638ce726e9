"""Benchmark ardlab.nn on one process: training img/s per model and backend, and convolution GFLOP/s vs NumPy's sgemm.

    python -m ardlab.experiments.nn_speed [--models alexnet,vgg11,resnet20] [--backends numpy,onednn] [--batch 64]
        [--steps 5] [--threads 2] [--rounds 3]

Everything is measured in this one run, in interleaved rounds: each round measures sgemm (2048^3, best of 5 calls)
and then every (model, backend) in a shuffled order, so each ratio (conv GFLOP/s / sgemm GFLOP/s) is taken within
a round; the table has the median and [min, max] over rounds. --threads sets the BLAS/OpenMP thread variables
(``ardlab.comm.launch.THREAD_VARIABLES``) before NumPy loads. Convolution time per step comes from the model's own
per-layer timing (``Model.timing``); a ReLU fused into a convolution (onednn backend) counts as the convolution's.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

from ardlab.comm.launch import thread_env
from ardlab.experiments import add_round_arguments, save_rows


def _sgemm(np, rng) -> float:
    m = k = n = 2048
    A, B = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    A @ B
    best = 0.0
    for _ in range(5):  # the best call: another tenant's burst must not lower the reference
        t = time.perf_counter()
        A @ B
        best = max(best, 2 * m * n * k / (time.perf_counter() - t) / 1e9)
    return best


def _measure(name: str, backend_name: str, batch: int, steps: int, np, rng) -> dict:
    from ardlab.nn import backend, initializers, losses, models, optim
    from ardlab.nn.layers import Conv2D

    initializers.seed(0)
    with backend.use(backend_name):
        model = models.get(name, (32, 32, 3), 10)
    x = rng.random((batch, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, batch)
    opt, loss = optim.SGD(0.01, 0.9), losses.get("categorical_crossentropy")
    flops = 0.0
    for node in model.nodes:
        if isinstance(node.layer, Conv2D):
            L = node.layer
            ho, wo, f = node.shape
            flops += 3 * 2 * batch * ho * wo * f * L.k[0] * L.k[1] * L.cin / L.groups  # fwd + 2 bwd GEMMs
    for step in range(steps + 1):
        if step == 1:  # the first step warms up: time the others
            model.timing = {}
            t0 = time.perf_counter()
        _, g = loss(model.forward(x, training=True), y)
        model.backward(g)
        opt.step(model)
    dt = (time.perf_counter() - t0) / steps
    convs = {node.layer.name for node in model.nodes if isinstance(node.layer, Conv2D)}
    ct = sum(sum(fb) for lname, fb in model.timing.items() if lname in convs) / steps
    return {"img_per_s": batch / dt, "conv_gflop_per_s": flops / ct / 1e9, "conv_share_of_step": ct / dt}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="alexnet,vgg11,resnet20")
    p.add_argument("--backends", default="numpy,onednn")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    add_round_arguments(p, 3)
    a = p.parse_args(argv)
    if "numpy" not in sys.modules:
        os.environ.update(thread_env(a.threads))
    import numpy as np

    from ardlab.nn import backend

    backends = a.backends.split(",")
    for b in backends:
        if b not in backend.BACKENDS:
            raise SystemExit(f"unknown backend {b!r}; valid: {', '.join(backend.BACKENDS)}")
    if a.rounds < 1:
        raise SystemExit(f"--rounds must be >= 1, got {a.rounds}")
    rng, order_rng = np.random.default_rng(0), random.Random(a.seed)
    variants = [(m, b) for m in a.models.split(",") for b in backends]
    runs = {v: [] for v in variants}
    for r in range(a.rounds):
        sgemm = _sgemm(np, rng)
        print(f"round {r + 1}: numpy sgemm 2048^3 {sgemm:.1f} GFLOP/s ({a.threads} threads, best of 5 calls)")
        order = variants[:]
        order_rng.shuffle(order)
        for m, b in order:
            out = _measure(m, b, a.batch, a.steps, np, rng)
            out["sgemm_gflop_per_s"] = sgemm
            out["conv_over_sgemm"] = out["conv_gflop_per_s"] / sgemm
            runs[m, b].append(out)
            print(f"  {m:10s} {b:7s} {out['img_per_s']:8.1f} img/s   conv {out['conv_gflop_per_s']:6.1f} GFLOP/s = "
                  f"{out['conv_over_sgemm']:.0%} of sgemm   conv share of step {out['conv_share_of_step']:.0%}",
                  flush=True)
    rows = []
    for (m, b), outs in runs.items():
        row = {"model": m, "backend": b, "batch": a.batch, "threads": a.threads, "rounds": a.rounds}
        for k in ("img_per_s", "conv_gflop_per_s", "sgemm_gflop_per_s", "conv_over_sgemm", "conv_share_of_step"):
            row[k] = statistics.median(o[k] for o in outs)
        row["conv_over_sgemm_min"] = min(o["conv_over_sgemm"] for o in outs)
        row["conv_over_sgemm_max"] = max(o["conv_over_sgemm"] for o in outs)
        rows.append(row)
        print(f"{m:10s} {b:7s} {row['img_per_s']:8.1f} img/s   conv {row['conv_over_sgemm']:.0%} of sgemm "
              f"[{row['conv_over_sgemm_min']:.0%}, {row['conv_over_sgemm_max']:.0%}] (median over {a.rounds} rounds)")
    save_rows(rows, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
