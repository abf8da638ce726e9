"""The study we reproduce against ardlab's measurement: its two training claims, side by side with ours.

The study (MPI_Allreduce in MPICH, Open MPI and Intel MPI under TensorFlow + Horovod) reports that choosing the
algorithm sped training up 1.2x over the library's default, and that choosing the library as well gave up to 2.8x.
From a run's training groups (``comparisons.training``: paired rounds, 95% intervals) this module states, per claim,
ardlab's number where it is largest and significant (else the largest point estimate), with the group it comes
from (framework, model, nodes x ranks, link rate) and the share of a step the Allreduce took there
(``allreduce_share``), and says plainly whether the measurement confirms the study:

- per library: its best variant over its default (the study's 1.2x); also its tuned file and the algorithm picked
  best from the microbenchmark before training (``ardlab pick``), the selections the study's method makes;
- the best library+algorithm over the worst library's default, and over the worst combination (up to 2.8x).

The figure (``figure``): each selection's training speedup over the default against the Allreduce share of the
group, per library, with intervals; the study's 1.2x as a line. ``regimes`` puts the points of several runs (link
rates) on one such figure (`ardlab report --regimes RUN...`), each run's rate in its own marker.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ardlab.analysis.comparisons import by_round, paired_speedup
from ardlab.stats import FASTER, TOO_FEW
from ardlab.comm.libraries import DEFAULT, TUNED
from ardlab.results import recorded_config

STUDY = {"algorithm": 1.2, "library": 2.8}
POINT_COLUMNS = ["group", "library", "selection", "algorithm", "framework", "model", "nodes", "ranks",
                 "allreduce_share", "speedup", "ci_low", "ci_high"]
COLUMNS = ["claim", "study", "ardlab", "ci_low", "ci_high", "verdict", "agreement", "library", "variant", "framework",
           "model", "nodes", "ranks", "link_rate", "allreduce_share", "groups_significant", "groups"]


def allreduce_share(t: pd.DataFrame) -> pd.Series:
    """Per training row, the share of its steps' time the Allreduce took: ardlab.nn's blocking calls and waits over
    its step time; Horovod's added time (its batches less their compute alone, --compute-batches) over the batches'
    time. NaN where the row has no split."""
    num = lambda c: pd.to_numeric(t.get(c, pd.Series(np.nan, index=t.index)), errors="coerce")  # noqa: E731
    compute, allreduce, wait = num("compute_s"), num("allreduce_s"), num("wait_s").fillna(0.0)
    comm = allreduce + wait
    return (comm / (compute + comm)).where(compute > 0)


def read_picks(results: str | Path) -> dict[str, dict[str, dict[str, str]]]:
    """group -> library -> {best: algorithm, worst: algorithm}, from a run folder's picks/ (ardlab pick)."""
    out: dict = {}
    folder = Path(results) / "picks"
    for path in sorted(folder.glob("**/*.csv")) if folder.is_dir() else ():
        group = str(path.relative_to(folder).with_suffix(""))
        table = pd.read_csv(path, keep_default_na=False)
        for r in table.itertuples():
            for label in filter(None, r.pick.split(";")):
                out.setdefault(group, {}).setdefault(r.library, {})[label] = r.algorithm
    return out


def _agreement(value: float, lo: float, hi: float, study: float, verdict: str) -> str:
    if verdict == TOO_FEW or np.isnan(lo):
        return "no interval (too few rounds)"
    if verdict != FASTER:
        if lo <= study <= hi:  # the interval holds no speedup and the study's value alike
            return "not significant: the interval holds both 1x and the study's value"
        return "no significant speedup: does not confirm the study"
    if lo <= study <= hi:
        return "confirms the study's value"
    return "significant, smaller than the study's" if hi < study else "significant, larger than the study's"


