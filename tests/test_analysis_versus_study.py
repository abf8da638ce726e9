"""The study-vs-ardlab table and the speedup-against-share points (ardlab.analysis.versus_study), on training rows
whose throughputs and splits are known."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ardlab.analysis import comparisons as cmp, study_claims as sc, versus_study as vs

ROUNDS = 6


def _rows(rates: dict, group="horovod/alexnet-f64/n2-r4", framework="tensorflow", share=None) -> pd.DataFrame:
    """Rows of one training group: (library, algorithm) -> img/s, every round alike but for a little noise; with
    `share`, compute_s and allreduce_s split each row's time so that the Allreduce takes that share."""
    rng = np.random.default_rng(1)
    rows = []
    for r in range(ROUNDS):
        for (lib, alg), ips in rates.items():
            row = {"group": group, "framework": framework, "model": "alexnet", "parallel_mode": "horovod",
                   "ranks": 4, "nodes": 2, "threads_per_core": 2, "library": lib, "algorithm": alg, "round": r,
                   "link_rate": "1gbit",
                   "img_per_s": ips * (1 + 0.005 * rng.standard_normal())}
            if share is not None:
                row.update(compute_s=10 * (1 - share[(lib, alg)]), allreduce_s=10 * share[(lib, alg)], wait_s=np.nan)
            rows.append(row)
    return pd.DataFrame(rows)


RATES = {("mpich", "default"): 100.0, ("mpich", "ring"): 125.0, ("mpich", "tuned"): 118.0,
         ("mpich", "recursive_doubling"): 90.0, ("openmpi", "default"): 50.0, ("openmpi", "ring"): 55.0}
SHARE = {k: 0.4 if k[0] == "mpich" else 0.7 for k in RATES}
PICKS = {"horovod/alexnet-f64/n2-r4": {
    "mpich": {"best": "ring", "worst": "recursive_doubling", "predicted": {"default": 200.0, "ring": 100.0}},
    "openmpi": {"best": "ring", "worst": "ring", "predicted": {"default": 400.0, "ring": 300.0}}}}


def _rounds(t, picks=None):
    from ardlab.analysis import report

    kept, _ = report.trusted(t)
    return sc.rounds(kept, picks)


def test_the_claims_side_by_side():
    t = _rows(RATES, share=SHARE)
    table = vs.table(_rounds(t, PICKS)).set_index(["claim", "library", "regime"])
    tuned = table.loc[("tuned", "mpich", sc.TIME_SHARED)]
    assert tuned.speedup == pytest.approx(1.18, rel=0.02) and tuned.groups == 1
    assert tuned.agreement == "no interval (too few rounds or groups)"  # one group: no pooled interval
    top = table.loc[("tuned", "mpich", "largest of 1")]  # one group: its own (t) interval, adjusted for 1
    assert top.speedup == pytest.approx(1.18, rel=0.02) and top.agreement == "faster, less than the study's"
    picked = table.loc[("picked_best", "mpich", "largest of 1")]
    assert picked.speedup == pytest.approx(1.25, rel=0.02) and picked.agreement == "faster, more than the study's"
    worst = table.loc[("picked_worst", "mpich", sc.TIME_SHARED)]
    assert worst.speedup == pytest.approx(0.9, rel=0.02)
    assert ("picked_worst", "mpich", "largest of 1") not in table.index  # a control: no study value, no maximum
    across = table.loc[("fastest_over_slowest_default", sc.ACROSS, "largest of 1")]
    assert across.speedup == pytest.approx(2.5, rel=0.02) and across.study == 2.8  # mpich/ring over openmpi/default
    assert across.agreement == "faster, less than the study's"


def test_no_effect_is_said_plainly():
    t = _rows({("mpich", "default"): 100.0, ("mpich", "ring"): 100.0})
    row = vs.table(_rounds(t, {t.group[0]: {"mpich": {"best": "ring"}}})).set_index("regime").loc["largest of 1"]
    assert row.agreement == "equivalent to the default (within the +-5% margin fixed beforehand)"
    assert vs.points(_rounds(t), t).empty  # no tuned file, no picks: no selection to plot


