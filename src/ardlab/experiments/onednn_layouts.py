"""Benchmark: the oneDNN convolutions with the weights in the layout each primitive chose against the HWIO array.

    .envs/mpich/bin/python -m ardlab.experiments.onednn_layouts [--model vgg11] [--batch 64] [--threads 2] [--rounds 5]
        [--output results/experiments/nn/nn_onednn_layouts.csv]

Why the onednn backend reorders its weights every step: each convolution primitive may choose its weights'
layout (``format_tag_any``), and the blocked layouts it chooses select faster implementations than the plain
HWIO array the optimizers, checkpoints and the Allreduce see. This measures what that buys: every distinct
convolution shape of the model (3x3, "same", the CIFAR input), forward and backward (backward data and weights,
reorders included), with ``weights_layout`` "any" (the backend's default) and "hwio" (no reorders), in
interleaved rounds (every shape and layout once per round, in a shuffled order; the ratio taken within the
round). Prints per shape and direction the median ms per call of each and the ratio hwio / any (above 1: the
chosen layouts are faster), median [min, max] over rounds, and the implementation oneDNN picked for each.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

from ardlab.comm.launch import thread_env
from ardlab.experiments import add_round_arguments, save_rows, spread

DIRECTIONS = ("forward", "backward")


def conv_shapes(model: str) -> list[tuple[int, int, int]]:
    """(H = W, input channels, filters) of each distinct convolution of a VGG model on 32 x 32 x 3 inputs."""
    from ardlab.nn.models.cnn import _VGG

    depth = int(model.removeprefix("vgg")) if model.startswith("vgg") and model[3:].isdigit() else None
    if depth not in _VGG:
        raise SystemExit(f"--model {model!r}: one of {', '.join(f'vgg{d}' for d in _VGG)}")
    h, c, shapes = 32, 3, []
    for v in _VGG[depth]:
        if v == "M":
            h //= 2
        else:
            if (h, c, v) not in shapes:
                shapes.append((h, c, v))
            c = v
    return shapes


def _layer(shape, layout: str, batch: int):
    import numpy as np

    from ardlab.nn import backend, initializers
    from ardlab.nn.layers.base import Input
    from ardlab.nn.layers.conv import Conv2D

    h, c, f = shape
    initializers.seed(0)
    with backend.use("onednn"):
        layer = Conv2D(f, 3, padding="same")
    layer.weights_layout = layout
    layer(Input((h, h, c)))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, h, h, c), dtype=np.float32)
    dy = rng.standard_normal((batch, h, h, f), dtype=np.float32)
    return layer, x, dy


def _time(layer, x, dy, calls: int) -> dict[str, float]:
    """Median ms per call of forward and of backward over `calls` pairs, after one warm-up pair."""
    out = {d: [] for d in DIRECTIONS}
    for i in range(calls + 1):
        t0 = time.perf_counter()
        layer.forward(x, training=True)
        t1 = time.perf_counter()
        layer.backward(dy)
        t2 = time.perf_counter()
        if i:
            out["forward"].append(t1 - t0)
            out["backward"].append(t2 - t1)
    return {d: 1e3 * statistics.median(v) for d, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="vgg11")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--calls", type=int, default=5, help="timed forward + backward pairs per shape, layout and round")
    add_round_arguments(p, 5)
    a = p.parse_args(argv)
    if a.rounds < 1 or a.calls < 1:
        raise SystemExit(f"--rounds and --calls must be >= 1, got {a.rounds} and {a.calls}")
    os.environ.update(thread_env(a.threads))  # before oneDNN's OpenMP runtime loads
    from ardlab.nn import onednn as dn

    shapes = conv_shapes(a.model)
    layouts = ("any", "hwio")
    layers = {(s, lay): _layer(s, lay, a.batch) for s in shapes for lay in layouts}
    times = {(s, lay, d): [] for s in shapes for lay in layouts for d in DIRECTIONS}
    rng = random.Random(a.seed)
    print(f"oneDNN {dn.version()}, {a.model}'s convolutions, batch {a.batch}, {a.threads} threads, {a.calls} "
          f"calls per round, {a.rounds} interleaved rounds")
    for _ in range(a.rounds):
        order = list(layers)
        rng.shuffle(order)
        for key in order:
            for d, ms in _time(*layers[key], a.calls).items():
                times[(*key, d)].append(ms)
    rows = []
    for s in shapes:
        impl = {lay: next(iter(layers[(s, lay)][0].plans.values())).implementations for lay in layouts}
        for d in DIRECTIONS:
            ratio = [h / y for h, y in zip(times[(s, "hwio", d)], times[(s, "any", d)])]
            names = {lay: (impl[lay]["forward"] if d == "forward" else
                           f"{impl[lay]['backward_data']} / {impl[lay]['backward_weights']}") for lay in layouts}
            row = {"model": a.model, "height": s[0], "in_channels": s[1], "filters": s[2], "batch": a.batch,
                   "threads": a.threads, "direction": d, "rounds": a.rounds,
                   "ms_any": statistics.median(times[(s, "any", d)]),
                   "ms_hwio": statistics.median(times[(s, "hwio", d)]),
                   **spread("hwio_over_any", ratio), "implementation_any": names["any"],
                   "implementation_hwio": names["hwio"]}
            rows.append(row)
            print(f"{s[0]:2d}x{s[0]:<2d} {s[1]:3d}->{s[2]:3d} {d:8s} any {row['ms_any']:7.2f} ms, hwio "
                  f"{row['ms_hwio']:7.2f} ms: {row['hwio_over_any']:.2f}x [{min(ratio):.2f}, {max(ratio):.2f}]"
                  f"  ({names['any']} | {names['hwio']})", flush=True)
    save_rows(rows, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