def _row(claim: str, study: float, r: pd.Series, prefix: str, variant: str, shares: pd.Series, sig: int, n: int,
         rates: dict) -> dict:
    return {"claim": claim, "study": study, "ardlab": r[prefix], "ci_low": r[f"{prefix}_ci_low"],
            "ci_high": r[f"{prefix}_ci_high"], "verdict": r[f"{prefix}_verdict"],
            "agreement": _agreement(r[prefix], r[f"{prefix}_ci_low"], r[f"{prefix}_ci_high"], study,
                                    r[f"{prefix}_verdict"]),
            "library": r["library"], "variant": variant, "framework": r["framework"], "model": r["model"],
            "nodes": int(r["nodes"]), "ranks": int(r["ranks"]), "link_rate": rates.get(r["group"], ""),
            "allreduce_share": shares.get((r["group"], f"{r['library']}/{DEFAULT}"), np.nan),
            "groups_significant": sig, "groups": n}


def _largest(rows: pd.DataFrame, prefix: str) -> tuple[pd.Series | None, int]:
    """The row with the largest significant speedup (else the largest point estimate), and how many are
    significant."""
    if rows.empty or rows[prefix].isna().all():
        return None, 0
    sig = rows[rows[f"{prefix}_verdict"] == FASTER]
    pool = sig if len(sig) else rows
    return pool.loc[pool[prefix].idxmax()], len(sig)


def table(train: pd.DataFrame, t: pd.DataFrame, picks: dict | None = None) -> pd.DataFrame:
    """The study-vs-ardlab table (see the module's docstring) from ``comparisons.training`` and the raw rows."""
    if train.empty:
        return pd.DataFrame(columns=COLUMNS)
    picks = picks or {}
    t = t.assign(allreduce_share=allreduce_share(t), variant=t.library + "/" + t.algorithm)
    shares = t.groupby(["group", "variant"]).allreduce_share.median()
    rates = t.groupby("group").link_rate.first().fillna("").astype(str).to_dict() if "link_rate" in t else {}
    rows = []
    for lib, g in train.groupby("library"):
        forced = g[g.algorithm != DEFAULT]
        selections = [(f"{lib}: its best variant over its default", forced, "best measured")]
        selections.append((f"{lib}: its tuned file over its default", forced[forced.algorithm == TUNED], "tuned"))
        is_pick = [picks.get(r.group, {}).get(lib, {}).get("best") == r.algorithm for r in forced.itertuples()]
        picked = forced[np.array(is_pick, dtype=bool)]
        selections.append((f"{lib}: the algorithm picked best from the microbenchmark over its default", picked,
                           "picked best"))
        for claim, rows_, label in selections:
            r, sig = _largest(rows_.dropna(subset=["speedup_vs_default"]), "speedup_vs_default")
            if r is not None:
                n = rows_.group.nunique()
                rows.append(_row(claim, STUDY["algorithm"], r, "speedup_vs_default", f"{label}: {r.algorithm}",
                                 shares, sig, n, rates))
    # across libraries: the group's best variant over the worst library default, and over the worst variant
    best = train.loc[train.groupby("group").img_per_s.idxmax()]
    defaults = train[train.algorithm == DEFAULT]
    worst_default = defaults.loc[defaults.groupby("group").img_per_s.idxmin()].set_index("group")
    vs_default = []
    for r in best.itertuples():
        if r.group in worst_default.index:
            w = worst_default.loc[r.group]
            piv = by_round(t[t.group == r.group], "img_per_s")
            s = paired_speedup(False, piv[f"{w.library}/{DEFAULT}"], piv[f"{r.library}/{r.algorithm}"],
                               "speedup_vs_wd")
            vs_default.append({**r._asdict(), **s, "worst_default": w.library})
    vs = pd.DataFrame(vs_default)
    r, sig = _largest(vs, "speedup_vs_wd") if len(vs) else (None, 0)
    if r is not None:
        rows.append(_row("best library+algorithm over the worst library's default", STUDY["library"], r,
                         "speedup_vs_wd", f"{r['library']}/{r['algorithm']} over {r['worst_default']}/{DEFAULT}",
                         shares, sig, len(vs), rates))
    r, sig = _largest(best, "speedup_vs_worst")
    if r is not None:
        rows.append(_row("best library+algorithm over the worst combination", STUDY["library"], r, "speedup_vs_worst",
                         f"{r['library']}/{r['algorithm']} over {r['worst']}", shares, sig, len(best), rates))
    return pd.DataFrame(rows, columns=COLUMNS)


