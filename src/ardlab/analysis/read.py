"""Read result CSVs into pandas, rejecting any file whose header is not the one its producer writes."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from ardlab.results import BENCH_COLUMNS, TRAIN_COLUMNS

NUMERIC = {"ranks", "nodes", "size_bytes", "iterations", "avg_us", "min_us", "max_us", "batch_per_rank", "steps",
           "img_per_s", "img_per_s_ci95", "compute_s", "allreduce_s", "wait_s", "final_loss", "final_accuracy",
           "final_top5_accuracy"}


def read(paths: Iterable[str | Path], columns: Sequence[str]) -> pd.DataFrame:
    """Concatenate CSVs that each have exactly `columns`; ValueError naming a file that does not."""
    frames = []
    for path in map(Path, paths):
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        if list(df.columns) != list(columns):
            raise ValueError(f"{path}: columns {list(df.columns)} are not the expected {list(columns)}")
        df["source"] = str(path)
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=[*columns, "source"])
    out = pd.concat(frames, ignore_index=True)
    for c in NUMERIC & set(columns):
        out[c] = pd.to_numeric(out[c].replace("", None), errors="raise")
    return out


def bench(paths: Iterable[str | Path]) -> pd.DataFrame:
    return read(paths, BENCH_COLUMNS)


def train(paths: Iterable[str | Path]) -> pd.DataFrame:
    return read(paths, TRAIN_COLUMNS)
