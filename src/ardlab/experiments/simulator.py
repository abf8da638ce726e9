"""Investigation: does the simulated cluster (ardlab.sim: the timing loop under SimGrid's SMPI) time the Allreduce as
the emulated cluster measured it, per algorithm and size at 2-4 nodes (``calibrate``)? And beyond the measured
scale, does the cost model pick the algorithm the simulator finds fastest (``scale``)?

    .envs/tools/bin/python -m ardlab.experiments.simulator calibrate \
        [--runs results/runs/costmodel-1gbit results/runs/costmodel-250mbit-nodes] \
        [--output results/experiments/simulator/calibration.csv]
    .envs/tools/bin/python -m ardlab.experiments.simulator scale [--run results/runs/costmodel-1gbit] \
        [--nodes 16 64 256 1024] [--output results/experiments/simulator/model_vs_simulator.csv]

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


def calibrate(run: str, latency: float, table=None) -> list[dict]:
    """The run's rows beside the simulator's (COLUMNS), the link's one-way latency `latency` us (`table`: the run's
    ``measured`` rows, where the caller read them already)."""
    from ardlab.sim import loop
    from ardlab.sim.platform import Link

    table = measured(run) if table is None else table
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


SCALE_COLUMNS = ["library", "algorithm", "family", "nodes", "ranks", "size_bytes", "model_us", "simulated_us",
                 "model_pick", "simulator_pick", "latency_kept_us", "latency_kept_pick", "link_rate",
                 "link_latency_us", "simulator", "fallback"]


def latency_kept(fit):
    """The fit with every later regime's latency per step (alpha) at least its first regime's: the latency a step
    costs does not fall as messages grow, but a regime fitted from 64 KiB up at 1-4 nodes cannot see it (its alpha
    comes out near 0), and at hundreds of nodes a ring's 2(p-1) steps are then predicted free."""
    import dataclasses

    first = fit.regimes[0].alpha_us
    return dataclasses.replace(fit, regimes=[fit.regimes[0]] + [
        dataclasses.replace(r, alpha_us=max(r.alpha_us, first)) for r in fit.regimes[1:]])
SCALE_SIZES = [4, 64, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20]


def scale(run: str, nodes: list[int], latency: float, sizes: list[int] = SCALE_SIZES) -> list[dict]:
    """Per library, node count (a rank each) and size, every algorithm the run's fits across nodes accept whose
    bytes follow a family SMPI has: the model's time (the fit at the run's rate) and the simulator's (its family on
    the run's link), and each side's pick among them (the fastest). Algorithms of a family SMPI lacks are left out of
    both sides, so that the two choose among the same ones, and so is a family at a size where SMPI fell back to
    another algorithm (its ring below an element a rank)."""
    from ardlab.analysis.costmodel.model import model_of, read_fits
    from ardlab.comm.libraries import OWN_ALGORITHMS
    from ardlab.sim import loop
    from ardlab.sim.platform import Link

    fits = [f for f in read_fits(Path(run) / "tables" / "costmodel_fits.csv")
            if f.status == "ok" and f.node_class == "inter" and f.algorithm not in OWN_ALGORITHMS]
    rates = {f.link_rate for f in fits}
    if len(rates) != 1:
        raise ValueError(f"{run}: fits across nodes at rates {sorted(rates)}: one run, one rate")
    link = Link(rates.pop(), latency)
    families = {(f.library, f.algorithm): model_of(f.library, f.algorithm, "inter") for f in fits}
    fits = [f for f in fits if families[f.library, f.algorithm] in loop.SIMULATED]
    sim = {}
    for family in sorted({families[f.library, f.algorithm] for f in fits}):
        for n in nodes:
            for row in loop.run(family, n, n, sizes, link, iterations=1):
                sim[family, n, row["size_bytes"]] = row
    out = []
    for lib in sorted({f.library for f in fits}):
        mine = [f for f in fits if f.library == lib]
        for n in nodes:
            model = {f.algorithm: f.predict(sizes, [n] * len(sizes)) for f in mine}
            kept = {f.algorithm: latency_kept(f).predict(sizes, [n] * len(sizes)) for f in mine}
            for i, size in enumerate(sizes):
                rows = []
                for f in mine:
                    simulated = sim[families[lib, f.algorithm], n, size]
                    rows.append({"library": lib, "algorithm": f.algorithm, "family": families[lib, f.algorithm],
                                 "nodes": n, "ranks": n, "size_bytes": size,
                                 "model_us": round(float(model[f.algorithm][i]), 3),
                                 "latency_kept_us": round(float(kept[f.algorithm][i]), 3),
                                 "simulated_us": simulated["avg_us"], "link_rate": link.rate,
                                 "link_latency_us": latency, "simulator": simulated["simulator"],
                                 "fallback": simulated["fallback"]})
                # where SMPI ran another algorithm than the family's, its time is not that family's: such rows take
                # part in neither side's pick
                compared = [r for r in rows if not r["fallback"]]
                model_pick = min(compared, key=lambda r: r["model_us"])["algorithm"]
                sim_pick = min(compared, key=lambda r: r["simulated_us"])["algorithm"]
                kept_pick = min(compared, key=lambda r: r["latency_kept_us"])["algorithm"]
                out += [{**r, "model_pick": model_pick, "simulator_pick": sim_pick, "latency_kept_pick": kept_pick}
                        for r in rows]
    return out


