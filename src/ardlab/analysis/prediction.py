"""Why the microbenchmark's ranking hardly predicts training: its predicted Allreduce per step beside what training
measured of the same variants, per run, group and variant (``parts``), summed up per run and regime (``summary``),
and a figure (``figure``).

The prediction is the pick file's (``ardlab pick``: the job's calls x the microbenchmark's times, made before
training). What training measured, medians over the rounds of the loss-agreeing rows:

- the step: the images of a step over the row's img/s (``batch_per_rank x ranks / img_per_s``);
- the time the Allreduce added to the step: the row's Allreduce share (``versus_study.allreduce_share``: Horovod's
  step less the same batches' compute alone, ardlab.nn's blocking calls and waits) times the step;
- the rest of the step: the step less the time the Allreduce added (compute, the framework, ranks waiting);
- the seconds inside summing MPI_Allreduce calls a step, timed by the call interposer in the training itself
  (``allreduce_in_step_s``, ``ardlab.comm.calltimer``); empty in rows from before that column.

Horovod overlaps its Allreduce with backprop, so the time it adds can be far less than the time inside the calls;
where both are measured, the table shows both. The summary gives per run and regime the median of measured over
predicted, how well the predicted Allreduce ranks each group's variants by what the Allreduce added (Spearman)
against how well it ranks them by the step, and how much the predicted Allreduce and the rest of the step vary
between one group's variants (the median over groups of each one's range, the picked-worst controls left out): where
the first correlation is high and the rest varies as much as the prediction, the microbenchmark predicts the
Allreduce and the rest of the step (compute, ranks sharing cores) decides which variant trains fastest.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ardlab.analysis import study_claims as sc
from ardlab.analysis.figures import save_png_pdf

PARTS_COLUMNS = ["run", "link_rate", "group", "regime", "library", "algorithm", "pick", "rounds",
                 "predicted_allreduce_s", "step_s", "added_s", "rest_s", "allreduce_in_step_s", "added_over_predicted",
                 "inside_over_predicted"]
SUMMARY_COLUMNS = ["run", "link_rate", "regime", "groups", "variants", "median_added_over_predicted",
                   "median_inside_over_predicted", "median_rank_correlation_added", "median_rank_correlation_step",
                   "median_predicted_range_s", "median_rest_range_s"]
MIN_VARIANTS = 3  # a group's rank correlation needs this many variants with a prediction


def _rows(run: Path) -> pd.DataFrame:
    """The run's loss-agreeing training rows (what its report's claims are made from)."""
    from ardlab.analysis import read
    from ardlab.analysis.comparisons import trusted

    t = read.train(read.run_files(run)[1])
    return trusted(t)[0] if len(t) else t


def parts(runs: list[str | Path]) -> pd.DataFrame:
    """Per run, group and trained variant that carries a prediction: the predicted Allreduce per step beside the
    step, the time the Allreduce added to it and the time inside it (the module's docstring), in seconds."""
    from ardlab.analysis.versus_study import allreduce_share, numeric, read_picks, reported_table
    from ardlab.results import recorded_config

    out = []
    for run in map(Path, runs):
        picks = read_picks(run)
        if not picks:  # no pick files: nothing was predicted
            continue
        rate = str(recorded_config(run).get("link_rate") or "")
        t = _rows(run)
        if t.empty:
            continue
        shared = reported_table(run, "training_throughput").groupby("group").time_shared.apply(
            lambda s: bool(s.astype(bool).any()))
        step = numeric(t, "batch_per_rank") * numeric(t, "ranks") / numeric(t, "img_per_s")
        t = t.assign(step_s_=step, added_s_=allreduce_share(t) * step, inside_s_=numeric(t, "allreduce_in_step_s"))
        for (group, lib, alg), g in t.groupby(["group", "library", "algorithm"], sort=True):
            lp = picks.get(group, {}).get(lib, {})
            predicted = lp.get("predicted", {}).get(alg)
            if predicted is None:
                continue
            p = predicted / 1e6
            added, inside = g.added_s_.median(), g.inside_s_.median()
            out.append({"run": str(run), "link_rate": rate, "group": group,
                        "regime": sc.regime_of(bool(shared.get(group, False))), "library": lib, "algorithm": alg,
                        "pick": ";".join(k for k in ("best", "worst") if lp.get(k) == alg), "rounds": len(g),
                        "predicted_allreduce_s": p, "step_s": g.step_s_.median(), "added_s": added,
                        "rest_s": (g.step_s_ - g.added_s_).median(), "allreduce_in_step_s": inside,
                        "added_over_predicted": added / p, "inside_over_predicted": inside / p})
    return pd.DataFrame(out, columns=PARTS_COLUMNS)


def _correlation(g: pd.DataFrame, column: str) -> float:
    from scipy import stats

    both = g[["predicted_allreduce_s", column]].dropna()
    if len(both) < MIN_VARIANTS or both[column].nunique() < 2:
        return np.nan
    return float(stats.spearmanr(both.predicted_allreduce_s, both[column]).statistic)


def _ranges(g: pd.DataFrame) -> dict[str, float]:
    """The median over `g`'s groups of the range (max - min) of the predicted Allreduce and of the rest of the step
    over each group's variants, the picked-worst controls left out (slower by construction, they would carry it)."""
    kept = g[~g.pick.str.contains("worst")].groupby("group")
    return {"median_predicted_range_s": float(kept.predicted_allreduce_s.agg(np.ptp).median()),
            "median_rest_range_s": float(kept.rest_s.agg(np.ptp).median())}


def summary(p: pd.DataFrame) -> pd.DataFrame:
    """``parts`` per run and regime (one rank a node first): the groups and variants, the medians of measured over
    predicted (the time added; the time inside, where measured), the median over groups of the predicted
    Allreduce's rank correlation with the time added and with the step, and of the range (max - min over a group's
    variants but the picked-worst controls) of the predicted Allreduce and of the rest of the step."""
    if p.empty:
        return pd.DataFrame(columns=SUMMARY_COLUMNS)
    order = {r: i for i, r in enumerate(sc.REGIMES)}
    p = p.iloc[np.argsort(p.regime.map(order).fillna(len(order)).to_numpy(), kind="stable")]
    rows = []
    for (regime, run, rate), g in p.groupby(["regime", "run", "link_rate"], sort=False):
        per_group = g.groupby("group")
        rows.append({"run": run, "link_rate": rate, "regime": regime, "groups": per_group.ngroups,
                     "variants": len(g), "median_added_over_predicted": float(g.added_over_predicted.median()),
                     "median_inside_over_predicted": float(g.inside_over_predicted.median()),
                     "median_rank_correlation_added": float(np.nanmedian([_correlation(x, "added_s")
                                                                          for _, x in per_group] or [np.nan])),
                     "median_rank_correlation_step": float(np.nanmedian([_correlation(x, "step_s")
                                                                         for _, x in per_group] or [np.nan])),
                     **_ranges(g)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def figure(p: pd.DataFrame, out: Path) -> list[Path]:
    """Measured against predicted Allreduce per step, one panel per regime: the time the Allreduce added to a step
    (filled) and, where measured, the time inside its calls (hollow), each library in its colour, each link rate in
    its marker, with the line where measured equals predicted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ardlab.analysis.versus_study import RATE_MARKERS

    p = p.dropna(subset=["added_s"])
    p = p[p.added_s > 0]
    if p.empty:
        return []
    regimes = [r for r in sc.REGIMES if r in set(p.regime)]
    colours = {lib: f"C{i}" for i, lib in enumerate(sorted(p.library.unique()))}
    fig, axes = plt.subplots(1, len(regimes), figsize=(4.6 * len(regimes), 4.0), squeeze=False)
    lo = min(p.predicted_allreduce_s.min(), p.added_s.min(), p.allreduce_in_step_s.min(skipna=True)
             if p.allreduce_in_step_s.notna().any() else np.inf) / 1.5
    hi = max(p.predicted_allreduce_s.max(), p.added_s.max(), p.allreduce_in_step_s.max(skipna=True)
             if p.allreduce_in_step_s.notna().any() else 0) * 1.5
    for ax, regime in zip(axes[0], regimes):
        for (lib, rate), g in p[p.regime == regime].groupby(["library", "link_rate"]):
            marker = RATE_MARKERS.get(rate, "s")
            ax.scatter(g.predicted_allreduce_s, g.added_s, color=colours[lib], marker=marker, alpha=0.8,
                       label=f"{sc.display(lib)}, {rate}: added to the step")
            inside = g.dropna(subset=["allreduce_in_step_s"])
            if len(inside):
                ax.scatter(inside.predicted_allreduce_s, inside.allreduce_in_step_s, facecolors="none",
                           edgecolors=colours[lib], marker=marker, label=f"{sc.display(lib)}, {rate}: inside its calls")
        ax.plot([lo, hi], [lo, hi], color="grey", lw=0.8, label="measured = predicted")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_title(regime, fontsize=9)
        ax.set_xlabel("predicted Allreduce per step (s, microbenchmark)")
    axes[0][0].set_ylabel("measured in training, per step (s)")
    axes[0][-1].legend(fontsize=6, loc="best")
    return save_png_pdf(fig, out, "allreduce_predicted_vs_training")
