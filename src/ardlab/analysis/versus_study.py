"""The study we reproduce against ardlab's measurement: the claims fixed beforehand (``study_claims``) in a run's
tables, across runs, and in figures.

Per run (``ardlab report``): ``table`` is the study-vs-ardlab table, each claim's pooled speedup per regime (ranks a
node) with its verdict and the largest single group as "largest of N" (``study_claims.pooled``); ``points`` are each
selection's (tuned file, picked best) group estimates against the Allreduce share of the default's step, the regime
figure's points (``figure``), the time-shared groups marked.

Across runs (``ardlab report --regimes RUN...``): ``regimes`` puts the points of several runs (link rates) on one
figure with a fit of the speedup against the share per library; ``headline`` lays the runs' pooled claims side by
side (the README's table); ``forest`` draws, per claim, every group's estimate with its interval and the pooled
estimate of each run and regime.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ardlab.analysis import study_claims as sc
from ardlab.analysis.figures import save_png_pdf
from ardlab.cluster.links import DEFAULT_QUEUE, queue_name
from ardlab.comm.libraries import DEFAULT
from ardlab.results import recorded_config

STUDY = {"algorithm": sc.STUDY_ALGORITHM, "library": sc.STUDY_LIBRARY}
STUDY_RUNS = Path("results/study/runs.yaml")  # the study's runs and replication pairs: one list for every table


def study_runs(root: str | Path = ".") -> tuple[list[Path], list[tuple[Path, Path]]]:
    """The study's runs in their tables' order and its replication pairs (A, B), as `root`/results/study/runs.yaml
    lists them, each under `root`; a listed run that is not there, or a pair of runs not listed, is an error."""
    import yaml

    path = Path(root) / STUDY_RUNS
    listed = yaml.safe_load(path.read_text()) or {}
    runs = [Path(root) / r for r in listed.get("runs") or []]
    if not runs:
        raise ValueError(f"{path} lists no runs")
    missing = [str(r) for r in runs if not (r / "run.yaml").is_file()]
    if missing:
        raise FileNotFoundError(f"{path} lists runs that are not there (no run.yaml): {', '.join(missing)}")
    pairs = [tuple(Path(root) / r for r in pair) for pair in listed.get("replications") or []]
    for pair in pairs:
        if len(pair) != 2 or any(r not in runs for r in pair):
            raise ValueError(f"{path}: replication {[str(r) for r in pair]} is not a pair of its runs")
    return runs, pairs
POINT_COLUMNS = ["group", "library", "selection", "algorithm", "framework", "model", "nodes", "ranks", "time_shared",
                 "tuning_file", "allreduce_share", "speedup", "ci_low", "ci_high"]
SELECTIONS = {"tuned": "tuned", "picked_best": "picked best"}  # claim -> the selection it measures, in the figure


def numeric(t: pd.DataFrame, column: str) -> pd.Series:
    """`t`'s column as numbers (NaN where a row has none, or the table lacks the column)."""
    return pd.to_numeric(t.get(column, pd.Series(np.nan, index=t.index)), errors="coerce")


def allreduce_share(t: pd.DataFrame) -> pd.Series:
    """Per training row, the share of its steps' time the Allreduce took: ardlab.nn's blocking calls and waits over
    its step time; Horovod's added time (its batches less their compute alone, --compute-batches) over the batches'
    time. NaN where the row has no split."""
    compute, allreduce, wait = (numeric(t, "compute_s"), numeric(t, "allreduce_s"),
                                numeric(t, "wait_s").fillna(0.0))
    comm = allreduce + wait
    return (comm / (compute + comm)).where(compute > 0)


def read_picks(results: str | Path) -> dict[str, dict[str, dict]]:
    """group -> library -> {best: algorithm, worst: algorithm, predicted: {algorithm: us per step}}, from a run
    folder's picks/ (ardlab pick): the picks and the microbenchmark's predicted Allreduce time per step of every
    algorithm it ranked."""
    out: dict = {}
    folder = Path(results) / "picks"
    for path in sorted(folder.glob("**/*.csv")) if folder.is_dir() else ():
        group = str(path.relative_to(folder).with_suffix(""))
        table = pd.read_csv(path, keep_default_na=False)
        for r in table.itertuples():
            lib = out.setdefault(group, {}).setdefault(r.library, {})
            for label in filter(None, r.pick.split(";")):
                lib[label] = r.algorithm
            if "predicted_us_per_step" in table and r.predicted_us_per_step != "":
                lib.setdefault("predicted", {})[r.algorithm] = float(r.predicted_us_per_step)
    return out