def points(train: pd.DataFrame, t: pd.DataFrame, picks: dict | None = None) -> pd.DataFrame:
    """Per group and library: the tuned file's and the picked best's speedup over the default (with intervals)
    against the default's Allreduce share: the figure's points."""
    if train.empty:
        return pd.DataFrame(columns=POINT_COLUMNS)
    picks = picks or {}
    t = t.assign(allreduce_share=allreduce_share(t), variant=t.library + "/" + t.algorithm)
    shares = t.groupby(["group", "variant"]).allreduce_share.median()
    out = []
    for r in train[train.algorithm != DEFAULT].itertuples():
        best = picks.get(r.group, {}).get(r.library, {}).get("best")
        selection = "tuned" if r.algorithm == TUNED else "picked best" if r.algorithm == best else None
        if selection:
            out.append({"group": r.group, "library": r.library, "selection": selection, "algorithm": r.algorithm,
                        "framework": r.framework, "model": r.model, "nodes": r.nodes, "ranks": r.ranks,
                        "allreduce_share": shares.get((r.group, f"{r.library}/{DEFAULT}"), np.nan),
                        "speedup": r.speedup_vs_default, "ci_low": r.speedup_vs_default_ci_low,
                        "ci_high": r.speedup_vs_default_ci_high})
    return pd.DataFrame(out, columns=POINT_COLUMNS)


REGIME_COLUMNS = ["run", "link_rate", *POINT_COLUMNS]
# A rate's marker in the figure of several runs (`regimes`); rates not listed get the next of EXTRA_MARKERS.
RATE_MARKERS = {"1gbit": "o", "250mbit": "^"}
EXTRA_MARKERS = ("D", "v", "P", "X")


def _reported_table(run: Path, name: str) -> pd.DataFrame:
    """A table that `ardlab report --run` wrote into `run`; FileNotFoundError naming it and that command if missing."""
    table = run / "tables" / f"{name}.csv"
    if not table.is_file():
        raise FileNotFoundError(f"{table} is missing: {run} is not a reported run folder "
                                f"(ardlab report --run {run} makes it)")
    return pd.read_csv(table)


def regimes(runs: list[str | Path]) -> pd.DataFrame:
    """The figure's points of several runs in one table, each with its run folder and link rate (run.yaml's
    config): one point per group, library and selection, as each run's own `report` wrote them
    (tables/selection_vs_share.csv)."""
    frames = []
    for run in runs:
        run = Path(run)
        pts = _reported_table(run, "selection_vs_share")
        rate = recorded_config(run).get("link_rate")
        if not rate:
            raise ValueError(f"{run / 'run.yaml'} names no link_rate: {run} is not a run across nodes")
        frames.append(pts.assign(run=str(run), link_rate=str(rate))[REGIME_COLUMNS])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=REGIME_COLUMNS)


HEADLINE_COLUMNS = ["claim", "study", "link_rate", "ardlab", "ci_low", "ci_high", "agreement", "library", "variant",
                    "framework", "model", "nodes", "ranks", "allreduce_share", "groups_significant", "groups", "run"]
# The README's names for what the tables hold in their own words.
FRAMEWORK_NAMES = {"tensorflow": "TF+Horovod", "ardlab.nn": "ardlab.nn"}


def headline(runs: list[str | Path]) -> pd.DataFrame:
    """The study-vs-ardlab claims of several runs (one per link rate) in one table, claim by claim: per library its
    best variant over its default (the study's 1.2x), then the best library+algorithm over the worst library's
    default and over the worst combination (up to 2.8x); each run's row as its own `report` wrote it
    (tables/study_vs_ardlab.csv), with its run folder."""
    frames = []
    for run in map(Path, runs):
        t = _reported_table(run, "study_vs_ardlab")
        rate = recorded_config(run).get("link_rate") or ""
        frames.append(t.assign(run=str(run), link_rate=t.link_rate.fillna(rate).astype(str)))
    if not frames:
        return pd.DataFrame(columns=HEADLINE_COLUMNS)
    t = pd.concat(frames, ignore_index=True)
    libraries = sorted(t.library.unique())
    claims = [f"{lib}: its best variant over its default" for lib in libraries]
    claims += ["best library+algorithm over the worst library's default",
               "best library+algorithm over the worst combination"]
    t = t[t.claim.isin(claims)].assign(order=lambda d: d.claim.map(claims.index), runs=lambda d: d.run.map(
        [str(Path(r)) for r in runs].index))
    return t.sort_values(["order", "runs"])[HEADLINE_COLUMNS].reset_index(drop=True)


