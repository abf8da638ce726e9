"""Build the command lines that start N ranks of a Python program under one library's launcher.

The launcher, its flags and the algorithm's settings come from the table in ``ardlab.comm.libraries``;
this module only assembles them, so the CLI, the tests and the workflow start processes the same way.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from ardlab.comm.libraries import DEFAULT, env_prefix, library, run_env


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