def table(rounds: pd.DataFrame) -> pd.DataFrame:
    """The study-vs-ardlab table of one run from its ``study_claims.rounds``: ``study_claims.pooled``."""
    return sc.pooled(rounds)


def points(rounds: pd.DataFrame, t: pd.DataFrame) -> pd.DataFrame:
    """Per group and library: the tuned file's and the picked best's speedup over the default (the paired estimate
    with its interval, ``study_claims.groups``) against the default's Allreduce share: the figure's points."""
    g = sc.groups(rounds[rounds.claim.isin(list(SELECTIONS))]) if len(rounds) else pd.DataFrame()
    if g.empty:
        return pd.DataFrame(columns=POINT_COLUMNS)
    t = t.assign(allreduce_share=allreduce_share(t), variant=t.library + "/" + t.algorithm)
    shares = t.groupby(["group", "variant"]).allreduce_share.median()
    out = g.assign(selection=g.claim.map(SELECTIONS), algorithm=g.variant.str.split("/").str[1],
                   allreduce_share=[shares.get((grp, f"{lib}/{DEFAULT}"), np.nan)
                                    for grp, lib in zip(g.group, g.library)])
    return out[POINT_COLUMNS].reset_index(drop=True)


REGIME_COLUMNS = ["run", "link_rate", "link_queue", *POINT_COLUMNS]
# A link's marker in the figure of several runs (`regimes`): its rate's, behind the cluster's default queue; other
# links (another rate, or another queue) get the next of EXTRA_MARKERS.
RATE_MARKERS = {"1gbit": "o", "250mbit": "^"}
EXTRA_MARKERS = ("D", "v", "P", "X")


def reported_table(run: Path, name: str) -> pd.DataFrame:
    """A table that `ardlab report --run` wrote into `run`; FileNotFoundError naming it and that command if missing."""
    table = run / "tables" / f"{name}.csv"
    if not table.is_file():
        raise FileNotFoundError(f"{table} is missing: {run} is not a reported run folder "
                                f"(ardlab report --run {run} makes it)")
    return pd.read_csv(table)


def regimes(runs: list[str | Path]) -> pd.DataFrame:
    """The figure's points of several runs in one table, each with its run folder, link rate and link queue
    (run.yaml's config): one point per group, library and selection, as each run's own `report` wrote them
    (tables/selection_vs_share.csv)."""
    frames = []
    for run in runs:
        run = Path(run)
        pts = reported_table(run, "selection_vs_share")
        rate, queue = run_link(run)
        if not rate:
            raise ValueError(f"{run / 'run.yaml'} names no link_rate: {run} is not a run across nodes")
        frames.append(pts.assign(run=str(run), link_rate=rate, link_queue=queue)[REGIME_COLUMNS])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=REGIME_COLUMNS)


HEADLINE_CLAIMS = ("tuned", "picked_best", "fastest_over_slowest_default")  # the README's rows, in order
# The README's names for what the tables hold in their own words.
FRAMEWORK_NAMES = {"tensorflow": "TF+Horovod", "ardlab.nn": "ardlab.nn"}


def run_link(run: str | Path) -> tuple[str, str]:
    """A run's link as its run.yaml records it: (rate, queue by name); a run that names no queue ran behind the
    cluster's default (``ardlab.cluster.links.DEFAULT_QUEUE``); ("", "") for a run on one node."""
    config = recorded_config(Path(run))
    rate = str(config.get("link_rate") or "")
    return rate, queue_name(config.get("link_queue") or DEFAULT_QUEUE) if rate else ""


def runs_table(runs: list[str | Path], name: str) -> pd.DataFrame:
    """A reported table of several runs in one frame, each row with its run folder, link rate and link queue
    (``run_link``)."""
    frames = []
    for run in map(Path, runs):
        rate, queue = run_link(run)
        frames.append(reported_table(run, name).assign(run=str(run), link_rate=rate, link_queue=queue))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


