# The algorithms each training group picks from the microbenchmark (ardlab.analysis.picks): one launch of the group
# (its first library, the default algorithm) counts the Allreduce calls the model makes (ardlab.bench.callsizes),
# and the microbenchmark at the group's scale predicts every algorithm's time for those calls; per library the
# fastest is `best`, the slowest `worst`. A group with picks starts after its pick file exists.


rule callsizes:
    output: f"{R}/{commands.CALLSIZES}"
    log: f"{R}/logs/{commands.CALLSIZES}".replace(".csv", ".log")
    wildcard_constraints: kind="|".join(study.TRAINING)
    conda: "../envs/driver.yaml"
    params: cmd=lambda wc, output: commands.callsizes_command(config, group_job(wc), output[0])
    threads: 1
    retries: 1  # as the measurement jobs: a launch that fails to start redoes it
    resources: **slurm_resources(lambda wc: commands.resources(group_job(wc), config))
    shell: "{params.cmd} > {log} 2>&1"


rule pick:
    output: f"{R}/{commands.PICKS}", table=f"{R}/{commands.PICKS}".replace(".csv", ".md")
    input: bench=lambda wc: commands.bench_files(config, JOBS, *study.parse_scale(wc.scale)), calls=rules.callsizes.output
    log: f"{R}/logs/{commands.PICKS}".replace(".csv", ".log")
    wildcard_constraints: kind="|".join(study.TRAINING)
    conda: "../envs/driver.yaml"
    params: cmd=lambda wc, input, output: commands.pick_command(list(input.bench), input.calls[0], output[0])
    shell: "{params.cmd} > {log} 2>&1"
