"""Where each library's environment lives, and the command lines that start N ranks of a Python program in it.

The launcher, its flags and the algorithm's settings come from the table in ``ardlab.comm.libraries``;
this module only assembles them, so the CLI, the tests and the workflow start processes the same way.
Standard library only (the set-up scripts read it before any environment exists).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

from ardlab.comm.libraries import DEFAULT, library, run_env
from ardlab.results import RUNTIME_PATH_SETTINGS

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


# Where a launch's runtime files go: a private folder per launch, removed when it ends however it ends, so that a
# killed or crashed run leaves no session folders (Open MPI's /tmp/ompi.*, PRRTE's and PMIx's) or shared-memory
# backing files (/dev/shm/sm_segment.*) behind. It is on /dev/shm, a tmpfs, where shared-memory files belong.
SCRATCH_BASE = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())


def scratch_env(folder: Path) -> dict[str, str]:
    """Settings that put the runtimes' files of one launch under `folder` (TMPDIR, Open MPI's shared-memory backing
    folder, PRRTE's and PMIx's session folders)."""
    return dict.fromkeys(RUNTIME_PATH_SETTINGS, str(folder))


def execute(argv: Sequence[str], env: Mapping[str, str], *, timeout: float | None = None,
            capture: bool = True) -> subprocess.CompletedProcess:
    """Run one launch (`argv` from ``command`` or a driver) in its own process group with its own scratch folder;
    on a timeout the whole group is killed and TimeoutExpired raised. The scratch folder goes either way."""
    with tempfile.TemporaryDirectory(prefix="ardlab-launch-", dir=SCRATCH_BASE) as folder:
        pipe = subprocess.PIPE if capture else None
        with subprocess.Popen(list(argv), env={**env, **scratch_env(Path(folder))}, text=True, stdout=pipe,
                              stderr=pipe, start_new_session=True) as proc:
            try:
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise
            except BaseException:
                _kill_group(proc)
                raise
            finally:
                _kill_group(proc, only_left=True)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen, *, only_left: bool = False) -> None:
    """Kill the launch's process group (the launcher and every rank it started); `only_left`: ranks that outlived
    their launcher."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return
    if not only_left:
        proc.wait()


def srun_command(library_name: str, ranks: int, nodes: int, inner: Sequence[str], *, algorithm: str = DEFAULT,
                 extra_env: Mapping[str, str] | None = None, srun_mpi: str | None = None
                 ) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that run `inner` (a full command) as `ranks` ranks on `nodes` nodes with Slurm's srun and the
    table's PMI plugin for the library; the table's srun settings yield to the caller's (a site's own PMI library)."""
    lib = library(library_name)
    if ranks < nodes:
        raise ValueError(f"{ranks} ranks cannot spread over {nodes} nodes")
    env = {**lib.srun_env, **os.environ, **run_env(library_name, algorithm), **(extra_env or {})}
    return ["srun", f"--mpi={srun_mpi or lib.srun_mpi}", "-n", str(ranks), "-N", str(nodes), *inner], env


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
    return execute(cmd, env, timeout=timeout, capture=capture)