RANKING_COLUMNS = ["run", "link_rate", "group", "regime", "variants", "rank_correlation", "predicted_fastest",
                   "its_trained_rank", "trained_fastest", "predicted_fastest_trained_fastest",
                   "predicted_fastest_among_two_slowest"]
RANKING_SUMMARY_COLUMNS = ["run", "link_rate", "regime", "groups", "median_rank_correlation",
                           "predicted_fastest_trained_fastest", "predicted_fastest_among_two_slowest"]


def _in_regime_order(t: pd.DataFrame, regimes: tuple[str, ...]) -> pd.DataFrame:
    """`t`'s rows ordered by their regime's place in `regimes`, keeping their order within one regime."""
    return t.iloc[np.argsort(t.regime.map({r: i for i, r in enumerate(regimes)}).to_numpy(), kind="stable")]


def ranking(runs: list[str | Path]) -> pd.DataFrame:
    """How well the microbenchmark's ranking predicts training, per run and group: over the variants that carry a
    prediction (each library's default and picked best and worst: ``read_picks``) and were trained
    (``training_throughput`` as each run's report wrote it, the median img/s over its rounds), the rank correlation
    (Spearman) of predicted Allreduce time per step against trained time per image (1 / img/s; 1: the prediction
    orders them as training does), where the predicted fastest ranked in training (1: fastest), and whether it
    trained fastest or among the two slowest. Chosen without looking at training: the prediction is the pick file's."""
    from scipy import stats

    rows = []
    for run in map(Path, runs):
        rate = recorded_config(run).get("link_rate") or ""
        picks = read_picks(run)
        trained = reported_table(run, "training_throughput")
        for group, g in trained.groupby("group", sort=True):
            predicted = {f"{lib}/{alg}": t for lib, lp in picks.get(group, {}).items()
                         for alg, t in lp.get("predicted", {}).items()}
            rate_of = dict(zip(g.library + "/" + g.algorithm, g.img_per_s.astype(float)))
            both = sorted(v for v in predicted if v in rate_of)
            if len(both) < 3:
                continue
            pred = np.array([predicted[v] for v in both])
            per_image = np.array([1 / rate_of[v] for v in both])
            order = stats.rankdata(per_image)  # 1: trained fastest
            fastest = both[int(np.argmin(pred))]
            rows.append({"run": str(run), "link_rate": str(rate), "group": group,
                         "regime": sc.regime_of(bool(g.time_shared.astype(bool).any())), "variants": len(both),
                         "rank_correlation": float(stats.spearmanr(pred, per_image).statistic),
                         "predicted_fastest": fastest, "its_trained_rank": int(order[both.index(fastest)]),
                         "trained_fastest": both[int(np.argmin(per_image))],
                         "predicted_fastest_trained_fastest": fastest == both[int(np.argmin(per_image))],
                         "predicted_fastest_among_two_slowest": order[both.index(fastest)] >= len(both) - 1})
    return pd.DataFrame(rows, columns=RANKING_COLUMNS)


def ranking_summary(r: pd.DataFrame) -> pd.DataFrame:
    """``ranking`` per run and regime: the groups, the median rank correlation, and the shares of groups where the
    predicted fastest trained fastest and where it trained among the two slowest."""
    r = _in_regime_order(r, sc.REGIMES)
    rows = [{"run": run, "link_rate": rate, "regime": regime, "groups": len(g),
             "median_rank_correlation": float(g.rank_correlation.median()),
             "predicted_fastest_trained_fastest": f"{int(g.predicted_fastest_trained_fastest.sum())} of {len(g)}",
             "predicted_fastest_among_two_slowest": f"{int(g.predicted_fastest_among_two_slowest.sum())} of {len(g)}"}
            for (regime, run, rate), g in r.groupby(["regime", "run", "link_rate"], sort=False)]
    return pd.DataFrame(rows, columns=RANKING_SUMMARY_COLUMNS)


