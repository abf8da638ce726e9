# Measurement jobs: one round of one comparison group each (every variant once, in a shuffled order), written
# as one tidy CSV under <results>/raw/ atomically by ardlab's driver. A failed or timed-out launch fails its job
# (Snakemake removes its output), so nothing half-measured is aggregated. Cores are claimed through `measure`
# (locally: one measurement at a time) and cpus_per_task (Slurm), so each rule declares one thread.
# One rule per kind of measurement (ardlab.study.kinds: microbench, microbench_tuned, train, horovod), all alike.

for kind in study.PATTERNS:

    rule:
        name: kind
        output: measured(kind)
        input: job_inputs(kind)
        log: measured_log(kind)
        conda: "../envs/driver.yaml"
        params: cmd=measure_command(kind)
        threads: 1
        retries: 1  # a launch that fails (seen: Open MPI's PMIx listener failing to start) redoes the whole round
        resources: **slurm_resources(resources_of(kind))
        shell: "{params.cmd} >> {log} 2>&1"  # appended: a retry keeps the failed attempt's output above its own
