"""Result I/O, the leaf every producer and reader imports: column lists, atomic writes, knobs, Markdown.

- Column lists: one per kind of row (microbenchmark, training summary, per-layer timing). Writers (bench,
  train, train-tf) and readers (analysis) import them; a file whose header differs is rejected by the reader
  rather than misread. Units are in the names.
- Atomic writes: the content goes to a temporary file in the same folder, which is flushed, fsynced and renamed
  over the target; a run killed midway leaves at most a stray temporary file (never matched by readers), and
  the previous file under that name, if any, stays intact.
- Tables: a CSV (one row a measurement) and the same rows as Markdown, side by side.

Standard library only at import (recorded_config imports yaml when called), so the library environments (which
have no pandas) and Snakemake can use it.
"""

from __future__ import annotations

import csv
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Mapping, Sequence

# Where a row stands in its run's paired, interleaved rounds (ardlab.rounds): the comparison group it belongs to,
# the round, the position of its launch in that round's shuffled order, and the seed of the order.
ROUND_COLUMNS = ["group", "round", "position", "order_seed"]

# Where a row was measured: the link rate of the emulated cluster it ran on ("none": unlimited; empty: not an
# emulated cluster, so unknown) and the threads per core on the busiest machine (> 1: the ranks time-shared its
# cores, as several emulated nodes on one machine do); for the microbenchmark, the bytes sent per Allreduce on the
# nodes' network interface (all nodes together, and the node that sent most; empty on one node).
NETWORK_COLUMNS = ["link_rate", "threads_per_core"]
# What the emulated cluster's links queued behind their rate before dropping (ardlab.cluster.links.link_queue: a name of
# links.QUEUES, a time or bytes; "none" for unlimited links; empty off the emulated cluster and in files from before
# the column, when every cluster link queued "1ms").
QUEUE_COLUMNS = ["link_queue"]
TRAFFIC_COLUMNS = ["net_tx_bytes_per_call", "net_tx_max_node_bytes_per_call"]
# How MPI started in the ranks (ardlab.comm.startup): the tuning file the library loaded (a file name, a path, "none",
# "builtin" for libraries whose selection is compiled in) and the thread level it provides (MPI_Query_thread:
# single | funneled | serialized | multiple; mpi4py asks for multiple unless MPI4PY_RC_THREAD_LEVEL says otherwise);
# empty in files from before these columns.
STARTUP_COLUMNS = ["mpi_tuning_file", "mpi_thread_level"]
# The loop that timed a microbenchmark row (ardlab.bench.timeloop): "c" (compiled, native algorithms by default) or
# "python" (our own algorithms, and every row from before the column).
TIMER_COLUMNS = ["timer"]
# What TCP lost on the emulated cluster's nodes while the row was measured (ardlab.comm.traffic.LossCounter): the
# segments it retransmitted and its retransmission timeouts, summed over the nodes, per Allreduce call or training step;
# empty on one node and in files from before these columns.
BENCH_LOSS_COLUMNS = ["tcp_retransmitted_segments_per_call", "tcp_timeouts_per_call"]
TRAIN_LOSS_COLUMNS = ["tcp_retransmitted_segments_per_step", "tcp_timeouts_per_step"]
# A training row's step taken apart (ardlab.comm.calltimer): the mean timed step in seconds, and per step the seconds
# the ranks spent inside summing MPI_Allreduce calls and those calls (each the mean over ranks), timed by the call
# interposer inside the training itself; the rest of the step is step_s less allreduce_in_step_s. Empty where not
# timed (our own algorithms, MPI loaded before the interposer) and in files from before these columns.
STEP_COLUMNS = ["step_s", "allreduce_in_step_s", "allreduce_calls_per_step"]
# The image the ranks ran in (ardlab.images.provenance): the key of ardlab's files in it and their commit, from its
# labels; empty outside an image (and in files from before rows carried them).
IMAGE_COLUMNS = ["image_source", "image_commit"]
# What carried the bytes between two ranks of a node and between nodes, as the library reported it in a probe launch
# with the same settings (ardlab.comm.transport: "ob1:tcp", "ucx:tcp", "ofi:tcp;ofi_rxm", "shm:posix"); empty where
# the launch had no such pair of ranks, where it was not probed (a launch by the user's own launcher, --in-mpi), and
# in files from before rows carried it.
TRANSPORT_COLUMNS = ["transport_intra_node", "transport_inter_node"]
# The family of the row's library (ardlab.comm.libraries.FAMILIES): a site's own build (ardlab.comm.sites) is told from
# the wheel of its family by `library`, and paired with it by this; "" in files from before it (the three wheels only,
# each its own family).
FAMILY_COLUMNS = ["library_family"]


