# Input functions and helpers shared by the rules: the job a rule's wildcards name, its tuned file, its shell
# command and its Slurm resources (all from ardlab.study; nothing here re-encodes a fact of ardlab's tables).


def measured(kind):
    """Output path pattern of a measurement rule (under the results folder)."""
    return f"{R}/{study.PATTERNS[kind]}"


def measured_log(kind):
    return f"{R}/logs/{study.PATTERNS[kind]}".replace(".csv", ".log")


def job_of(kind, wc):
    """The job (one round of one comparison group) that a rule's wildcards name."""
    nodes, ranks = study.parse_scale(wc.scale) if "scale" in wc.keys() else (int(wc.nodes), int(wc.ranks))
    return study.Job(kind, int(wc.round), ranks, nodes, wc.get("model", ""), wc.get("mode", ""))


def job_inputs(kind):
    """A group depends on the tuned files it measures and the file of its picked algorithms; others on nothing."""
    return lambda wc: commands.inputs(job_of(kind, wc), config)


def measure_command(kind):
    return lambda wc, output: commands.command(job_of(kind, wc), config, output[0])


MPI = commands.mpi_resource(config)
SLURM_RESOURCES = ("runtime", "nodes", "tasks", "cpus_per_task", "mem_mb")


def slurm_resources(of):
    """A measuring rule's resources, declared once: one measurement at a time (`measure`), the MPI launch (`mpi`), and
    the Slurm resources (SLURM_RESOURCES) of the job `of(wildcards)` gives (ardlab.study.commands' dict)."""
    return {"measure": 1, "mpi": MPI, **{key: (lambda wc, key=key: of(wc)[key]) for key in SLURM_RESOURCES}}


def resources_of(kind):
    """The resource dict of a measurement job of `kind` (ardlab.study.commands.resources)."""
    return lambda wc: commands.resources(job_of(kind, wc), config)


def results_folder(wc, output):
    """The results folder, for the aggregation commands."""
    return R


def group_job(wc):
    """The round-0 job of the training group the wildcards name (kind, model, mode, scale): its launch settings."""
    nodes, ranks = study.parse_scale(wc.scale)
    return study.Job(wc.kind, 0, ranks, nodes, wc.model, wc.mode)
