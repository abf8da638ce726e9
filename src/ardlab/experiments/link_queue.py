"""Benchmark: Allreduce on the emulated cluster with tbf's queue at 1 ms (the cluster's) against deeper queues,
and with library settings against none.

    ardlab cluster up --nodes 4 --rate 250mbit && eval "$(ardlab cluster env)"
    .envs/tools/bin/python -m ardlab.experiments.link_queue [--queues 1ms,30ms] [--sizes 1M,4M] [--rounds 3]
        [--settings "OMPI_MCA_btl_tcp_links=2;..."] [--ranks-per-node 2] [--algorithms default,ring]
        [--output results/experiments/cluster_network/cluster_link_queue.csv]

Why: on 4 nodes the Rabenseifner family takes 1.3-2x the wire time at 4 MiB where a ring takes 1.02-1.05x, at
1 Gbit/s and at 250 Mbit/s alike (so not the shared cores), and tbf drops packets on the links meanwhile. A
packet that would wait longer than tbf's queue (``latency``) behind the rate is dropped, and TCP then backs off
or waits for a retransmission timeout; a Rabenseifner step sends half the vector to one partner at once, a ring
step a quarter. This runs the same algorithms with the queue at each setting, in interleaved rounds (a shuffled
order of the settings per round, every library and algorithm in each), and records per call the time over the
wire time (2(p-1)/p x size at the rate), the packets tbf dropped and the segments TCP retransmitted (both summed
over every node). The queue is set back to the cluster's own at the end. ``--settings``: environment settings
(``VAR=VALUE,VAR=VALUE``, one setting per ``;``) each measured beside none at every queue, in the same rounds.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from ardlab.comm.launch import PMI_SPLIT
from ardlab.comm.libraries import LIBRARIES
from ardlab.experiments import add_round_arguments, save_rows

# Launches of one variant before its failure stands, where Slurm's pmi2 plugin split a PMI-1 request in every attempt
# of each (MPICH at 2 ranks a node: twice in one run all three attempts of a launch; issue 43's notes).
LAUNCHES = 3

def algorithms(library_name: str) -> str:
    """What this benchmark runs of a library: its ring and the first of its Rabenseifner family in the table (the two
    bandwidth-optimal shapes whose steps differ in size), and ours of each."""
    algs = LIBRARIES[library_name].algorithms
    rabenseifner = next(n for n, a in algs.items() if a.cost_model == "rabenseifner" and a.implementation == "native")
    return f"ring,{rabenseifner},own_ring,own_rabenseifner"


def _retransmits(hosts: list[str]) -> int:
    from ardlab.cluster.network import namespace, sh

    total = 0
    for h in hosts:
        snmp = sh("ip", "netns", "exec", namespace(h), "cat", "/proc/net/snmp").stdout
        lines = [line.split() for line in snmp.splitlines() if line.startswith("Tcp:")]
        total += int(lines[1][lines[0].index("RetransSegs")])
    return total


def paired_ratios(rounds, numerator: str, denominator: str):
    """Per library, size, queue and settings: `numerator`'s time over `denominator`'s (the geometric mean of the
    per-round ratios, each round's two measured back to back, with its bootstrap interval over rounds), beside the
    ratio of the bytes each sent per call and each one's drops and retransmitted segments per call (medians over
    rounds): how much of a time ratio the bytes explain, and how much the link's losses add."""
    import numpy as np
    import pandas as pd

    from ardlab.stats import speedup_ci, verdict

    keys = ["library", "size_bytes", "queue", "settings"]
    out = []
    for key, g in rounds.groupby(keys, sort=True):
        piv = g.pivot_table(index="round", columns="algorithm", aggfunc="first",
                            values=["avg_us", "net_tx_bytes_per_call", "drops_per_call", "retransmits_per_call"])
        if numerator not in piv["avg_us"] or denominator not in piv["avg_us"]:
            continue
        t = piv["avg_us"]
        ratio, lo, hi = speedup_ci(t[numerator].to_numpy(), t[denominator].to_numpy())
        nbytes = pd.to_numeric(piv["net_tx_bytes_per_call"][numerator], errors="coerce")
        dbytes = pd.to_numeric(piv["net_tx_bytes_per_call"][denominator], errors="coerce")
        files = ";".join(sorted(set(g.mpi_tuning_file.fillna("").astype(str)) - {""}))
        out.append({**dict(zip(keys, key)), "mpi_tuning_file": files, "rounds": int(t[[numerator, denominator]].notna()
                    .all(axis=1).sum()), f"{numerator}_us": float(t[numerator].median()),
                    f"{denominator}_us": float(t[denominator].median()), "time_ratio": ratio, "ci_low": lo,
                    "ci_high": hi, "verdict": verdict(lo, hi), "bytes_ratio": float(np.nanmedian(nbytes / dbytes)),
                    "time_over_bytes_ratio": ratio / float(np.nanmedian(nbytes / dbytes)),
                    f"{numerator}_drops_per_call": float(piv["drops_per_call"][numerator].median()),
                    f"{denominator}_drops_per_call": float(piv["drops_per_call"][denominator].median()),
                    f"{numerator}_retransmits_per_call": float(piv["retransmits_per_call"][numerator].median()),
                    f"{denominator}_retransmits_per_call": float(piv["retransmits_per_call"][denominator].median())})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--queues", default="1ms,30ms", help="tbf latency settings to compare (the first: the cluster's)")
    p.add_argument("--settings", default="", help="environment settings to compare with none: 'A=1,B=2;C=3'")
    p.add_argument("--libraries", default="mpich,openmpi")
    p.add_argument("--sizes", default="1M,4M")
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--ranks-per-node", type=int, default=1,
                   help="ranks on each node (2 on this machine's 2-core nodes: the ranks time-share the cores)")
    p.add_argument("--launch-per-algorithm", action="store_true",
                   help="one launch per algorithm (each row's drops and retransmissions are then its own)")
    p.add_argument("--algorithms", default=None,
                   help="the algorithms to run for every library (default: each library's ring and Rabenseifner, "
                        "native and ours)")
    p.add_argument("--ratio", default=None, metavar="NUMERATOR/DENOMINATOR",
                   help="also write the paired time ratio of two of the algorithms per size, queue and settings, with "
                        "the bytes ratio and losses beside it (OUTPUT_ratio.csv/.md); with --summarize ROUNDS.csv, "
                        "only that, from rows written before")
    p.add_argument("--summarize", default=None, metavar="ROUNDS_CSV", help="see --ratio")
    add_round_arguments(p, 3)
    a = p.parse_args(argv)
    import pandas as pd

    if a.ratio and a.ratio.count("/") != 1:
        raise SystemExit(f"--ratio: {a.ratio!r} is not NUMERATOR/DENOMINATOR (e.g. default/rabenseifner)")
    if a.summarize:
        if not a.ratio:
            raise SystemExit("--summarize needs --ratio NUMERATOR/DENOMINATOR")
        table = paired_ratios(pd.read_csv(a.summarize, keep_default_na=False, na_values=[""]), *a.ratio.split("/"))
        print(table.to_string(index=False))
        save_rows(table.to_dict("records"), a.output)
        return 0

    from ardlab.bench.sizes import parse_sizes
    from ardlab.cluster import Cluster, default_state
    from ardlab.cluster.links import allreduce_wire_us
    from ardlab.cluster.network import drops, shape_links

    c = Cluster.load(default_state())
    if c is None or not c.rate:
        raise SystemExit("needs an emulated cluster with a link rate: ardlab cluster up --nodes 4 --rate 250mbit")
    libs = a.libraries.split(",")
    unknown = [lib for lib in libs if lib not in LIBRARIES]
    if unknown:
        raise SystemExit(f"--libraries: {', '.join(unknown)} not among {', '.join(LIBRARIES)}")
    if a.ranks_per_node < 1:
        raise SystemExit(f"--ranks-per-node must be at least 1, got {a.ranks_per_node}")
    ranks = c.nodes * a.ranks_per_node
    algs = {lib: a.algorithms or algorithms(lib) for lib in libs}
    for lib in libs:
        bad = [n for n in algs[lib].split(",") if n != "default" and n not in LIBRARIES[lib].algorithms]
        if bad:
            raise SystemExit(f"--algorithms: {', '.join(bad)} not an algorithm of {lib} "
                             f"(valid: default, {', '.join(LIBRARIES[lib].algorithms)})")
    queues, sizes = a.queues.split(","), parse_sizes(a.sizes)
    settings = {"none": {}}
    for text in filter(None, a.settings.split(";")):
        pairs = [kv.split("=", 1) for kv in text.split(",")]
        if any(len(kv) != 2 or not kv[0] for kv in pairs):
            raise SystemExit(f"--settings: {text!r} is not VAR=VALUE[,VAR=VALUE]")
        settings[text] = dict(pairs)
    variants = [(q, name) for q in queues for name in settings]
    env = {**os.environ, **c.env()}
    ardlab = Path(sys.executable).with_name("ardlab")
    rng, rows = random.Random(a.seed), []
    print(f"{c.nodes} nodes x {a.ranks_per_node} rank(s) at {c.rate}; tbf queue {' vs '.join(queues)}; "
          f"settings {' vs '.join(settings)}; {a.rounds} interleaved rounds")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(a.rounds):
                order = list(variants)
                rng.shuffle(order)
                for q, setting in order:
                    shape_links(c.hosts, c.rate, q)
                    for lib, names in [(lib, names) for lib in libs for names in (
                            algs[lib].split(",") if a.launch_per_algorithm else [algs[lib]])]:
                        out = Path(tmp) / f"{lib}-{q}-{len(rows)}.csv"
                        for _ in range(LAUNCHES):  # each launch already starts again on PMI_SPLIT (ardlab.comm.launch)
                            d0, t0 = drops(c.hosts), _retransmits(c.hosts)
                            proc = subprocess.run(
                                [str(ardlab), "bench", "allreduce", "--library", lib, "--launcher", "srun", "--nodes",
                                 str(c.nodes), "--ranks", str(ranks), "--algorithm", names, "--sizes",
                                 a.sizes, "--iterations", str(a.iterations), "--output", str(out), "--no-progress"],
                                env={**env, **settings[setting]}, capture_output=True, text=True)
                            if proc.returncode == 0 or PMI_SPLIT not in proc.stderr:
                                break
                            print(f"{lib} {names} with the queue at {q}: Slurm's pmi2 plugin split a PMI-1 request in "
                                  "every attempt; launched again", file=sys.stderr)
                        if proc.returncode != 0:
                            raise RuntimeError(f"{lib} with the queue at {q}, settings {setting}, failed:\n"
                                               f"{proc.stderr[-2000:]}")
                        calls = a.iterations * len(sizes) * len(names.split(","))
                        dropped, retrans = drops(c.hosts) - d0, _retransmits(c.hosts) - t0
                        for row in pd.read_csv(out).itertuples():
                            wire = allreduce_wire_us(c.nodes, row.size_bytes, c.rate)
                            rows.append({"round": r, "queue": q, "settings": setting, "nodes": c.nodes,
                                         "ranks": ranks, "link_rate": c.rate,
                                         "mpi_tuning_file": getattr(row, "mpi_tuning_file", ""),
                                         "net_tx_bytes_per_call": getattr(row, "net_tx_bytes_per_call", ""),
                                         "library": lib, "algorithm": row.algorithm, "size_bytes": row.size_bytes,
                                         "avg_us": row.avg_us, "over_wire": row.avg_us / wire,
                                         "drops_per_call": dropped / calls, "retransmits_per_call": retrans / calls})
    finally:
        shape_links(c.hosts, c.rate, c.queue)  # the queue the cluster was brought up with
    df = pd.DataFrame(rows)
    label = {(q, name): q if len(settings) == 1 else f"{q} {name}" for q, name in variants}
    df["variant"] = [label[(q, name)] for q, name in zip(df.queue, df.settings)]
    summary = []
    for (lib, alg, size), g in df.groupby(["library", "algorithm", "size_bytes"]):
        row = {"library": lib, "algorithm": alg, "size_bytes": size, "nodes": c.nodes, "ranks": ranks,
               "link_rate": c.rate, "rounds": a.rounds}
        for v in label.values():
            gv = g[g.variant == v]
            row[f"over_wire_{v}"] = statistics.median(gv.over_wire)
            row[f"drops_per_call_{v}"] = statistics.median(gv.drops_per_call)
            row[f"retransmits_per_call_{v}"] = statistics.median(gv.retransmits_per_call)
        summary.append(row)
        print(f"{lib:8s} {alg:26s} {size >> 10:5d} KiB  " + "  ".join(
            f"{v}: {row[f'over_wire_{v}']:.2f}x wire [{g[g.variant == v].over_wire.min():.2f}, "
            f"{g[g.variant == v].over_wire.max():.2f}]" for v in label.values()), flush=True)
    print("per library and variant, drops / retransmitted segments per call (all algorithms and sizes): " + "; ".join(
        f"{lib} {v}: {statistics.median(g.drops_per_call):.0f} / {statistics.median(g.retransmits_per_call):.0f}"
        for (lib, v), g in df.groupby(["library", "variant"])))
    save_rows(summary, a.output)
    if a.output:
        save_rows(rows, Path(a.output).with_name(Path(a.output).stem + "_rounds.csv"))
    if a.ratio:
        table = paired_ratios(df, *a.ratio.split("/"))
        print(table.to_string(index=False))
        if a.output:
            save_rows(table.to_dict("records"), Path(a.output).with_name(Path(a.output).stem + "_ratio.csv"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