def _regrets(g, pick: str, column: str | None = None) -> list[tuple]:
    """Per size of one library and node count's compared rows `g`: (size, the simulated time of the `pick` column's
    algorithm over the simulator's best, and `column`'s time of that best over its simulated time)."""
    out = []
    for size, s in g.groupby("size_bytes"):
        s = s.set_index("algorithm")
        best = s.simulated_us.idxmin()
        out.append((size, s.loc[s[pick].iloc[0], "simulated_us"] / s.loc[best, "simulated_us"],
                    s.loc[best, column] / s.loc[best, "simulated_us"] if column else None))
    return out


def agreement(rows):
    """Per library, node count and model (the fits as they are; with the first regime's latency kept): at how many
    sizes the model's pick simulates as fast as the simulator's best (within 5% too), the simulated time of the
    model's pick over the best's (its regret: median and largest), and the model's time of the simulator's pick over
    the simulated one (median and range)."""
    import pandas as pd

    t = pd.DataFrame(rows)
    t = t[t.fallback == ""]
    out = []
    for (lib, n), g in t.groupby(["library", "nodes"]):
        for model, pick, column in (("fits", "model_pick", "model_us"),
                                    ("latency kept", "latency_kept_pick", "latency_kept_us")):
            _, regret, ratio = zip(*_regrets(g, pick, column))
            regret, ratio = pd.Series(regret), pd.Series(ratio)
            out.append({"library": lib, "nodes": n, "model": model, "sizes": len(regret),
                        "best": int((regret <= 1 + 1e-9).sum()), "within_5pct": int((regret <= 1.05).sum()),
                        "regret_median": round(float(regret.median()), 2), "regret_max": round(float(regret.max()), 2),
                        "model_over_simulated_median": round(float(ratio.median()), 2),
                        "model_over_simulated_min": round(float(ratio.min()), 2),
                        "model_over_simulated_max": round(float(ratio.max()), 2)})
    return pd.DataFrame(out)


def figure(rows, path: Path) -> list[Path]:
    """Per library a panel: the simulated time of the model's pick over the simulator's best, by size, a line per
    node count (solid: the fits; dashed: with the first regime's latency kept)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from ardlab.analysis.figures import save_png_pdf

    t = pd.DataFrame(rows)
    t = t[t.fallback == ""]
    libs = sorted(set(t.library))
    fig, axes = plt.subplots(1, len(libs), figsize=(4.2 * len(libs), 3.6), sharey=True, squeeze=False)
    for ax, lib in zip(axes[0], libs):
        for i, (n, g) in enumerate(t[t.library == lib].groupby("nodes")):
            for pick, style in (("model_pick", "-"), ("latency_kept_pick", "--")):
                x, y, _ = zip(*_regrets(g, pick))
                ax.plot(x, y, style, color=f"C{i}", marker="o" if pick == "model_pick" else "x", ms=3,
                        label=f"{n} nodes" + (" (latency kept)" if pick != "model_pick" else ""))
        ax.set_xscale("log", base=2)
        ax.set_title(lib)
        ax.set_xlabel("message size (bytes)")
        ax.axhline(1.0, color="grey", lw=0.5)
    axes[0][0].set_ylabel("model's pick, simulated / best")
    axes[0][-1].legend(fontsize=7)
    return save_png_pdf(fig, path.parent, path.stem)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ardlab.experiments.simulator", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    c = sub.add_parser("calibrate", help="the simulator against committed runs at 2-4 nodes")
    c.add_argument("--runs", nargs="+", default=RUNS)
    c.add_argument("--latency-us", type=float, help="the links' one-way latency (default: taken from the runs)")
    c.add_argument("--output", default=OUTPUT, help="the rows (.csv); the summary beside it (-summary.csv, .md)")
    m = sub.add_parser("scale", help="the cost model's picks against the simulator's beyond the measured scale")
    m.add_argument("--run", default=RUNS[0], help="the run whose fits across nodes are the model's")
    m.add_argument("--nodes", nargs="+", type=int, default=[16, 64, 256, 1024])
    m.add_argument("--latency-us", type=float, help="the links' one-way latency (default: calibrate's, taken from "
                   "the runs)")
    m.add_argument("--output", default="results/experiments/simulator/model_vs_simulator.csv",
                   help="the rows (.csv); the agreement beside it (_agreement.csv, .md)")
    a = p.parse_args(argv)
    from ardlab.results import save_frame, write_csv

    if a.action == "scale":
        latency = a.latency_us or latency_us([measured(run) for run in RUNS])
        rows = scale(a.run, a.nodes, latency)
        print(f"wrote {write_csv(a.output, SCALE_COLUMNS, rows)} ({len(rows)} rows)")
        print(*save_frame(agreement(rows), str(Path(a.output).with_name(Path(a.output).stem + "_agreement.csv"))))
        print(*figure(rows, Path(a.output).with_suffix("")))
        return 0
    tables = {run: measured(run) for run in a.runs}
    latency = a.latency_us or latency_us(list(tables.values()))
    rows = [row for run, table in tables.items() for row in calibrate(run, latency, table)]
    print(f"wrote {write_csv(a.output, COLUMNS, rows)} ({len(rows)} rows)")
    table = summary(rows)
    table.columns = [str(c) for c in table.columns]
    print(*save_frame(table, str(Path(a.output).with_name(Path(a.output).stem + "_summary.csv"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
