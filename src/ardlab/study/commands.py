"""The shell command and resources of each workflow job.

A measurement job is one round of one comparison group (``ardlab.study.kinds.Job``): it runs ardlab's driver on
the group's comparison (``ardlab run --comparison FILE``), whose variants are built by the same validated
builders as the CLI's. The driver launches each variant once, in the round's shuffled order, with the config's
launcher:
- local: the library's mpiexec from its environment (``.envs/<library>``);
- srun: ``srun --mpi=<pmi> -n R -N N`` around ``apptainer exec <image> ardlab rank`` (the algorithm's settings in
  the environment, which Apptainer passes through).
It forces each algorithm from the table, reads tuned files (and the algorithms they select) when the job starts,
and kills a hung launch after the timeout.
"""

from __future__ import annotations

import hashlib
import shlex
import sys
from pathlib import Path

from ardlab.analysis import tuned
from ardlab.bench import allreduce
from ardlab.bench.sizes import parse_sizes
from ardlab.comm.libraries import DEFAULT, TUNED, library
from ardlab.plan import Comparison, RunPlan
from ardlab.results import MICROBENCH_ROWS, atomic_open, scale_name
from ardlab.study import kinds
from ardlab.study.config import Job, algorithms, parse_scale, tuned_ranks, tuned_rerun, tuned_scale

# Where the workflow keeps, per training group (kind, model, mode) and scale, the Allreduce calls one of its launches
# made (ardlab.callcount) and the algorithms picked for them from the microbenchmark (ardlab.analysis.picks).
CALLSIZES = "callsizes/{kind}/{model}-{mode}/{scale}.csv"
PICKS = "picks/{kind}/{model}-{mode}/{scale}.csv"
# Where the workflow keeps, per library and scale, the rows of a validated Allreduce through that scale's tuned file
# (its result checked on every rank at every microbenchmark size): a tuned file that reduces wrongly there fails its
# check, and the report, which needs every check, is not made from training that used it.
TUNED_CHECKS = "tuned/validated/{library}-{scale}.csv"
# ... and of a validated Allreduce of every algorithm a training group picked (best, worst), per library, at the sizes
# that group's calls have: a forced variant's sum is proven at 4 ranks too, where no loss check applies
PICK_CHECKS = "validated/picks/{kind}/{model}-{mode}/{scale}.csv"  # not under picks/: read_picks reads that
CHECK_ITERATIONS = 3  # timed calls per size in a check: each one's result is validated


def tuned_file(config: dict, lib: str, nodes: int = 1, ranks: int | None = None) -> str:
    """The tuned file of `lib` made from the microbenchmark at `ranks` (default: the tuned phase's) on `nodes`."""
    return str(tuned.path(Path(config["results"]) / "tuned", lib, ranks or tuned_ranks(config), nodes))


def job_tuned_file(job: Job, config: dict, lib: str) -> str:
    """The tuned file a job's TUNED variant uses: the tuned phase's, or a training group's own scale's."""
    if not kinds.of(job).trains:
        return tuned_file(config, lib)
    return tuned_file(config, lib, *tuned_scale(config, job.nodes, job.ranks))


def group_file(pattern: str, job: Job, config: dict) -> str:
    """A training group's callsizes or picks file (CALLSIZES, PICKS)."""
    return str(Path(config["results"]) / pattern.format(kind=job.kind, model=job.model, mode=job.mode,
                                                        scale=scale_name(job.ranks, job.nodes)))


def threads(job: Job, config: dict) -> int:
    return config[_section(job)]["threads"] if kinds.of(job).trains else 1


def _section(job: Job) -> str:
    return kinds.of(job).section


def _launch(config: dict, section: str, lib: str, threads_: int) -> dict:
    """The launch fields of a RunPlan of `lib` in a config section (launcher, its MPI plugin and image, timeout)."""
    launch = {"threads": threads_, "progress": False, "launcher": config["launcher"],
              "timeout_s": config[section]["timeout_s"], "env": dict(config["library_env"].get(lib, {}))}
    if config["launcher"] == "srun":
        launch.update(srun_mpi=config["srun_mpi"].get(lib), image=config["images"].get(lib))
    return launch