def headline_markdown(t: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """`headline`'s rows as the README shows them: claim and the study's value, link rate, ardlab's speedup with its
    95% interval and the selection it comes from, where (framework, model, nodes x ranks a node), the Allreduce's share
    of the default's step, and the verdict."""
    from ardlab.cluster.links import rate_text
    from ardlab.comm.libraries import library

    def selection(r) -> str:
        if "over" in r.variant:  # across libraries: "intelmpi/tuned over intelmpi/default"
            best, worst = (v.split("/") for v in r.variant.split(" over "))
            name = lambda lib, alg: f"{library(lib).display} {'tuned file' if alg == TUNED else f'`{alg}`'}"
            return f"{name(*best)} over {name(*worst)}"
        alg = r.variant.split(": ", 1)[-1]
        return "tuned file" if alg == TUNED else f"`{alg}`"

    rows = []
    for r in t.itertuples():
        claim = (f"{library(r.claim.split(':')[0]).display}: best algorithm over its default" if ":" in r.claim
                 else r.claim)
        rows.append([f"{claim} ({'up to ' if r.study == STUDY['library'] else ''}{r.study:g}x)", rate_text(r.link_rate),
                     f"{r.ardlab:.2f}x [{r.ci_low:.2f}, {r.ci_high:.2f}] ({selection(r)})",
                     f"{FRAMEWORK_NAMES.get(r.framework, r.framework)} {r.model}, {r.nodes} x {r.ranks // r.nodes}",
                     f"{r.allreduce_share:.2f}", r.agreement])
    return ["claim (study)", "link", "ardlab", "where", "Allreduce share", "verdict"], rows


def figure(pts: pd.DataFrame, out: Path) -> list[Path]:
    """Training speedup of each selection over the default against the Allreduce share, one panel per library;
    with a ``link_rate`` column (``regimes``), each rate in its own marker, each selection and framework in its own
    colour."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if pts.empty or pts.allreduce_share.isna().all():
        return []
    libs = sorted(pts.library.unique())
    by_rate = "link_rate" in pts
    keys = ["selection", "framework", *(["link_rate"] if by_rate else [])]
    extra = iter(EXTRA_MARKERS)
    markers = {rate: RATE_MARKERS.get(rate) or next(extra) for rate in dict.fromkeys(pts.link_rate)} if by_rate else {}
    kinds = sorted({(r.selection, r.framework) for r in pts.itertuples()})
    colours = {k: f"C{i}" for i, k in enumerate(kinds)}
    fig, axes = plt.subplots(1, len(libs), figsize=(4.2 * len(libs), 3.6), sharey=True, squeeze=False)
    for ax, lib in zip(axes[0], libs):
        for key, g in pts[pts.library == lib].groupby(keys, sort=False):
            sel, fw, rate = (*key, None)[:3]
            lo = (g.speedup - g.ci_low).clip(lower=0).fillna(0)
            hi = (g.ci_high - g.speedup).clip(lower=0).fillna(0)
            fmt = markers[rate] if rate else "o" if sel == "tuned" else "s"
            label = f"{sel}, {fw}" + (f", {rate}" if rate else "")
            ax.errorbar(g.allreduce_share, g.speedup, yerr=[lo, hi], fmt=fmt, color=colours[(sel, fw)],
                        capsize=3, label=label, alpha=0.8)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(STUDY["algorithm"], color="tab:red", ls="--", lw=0.8, label="the study's 1.2x")
        ax.set_title(lib)
        ax.set_xlabel("Allreduce share of a step (the default's)")
        ax.set_xlim(left=0)
    axes[0][0].set_ylabel("training speedup over the default")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "speedup_vs_allreduce_share.png", out / "speedup_vs_allreduce_share.pdf"]
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
    return paths
