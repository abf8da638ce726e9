# Measurement jobs: one tidy CSV each under <results>/raw/, written atomically by ardlab's driver. A failed or
# timed-out run fails its job (Snakemake removes its output) and is never aggregated. Cores are claimed through
# `measure` (locally: one measurement at a time) and cpus_per_task (Slurm), so each rule declares one thread.

MPI = commands.mpi_resource(config)


rule microbench:
    output: measured("microbench")
    input: tuned_input
    log: measured_log("microbench")
    conda: "../envs/driver.yaml"
    params: cmd=measure_command("microbench")
    threads: 1
    resources: measure=1, mpi=MPI, runtime=commands.runtime_minutes(config, "microbench"),
        nodes=job_resource("microbench", "nodes"), tasks=job_resource("microbench", "tasks"),
        cpus_per_task=job_resource("microbench", "cpus_per_task"), mem_mb=job_resource("microbench", "mem_mb"),
    shell: "{params.cmd} > {log} 2>&1"


rule train:
    output: measured("train")
    input: tuned_input
    log: measured_log("train")
    conda: "../envs/driver.yaml"
    params: cmd=measure_command("train")
    threads: 1
    resources: measure=1, mpi=MPI, runtime=commands.runtime_minutes(config, "train"),
        nodes=job_resource("train", "nodes"), tasks=job_resource("train", "tasks"),
        cpus_per_task=job_resource("train", "cpus_per_task"), mem_mb=job_resource("train", "mem_mb"),
    shell: "{params.cmd} > {log} 2>&1"


rule horovod:
    output: measured("horovod")
    input: tuned_input
    log: measured_log("horovod")
    conda: "../envs/driver.yaml"
    params: cmd=measure_command("horovod")
    threads: 1
    resources: measure=1, mpi=MPI, runtime=commands.runtime_minutes(config, "horovod"),
        nodes=job_resource("horovod", "nodes"), tasks=job_resource("horovod", "tasks"),
        cpus_per_task=job_resource("horovod", "cpus_per_task"), mem_mb=job_resource("horovod", "mem_mb"),
    shell: "{params.cmd} > {log} 2>&1"
