"""Investigation: does the simulated cluster (ardlab.sim: the timing loop under SimGrid's SMPI) time the Allreduce as
the emulated cluster measured it, per algorithm and size at 2-4 nodes?

    .envs/tools/bin/python -m ardlab.experiments.simulator calibrate \
        [--runs results/runs/costmodel-1gbit results/runs/costmodel-250mbit-nodes] \
        [--output results/experiments/simulator/calibration.csv]

For each committed run (one rank a node, several node counts, one link rate), every native and own algorithm whose
bytes across nodes follow a family SMPI has (``ardlab.analysis.costmodel.model.model_of``, "inter": the family its
bytes were seen to follow) is simulated at the run's node counts and sizes on a platform of the run's link rate, and
its median time over the run's rounds set beside the simulated one. One parameter is fitted, from one point: the
links' one-way latency, half the median time of our own recursive doubling at the smallest size (64 B at most) on
2 nodes (one exchange; SMPI times it as two latencies, the barrier's skew and the message), the same for every run
(the emulated links differ in their rate alone). The rows say where the emulated
ranks time-shared cores (``threads_per_core`` > 1: 3 and 4 nodes on this 2-core machine), which the simulator does not
model. Writes the rows (CSV) and, beside them, a Markdown table: per run, family and node count, the median of
simulated over measured over that family's algorithms at each size.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

RUNS = ["results/runs/costmodel-1gbit", "results/runs/costmodel-250mbit-nodes"]
OUTPUT = "results/experiments/simulator/calibration.csv"
COLUMNS = ["run", "link_rate", "link_latency_us", "library", "algorithm", "family", "nodes", "ranks", "size_bytes",
           "rounds", "measured_us", "simulated_us", "simulated_over_measured", "time_shared", "simulator",
           "fallback"]


def measured(run: str):
    """The run's microbenchmark rows at one rank a node: median avg_us over rounds per library, algorithm, nodes and
    size, with the family of each algorithm's bytes across nodes (None: none SMPI has, or not known)."""
    from ardlab.analysis import read
    from ardlab.analysis.costmodel.model import model_of
    from ardlab.sim.loop import SIMULATED

    rows = read.bench(read.run_files(run)[0])
    rows = rows[rows.ranks == rows.nodes]
    rows = rows.assign(family=[model_of(lib, alg, "inter") for lib, alg in zip(rows.library, rows.algorithm)])
    rows = rows[rows.family.isin(SIMULATED)]
    rates = set(rows.link_rate)
    if len(rates) != 1:
        raise ValueError(f"{run}: rows at link rates {sorted(rates)}: one run, one rate")
    keys = ["library", "algorithm", "family", "nodes", "ranks", "size_bytes"]
    out = rows.groupby(keys).agg(measured_us=("avg_us", "median"), rounds=("round", "nunique"),
                                 time_shared=("threads_per_core", lambda t: bool((t > 1).any()))).reset_index()
    return out.assign(link_rate=rates.pop())


SMALL = 64  # bytes: a message this small is all latency (the largest size the link's latency is taken from)


def latency_us(tables) -> float:
    """Half the median time of our recursive doubling at its smallest size, SMALL bytes at most, on 2 nodes (see the
    module's docstring), over the runs that have such rows: the emulated links are alike but for their rate."""
    import pandas as pd

    t = pd.concat(tables)
    two = t[(t.algorithm == "own_recursive_doubling") & (t.nodes == 2) & (t.size_bytes <= SMALL)]
    if two.empty:
        raise ValueError(f"no run has own_recursive_doubling rows of {SMALL} bytes or less on 2 nodes to take the "
                         "link's latency from; give --latency-us")
    return round(float(two[two.size_bytes == two.size_bytes.min()].measured_us.median()) / 2, 2)


def calibrate(run: str, latency: float) -> list[dict]:
    """The run's rows beside the simulator's (COLUMNS), the link's one-way latency `latency` us."""
    from ardlab.sim import loop
    from ardlab.sim.platform import Link

    table = measured(run)
    link = Link(table.link_rate.iloc[0], latency)
    sims = {}
    for (family, nodes), g in table.groupby(["family", "nodes"]):
        for row in loop.run(family, int(nodes), int(nodes), sorted(int(s) for s in set(g.size_bytes)), link,
                            iterations=2):
            sims[family, nodes, row["size_bytes"]] = row
    out = []
    for r in table.itertuples():
        sim = sims[r.family, r.nodes, r.size_bytes]
        out.append({"run": Path(run).name, "link_rate": r.link_rate, "link_latency_us": link.latency_us,
                    "library": r.library, "algorithm": r.algorithm, "family": r.family, "nodes": r.nodes,
                    "ranks": r.ranks, "size_bytes": r.size_bytes, "rounds": r.rounds,
                    "measured_us": round(r.measured_us, 3), "simulated_us": sim["avg_us"],
                    "simulated_over_measured": round(sim["avg_us"] / r.measured_us, 3),
                    "time_shared": r.time_shared, "simulator": sim["simulator"], "fallback": sim["fallback"]})
    return out


def summary(rows):
    """Per run, family and node count: the median of simulated over measured at each size (a column each)."""
    import pandas as pd

    t = pd.DataFrame(rows)
    t["nodes"] = t.nodes.astype(str) + t.time_shared.map({True: " (time-shared)", False: ""})
    return t.pivot_table(index=["run", "family", "nodes"], columns="size_bytes", values="simulated_over_measured",
                         aggfunc="median").round(2).reset_index()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ardlab.experiments.simulator", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("calibrate", help="the simulator against committed runs at 2-4 nodes")
    c.add_argument("--runs", nargs="+", default=RUNS)
    c.add_argument("--latency-us", type=float, help="the links' one-way latency (default: taken from the runs)")
    c.add_argument("--output", default=OUTPUT, help="the rows (.csv); the summary beside it (-summary.csv, .md)")
    a = p.parse_args(argv)
    from ardlab.results import save_frame, write_csv

    latency = a.latency_us or latency_us([measured(run) for run in a.runs])
    rows = [row for run in a.runs for row in calibrate(run, latency)]
    print(f"wrote {write_csv(a.output, COLUMNS, rows)} ({len(rows)} rows)")
    table = summary(rows)
    table.columns = [str(c) for c in table.columns]
    print(*save_frame(table, str(Path(a.output).with_name(Path(a.output).stem + "_summary.csv"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