def test_defaults_only():
    """A run that trains each library's default only: nothing to say per library; across libraries the
    microbenchmark's prediction chooses the fastest and the slowest default."""
    t = _rows({("mpich", "default"): 100.0, ("openmpi", "default"): 50.0})
    picks = {t.group[0]: {"mpich": {"predicted": {"default": 10.0}}, "openmpi": {"predicted": {"default": 20.0}}}}
    table = vs.table(_rounds(t, picks))
    assert set(table.claim) == {"fastest_over_slowest_default", "fastest_over_default"}
    assert table[table.claim == "fastest_over_slowest_default"].speedup.iloc[0] == pytest.approx(2.0, rel=0.02)
    assert vs.table(_rounds(t)).empty  # without predictions no across-library claim


def test_shares_of_both_frameworks():
    t = pd.DataFrame({"compute_s": [3.0, 3.0, np.nan], "allreduce_s": [1.0, 0.5, 1.0], "wait_s": [np.nan, 0.5, 0.0]})
    assert list(vs.allreduce_share(t).round(3).fillna(-1)) == [0.25, 0.25, -1]


def test_points_and_figure(tmp_path):
    t = _rows(RATES, share=SHARE)
    pts = vs.points(_rounds(t, PICKS), t)
    assert set(zip(pts.library, pts.selection)) == {("mpich", "tuned"), ("mpich", "picked best"),
                                                    ("openmpi", "picked best")}
    assert (pts.ci_low <= pts.speedup).all() and (pts.speedup <= pts.ci_high).all()
    assert pts.time_shared.all() and list(pts.allreduce_share[pts.library == "mpich"]) == pytest.approx([0.4, 0.4])
    paths = vs.figure(pts, tmp_path)
    assert [p.name for p in paths] == ["speedup_vs_allreduce_share.png", "speedup_vs_allreduce_share.pdf"]
    assert all(p.stat().st_size > 0 for p in paths)


def test_picks_read_from_a_run(tmp_path):
    folder = tmp_path / "picks" / "horovod" / "alexnet-f64"
    folder.mkdir(parents=True)
    pd.DataFrame({"library": ["mpich", "mpich", "openmpi"], "algorithm": ["ring", "tree", "ring"],
                  "predicted_us_per_step": [100, 300, 200],
                  "pick": ["best", "worst", "best;worst"]}).to_csv(folder / "n2-r4.csv", index=False)
    assert vs.read_picks(tmp_path) == {"horovod/alexnet-f64/n2-r4": {
        "mpich": {"best": "ring", "worst": "tree", "predicted": {"ring": 100.0, "tree": 300.0}},
        "openmpi": {"best": "ring", "worst": "ring", "predicted": {"ring": 200.0}}}}


def _with_loss(t: pd.DataFrame, loss: dict) -> pd.DataFrame:
    return t.assign(final_loss=[loss.get((lib, alg), 2.376612) for lib, alg in zip(t.library, t.algorithm)])


def test_a_variant_whose_loss_disagrees_at_2_ranks_makes_no_claim():
    """At 2 ranks every variant ends with the same loss (a + b in any order): the one that does not (here the tuned
    file, as MPICH's was when it reduced nothing across nodes) is flagged and left out of the study table."""
    t = _with_loss(_rows(RATES, group="train/vgg16-blocking/n2-r2").assign(ranks=2), {("mpich", "tuned"): 2.434721})
    check = cmp.loss_check(t).set_index(["library", "algorithm"])
    assert check.loc[("mpich", "tuned"), "loss_agrees"] == False  # noqa: E712
    assert check.loc[("mpich", "tuned"), "loss_departure"] == pytest.approx(0.02445, rel=1e-3)
    assert check.drop(("mpich", "tuned")).loss_agrees.eq(True).all()
    kept = cmp.agreeing(t, check.reset_index())
    assert set(kept.algorithm[kept.library == "mpich"]) == {"default", "ring", "recursive_doubling"}
    table = vs.table(_rounds(t, {t.group[0]: PICKS["horovod/alexnet-f64/n2-r4"]}))
    assert "mpich/tuned" not in set(sc.rounds(kept).variant) and not (table.claim == "tuned").any()
    assert (table.claim == "picked_best").any()


