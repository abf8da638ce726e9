"""Benchmark: the same measurement from an Apptainer image and from the library's environment (.envs), paired and
interleaved on the emulated cluster (issue 40): what running inside the image costs.

    python -m ardlab.experiments.image_overhead --image .cache/images/ardlab-mpich.sif [--library mpich]
        [--algorithms default,ring] [--sizes 64K,1M,4M] [--rounds 6] [--output results/experiments/images/...csv]

Per round, in a shuffled order: for each algorithm, the microbenchmark (``ardlab bench allreduce --in-mpi``) started
by the host's ``srun --mpi=<the table's plugin>`` on the cluster's nodes, one rank a node, once as ``apptainer exec
IMAGE ardlab ...`` and once as the environment's own ``python -m ardlab.cli ...``; the algorithm forced by the
table's settings in the launch's environment (as a site exports them before srun); then a short Horovod training
(``ardlab train-tf --in-mpi``, simplecnn on digits) both ways. Writes every launch's rows and, per algorithm and size
(and for the training), the image's time over the environment's (img/s the other way round), paired by round
(ardlab.stats.speedup_ci: geometric mean of the per-round ratios, bootstrap interval over rounds).

Needs an emulated cluster that is up (``ardlab cluster up``; its client settings in the environment) and
``apptainer`` on PATH (on this machine: ``.cache/apptainer/bin``, made by containers/setup-apptainer).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WHERE = ("image", "env")


def _argv(where: str, library: str, image: Path, command: list[str]) -> list[str]:
    from ardlab.comm.launch import require_env

    if where == "image":
        return ["apptainer", "exec", str(image), "ardlab", *command]
    return [str(require_env(library) / "bin" / "python"), "-m", "ardlab.cli", *command]


def _launch(library: str, nodes: int, argv: list[str], algorithm: str, cwd: str) -> None:
    from ardlab.comm.launch import srun_command

    cmd, env = srun_command(library, nodes, nodes, argv, algorithm=algorithm)
    proc = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")


def measure(image: Path, library: str, algorithms: list[str], sizes: str, rounds: int, nodes: int, seed: int,
            iterations: int, steps: int):
    """Every launch's rows (pandas), with round, where (image | env) and kind (bench | train)."""
    import pandas as pd

    rng, frames = random.Random(seed), []
    variants = [("bench", a, w) for a in algorithms for w in WHERE] + [("train", "default", w) for w in WHERE]
    work = tempfile.mkdtemp(prefix="ardlab-image-overhead-", dir="/tmp")  # a folder the image sees (/tmp is bound)
    os.chmod(work, 0o777)
    try:
        for r in range(rounds):
            order = list(variants)
            rng.shuffle(order)
            for pos, (kind, alg, where) in enumerate(order):
                out = Path(work) / f"{kind}-{alg}-{where}-{r}.csv"
                if kind == "bench":
                    command = ["bench", "allreduce", "--in-mpi", "--library", library, "--algorithm", alg, "--sizes",
                               sizes, "--iterations", str(iterations), "--validate", "--no-progress", "--output",
                               str(out)]
                else:
                    command = ["train-tf", "--in-mpi", "--library", library, "--model", "simplecnn", "--dataset",
                               "digits", "--batch-per-rank", "32", "--warmup-batches", "2", "--iterations", "1",
                               "--batches-per-iter", str(steps), "--no-progress", "--output", str(out)]
                _launch(library, nodes, _argv(where, library, image, command), alg, work)
                t = pd.read_csv(out, keep_default_na=False, na_values=[""])
                frames.append(t.assign(round=r, position=pos, where=where, kind=kind, forced=alg))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return pd.concat(frames, ignore_index=True)


def ratios(rows):
    """Per kind, algorithm and size: the image's over the environment's, paired by round."""
    import pandas as pd

    from ardlab.stats import speedup_ci

    out = []
    bench = rows[rows.kind == "bench"]
    for (alg, size), g in bench.groupby(["forced", "size_bytes"], sort=True):
        piv = g.pivot_table(index="round", columns="where", values="avg_us", aggfunc="first").dropna()
        point, lo, hi = speedup_ci(piv["image"].to_numpy(), piv["env"].to_numpy())
        out.append({"kind": "microbenchmark (time)", "algorithm": alg, "size_bytes": int(size), "rounds": len(piv),
                    "env": float(piv["env"].median()), "image": float(piv["image"].median()),
                    "image_over_env": point, "ci_low": lo, "ci_high": hi})
    train = rows[rows.kind == "train"]
    if not train.empty:
        piv = train.pivot_table(index="round", columns="where", values="img_per_s", aggfunc="first").dropna()
        point, lo, hi = speedup_ci(piv["env"].to_numpy(), piv["image"].to_numpy())  # a rate: the other way round
        out.append({"kind": "Horovod training (img/s)", "algorithm": "default", "size_bytes": 0, "rounds": len(piv),
                    "env": float(piv["env"].median()), "image": float(piv["image"].median()),
                    "image_over_env": 1 / point, "ci_low": 1 / hi, "ci_high": 1 / lo})
    t = pd.DataFrame(out)
    t["interval"] = ["too few rounds" if lo != lo else "holds 1" if lo <= 1 <= hi else "excludes 1"
                     for lo, hi in zip(t.ci_low, t.ci_high)]
    return t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image", required=True, help="the library's Apptainer image (.sif)")
    p.add_argument("--library", default="mpich")
    p.add_argument("--algorithms", default="default,ring")
    p.add_argument("--sizes", default="64K,1M,4M")
    p.add_argument("--iterations", type=int, default=20, help="timed calls a size")
    p.add_argument("--steps", type=int, default=10, help="timed training steps")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--nodes", type=int, default=2, help="nodes, one rank each")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--summarize", metavar="ROWS_CSV", help="make the ratio table again from written rows")
    p.add_argument("--output", help="the rows' CSV; the ratios go beside it as <name>_ratio.{csv,md}")
    a = p.parse_args(argv)
    import pandas as pd

    from ardlab.comm import library
    from ardlab.results import atomic_open, save_frame

    if a.summarize:
        rows = pd.read_csv(a.summarize, keep_default_na=False, na_values=[""])
        output = Path(a.output or a.summarize.removesuffix("_rows.csv") + ".csv")
    else:
        image = Path(a.image).resolve()
        if not image.is_file():
            raise SystemExit(f"--image: {image} is not a file (containers/build makes the images)")
        from ardlab.images.srun_images import require_apptainer_and_cluster

        try:
            require_apptainer_and_cluster()
        except (FileNotFoundError, RuntimeError) as e:
            raise SystemExit(str(e)) from None
        lib = library(a.library)
        unknown = [x for x in a.algorithms.split(",") if x not in lib.algorithms]
        if unknown:
            raise SystemExit(f"--algorithms: {', '.join(unknown)} not among {lib.display}'s")
        rows = measure(image, a.library, a.algorithms.split(","), a.sizes, a.rounds, a.nodes, a.seed, a.iterations,
                       a.steps)
        output = Path(a.output) if a.output else None
        if output:  # the rows as measured: no rounding
            with atomic_open(output.with_name(output.stem + "_rows.csv"), "w", newline="") as f:
                rows.to_csv(f, index=False)
    table = ratios(rows)
    print(table.to_string(index=False))
    if output:
        save_frame(table, output.with_name(output.stem + "_ratio.csv"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
