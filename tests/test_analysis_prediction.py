"""The microbenchmark's predicted Allreduce per step beside what training measured (ardlab.analysis.prediction),
recomputed from a committed run's raw rows and pick files by code that does not use the module."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ardlab.analysis import prediction
from conftest import ROOT

RUN = ROOT / "results" / "runs" / "cluster"
GROUP = "train/alexnet-blocking/n2-r2"


def test_a_variants_parts_recompute_from_its_raw_rows_and_pick_file():
    """MPICH's default in the committed cluster run's ardlab.nn AlexNet group at 2 nodes x 1 rank: the pick file's
    prediction, and over the raw rows of its 5 rounds the median step (images a step / img/s), the median time its
    blocking Allreduce calls and waits took of the step, and the rest."""
    p = prediction.parts([RUN])
    row = p[(p.group == GROUP) & (p.library == "mpich") & (p.algorithm == "default")].iloc[0]
    raw = pd.concat(pd.read_csv(f) for f in sorted(glob.glob(str(RUN / "raw" / GROUP / "round*.csv"))))
    mine = raw[(raw.library == "mpich") & (raw.algorithm == "default")]
    step = mine.batch_per_rank * mine.ranks / mine.img_per_s
    comm = mine.allreduce_s + mine.wait_s.fillna(0)
    added = comm / (mine.compute_s + comm) * step
    picks = pd.read_csv(RUN / "picks" / "train" / "alexnet-blocking" / "n2-r2.csv")
    predicted = picks[(picks.library == "mpich") & (picks.algorithm == "default")].predicted_us_per_step.iloc[0] / 1e6
    assert row.pick == "" and row.rounds == len(mine) == 5
    assert row.regime == "1 rank a node" and row.link_rate == "1gbit"
    assert row.predicted_allreduce_s == pytest.approx(predicted)
    assert row.step_s == pytest.approx(step.median()) and row.added_s == pytest.approx(added.median())
    assert row.rest_s == pytest.approx((step - added).median())
    assert row.added_over_predicted == pytest.approx(added.median() / predicted)
    assert np.isnan(row.allreduce_in_step_s)  # rows from before the in-training timer


def test_the_summary_per_run_and_regime():
    """Two groups of one run: the medians of measured over predicted, of the rank correlations with the time added
    and with the step (Spearman, 3 variants at least), and of each group's ranges."""
    rows = []
    for group, added, step in (("a", (1.0, 2.0, 3.0), (5.0, 4.0, 6.0)), ("b", (2.0, 1.0, 3.0), (4.0, 5.0, 6.0))):
        for alg, pred, a, s in zip(("x", "y", "z"), (1.0, 2.0, 3.0), added, step):
            rows.append({"run": "r", "link_rate": "1gbit", "group": group, "regime": "1 rank a node",
                         "library": "mpich", "algorithm": alg, "pick": "", "rounds": 5, "predicted_allreduce_s": pred,
                         "step_s": s, "added_s": a, "rest_s": s - a, "allreduce_in_step_s": np.nan,
                         "added_over_predicted": a / pred, "inside_over_predicted": np.nan})
    (s,) = prediction.summary(pd.DataFrame(rows)).to_dict("records")
    assert s["groups"] == 2 and s["variants"] == 6
    assert s["median_rank_correlation_added"] == pytest.approx(0.75)  # 1.0 and 0.5
    assert s["median_rank_correlation_step"] == pytest.approx(0.75)  # 0.5 and 1.0
    assert s["median_added_over_predicted"] == pytest.approx(1.0) and np.isnan(s["median_inside_over_predicted"])
    assert s["median_predicted_range_s"] == pytest.approx(2.0)
    assert s["median_rest_range_s"] == pytest.approx(2.0)  # the rests: a 4, 2, 3; b 2, 4, 3
    rows[2]["pick"] = rows[5]["pick"] = "worst"  # the controls leave the ranges: a 4, 2 and b 2, 4 are left
    (s,) = prediction.summary(pd.DataFrame(rows)).to_dict("records")
    assert s["median_predicted_range_s"] == pytest.approx(1.0) and s["median_rest_range_s"] == pytest.approx(2.0)


def test_committed_study_tables_are_the_modules():
    """results/study's tables of the predicted Allreduce against training are what the module makes of the study's
    runs (results/study/runs.yaml, `ardlab report --regimes`)."""
    from ardlab.analysis.versus_study import study_runs

    runs = study_runs(ROOT)[0]
    made = prediction.summary(prediction.parts(runs))
    committed = pd.read_csv(ROOT / "results" / "study" / "tables" / "allreduce_predicted_vs_training_summary.csv")
    assert len(made) == len(committed) and {Path(r).name for r in committed.run} == {r.name for r in runs}
    for column in ("median_added_over_predicted", "median_rank_correlation_added", "median_rank_correlation_step",
                   "median_predicted_range_s", "median_rest_range_s"):
        assert made[column].to_numpy() == pytest.approx(committed[column].to_numpy(), rel=1e-4), column
