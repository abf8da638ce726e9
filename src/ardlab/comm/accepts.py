"""What a site library's build accepts of its family's Allreduce algorithms, probed once when its environment is set up.

A site library shares its family's table entry (ardlab.comm.sites), but its build need not know every algorithm the
family's knob can name: Debian's MPICH 4.0.2 stops at MPI_Init on ``MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM=ring`` ("Invalid
... value (ring)"), which the 5.0 wheel runs. So `containers/install-env` launches each of the family's algorithms once
in the new environment (``probe``: a few ranks, one summing Allreduce, its result checked) and writes what the build
accepted and refused, with the library's own words, into the environment (``sites.ACCEPTS_FILE``); the table leaves
the refused ones out and names why when one is asked for. An algorithm that needs several nodes is not probed on one
(it stays offered, marked unprobed). Accepted means started and summed right, not that it ran what it names: that is
for the proofs (``ardlab probe``).

    python -m ardlab.comm accepts LIBRARY     (containers/install-env, for a site library)
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from ardlab.comm import sites
from ardlab.comm.libraries import BUILT_IN, DEFAULT, library

RANKS = 2
TIMEOUT_S = 60.0
# One summing Allreduce on every rank, its result checked (a build that takes the knob and sums wrong is refused too).
SNIPPET = """
import sys
from mpi4py import MPI
import numpy as np
comm = MPI.COMM_WORLD
x = np.full(64, comm.Get_rank() + 1.0)
y = np.empty_like(x)
comm.Allreduce(x, y, op=MPI.SUM)
n = comm.Get_size()
if not np.all(y == n * (n + 1) / 2):
    sys.exit(f"ardlab-accepts: wrong sum on rank {comm.Get_rank()}: {y[0]!r}, expected {n * (n + 1) / 2!r}")
"""


def why_refused(proc: subprocess.CompletedProcess) -> str:
    """The library's own words for a failed launch: the first line that says invalid or error, else the last line."""
    lines = [line.strip() for line in (proc.stderr + "\n" + proc.stdout).splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"[A-Za-z_.]*(Error|Exception): ", line)]  # Python's own message
    said = raised or [line for line in lines if any(w in line.lower() for w in ("invalid", "error", "ardlab-accepts"))]
    text = (said or lines or [f"exit {proc.returncode}, no output"])[0]
    return text if len(text) <= 200 else text[:197] + "..."


def probe(library_name: str, *, ranks: int = RANKS, timeout: float = TIMEOUT_S) -> dict:
    """Launch each of the family's native algorithms (the default needs none) on `ranks` ranks of the environment of
    site library `library_name`: ``{"library", "family", "accepted": [...], "refused": {name: why}, "unprobed":
    {name: why}}``."""
    from ardlab.comm import launch

    lib = library(library_name)
    if lib.site is None:
        raise ValueError(f"{library_name} is built in: its algorithms are the table's (only a site library's build "
                         "is probed)")
    accepted, refused, unprobed = [], {}, {}
    for name, alg in BUILT_IN[lib.family].algorithms.items():
        if name == DEFAULT:
            continue
        if alg.multi_node_only:
            unprobed[name] = "needs several nodes; not probed on one"
            continue
        try:
            proc = launch.run(library_name, ranks, ["-c", SNIPPET], algorithm=name, timeout=timeout)
        except subprocess.TimeoutExpired:
            refused[name] = f"a {ranks}-rank Allreduce did not finish in {timeout:g} s"
            continue
        if proc.returncode == 0:
            accepted.append(name)
        else:
            refused[name] = why_refused(proc)
    record = {"library": library_name, "family": lib.family, "accepted": accepted, "refused": refused,
              "unprobed": unprobed}
    if lib.switching is not None and accepted:
        record["switching_refused"] = switching_refused(library_name, accepted[0], ranks=ranks, timeout=timeout)
    return record


# Its family's switch inside one launch (ardlab.comm.switch): to an accepted algorithm and back, an Allreduce each.
SWITCH_SNIPPET = SNIPPET.replace("comm.Allreduce(x, y, op=MPI.SUM)", """from ardlab.comm.switch import Switch
sw = Switch(sys.argv[1])
for name in (sys.argv[2], "default"):
    sw.to(name).Allreduce(x, y, op=MPI.SUM)
sw.close()""")


def switching_refused(library_name: str, algorithm: str, *, ranks: int = RANKS, timeout: float = TIMEOUT_S) -> str:
    """Whether the build switches its algorithm inside a launch as its family does (its MPI_T control variables can
    be written after MPI_Init): "" if a launch switched to `algorithm` and back, summing right under each, else the
    library's words. Debian's Open MPI 4.1.4 does not (MPI_T_cvar_write of coll_han_priority: MPI_T error 64)."""
    from ardlab.comm import launch

    lib = library(library_name)
    try:
        proc = launch.run(library_name, ranks, ["-c", SWITCH_SNIPPET, library_name, algorithm],
                          extra_env=dict(lib.switching.launch_env), timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"a {ranks}-rank launch switching to {algorithm} did not finish in {timeout:g} s"
    return "" if proc.returncode == 0 else why_refused(proc)


def write(record: dict, prefix: Path) -> Path:
    """The record into the environment at `prefix` (where ``sites.accepts`` reads it)."""
    path = Path(prefix) / sites.ACCEPTS_FILE
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


def main(library_name: str) -> int:
    """Probe `library_name`'s environment and write what it accepts there; print a line a refusal each."""
    from ardlab.comm.launch import require_env

    prefix = require_env(library_name)
    if (prefix / sites.ACCEPTS_FILE).exists():  # the table of this process leaves out what it refused
        raise ValueError(f"{prefix / sites.ACCEPTS_FILE} exists: remove it to probe {library_name} again "
                         "(containers/install-env does)")
    record = probe(library_name)
    path = write(record, prefix)
    print(f"ardlab: {library(library_name).display} accepts {len(record['accepted'])} of its family's algorithms "
          f"({', '.join(record['accepted']) or 'none'}); written to {path}")
    for name, why in record["refused"].items():
        print(f"ardlab: {library_name} refuses {name}: {why}")
    if record.get("switching_refused"):
        print(f"ardlab: {library_name} cannot switch its algorithm inside a launch: {record['switching_refused']}")
    return 0