def _header(*eras: tuple[list[str], dict[str, str]]) -> tuple[list[str], list[tuple[list[str], dict[str, str]]]]:
    """A file kind's header and the earlier headers a reader still accepts, from its eras: each era's columns were
    appended to the header at once, and its fill is what they read as in files from before them (the first era's
    fill is unused). Returns (columns, [(an earlier header, the fill of every column added since)], oldest first)."""
    columns = [c for cols, _ in eras for c in cols]
    earlier = []
    for k in range(1, len(eras)):
        header = [c for cols, _ in eras[:k] for c in cols]
        fill = {c: v for _, f in eras[k:] for c, v in f.items()}
        earlier.append((header, fill))
    return columns, earlier


# Earlier headers a reader still accepts, with the values the columns added since take in them: files of the
# first versions were written by the local launcher only (one node, no emulated network); a backend of "" is a
# file from before the column, when ardlab.nn had only its numpy backend.
_STARTUP_FILL = dict.fromkeys(STARTUP_COLUMNS, "")

BENCH_COLUMNS, _BENCH_EARLIER = _header(
    (["library", "library_version", "algorithm", "implementation", "ranks", "nodes", "hostname", "dtype",
      "size_bytes", "iterations", "avg_us", "min_us", "max_us", "knobs", "started_at", *ROUND_COLUMNS], {}),
    ([*NETWORK_COLUMNS, *TRAFFIC_COLUMNS], dict.fromkeys([*NETWORK_COLUMNS, *TRAFFIC_COLUMNS], "")),
    ([*STARTUP_COLUMNS, *TIMER_COLUMNS], {**_STARTUP_FILL, **dict.fromkeys(TIMER_COLUMNS, "python")}),
    (BENCH_LOSS_COLUMNS, dict.fromkeys(BENCH_LOSS_COLUMNS, "")),
    (QUEUE_COLUMNS, dict.fromkeys(QUEUE_COLUMNS, "")),
    (IMAGE_COLUMNS, dict.fromkeys(IMAGE_COLUMNS, "")),
    (TRANSPORT_COLUMNS, dict.fromkeys(TRANSPORT_COLUMNS, "")),
    (FAMILY_COLUMNS, dict.fromkeys(FAMILY_COLUMNS, "")),
)

# How many variants the launch that measured a training row measured (1: a launch of its own; more: the algorithm was
# switched inside one launch, ardlab.comm.switch, each variant's row under its own position); 1 in files from before.
LAUNCH_COLUMNS = ["launch_variants"]

TRAIN_COLUMNS, _TRAIN_EARLIER = _header(
    (["framework", "model", "dataset", "library", "library_version", "algorithm", "parallel_mode", "ranks",
      "batch_per_rank", "steps", "img_per_s", "img_per_s_ci95", "compute_s", "allreduce_s", "wait_s",
      "final_loss", "final_accuracy", "final_top5_accuracy", "knobs", "started_at", *ROUND_COLUMNS], {}),
    (["nodes", *NETWORK_COLUMNS], {"nodes": "1", **dict.fromkeys(NETWORK_COLUMNS, "")}),
    # ardlab.nn's compute backend (numpy | onednn); tensorflow for tf.keras
    (["backend"], {"backend": ""}),
    (STARTUP_COLUMNS, _STARTUP_FILL),
    (LAUNCH_COLUMNS, dict.fromkeys(LAUNCH_COLUMNS, "1")),
    (TRAIN_LOSS_COLUMNS, dict.fromkeys(TRAIN_LOSS_COLUMNS, "")),
    (STEP_COLUMNS, dict.fromkeys(STEP_COLUMNS, "")),
    (QUEUE_COLUMNS, dict.fromkeys(QUEUE_COLUMNS, "")),
    (IMAGE_COLUMNS, dict.fromkeys(IMAGE_COLUMNS, "")),
    (TRANSPORT_COLUMNS, dict.fromkeys(TRANSPORT_COLUMNS, "")),
    (FAMILY_COLUMNS, dict.fromkeys(FAMILY_COLUMNS, "")),
)

