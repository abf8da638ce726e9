"""`ardlab report`: speedup tables (CSV + Markdown) and figures (PNG + PDF) from the raw result CSVs.

Reads only the files it is given (the workflow passes the outputs of jobs that succeeded). Medians over
repetitions. Tables in <results>/tables:

- microbench_speedup: per library, ranks and size, each algorithm's time and speedup over the library default;
- microbench_across_libraries: per ranks and size, the best (library, algorithm) and its speedup over each
  library's default and over the worst (library, algorithm);
- best_algorithm_ranges: per library and ranks, the best algorithm per message-size range;
- training_throughput: img/s of both frameworks per library, algorithm, model, mode and ranks, with the speedup
  over the same library's default and the best/worst across libraries;
- tuned_speedup: the tuned selection files against each library's default (microbenchmark and training).

Figures in <results>/figures/measured: latency and bandwidth vs size per library (a line per algorithm), speedup
heatmaps per library, training img/s bars.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ardlab.analysis import read
from ardlab.bench.sizes import format_size
from ardlab.results import save_frame
from ardlab.comm.libraries import DEFAULT, LIBRARIES, TUNED


MICROBENCH_TABLES = ("microbench_speedup", "microbench_across_libraries", "best_algorithm_ranges")
TRAINING_TABLE = "training_throughput"
TUNED_TABLE = "tuned_speedup"


def tables_made(*, microbench: bool, training: bool, tuned: bool) -> list[str]:
    """The names of the tables `report` writes for these inputs (the workflow declares them as outputs)."""
    return [*(MICROBENCH_TABLES if microbench else ()), *([TRAINING_TABLE] if training else ()),
            *([TUNED_TABLE] if tuned else ())]


def microbench_tables(b: pd.DataFrame) -> dict[str, pd.DataFrame]:
    med = b.groupby(["library", "ranks", "nodes", "size_bytes", "algorithm", "implementation"],
                    as_index=False).avg_us.median()
    default = med[med.algorithm == DEFAULT][["library", "ranks", "nodes", "size_bytes", "avg_us"]]
    sp = med.merge(default.rename(columns={"avg_us": "default_us"}), on=["library", "ranks", "nodes", "size_bytes"],
                   how="left")
    sp["speedup_vs_default"] = sp.default_us / sp.avg_us
    sp = sp.sort_values(["library", "ranks", "size_bytes", "avg_us"])

    rows = []
    cand = med[med.algorithm != TUNED]
    for (ranks, nodes, size), g in cand.groupby(["ranks", "nodes", "size_bytes"]):
        best, worst = g.loc[g.avg_us.idxmin()], g.loc[g.avg_us.idxmax()]
        row = {"ranks": ranks, "nodes": nodes, "size_bytes": size, "best_library": best.library,
               "best_algorithm": best.algorithm, "best_us": best.avg_us,
               "worst": f"{worst.library}/{worst.algorithm}", "speedup_vs_worst": worst.avg_us / best.avg_us}
        for lib in LIBRARIES:
            d = g[(g.library == lib) & (g.algorithm == DEFAULT)]
            row[f"speedup_vs_{lib}_default"] = float(d.avg_us.iloc[0] / best.avg_us) if len(d) else np.nan
        rows.append(row)
    across = pd.DataFrame(rows)

    ranges = []
    for (lib, ranks, nodes), g in cand.groupby(["library", "ranks", "nodes"]):
        winners = g.loc[g.groupby("size_bytes").avg_us.idxmin()].sort_values("size_bytes")
        for size, alg, us in zip(winners.size_bytes, winners.algorithm, winners.avg_us):
            d = g[(g.size_bytes == size) & (g.algorithm == DEFAULT)].avg_us
            sp_def = float(d.iloc[0] / us) if len(d) else np.nan
            if ranges and ranges[-1]["library"] == lib and ranges[-1]["ranks"] == ranks \
                    and ranges[-1]["nodes"] == nodes and ranges[-1]["best_algorithm"] == alg:
                ranges[-1]["to_bytes"] = int(size)
                ranges[-1]["max_speedup_vs_default"] = max(ranges[-1]["max_speedup_vs_default"], sp_def)
            else:
                ranges.append({"library": lib, "ranks": ranks, "nodes": nodes, "from_bytes": int(size),
                               "to_bytes": int(size), "best_algorithm": alg, "max_speedup_vs_default": sp_def})
    return dict(zip(MICROBENCH_TABLES, (sp, across, pd.DataFrame(ranges))))


def training_table(t: pd.DataFrame) -> pd.DataFrame:
    keys = ["framework", "library", "model", "parallel_mode", "ranks", "batch_per_rank"]
    med = t.groupby([*keys, "algorithm"], as_index=False).agg(img_per_s=("img_per_s", "median"),
                                                              repetitions=("img_per_s", "size"))
    d = med[med.algorithm == DEFAULT][keys + ["img_per_s"]].rename(columns={"img_per_s": "default_img_per_s"})
    out = med.merge(d, on=keys, how="left")
    out["speedup_vs_default"] = out.img_per_s / out.default_img_per_s
    grp = ["framework", "model", "parallel_mode", "ranks", "batch_per_rank"]
    out["speedup_vs_worst_any_library"] = out.img_per_s / out.groupby(grp).img_per_s.transform("min")
    return out.sort_values([*grp, "img_per_s"], ascending=[True] * len(grp) + [False])


def tuned_table(b: pd.DataFrame, t: pd.DataFrame) -> pd.DataFrame:
    rows = []
    if not b.empty:
        med = b.groupby(["library", "ranks", "size_bytes", "algorithm"], as_index=False).avg_us.median()
        for (lib, ranks), g in med.groupby(["library", "ranks"]):
            tu, de = g[g.algorithm == TUNED], g[g.algorithm == DEFAULT]
            m = tu.merge(de, on="size_bytes", suffixes=("_tuned", "_default"))
            if len(m):
                sp = m.avg_us_default / m.avg_us_tuned
                rows.append({"workload": "microbench", "library": lib, "ranks": ranks, "what": "all sizes",
                             "speedup_geomean": float(np.exp(np.log(sp).mean())), "speedup_min": sp.min(),
                             "speedup_max": sp.max()})
    if not t.empty:
        keys = ["framework", "library", "model", "parallel_mode", "ranks"]
        med = t.groupby([*keys, "algorithm"], as_index=False).img_per_s.median()
        for k, g in med.groupby(keys):
            tu, de = g[g.algorithm == TUNED].img_per_s, g[g.algorithm == DEFAULT].img_per_s
            if len(tu) and len(de):
                sp = float(tu.iloc[0] / de.iloc[0])
                rows.append({"workload": f"{k[0]} training", "library": k[1], "ranks": k[4],
                             "what": f"{k[2]} {k[3]}", "speedup_geomean": sp, "speedup_min": sp, "speedup_max": sp})
    return pd.DataFrame(rows, columns=["workload", "library", "ranks", "what", "speedup_geomean", "speedup_min",
                                       "speedup_max"])


def make_figures(b: pd.DataFrame, t: pd.DataFrame, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made = []

    def save(fig, name):
        for ext in ("png", "pdf"):
            fig.savefig(out / f"{name}.{ext}", dpi=120, bbox_inches="tight")
            made.append(out / f"{name}.{ext}")
        plt.close(fig)

    if not b.empty:
        med = b.groupby(["library", "ranks", "nodes", "size_bytes", "algorithm", "implementation"],
                        as_index=False).avg_us.median()
        for (lib, ranks, nodes), g in med.groupby(["library", "ranks", "nodes"]):
            tag = f"{lib}_n{nodes}_r{ranks}"
            fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
            for alg, a in g.groupby("algorithm"):
                a = a.sort_values("size_bytes")
                style = "--" if a.implementation.iloc[0] == "own" else "-"
                lw = 2.5 if alg in (DEFAULT, TUNED) else 1.2
                ax1.plot(a.size_bytes, a.avg_us, style, lw=lw, marker=".", label=alg)
                ax2.plot(a.size_bytes, a.size_bytes / a.avg_us / 1e3, style, lw=lw, marker=".", label=alg)
            for ax, ylabel in ((ax1, "latency (us)"), (ax2, "bandwidth (GB/s, size / time)")):
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_xlabel("message size (bytes)")
                ax.set_ylabel(ylabel)
                ax.grid(True, which="both", alpha=0.3)
            ax1.set_title(f"{LIBRARIES[lib].display}: MPI_Allreduce, {ranks} ranks, {nodes} node(s)")
            ax2.legend(fontsize=7, ncol=2)
            save(fig, f"latency_bandwidth_{tag}")

            d = g[g.algorithm == DEFAULT].set_index("size_bytes").avg_us
            if len(d):
                piv = g.pivot_table(index="algorithm", columns="size_bytes", values="avg_us")
                sp = (d / piv).reindex(columns=piv.columns)
                fig, ax = plt.subplots(figsize=(max(6, 0.5 * sp.shape[1] + 3), 0.4 * sp.shape[0] + 2))
                im = ax.imshow(np.log2(sp.values.astype(float)), cmap="RdBu", vmin=-1.5, vmax=1.5, aspect="auto")
                ax.set_xticks(range(sp.shape[1]), [format_size(c) for c in sp.columns], rotation=90)
                ax.set_yticks(range(sp.shape[0]), sp.index)
                for (i, j), v in np.ndenumerate(sp.values):
                    if np.isfinite(v):
                        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6)
                ax.set_title(f"{LIBRARIES[lib].display}, {ranks} ranks: speedup over the default (>1 faster)")
                fig.colorbar(im, ax=ax, label="log2 speedup")
                save(fig, f"speedup_heatmap_{tag}")
    if not t.empty:
        med = t.groupby(["framework", "library", "model", "parallel_mode", "ranks", "algorithm"],
                        as_index=False).img_per_s.median()
        for (model, ranks), g in med.groupby(["model", "ranks"]):
            g = g.sort_values(["framework", "library", "parallel_mode", "algorithm"])
            labels = [f"{r.framework} {r.library} {r.parallel_mode} {r.algorithm}" for r in g.itertuples()]
            fig, ax = plt.subplots(figsize=(8, 0.3 * len(g) + 1.5))
            colors = [f"C{list(LIBRARIES).index(lib)}" for lib in g.library]
            ax.barh(range(len(g)), g.img_per_s, color=colors)
            ax.set_yticks(range(len(g)), labels, fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel("training throughput (img/s, median over repetitions)")
            ax.set_title(f"{model}, {ranks} ranks")
            ax.grid(True, axis="x", alpha=0.3)
            save(fig, f"training_{model}_r{ranks}")
    return made


def report(bench_files, train_files, results: str | Path, figures: str | Path | None = None) -> list[Path]:
    results = Path(results)
    b, t = read.bench(bench_files), read.train(train_files)
    tables = results / "tables"
    written = []
    if not b.empty:
        for name, df in microbench_tables(b).items():
            save_frame(df, tables / name)
            written.append(tables / f"{name}.csv")
    if not t.empty:
        save_frame(training_table(t), tables / TRAINING_TABLE)
        written.append(tables / f"{TRAINING_TABLE}.csv")
    if (not b.empty and (b.algorithm == TUNED).any()) or (not t.empty and (t.algorithm == TUNED).any()):
        save_frame(tuned_table(b, t), tables / TUNED_TABLE)
        written.append(tables / f"{TUNED_TABLE}.csv")
    return written + make_figures(b, t, Path(figures) if figures else results / "figures" / "measured")
