"""The shell command and resources of each workflow job.

Every measurement job runs ardlab's driver on the job's run plan (``ardlab run --plan-json``), built by the same
validated builders as the CLI's; the driver starts the ranks with the config's launcher:
- local: the library's mpiexec from its environment (``.envs/<library>``);
- srun: ``srun --mpi=<pmi> -n R -N N`` around ``apptainer exec <image> ardlab rank`` (the algorithm's settings in
  the environment, which Apptainer passes through).
It forces the algorithm from the table, reads a tuned file when the job starts, and kills a hung run after the
timeout.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ardlab.analysis import tuned
from ardlab.bench import allreduce
from ardlab.bench.sizes import parse_sizes
from ardlab.comm.libraries import DEFAULT, TUNED
from ardlab.horovod import train as horovod_train
from ardlab.nn import trainer
from ardlab.plan import RunPlan
from ardlab.study.config import Job, tuned_ranks


def tuned_file(config: dict, lib: str) -> str:
    return str(tuned.path(Path(config["results"]) / "tuned", lib, tuned_ranks(config)))


def threads(job: Job, config: dict) -> int:
    return 1 if job.kind == "microbench" else config[job.kind]["threads"]


def plan(job: Job, config: dict, output: str) -> RunPlan:
    """The validated run plan of a job (the same builders as the CLI's)."""
    launch = {"output": output, "threads": threads(job, config), "progress": False, "launcher": config["launcher"]}
    if config["launcher"] == "srun":
        launch.update(srun_mpi=config["srun_mpi"].get(job.library), image=config["images"].get(job.library))
    tuned_path = tuned_file(config, job.library) if job.algorithm == TUNED else None
    if job.kind == "microbench":
        mb = config["microbench"]
        return allreduce.run_plan(job.library, ranks=job.ranks, nodes=job.nodes, sizes=parse_sizes(mb["sizes"]),
                                  algorithms=None if tuned_path else [job.algorithm], dtype=mb["dtype"],
                                  iterations=mb["iterations"] or None, skip_inapplicable=True, tuned=tuned_path,
                                  timeout_s=mb["timeout_s"], **launch)
    algorithm = DEFAULT if tuned_path else job.algorithm
    if job.kind == "train":
        tr = config["train"]
        return trainer.run_plan(job.library, ranks=job.ranks, algorithm=algorithm, tuned=tuned_path,
                                options={"model": job.model, "dataset": "synthetic",
                                         "batch_per_rank": tr["batch_per_rank"], "steps": tr["steps"],
                                         "parallel_mode": job.mode, "bucket_bytes": int(tr["bucket_mb"] * (1 << 20))},
                                timeout_s=tr["timeout_s"], **launch)
    hv = config["horovod"]
    return horovod_train.run_plan(
        job.library, ranks=job.ranks, algorithm=algorithm, tuned=tuned_path,
        options={"model": job.model, "batch_per_rank": hv["batch_per_rank"], "warmup_batches": hv["warmup_batches"],
                 "batches_per_iter": hv["batches_per_iter"], "iterations": hv["iterations"],
                 "image_size": hv["image_size"]},
        knobs={"fusion_threshold_mb": float(job.mode[1:])}, timeout_s=hv["timeout_s"], **launch)


def command(job: Job, config: dict, output: str) -> str:
    """The shell command of a measurement job: the driver, given the job's plan (it launches the ranks with the
    launcher of the config and reads a tuned file when the job starts)."""
    argv = [sys.executable, "-m", "ardlab.cli", "run", "--plan-json", plan(job, config, output).to_json()]
    return " ".join([*_envs_prefix(config), *map(shlex.quote, argv)])


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
