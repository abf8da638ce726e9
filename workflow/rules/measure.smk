# Measurement jobs: one tidy CSV each under <results>/raw/, written atomically by ardlab. A failed or
# timed-out run fails its job (Snakemake removes its output) and is never aggregated.


def _job(kind, wc):
    return study.Job(kind, wc.library, wc.algorithm, int(wc.ranks), int(wc.rep), int(wc.get("nodes", 1)),
                     wc.get("model", ""), wc.get("mode", ""))


def _tuned_input(wc):
    return [commands.tuned_file(config, wc.library)] if wc.algorithm == "tuned" else []


def _res(kind, key):
    return lambda wc: commands.resources(_job(kind, wc), config)[key]


for _kind in ("microbench", "train", "horovod"):

    rule:
        name: _kind
        output: f"{R}/{study.PATTERNS[_kind]}"
        input: _tuned_input
        log: f"{R}/logs/{study.PATTERNS[_kind]}".replace(".csv", ".log")
        conda: "../envs/driver.yaml"
        params: cmd=lambda wc, output, _k=_kind: commands.command(_job(_k, wc), config, output[0])
        threads: lambda wc, _k=_kind: _job(_k, wc).ranks
        resources:
            measure=_res(_kind, "measure"),
            runtime=_res(_kind, "runtime"),
            nodes=_res(_kind, "nodes"),
            tasks=_res(_kind, "tasks"),
            cpus_per_task=_res(_kind, "cpus_per_task"),
            mem_mb=_res(_kind, "mem_mb"),
            mpi=_res(_kind, "mpi"),
        shell: "{params.cmd} > {log} 2>&1"