def test_at_4_ranks_the_loss_cannot_tell():
    """Rounding moves the loss at 4 ranks as much as a wrong reduction did: no verdict, nothing left out."""
    t = _with_loss(_rows(RATES), {("mpich", "tuned"): 2.377612})
    check = cmp.loss_check(t)
    assert check.loss_agrees.isna().all() and check.loss_departure.max() == pytest.approx(4.2e-4, rel=0.01)
    assert len(cmp.agreeing(t, check)) == len(t)


def test_the_report_lists_a_disagreeing_variant_and_claims_nothing_from_it(tmp_path):
    from ardlab.analysis import report

    t = _with_loss(_rows(RATES, group="train/vgg16-blocking/n2-r2").assign(ranks=2), {("mpich", "tuned"): 2.434721})
    t = t.assign(started_at=[f"2026-12-02T10:{r:02d}:00+00:00" for r in t["round"]])
    made = report.analyse(pd.DataFrame(), t)
    table = made[report.TRAINING_TABLE].set_index(["library", "algorithm"])
    assert table.loc[("mpich", "tuned"), "loss_agrees"] == False  # noqa: E712
    assert table.loc[("mpich", "ring"), "loss_agrees"]
    assert not made["claims"].astype(str).apply(lambda c: c.str.contains("tuned")).any().any()


def _reported_run(folder, rate: str | None, speedup: float):
    """A run folder as `ardlab report` and the run_info rule leave it: its selection_vs_share, study_vs_ardlab,
    study_groups and training_throughput tables and run.yaml."""
    import yaml

    t = _rows({**RATES, ("mpich", "ring"): 100.0 * speedup}, share=SHARE).assign(link_rate=rate)
    (folder / "tables").mkdir(parents=True)
    r = _rounds(t, PICKS)
    vs.points(r, t).to_csv(folder / "tables" / "selection_vs_share.csv", index=False)
    vs.table(r).to_csv(folder / "tables" / "study_vs_ardlab.csv", index=False)
    sc.groups(r).to_csv(folder / "tables" / "study_groups.csv", index=False)
    cmp.training(t).to_csv(folder / "tables" / "training_throughput.csv", index=False)
    (folder / "run.yaml").write_text(yaml.safe_dump({"config": {"link_rate": rate} if rate else {}}))
    return folder


def test_regimes_put_runs_at_two_rates_on_one_figure(tmp_path):
    from ardlab.cli import main

    fast, slow = _reported_run(tmp_path / "a", "1gbit", 1.25), _reported_run(tmp_path / "b", "250mbit", 1.6)
    assert main(["report", "--regimes", str(fast), str(slow), "--output", str(tmp_path / "study")]) == 0
    pts = pd.read_csv(tmp_path / "study" / "tables" / "regimes.csv")
    picked = pts[(pts.library == "mpich") & (pts.selection == "picked best")].set_index("link_rate")
    assert picked.speedup.to_dict() == pytest.approx({"1gbit": 1.25, "250mbit": 1.6}, rel=0.02)
    assert set(pts.run) == {str(fast), str(slow)}
    assert (tmp_path / "study" / "figures" / "speedup_vs_allreduce_share.png").stat().st_size > 0
    # the runs' pooled claims side by side, each with its rate; and as the README shows them
    head = pd.read_csv(tmp_path / "study" / "tables" / "study_vs_ardlab.csv")
    best = head[(head.claim == "picked_best") & (head.library == "mpich") & (head.regime == "largest of 1")]
    assert list(best.link_rate) == ["1gbit", "250mbit"] and list(best.speedup) == pytest.approx([1.25, 1.6], rel=0.02)
    assert list(head.claim.drop_duplicates()) == ["tuned", "picked_best", "fastest_over_slowest_default"]
    md = (tmp_path / "study" / "tables" / "study_vs_ardlab.md").read_text()
    assert "| MPICH: the microbenchmark's pick over its default (1.2x), largest of 1 | 1 | **1.25x [" in md
    assert "1 Gbit/s, 1ms queue (a)" in md and "250 Mbit/s, 1ms queue (b)" in md  # a run naming no queue: the 1 ms
    assert (tmp_path / "study" / "tables" / "study_groups.csv").is_file()
    short = (tmp_path / "study" / "tables" / "study_headline_short.md").read_text().splitlines()
    assert "what the intervals say" not in short[0] and short[0].startswith("| claim")
    regimes = [next(r for r in sc.REGIMES if f", {vs.REGIME_WORDS.get(r, r)} |" in row) for row in short[2:]]
    assert regimes and regimes == sorted(regimes, key=sc.REGIMES.index), short  # one rank a node first, if any
    assert (tmp_path / "study" / "figures" / "forest_tuned.png").stat().st_size > 0


