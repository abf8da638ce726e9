"""The figures of `ardlab report` (PNG + PDF), each from a table of ``comparisons`` (medians with intervals).

- latency_bandwidth_<library>_n<N>_r<R>: latency and bandwidth against size, a line per algorithm, the 95%
  interval of each median as error bars;
- speedup_heatmap_<library>_n<N>_r<R>: each algorithm's speedup over the default per size; cells whose interval
  contains 1 are grey (no significant difference), the others coloured;
- training_<model>_r<R>: img/s of both frameworks per library and algorithm, with intervals;
- drift: each library default's reference per round against the time the round ran (normalised to its median).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ardlab.analysis.comparisons import references
from ardlab.bench.sizes import format_size
from ardlab.comm.libraries import DEFAULT, LIBRARIES, TUNED


def save_png_pdf(fig, out: Path, name: str, dpi: int = 150, bbox_inches: str | None = None) -> list[Path]:
    """`fig` laid out and written as <out>/<name>.png and .pdf, then closed; the two paths. `bbox_inches` "tight":
    the saved area grows to hold what lies outside the axes (a legend below them)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for path in paths:
        fig.savefig(path, dpi=dpi, bbox_inches=bbox_inches)
    plt.close(fig)
    return paths

def make(speedups: pd.DataFrame, train: pd.DataFrame, b: pd.DataFrame, t: pd.DataFrame, out: Path) -> list[Path]:
    """The run's figures (PNG and PDF) into `out`: per library and scale its latency/bandwidth and speedup heatmap,
    per model and scale the training throughputs, and the drift of each group's reference over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made: list[Path] = []

    def save(fig, name):
        if fig is None:
            return
        for ext in ("png", "pdf"):
            fig.savefig(out / f"{name}.{ext}", dpi=120, bbox_inches="tight")
            made.append(out / f"{name}.{ext}")
        plt.close(fig)

    for (lib, ranks, nodes), g in (speedups.groupby(["library", "ranks", "nodes"]) if len(speedups) else ()):
        tag = f"{lib}_n{nodes}_r{ranks}"
        save(_latency_bandwidth(plt, g, lib, ranks, nodes), f"latency_bandwidth_{tag}")
        save(_speedup_heatmap(plt, g, lib, ranks), f"speedup_heatmap_{tag}")
    for (model, ranks, nodes), g in (train.groupby(["model", "ranks", "nodes"]) if len(train) else ()):
        save(_training(plt, g, model, ranks, nodes),
             f"training_{model}_r{ranks}" if nodes == 1 else f"training_{model}_n{nodes}_r{ranks}")
    save(_drift(plt, b, t), "drift")
    return made


def _latency_bandwidth(plt, g: pd.DataFrame, lib: str, ranks: int, nodes: int):
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for alg, a in g.groupby("algorithm"):
        a = a.sort_values("size_bytes")
        style = "--" if a.implementation.iloc[0] == "own" else "-"
        lw = 2.5 if alg in (DEFAULT, TUNED) else 1.2
        err = [a.median_us - a.ci_low_us, a.ci_high_us - a.median_us]
        ax1.errorbar(a.size_bytes, a.median_us, yerr=err, fmt=style, lw=lw, marker=".", capsize=2, label=alg)
        bw = a.size_bytes / a.median_us / 1e3
        ax2.errorbar(a.size_bytes, bw, yerr=[bw - a.size_bytes / a.ci_high_us / 1e3,
                                             a.size_bytes / a.ci_low_us / 1e3 - bw],
                     fmt=style, lw=lw, marker=".", capsize=2, label=alg)
    for ax, ylabel in ((ax1, "latency (us): median over rounds, 95% interval"),
                       (ax2, "bandwidth (GB/s, size / time)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_title(f"{LIBRARIES[lib].display}: MPI_Allreduce, {ranks} ranks, {nodes} node(s)")
    ax2.legend(fontsize=7, ncol=2)
    return fig


def _speedup_heatmap(plt, g: pd.DataFrame, lib: str, ranks: int):
    sp = g.pivot_table(index="algorithm", columns="size_bytes", values="speedup_vs_default")
    if sp.empty:  # the group measured no default (a cost-model run's modelled algorithms): nothing to show
        return None
    sig = g.assign(sig=g.speedup_vs_default_verdict != "no significant difference").pivot_table(
        index="algorithm", columns="size_bytes", values="sig", aggfunc="first").reindex_like(sp)
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * sp.shape[1] + 3), 0.4 * sp.shape[0] + 2))
    shown = np.where(sig.fillna(False).to_numpy(dtype=bool), np.log2(sp.to_numpy(dtype=float)), np.nan)
    ax.imshow(np.where(np.isnan(shown), 0.0, np.nan), cmap="Greys", vmin=-4, vmax=4, aspect="auto")
    im = ax.imshow(shown, cmap="RdBu", vmin=-1.5, vmax=1.5, aspect="auto")
    ax.set_xticks(range(sp.shape[1]), [format_size(c) for c in sp.columns], rotation=90)
    ax.set_yticks(range(sp.shape[0]), sp.index)
    for (i, j), v in np.ndenumerate(sp.to_numpy(dtype=float)):
        if np.isfinite(v):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6,
                    color="black" if np.isfinite(shown[i, j]) else "dimgrey")
    ax.set_title(f"{LIBRARIES[lib].display}, {ranks} ranks: speedup over the default (>1 faster; grey: the "
                 "95% interval contains 1)", fontsize=9)
    fig.colorbar(im, ax=ax, label="log2 speedup (significant cells)")
    return fig


def _training(plt, g: pd.DataFrame, model: str, ranks: int, nodes: int):
    g = g.sort_values(["framework", "library", "parallel_mode", "algorithm"])
    labels = [f"{r.framework} {r.library} {r.parallel_mode} {r.algorithm}" for r in g.itertuples()]
    fig, ax = plt.subplots(figsize=(8, 0.3 * len(g) + 1.5))
    colors = [f"C{list(LIBRARIES).index(lib)}" for lib in g.library]
    ax.barh(range(len(g)), g.img_per_s, xerr=[g.img_per_s - g.ci_low, g.ci_high - g.img_per_s], color=colors,
            capsize=2)
    ax.set_yticks(range(len(g)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("training throughput (img/s): median over rounds, 95% interval")
    ax.set_title(f"{model}, {ranks} ranks" + (f" on {nodes} nodes" if nodes > 1 else ""))
    ax.grid(True, axis="x", alpha=0.3)
    return fig


def _drift(plt, b: pd.DataFrame, t: pd.DataFrame):
    refs = [(f"{group} {lib}", pd.to_datetime(per.started), per.ref / per.ref.median())
            for group, lib, _, per in references(b, t)]
    if not refs:
        return None
    fig, ax = plt.subplots(figsize=(9, 5))
    for label, when, ref in refs:
        ax.plot(when, ref, marker="o", lw=1, label=label)
    ax.axhline(1, color="k", lw=0.8)
    ax.set_ylabel("library default per round / its median (time or img/s)")
    ax.set_xlabel("start of the round (UTC)")
    ax.set_title("Drift: each group's reference over the run (pairing by round removes it from comparisons)")
    ax.legend(fontsize=6, ncol=2)
    ax.grid(True, alpha=0.3)
    fig.autofmt_xdate()
    return fig
