# Measurement jobs: one tidy CSV each under <results>/raw/, written atomically by ardlab. A failed or
# timed-out run fails its job (Snakemake removes its output) and is never aggregated.


def _job(kind, wc, tuned=False):
    return study.Job(kind, wc.library, "tuned" if tuned else wc.algorithm, int(wc.ranks), int(wc.rep),
                     int(wc.get("nodes", 1)), wc.get("model", ""), wc.get("mode", ""))


def _tuned_input(wc):
    return [commands.tuned_file(config, wc.library)]


def _res(kind, key, tuned):
    return lambda wc: commands.resources(_job(kind, wc, tuned), config)[key]


def _measure_path(kind, tuned, logs=False):
    path = f"{R}/logs/{study.PATTERNS[kind]}".replace(".csv", ".log") if logs else f"{R}/{study.PATTERNS[kind]}"
    return path.replace("{algorithm}", "tuned") if tuned else path


# Runs with a tuned selection file (algorithm "tuned") depend on that file; the others on nothing.
for _kind, _tuned in [(k, t) for k in ("microbench", "train", "horovod") for t in (False, True)]:

    rule:
        name: f"{_kind}_tuned" if _tuned else _kind
        output: _measure_path(_kind, _tuned)
        input: _tuned_input if _tuned else []
        log: _measure_path(_kind, _tuned, logs=True)
        wildcard_constraints: algorithm=r"(?!tuned/)[a-z0-9_]+"
        conda: "../envs/driver.yaml"
        params: cmd=lambda wc, output, _k=_kind, _t=_tuned: commands.command(_job(_k, wc, _t), config, output[0])
        threads: 1  # cores are claimed through `measure` (locally) and cpus_per_task (Slurm)
        resources:
            measure=1,
            runtime=commands.runtime_minutes(config, _kind),
            nodes=_res(_kind, "nodes", _tuned),
            tasks=_res(_kind, "tasks", _tuned),
            cpus_per_task=_res(_kind, "cpus_per_task", _tuned),
            mem_mb=_res(_kind, "mem_mb", _tuned),
            mpi=commands.mpi_resource(config),
        shell: "{params.cmd} > {log} 2>&1"
