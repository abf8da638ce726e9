"""The driver: starts the ranks of a run plan under the library's launcher and writes its result atomically.

One plan, one way from driver to ranks: the plan (``ardlab.plan.RunPlan``, already validated by its builder)
is written as JSON beside the output, and every rank reads it (``python -m ardlab.rank --plan FILE``).

- Launchers: ``local`` runs the environment's own mpiexec (``ardlab.comm.launch``); ``srun`` runs
  ``srun --mpi=<pmi> -n R -N N`` around the image (``apptainer exec IMG ardlab rank``) or, without an image, the
  environment's Python (visible on every node, as a shared file system is on a cluster).
- Settings of every launch: the launcher's needs and the algorithm's forcing knobs from the table, the thread
  variables, a tuned file's selection (read when the launch starts: the file may be made by an earlier job),
  and the plan's own ``env``.
- A microbenchmark runs one launch per forced native algorithm (a library reads its knob at MPI_Init) and one for
  all of ours; their rows are merged into one CSV. A failed, killed or timed-out launch raises and writes nothing.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ardlab.comm import launch
from ardlab.comm.libraries import DEFAULT, OWN_ALGORITHMS, TUNED, library, run_env
from ardlab.plan import RunPlan
from ardlab.results import BENCH_COLUMNS, write_csv


def forced(plan: RunPlan, names: list[str] | None = None) -> str:
    """The native algorithm a launch forces: the plan's (or the group's) own, else the library's default."""
    name = (names or [plan.algorithm])[0]
    return DEFAULT if name in OWN_ALGORITHMS or name == TUNED else name


def launch_env(plan: RunPlan, algorithm: str) -> dict[str, str]:
    """Settings for every rank of one launch (beyond the caller's environment)."""
    env = dict(run_env(plan.library, algorithm))
    if plan.threads:
        env.update(launch.thread_env(plan.threads))
    if plan.tuned:
        env.update(library(plan.library).tuned_env(plan.tuned))
    env.update(plan.env)
    return env


def command(plan: RunPlan, plan_file: Path, algorithm: str) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of one launch of `plan` whose ranks read `plan_file`."""
    extra = launch_env(plan, algorithm)
    if plan.launcher == "local":
        return launch.command(plan.library, plan.ranks, ["-m", "ardlab.rank", "--plan", str(plan_file)],
                              algorithm=algorithm, extra_env=extra)
    lib = library(plan.library)
    if plan.image:
        inner = ["apptainer", "exec", plan.image, "ardlab", "rank", "--plan", str(plan_file)]
    else:
        inner = [str(launch.require_env(plan.library) / "bin" / "python"), "-m", "ardlab.rank", "--plan",
                 str(plan_file)]
    argv = ["srun", f"--mpi={plan.srun_mpi or lib.srun_mpi}", "-n", str(plan.ranks), "-N", str(plan.nodes), *inner]
    return argv, {**os.environ, **extra}


def _launch(plan: RunPlan, plan_file: Path, algorithm: str, capture: bool) -> subprocess.CompletedProcess:
    plan.save(plan_file)
    argv, env = command(plan, plan_file, algorithm)
    try:
        return subprocess.run(argv, env=env, timeout=plan.timeout_s, text=True, capture_output=capture)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{library(plan.library).display} {plan.kind} run exceeded its timeout of "
                           f"{plan.timeout_s:g} s and was killed; nothing was written") from None


def _workdir(plan: RunPlan):
    """A private folder for plan files and partial results: beside the output (on a cluster the nodes see it
    there), else in the temporary folder."""
    base = Path(plan.output).resolve().parent if plan.output else None
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".ardlab-run-", dir=base)


def groups(algorithms: list[str]) -> list[list[str]]:
    """Algorithm groups that can share one launch: each forced native algorithm alone, all ours together."""
    native = [[n] for n in algorithms if n not in OWN_ALGORITHMS]
    own = [n for n in algorithms if n in OWN_ALGORITHMS]
    return native + ([own] if own else [])


def run_bench(plan: RunPlan) -> list[dict]:
    """Measure a microbenchmark plan: one launch per group; the merged rows (also written to plan.output)."""
    from tqdm import tqdm

    launch.require_env(plan.library) if plan.launcher == "local" else None
    rows: list[dict] = []
    with _workdir(plan) as tmp:
        todo = groups(plan.options["algorithms"])
        bar = tqdm(todo, desc=f"{plan.library} x{plan.ranks}", unit="launch", disable=not plan.progress,
                   file=sys.stderr)
        for i, names in enumerate(bar):
            bar.set_postfix_str(",".join(names)[:40])
            part = Path(tmp) / f"part{i}.csv"
            sub = dataclasses.replace(plan, output=str(part), progress=False,
                                      options={**plan.options, "algorithms": names})
            proc = _launch(sub, Path(tmp) / f"plan{i}.json", forced(plan, names), capture=True)
            if proc.returncode != 0:
                raise RuntimeError(f"{library(plan.library).display} benchmark of {', '.join(names)} failed "
                                   f"(exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
            with open(part, newline="") as f:
                rows.extend(csv.DictReader(f))
    if plan.output:
        write_csv(plan.output, BENCH_COLUMNS, rows)
    return rows


def run_training(plan: RunPlan) -> int:
    """Run a training plan (train, train-tf) in one launch; rank 0 writes the summary row to plan.output."""
    if plan.launcher == "local":
        launch.require_env(plan.library)
    with _workdir(plan) as tmp:
        proc = _launch(plan, Path(tmp) / "plan.json", forced(plan), capture=False)
    return proc.returncode