def _variant(job: Job, config: dict, lib: str, algorithm: str) -> RunPlan:
    """One variant of a job's group: `lib` running `algorithm` (TUNED: the library's tuned file), planned by its
    kind (ardlab.study.kinds)."""
    tuned_path = job_tuned_file(job, config, lib) if algorithm == TUNED else None
    return kinds.of(job).variant(job, config[_section(job)], lib, DEFAULT if tuned_path else algorithm, tuned_path,
                                 _launch(config, _section(job), lib, threads(job, config)))


def variant_names(job: Job, config: dict, lib: str) -> list[str]:
    """The algorithms of `lib` in the job's group (TUNED for its tuned file; the algorithms that file selects
    join when the job starts)."""
    if kinds.of(job).tuned_phase:
        return [DEFAULT, TUNED]
    names = algorithms(config, _section(job), lib, job.nodes)
    return names + ([TUNED] if tuned_rerun(config, job.kind) else [])


def comparison(job: Job, config: dict, output: str) -> Comparison:
    """The validated comparison of a job: its group's variants, this round, the config's seed."""
    libs = config["libraries"]
    variants = [_variant(job, config, lib, name) for lib in libs for name in variant_names(job, config, lib)]
    # The tuned phase measures every algorithm a tuned file selects beside it (per size, the best single one is
    # among them); a training group measures the tuned file beside its configured algorithms only (a launch costs
    # seconds there, and the best single algorithm of the group is the best of those).
    selected = [tuned_file(config, lib) for lib in libs] if kinds.of(job).tuned_phase else []
    picks = _picks(job, config)
    return Comparison(job.group, variants, rounds=1, first_round=job.round, seed=config["seed"], output=output,
                      selected_from=selected, progress=False, picks={lib: picks for lib in libs} if picks else {},
                      picked_from=group_file(PICKS, job, config) if picks else None,
                      switch_in_launch=kinds.of(job).trains and config[_section(job)]["switch_in_launch"])


def _picks(job: Job, config: dict) -> list[str]:
    return list(config[_section(job)]["picks"]) if kinds.of(job).trains else []


def inputs(job: Job, config: dict) -> list[str]:
    """What a job's group reads when it starts: the tuned files it measures (the `tune` rule's) and the file of the
    algorithms picked for it (the `pick` rule's)."""
    out = []
    if kinds.of(job).tuned_phase or tuned_rerun(config, job.kind):
        out += [job_tuned_file(job, config, lib) for lib in config["libraries"]]
    if _picks(job, config):
        out.append(group_file(PICKS, job, config))
    return out


# Where a run keeps the comparisons its jobs were handed (ignored by git: made again whenever a job is planned; the rows
# record what each launch ran).
PLANS = ".plans"


def plan_file(config: dict, comp: Comparison) -> str:
    """The file that hands a job's comparison to the driver, so that the job's command stays one readable line instead
    of kilobytes of JSON: ``<results>/.plans/<digest>.json``, written when the job is planned (Snakemake evaluates
    every planned job's command, dry runs too, so the folder is hidden and the name is the contents' digest: the same
    comparison is one file however often it is planned, a changed comparison is a changed command, which Snakemake's
    params trigger sees, and no file is ever rewritten under a running job)."""
    text = comp.to_json()
    path = Path(config["results"]) / PLANS / f"{hashlib.sha256(text.encode()).hexdigest()[:16]}.json"
    if not path.exists():
        with atomic_open(path) as f:  # whole or absent, whoever else plans the same job at the same time
            f.write(text)
    return str(path)


def _run_command(config: dict, comp: Comparison) -> str:
    argv = [sys.executable, "-m", "ardlab.cli", "run", "--comparison", plan_file(config, comp)]
    return " ".join([*_envs_prefix(config), *map(shlex.quote, argv)])


def command(job: Job, config: dict, output: str) -> str:
    """The shell command of a measurement job: the driver, given the job's comparison (in its plan file)."""
    return _run_command(config, comparison(job, config, output))


