"""A run's record (run.yaml) against the training rows beside it (ardlab.analysis.record): a setting the rows never
ran with is named before any table is written; every committed run's record describes its rows."""

from pathlib import Path

import pandas as pd
import pytest
import yaml

from ardlab.analysis import read, record, report
from ardlab.results import recorded_config

ROOT = Path(__file__).resolve().parents[1]
CONFIG = {"train": {"batch_per_rank": 16, "steps": 4},
          "horovod": {"batch_per_rank": 8, "warmup_batches": 2, "iterations": 3, "batches_per_iter": 2}}


def _rows(nn_steps=4, tf_batch=8):
    return pd.DataFrame({"framework": ["ardlab.nn"] * 3 + ["tensorflow"] * 2,
                         "batch_per_rank": [16, 16, 16, tf_batch, tf_batch], "steps": [nn_steps] * 3 + [8, 8]})


def test_rows_that_ran_as_recorded_pass(tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"config": CONFIG}))
    assert record.mismatches(CONFIG, _rows()) == []
    record.check(tmp_path, _rows())


def test_a_setting_the_rows_never_ran_with_is_named(tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"config": {**CONFIG, "train": {"batch_per_rank": 16,
                                                                                        "steps": 6}}}))
    with pytest.raises(ValueError, match=r"run.yaml does not describe the training rows beside it: ardlab.nn steps: "
                                         r"the record says 6, rows ran with 4 \(3 rows\)"):
        record.check(tmp_path, _rows())
    bad = record.mismatches(CONFIG, _rows(tf_batch=16))
    assert bad == ["tensorflow batch_per_rank: the record says 8, rows ran with 16 (2 rows)"]


def test_the_report_refuses_before_writing_a_table(tmp_path):
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"config": {**CONFIG, "train": {"batch_per_rank": 32,
                                                                                        "steps": 4}}}))
    train = ROOT / "results" / "runs" / "reference-a" / "raw" / "train"
    files = sorted(train.glob("**/*.csv"))
    with pytest.raises(ValueError, match=r"ardlab.nn batch_per_rank: the record says 32, rows ran with 16"):
        report.report([], files, tmp_path)
    assert not (tmp_path / "tables").exists()


@pytest.mark.parametrize("run", sorted(p.parent.name for p in (ROOT / "results" / "runs").glob("*/run.yaml")))
def test_every_committed_record_describes_its_rows(run):
    folder = ROOT / "results" / "runs" / run
    _, train = report.run_files(folder)
    assert record.mismatches(recorded_config(folder), read.train(train)) == []
