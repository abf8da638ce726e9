"""`ardlab predict`: the cost models' report -- fits, held-out validation, predictions, and (across nodes at
known link rates) the fitted beta against the links' rates, as tables; predicted tuned selection files; figures.
The models themselves (formulas, fitting, validation) are in ``costmodel``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ardlab.analysis import read, tuned
from ardlab.analysis.costmodel import (
    GROUND_TRUTH_MIN_SIZES,
    HOLDOUTS,
    Network,
    TooFewSizes,
    fit_all,
    ground_truth,
    ground_truth_rows,
    predict,
    prediction_fits,
    rate_scaling,
    read_fits,
    score,
    validate,
)
from ardlab.comm.libraries import library
from ardlab.results import save_frame

TABLES = ("fits", "validation", "predictions", "ground_truth", "rate_scaling")  # costmodel_<name>.{csv,md}


def run(bench_files, results, figures, ranks: list[int], sizes: list[int], cores_per_node: int | None = None,
        *, fits_file=None, network: Network | None = None) -> list:
    """`ardlab predict`: fits (from `bench_files`, or read from `fits_file`), held-out validation (measurements
    only), predictions (for `network` if given), the ground-truth tables, predicted tuned files and figures."""
    results, figures = Path(results), Path(figures)
    tables = results / "tables"
    if fits_file is not None:
        b, fits = None, read_fits(fits_file)
    else:
        b = read.bench(bench_files)
        if b.empty:
            raise ValueError("no microbenchmark rows to fit")
        fits = fit_all(b, cores_per_node)
    fit_df = pd.DataFrame([row for f in fits for row in f.rows()])
    save_frame(fit_df, tables / f"costmodel_{TABLES[0]}")
    vals = []
    for h in HOLDOUTS if b is not None else ():
        try:
            vals.append(validate(b, h, cores_per_node=cores_per_node))
            for why in vals[-1].attrs["skipped"]:
                print(f"note: {h} hold-out without {why}")
        except TooFewSizes as e:  # the fits and predictions stand; this hold-out is reported as not possible
            print(f"note: no {h} hold-out validation: {e}")
    val = pd.concat(vals, ignore_index=True) if vals else pd.DataFrame()
    save_frame(score(val), tables / f"costmodel_{TABLES[1]}")
    if len(val):
        save_frame(val, tables / "costmodel_validation_points")
    else:  # no hold-out: an earlier run's points must not stand beside this run's empty score
        for ext in ("csv", "md"):
            (tables / f"costmodel_validation_points.{ext}").unlink(missing_ok=True)
    pred = predict(fits, b, ranks, sizes, network)
    save_frame(pred, tables / f"costmodel_{TABLES[2]}")
    gt = ground_truth(fit_all(ground_truth_rows(b), cores_per_node, GROUND_TRUTH_MIN_SIZES) if b is not None
                      else fits)
    save_frame(gt, tables / f"costmodel_{TABLES[3]}")
    save_frame(rate_scaling(gt), tables / f"costmodel_{TABLES[4]}")
    written = [tables / f"costmodel_{t}.csv" for t in TABLES]
    for (lib, cls, rate, p), g in pred.groupby(["library", "node_class", "link_rate", "ranks"]) if len(pred) else ():
        ranges = tuned.merge_ranges(zip(g.size_bytes, g.predicted_best))
        if all(library(lib).algorithms[r.algorithm].selectable for r in ranges):
            folder = "predicted" if cls == "intra" else f"predicted-{rate}"
            out = tuned.path(results / "tuned" / folder, lib, int(p))
            try:
                written.append(tuned.write(lib, ranges, int(p), out))
            except (FileNotFoundError, ValueError) as e:  # MPICH needs its libmpi for the built-in tree
                print(f"note: no predicted tuned file for {lib}: {e}")
    return written + _figures(fits, b, val, pred, figures, network) + _ground_truth_figure(gt, figures)


def _ground_truth_figure(gt: pd.DataFrame, out: Path) -> list:
    """Fitted inter-node beta of the bandwidth-optimal algorithms over the link's 8/rate, per rate."""
    if gt.empty:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    labels = [f"{lib} {alg}" for lib, alg in dict.fromkeys(zip(gt.library, gt.algorithm))]
    rates = list(dict.fromkeys(gt.link_rate))
    fig, ax = plt.subplots(figsize=(max(6, 0.7 * len(labels)), 4))
    width = 0.8 / len(rates)
    for i, rate in enumerate(rates):
        g = gt[gt.link_rate == rate]
        x = [labels.index(f"{lib} {alg}") + i * width for lib, alg in zip(g.library, g.algorithm)]
        ax.bar(x, g.fitted_over_wire, width, label=f"{rate}", color=f"C{i}")
    ax.axhspan(0.85, 1.15, color="0.9", zorder=0, label="within 15%")
    ax.axhline(1.0, color="k", lw=1)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels, fontsize=7, rotation=40, ha="right",
                  rotation_mode="anchor")
    ax.set_ylabel("fitted beta / (8 / link rate)")
    ax.set_title("Inter-node beta of the bandwidth-optimal algorithms against the link's rate")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    made = []
    for ext in ("png", "pdf"):
        fig.savefig(out / f"ground_truth_beta.{ext}", dpi=120, bbox_inches="tight")
        made.append(out / f"ground_truth_beta.{ext}")
    plt.close(fig)
    return made