def bench_files(config: dict, jobs: dict, nodes: int, ranks: int) -> list[str]:
    """The microbenchmark CSVs of one scale: what a tuned file and a pick file are made from."""
    return [str(Path(config["results"]) / j.path) for j in jobs["microbench"] if (j.nodes, j.ranks) == (nodes, ranks)]


def tune_command(config: dict, lib: str, scale: str, inputs: list[str], output: str) -> str:
    """`ardlab tune` for the microbenchmark at `scale` (r<ranks> or n<nodes>-r<ranks>); MPICH's file extends the
    built-in tree of the libmpi the runs use (its image's on srun)."""
    ranks = parse_scale(scale)[1]
    argv = ["ardlab", "tune", "--library", lib, "--ranks", str(ranks), "--output", output, *inputs]
    if config["launcher"] == "srun" and config["images"].get(lib):
        return " ".join(map(shlex.quote, ["apptainer", "exec", config["images"][lib], *argv]))
    return " ".join([*_envs_prefix(config), *map(shlex.quote, [sys.executable, "-m", "ardlab.cli", *argv[1:]])])


def tuned_checks(config: dict, jobs: dict) -> list[str]:
    """The checks (TUNED_CHECKS) of every tuned file a training group measures: the report's inputs."""
    scales = sorted({tuned_scale(config, j.nodes, j.ranks) for kind in kinds.TRAINING
                     if tuned_rerun(config, kind) for j in jobs[kind]})
    return [str(Path(config["results"]) / TUNED_CHECKS.format(library=lib, scale=scale_name(ranks, nodes)))
            for nodes, ranks in scales for lib in config["libraries"]]


def tuned_check_plan(config: dict, lib: str, scale: str, tuned_path: str, output: str) -> RunPlan:
    """A validated microbenchmark through `lib`'s tuned file at `scale` (n<nodes>-r<ranks>), at the microbenchmark's
    sizes: every rank's result is checked against the exact sum (``--validate``); a wrong one fails the job."""
    nodes, ranks = parse_scale(scale)
    sizes = parse_sizes(config["microbench"]["sizes"])
    return allreduce.plan(lib, ranks=ranks, nodes=nodes, sizes=sizes, validate=True, tuned=tuned_path,
                          iterations=CHECK_ITERATIONS, skip_inapplicable=True, output=output,
                          **_launch(config, "microbench", lib, 1))


def tuned_check_command(config: dict, lib: str, scale: str, tuned_path: str, output: str) -> str:
    """The shell command of a tuned file's check: the driver, given the check's one-variant comparison."""
    comp = allreduce.comparison(tuned_check_plan(config, lib, scale, tuned_path, output), seed=config["seed"])
    return _run_command(config, comp)


def pick_checks(config: dict, jobs: dict) -> list[str]:
    """The checks (PICK_CHECKS) of every training group that picks algorithms: the report's inputs."""
    return sorted({group_file(PICK_CHECKS, j, config) for kind in kinds.TRAINING for j in jobs[kind]
                   if _picks(j, config)})


