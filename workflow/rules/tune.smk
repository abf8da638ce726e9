# Tuned selection files: from the microbenchmark at one scale, the library's own per-size selection (Open MPI rules,
# Intel MPI ranges, MPICH JSON); the tuned-phase groups measure the one-node file beside the default and the
# algorithms it selects (listed in the ranges table written beside it), and the training groups the file of their
# own scale where the microbenchmark measured it. Each file a training group measures is checked at its scale
# (tune_check: a validated Allreduce through it, on the cluster) before the report is made from that training; so is
# every algorithm a training group picked (pick_check: a validated Allreduce at the group's call sizes).


rule tune:
    output: f"{R}/tuned/{tuned.FILE_NAME}", ranges=f"{R}/tuned/{tuned.FILE_NAME}{RANGES_SUFFIX}"
    input: lambda wc: commands.bench_files(config, JOBS, *study.parse_scale(wc.scale))
    log: f"{R}/logs/tuned/{tuned.FILE_NAME}.log"
    wildcard_constraints: suffix=r"\.[a-z]+"
    conda: "../envs/driver.yaml"
    params: cmd=lambda wc, input, output: commands.tune_command(config, wc.library, wc.scale, list(input), output[0])
    shell: "{params.cmd} > {log} 2>&1"


rule tune_check:
    output: f"{R}/{commands.TUNED_CHECKS}"
    input: lambda wc: commands.tuned_file(config, wc.library, *study.parse_scale(wc.scale))
    log: f"{R}/logs/{commands.TUNED_CHECKS}".replace(".csv", ".log")
    conda: "../envs/driver.yaml"
    params: cmd=lambda wc, input, output: commands.tuned_check_command(config, wc.library, wc.scale, *input, *output)
    threads: 1
    retries: 1  # as the measurement jobs: a launch that fails to start redoes it
    resources: **slurm_resources(lambda wc: commands.tuned_check_resources(config, wc.scale))
    shell: "{params.cmd} >> {log} 2>&1"  # appended, as the measurement jobs' logs


rule pick_check:
    output: f"{R}/{commands.PICK_CHECKS}"
    input: picks=f"{R}/{commands.PICKS}", calls=f"{R}/{commands.CALLSIZES}"
    log: f"{R}/logs/{commands.PICK_CHECKS}".replace(".csv", ".log")
    wildcard_constraints: kind="|".join(study.TRAINING)
    conda: "../envs/driver.yaml"
    params: cmd=lambda wc, input, output: commands.pick_check_command(config, group_job(wc), *input, *output)
    threads: 1
    retries: 1  # as the measurement jobs: a launch that fails to start redoes it
    resources: **slurm_resources(lambda wc: commands.tuned_check_resources(config, wc.scale))
    shell: "{params.cmd} >> {log} 2>&1"  # appended, as the measurement jobs' logs
