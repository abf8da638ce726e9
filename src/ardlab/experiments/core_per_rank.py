"""Benchmark, prepared for a machine with a core per rank: Intel MPI's default against its selection without
time-sharing, under both of its tuning files (issue 43).

    python -m ardlab.experiments.core_per_rank [--nodes 2,4] [--ranks-per-node 2] [--rate 1gbit] [--rounds 6]
        [--output results/experiments/gaps_2x2/core_per_rank]

Why: on this project's 2-core machines the large gap (Intel MPI's default 3-5x slower than its selection in training at
2 nodes x 2 ranks) appears only where 4 ranks time-share 2 cores, under the generic tuning file Intel MPI loads on CPUs
it does not recognise. A machine with at least nodes x ranks-per-node cores (the 16-core accelerator machine, when one
is lent) removes the time-sharing. Per node count this brings up the emulated cluster (``ardlab cluster up``), runs
the microbenchmark (``ardlab.experiments.link_queue``: default and rabenseifner, one launch each, the cluster's 1 ms
queue
and a 30 ms one) and AlexNet training (``ardlab train``, ardlab.nn, default and rabenseifner), each under the generic
file and under the skx file (both forced with I_MPI_TUNING_BIN, so the machine's CPU does not choose), in
interleaved rounds, and writes per node count the microbenchmark's ratio table and the training's paired ratios.

Checks, before anything runs: root (namespaces, Slurm's daemons); enough cores for the largest shape (no
oversubscription: that is what this run removes); network namespaces and Slurm's commands. Where either is missing it
says so at once and runs the fallback instead: one node, ``--fallback-ranks`` ranks with the local launcher (no
network), the same variants, each twice: with a core per rank ("spread") and with the ranks time-sharing half as many
cores, two a core, with the table's ``time_shared_env`` as the cluster's time-shared launches have it ("shared"); both
the microbenchmark (``ardlab bench allreduce``, one launch per variant) and the training. Its tables: the
default-over-rabenseifner time ratio per file, cores and size, the training's selection speedup per file and cores,
and what time-sharing does to each (the shared ratio over the spread one, paired by round).
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
CORES = ("spread", "shared")  # the fallback's: a core per rank, or two ranks a core


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


def cluster_missing() -> str | None:
    """None where the emulated cluster can come up here (network namespaces, Slurm's and the network's commands),
    else why not."""
    import shutil

    from ardlab.cluster.slurm import COMMANDS

    missing = [c for c in COMMANDS if shutil.which(c) is None]
    if missing:
        return f"{', '.join(missing)} not found (Debian's slurm-wlm, munge, iproute2, util-linux)"
    return namespaces_work()


def core_sets(ranks: int) -> dict[str, list[int]]:
    """The cores each fallback variant's launch may run on: `ranks` of this process's cores ("spread") and half as
    many ("shared", two ranks a core)."""
    mine = sorted(os.sched_getaffinity(0))
    return {"spread": mine[:ranks], "shared": mine[:max(1, ranks // 2)]}


def _launch(argv: list[str], env: dict, what: str, cpus: list[int] | None = None) -> None:
    """Run one launch (confined to `cpus`, its ranks inheriting the mask); RuntimeError naming `what` if it fails."""
    proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                          preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{proc.stderr[-2000:]}")


def _variants(cores: dict[str, list[int]] | None, files=tuple(FILES)) -> list[tuple[str, str, str]]:
    return [(f, a, c) for f in files for a in ALGORITHMS for c in (cores or {"": []})]


def refused_files(tools: Path, env: dict) -> dict[str, str]:
    """The tuning files Intel MPI refuses to load on this machine (it loads another one instead: on CPUs it does not
    recognise every CPU-specific file), each with the library's words; one short 2-rank launch per file."""
    refused = {}
    for fname in FILES:
        argv = [str(tools / "ardlab"), "bench", "allreduce", "--library", "intelmpi", "--launcher", "local",
                "--ranks", "2", "--sizes", "4K", "--iterations", "5", "--no-progress"]
        proc = subprocess.run(argv, env=_variant_env(env, fname, "spread"), capture_output=True, text=True)
        if proc.returncode != 0:
            if "did not load the tuning file" not in proc.stderr:
                raise RuntimeError(f"the check of the {fname} tuning file failed:\n{proc.stderr[-2000:]}")
            refused[fname] = proc.stderr.split("ardlab: error: ")[-1].strip()  # the library's words, once
    return refused


def _variant_env(env: dict, fname: str, core: str) -> dict:
    """A launch's settings: the tuning file forced; on shared cores the table's time_shared_env (the caller's own
    values win), as the emulated cluster's time-shared launches have it."""
    from ardlab.comm import library

    shared = library("intelmpi").time_shared_env if core == "shared" else {}
    return {**{k: v for k, v in shared.items() if k not in env}, **env,
            "I_MPI_TUNING_BIN": str(tuning_dir() / FILES[fname])}


