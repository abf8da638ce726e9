"""`ardlab predict`: the cost models' report -- fits, held-out validation and predictions as tables, predicted
tuned selection files, and figures. The models themselves (formulas, fitting, validation) are in ``costmodel``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ardlab.analysis import read, tuned
from ardlab.analysis.costmodel import HOLDOUTS, TooFewSizes, fit_all, predict, score, validate
from ardlab.comm.libraries import library
from ardlab.results import save_frame

TABLES = ("fits", "validation", "predictions")  # costmodel_<name>.{csv,md}, always written


def run(bench_files, results, figures, ranks: list[int], sizes: list[int], cores_per_node: int | None = None) -> list:
    """`ardlab predict`: fits, held-out validation, predictions, predicted tuned files and figures."""
    results, figures = Path(results), Path(figures)
    b = read.bench(bench_files)
    if b.empty:
        raise ValueError("no microbenchmark rows to fit")
    tables = results / "tables"
    fits = fit_all(b, cores_per_node)
    fit_df = pd.DataFrame([row for f in fits for row in f.rows()])
    save_frame(fit_df, tables / f"costmodel_{TABLES[0]}")
    vals = []
    for h in HOLDOUTS:
        try:
            vals.append(validate(b, h, cores_per_node=cores_per_node))
        except TooFewSizes as e:  # the fits and predictions stand; this hold-out is reported as not possible
            print(f"note: no {h} hold-out validation: {e}")
    val = pd.concat(vals, ignore_index=True) if vals else pd.DataFrame()
    save_frame(score(val), tables / f"costmodel_{TABLES[1]}")
    if len(val):
        save_frame(val, tables / "costmodel_validation_points")
    pred = predict(fits, b, ranks, sizes)
    save_frame(pred, tables / f"costmodel_{TABLES[2]}")
    written = [tables / f"costmodel_{t}.csv" for t in TABLES]
    for (lib, p), g in pred.groupby(["library", "ranks"]) if len(pred) else ():
        ranges = tuned.merge_ranges(zip(g.size_bytes, g.predicted_best))
        if all(library(lib).algorithms[r.algorithm].selectable for r in ranges):
            out = tuned.path(results / "tuned" / "predicted", lib, int(p))
            try:
                written.append(tuned.write(lib, ranges, int(p), out))
            except (FileNotFoundError, ValueError) as e:  # MPICH needs its libmpi for the built-in tree
                print(f"note: no predicted tuned file for {lib}: {e}")
    return written + _figures(fits, b, val, pred, figures)


def _figures(fits, b, val, pred, out) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made = []
    if len(val):
        fig, ax = plt.subplots(figsize=(6, 6))
        for i, ((h, over, lib), g) in enumerate(val.groupby(["holdout", "oversubscribed", "library"])):
            ax.scatter(g.predicted_pick_measured_us, g.predicted_us, s=14, color=f"C{i % 10}",
                       marker="o" if h == "sizes" else "^", facecolors="none" if over else f"C{i % 10}",
                       label=f"{lib}, held-out {h}{' (oversubscribed)' if over else ''}: "
                             f"{g.within_10pct.mean():.0%} within 10%")
        lim = [val[["predicted_us", "predicted_pick_measured_us"]].min().min() / 2,
               val[["predicted_us", "predicted_pick_measured_us"]].max().max() * 2]
        ax.plot(lim, lim, "k--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured time of the predicted best (us, held out)")
        ax.set_ylabel("predicted time (us)")
        ax.set_title("Cost model on held-out points (larger ranks or sizes than fitted)")
        ax.legend(fontsize=8)
        for ext in ("png", "pdf"):
            fig.savefig(out / f"predicted_vs_measured.{ext}", dpi=120, bbox_inches="tight")
            made.append(out / f"predicted_vs_measured.{ext}")
        plt.close(fig)
    for lib in sorted({f.library for f in fits}):
        ok = [f for f in fits if f.library == lib and f.status == "ok" and f.node_class == "intra"]
        if not ok:
            continue
        p = int(pred.ranks.max()) if len(pred) else 1024
        n = np.unique(np.logspace(2, 30, 57, base=2).astype(int))
        fig, ax = plt.subplots(figsize=(7, 5))
        for f in ok:
            ax.plot(n, f.predict(n, [p] * len(n)), "--" if f.algorithm.startswith("own_") else "-", label=f.algorithm)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("predicted time (us)")
        ax.set_title(f"{library(lib).display}: predicted MPI_Allreduce at {p} ranks (intra-node constants)")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(True, which="both", alpha=0.3)
        for ext in ("png", "pdf"):
            fig.savefig(out / f"predicted_{lib}_r{p}.{ext}", dpi=120, bbox_inches="tight")
            made.append(out / f"predicted_{lib}_r{p}.{ext}")
        plt.close(fig)
    return made
