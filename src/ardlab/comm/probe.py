"""Prove, by the library's own behaviour, which Allreduce algorithm actually runs.

Setting a variable proves nothing; these probes watch the library:

- symbols (Open MPI, Intel MPI): every rank runs under gdb with a breakpoint on each internal algorithm
  function named in the table (``Algorithm.symbol``); each hit prints a line, and we count them.
- fallback (MPICH, whose PyPI build is stripped): with ``MPIR_CVAR_COLLECTIVE_FALLBACK=print`` MPICH prints
  "<coll> <algorithm> cannot be applied" for every call where the forced algorithm does not apply; a
  non-commutative op makes commutative-only algorithms (ring, ...) print, which shows the knob arrived.

    ardlab probe --library LIBRARY --algorithm ALGORITHM [--ranks N] [--noncommutative]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ardlab.comm import launch
from ardlab.comm.libraries import library

HIT = "ARDLAB-HIT"
MARK = "ARDLAB-PROBE-START"
_FALLBACK_RE = re.compile(r"Allreduce (\w+) cannot be applied")


def symbols(library_name: str) -> list[str]:
    """The internal algorithm functions the table names for this library."""
    return sorted({a.symbol for a in library(library_name).algorithms.values() if a.symbol})


def gdb_script(syms: list[str]) -> str:
    lines = ["set breakpoint pending on", "set pagination off", "set confirm off"]
    for s in syms:
        lines += [f"break {s}", "commands", "silent", f'printf "{HIT} {s}\\n"', "continue", "end"]
    return "\n".join(lines + ["run", "quit", ""])


def _worker(count: int, calls: int, noncommutative: bool) -> None:
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    op = MPI.SUM
    if noncommutative:
        op = MPI.Op.Create(lambda a, b, dt: None, commute=False)  # a no-op, declared non-commutative
    x = np.ones(count, np.float32)
    y = np.empty_like(x)
    comm.Barrier()
    # The mark goes to stderr, where MPICH prints its fallback messages, so one rank's lines stay in order;
    # the barriers and the pause let every rank's mark reach the launcher before any timed call starts.
    print(MARK, file=sys.stderr, flush=True)
    comm.Barrier()
    time.sleep(0.2)
    comm.Barrier()
    for _ in range(calls):
        comm.Allreduce(x, y, op=op)


def _command(library_name: str, ranks: int, nodes: int, launcher: str, argv: list[str], algorithm: str,
             extra: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    if launcher == "srun":
        return launch.srun_command(library_name, ranks, nodes, [str(launch.python_of(library_name)), *argv],
                                   algorithm=algorithm, extra_env=extra)
    if nodes != 1:
        raise ValueError(f"nodes={nodes} needs the srun launcher (mpiexec here runs on one node)")
    return launch.command(library_name, ranks, argv, algorithm=algorithm, extra_env=extra)


def probe(
    library_name: str,
    algorithm: str,
    *,
    ranks: int = 4,
    count: int = 4096,
    calls: int = 3,
    noncommutative: bool = False,
    timeout: float = 300,
    program: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
    nodes: int = 1,
    launcher: str = "local",
) -> Counter:
    """Run `calls` Allreduces of `count` floats with `algorithm` forced; count what the library reports.

    Returns a Counter: internal symbol -> hits (symbol probes, all ranks) or, for MPICH,
    "fallback:<algorithm>" -> messages printed after the start mark. With `program` (a Python argv, e.g. a
    Horovod training run) that program runs on the ranks instead of the probe worker and every call counts.
    With launcher "srun" the ranks are spread over `nodes` nodes of a Slurm cluster (the emulated one too).
    """
    lib = library(library_name)
    argv = ["-m", "ardlab.comm.probe", "--worker", "--count", str(count), "--calls", str(calls)]
    if noncommutative:
        argv.append("--noncommutative")
    if program is not None:
        argv = list(program)
    syms = symbols(library_name)
    with tempfile.TemporaryDirectory(prefix="ardlab-probe-") as tmp:
        extra = dict(extra_env or {})
        if syms:
            gdb = shutil.which("gdb")
            if gdb is None:
                raise FileNotFoundError("gdb is needed to probe Open MPI and Intel MPI (apt-get install gdb)")
            script = Path(tmp) / "probe.gdb"
            script.write_text(gdb_script(syms))
            cmd, env = _command(library_name, ranks, nodes, launcher, argv, algorithm, extra)
            # Insert gdb between the launcher and the Python interpreter.
            py = cmd.index(str(launch.python_of(library_name)))
            cmd = [*cmd[:py], gdb, "-q", "-batch", "-nx", "-x", str(script), "--args", *cmd[py:]]
        else:
            extra["MPIR_CVAR_COLLECTIVE_FALLBACK"] = "print"
            cmd, env = _command(library_name, ranks, nodes, launcher, argv, algorithm, extra)
        proc = launch.execute(cmd, env, timeout=timeout)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise RuntimeError(f"{lib.display} probe of {algorithm!r} failed (exit {proc.returncode}):\n{out[-3000:]}")
    hits: Counter = Counter()
    if syms:
        for line in out.splitlines():
            if line.startswith(HIT):
                hits[line.split()[1]] += 1
    else:
        marks = 0 if program is None else ranks  # the worker: count only once every rank passed its mark
        for line in proc.stderr.splitlines():
            marks += line.count(MARK)
            m = _FALLBACK_RE.search(line)
            if marks >= ranks and m:
                hits[f"fallback:{m.group(1)}"] += 1
    return hits


def main(argv: list[str] | None = None) -> int:
    """Entry of the probed ranks (`--worker`); users run `ardlab probe`."""
    p = argparse.ArgumentParser(prog="python -m ardlab.comm.probe", description="probe worker (see ardlab probe)")
    p.add_argument("--worker", action="store_true", required=True)
    p.add_argument("--count", type=int, default=4096)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--noncommutative", action="store_true")
    a = p.parse_args(argv)
    _worker(a.count, a.calls, a.noncommutative)
    return 0


if __name__ == "__main__":
    sys.exit(main())