def _figures(fits, b, val, pred, out, network) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    made = []
    if len(val):
        fig, ax = plt.subplots(figsize=(6, 6))
        marker = {"sizes": "o", "ranks": "^", "nodes": "s"}
        for i, ((h, rate, over, lib), g) in enumerate(val.groupby(["holdout", "link_rate", "oversubscribed",
                                                                   "library"])):
            ax.scatter(g.predicted_pick_measured_us, g.predicted_us, s=14, color=f"C{i % 10}",
                       marker=marker[h], facecolors="none" if over else f"C{i % 10}",
                       label=f"{lib}{', ' + rate if rate else ''}, held-out {h}"
                             f"{' (oversubscribed)' if over else ''}: {g.within_10pct.mean():.0%} within 10%")
        lim = [val[["predicted_us", "predicted_pick_measured_us"]].min().min() / 2,
               val[["predicted_us", "predicted_pick_measured_us"]].max().max() * 2]
        ax.plot(lim, lim, "k--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured time of the predicted best (us, held out)")
        ax.set_ylabel("predicted time (us)")
        ax.set_title("Cost model on held-out points (larger sizes, ranks or nodes than fitted)")
        ax.legend(fontsize=6)
        for ext in ("png", "pdf"):
            fig.savefig(out / f"predicted_vs_measured.{ext}", dpi=120, bbox_inches="tight")
            made.append(out / f"predicted_vs_measured.{ext}")
        plt.close(fig)
    for lib, cls, _, ok in prediction_fits(fits, network) if len(pred) else ():
        p = int(pred.ranks.max())
        rate = ok[0].link_rate
        n = np.unique(np.logspace(2, 30, 57, base=2).astype(int))
        fig, ax = plt.subplots(figsize=(7, 5))
        for f in ok:
            ax.plot(n, f.predict(n, [p] * len(n)), "--" if f.algorithm.startswith("own_") else "-", label=f.algorithm)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("predicted time (us)")
        where = "intra-node constants" if cls == "intra" else f"{p} nodes x 1 rank, links at {rate}"
        ax.set_title(f"{library(lib).display}: predicted MPI_Allreduce at {p} ranks ({where})", fontsize=9)
        ax.legend(fontsize=7, ncol=2)
        ax.grid(True, which="both", alpha=0.3)
        for ext in ("png", "pdf"):
            name = f"predicted_{lib}_r{p}" + ("" if cls == "intra" else f"_{rate}")
            fig.savefig(out / f"{name}.{ext}", dpi=120, bbox_inches="tight")
            made.append(out / f"{name}.{ext}")
        plt.close(fig)
    return made