def _name(kind: str, r: int, fname: str, alg: str, core: str) -> str:
    return f"{kind}-round{r}-{fname}-{alg}{'-' + core if core else ''}.csv"


def _rounds(kind: str, what: str, out: Path, argv_of, *, env: dict, rounds: int, seed: int,
            cores: dict[str, list[int]] | None, files) -> list[Path]:
    """Every file x algorithm (x cores, where given), one launch each (`argv_of(algorithm, output)`), in an order
    shuffled per round by `seed`; the rows' files, named for their round and variant."""
    rng, written = random.Random(seed), []
    out.mkdir(parents=True, exist_ok=True)
    variants = _variants(cores, files)
    for r in range(rounds):
        order = list(variants)
        rng.shuffle(order)
        for fname, alg, core in order:
            path = out / _name(kind, r, fname, alg, core)
            _launch(argv_of(alg, path), _variant_env(env, fname, core),
                    f"{what}, {fname} file, {alg} {core}, round {r}", (cores or {}).get(core))
            written.append(path)
    return written


def train_rounds(tools: Path, env: dict, out: Path, *, launcher: str, nodes: int, ranks: int, rounds: int,
                 steps: int, seed: int, batch: int = 16, cores: dict[str, list[int]] | None = None,
                 files=tuple(FILES)) -> list[Path]:
    """AlexNet (ardlab.nn) under every file x algorithm (x cores, where given), one launch each, in a shuffled order
    per round."""
    def argv(alg: str, path: Path) -> list[str]:
        return [str(tools / "ardlab"), "train", "--library", "intelmpi", "--launcher", launcher, "--ranks",
                str(ranks), "--model", "alexnet", "--steps", str(steps), "--batch-per-rank", str(batch),
                "--algorithm", alg, "--output", str(path), "--no-progress",
                *(["--nodes", str(nodes)] if launcher == "srun" else [])]

    return _rounds("train", "training", out, argv, env=env, rounds=rounds, seed=seed, cores=cores, files=files)


def bench_rounds(tools: Path, env: dict, out: Path, *, ranks: int, rounds: int, sizes: str, seed: int,
                 cores: dict[str, list[int]], iterations: int = 50, files=tuple(FILES)) -> list[Path]:
    """The one-node microbenchmark under every file x algorithm x cores, one launch each, shuffled per round."""
    def argv(alg: str, path: Path) -> list[str]:
        return [str(tools / "ardlab"), "bench", "allreduce", "--library", "intelmpi", "--launcher", "local",
                "--ranks", str(ranks), "--algorithm", alg, "--sizes", sizes, "--iterations", str(iterations),
                "--output", str(path), "--no-progress"]

    return _rounds("bench", "microbenchmark", out, argv, env=env, rounds=rounds, seed=seed + 1, cores=cores,
                   files=files)


def _rows(paths: list[Path], value: str):
    """The launches' rows, each with its round, file, algorithm and cores (from its file name) and `value`."""
    import pandas as pd

    rows = []
    for p in paths:
        _, rnd, fname, alg, *core = p.stem.split("-")
        for r in pd.read_csv(p, keep_default_na=False).to_dict("records"):
            rows.append({"round": int(rnd.removeprefix("round")), "file": fname, "algorithm": alg,
                         "cores": core[0] if core else "", "size_bytes": r.get("size_bytes", 0), value: r[value],
                         "mpi_tuning_file": str(r.get("mpi_tuning_file", "")),
                         "threads_per_core": r.get("threads_per_core", "")})
    return pd.DataFrame(rows)


def _ratios(t, value: str, numerator: str, denominator: str, name: str):
    """Per file, cores and size: numerator's `value` over denominator's, paired by round (stats.speedup_ci); and per
    file and size, the shared cores' ratio over the spread ones' (what time-sharing does to it), paired by round."""
    import pandas as pd

    from ardlab.stats import speedup_ci, verdict

    out, per_round = [], {}
    for (fname, core, size), g in t.groupby(["file", "cores", "size_bytes"]):
        piv = g.pivot_table(index="round", columns="algorithm", values=value, aggfunc="first").dropna()
        sp, lo, hi = speedup_ci(piv[numerator].to_numpy(), piv[denominator].to_numpy())
        per_round[(fname, core, size)] = piv[numerator] / piv[denominator]
        out.append({"file": FILES[fname], "loaded": ";".join(sorted(set(g.mpi_tuning_file))), "cores": core,
                    "threads_per_core": ";".join(sorted({str(x) for x in g.threads_per_core})),
                    "size_bytes": size, "rounds": len(piv), f"{denominator}_{value}": float(piv[denominator].median()),
                    f"{numerator}_{value}": float(piv[numerator].median()), name: sp, "ci_low": lo, "ci_high": hi,
                    "verdict": verdict(lo, hi)})
    for (fname, core, size), ratio in per_round.items():
        if core != "shared" or (fname, "spread", size) not in per_round:
            continue
        both = pd.concat([ratio, per_round[(fname, "spread", size)]], axis=1, keys=["shared", "spread"]).dropna()
        sp, lo, hi = speedup_ci(both["shared"].to_numpy(), both["spread"].to_numpy())
        out.append({"file": FILES[fname], "loaded": "", "cores": "shared over spread", "threads_per_core": "",
                    "size_bytes": size, "rounds": len(both), name: sp, "ci_low": lo, "ci_high": hi,
                    "verdict": verdict(lo, hi)})
    table = pd.DataFrame(out)
    return table if (t.size_bytes != 0).any() else table.drop(columns="size_bytes")


