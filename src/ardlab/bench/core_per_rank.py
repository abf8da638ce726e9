"""Benchmark, prepared for a machine with a core per rank: Intel MPI's default against its selection without
time-sharing, under both of its tuning files (issue 43).

    python -m ardlab.bench.core_per_rank [--nodes 2,4] [--ranks-per-node 2] [--rate 1gbit] [--rounds 6]
        [--output results/benchmarks/gaps_2x2/core_per_rank]

Why: on this project's 2-core machines the large gap (Intel MPI's default 3-5x slower than its selection in training at
2 nodes x 2 ranks) appears only where 4 ranks time-share 2 cores, under the generic tuning file Intel MPI loads on CPUs
it does not recognise. A machine with at least nodes x ranks-per-node cores (the 16-core accelerator machine, when one
is lent) removes the time-sharing. Per node count this brings up the emulated cluster (``ardlab cluster up``), runs
the microbenchmark (``ardlab.bench.link_queue``: default and rabenseifner, one launch each, the cluster's 1 ms queue
and a 30 ms one) and AlexNet training (``ardlab train``, ardlab.nn, default and rabenseifner), each under the generic
file and under the skx file (both forced with I_MPI_TUNING_BIN, so the machine's CPU does not choose), in
interleaved rounds, and writes per node count the microbenchmark's ratio table and the training's paired ratios.

Checks, before anything runs: root (namespaces, Slurm's daemons); enough cores for the largest shape (no
oversubscription: that is what this run removes); network namespaces. Where namespaces cannot be made it says so at
once and runs the fallback instead: one node, ``--fallback-ranks`` ranks with the local launcher (no network, no
time-sharing), the same variants.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from pathlib import Path

FILES = {"generic": "tuning_generic_shm-ofi.dat", "skx": "tuning_skx_shm-ofi_tcp.dat"}
ALGORITHMS = ("default", "rabenseifner")


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0))


def tuning_dir() -> Path:
    """Where the Intel MPI environment keeps its tuning files."""
    from ardlab.comm.launch import env_prefix

    return env_prefix("intelmpi") / "opt" / "mpi" / "etc"


def check(nodes: list[int], ranks_per_node: int, fallback_ranks: int, have: int, root: bool) -> None:
    """SystemExit naming what is wrong, before anything runs."""
    if not nodes or any(n < 2 for n in nodes):
        raise SystemExit(f"--nodes: each count must be at least 2 (one node is the fallback), got {nodes}")
    if ranks_per_node < 1 or fallback_ranks < 2:
        raise SystemExit(f"--ranks-per-node must be at least 1 and --fallback-ranks at least 2, got "
                         f"{ranks_per_node} and {fallback_ranks}")
    need = max(max(nodes) * ranks_per_node, fallback_ranks)
    if have < need:
        raise SystemExit(f"needs {need} cores for {max(nodes)} nodes x {ranks_per_node} ranks (and the fallback's "
                         f"{fallback_ranks}) without time-sharing; this machine has {have}: run it where a rank has "
                         "a core of its own (the 16-core accelerator machine), or with fewer --nodes/--ranks-per-node")
    if not root:
        raise SystemExit("needs root: network namespaces and Slurm's daemons (ardlab cluster up)")


def namespaces_work() -> str | None:
    """None where a network namespace can be made here, else why not."""
    name = f"ardlab-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        return (made.stderr or made.stdout).strip() or f"ip netns add exited {made.returncode}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return None


def train_rounds(tools: Path, env: dict, out: Path, *, launcher: str, nodes: int, ranks: int, rounds: int,
                 steps: int, seed: int, batch: int = 16) -> list[Path]:
    """AlexNet (ardlab.nn) under every file x algorithm, one launch each, in a shuffled order per round."""
    rng, written = random.Random(seed), []
    out.mkdir(parents=True, exist_ok=True)
    variants = [(f, a) for f in FILES for a in ALGORITHMS]
    tdir = tuning_dir()
    for r in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        for pos, (fname, alg) in enumerate(order):
            path = out / f"train-round{r}-{fname}-{alg}.csv"
            argv = [str(tools / "ardlab"), "train", "--library", "intelmpi", "--launcher", launcher, "--ranks",
                    str(ranks), "--model", "alexnet", "--steps", str(steps), "--batch-per-rank", str(batch),
                    "--algorithm", alg, "--output",
                    str(path), "--no-progress", *(["--nodes", str(nodes)] if launcher == "srun" else [])]
            proc = subprocess.run(argv, env={**env, "I_MPI_TUNING_BIN": str(tdir / FILES[fname])},
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"training, {fname} file, {alg}, round {r} failed:\n{proc.stderr[-2000:]}")
            written.append(path)
    return written


def train_ratios(paths: list[Path]):
    """Per tuning file: rabenseifner's img/s over the default's, paired by round (stats.speedup_ci)."""
    import pandas as pd

    from ardlab.stats import speedup_ci, verdict

    rows = []
    for p in paths:
        _, rnd, fname, alg = p.stem.split("-", 3)
        for r in pd.read_csv(p).itertuples():
            rows.append({"round": int(rnd.removeprefix("round")), "file": fname, "algorithm": alg,
                         "img_per_s": r.img_per_s, "mpi_tuning_file": getattr(r, "mpi_tuning_file", "")})
    t = pd.DataFrame(rows)
    out = []
    for fname, g in t.groupby("file"):
        piv = g.pivot_table(index="round", columns="algorithm", values="img_per_s", aggfunc="first")
        sp, lo, hi = speedup_ci(piv["rabenseifner"].to_numpy(), piv["default"].to_numpy())
        out.append({"file": FILES[fname], "loaded": ";".join(sorted(set(g.mpi_tuning_file.astype(str)))),
                    "rounds": len(piv), "default_img_per_s": float(piv["default"].median()),
                    "rabenseifner_img_per_s": float(piv["rabenseifner"].median()), "selection_speedup": sp,
                    "ci_low": lo, "ci_high": hi, "verdict": verdict(lo, hi)})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="2,4", help="node counts to run, each with --ranks-per-node ranks a node")
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--rate", default="1gbit", help="the emulated links' rate")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=4, help="timed training steps per launch")
    p.add_argument("--sizes", default="1M,4M", help="the microbenchmark's sizes")
    p.add_argument("--fallback-ranks", type=int, default=8, help="ranks of the one-node fallback")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", default="results/benchmarks/gaps_2x2/core_per_rank", help="the folder to write into")
    a = p.parse_args(argv)
    try:
        nodes = [int(n) for n in a.nodes.split(",")]
    except ValueError:
        raise SystemExit(f"--nodes: {a.nodes!r} is not a comma-separated list of node counts") from None
    check(nodes, a.ranks_per_node, a.fallback_ranks, cores(), os.geteuid() == 0)
    missing = [f for f in FILES.values() if not (tuning_dir() / f).is_file()]
    if missing:
        raise SystemExit(f"Intel MPI's tuning files {', '.join(missing)} are not in {tuning_dir()} "
                         "(containers/setup-envs installs the intelmpi environment)")
    tools, out = Path(sys.executable).parent, Path(a.output)
    out.mkdir(parents=True, exist_ok=True)
    settings = ";".join(f"I_MPI_TUNING_BIN={tuning_dir() / f}" for f in FILES.values())
    why = namespaces_work()
    if why is not None:
        print(f"cannot make network namespaces here ({why}): running the fallback instead, 1 node x "
              f"{a.fallback_ranks} ranks, no network", flush=True)
        paths = train_rounds(tools, dict(os.environ), out / "fallback", launcher="local", nodes=1,
                             ranks=a.fallback_ranks, rounds=a.rounds, steps=a.steps, seed=a.seed)
        table = train_ratios(paths)
        print(table.to_string(index=False))
        table.to_csv(out / "fallback_train_ratio.csv", index=False)
        return 0
    from ardlab.bench import link_queue
    from ardlab.cluster import Cluster, default_state

    for n in nodes:
        sub = out / f"n{n}-r{n * a.ranks_per_node}"
        sub.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(tools / "ardlab"), "cluster", "up", "--nodes", str(n), "--rate", a.rate], check=True)
        try:
            c = Cluster.load(default_state())
            os.environ.update(c.env())
            link_queue.main(["--libraries", "intelmpi", "--algorithms", ",".join(ALGORITHMS), "--launch-per-algorithm",
                             "--ranks-per-node", str(a.ranks_per_node), "--queues", "1ms,30ms", "--sizes", a.sizes,
                             "--rounds", str(a.rounds), "--seed", str(a.seed), "--settings", settings,
                             "--ratio", "default/rabenseifner", "--output", str(sub / "microbench.csv")])
            paths = train_rounds(tools, dict(os.environ), sub / "train", launcher="srun", nodes=n,
                                 ranks=n * a.ranks_per_node, rounds=a.rounds, steps=a.steps, seed=a.seed)
            table = train_ratios(paths)
            print(table.to_string(index=False))
            table.to_csv(sub / "train_ratio.csv", index=False)
        finally:
            subprocess.run([str(tools / "ardlab"), "cluster", "down"], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
