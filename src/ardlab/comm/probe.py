"""Prove, by the library's own behaviour, which Allreduce algorithm actually runs.

Setting a variable proves nothing; these probes watch the library:

- symbols (Open MPI, Intel MPI): every rank runs under gdb with a breakpoint on each internal algorithm
  function named in the table (``Algorithm.symbol``); each hit prints a line, and we count them.
- fallback reports (MPICH, whose PyPI build is stripped): the table's ``fallback_report_env`` (MPICH:
  ``MPIR_CVAR_COLLECTIVE_FALLBACK=print``) makes the library print a line (``fallback_report``: "<coll> <algorithm>
  cannot be applied") for every call where the forced algorithm does not apply; a non-commutative op makes
  commutative-only algorithms (ring, ...) print, which shows the knob arrived.

    ardlab probe --library LIBRARY --algorithm ALGORITHM [--ranks N] [--noncommutative]
"""

from __future__ import annotations

import argparse
import re
import shutil
import socket
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ardlab.comm import launch
from ardlab.comm.libraries import library

HIT = "ARDLAB-HIT"
MARK = "ARDLAB-PROBE-START"
PHASE = "ARDLAB-PROBE-PHASE"
SWITCHING = "switching"


def symbols(library_name: str) -> list[str]:
    """The internal algorithm functions the table names for this library."""
    return sorted({a.symbol for a in library(library_name).algorithms.values() if a.symbol})


def _fallback_report(library_name: str) -> re.Pattern:
    """The pattern of the library's fallback reports (where no algorithm function can be broken on)."""
    lib = library(library_name)
    if not lib.fallback_report and not symbols(library_name):
        raise ValueError(f"{lib.display} cannot be probed: its table names neither algorithm functions (symbol) nor "
                         "a fallback report (fallback_report)")
    return re.compile(lib.fallback_report or r"(?!)")


# The variables that carry a rank's place in its job, as each launcher sets them (Hydra's PMI, Open MPI's, PMIx,
# Slurm's srun), in that order: the first set names the rank a breakpoint's hit came from.
RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID")


def gdb_script(syms: list[str]) -> str:
    """gdb's commands for a probed rank: a breakpoint on each of `syms` that prints a hit line, ``HIT symbol rank
    host`` (the rank from the launcher's variables, "?" where none is set; the host as the rank sees it), and
    passes the program's exit status on. Each hit is one write (the launcher merges the ranks' output in whatever
    pieces it reads)."""
    lines = ["set breakpoint pending on", "set pagination off", "set confirm off", "python",
             "import os, socket",
             f"_ardlab_where = ' '.join((next((os.environ[v] for v in {RANK_VARIABLES!r} if v in os.environ), '?'), "
             "socket.gethostname()))",
             "end"]
    for s in syms:
        hit = f'python gdb.write("{HIT} {s} " + _ardlab_where + "\\n"); gdb.flush()'
        lines += [f"break {s}", "commands", "silent", hit, "continue", "end"]
    # gdb's own exit status is 0 whatever the program did: pass the program's on (1 if a signal ended it)
    return "\n".join(lines + ["run", "if $_isvoid($_exitcode)", "quit 1", "end", "quit $_exitcode", ""])


def _worker(count: int, calls: int, noncommutative: bool, switch: list[str] | None = None) -> None:
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    op = MPI.SUM
    if noncommutative:
        op = MPI.Op.Create(lambda a, b, dt: None, commute=False)  # a no-op, declared non-commutative
    x = np.ones(count, np.float32)
    y = np.empty_like(x)
    if switch:
        _phases(comm, switch, lambda c: [c.Allreduce(x, y, op=op) for _ in range(calls)])
        return
    mark(comm, f"{MARK} {comm.Get_rank()} {socket.gethostname()}")  # where each rank runs (Evidence.hosts)
    for _ in range(calls):
        comm.Allreduce(x, y, op=op)


def mark(comm, text: str) -> None:
    """Print `text` on both streams once every rank got here, and let every rank's line reach the launcher before
    any rank goes on. MPICH prints its fallback messages on stderr, gdb its hits on stdout: one rank's lines stay in
    order on each."""
    comm.Barrier()
    for stream in (sys.stdout, sys.stderr):  # one write each: print writes the text and its newline apart, and
        stream.write(text + "\n")           # another rank's line could land between them (found on CI under srun)
        stream.flush()
    comm.Barrier()
    time.sleep(0.2)
    comm.Barrier()


