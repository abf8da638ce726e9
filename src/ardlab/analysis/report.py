"""`ardlab report`: the tables (CSV + Markdown) and figures (PNG + PDF) of one run, from its raw result CSVs.

Reads only the files it is given (the workflow passes the outputs of jobs that succeeded). Every comparison is
between variants measured in the same paired, interleaved rounds, with 95% intervals and a verdict
(``comparisons``, ``stats``). Tables in <results>/tables:

- microbench_speedup: per size, each algorithm's median time (interval) and speedup over its library's default;
- microbench_across_libraries: per size, the best (library, algorithm) against each library's default and the
  worst (library, algorithm);
- best_algorithm_ranges: per library, the best algorithm per message-size range;
- training_throughput: img/s of both frameworks per library and algorithm, against the same library's default
  and the group's worst, and whether its final loss agrees with the other variants' (``comparisons.loss_check``:
  one that disagrees reduced wrongly, and is left out of every other table and claim);
- training_defaults: per training group, each library's default against every other library's default;
- tuned_speedup / tuned_speedup_points: the tuned selection files against each library's default and against the
  best single algorithm measured in the same rounds (summary; per size or training group);
- study_vs_ardlab / study_groups / study_rounds: the study's claims, fixed beforehand (``study_claims``): pooled per
  regime with the largest group as "largest of N"; each group's paired estimate; each round's ratio;
- selection_vs_share: each selection's training speedup against the Allreduce share of a step (the figure's points);
- drift: each library default's reference per round and whether it moved monotonically over the run;
- headline: a run's largest numbers (largest significant speedups over the default and across libraries, tuned
  files, training), each with its interval and verdict, each labelled as chosen after the data (not adjusted);
- claims: every comparison with its interval and verdict (``ardlab report --compare`` matches them across runs);
- every table with a group also says whether that group's ranks time-shared cores and which tuning file each
  library loaded (``marks``: columns time_shared, mpi_tuning_file);
- site_vs_wheel (runs with a site's own build beside its family's wheel): the site's build against the wheel, for
  every algorithm both ran, per size and per training group (``comparisons.site_vs_wheel``);
- network_bound / network_traffic (runs on several nodes): each library's best Allreduce against the link's
  bandwidth bound, and every algorithm's bytes on the wire against its traffic model (``network``).

Figures in <results>/figures/measured (``figures``).
`ardlab report --compare RUN_A RUN_B` writes reproduce.{csv,md} and reproduce_summary.{csv,md}: every significant
claim of either run, measured or not in the other, and the shares that replicate both ways (``reproduce``).
`ardlab report --regimes RUN... --output DIR` puts the selection_vs_share points of reported runs at different link
rates in one table (DIR/tables/regimes) and one figure (DIR/figures/speedup_vs_allreduce_share), the runs' pooled
claims side by side (DIR/tables/study_vs_ardlab; the table of the tuned files and the across-library claim is
DIR/tables/study_headline.md; per regime, one rank a node first, DIR/tables/study_headline_short.md, the
README's) and a
forest figure per claim
(DIR/figures/forest_<claim>) (``versus_study``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ardlab.analysis import (
    comparisons as cmp,
    figures,
    marks,
    network,
    prediction,
    read,
    record,
    reproduce,
    study_claims,
    versus_study,
)
from ardlab.analysis.comparisons import trusted
from ardlab.analysis.read import run_files
from ardlab.comm.libraries import TUNED
from ardlab.results import REPRODUCE_TABLES, save_frame, save_markdown, write_csv

__all__ = ["analyse", "compare_runs", "regimes_report", "report", "run_files", "tables_made", "trusted"]

MICROBENCH_TABLES = ("microbench_speedup", "microbench_across_libraries", "best_algorithm_ranges")
TRAINING_TABLE = "training_throughput"
TRAINING_TABLES = (TRAINING_TABLE, "training_defaults")
STUDY_TABLES = ("study_vs_ardlab", "study_groups", "study_rounds", "selection_vs_share")
TUNED_TABLES = ("tuned_speedup", "tuned_speedup_points")
NETWORK_TABLES = ("network_bound", "network_traffic")
SITE_TABLES = ("site_vs_wheel",)
ALWAYS = ("headline", "drift", "claims")


def tables_made(*, microbench: bool, training: bool, tuned: bool, network: bool = False,
                sites: bool = False) -> list[str]:
    """The names of the tables `report` writes for these inputs (the workflow declares them as outputs)."""
    return [*(MICROBENCH_TABLES if microbench else ()), *([*TRAINING_TABLES, *STUDY_TABLES] if training else ()),
            *(TUNED_TABLES if tuned else ()), *(NETWORK_TABLES if network and microbench else ()),
            *(SITE_TABLES if sites else ()), *ALWAYS]


def analyse(b: pd.DataFrame, t: pd.DataFrame, picks: dict | None = None) -> dict[str, pd.DataFrame]:
    """Every table of a run, by name (empty frames where the run has no such data); `picks` as
    ``versus_study.read_picks``. The training table lists every variant with its loss check; every other table and
    claim leaves out the variants whose loss disagrees."""
    speedups = cmp.microbench_speedup(b) if len(b) else pd.DataFrame()
    across = cmp.across_libraries(b) if len(b) else pd.DataFrame()
    t_all, (t, check) = t, trusted(t)
    train = cmp.training(t) if len(t) else pd.DataFrame()
    tu = cmp.tuned(b, t)
    tuned_sum = cmp.tuned_summary(b, tu)
    rounds = study_claims.rounds(t, picks)
    groups = study_claims.groups(rounds)
    out = {"microbench_speedup": speedups, "microbench_across_libraries": across,
           "best_algorithm_ranges": cmp.best_ranges(speedups) if len(speedups) else pd.DataFrame(),
           TRAINING_TABLE: _with_check(train, check, t_all),
           "training_defaults": cmp.training_defaults(t) if len(t) else pd.DataFrame(),
           "tuned_speedup": tuned_sum, "tuned_speedup_points": tu,
           "drift": cmp.drift(b, t), "claims": cmp.claims(speedups, across, train, tu, picks, groups),
           "headline": cmp.headline(speedups, across, train, tuned_sum),
           "network_bound": network.bound(b) if len(b) else pd.DataFrame(),
           "network_traffic": network.traffic(b) if len(b) else pd.DataFrame(),
           "study_vs_ardlab": versus_study.table(rounds), "study_groups": groups, "study_rounds": rounds,
           "selection_vs_share": versus_study.points(rounds, t), "site_vs_wheel": cmp.site_vs_wheel(b, t)}
    m = marks.marks(b, t_all)
    return {name: df if name in STUDY_TABLES else marks.mark(df, m) for name, df in out.items()}


def _with_check(train: pd.DataFrame, check: pd.DataFrame, t_all: pd.DataFrame) -> pd.DataFrame:
    """The training table of every variant (those whose loss disagrees too), with the loss check's columns."""
    if t_all.empty:
        return train
    flagged = check.loss_agrees.eq(False).fillna(False).astype(bool).any()
    return (cmp.training(t_all) if flagged else train).merge(check, on=["group", "library", "algorithm"], how="left")