def train_ratios(paths: list[Path]):
    """Per tuning file (and cores, where the launches had them): rabenseifner's img/s over the default's, paired by
    round (stats.speedup_ci); with cores, also the shared ratio over the spread one."""
    return _ratios(_rows(paths, "img_per_s"), "img_per_s", "rabenseifner", "default", "selection_speedup")


def bench_ratios(paths: list[Path]):
    """Per tuning file, cores and size: the default's time over rabenseifner's, paired by round; and the shared ratio
    over the spread one."""
    return _ratios(_rows(paths, "avg_us"), "avg_us", "default", "rabenseifner", "default_over_rabenseifner")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="2,4", help="node counts to run, each with --ranks-per-node ranks a node")
    p.add_argument("--ranks-per-node", type=int, default=2)
    p.add_argument("--rate", default="1gbit", help="the emulated links' rate")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=4, help="timed training steps per launch")
    p.add_argument("--sizes", default="1M,4M", help="the microbenchmark's sizes")
    p.add_argument("--fallback-ranks", type=int, default=8, help="ranks of the one-node fallback")
    p.add_argument("--fallback", action="store_true",
                   help="run the one-node fallback even where the emulated cluster could come up")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--summarize", metavar="FOLDER",
                   help="make the fallback's tables again from the rows a run wrote under FOLDER/fallback "
                        "(nothing runs)")
    p.add_argument("--output", default="results/experiments/gaps_2x2/core_per_rank", help="the folder to write into")
    a = p.parse_args(argv)
    if a.summarize:
        return summarize(Path(a.summarize))
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
    why = "--fallback asked for" if a.fallback else cluster_missing()
    if why is not None:
        print(f"cannot bring up the emulated cluster here ({why}): running the fallback instead, 1 node x "
              f"{a.fallback_ranks} ranks, no network, on a core per rank and on half as many cores", flush=True)
        return fallback(tools, out / "fallback", a)
    from ardlab.cluster import Cluster, default_state
    from ardlab.experiments import link_queue

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


def summarize(folder: Path) -> int:
    """The fallback's tables again from its committed rows (FOLDER/fallback/{bench,train}/*.csv), written beside them
    as a run writes them."""
    from ardlab.results import save_frame

    found = False
    for kind, sub, ratios in (("microbench", "bench", bench_ratios), ("train", "train", train_ratios)):
        paths = sorted((folder / "fallback" / sub).glob(f"{sub}-round*.csv"))
        if paths:
            found = True
            table = ratios(paths)
            print(table.to_string(index=False))
            save_frame(table, folder / f"fallback_{kind}_ratio")
    if not found:
        raise SystemExit(f"--summarize: no fallback rows under {folder / 'fallback'} (bench/ or train/)")
    return 0


def fallback(tools: Path, out: Path, a) -> int:
    """The one-node comparison (the module's docstring): microbenchmark rounds, then training rounds, each table
    printed and written as CSV and Markdown beside the raw rows."""
    from ardlab.results import save_frame

    cores = core_sets(a.fallback_ranks)
    print(f"cores: spread {cores['spread']}, shared {cores['shared']}", flush=True)
    refused = refused_files(tools, dict(os.environ))
    for fname, why in refused.items():
        print(f"left out, the {fname} file: {why}", flush=True)
    files = tuple(f for f in FILES if f not in refused)
    if not files:
        raise SystemExit("Intel MPI refuses both tuning files here (above)")
    for kind, paths, ratios in (
            ("microbench", lambda: bench_rounds(tools, dict(os.environ), out / "bench", ranks=a.fallback_ranks,
                                                rounds=a.rounds, sizes=a.sizes, seed=a.seed, cores=cores,
                                                files=files),
             bench_ratios),
            ("train", lambda: train_rounds(tools, dict(os.environ), out / "train", launcher="local", nodes=1,
                                           ranks=a.fallback_ranks, rounds=a.rounds, steps=a.steps, seed=a.seed,
                                           cores=cores, files=files),
             train_ratios)):
        if kind == "train" and a.steps == 0:
            continue
        table = ratios(paths())
        print(table.to_string(index=False), flush=True)
        save_frame(table, out.parent / f"fallback_{kind}_ratio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