def headline(runs: list[str | Path]) -> pd.DataFrame:
    """The pooled claims of several runs (``study_vs_ardlab`` as each run's `report` wrote it), one row per claim,
    library, regime and run, in the README's order: per library its tuned file and its pick over its default (the
    study's 1.2x), then the predicted fastest over the predicted slowest default (the study's up to 2.8x)."""
    t = runs_table(runs, "study_vs_ardlab")
    if t.empty:
        return t
    t = t[t.claim.isin(HEADLINE_CLAIMS)]
    order = {"claim": {c: i for i, c in enumerate(HEADLINE_CLAIMS)},
             "regime": {r: i for i, r in enumerate(sc.REGIMES)},
             "run": {str(Path(r)): i for i, r in enumerate(runs)}}
    keys = t.assign(o_claim=t.claim.map(order["claim"]), o_regime=t.regime.map(order["regime"]).fillna(3),
                    o_run=t.run.map(order["run"]))
    return keys.sort_values(["o_claim", "library", "o_regime", "o_run"]).drop(
        columns=["o_claim", "o_regime", "o_run"]).reset_index(drop=True)


def _cell(r) -> str:
    if np.isnan(r.speedup):
        return ""
    ci = f" [{r.ci_low:.2f}, {r.ci_high:.2f}]" if not np.isnan(r.ci_low) else ""
    star = "**" if (r.ci_low > 1 or r.ci_high < 1) else ""
    return f"{star}{r.speedup:.2f}x{ci}{star}"


README_CLAIMS = ("tuned", "fastest_over_slowest_default")  # the claims of study_headline.md
# A regime as the README's rows name it: the time-shared groups are the emulation's (4 ranks on 2 cores), not a
# cluster's, and say so where they are read.
REGIME_WORDS = {sc.TIME_SHARED: f"{sc.TIME_SHARED} (the emulation's regime)"}
# the README's front page (study_headline_short.md): those claims pooled within each regime, one rank a node first,
# the runs' cells alone
README_REGIMES = sc.REGIMES


def _said(g: pd.DataFrame) -> str:
    """What the runs' intervals say of one row: one verdict where the runs agree, else each run's."""
    said = dict(zip((Path(r).name for r in g.run), g.agreement.fillna("")))
    if len(set(said.values())) == 1:
        return next(iter(said.values()))
    return "; ".join(f"{run}: {a}" for run, a in said.items())


def headline_markdown(t: pd.DataFrame, runs: list[str | Path], claims: tuple[str, ...] = HEADLINE_CLAIMS,
                      regimes: tuple[str, ...] | None = None, said: bool = True) -> tuple[list[str], list[list[str]]]:
    """`headline`'s rows (of `claims`) as the README shows them: one row per claim, library and regime, one column
    per run (its link rate, link queue and folder), each cell the pooled speedup with its 95% interval (bold where it
    excludes 1), a largest single group as "largest of N" with its adjusted interval; Intel MPI named with its tuning
    file; the last column says what the intervals say against the study's value (``study_claims.agreement``; left
    out with `said` False). `regimes`: only those, in that order (the regime first, then claim and library), default
    every one in the table's order."""
    from ardlab.cluster.links import rate_text

    link = t.drop_duplicates("run").set_index("run")[["link_rate", "link_queue"]].to_dict("index")

    def heading(run) -> str:
        r = link.get(str(Path(run)), {})
        if not r.get("link_rate"):
            return f"one node ({Path(run).name})"
        return f"{rate_text(r['link_rate'])}, {r['link_queue']} queue ({Path(run).name})"

    columns = ["claim (the study's value), regime", "groups", *map(heading, runs)]
    columns += ["what the intervals say"] if said else []
    rows = []
    t = t[t.claim.isin(claims)]
    if regimes is not None:
        t = t[t.regime.isin(regimes)]
        t = _in_regime_order(t, regimes)
    for (claim, lib, regime), g in t.groupby(["claim", "library", "regime"], sort=False):
        first = g.iloc[0]
        files = sorted({f for x in g.tuning_files if isinstance(x, str) for f in x.split(";") if f})
        text = first.text + (f" ({', '.join(f'`{f}`' for f in files)})" if files else "")
        study = f" ({'up to ' if claim == 'fastest_over_slowest_default' else ''}{first.study:g}x)"
        largest = regime.startswith("largest")
        cells = {r.run: _cell(r) + (f" in `{r.group}`" if largest and isinstance(r.group, str) else "")
                 for r in g.itertuples()}
        groups = "/".join(dict.fromkeys(f"{1 if largest else int(n)}" for n in g.groups))
        rows.append([f"{text}{study}, {REGIME_WORDS.get(regime, regime)}", groups,
                     *[cells.get(str(Path(r)), "") for r in runs]]
                    + ([_said(g)] if said else []))
    return columns, rows