def test_regimes_name_the_run_that_cannot_be_read(tmp_path):
    unreported = tmp_path / "unreported"
    (unreported / "raw").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"unreported/tables/selection_vs_share.csv is missing.*ardlab report"):
        vs.regimes([unreported])
    one_node = _reported_run(tmp_path / "local", None, 1.1)
    with pytest.raises(ValueError, match=r"local/run.yaml names no link_rate"):
        vs.regimes([one_node])


def test_the_ranking_quality_of_a_run(tmp_path):
    """Per group: the rank correlation of the pick file's predicted Allreduce time against the trained time per
    image, where the predicted fastest trained; here the prediction orders 3 of 4 variants as training does, and its
    fastest trained second."""
    run = tmp_path / "run"
    (run / "picks" / "train" / "alexnet-blocking").mkdir(parents=True)
    (run / "tables").mkdir()
    (run / "run.yaml").write_text("config:\n  link_rate: 1gbit\n")
    pd.DataFrame({"library": ["mpich", "mpich", "openmpi", "openmpi"], "algorithm": ["default", "ring", "default",
                                                                                    "ring"],
                  "predicted_us_per_step": [100, 50, 200, 400], "pick": ["", "best", "", "best;worst"]}).to_csv(
        run / "picks" / "train" / "alexnet-blocking" / "n2-r2.csv", index=False)
    pd.DataFrame({"group": "train/alexnet-blocking/n2-r2", "library": ["mpich", "mpich", "openmpi", "openmpi"],
                  "algorithm": ["default", "ring", "default", "ring"], "img_per_s": [110.0, 100.0, 90.0, 50.0],
                  "time_shared": False}).to_csv(run / "tables" / "training_throughput.csv", index=False)
    r = vs.ranking([run])
    (row,) = r.to_dict("records")
    assert row["variants"] == 4 and row["predicted_fastest"] == "mpich/ring" and row["its_trained_rank"] == 2
    assert row["trained_fastest"] == "mpich/default" and not row["predicted_fastest_trained_fastest"]
    assert row["rank_correlation"] == pytest.approx(0.8) and row["regime"] == sc.ONE_PER_NODE
    (summary,) = vs.ranking_summary(r).to_dict("records")
    assert summary["predicted_fastest_trained_fastest"] == "0 of 1" and summary["groups"] == 1


def test_the_study_tables_are_made_from_its_one_list_of_runs():
    """results/study/runs.yaml is the one list of the study's runs: the committed headline holds exactly those runs in
    its order, and its replication pairs are pairs of them, each with B's reproduce summary."""
    from conftest import ROOT

    runs, pairs = vs.study_runs(ROOT)
    head = pd.read_csv(ROOT / "results" / "study" / "tables" / "study_vs_ardlab.csv")
    assert list(dict.fromkeys(Path(r).name for r in head.run)) == [r.name for r in runs]
    assert pairs and all((b / "tables" / "reproduce_summary.csv").is_file() for _, b in pairs)


def test_a_study_list_naming_a_missing_run_or_a_stray_pair_is_refused(tmp_path):
    (tmp_path / "results" / "study").mkdir(parents=True)
    listed = tmp_path / "results" / "study" / "runs.yaml"
    listed.write_text("runs: [results/runs/gone]\n")
    with pytest.raises(FileNotFoundError, match=r"results/runs/gone"):
        vs.study_runs(tmp_path)
    (tmp_path / "results" / "runs" / "a").mkdir(parents=True)
    (tmp_path / "results" / "runs" / "a" / "run.yaml").write_text("seed: 1\n")
    listed.write_text("runs: [results/runs/a]\nreplications: [[results/runs/a, results/runs/b]]\n")
    with pytest.raises(ValueError, match=r"not a pair of its runs"):
        vs.study_runs(tmp_path)