def check_sizes(calls: str, dtype_bytes: int = 4) -> list[int]:
    """The distinct sizes (bytes) of a group's Allreduce calls (its callsizes file), each rounded up to whole
    float32 elements: the sizes a pick's check validates."""
    import csv

    with open(calls, newline="") as f:
        sizes = {int(r["bytes"]) for r in csv.DictReader(f)}
    if not sizes:
        raise ValueError(f"{calls} lists no Allreduce call: nothing to validate the group's picks at")
    return sorted({-(-b // dtype_bytes) * dtype_bytes for b in sizes})


def pick_check_comparison(config: dict, job: Job, picks_path: str, calls: str, output: str) -> Comparison:
    """A validated microbenchmark, at the group's scale and at its calls' sizes, of every algorithm the group picked
    per library (each library's default carries the launch settings the picks copy; it is validated too): every
    rank's result checked against the exact sum (``--validate``); a wrong one fails the job."""
    sizes = check_sizes(calls)
    libs = config["libraries"]
    variants = [allreduce.plan(lib, ranks=job.ranks, nodes=job.nodes, sizes=sizes, algorithms=[DEFAULT],
                               validate=True, iterations=CHECK_ITERATIONS, skip_inapplicable=True, output=output,
                               **_launch(config, "microbench", lib, 1)) for lib in libs]
    picks = _picks(job, config)
    return Comparison(f"pick-check/{job.kind}/{job.model}-{job.mode}/{scale_name(job.ranks, job.nodes)}", variants,
                      rounds=1, seed=config["seed"], output=output, progress=False,
                      picks={lib: picks for lib in libs}, picked_from=picks_path)


def pick_check_command(config: dict, job: Job, picks_path: str, calls: str, output: str) -> str:
    """The shell command of a group's pick check: the driver, given the check's comparison."""
    return _run_command(config, pick_check_comparison(config, job, picks_path, calls, output))


def tuned_check_resources(config: dict, scale: str) -> dict:
    """Slurm resources of a tuned file's check: those of a microbenchmark job at its scale, one launch long."""
    nodes, ranks = parse_scale(scale)
    res = resources(Job("microbench", 0, ranks, nodes), config)
    return {**res, "runtime": int(config["microbench"]["timeout_s"] // 60) + 10}


def callsizes_command(config: dict, job: Job, output: str) -> str:
    """Count the Allreduce calls of one launch of a training group (its first library, the default algorithm)."""
    plan = _variant(job, config, config["libraries"][0], DEFAULT)
    argv = [sys.executable, "-m", "ardlab.callcount", "count", "--plan-json", plan.to_json(), "--output", output]
    return " ".join([*_envs_prefix(config), *map(shlex.quote, argv)])


def pick_command(bench: list[str], calls: str, output: str) -> str:
    argv = [sys.executable, "-m", "ardlab.cli", "pick", "--bench", *bench, "--calls", calls, "--output", output]
    return " ".join(map(shlex.quote, argv))


def _envs_prefix(config: dict) -> list[str]:
    """`ARDLAB_ENVS=...` when the config names where the library environments live (launcher local)."""
    return [f"ARDLAB_ENVS={shlex.quote(config['envs'])}"] if config.get("envs") else []


def runtime_minutes(job: Job, config: dict) -> int:
    """Slurm time limit of a job: a timeout per launch (the variants, and at most every selectable algorithm
    of each library that a tuned file may add), plus start-up."""
    launches = sum(len(variant_names(job, config, lib)) + len(_picks(job, config)) for lib in config["libraries"])
    if kinds.of(job).tuned_phase:
        launches += sum(sum(a.selectable for a in library(lib).algorithms.values()) for lib in config["libraries"])
    return int(launches * config[_section(job)]["timeout_s"] // 60) + 10


def other_runs_bench(config: dict) -> list[str]:
    """The microbenchmark CSVs of the runs named in costmodel.also_fit (config.check makes sure there are some)."""
    return [str(p) for folder in config["costmodel"]["also_fit"]
            for p in sorted(Path(folder).glob(MICROBENCH_ROWS))]


def mpi_resource(config: dict) -> str:
    """The `mpi` resource of measurement jobs; it also keeps Slurm's job-step plugin from wrapping the job in
    `srun -n1` (the job launches its ranks itself)."""
    return "srun" if config["launcher"] == "srun" else "mpiexec"


def resources(job: Job, config: dict) -> dict:
    """The Slurm resources of a job: nodes, tasks, cpus_per_task, mem_mb, runtime (and, one value for every
    rule, mpi_resource and `measure`, which the local profile counts)."""
    res = {"mem_mb": 2000 + 1500 * job.ranks, "runtime": runtime_minutes(job, config)}
    if config["launcher"] == "srun":  # Slurm's mem is per node: the driver's share plus that node's ranks
        res.update(nodes=job.nodes, tasks=job.ranks, cpus_per_task=threads(job, config),
                   mem_mb=2000 + 1500 * -(-job.ranks // job.nodes))
    else:  # ardlab's driver starts the ranks with the library's mpiexec on the job's node: one slot per rank,
        # at most the node's cores (more ranks than cores are oversubscribed, as on the local profile)
        per = min(threads(job, config), config["cpus_per_node"])
        res.update(nodes=1, tasks=max(2, min(job.ranks, config["cpus_per_node"] // per)), cpus_per_task=per)
    return res
