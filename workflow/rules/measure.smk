# Measurement jobs: one round of one comparison group each (every variant once, in a shuffled order), written
# as one tidy CSV under <results>/raw/ atomically by ardlab's driver. A failed or timed-out launch fails its job
# (Snakemake removes its output), so nothing half-measured is aggregated. Cores are claimed through `measure`
# (locally: one measurement at a time) and cpus_per_task (Slurm), so each rule declares one thread.

MPI = commands.mpi_resource(config)


rule microbench:
    output: measured("microbench")
    input: job_inputs("microbench")
    log: measured_log("microbench")
    conda: "../envs/driver.yaml"
    params: cmd=measure_command("microbench")
    threads: 1
    retries: 1  # a launch that fails (seen: Open MPI's PMIx listener failing to start) redoes the whole round
    resources: measure=1, mpi=MPI, runtime=job_resource("microbench", "runtime"), nodes=job_resource("microbench", "nodes"),
        tasks=job_resource("microbench", "tasks"), cpus_per_task=job_resource("microbench", "cpus_per_task"),
        mem_mb=job_resource("microbench", "mem_mb"),
    shell: "{params.cmd} > {log} 2>&1"


rule microbench_tuned:
    output: measured("microbench_tuned")
    input: job_inputs("microbench_tuned")
    log: measured_log("microbench_tuned")
    conda: "../envs/driver.yaml"
    params: cmd=measure_command("microbench_tuned")
    threads: 1
    retries: 1  # a launch that fails (seen: Open MPI's PMIx listener failing to start) redoes the whole round
    resources: measure=1, mpi=MPI, runtime=job_resource("microbench_tuned", "runtime"), nodes=job_resource("microbench_tuned", "nodes"),
        tasks=job_resource("microbench_tuned", "tasks"), cpus_per_task=job_resource("microbench_tuned", "cpus_per_task"),
        mem_mb=job_resource("microbench_tuned", "mem_mb"),
    shell: "{params.cmd} > {log} 2>&1"


rule train:
    output: measured("train")
    input: job_inputs("train")
    log: measured_log("train")
    conda: "../envs/driver.yaml"
    params: cmd=measure_command("train")
    threads: 1
    retries: 1  # a launch that fails (seen: Open MPI's PMIx listener failing to start) redoes the whole round
    resources: measure=1, mpi=MPI, runtime=job_resource("train", "runtime"), nodes=job_resource("train", "nodes"),
        tasks=job_resource("train", "tasks"), cpus_per_task=job_resource("train", "cpus_per_task"),
        mem_mb=job_resource("train", "mem_mb"),
    shell: "{params.cmd} > {log} 2>&1"


rule horovod:
    output: measured("horovod")
    input: job_inputs("horovod")
    log: measured_log("horovod")
    conda: "../envs/driver.yaml"
    params: cmd=measure_command("horovod")
    threads: 1
    retries: 1  # a launch that fails (seen: Open MPI's PMIx listener failing to start) redoes the whole round
    resources: measure=1, mpi=MPI, runtime=job_resource("horovod", "runtime"), nodes=job_resource("horovod", "nodes"),
        tasks=job_resource("horovod", "tasks"), cpus_per_task=job_resource("horovod", "cpus_per_task"),
        mem_mb=job_resource("horovod", "mem_mb"),
    shell: "{params.cmd} > {log} 2>&1"
