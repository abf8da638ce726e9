# Tuned selection files: from the microbenchmark at one rank count, the library's own per-size selection
# (Open MPI rules, Intel MPI ranges, MPICH JSON); the tuned-phase groups measure it beside the default and the algorithms it
# selects (listed in the ranges table written beside it).


rule tune:
    output: f"{R}/tuned/{tuned.FILE_NAME}", ranges=f"{R}/tuned/{tuned.FILE_NAME}.ranges.csv"
    input: lambda wc: commands.tune_inputs(config, JOBS, wc.library)
    log: f"{R}/logs/tuned/{tuned.FILE_NAME}.log"
    wildcard_constraints: suffix=r"\.[a-z]+"
    conda: "../envs/driver.yaml"
    params: cmd=lambda wc, input, output: commands.tune_command(config, wc.library, list(input), output[0])
    shell: "{params.cmd} > {log} 2>&1"