EARLIER_COLUMNS = {"bench": _BENCH_EARLIER, "train": _TRAIN_EARLIER}


def utc_now() -> str:
    """The time a measurement started, as every row records it (UTC, ISO 8601, to the second)."""
    import datetime as _dt

    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def summary_row(*, rates: Sequence[float], loss: float, accuracy: float, top5: float, compute_s: float | None,
                allreduce_s: float | None, wait_s: float | None, **fields) -> dict:
    """A training summary row, for every framework alike: `fields` as given (TRAIN_COLUMNS; the launch adds its place
    in the rounds and where it ran), the images/s of the timed iterations (`rates`) as their mean and the half-width
    of its normal 95% interval ("0" from one iteration), seconds to 4 decimals (empty where not measured), the loss
    to 6 and the accuracies to 4."""
    import math
    import statistics

    unknown = sorted(set(fields) - set(TRAIN_COLUMNS))
    if unknown:
        raise ValueError(f"summary row fields {unknown} are not training columns")
    seconds = {"compute_s": compute_s, "allreduce_s": allreduce_s, "wait_s": wait_s}
    return {**fields, "img_per_s": f"{statistics.fmean(rates):.2f}",
            "img_per_s_ci95": (f"{1.96 * statistics.stdev(rates) / math.sqrt(len(rates)):.2f}" if len(rates) > 1
                               else "0"),
            **{k: "" if v is None else f"{v:.4f}" for k, v in seconds.items()},
            "final_loss": f"{loss:.6f}", "final_accuracy": f"{accuracy:.4f}", "final_top5_accuracy": f"{top5:.4f}"}


# `ardlab train --layer-timing FILE`: seconds per step, one row a layer (the optimizer update as its own row).
LAYER_TIMING_COLUMNS = ["layer", "forward_s", "backward_s", "allreduce_s", "wait_s", "update_s"]

# Beside every tuned selection file (`ardlab tune`): its ranges as a table, so that tools which do not parse the
# library's own format (the driver adding the selected algorithms to a comparison, the report) can read them.
RANGES_COLUMNS = ["lo_bytes", "hi_bytes", "algorithm"]


MIB = 1 << 20  # bytes in a MiB: options given in MiB (bucket_mb, fusion_threshold_mb, budget_mib)


def recorded_config(run: str | os.PathLike) -> dict:
    """The config a run folder recorded (the ``config`` of its run.yaml, as ``ardlab.study.runinfo`` wrote it)."""
    import yaml  # not the standard library, but in every environment; imported here so writers of rows need none

    path = Path(run) / "run.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {run} is not a run folder (the workflow's run_info rule writes "
                                "it)")
    return (yaml.safe_load(path.read_text()) or {}).get("config") or {}


def mib_bytes(mib: float) -> int:
    """`mib` MiB in whole bytes."""
    return int(mib * MIB)


PICKS = ("best", "worst")  # the algorithms a pick file (ardlab.analysis.picks) names per library


def picked(path: str | os.PathLike, library_name: str, pick: str) -> str:
    """The algorithm a pick file names as `library_name`'s `pick` (best or worst; a library's only forced algorithm
    is both, ``best;worst``)."""
    if pick not in PICKS:
        raise ValueError(f"unknown pick {pick!r}; valid: {', '.join(PICKS)}")
    with open(path, newline="") as f:
        hits = [r["algorithm"] for r in csv.DictReader(f)
                if r["library"] == library_name and pick in r["pick"].split(";")]
    if len(hits) != 1:
        raise ValueError(f"pick file {path} names no {pick} algorithm for {library_name}")
    return hits[0]


def scale_name(ranks: int, nodes: int = 1) -> str:
    """A scale's name in paths: r<ranks> on one node, n<nodes>-r<ranks> across nodes."""
    return f"r{ranks}" if nodes == 1 else f"n{nodes}-r{ranks}"


RANGES_SUFFIX = ".ranges.csv"  # beside a tuned selection file, its ranges table


def ranges_path(selection_file: str | os.PathLike) -> Path:
    """The ranges table written beside a tuned selection file."""
    return Path(f"{selection_file}{RANGES_SUFFIX}")


