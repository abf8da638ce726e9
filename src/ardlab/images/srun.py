"""Ranks inside a proven root, started by the host's srun across (emulated) nodes: the hybrid launch of a site that
runs ``srun --mpi=<plugin> apptainer exec IMAGE ...``, with ``prove.exec_argv`` standing in for ``apptainer exec``.

Two runs per library: the ranks print ``MPI.Get_processor_name()`` (two distinct nodes), then
``ardlab bench allreduce --in-mpi --validate`` measures and checks the Allreduce. The table's ``srun_env`` applies
(Intel MPI's ``I_MPI_PMI_LIBRARY``: a path that must exist inside the image, which its %post installs).
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ardlab.comm import launch
from ardlab.images.prove import exec_argv

HOSTS = ("from mpi4py import MPI; c = MPI.COMM_WORLD; names = c.gather(MPI.Get_processor_name()); "
         "print('HOSTS', *sorted(names)) if c.rank == 0 else None")


def node_names(output: str, library: str, nodes: int) -> list[str]:
    """The node names HOSTS printed, checked to be `nodes` distinct ones (RuntimeError with the output otherwise)."""
    (line,) = [ln for ln in output.splitlines() if ln.startswith("HOSTS")] or [""]
    names = line.split()[1:]
    if len(set(names)) != nodes:
        raise RuntimeError(f"{library}: expected ranks on {nodes} distinct nodes, got {names}:\n{output[-2000:]}")
    return names


@dataclass(frozen=True)
class RanksInRoot:
    library: str
    hosts: list[str]
    rows: pd.DataFrame


def ranks_in_root(library: str, root: Path, env: dict[str, str], nodes: int = 2, ranks: int = 2,
                  sizes: str = "4,64K,1M", timeout_s: float = 600) -> RanksInRoot:
    """Run the two checks under srun inside `root`; `env` holds the Slurm client settings (SLURM_CONF)."""
    root = Path(root).resolve()
    if not (root / "opt" / "ardlab").is_dir():
        raise FileNotFoundError(f"{root} is not a proven root of ardlab (no /opt/ardlab); run "
                                f"`python -m ardlab.images prove {library}` first")
    with tempfile.TemporaryDirectory(prefix=f"ardlab-srun-{library}-", dir=root.parent) as work:
        names = node_names(_srun(library, root, nodes, ranks, ["python", "-c", HOSTS], env, work, timeout_s),
                           library, nodes)
        out = Path(work) / "allreduce.csv"
        _srun(library, root, nodes, ranks, ["ardlab", "bench", "allreduce", "--in-mpi", "--sizes", sizes,
                                            "--validate", "--no-progress", "--output", str(out)], env, work, timeout_s)
        rows = pd.read_csv(out)
    return RanksInRoot(library, names, rows)


def _srun(library: str, root: Path, nodes: int, ranks: int, command: list[str], env: dict[str, str], cwd: str,
          timeout_s: float) -> str:
    argv, run_env = launch.srun_command(library, ranks, nodes, exec_argv(root, command, cwd=cwd))
    proc = subprocess.run(argv, env={**run_env, **env}, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{library}: `{' '.join(command)}` under srun inside {root} failed "
                           f"(exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout
