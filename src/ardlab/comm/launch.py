"""Where each library's environment lives, and the command lines that start N ranks of a Python program in it.

The launcher, its flags and the algorithm's settings come from the table in ``ardlab.comm.libraries``;
this module only assembles them, so the CLI, the tests and the workflow start processes the same way.
Standard library only (the set-up scripts read it before any environment exists).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping, Sequence

from ardlab.comm.libraries import DEFAULT, library, run_env, runtime_path_settings
from ardlab.comm.sites import (
    envs_root,
    repo_root as repo_root,  # re-exported; one definition, in the stdlib-only module
)

# The thread-count variables of the runtimes a rank may load (OpenMP, OpenBLAS, MKL): all set together, so no
# library falls back to one thread per core when a rank should have its share only.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def thread_env(threads: int) -> dict[str, str]:
    """Every thread-count variable set to `threads`."""
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return {k: str(threads) for k in THREAD_VARIABLES}


def env_prefix(library_name: str) -> Path:
    """Where the environment of `library_name` lives: $ARDLAB_ENVS/<name> or <repo>/.envs/<name>."""
    library(library_name)
    return envs_root() / library_name


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
    return dict.fromkeys(runtime_path_settings(), str(folder))


# What Slurm's pmi2 plugin says when it has read a PMI-1 request in two pieces: it reads one request with a single
# read() of at most 1024 bytes, and MPICH's `put` of a segment of its UCX addresses (hex, zero runs compressed: the
# length depends on the bytes) can be longer; the ranks then wait forever in MPI_Init (docs/cluster.md).
PMI_SPLIT = "mpi/pmi2: value not properly terminated in client request"
START_ATTEMPTS = 3  # a launch that fails in MPI_Init in a known way is started again, at most this often in all
_POLL_S = 2.0
STOP_GRACE_S = 15.0  # how long a stopped launch's launcher may take to end its ranks before everything is killed


# How long a launch whose ranks all finished their work (its finished mark made) may take to end: MPI_Finalize and
# the launcher's own exit take well under a second here; Debian's MPICH 4.0 (ch4:ucx, UCX 1.13 over TCP) was seen to
# hang there for good, one rank flushing its endpoints while the others wait in the PMI barrier no progress reaches.
FINALIZE_GRACE_S = 30.0


class PmiRequestSplit(RuntimeError):
    """Slurm's pmi2 plugin split a rank's PMI-1 request in every attempt of a launch."""


class FinalizeHang(RuntimeError):
    """Every rank finished its work, and the launch did not end within FINALIZE_GRACE_S after."""


def finished_mark(plan_file: Path) -> Path:
    """The file rank 0 makes beside a plan once every rank's work is done (``ardlab.rank.finished``)."""
    return plan_file.with_name(plan_file.name + ".finished")


def init_crash(proc: subprocess.CompletedProcess) -> str | None:
    """What a failed captured launch's output shows of a known start-up race of a library (the table's
    ``init_crash``: a rank crashed inside MPI_Init, before the program ran), as "<library>: <why>"; None if none."""
    from ardlab.comm.libraries import LIBRARIES

    if proc.returncode == 0:
        return None
    for lib in LIBRARIES.values():
        if lib.init_crash and any(re.search(lib.init_crash, text or "") for text in (proc.stdout, proc.stderr)):
            return f"{lib.display}: {lib.init_crash_why}"
    return None


