"""Shared test fixtures: the library environments (real, made by tests/run) and MPI launch helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ardlab.comm import LIBRARIES, launch

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = Path(__file__).resolve().parent / "programs"


# What MPI runs may leave on the machine (Open MPI's session folders and shared-memory segments, MPICH's segments,
# ardlab's per-launch scratch folders): the test session fails if it leaves any that were not there before it.
LEFTOVER_PATTERNS = ("/dev/shm/sm_segment.*", *(f"/dev/shm/{lib.shm_segments}" for lib in LIBRARIES.values()
                                                 if lib.shm_segments),
                     "/tmp/ompi.*", "/tmp/prte.*", f"{launch.SCRATCH_BASE}/{launch.SCRATCH_PREFIX}*")


_BEFORE = pytest.StashKey[set]()


def leftovers() -> set[str]:
    return {str(p) for pattern in LEFTOVER_PATTERNS for p in Path("/").glob(pattern.lstrip("/"))}


def pytest_sessionstart(session):
    session.config.stash[_BEFORE] = leftovers()


def pytest_sessionfinish(session, exitstatus):
    left = sorted(leftovers() - session.config.stash.get(_BEFORE, set()))
    if left:
        print(f"\nthe tests left {len(left)} files behind: {', '.join(left[:10])}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# The suite's own weight (issue 55.5): the pytest process's resident memory before and after each test, so that the
# tests that leave it larger are named at the end, with the process's peak (children apart).
_GROWTH: dict[str, int] = {}
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _resident_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    before = _resident_bytes()
    try:
        return (yield)
    finally:
        _GROWTH[item.nodeid] = _resident_bytes() - before


def pytest_terminal_summary(terminalreporter):
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    terminalreporter.write_sep("=", "memory of the pytest process")
    terminalreporter.write_line(f"peak resident {peak:.2f} GiB (largest child process {children:.2f} GiB); "
                                f"now {_resident_bytes() / 2**30:.2f} GiB")
    for nodeid, grew in sorted(_GROWTH.items(), key=lambda kv: -kv[1])[:10]:
        if grew >= 50 * 2**20:
            terminalreporter.write_line(f"  +{grew / 2**20:7.0f} MiB  {nodeid}")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or os.environ.get("ARDLAB_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow (CI does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=list(LIBRARIES))
def library(request) -> str:
    """Each MPI library in turn; its environment must exist (tests/run creates it)."""
    launch.require_env(request.param)
    return request.param


def mpirun(library: str, ranks: int, argv, *, algorithm: str = "default", timeout: float = 300, extra_env=None):
    """Run a Python program on `ranks` ranks of `library`; fail the test with its output if it fails."""
    proc = launch.run(library, ranks, [str(a) for a in argv], algorithm=algorithm, timeout=timeout,
                      extra_env=extra_env)
    if proc.returncode != 0:
        pytest.fail(f"{library} x{ranks} {argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n"
                    f"{proc.stderr[-3000:]}")
    return proc


def ardlab(*args, timeout: float = 600, check: bool = True, cwd=None, env=None) -> subprocess.CompletedProcess:
    """Run the `ardlab` CLI of the test environment as a user would (`env`: its whole environment, if given)."""
    proc = subprocess.run([sys.executable, "-m", "ardlab.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=env)
    if check and proc.returncode != 0:
        pytest.fail(f"ardlab {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc
