# Tuned selection files: from the microbenchmark at one rank count, the library's own per-size selection
# (Open MPI rules, Intel MPI ranges, MPICH JSON); the measurement rules re-run with algorithm "tuned".


def _tune_inputs(wc):
    ranks = study.tuned_ranks(config)
    return [f"{R}/{j.path}" for j in JOBS["microbench"]
            if j.library == wc.library and j.ranks == ranks and j.nodes == 1 and j.algorithm != "tuned"]


rule tune:
    output: f"{R}/tuned/{{library}}-r{{ranks}}{{suffix}}"
    input: _tune_inputs
    log: f"{R}/logs/tuned/{{library}}-r{{ranks}}{{suffix}}.log"
    wildcard_constraints: suffix=r"\.[a-z]+"
    params: cmd=lambda wc, input, output: commands.tune_command(config, wc.library, list(input), output[0])
    shell: "{params.cmd} > {log} 2>&1"
