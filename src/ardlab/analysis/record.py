"""Does a run folder's record (run.yaml) describe the training rows beside it? Each row carries the batch and step
count it ran with; the record's config says what the run was configured to do. A run whose config changed after
run.yaml was written (the workflow writes it once) would otherwise publish settings its rows never ran with.

``mismatches`` lists every (framework, setting) where the rows disagree with the record; ``check`` raises naming
them, so that `ardlab report` never writes tables beside a record that misdescribes them.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ardlab.results import recorded_config


def expected(config: dict) -> dict[str, dict[str, int]]:
    """framework -> {row column: the value the config asks for}: ardlab.nn's batch and timed steps; Horovod's batch
    and its steps (warm-up batches plus iterations x batches per iteration, as ``horovod.train`` counts them)."""
    out = {}
    train, hvd = config.get("train") or {}, config.get("horovod") or {}
    if train.get("batch_per_rank") is not None and train.get("steps") is not None:
        out["ardlab.nn"] = {"batch_per_rank": int(train["batch_per_rank"]), "steps": int(train["steps"])}
    if all(hvd.get(k) is not None for k in ("batch_per_rank", "warmup_batches", "iterations", "batches_per_iter")):
        steps = int(hvd["warmup_batches"]) + int(hvd["iterations"]) * int(hvd["batches_per_iter"])
        out["tensorflow"] = {"batch_per_rank": int(hvd["batch_per_rank"]), "steps": steps}
    return out


def mismatches(config: dict, t: pd.DataFrame) -> list[str]:
    """One line per framework and setting where the training rows `t` ran with other values than `config` says."""
    lines = []
    for framework, settings in expected(config).items():
        rows = t[t.framework == framework] if len(t) else t
        for column, want in settings.items():
            if rows.empty or column not in rows:
                continue
            found = rows[column].value_counts()
            other = found[found.index != want]
            if len(other):
                ran = ", ".join(f"{int(v)} ({n} rows)" for v, n in other.items())
                lines.append(f"{framework} {column}: the record says {want}, rows ran with {ran}")
    return lines


def check(results: str | Path, t: pd.DataFrame) -> None:
    """ValueError naming every setting where `results`/run.yaml misdescribes the training rows `t`; nothing when the
    folder has no run.yaml (rows reported on their own) or no training rows."""
    path = Path(results) / "run.yaml"
    if t.empty or not path.is_file():
        return
    bad = mismatches(recorded_config(results), t)
    if bad:
        raise ValueError(f"{path} does not describe the training rows beside it: " + "; ".join(bad)
                         + ". Write the record the rows ran with (the config they were measured under) before "
                           "reporting: a run's tables must not sit beside settings they never ran with")
