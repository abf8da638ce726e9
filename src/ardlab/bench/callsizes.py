"""The Allreduce calls a training run hands MPI, measured: every call's size and operation, on every rank.

The message sizes a study should benchmark are the ones training issues: ardlab.nn's per-layer or bucketed calls,
Horovod's fused buffers (whose sizes depend on what is ready within a cycle) and its own coordination calls. They
are counted, not derived: ``callsizes.c``, built per environment, wraps MPI_Allreduce; a rank whose environment
names a folder in ARDLAB_CALLSIZES loads it before its MPI library (``load_if_asked``, called by ardlab.rank) and
writes its counts there at MPI_Finalize.

    python -m ardlab.bench.callsizes build          # for this environment's MPI (containers/install-env)
    python -m ardlab.bench.callsizes summary results/experiments/call_sizes/allreduce_sizes*.csv \
        --output results/experiments/call_sizes/allreduce_sizes_summary.csv

This module is the instrument: it builds and loads the counter and reads what ranks wrote. Running a training plan
with it loaded, and the table of its counts, is ``ardlab.callcount`` (above the training programs, which this
package does not import). That table has one row per run, operation and size (rank 0's counts; every rank's must
agree, or it is an error): framework, model, library, ranks, setting (ardlab.nn's parallel mode and bucket,
Horovod's fusion threshold), steps (every training step of the run, warm-up included), op, bytes, calls,
calls_per_step.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path

from ardlab.bench.timeloop import compile_against

SOURCE = Path(__file__).with_name("callsizes.c")
LIBRARY_FILE = "libardlab_callsizes.so"
ENV = "ARDLAB_CALLSIZES"  # the folder a rank writes its counts to; unset: nothing is loaded or counted
# seconds after MPI_Init within which a rank must make a summing Allreduce, or it says so and exits (callsizes.c)
FIRST_CALL_ENV, NO_ALLREDUCE_MARK = "ARDLAB_FIRST_ALLREDUCE_S", "ARDLAB-NO-ALLREDUCE"


def library_path(prefix: str | Path | None = None) -> Path:
    return Path(prefix or sys.prefix) / "lib" / LIBRARY_FILE


def build(prefix: str | Path | None = None) -> Path:
    """Compile callsizes.c against the MPI of the environment at `prefix` (default: this interpreter's)."""
    return compile_against(SOURCE, LIBRARY_FILE, prefix, "the Allreduce call counter")


def load_if_asked(training: bool = False) -> None:
    """Load the counter ahead of the MPI library (before mpi4py or Horovod load it), so their MPI_Allreduce resolves
    to it: where ARDLAB_CALLSIZES asks for counts, and in every training run (`training`: its Allreduce timer,
    ardlab.comm.calltimer). A training run whose MPI is loaded already (``--in-mpi`` under a caller that imported
    mpi4py first) goes untimed: its rows' Allreduce columns are empty, never a guess."""
    from ardlab.comm import calltimer

    if not os.environ.get(ENV) and not training or calltimer.loaded():
        return
    if "mpi4py.MPI" in sys.modules:
        if not os.environ.get(ENV):
            return
        raise RuntimeError(f"{ENV} is set, but MPI was loaded before the call counter could be")
    path = library_path()
    if not path.is_file():
        raise FileNotFoundError(f"the Allreduce call counter {path} is missing: set up the environment again "
                                f"(containers/setup-envs), or build it with `{sys.executable} -m "
                                "ardlab.bench.callsizes build`")
    _load_intel_libfabric(ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL))


def _load_intel_libfabric(counter) -> None:
    """Where the counter brought Intel MPI's libmpi into the process, load its libfabric as mpi4py would have
    (mpi4py._mpiabi does so only when it loads libmpi itself, and with an MPI library already in the process it loads
    none): libfabric.so.1 from the environment, FI_PROVIDER_PATH to its providers. Without it Intel MPI's
    MPI_Init fails across nodes (OFI; seen under srun on 2 emulated nodes)."""
    if not hasattr(counter, "I_MPI_Check_image_status"):
        return
    internal = os.environ.get("I_MPI_OFI_LIBRARY_INTERNAL", "").lower() not in ("0", "no", "off", "false", "disable")
    if not internal or os.environ.get("I_MPI_FABRICS") == "shm":
        return
    root = Path(sys.prefix)
    for sub in (("opt", "mpi", "libfabric", "lib"), ("libfabric", "lib"), ("libfabric",), ("lib", "libfabric"),
                ("lib",)):
        found = root.joinpath(*sub, "libfabric.so.1")
        if found.is_file():
            providers = found.parent / "prov"
            os.environ.setdefault("FI_PROVIDER_PATH", str(providers if providers.is_dir() else found.parent))
            ctypes.CDLL(str(found), mode=ctypes.RTLD_GLOBAL)
            return


def read(folder: str | Path, ranks: int):
    """Every rank's counts from `folder` as one table (rank 0's), after checking that all ranks made the same
    calls (an Allreduce is collective: any difference is a fault of the counting)."""
    import pandas as pd

    tables = []
    for r in range(ranks):
        path = Path(folder) / f"rank{r}.csv"
        if not path.is_file():
            raise RuntimeError(f"rank {r} wrote no Allreduce counts ({path}): did it reach MPI_Finalize?")
        t = pd.read_csv(path).sort_values(["op", "bytes"]).reset_index(drop=True)
        if (t["op"] == "overflow").any():
            raise RuntimeError(f"rank {r} made Allreduce calls of more distinct sizes than the counter holds")
        tables.append(t)
    for r, t in enumerate(tables[1:], start=1):
        if not t.equals(tables[0]):
            raise RuntimeError(f"rank {r}'s Allreduce calls differ from rank 0's:\n{t}\n{tables[0]}")
    return tables[0]