def execute(argv: Sequence[str], env: Mapping[str, str], *, timeout: float | None = None,
            capture: bool = True, finished: Path | str | None = None) -> subprocess.CompletedProcess:
    """Run one launch (`argv` from ``command`` or a driver) with its own scratch folder; on a timeout (or an
    interrupt) the launcher and every process it started are killed and TimeoutExpired raised. The launch stays in
    the caller's process group, so whoever kills that group kills the ranks too. The scratch folder goes either
    way; one left by a caller that was killed outright is removed by the next launch.

    A captured launch that failed in MPI_Init in a known way, before the program ran (nothing measured), is started
    again, saying so on stderr, up to START_ATTEMPTS launches in all: one whose output shows Slurm's pmi2 plugin
    splitting a PMI-1 request (PMI_SPLIT; the ranks would wait forever) is stopped at once, the last one's
    PmiRequestSplit raised; one whose rank crashed in a library's known start-up race (``init_crash``) ends by
    itself, the last one returned as it failed.

    `finished`: the mark the ranks leave once all their work is done (``finished_mark``), or a line of a captured
    launch's output that says so; a launch still running FINALIZE_GRACE_S after it appeared is stopped and returned
    as it succeeded, saying so on stderr (its results were written before the mark)."""
    for attempt in range(1, START_ATTEMPTS):
        again = f"launching again, attempt {attempt + 1} of {START_ATTEMPTS}"
        try:
            proc = _execute_once(argv, env, attempt, timeout=timeout, capture=capture, finished=finished)
        except PmiRequestSplit:
            print(f"ardlab: Slurm's pmi2 plugin split a PMI-1 request of the ranks in MPI_Init ({PMI_SPLIT!r}; "
                  f"docs/cluster.md): {again}", file=sys.stderr, flush=True)
            continue
        crash = init_crash(proc) if capture else None
        if crash is None:
            return proc
        print(f"ardlab: a rank crashed in MPI_Init, before the program ran (exit {proc.returncode}; {crash}): "
              f"{again}", file=sys.stderr, flush=True)
    return _execute_once(argv, env, START_ATTEMPTS, timeout=timeout, capture=capture, finished=finished)


def _execute_once(argv: Sequence[str], env: Mapping[str, str], attempt: int, *, timeout: float | None,
                  capture: bool, finished: Path | str | None = None) -> subprocess.CompletedProcess:
    # a later attempt says so in the ranks' environment: the bytes MPICH sends are stray memory, and a launch started
    # again exactly alike has been seen to send the same
    env = {**env, "ARDLAB_LAUNCH_ATTEMPT": str(attempt)} if attempt > 1 else env
    _remove_stale_scratch()
    with tempfile.TemporaryDirectory(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=SCRATCH_BASE) as folder:
        pipe = subprocess.PIPE if capture else None
        with subprocess.Popen(list(argv), env={**env, **scratch_env(Path(folder))}, text=True, stdout=pipe,
                              stderr=pipe) as proc:
            try:
                out, err = _communicate(proc, timeout, watch=capture, finished=finished)
            except FinalizeHang as hang:
                _end(proc)
                out, err = proc.communicate()
                note = f"ardlab: {hang}; stopped, its results stand (written before the mark)"
                if capture:
                    err = (err or "") + note + "\n"
                else:
                    print(note, file=sys.stderr, flush=True)
                return subprocess.CompletedProcess(proc.args, 0, out, err)
            except BaseException:
                _end(proc)
                raise
        if capture and proc.returncode != 0 and PMI_SPLIT in (out or "") + (err or ""):
            raise PmiRequestSplit(f"{PMI_SPLIT} (a rank's PMI-1 request split by Slurm's pmi2 plugin; the launch "
                                  f"exited {proc.returncode}; ranks started by their library's own mpiexec, as ardlab "
                                  f"starts MPICH's environment when no srun_mpi is asked for, cannot hit this)")
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _end(proc: subprocess.Popen) -> None:
    """Stop a launch: its launcher first (which ends its ranks), everything it started once STOP_GRACE_S passed."""
    _stop(proc)
    try:
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    _kill_tree(proc.pid)
    proc.wait()


