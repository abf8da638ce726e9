"""Where each library's environment lives, and the command lines that start N ranks of a Python program in it.

The launcher, its flags and the algorithm's settings come from the table in ``ardlab.comm.libraries``;
this module only assembles them, so the CLI, the tests and the workflow start processes the same way.
Standard library only (the set-up scripts read it before any environment exists).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from ardlab.comm.libraries import DEFAULT, library, run_env

# The thread-count variables of the runtimes a rank may load (OpenMP, OpenBLAS, MKL): all set together, so no
# library falls back to one thread per core when a rank should have its share only.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(threads: int) -> dict[str, str]:
    """Every thread-count variable set to `threads`."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return {k: str(threads) for k in THREAD_VARIABLES}


def repo_root() -> Path:
    """The source checkout holding this package (src layout)."""
    return Path(__file__).resolve().parents[3]


def env_prefix(library_name: str) -> Path:
    """Where the environment of `library_name` lives: $ARDLAB_ENVS/<name> or <repo>/.envs/<name>."""
    library(library_name)
    base = os.environ.get("ARDLAB_ENVS")
    return Path(base) / library_name if base else repo_root() / ".envs" / library_name


def python_of(library_name: str) -> Path:
    """The Python interpreter of the environment of `library_name`."""
    return env_prefix(library_name) / "bin" / "python"


def require_env(library_name: str) -> Path:
    """The prefix of an installed environment; FileNotFoundError with the set-up command otherwise."""
    prefix = env_prefix(library_name)
    if not (prefix / "bin" / "mpiexec").exists() or not (prefix / "bin" / "python").exists():
        raise FileNotFoundError(
            f"no {library(library_name).display} environment at {prefix}; "
            f"create it with: containers/install-env {library_name} {prefix}"
        )
    return prefix


def command(
    library_name: str,
    ranks: int,
    argv: Sequence[str],
    *,
    algorithm: str = DEFAULT,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that run `argv` (a Python script and its arguments) on `ranks` ranks.

    The environment is the caller's plus the launcher's needs plus the algorithm's forcing settings.
    """
    prefix = require_env(library_name)
    lib = library(library_name)
    env = dict(os.environ)
    env.update(run_env(library_name, algorithm))
    env["PATH"] = f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    if extra_env:
        env.update(extra_env)
    return [*lib.launcher(prefix, ranks), str(prefix / "bin" / "python"), *argv], env


def run(
    library_name: str,
    ranks: int,
    argv: Sequence[str],
    *,
    algorithm: str = DEFAULT,
    extra_env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    capture: bool = True,
) -> subprocess.CompletedProcess:
    """Run `argv` on `ranks` ranks; return the completed process (check its returncode)."""
    cmd, env = command(library_name, ranks, argv, algorithm=algorithm, extra_env=extra_env)
    return subprocess.run(cmd, env=env, timeout=timeout, text=True, capture_output=capture)
