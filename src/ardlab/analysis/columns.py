"""The one place for result-row column names, and the atomic writer every producer uses.

Writers (bench, train, train-tf) and readers (report) import these lists; a file whose header differs is
rejected by the reader rather than misread. Units are in the names.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from ardlab.atomic import atomic_open

BENCH_COLUMNS = [
    "library", "library_version", "algorithm", "implementation", "ranks", "nodes", "hostname", "dtype",
    "size_bytes", "iterations", "avg_us", "min_us", "max_us", "knobs", "started_at",
]

TRAIN_COLUMNS = [
    "framework", "model", "dataset", "library", "library_version", "algorithm", "parallel_mode", "ranks",
    "batch_per_rank", "steps", "img_per_s", "img_per_s_ci95", "compute_s", "allreduce_s", "wait_s",
    "final_loss", "final_accuracy", "final_top5_accuracy", "knobs", "started_at",
]


def write_csv_atomic(path: str | os.PathLike, columns: Sequence[str], rows: Iterable[Mapping]) -> Path:
    """Write rows to `path` so that the final name only ever holds a complete file.

    Written with `ardlab.atomic.atomic_open`: a run killed midway never leaves a truncated `path`.
    """
    path = Path(path)
    with atomic_open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns), extrasaction="raise")
        w.writeheader()
        for row in rows:
            missing = [c for c in columns if c not in row]
            if missing:
                raise ValueError(f"result row lacks columns {missing}")
            w.writerow(row)
    return path


def knobs_string(env: Mapping[str, str]) -> str:
    """The settings in force as one CSV field: 'K=V;K=V', sorted."""
    return ";".join(f"{k}={v}" for k, v in sorted(env.items()))


KNOB_PREFIXES = ("MPIR_CVAR_", "OMPI_MCA_", "I_MPI_", "HOROVOD_", "PRTE_MCA_")


def knobs_in_force(environ: Mapping[str, str] | None = None) -> str:
    """The MPI / Horovod settings present in an environment, as `knobs_string`."""
    environ = os.environ if environ is None else environ
    return knobs_string({k: v for k, v in environ.items() if k.startswith(KNOB_PREFIXES)})