def _communicate(proc: subprocess.Popen, timeout: float | None, *, watch: bool,
                 finished: Path | str | None = None) -> tuple[str, str]:
    """proc.communicate(timeout), looking every _POLL_S seconds at the output for PMI_SPLIT when `watch`
    (communicate keeps what it read across its timeouts) and for the ranks' `finished` mark: FinalizeHang once the
    launch outlived it by FINALIZE_GRACE_S."""
    if not watch and finished is None:
        return proc.communicate(timeout=timeout)
    end = None if timeout is None else time.monotonic() + timeout
    done_at = None
    while True:
        step = _POLL_S if end is None else min(_POLL_S, max(end - time.monotonic(), 0.0))
        try:
            return proc.communicate(timeout=step)
        except subprocess.TimeoutExpired as partial:
            seen = b"".join(x for x in (partial.stdout, partial.stderr) if isinstance(x, bytes))
            if watch and PMI_SPLIT.encode() in seen:
                raise PmiRequestSplit(f"{PMI_SPLIT} (a rank's PMI-1 request split by Slurm's pmi2 plugin)") from None
            if done_at is None and (finished.encode() in seen if isinstance(finished, str) else
                                    finished is not None and finished.exists()):
                done_at = time.monotonic()
            if done_at is not None and time.monotonic() - done_at >= FINALIZE_GRACE_S:
                raise FinalizeHang(f"every rank finished its work, and the launch had not ended {FINALIZE_GRACE_S:g} s "
                                   "later (hung in MPI_Finalize)") from None
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(proc.args, timeout) from None


SCRATCH_PREFIX = "ardlab-launch-"