def report(bench_files, train_files, results: str | Path, figures_dir: str | Path | None = None) -> list[Path]:
    results = Path(results)
    b, t = read.bench(bench_files), read.train(train_files)
    record.check(results, t)
    tables = results / "tables"
    written = []
    made = analyse(b, t, versus_study.read_picks(results))
    tuned = (len(b) and (b.algorithm == TUNED).any()) or (len(t) and (t.algorithm == TUNED).any())
    several = bool(len(b)) and bool((b.nodes > 1).any())
    sites = cmp.has_site_builds(b) or cmp.has_site_builds(t)
    for name in tables_made(microbench=len(b) > 0, training=len(t) > 0, tuned=bool(tuned), network=several,
                            sites=sites):
        save_frame(made[name], tables / name)
        written.append(tables / f"{name}.csv")
    out = Path(figures_dir) if figures_dir else results / "figures" / "measured"
    forests = [p for c in study_claims.CLAIMS for p in versus_study.forest(
        made["study_groups"].assign(run=str(results)), made["study_vs_ardlab"].assign(run=str(results)), c.key, out)]
    return written + figures.make(made["microbench_speedup"], made[TRAINING_TABLE], b, t, out) + \
        versus_study.figure(made["selection_vs_share"], out) + forests


def compare_runs(run_a: str | Path, run_b: str | Path, output: str | Path) -> list[Path]:
    """`ardlab report --compare A B`: every significant claim of either run checked in the other (tables into
    `output`)."""
    claims = []
    for run in (run_a, run_b):
        bench, train = run_files(run)
        b, t = read.bench(bench), read.train(train)
        claims.append(analyse(b, t, versus_study.read_picks(run))["claims"])
    m = reproduce.compare(*claims)
    output = Path(output)
    summary, rows = REPRODUCE_TABLES
    return save_frame(reproduce.summary(m), output / summary) + save_frame(m, output / rows)


def regimes_report(runs: list[str | Path], output: str | Path) -> list[Path]:
    """`ardlab report --regimes RUN...`: the selections' training speedups against the Allreduce share, every run's
    points (each its link rate) in one table and one figure under `output`, the runs' pooled claims side by side
    (tables/study_vs_ardlab.csv, and .md as the README shows it), every group of every run (tables/study_groups), how
    well the microbenchmark's ranking predicted training per group and run (tables/prediction_quality, and its
    summary per run and regime), its predicted Allreduce per step beside what training measured of it per variant
    (tables/allreduce_predicted_vs_training, its summary, and figures/allreduce_predicted_vs_training:
    ``prediction``) and a forest figure per claim (figures/forest_<claim>)."""
    pts = versus_study.regimes(runs)
    output = Path(output)
    head = versus_study.headline(runs)
    columns, rows = versus_study.headline_markdown(head, runs)
    groups = versus_study.runs_table(runs, "study_groups")
    pooled = versus_study.runs_table(runs, "study_vs_ardlab")
    tables, figs = output / "tables", output / "figures"
    forests = [p for c in study_claims.CLAIMS for p in versus_study.forest(groups, pooled, c.key, figs)]
    ranked = versus_study.ranking(runs)
    parts = prediction.parts(runs)
    return (save_frame(pts, tables / "regimes") + save_frame(groups, tables / "study_groups")
            + save_frame(ranked, tables / "prediction_quality")
            + save_frame(versus_study.ranking_summary(ranked), tables / "prediction_quality_summary")
            + save_frame(parts, tables / "allreduce_predicted_vs_training")
            + save_frame(prediction.summary(parts), tables / "allreduce_predicted_vs_training_summary")
            + prediction.figure(parts, figs)
            + [write_csv(tables / "study_vs_ardlab.csv", list(head.columns), head.to_dict("records")),
               save_markdown(columns, rows, tables / "study_vs_ardlab.md"),
               save_markdown(*versus_study.headline_markdown(head, runs, versus_study.README_CLAIMS),
                             tables / "study_headline.md"),
               save_markdown(*versus_study.headline_markdown(head, runs, versus_study.README_CLAIMS,
                                                             versus_study.README_REGIMES, said=False),
                             tables / "study_headline_short.md")]
            + versus_study.figure(pts, figs) + forests)