TICKS = (0.25, 0.35, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0)
WIDE_TICKS = (0.25, 0.5, 1.0, 1.2, 2.0, 3.0, 5.0, 8.0, 12.0)  # for an axis spanning more than 4x


def _log_axis(axis, lo: float, hi: float) -> None:
    """A log-scaled speedup axis with plain tick labels at TICKS within [lo, hi]."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    ticks = [v for v in (TICKS if hi / lo < 4 else WIDE_TICKS) if lo <= v <= hi] or [1.0]
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(ScalarFormatter())
    axis.set_minor_locator(NullLocator())


def forest(groups_: pd.DataFrame, pooled_: pd.DataFrame, claim: str, out: Path) -> list[Path]:
    """One claim's forest figure: per library a panel, each group's speedup with its 95% interval (run, link rate,
    framework, model, nodes x ranks a node; time-shared groups marked), then each run's pooled estimate per regime
    (diamonds). `groups_` and `pooled_` carry a ``run`` column (``study_groups`` and ``study_vs_ardlab`` of runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = groups_[groups_.claim == claim]
    p = pooled_[(pooled_.claim == claim) & ~pooled_.regime.str.startswith("largest")]
    if g.empty:
        return []
    libs = list(dict.fromkeys(g.library))
    height = max(len(g[g.library == lib]) + len(p[p.library == lib]) for lib in libs)
    fig, axes = plt.subplots(1, len(libs), figsize=(5.2 * len(libs), 0.8 + 0.22 * height), squeeze=False)
    runs = list(dict.fromkeys(g.run))
    for ax, lib in zip(axes[0], libs):
        gl = g[g.library == lib].sort_values(["time_shared", "framework", "model", "run"])
        labels, y = [], 0
        for r in gl.itertuples():
            colour = f"C{runs.index(r.run)}"
            ax.errorbar([r.speedup], [y], xerr=[[max(r.speedup - r.ci_low, 0)], [max(r.ci_high - r.speedup, 0)]],
                        fmt="s" if r.time_shared else "o", mfc="none" if r.time_shared else colour, color=colour,
                        capsize=2, ms=4)
            labels.append(f"{FRAMEWORK_NAMES.get(r.framework, r.framework)} {r.model} {r.nodes}x"
                          f"{r.ranks // r.nodes}{' (time-shared)' if r.time_shared else ''}, {Path(r.run).name}")
            y += 1
        for r in p[p.library == lib].itertuples():
            colour = f"C{runs.index(r.run)}" if r.run in runs else "k"
            ax.errorbar([r.speedup], [y], xerr=[[max(r.speedup - r.ci_low, 0)], [max(r.ci_high - r.speedup, 0)]],
                        fmt="D", color=colour, capsize=3, ms=6)
            labels.append(f"pooled, {r.regime}, {Path(r.run).name}")
            y += 1
        ax.set_yticks(range(len(labels)), labels, fontsize=6)
        ax.invert_yaxis()
        ax.axvline(1.0, color="grey", lw=0.8)
        study = sc.CLAIM[claim].study
        if study:
            ax.axvline(study, color="tab:red", ls="--", lw=0.8)
        ax.set_xscale("log")
        _log_axis(ax.xaxis, *ax.get_xlim())
        ax.set_title(sc.CLAIM[claim].text.format(library=sc.display(lib)), fontsize=8)
        ax.set_xlabel("training speedup (img/s, paired rounds), 95% interval", fontsize=7)
    return save_png_pdf(fig, out, f"forest_{claim}")


def fit(pts: pd.DataFrame, resamples: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per library: a least-squares line of log(speedup) against the Allreduce share over its points (groups of every
    run; one regime's, the caller chooses), at 50 shares from 0 to the largest, with a 95% band from a bootstrap over
    the points: how the effect depends on the share."""
    rows = []
    rng = np.random.default_rng(seed)
    for lib, g in pts.dropna(subset=["allreduce_share", "speedup"]).groupby("library"):
        if len(g) < 3 or g.allreduce_share.nunique() < 2:
            continue
        x, y = g.allreduce_share.to_numpy(), np.log(g.speedup.to_numpy())
        grid = np.linspace(0, x.max(), 50)
        coef = np.polyfit(x, y, 1)
        idx = rng.integers(0, len(x), size=(resamples, len(x)))
        boot = np.array([np.polyval(np.polyfit(x[i], y[i], 1), grid) for i in idx if np.ptp(x[i]) > 0])
        lo, hi = np.quantile(boot, [0.025, 0.975], axis=0)
        rows += [{"library": lib, "allreduce_share": s_, "speedup": np.exp(np.polyval(coef, s_)), "ci_low": np.exp(a),
                  "ci_high": np.exp(b)} for s_, a, b in zip(grid, lo, hi)]
    return pd.DataFrame(rows, columns=["library", "allreduce_share", "speedup", "ci_low", "ci_high"])


def figure(pts: pd.DataFrame, out: Path) -> list[Path]:
    """Training speedup of each selection over the default against the Allreduce share, one panel per library;
    with a ``link_rate`` column (``regimes``), each rate in its own marker, each selection and framework in its own
    colour; time-shared groups hollow; the library's fit over its one-rank-a-node groups (``fit``: never over both
    regimes) as a line with its band; the legend below the panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if pts.empty or pts.allreduce_share.isna().all():
        return []
    libs = sorted(pts.library.unique())
    pts = pts.assign(shared=pts.get("time_shared", pd.Series(False, index=pts.index)).astype(bool))
    fitted = fit(pts[~pts.shared])
    by_rate = "link_rate" in pts
    if by_rate:
        queues = pts.get("link_queue", pd.Series(None, index=pts.index))
        pts = pts.assign(link=[_link_label(r, q) for r, q in zip(pts.link_rate, queues)])
    keys = ["selection", "framework", *(["link"] if by_rate else [])]
    extra = iter(EXTRA_MARKERS)
    markers = {link: (RATE_MARKERS.get(link) or next(extra)) for link in dict.fromkeys(pts.link)} if by_rate else {}
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
            for shared, part in g.groupby("shared"):
                ax.errorbar(part.allreduce_share, part.speedup, yerr=[lo[part.index], hi[part.index]], fmt=fmt,
                            color=colours[(sel, fw)], mfc="none" if shared else colours[(sel, fw)], capsize=3,
                            label=label + (" (time-shared: hollow)" if shared else ""), alpha=0.8)
        line = fitted[fitted.library == lib]
        if len(line):
            ax.plot(line.allreduce_share, line.speedup, color="k", lw=1, label="fit over the one-rank-a-node groups")
            ax.fill_between(line.allreduce_share, line.ci_low, line.ci_high, color="k", alpha=0.1)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(STUDY["algorithm"], color="tab:red", ls="--", lw=0.8, label="the study's 1.2x")
        files = sorted({f for x in pts[pts.library == lib].get("tuning_file", pd.Series(dtype=str))
                        if isinstance(x, str) for f in x.split(";") if f})
        ax.set_title(sc.display(lib) + (f"\n(under {', '.join(files)})" if files else ""), fontsize=9)
        ax.set_yscale("log")
        ax.set_xlabel("Allreduce share of a step (the default's)")
        ax.set_xlim(left=0)
    for ax in axes[0]:
        _log_axis(ax.yaxis, *ax.get_ylim())
    axes[0][0].set_ylabel("training speedup over the default")
    labels = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            labels.setdefault(label, handle)
    fig.legend(labels.values(), labels.keys(), fontsize=7, loc="upper center", ncol=3, bbox_to_anchor=(0.5, 0.0))
    return save_png_pdf(fig, out, "speedup_vs_allreduce_share", bbox_inches="tight")


def _link_label(rate: str, queue) -> str:
    """A run's link as the figure's legend names it: its rate, and its queue where that is not the cluster's default
    (a run that names none ran behind the default)."""
    queue = queue if isinstance(queue, str) and queue else DEFAULT_QUEUE
    return rate if queue == DEFAULT_QUEUE else f"{rate}, {queue} queue"
