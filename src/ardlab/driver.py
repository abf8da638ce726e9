"""The driver: starts the ranks of a run plan under the library's launcher and writes its result atomically.

One plan, one way from driver to ranks: the plan (``ardlab.plan.RunPlan``, already validated by its builder)
is written as JSON beside the output, and every rank reads it (``python -m ardlab.rank --plan FILE``).

- Launchers: ``local`` runs the environment's own mpiexec (``ardlab.comm.launch``); ``srun`` runs
  ``srun --mpi=<pmi> -n R -N N`` around the image (``apptainer exec IMG ardlab rank``) or, without an image, the
  environment's Python (visible on every node, as a shared file system is on a cluster).
- Settings of every launch: the launcher's needs and the algorithm's forcing knobs from the table, the thread
  variables, a tuned file's selection (read when the launch starts: the file may be made by an earlier job),
  and the plan's own ``env``.
- A comparison (``ardlab.plan.Comparison``) runs its variants in paired, interleaved rounds: every round launches
  each variant once (a library reads its algorithm knob at MPI_Init, and launch-to-launch variation is part of
  what must be sampled) in the seeded shuffled order of ``ardlab.rounds``; every row records its group, round,
  position and seed, and all rows go to one CSV. With ``switch_in_launch`` a library's training variants of a
  round share one launch where it can switch the algorithm inside it (``launches``; rows say ``launch_variants``).
- A failed, killed or timed-out launch raises and writes nothing.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ardlab import rounds
from ardlab.comm import launch
from ardlab.comm.libraries import DEFAULT, OWN_ALGORITHMS, TUNED, library, run_env
from ardlab.images.clean import exec_argv
from ardlab.plan import Comparison, RunPlan
from ardlab.programs import program
from ardlab.results import picked, selected_algorithms, utc_now, write_csv


def forced(plan: RunPlan) -> str:
    """The native algorithm a launch forces: the plan's own, else the library's default (ours, tuned)."""
    return DEFAULT if plan.algorithm in OWN_ALGORITHMS or plan.algorithm == TUNED else plan.algorithm


def cores_here() -> int:
    """The cores this process may run on (its affinity mask: a container's or Slurm's share, not the machine's)."""
    return len(os.sched_getaffinity(0))


def local_threads(plan: RunPlan) -> int:
    """Threads per rank of a local launch (oneDNN's OpenMP, BLAS, TensorFlow's pools alike): the plan's, never more
    than a rank's share of this machine's cores (ValueError naming the counts), else that share. One thread per
    rank is always allowed: that is how more ranks than cores are oversubscribed."""
    share = max(1, cores_here() // plan.ranks)
    if plan.threads is None:
        return share
    if plan.threads > share:
        raise ValueError(f"{plan.threads} threads per rank x {plan.ranks} ranks is more than the {cores_here()} cores "
                         f"here (a rank's share: {share}); ask for --threads {share} or fewer ranks")
    return plan.threads


def launch_env(plan: RunPlan, algorithm: str) -> dict[str, str]:
    """Settings for every rank of one launch (beyond the caller's environment)."""
    env = dict(run_env(plan.library, algorithm))
    if plan.threads:
        env.update(launch.thread_env(plan.threads))
    if plan.tuned:
        env.update(library(plan.library).tuned_env(plan.tuned))
    if plan.switch:  # what a launch that switches its algorithm inside needs from the start (ardlab.comm.switch)
        env.update(library(plan.library).switching.launch_env)
    env.update(program(plan.program).env)
    env.update(plan.env)
    return env


def command(plan: RunPlan, plan_file: Path | None, module: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """(argv, env) of one launch of `plan` whose ranks read `plan_file` (ardlab.rank); or, given `module`, whose
    ranks run ``python -m MODULE ...`` instead (the transport probe), launched alike."""
    algorithm = forced(plan)
    extra = launch_env(plan, algorithm)
    args = ["-m", *module] if module else ["-m", "ardlab.rank", "--plan", str(plan_file)]
    if plan.launcher == "local":
        return launch.command(plan.library, plan.ranks, args, algorithm=algorithm, extra_env=extra)
    extra.update(launch.srun_settings(plan.library, plan.ranks, plan.nodes, time_shared=time_shared(plan),
                                      image=bool(plan.image)))
    if plan.image:  # images run under srun (the image's MPI talks to srun's PMI plugin), each rank in a clean
        # environment: the launch's own settings and what ranks need (ardlab.images.clean)
        inner = exec_argv(plan.image, ["python", *args] if module else ["ardlab", "rank", "--plan", str(plan_file)],
                          keep=[*extra, *library(plan.library).srun_env])
        return launch.srun_command(plan.library, plan.ranks, plan.nodes, inner, algorithm=algorithm,
                                   extra_env=extra, srun_mpi=plan.srun_mpi)
    inner = [str(launch.require_env(plan.library) / "bin" / "python"), *args]
    return launch.allocation_command(plan.library, plan.ranks, plan.nodes, inner, algorithm=algorithm,
                                     extra_env=extra, srun_mpi=plan.srun_mpi)


def time_shared(plan: RunPlan) -> bool:
    """Whether an srun launch's ranks time-share this machine's cores: on the emulated cluster (every node is this
    machine) with more ranks x threads than it has cores. On a real cluster each node has its own cores."""
    from ardlab.cluster.links import link_rate

    return plan.launcher == "srun" and plan.ranks * (plan.threads or 1) > (os.cpu_count() or 1) \
        and link_rate() != ""


_transports: dict[str, dict[str, str]] = {}


def transport(plan: RunPlan) -> dict[str, str]:
    """What carries the bytes of `plan`'s launches (``ardlab.comm.transport``): read once per library, launcher,
    ranks, nodes, image and settings (the probe's whole command line and environment) in this process by a probe
    launch of them with the library's reports on and its default algorithm (an algorithm's settings choose a
    collective algorithm, not a transport)."""
    from ardlab.comm.transport import MARK, parse

    lib = library(plan.library)
    probe = dataclasses.replace(plan, algorithm=DEFAULT, tuned=None, switch=[],
                                switch_positions=[], options={}, output=None, transport={},
                                env={**plan.env, **lib.transport_report_env})
    argv, env = command(probe, None, module=["ardlab.comm.transport"])
    key = json.dumps([argv, sorted(env.items())])  # any setting that differs (a cluster's, a library's) probes again
    if key not in _transports:
        try:
            # rank 0 says who it is once every rank is done: a launch that then hangs in MPI_Finalize is stopped
            proc = launch.execute(argv, env, timeout=plan.timeout_s or 300, capture=True, finished=MARK)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{plan.label}: the transport probe exceeded {plan.timeout_s or 300:g} s") from None
        if proc.returncode != 0:
            raise RuntimeError(f"{lib.display}'s transport probe for {plan.label} failed "
                               f"(exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
        _transports[key] = dataclasses.asdict(parse(lib.family, proc.stdout + "\n" + proc.stderr))
    return dict(_transports[key])


def _launch(plan: RunPlan, plan_file: Path, capture: bool) -> subprocess.CompletedProcess:
    if plan.launcher == "local":
        launch.require_env(plan.library)
        plan = dataclasses.replace(plan, threads=local_threads(plan))
    if not plan.transport:
        plan = dataclasses.replace(plan, transport=transport(plan))
    plan.save(plan_file)
    argv, env = command(plan, plan_file)
    try:
        proc = launch.execute(argv, env, timeout=plan.timeout_s, capture=capture,
                              finished=launch.finished_mark(plan_file))
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{plan.label}: {plan.program} run exceeded its timeout of {plan.timeout_s:g} s and was "
                           "killed; nothing was written") from None
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr)[-3000:] if capture else "(its output is above)"
        raise RuntimeError(f"{library(plan.library).display} {plan.program} run of {plan.label} failed "
                           f"(exit {proc.returncode}):\n{out}")
    return proc


def _workdir(output: str | None):
    """A private folder for plan files and partial results: beside the output (on a cluster the nodes see it
    there), else in the temporary folder."""
    base = Path(output).resolve().parent if output else None
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(prefix=".ardlab-run-", dir=base)


def _read(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def variants(c: Comparison) -> list[RunPlan]:
    """The comparison's variants, with the algorithms its tuned files select and its picks added (each once per
    library)."""
    out = list(c.variants)
    seen = {v.label for v in out}
    if c.picks:
        for lib, names in c.picks.items():
            base = [v for v in c.variants if v.library == lib and v.algorithm == DEFAULT and not v.tuned]
            if not base:
                raise ValueError(f"comparison {c.group!r}: picks for {lib} need its default variant to copy")
            for name in names:
                v = base[0].variant(picked(c.picked_from, lib, name))
                if v.label not in seen:
                    seen.add(v.label)
                    out.append(v)
    for selection in c.selected_from:
        lib_default = [v for v in c.variants if v.tuned and Path(v.tuned) == Path(selection)]
        if not lib_default:
            raise ValueError(f"comparison {c.group!r}: no variant uses the tuned file {selection}")
        base = lib_default[0]
        for name in selected_algorithms(selection):
            v = base.variant(name, tuned=None)
            if v.label not in seen:
                seen.add(v.label)
                out.append(v)
    return out


def shares_launch(plan: RunPlan) -> bool:
    """Whether a variant can be measured in a launch with others of its library (``Comparison.switch_in_launch``): a
    training run of a native algorithm, with no tuned file, of a library that switches inside a launch."""
    return program(plan.program).trains and not plan.tuned and plan.algorithm not in OWN_ALGORITHMS \
        and library(plan.library).switching is not None


def launches(plans: list[RunPlan], indices: list[int], share: bool) -> list[tuple[RunPlan, list[int]]]:
    """The launches of one round, in order, from its shuffled variant order `indices`: (plan, its positions). With
    `share`, the variants of a library that can share a launch (`shares_launch`, otherwise alike) become one launch
    at the place of the first of them, measuring them in the round's order."""
    groups: dict[str, list[int]] = {}
    order: list[tuple[str | None, list[int]]] = []
    for pos, i in enumerate(indices):
        p = plans[i]
        if not (share and shares_launch(p)):
            order.append((None, [pos]))
            continue
        key = dataclasses.replace(p, algorithm=DEFAULT).to_json()
        if key not in groups:
            groups[key] = []
            order.append((key, groups[key]))
        groups[key].append(pos)
    out = []
    for key, positions in order:
        first = plans[indices[positions[0]]]
        if key is None or len(positions) == 1:
            out.append((dataclasses.replace(first, position=positions[0]), positions))
            continue
        out.append((dataclasses.replace(first, algorithm=DEFAULT, position=positions[0],
                                        switch=[plans[indices[q]].algorithm for q in positions],
                                        switch_positions=positions), positions))
    return out


def run_comparison(c: Comparison) -> list[dict]:
    """Measure every variant of `c` once per round, in each round's shuffled order; the rows of all (also written
    to c.output, atomically, once every launch succeeded)."""
    from tqdm import tqdm

    plans = variants(c)
    order = rounds.schedule(list(range(len(plans))), rounds=c.rounds, seed=c.seed, group=c.group,
                            first=c.first_round)
    rows: list[dict] = []
    bar = tqdm(total=len(plans) * c.rounds, desc=c.group or "rounds", unit="launch", disable=not c.progress,
               file=sys.stderr)
    if not c.progress:  # a workflow job's log, which a retry appends to: when and where each attempt started
        print(f"{c.group}: attempt started {utc_now()} on {socket.gethostname()}", flush=True)
    with _workdir(c.output) as tmp:
        for r, indices in enumerate(order, start=c.first_round):
            for plan, positions in launches(plans, indices, c.switch_in_launch):
                pos = positions[0]
                part = Path(tmp) / f"r{r}-{pos}.csv"
                v = dataclasses.replace(plan, output=str(part), progress=False, group=c.group, round=r,
                                        order_seed=c.seed)
                bar.set_postfix_str(f"round {r}: {v.label}"[:40])
                started = time.monotonic()
                _launch(v, Path(tmp) / f"r{r}-{pos}.json", capture=True)
                got = _read(part)
                if not c.progress:  # a workflow job's log: what each launch measured, and its wall time
                    print(f"{c.group} round {r} position {pos}: {v.label}: {len(got)} rows in "
                          f"{time.monotonic() - started:.1f} s", flush=True)
                if program(c.program).trains and len(got) != len(positions):  # a training row per variant
                    raise RuntimeError(f"{v.label}: the launch wrote {len(got)} rows for {len(positions)} variants")
                rows.extend(got)
                bar.update(len(positions))
    bar.close()
    if c.output:
        write_csv(c.output, program(c.program).columns(), rows)
    return rows


def run_training(plan: RunPlan, capture: bool = False) -> int:
    """Run one training plan (train, train-tf) in one launch; rank 0 writes the summary row to plan.output. With
    `capture` the launch's output is kept (and shown only if it fails) instead of going to the terminal."""
    with _workdir(plan.output) as tmp:
        _launch(plan, Path(tmp) / "plan.json", capture=capture)
    return 0
