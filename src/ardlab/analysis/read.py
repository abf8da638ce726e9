"""Read result CSVs into pandas, rejecting any file whose header is not the one its producer writes."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

from ardlab.results import (
    BENCH_COLUMNS,
    BENCH_LOSS_COLUMNS,
    EARLIER_COLUMNS,
    STEP_COLUMNS,
    TRAIN_COLUMNS,
    TRAIN_LOSS_COLUMNS,
)

NUMERIC = {*BENCH_LOSS_COLUMNS, *TRAIN_LOSS_COLUMNS, *STEP_COLUMNS, "ranks", "nodes", "size_bytes", "iterations",
           "avg_us", "min_us", "max_us", "batch_per_rank", "steps", "img_per_s", "img_per_s_ci95", "compute_s",
           "allreduce_s", "wait_s", "final_loss", "final_accuracy", "final_top5_accuracy", "net_tx_bytes_per_call",
           "net_tx_max_node_bytes_per_call", "threads_per_core"}


def read(paths: Iterable[str | Path], columns: Sequence[str], earlier: Sequence[tuple] = ()) -> pd.DataFrame:
    """Concatenate CSVs that each have exactly `columns` (or one of the `earlier` (header, fill) pairs' headers,
    whose missing columns take the fill's values); ValueError naming a file that has none of them."""
    frames = []
    for path in map(Path, paths):
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        for header, fill in earlier:
            if list(df.columns) == list(header):
                df = df.assign(**fill)
                break
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
    return read(paths, BENCH_COLUMNS, EARLIER_COLUMNS["bench"])


def train(paths: Iterable[str | Path]) -> pd.DataFrame:
    return read(paths, TRAIN_COLUMNS, EARLIER_COLUMNS["train"])


def run_files(run: str | Path) -> tuple[list[Path], list[Path]]:
    """(microbenchmark CSVs, training CSVs) of a run folder: every measurement kind's rows
    (ardlab.results.ROW_FILES)."""
    from ardlab.results import kinds_of, rows_glob

    raw = Path(run) / "raw"
    if not raw.is_dir():
        raise FileNotFoundError(f"{raw}: not a run folder (no raw/ in {run})")
    return tuple(sorted(p for kind in kinds_of(cls) for p in Path(run).glob(rows_glob(kind)))
                 for cls in ("bench", "train"))