TIMELINE_COLUMNS = ["end_s", "bytes", "inside_s"]
SKIPPED_STEPS = 2  # the first steps of a timeline, which period_of leaves out


def read_timelines(folder: str | Path, ranks: int):
    """Each rank's timeline of summing Allreduce calls (``callsizes.c``: its last calls in order, each with when it
    ended, seconds after the first of them, its bytes and its seconds inside), as pandas tables, rank by rank."""
    import pandas as pd

    out = []
    for r in range(ranks):
        path = Path(folder) / f"timeline{r}.csv"
        if not path.is_file():
            raise RuntimeError(f"rank {r} wrote no Allreduce timeline ({path}): did it reach MPI_Finalize?")
        t = pd.read_csv(path)
        if list(t.columns) != TIMELINE_COLUMNS:
            raise ValueError(f"{path}: columns {list(t.columns)} are not {TIMELINE_COLUMNS}")
        out.append(t)
    return out


def period_of(timeline, least_steps: int = 2) -> tuple[float, float, int]:
    """(seconds a step, seconds inside Allreduce a step, bytes a step) of a training loop's timeline (its first summing
    calls, from the first on). A step sums the same bytes every time (its gradients), however a framework splits them
    into calls (Horovod's fusion buffers vary from step to step): the step's bytes are the smallest sum of the first
    calls whose multiples the running sum meets at 90% of them or more; the steps end where it does. The step is the
    mean time between step ends after the first SKIPPED_STEPS (start-up, warm-up, and what a program does between
    its first steps, such as broadcasting the weights), the Allreduce a step their calls' seconds inside over their
    steps. RuntimeError where fewer than SKIPPED_STEPS + `least_steps` steps are found."""
    import numpy as np

    sizes = timeline["bytes"].to_numpy(dtype=np.int64)
    running = np.cumsum(sizes)
    for j in range(min(len(sizes), 1024)):
        step_bytes = int(running[j])
        ends = np.flatnonzero(running % step_bytes == 0)
        whole = int(running[-1] // step_bytes)
        if whole >= SKIPPED_STEPS + least_steps and len(ends) >= 0.9 * whole:
            later = ends[SKIPPED_STEPS - 1:]
            times = timeline["end_s"].to_numpy()[later]
            inside = timeline["inside_s"].to_numpy()[later[0] + 1:later[-1] + 1].sum()
            return float((times[-1] - times[0]) / (len(later) - 1)), float(inside / (len(later) - 1)), step_bytes
    raise RuntimeError(f"its summing Allreduce calls ({len(timeline)} in all) sum to no repeating step of bytes over "
                       f"{SKIPPED_STEPS + least_steps} steps or more: its steps cannot be told apart")


def summary(table):
    """Per framework, model, library, ranks and nodes: the gradient traffic of one step (operation sum) and Horovod's
    coordination calls (any other operation): calls and MiB per step, the size below which half of the bytes
    go (bytes-weighted median) and the largest call, in KiB (rounded)."""
    import numpy as np
    import pandas as pd

    out = []
    for key, g in table.groupby(["framework", "model", "library", "ranks", "nodes"], sort=True):
        sums = g[g["op"] == "sum"].sort_values("bytes")
        weight = sums["bytes"] * sums["calls"]
        half = sums["bytes"].to_numpy()[np.searchsorted(weight.cumsum().to_numpy(), weight.sum() / 2)]
        steps = g["steps"].iloc[0]
        out.append(dict(zip(["framework", "model", "library", "ranks", "nodes"], key), **{
            "sum_calls_per_step": round(sums["calls"].sum() / steps, 2),
            "sum_mib_per_step": round(weight.sum() / steps / 2**20, 2),
            "half_bytes_below_kib": int(round(half / 1024)),
            "largest_kib": int(round(sums["bytes"].max() / 1024)),
            "other_calls_per_step": int(round(g.loc[g["op"] != "sum", "calls"].sum() / steps)),
            "other_ops": ";".join(f"{op}:{b}B" for op, b in
                                  g.loc[g["op"] != "sum", ["op", "bytes"]].drop_duplicates().itertuples(index=False)),
        }))
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ardlab.bench.callsizes", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    b = sub.add_parser("build", help="compile the counter for this environment's MPI")
    b.add_argument("--prefix", default=None, help="the environment (default: this interpreter's)")
    t = sub.add_parser("summary", help="per framework and model: the calls of one step (a CSV and Markdown)")
    t.add_argument("tables", nargs="+", help="CSVs written by python -m ardlab.callcount measure")
    t.add_argument("--output", required=True, help="the summary's path (.csv; .md beside it)")
    a = p.parse_args(argv)
    if a.action == "summary":
        import pandas as pd

        from ardlab.results import save_frame

        print(*save_frame(summary(pd.concat([pd.read_csv(f) for f in a.tables])), a.output))
        return 0
    print(f"built {build(a.prefix)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
