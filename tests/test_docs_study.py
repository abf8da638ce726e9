"""docs/study.md's numbers are the committed tables' (results/study/tables, made from results/study/runs.yaml by
`ardlab report --regimes`, and the runs' own tables): each range and count recomputed here from the rows."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ardlab.analysis.study_claims import display
from ardlab.analysis.versus_study import study_runs
from conftest import ROOT

TABLES = ROOT / "results" / "study" / "tables"
TEXT = " ".join((ROOT / "docs" / "study.md").read_text().split())
ONE, SHARED = "1 rank a node", "ranks time-share the cores"


def span(x, suffix: str = "x", fmt: str = "{:.2f}", scale: float = 1.0) -> str:
    """min-max of `x` as the page writes it (one value where the ends agree)."""
    low, high = fmt.format(min(x) * scale), fmt.format(max(x) * scale)
    return (low if low == high else f"{low}-{high}") + suffix


def significant(t: pd.DataFrame) -> pd.Series:
    return (t.ci_low > 1) | (t.ci_high < 1)


def test_the_table_is_the_committed_headline():
    assert (TABLES / "study_headline.md").read_text().strip() in (ROOT / "docs" / "study.md").read_text()


def test_within_a_library_with_one_rank_a_node():
    t = pd.read_csv(TABLES / "study_vs_ardlab.csv")
    one = t[t.regime == ONE]
    tuned = one[one.claim == "tuned"]
    spans = [f"{display(lib)}'s tuned file trains {span(tuned[tuned.library == lib].speedup)} its default"
             if lib == "mpich" else f"{display(lib)}'s {span(tuned[tuned.library == lib].speedup)}"
             for lib in ("mpich", "openmpi", "intelmpi")]
    assert ", ".join(spans) + f" ({tuned.run.nunique()} runs)" in TEXT
    assert f"every interval inside [{tuned.ci_low.min():.2f}, {tuned.ci_high.max():.2f}] and excluding" in TEXT
    assert (tuned.ci_high < tuned.study).all()
    pick = one[one.claim == "picked_best"]
    assert f"trains like the tuned file, {span(pick.speedup)}" in TEXT
    (r,) = pick[significant(pick)].itertuples()  # the one pick whose interval excludes 1, named
    named = f"{display(r.library)}'s {r.speedup:.2f}x [{r.ci_low:.2f}, {r.ci_high:.2f}] in `{Path(r.run).name}` the one"
    assert named in TEXT


def test_across_libraries_with_one_rank_a_node():
    t = pd.read_csv(TABLES / "study_vs_ardlab.csv")
    across = t[(t.regime == ONE) & (t.claim == "fastest_over_slowest_default")]
    assert not significant(across).any() and (across.ci_high < across.study).all()
    assert f"slowest default is {span(across.speedup)} pooled, not significant" in TEXT
    g = pd.read_csv(TABLES / "study_groups.csv")
    groups = g[(g.claim == "fastest_over_slowest_default") & ~g.time_shared]
    assert f"single groups reach {span(groups.groupby('run').speedup.max())} (the largest group of each run" in TEXT


def test_intel_mpis_default_behind_the_switch_port_queue():
    runs = [r for r in study_runs(ROOT)[0] if r.name.startswith("onepernode") and "1gbit" in r.name]
    d = pd.concat(pd.read_csv(r / "tables" / "training_defaults.csv") for r in runs)
    d = d[(d.framework == "tensorflow") & (d.library == "intelmpi") & d.model.isin(["alexnet", "vgg16"])]
    for versus, name in (("openmpi", "Open MPI's"), ("mpich", "MPICH's")):
        x = d[d.versus == versus]
        faster = int((x.speedup_verdict == "faster").sum())
        assert f"{span(x.speedup)} faster than {name} ({faster} of {len(x)}" in TEXT, versus


def test_the_controls():
    t = pd.concat(pd.read_csv(r / "tables" / "study_vs_ardlab.csv") for r in study_runs(ROOT)[0])
    worst = t[t.claim == "picked_worst"]
    two = worst[worst.library.isin(["mpich", "openmpi"])]
    one, shared = two[two.regime == ONE], two[two.regime == SHARED]
    intel = worst[(worst.library == "intelmpi") & (worst.regime == ONE)]
    assert (f"trains {span(one.speedup)} the default for MPICH and Open MPI with one rank a node (significant in "
            f"{int(significant(one).sum())} of {len(one)} run x library cells), Intel MPI's {span(intel.speedup)} "
            f"({int(significant(intel).sum())} of {len(intel)}), and {span(shared.speedup)} where ranks time-share "
            f"cores (MPICH and Open MPI, significant in {int(significant(shared).sum())} of {len(shared)})") in TEXT


def test_the_rankings_quality():
    q = pd.read_csv(TABLES / "prediction_quality.csv")
    s = pd.read_csv(TABLES / "prediction_quality_summary.csv")
    one = q[q.regime == ONE]
    assert f"is {span(s.median_rank_correlation, '')} (median per run and regime" in TEXT
    assert f"{q.rank_correlation.min():.2f} to {q.rank_correlation.max():.2f} per group" in TEXT
    assert (f"trained fastest in {int(q.predicted_fastest_trained_fastest.sum())} of {len(q)} group-runs "
            f"({int(one.predicted_fastest_trained_fastest.sum())} of {len(one)} with one rank a node)") in TEXT
    slow = int(q.predicted_fastest_among_two_slowest.sum())
    assert f"among the two slowest in {slow}" in TEXT
    assert slow == int(one.predicted_fastest_among_two_slowest.sum()) and "(all with one rank a node)" in TEXT


def test_the_time_inside_the_calls():
    s = pd.read_csv(TABLES / "allreduce_predicted_vs_training_summary.csv")
    inside = s.median_inside_over_predicted.dropna()
    assert len(inside) and f"(`allreduce_in_step_s`, the interposer's): {span(inside)} the predicted" in TEXT


def test_the_replication_shares():
    for a, b in study_runs(ROOT)[1]:
        r = pd.read_csv(b / "tables" / "reproduce_summary.csv")
        r = r[r.claims_checked == "either run's claims"].set_index("table")
        c, w = r.loc["speedup claims, once per comparison"], r.loc["controls (picked worst), once per comparison"]
        words = (f"{c.claims} speedup claims significant in either run {c.same_direction} agree in direction "
                 f"({100 * c.same_direction / c.claims:.1f}%) and {c.same_significant_verdict} have the same "
                 f"significant verdict ({100 * c.same_significant_verdict / c.claims:.1f}%), where the {w.claims} "
                 f"controls agree in direction {w.same_direction} times, in verdict {w.same_significant_verdict}")
        assert f"(`{a.name}` / `{b.name}`)" in TEXT
        assert words.replace(f"{c.claims} speedup claims significant in either run", "") in TEXT, (a.name, words)


def test_why_the_top_of_the_ranking_does_not_carry():
    """docs/study.md's numbers on why the top of the ranking does not carry are the committed summary's."""
    s = pd.read_csv(TABLES / "allreduce_predicted_vs_training_summary.csv")
    one = s[s.regime == ONE]
    shared = s[s.regime != ONE]
    fast = one[one.link_rate == "1gbit"]
    assert f"is {span(one.median_added_over_predicted)} the predicted" in TEXT
    assert f"Spearman {span(one.median_rank_correlation_added, '')}" in TEXT
    assert f"time-share cores, {span(shared.median_added_over_predicted)}" in TEXT

    def ms(x) -> str:
        return span(x, " ms", "{:.0f}", 1e3)

    assert f"differs by a median {ms(fast.median_predicted_range_s)} at 1 Gbit/s" in TEXT
    assert f"differs by {ms(fast.median_rest_range_s)}" in TEXT
    slow = one[one.link_rate == "250mbit"]
    assert f"at 250 Mbit/s: {ms(slow.median_predicted_range_s)} against {ms(slow.median_rest_range_s)}" in TEXT
