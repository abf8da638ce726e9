"""Benchmark: how much of the gradient Allreduce ardlab.nn's data parallelism hides, per backend and mode.

    python -m ardlab.experiments.dp_overlap [--models alexnet,resnet20] [--backends numpy,onednn]
        [--modes blocking,nonblocking,bucketed] [--library mpich] [--batch-per-rank 64] [--steps 8] [--rounds 3]
        [--output results/experiments/nn/nn_dp_overlap.csv]

For each model and backend, one round runs `ardlab train` (synthetic CIFAR-shaped data, 1 thread per rank,
the library's default algorithm) on 1 rank, and on 2 ranks in every parallel mode, in a shuffled order; the step
time of a run is its batch per rank / (img/s / ranks) (the trainer's throughput leaves the first step out).
A run's ratio is its 2-rank step over the 1-rank step of the same round: 1.0 when the communication is wholly
hidden and the two ranks do not slow each other (they share this machine's memory bandwidth, so even a
communication-free step can be slower), the issue's target <= 1.15. Rows: median and [min, max] over rounds.
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ardlab.experiments import add_round_arguments, save_rows


def _step_s(args: list[str], out: Path) -> float:
    proc = subprocess.run([sys.executable, "-m", "ardlab.cli", "train", *args, "--no-progress", "--output", str(out)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ardlab train {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    with open(out) as f:
        row = next(csv.DictReader(f))
    out.unlink()
    return int(row["batch_per_rank"]) * int(row["ranks"]) / float(row["img_per_s"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="alexnet,resnet20")
    p.add_argument("--backends", default="numpy,onednn")
    p.add_argument("--modes", default="blocking,nonblocking,bucketed")
    p.add_argument("--library", default="mpich")
    p.add_argument("--batch-per-rank", type=int, default=64)
    p.add_argument("--steps", type=int, default=8, help="steps per run (the first is left out as warm-up)")
    add_round_arguments(p, 3)
    a = p.parse_args(argv)
    from ardlab.nn import PARALLEL_MODES
    from ardlab.nn.backend import BACKENDS

    backends, modes = a.backends.split(","), a.modes.split(",")
    checks = [(b, BACKENDS, "backend") for b in backends] + [(m, PARALLEL_MODES, "mode") for m in modes]
    for value, valid, what in checks:
        if value not in valid:
            raise SystemExit(f"unknown {what} {value!r}; valid: {', '.join(valid)}")
    if a.rounds < 1 or a.steps < 2:
        raise SystemExit(f"need --rounds >= 1 and --steps >= 2, got {a.rounds} and {a.steps}")
    rng = random.Random(a.seed)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "row.csv"
        for model in a.models.split(","):
            for backend in backends:
                common = ["--library", a.library, "--model", model, "--dataset", "synthetic", "--threads", "1",
                          "--batch-per-rank", str(a.batch_per_rank), "--steps", str(a.steps), "--backend", backend]
                variants = [(1, "blocking")] + [(2, m) for m in modes]
                ratios = {m: [] for m in modes}
                singles = []
                for _ in range(a.rounds):
                    order = variants[:]
                    rng.shuffle(order)
                    step = {v: _step_s([*common, "--ranks", str(v[0]), "--parallel-mode", v[1]], out) for v in order}
                    singles.append(step[1, "blocking"])
                    for m in modes:
                        ratios[m].append(step[2, m] / step[1, "blocking"])
                for m in modes:
                    r = ratios[m]
                    rows.append({"model": model, "backend": backend, "library": a.library, "parallel_mode": m,
                                 "batch_per_rank": a.batch_per_rank, "rounds": a.rounds,
                                 "one_rank_step_s": statistics.median(singles),
                                 "two_over_one_rank_step": statistics.median(r), "two_over_one_rank_step_min": min(r),
                                 "two_over_one_rank_step_max": max(r)})
                    print(f"{model:9s} {backend:7s} {m:12s} 2-rank step / 1-rank step {statistics.median(r):.2f} "
                          f"[{min(r):.2f}, {max(r):.2f}] (1 rank: {statistics.median(singles) * 1e3:.0f} ms)",
                          flush=True)
    save_rows(rows, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