def _phases(comm, algorithms: list[str], calls) -> None:
    """One phase per algorithm, switched inside this launch (ardlab.comm.switch): the phase's mark, then `calls`
    on the communicator the switch returns."""
    from mpi4py import MPI

    from ardlab.comm.libraries import detect
    from ardlab.comm.switch import Switch

    with Switch(detect(MPI.Get_library_version())[0].name, comm) as sw:
        for i, name in enumerate(algorithms):
            mark(comm, f"{PHASE} {i} {name} {SWITCHING}")  # what the switch itself calls (a Dup) counts nowhere
            use = sw.to(name)
            mark(comm, f"{PHASE} {i} {name}")
            calls(use)


def _command(library_name: str, ranks: int, nodes: int, launcher: str, argv: list[str], algorithm: str,
             extra: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    if launcher == "srun":
        return launch.allocation_command(library_name, ranks, nodes, [str(launch.python_of(library_name)), *argv],
                                         algorithm=algorithm, extra_env=extra)
    if nodes != 1:
        raise ValueError(f"nodes={nodes} needs the srun launcher (mpiexec here runs on one node)")
    return launch.command(library_name, ranks, argv, algorithm=algorithm, extra_env=extra)


@dataclass
class Evidence:
    """What a probe saw, rank by rank: each rank's hits (symbol, or "fallback:<algorithm>" for a library's fallback
    reports, whose lines name no rank: those are kept under rank -1) and the host each rank ran on."""

    hits: dict[int, Counter] = field(default_factory=dict)
    hosts: dict[int, str] = field(default_factory=dict)

    def totals(self) -> Counter:
        """The hits of every rank together."""
        out: Counter = Counter()
        for c in self.hits.values():
            out.update(c)
        return out

    def leaders(self) -> set[int]:
        """The node leaders: the lowest rank on each host."""
        first: dict[str, int] = {}
        for rank, host in sorted(self.hosts.items()):
            first.setdefault(host, rank)
        return set(first.values())

    def ranks_hitting(self, symbol: str, calls: int) -> set[int]:
        """The ranks that hit `symbol` at least `calls` times."""
        return {r for r, c in self.hits.items() if c.get(symbol, 0) >= calls}


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

    Returns a Counter of what was reported after every rank's start mark: internal symbol -> hits (symbol
    probes, all ranks) or, for MPICH, "fallback:<algorithm>" -> messages. With `program` (a Python argv, e.g. a
    Horovod training run) that program runs on the ranks instead of the probe worker and every call counts.
    With launcher "srun" the ranks are spread over `nodes` nodes of a Slurm cluster (the emulated one too).
    ``probe_ranks`` keeps the same hits rank by rank.
    """
    return probe_ranks(library_name, algorithm, ranks=ranks, count=count, calls=calls, noncommutative=noncommutative,
                       timeout=timeout, program=program, extra_env=extra_env, nodes=nodes, launcher=launcher).totals()


def probe_ranks(library_name: str, algorithm: str, *, ranks: int = 4, count: int = 4096, calls: int = 3,
                noncommutative: bool = False, timeout: float = 300, program: list[str] | None = None,
                extra_env: dict[str, str] | None = None, nodes: int = 1, launcher: str = "local") -> Evidence:
    """``probe``'s run, its hits kept per rank with the host of each rank (from the worker's start marks; with
    `program`, only the ranks that hit something are known)."""
    argv = ["-m", "ardlab.comm.probe", "--worker", "--count", str(count), "--calls", str(calls)]
    if noncommutative:
        argv.append("--noncommutative")
    if program is not None:
        argv = list(program)
    stdout, stderr = _launch(library_name, algorithm, ranks, nodes, launcher, argv, extra_env or {}, timeout)
    return parse(library_name, stdout, stderr, ranks, marked=program is None)


def parse(library_name: str, stdout: str, stderr: str, ranks: int, marked: bool = True) -> Evidence:
    """The Evidence in a probe's output (a recorded one too: the tests replay them). `marked`: the ranks ran the
    probe worker, whose start marks say where each rank runs; hits count only once every rank passed its mark."""
    evidence = Evidence()
    by_symbols = bool(symbols(library_name))
    report = _fallback_report(library_name)
    marks = 0 if marked else ranks
    for m in re.finditer(rf"{MARK} (\d+) (\S+)$", stdout, re.MULTILINE):  # the marks (stdout, whatever the hits')
        evidence.hosts[int(m.group(1))] = m.group(2)
    for line in (stdout if by_symbols else stderr).splitlines():
        marks += line.count(MARK)
        if marks < ranks:
            continue
        if by_symbols and line.startswith(HIT):
            fields = line.split()
            if len(fields) != 4 or not fields[2].isdigit():
                raise RuntimeError(f"a probe hit names no rank ({line!r}): the launcher set none of "
                                   f"{', '.join(RANK_VARIABLES)}")
            rank = int(fields[2])
            evidence.hits.setdefault(rank, Counter())[fields[1]] += 1
            evidence.hosts.setdefault(rank, fields[3])
        elif not by_symbols and (m := report.search(line)):
            evidence.hits.setdefault(-1, Counter())[f"fallback:{m.group(1)}"] += 1
    return evidence


def _unmerged(text: str) -> str:
    """`text` with each phase mark on a line of its own: a launcher that forwards several ranks' streams may put one
    rank's line right after another's text with no newline between them."""
    return re.sub(rf"(?<=[^\n])(?={PHASE} )", "\n", text)


def probe_switched(library_name: str, algorithms: list[str], *, ranks: int = 2, count: int = 4096, calls: int = 3,
                   noncommutative: bool = False, timeout: float = 300, extra_env: dict[str, str] | None = None,
                   nodes: int = 1, launcher: str = "local", program: list[str] | None = None) -> list[Counter]:
    """One launch at the default that switches through `algorithms` (ardlab.comm.switch), `calls` Allreduces in
    each phase; what the library reported in each phase, as ``probe`` counts it. With `program` (a Python argv: a
    rank's run plan that switches through `algorithms`, ``python -m ardlab.rank --plan FILE``) that program runs
    instead of the probe worker, and marks its phases the same way (ARDLAB_PROBE_PHASES)."""
    lib = library(library_name)
    if lib.switching is None:
        raise ValueError(f"{lib.display} cannot switch inside a launch: {lib.switching_note}")
    argv = ["-m", "ardlab.comm.probe", "--worker", "--count", str(count), "--calls", str(calls),
            "--switch", ",".join(algorithms)] + (["--noncommutative"] if noncommutative else [])
    if program is not None:
        argv = list(program)
    env = {**lib.switching.launch_env, "ARDLAB_PROBE_PHASES": "1", **(extra_env or {})}
    stdout, stderr = _launch(library_name, "default", ranks, nodes, launcher, argv, env, timeout)
    return parse_switched(library_name, algorithms, ranks, stdout, stderr)


def parse_switched(library_name: str, algorithms: list[str], ranks: int, stdout: str, stderr: str) -> list[Counter]:
    """What a switched launch's output says the library ran in each phase (``probe_switched``'s counting: a phase
    starts once all `ranks` marked it; a recorded output too)."""
    lib = library(library_name)
    phases = [Counter() for _ in algorithms]
    seen: Counter = Counter()
    current, reached = -1, -1
    by_symbols = bool(symbols(library_name))
    report = _fallback_report(library_name)
    for line in _unmerged(stdout if by_symbols else stderr).splitlines():
        if line.startswith(PHASE):
            fields = line.split()
            i, switching = int(fields[1]), fields[-1] == SWITCHING
            seen[i, switching] += 1
            if seen[i, switching] == ranks:
                current = -1 if switching else i
                reached = max(reached, current)
        elif current >= 0 and by_symbols and line.startswith(HIT):
            phases[current][line.split()[1]] += 1
        elif current >= 0 and not by_symbols and (m := report.search(line)):
            phases[current][f"fallback:{m.group(1)}"] += 1
    if reached != len(algorithms) - 1:
        raise RuntimeError(f"{lib.display} switched probe: the ranks reached phase {reached + 1} of {len(algorithms)}"
                           f":\n{(stdout + stderr)[-3000:]}")
    return phases


def _launch(library_name: str, algorithm: str, ranks: int, nodes: int, launcher: str, argv: list[str],
            extra: dict[str, str], timeout: float) -> tuple[str, str]:
    """Run `argv` on the ranks with `algorithm` forced, under gdb with a breakpoint on each of the library's
    algorithm functions (or, MPICH, with its fallback messages on); (stdout, stderr)."""
    lib = library(library_name)
    syms = symbols(library_name)
    extra = dict(extra)
    with tempfile.TemporaryDirectory(prefix="ardlab-probe-") as tmp:
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
            _fallback_report(library_name)  # a library with neither cannot be probed: said here
            extra.update(lib.fallback_report_env)
            cmd, env = _command(library_name, ranks, nodes, launcher, argv, algorithm, extra)
        proc = launch.execute(cmd, env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{lib.display} probe of {algorithm!r} failed (exit {proc.returncode}):\n"
                           f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout, proc.stderr


def main(argv: list[str] | None = None) -> int:
    """Entry of the probed ranks (`--worker`); users run `ardlab probe`."""
    p = argparse.ArgumentParser(prog="python -m ardlab.comm.probe", description="probe worker (see ardlab probe)")
    p.add_argument("--worker", action="store_true", required=True)
    p.add_argument("--count", type=int, default=4096)
    p.add_argument("--calls", type=int, default=3)
    p.add_argument("--noncommutative", action="store_true")
    p.add_argument("--switch", help="algorithms to switch through inside the launch, comma-separated")
    a = p.parse_args(argv)
    _worker(a.count, a.calls, a.noncommutative, a.switch.split(",") if a.switch else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