# The measurement kinds and where a run folder keeps each one's rows (one CSV per comparison group and round),
# declared once: the study's kinds and Snakemake rules (ardlab.study.kinds), the report's inputs (report.smk,
# ardlab.analysis.report.run_files) and the checks against earlier runs read them here. kind -> (the path pattern
# under the run folder, what its rows are: "bench", microbenchmark rows, or "train", training summary rows).
ROW_FILES = {
    "microbench": ("raw/microbench/n{nodes}-r{ranks}/round{round}.csv", "bench"),
    "microbench_tuned": ("raw/microbench_tuned/n{nodes}-r{ranks}/round{round}.csv", "bench"),
    "train": ("raw/train/{model}-{mode}/{scale}/round{round}.csv", "train"),
    "horovod": ("raw/horovod/{model}-{mode}/{scale}/round{round}.csv", "train"),
}
ROW_CLASSES = ("bench", "train")
if any(cls not in ROW_CLASSES for _, cls in ROW_FILES.values()):  # a kind no report would read: loud, at import
    raise ValueError(f"ROW_FILES: every kind's rows must be one of {ROW_CLASSES}")


def kinds_of(cls: str) -> list[str]:
    """The measurement kinds whose rows are of `cls` ("bench" or "train"), in ROW_FILES' order."""
    if cls not in ROW_CLASSES:
        raise ValueError(f"{cls!r} is not a class of rows; valid: {', '.join(ROW_CLASSES)}")
    return [kind for kind, (_, c) in ROW_FILES.items() if c == cls]


def rows_glob(kind: str) -> str:
    """The glob (under a run folder) of every CSV a measurement kind writes."""
    import re

    return re.sub(r"\{[^}]*\}", "*", ROW_FILES[kind][0])


# A run folder's microbenchmark rows, and the reproduce tables (`ardlab report --compare A B` writes them in A's
# tables/, each as .csv and .md).
MICROBENCH_ROWS = rows_glob("microbench")
REPRODUCE_TABLES = ("reproduce_summary", "reproduce")


def selected_algorithms(selection_file: str | os.PathLike) -> list[str]:
    """The algorithms a tuned selection file selects, in order of their first range (from its ranges table)."""
    path = ranges_path(selection_file)
    if not path.is_file():
        raise FileNotFoundError(f"{path} (the ranges of tuned file {selection_file}) does not exist: make the "
                                "tuned file with `ardlab tune`, which writes both")
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        if r.fieldnames != RANGES_COLUMNS:
            raise ValueError(f"{path}: columns {r.fieldnames} are not the expected {RANGES_COLUMNS}")
        return list(dict.fromkeys(row["algorithm"] for row in r))


# Environment variables recorded with every row as the knobs in force: the MPI libraries' and Horovod's settings,
# and NumPy's huge-page advice for its buffers (the microbenchmark's launch settings, ardlab.programs).
@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs):
    """`open` for writing whose result appears under `path` only when the block completes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv(path: str | os.PathLike, columns: Sequence[str], rows: Iterable[Mapping]) -> Path:
    """Write rows (mappings holding exactly `columns`) to `path` atomically; ValueError on a short row."""
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


def markdown(columns: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A Markdown table of rows (sequences of values in column order); floats with 3 significant digits."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def save_table(rows: Sequence[Mapping], path: str | os.PathLike) -> list[Path]:
    """Write rows (same keys, in order) to `path` (.csv) and the same table as Markdown beside it (.md)."""
    path = Path(path).with_suffix(".csv")
    if not rows:
        raise ValueError(f"no rows to write to {path}")
    cols = list(rows[0])
    write_csv(path, cols, rows)
    save_markdown(cols, ([r[c] for c in cols] for r in rows), path.with_suffix(".md"))
    return [path, path.with_suffix(".md")]


def save_markdown(columns: Sequence[str], rows: Iterable[Sequence], path: str | os.PathLike) -> Path:
    """Write a Markdown table atomically."""
    path = Path(path)
    with atomic_open(path) as f:
        f.write(markdown(columns, rows))
    return path


def save_frame(df, path: str | os.PathLike) -> list[Path]:
    """Write a pandas DataFrame to `path` (.csv, floats to 6 significant digits) and as Markdown beside it (.md),
    both atomically (pandas is the caller's: this module takes the frame as it comes)."""
    path = Path(path).with_suffix(".csv")
    with atomic_open(path, "w", newline="") as f:
        df.to_csv(f, index=False, float_format="%.6g")
    save_markdown(list(df.columns), df.itertuples(index=False), path.with_suffix(".md"))
    return [path, path.with_suffix(".md")]
