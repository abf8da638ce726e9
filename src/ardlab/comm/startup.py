"""MPI start-up in a rank: the tuning file the library says it loaded while starting, and the thread level.

Intel MPI chooses its default Allreduce algorithms, and the inner steps of some forced ones, from a tuning file
that it picks per CPU and fabric at MPI_Init (``tuning_<cpu>_<fabric>.dat`` in its environment; ``generic`` where
it knows the CPU by no name). So "Intel MPI's default" differs between machines, and every row records the file:
``mpi_tuning_file`` is the file's name when it is one of the library's own, its full path when the run named
another (the table's ``tuning_file_var``), ``none`` when the library loaded none, ``builtin`` for a library whose
selection is compiled in (MPICH, Open MPI), and ``unknown`` when MPI was started before ardlab could listen.

The library says which file only among its start-up lines on rank 0's standard output, at a debug level
(``Library.tuning_report_env``); Intel MPI's ``I_MPI_DEBUG_OUTPUT`` does not redirect those lines. ``init`` starts
MPI with that level and the process's standard output (file descriptor 1) going to a temporary file, then
passes everything on: the start-up lines only where the caller had asked for them itself.
"""

from __future__ import annotations

import os
import platform
import re
import sys
import tempfile
from pathlib import Path

from ardlab.comm.libraries import LIBRARIES, Library

BUILTIN = "builtin"
NONE = "none"
UNKNOWN = "unknown"
# Lines the libraries print at start-up when their report settings are on (Intel MPI: "[0] MPI startup(): ...").
_STARTUP_LINE = re.compile(r"^\[\d+\] MPI startup\(\):")

# The thread levels by name, lowest first; mpi4py starts MPI at the level its variable names (default: multiple).
THREAD_LEVELS = ("single", "funneled", "serialized", "multiple")
THREAD_LEVEL_VAR = "MPI4PY_RC_THREAD_LEVEL"

_tuning_file: str | None = None


def init() -> str:
    """Start MPI in this process (import mpi4py.MPI) and return the tuning file its library loaded (see the
    module's docstring for the values); collective over COMM_WORLD. Later calls return the first one's answer.
    RuntimeError where the run named a file (the table's tuning_file_var) that the library did not load."""
    global _tuning_file
    if _tuning_file is not None:
        return _tuning_file
    if "mpi4py.MPI" in sys.modules:
        _tuning_file = UNKNOWN
        return _tuning_file
    # The library is known only once MPI runs: every library's report settings go in (each its own namespace). A
    # level the caller set below the report's is raised for the start-up and put back after (its lines then show).
    wanted = {k: v for lib in LIBRARIES.values() for k, v in lib.tuning_report_env.items()}
    added = {k: v for k, v in wanted.items() if not os.environ.get(k)}  # unset or empty: the caller asked nothing
    lowered = {k: os.environ[k] for k, v in wanted.items()
               if os.environ.get(k, "").isdigit() and v.isdigit() and int(os.environ[k]) < int(v)}
    before = {k: os.environ.get(k) for k in added}
    os.environ.update(added)
    os.environ.update({k: wanted[k] for k in lowered})
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 1)
        try:
            from mpi4py import MPI
        finally:
            os.dup2(saved, 1)
            os.close(saved)
            for k, v in before.items():
                if v is None:
                    del os.environ[k]
                else:
                    os.environ[k] = v
            os.environ.update(lowered)
            captured.seek(0)
            text = captured.read().decode(errors="replace")
            shown = [ln for ln in text.splitlines(keepends=True) if not (added and _STARTUP_LINE.match(ln))]
            sys.stdout.write("".join(shown))
            sys.stdout.flush()
    from ardlab.comm.libraries import detect

    lib, _ = detect(MPI.Get_library_version())
    # rank 0 alone prints the start-up lines; every rank learns its answer (and fails together below)
    _tuning_file = MPI.COMM_WORLD.bcast(reported_file(lib, text), root=0)
    asked = os.environ.get(lib.tuning_file_var) if lib.tuning_file_var else None
    if asked and _tuning_file != str(Path(asked)) and _tuning_file != Path(asked).name:
        raise RuntimeError(f"{lib.display} did not load the tuning file {lib.tuning_file_var}={asked} (it loaded "
                           f"{_tuning_file} instead): name a readable file of the library's tuning format")
    return _tuning_file


def thread_level() -> str:
    """The thread level MPI provides in this process (MPI_Query_thread), by name; MPI must have started (init)."""
    from mpi4py import MPI

    levels = (MPI.THREAD_SINGLE, MPI.THREAD_FUNNELED, MPI.THREAD_SERIALIZED, MPI.THREAD_MULTIPLE)
    return dict(zip(levels, THREAD_LEVELS))[MPI.Query_thread()]


def reported_file(lib: Library, startup_output: str) -> str:
    """The tuning file `lib` says it loaded in `startup_output` (its name when it lies in the library's own
    folder of them, else its path), NONE if it says none, BUILTIN for a library without tuning files."""
    if not lib.tuning_report:
        return BUILTIN
    found = re.findall(lib.tuning_report, startup_output)
    if not found:
        return NONE
    path = Path(found[-1])
    return path.name if path.parent.as_posix().endswith(lib.tuning_file_dir) else str(path)


def cpu() -> dict[str, str]:
    """This machine's CPU as the libraries tell CPUs apart: model name, vendor, family and model numbers."""
    fields = {"model name": "model", "vendor_id": "vendor", "cpu family": "family", "model": "model_number"}
    out: dict[str, str] = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        name = fields.get(key.strip())
        if name and name not in out:
            out[name] = value.strip()
    out.setdefault("model", platform.processor() or "unknown")
    return out


def tuning_file_here(library_name: str, timeout: float = 120) -> str:
    """The tuning file `library_name` loads for one rank on this machine (a launch of its environment's Python)."""
    from ardlab.comm import launch
    from ardlab.comm.libraries import library

    if not library(library_name).tuning_report:
        return BUILTIN
    argv, env = launch.command(library_name, 1, ["-c", "from ardlab.comm import startup; print(startup.init())"])
    proc = launch.execute(argv, env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{library_name}: could not start one rank to read its tuning file: {proc.stderr[-500:]}")
    return proc.stdout.strip().splitlines()[-1]
