"""What every row of a table ran under, beside its numbers: whether its group's ranks time-shared cores, and which
tuning file each library loaded.

At 2 ranks a node on this machine's 2 cores the ranks take turns on a core (``threads_per_core`` above 1 in the raw
rows), and Intel MPI loads its *generic* tuning file on CPUs it does not recognise (the rows' ``mpi_tuning_file``):
both change what a library's default does, so a table that mixes shapes must say which rows ran so. ``marks`` reads
them from the raw rows per group and library; ``mark`` adds them to any table with a ``group`` column:

- ``time_shared``: the group's ranks time-shared cores (True/False);
- ``mpi_tuning_file``: per (group, library) the tuning file(s) the library loaded ("builtin": the library's own
  defaults, no file); for rows of no one library (across libraries) every library's that loaded a file, as
  "library=file".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ardlab.analysis.study_claims import time_shared

MARK_COLUMNS = ["time_shared", "mpi_tuning_file"]


def marks(*frames: pd.DataFrame) -> pd.DataFrame:
    """Per group and library of the raw rows in `frames` (microbenchmark and training): time_shared and the tuning
    file(s) loaded (several joined by ';')."""
    parts = []
    for f in frames:
        if len(f) and "group" in f and "library" in f:
            files = f.get("mpi_tuning_file", pd.Series("", index=f.index)).fillna("").astype(str)
            parts.append(pd.DataFrame({"group": f.group, "library": f.library, "time_shared": time_shared(f),
                                       "mpi_tuning_file": files}))
    if not parts:
        return pd.DataFrame(columns=["group", "library", *MARK_COLUMNS])
    rows = pd.concat(parts, ignore_index=True)
    return rows.groupby(["group", "library"], as_index=False).agg(
        time_shared=("time_shared", "any"),
        mpi_tuning_file=("mpi_tuning_file", lambda x: ";".join(sorted(set(x) - {""}))))


def _across(m: pd.DataFrame) -> pd.Series:
    """Per group: every library's tuning file that is not its built-in defaults, as library=file."""
    loaded = m[~m.mpi_tuning_file.isin(["", "builtin"])]
    return pd.Series({group: ";".join(f"{lib}={f}" for lib, f in zip(g.library, g.mpi_tuning_file))
                      for group, g in loaded.groupby("group")}, dtype=object)


def mark(table: pd.DataFrame, m: pd.DataFrame) -> pd.DataFrame:
    """`table` with MARK_COLUMNS added from ``marks`` (unchanged if it has no ``group`` column or has them already)."""
    if table.empty or "group" not in table or "time_shared" in table or m.empty:
        return table
    shared = m.groupby("group").time_shared.any()
    out = table.assign(time_shared=table.group.map(shared))
    across = _across(m)
    if "library" in table:
        files = m.set_index(["group", "library"]).mpi_tuning_file
        own = [files.get((g, lib), np.nan) for g, lib in zip(table.group, table.library)]
        out["mpi_tuning_file"] = [f if isinstance(f, str) else across.get(g, "")
                                  for f, g in zip(own, table.group)]
    else:
        out["mpi_tuning_file"] = [across.get(g, "") for g in table.group]
    return out