def _remove_stale_scratch() -> None:
    """Remove what launches killed outright left: scratch folders whose launching process is gone (named
    ardlab-launch-<pid>-...) and the libraries' shared-memory segments (the table's shm_segments) that no process
    has mapped."""
    for folder in SCRATCH_BASE.glob(SCRATCH_PREFIX + "*"):
        pid = folder.name[len(SCRATCH_PREFIX):].partition("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)
    from ardlab.comm.libraries import LIBRARIES

    segments = {str(p) for lib in LIBRARIES.values() if lib.shm_segments
                for p in Path("/dev/shm").glob(lib.shm_segments)}
    if segments:
        for p in segments - _mapped(segments):
            Path(p).unlink(missing_ok=True)


def _mapped(paths: set[str]) -> set[str]:
    """Those of `paths` that some process has mapped or open."""
    used = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            maps = (proc / "maps").read_text()
            fds = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:
            continue
        used |= {p for p in paths if p in maps or p in fds}
    return used


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to a launch being stopped: srun then ends its job step on the nodes (a SIGKILLed srun leaves the step's
    ranks running there, holding the allocation's CPUs, and the next launch waits for them forever). salloc ignores
    SIGTERM while its command runs, so there the command's processes get it (mpiexec ends its ranks, srun its step
    of proxies) and salloc, its command ended, gives the allocation back."""
    if Path(proc.args[0]).name != "salloc":
        proc.terminate()
        return
    for pid in _tree(proc.pid)[1:]:
        try:
            os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def _tree(pid: int) -> list[int]:
    """`pid` and every process descending from it, `pid` first."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    todo, tree = [pid], []
    while todo:
        p = todo.pop()
        tree.append(p)
        todo.extend(children.get(p, []))
    return tree


def _kill_tree(pid: int) -> None:
    """SIGKILL `pid` and every process descending from it (the launcher's daemons and the ranks)."""
    for p in _tree(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def is_path_list(name: str) -> bool:
    """Whether a setting of the table's ``program_env`` is a list of folders (LD_LIBRARY_PATH, FI_PROVIDER_PATH),
    whose value goes in front of the caller's instead of replacing it."""
    return name.endswith("PATH")


def program_env(library_name: str) -> dict[str, str]:
    """The table's settings (``Library.program_env``) for a program that loads the MPI library of `library_name`'s
    environment by itself, made from the environment's prefix; a path list goes in front of the caller's."""
    prefix = require_env(library_name)
    out = {}
    for name, value in library(library_name).program_env.items():
        value = value.format(prefix=prefix)
        if is_path_list(name) and os.environ.get(name):
            value = f"{value}{os.pathsep}{os.environ[name]}"
        out[name] = value
    return out


def srun_settings(library_name: str, ranks: int, nodes: int, *, time_shared: bool, image: bool) -> dict[str, str]:
    """What an srun launch adds for the shape it runs in (the caller's own values win): the table's
    ``time_shared_env`` where its ranks time-share cores, its ``container_peer_env`` where an image's ranks share a
    node, each in a container of its own."""
    lib = library(library_name)
    env = {**(lib.time_shared_env if time_shared else {}),
           **(lib.container_peer_env if image and ranks > nodes else {})}
    return {k: v for k, v in env.items() if k not in os.environ}


def srun_command(library_name: str, ranks: int, nodes: int, inner: Sequence[str], *, algorithm: str = DEFAULT,
                 extra_env: Mapping[str, str] | None = None, srun_mpi: str | None = None
                 ) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that run `inner` (a full command) as `ranks` ranks on `nodes` nodes with Slurm's srun and the
    table's PMI plugin for the library; the table's srun settings yield to the caller's (a site's own PMI library).
    A rank that fails ends the step at once (--kill-on-bad-exit): the others would otherwise wait for it, in
    MPI_Init or in a collective, until the launch's timeout (seen: 2 of 4 MPICH ranks gone, 2 spinning in
    MPI_Init_thread for 9 minutes)."""
    lib = library(library_name)
    if ranks < nodes:
        raise ValueError(f"{ranks} ranks cannot spread over {nodes} nodes")
    env = {**lib.srun_env, **os.environ, **run_env(library_name, algorithm), **(extra_env or {})}
    return ["srun", f"--mpi={srun_mpi or lib.srun_mpi}", "--kill-on-bad-exit=1", "-n", str(ranks), "-N", str(nodes),
            *inner], env


def hydra_command(library_name: str, ranks: int, nodes: int, inner: Sequence[str], *, algorithm: str = DEFAULT,
                  extra_env: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that run `inner` as `ranks` ranks on `nodes` nodes under Slurm, started by the environment's own
    mpiexec (MPICH's hydra: `-launcher slurm` starts one proxy per node through srun, and mpiexec serves PMI itself).
    Inside an allocation (SLURM_JOB_ID) on its first `nodes` nodes, found through Slurm; outside one (a command on a
    login node) salloc makes an allocation for this launch alone and runs mpiexec here inside it, which reads the
    nodes from salloc's environment (`-rmk slurm`); the allocation ends with the launch. Ranks fill the nodes in
    blocks, as srun's default distribution does. A rank that fails ends the launch (hydra's own clean-up)."""
    if ranks < nodes:
        raise ValueError(f"{ranks} ranks cannot spread over {nodes} nodes")
    prefix = require_env(library_name)
    env = {**os.environ, **run_env(library_name, algorithm), **(extra_env or {})}
    mpiexec = [str(prefix / "bin" / "mpiexec"), "-launcher", "slurm"]
    if "SLURM_JOB_ID" in os.environ:
        mpiexec += ["-hosts", ",".join(allocation_holding(nodes, env)[:nodes])]
    else:
        mpiexec = ["salloc", "--quiet", "-N", str(nodes), "-n", str(ranks), *mpiexec, "-rmk", "slurm"]
    return [*mpiexec, "-n", str(ranks), "-ppn", str(-(-ranks // nodes)), *inner], env


def allocation_holding(nodes: int, env: Mapping[str, str]) -> list[str]:
    """The nodes of the Slurm job `env` runs in (allocation_nodes); ValueError, naming them, where they are fewer
    than `nodes`."""
    hosts = allocation_nodes(env)
    if nodes > len(hosts):
        raise ValueError(f"--nodes {nodes}: the allocation (job {env['SLURM_JOB_ID']}) holds {len(hosts)}: "
                         f"{','.join(hosts)}")
    return hosts


def allocation_nodes(env: Mapping[str, str]) -> list[str]:
    """The node names of the Slurm job `env` runs in (SLURM_JOB_ID), in Slurm's order, asked of Slurm itself: a
    job's own commands may have lost SLURM_JOB_NODELIST (Snakemake's job step keeps only the job's id)."""
    job = env["SLURM_JOB_ID"]
    shown = subprocess.run(["squeue", "--noheader", "--jobs", job, "--format", "%N"], env=dict(env),
                           capture_output=True, text=True, timeout=60)
    nodelist = shown.stdout.strip()
    if shown.returncode != 0 or not nodelist:
        raise RuntimeError(f"Slurm did not say which nodes job {job} holds: {(shown.stdout + shown.stderr).strip()}")
    names = subprocess.run(["scontrol", "show", "hostnames", nodelist], env=dict(env), capture_output=True,
                           text=True, timeout=60, check=True)
    return names.stdout.split()


def check_fits(ranks: int, nodes: int, env: Mapping[str, str] | None = None) -> None:
    """ValueError, naming the values, where `ranks` ranks on `nodes` nodes cannot start under Slurm: inside an
    allocation (SLURM_JOB_ID), more nodes than it holds or more ranks than its tasks (SLURM_NTASKS); outside one, more
    nodes than the cluster has (sinfo) or more ranks a node than its nodes have CPUs (Slurm places a task a CPU)."""
    env = dict(os.environ if env is None else env)
    if ranks < nodes:
        raise ValueError(f"--ranks {ranks} cannot spread over --nodes {nodes}")
    if "SLURM_JOB_ID" in env:
        allocation_holding(nodes, env)
        tasks = env.get("SLURM_NTASKS")
        if tasks and ranks > int(tasks):
            raise ValueError(f"--ranks {ranks}: the allocation (job {env['SLURM_JOB_ID']}) has {tasks} tasks")
        return
    shown = subprocess.run(["sinfo", "--noheader", "--Node", "--format", "%N %c"], env=env, capture_output=True,
                           text=True, timeout=60)
    if shown.returncode != 0:
        raise RuntimeError(f"sinfo failed, so whether {ranks} ranks on {nodes} nodes fit is unknown: "
                           f"{(shown.stdout + shown.stderr).strip()}")
    cpus = {}
    for line in shown.stdout.splitlines():
        if line.split():
            name, count = line.split()[:2]
            cpus[name] = int(count.rstrip("+"))
    if nodes > len(cpus):
        raise ValueError(f"--nodes {nodes}: the Slurm cluster has {len(cpus)} nodes ({','.join(sorted(cpus))})")
    per_node = -(-ranks // nodes)
    most = sorted(cpus.values(), reverse=True)[nodes - 1]  # the nodes-th largest: what `nodes` nodes hold at least
    if per_node > most:
        raise ValueError(f"--ranks {ranks} over --nodes {nodes} is {per_node} a node, but {nodes} of the cluster's "
                         f"nodes hold at most {most} CPUs each (Slurm places a task a CPU)")


def allocation_command(library_name: str, ranks: int, nodes: int, inner: Sequence[str], *, algorithm: str = DEFAULT,
                       extra_env: Mapping[str, str] | None = None, srun_mpi: str | None = None
                       ) -> tuple[list[str], dict[str, str]]:
    """(argv, env) that run `inner` (the environment's python and its arguments) as `ranks` ranks on `nodes` nodes
    under Slurm, started the way the library's table says (`Library.slurm_start`). Hydra runs inside the allocation
    this runs in (a batch job's, as the workflow's jobs are); outside one (a command on a login node) salloc makes
    one for the launch. An explicit `srun_mpi` (a site's PMI plugin) has srun start the ranks."""
    start = library(library_name).slurm_start
    if srun_mpi or start == "srun":
        return srun_command(library_name, ranks, nodes, inner, algorithm=algorithm, extra_env=extra_env,
                            srun_mpi=srun_mpi)
    if start != "hydra":
        raise ValueError(f"{library_name}: unknown slurm_start {start!r} in the library table (srun or hydra)")
    return hydra_command(library_name, ranks, nodes, inner, algorithm=algorithm, extra_env=extra_env)


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
