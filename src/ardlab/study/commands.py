"""The shell command of each workflow job, for each launcher.

- local: ardlab's driver starts the library's mpiexec from its environment (``.envs/<library>``); it forces
  the algorithm from the table and kills a hung run after the timeout.
- srun: ``srun --mpi=<pmi> -n R -N N apptainer exec <image> ardlab ... --in-mpi`` with the algorithm's settings
  exported (Apptainer passes the environment through), bounded by ``timeout``.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ardlab.comm.libraries import DEFAULT, OWN_ALGORITHMS, TUNED, library, run_env
from ardlab.study.config import TUNED_FILE, Job, tuned_ranks


def tuned_file(config: dict, lib: str) -> str:
    return str(Path(config["results"]) / TUNED_FILE.format(library=lib, ranks=tuned_ranks(config),
                                                           suffix=library(lib).tuning_suffix))


def _args(job: Job, config: dict) -> tuple[str, list[str], float]:
    """(subcommand, its training/benchmark options, timeout) of a job, without launcher options."""
    if job.kind == "microbench":
        mb = config["microbench"]
        args = ["--sizes", mb["sizes"], "--dtype", mb["dtype"], "--skip-inapplicable", "--no-progress"]
        if mb["iterations"]:
            args += ["--iterations", str(mb["iterations"])]
        return "bench allreduce", args, mb["timeout_s"]
    if job.kind == "train":
        tr = config["train"]
        return "train", ["--model", job.model, "--dataset", "synthetic", "--batch-per-rank", str(tr["batch_per_rank"]),
                         "--steps", str(tr["steps"]), "--parallel-mode", job.mode, "--bucket-mb", str(tr["bucket_mb"]),
                         "--no-progress"], tr["timeout_s"]
    hv = config["horovod"]
    args = ["--model", job.model, "--batch-per-rank", str(hv["batch_per_rank"]),
            "--fusion-threshold-mb", job.mode[1:], "--warmup-batches", str(hv["warmup_batches"]),
            "--batches-per-iter", str(hv["batches_per_iter"]), "--iterations", str(hv["iterations"]),
            "--no-progress"]
    if hv["image_size"]:
        args += ["--image-size", str(hv["image_size"])]
    return "train-tf", args, hv["timeout_s"]


def threads(job: Job, config: dict) -> int:
    return 1 if job.kind == "microbench" else config[job.kind]["threads"]


def command(job: Job, config: dict, output: str) -> str:
    sub, args, timeout = _args(job, config)
    tuned = job.algorithm == TUNED
    if config["launcher"] == "local":
        argv = [sys.executable, "-m", "ardlab.cli", *sub.split(), "--library", job.library, "--ranks", str(job.ranks),
                "--timeout", f"{timeout:g}"]
        if job.kind != "microbench":
            argv += ["--threads", str(threads(job, config))]
        argv += ["--tuned", tuned_file(config, job.library)] if tuned else ["--algorithm", job.algorithm]
        return " ".join([*_envs_prefix(config), *map(shlex.quote, argv + args + ["--output", output])])
    lib = library(job.library)
    own = job.algorithm in OWN_ALGORITHMS
    env = dict(run_env(job.library, DEFAULT if tuned or own else job.algorithm))
    env.update({k: str(threads(job, config)) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")})
    srun = ["srun", f"--mpi={config['srun_mpi'].get(job.library, lib.srun_mpi)}", "-n", str(job.ranks),
            "-N", str(job.nodes), "apptainer", "exec", config["images"][job.library]]
    inner = ["ardlab", *sub.split(), "--in-mpi"]
    if own or job.kind == "microbench":  # a native training algorithm is forced by the environment alone
        inner += ["--algorithm", job.algorithm]
    line = " ".join(["env", *(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())), "timeout", "-k", "30",
                     f"{timeout:g}", *map(shlex.quote, srun + inner + args + ["--output", output])])
    if tuned:  # the file exists only once the tune job ran: read it when this job starts
        read = [sys.executable, "-m", "ardlab.comm", "tuned-env", job.library, tuned_file(config, job.library)]
        line = f'eval "$({" ".join(map(shlex.quote, read))})" && {line}'
    return line


def tune_inputs(config: dict, jobs: dict, lib: str) -> list[str]:
    """The microbenchmark CSVs a library's tuned file is made from (one node, the tuned rank count)."""
    ranks = tuned_ranks(config)
    return [str(Path(config["results"]) / j.path) for j in jobs["microbench"]
            if j.library == lib and j.ranks == ranks and j.nodes == 1 and j.algorithm != TUNED]


def tune_command(config: dict, lib: str, inputs: list[str], output: str) -> str:
    """`ardlab tune` (MPICH's file extends the built-in tree of the libmpi the runs use: its image's on srun)."""
    argv = ["ardlab", "tune", "--library", lib, "--ranks", str(tuned_ranks(config)), "--output", output, *inputs]
    if config["launcher"] == "srun":
        return " ".join(map(shlex.quote, ["apptainer", "exec", config["images"][lib], *argv]))
    return " ".join([*_envs_prefix(config), *map(shlex.quote, [sys.executable, "-m", "ardlab.cli", *argv[1:]])])


def _envs_prefix(config: dict) -> list[str]:
    """`ARDLAB_ENVS=...` when the config names where the library environments live (launcher local)."""
    return [f"ARDLAB_ENVS={shlex.quote(config['envs'])}"] if config.get("envs") else []


def runtime_minutes(config: dict, kind: str) -> int:
    """Slurm time limit of a measurement job: its own timeout plus start-up."""
    return int(config[kind]["timeout_s"] // 60) + 10


def mpi_resource(config: dict) -> str:
    """The `mpi` resource of measurement jobs; it also keeps Slurm's job-step plugin from wrapping the job in
    `srun -n1` (the job launches its ranks itself)."""
    return "srun" if config["launcher"] == "srun" else "mpiexec"


def resources(job: Job, config: dict) -> dict:
    """The Slurm resources of a job that depend on it: nodes, tasks, cpus_per_task, mem_mb (the rest, one
    value per rule: runtime_minutes, mpi_resource, and `measure`, which the local profile counts)."""
    res = {"mem_mb": 2000 + 1500 * job.ranks}
    if config["launcher"] == "srun":
        res.update(nodes=job.nodes, tasks=job.ranks, cpus_per_task=threads(job, config))
    else:  # ardlab's driver starts the ranks with the library's mpiexec on the job's node: one slot per rank,
        # at most the node's cores (more ranks than cores are oversubscribed, as on the local profile)
        per = min(threads(job, config), config["cpus_per_node"])
        res.update(nodes=1, tasks=max(2, min(job.ranks, config["cpus_per_node"] // per)), cpus_per_task=per)
    return res
