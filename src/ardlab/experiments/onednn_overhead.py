"""Benchmark: the per-call cost of ardlab.nn's ctypes binding to oneDNN against NumPy, side by side.

    .envs/mpich/bin/python -m ardlab.experiments.onednn_overhead [--rounds 5]

One eltwise ReLU primitive (ardlab.nn.onednn) and ``np.maximum(x, 0, out=y)`` on the same tensor, timed in
interleaved rounds (each round times both); prints the median microseconds per call over the rounds, with the
range, for a tiny tensor (the call overhead) and an activation-sized one. Set OMP_NUM_THREADS for oneDNN's threads.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from ardlab.nn import onednn as dn


def _relu(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    y = np.empty_like(x)
    d = dn.md((x.size,), "a")
    pd = dn.primitive_desc("eltwise_forward_primitive_desc_create", "ReLU", dn.FORWARD_TRAINING, dn.ELTWISE_RELU,
                           d, d, 0.0, 0.0, None)
    prim, src, dst = dn.Primitive(pd, "ReLU"), dn.Memory(d, x.reshape(-1)), dn.Memory(d, y.reshape(-1))
    return x, y, (lambda: prim.run(src=src, dst=dst)), (lambda: np.maximum(x, 0, out=y))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args(argv)
    print(f"oneDNN {dn.version()}: us per call, median [min, max] of {a.rounds} interleaved rounds")
    for shape, reps in (((1, 8), 20000), ((64, 32, 32, 16), 50)):
        x, y, onednn_call, numpy_call = _relu(shape)
        onednn_call()
        assert np.array_equal(y, np.maximum(x, 0))
        times = {"onednn (ctypes)": [], "numpy": []}
        for _ in range(a.rounds):
            for name, f in (("onednn (ctypes)", onednn_call), ("numpy", numpy_call)):
                t0 = time.perf_counter()
                for _ in range(reps):
                    f()
                times[name].append((time.perf_counter() - t0) / reps * 1e6)
        line = ", ".join(f"{k} {statistics.median(v):.2f} [{min(v):.2f}, {max(v):.2f}]" for k, v in times.items())
        print(f"ReLU {'x'.join(map(str, shape)):>12s}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
