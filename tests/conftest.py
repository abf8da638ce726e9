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


def ardlab(*args, timeout: float = 600, check: bool = True, cwd=None) -> subprocess.CompletedProcess:
    """Run the `ardlab` CLI of the test environment as a user would."""
    proc = subprocess.run([sys.executable, "-m", "ardlab.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd)
    if check and proc.returncode != 0:
        pytest.fail(f"ardlab {' '.join(map(str, args))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc
