# Tuned selection files: from the microbenchmark at one scale, the library's own per-size selection (Open MPI rules,
# Intel MPI ranges, MPICH JSON); the tuned-phase groups measure the one-node file beside the default and the
# algorithms it selects (listed in the ranges table written beside it), and the training groups the file of their
# own scale where the microbenchmark measured it.


rule tune:
    output: f"{R}/tuned/{tuned.FILE_NAME}", ranges=f"{R}/tuned/{tuned.FILE_NAME}{RANGES_SUFFIX}"
    input: lambda wc: commands.bench_files(config, JOBS, *study.parse_scale(wc.scale))
    log: f"{R}/logs/tuned/{tuned.FILE_NAME}.log"
    wildcard_constraints: suffix=r"\.[a-z]+"
    conda: "../envs/driver.yaml"
    params: cmd=lambda wc, input, output: commands.tune_command(config, wc.library, wc.scale, list(input), output[0])
    shell: "{params.cmd} > {log} 2>&1"
