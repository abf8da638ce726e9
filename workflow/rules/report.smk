# Aggregation: tables (CSV + Markdown) and figures from the raw CSVs of the jobs that succeeded.

# every measurement kind's rows, by their class (ardlab.results.ROW_FILES): a new kind is reported without an edit here
_BENCH = [f"{R}/{j.path}" for kind in kinds_of("bench") for j in JOBS[kind]]
_TRAIN = [f"{R}/{j.path}" for kind in kinds_of("train") for j in JOBS[kind]]
_TABLES = report_tables(microbench=bool(_BENCH), training=bool(_TRAIN), tuned=config["tuned"]["enabled"],
                        network=any(j.nodes > 1 for j in JOBS["microbench"]), sites=study.site_builds(config))


localrules: run_info, report, costmodel, compare, tune, pick  # light: they run where snakemake runs


rule run_info:
    output: f"{R}/run.yaml"
    log: f"{R}/logs/run_info.log"
    conda: "../envs/driver.yaml"
    params: python=sys.executable, config=json.dumps(config)
    shell: "{params.python} -m ardlab.study.runinfo {output} {params.config:q} > {log} 2>&1"


rule report:
    input: bench=_BENCH, train=_TRAIN, info=f"{R}/run.yaml", checks=commands.tuned_checks(config, JOBS),
        pick_checks=commands.pick_checks(config, JOBS)
    output:
        tables=[f"{R}/tables/{t}.{ext}" for t in _TABLES for ext in ("csv", "md")],
        figures=report(directory(f"{R}/figures/measured"), patterns=["{name}.png"], category="Measured"),
    log: f"{R}/logs/report.log"
    conda: "../envs/driver.yaml"
    params: python=sys.executable, results=results_folder,
    shell:
        "{params.python} -m ardlab.cli report --results {params.results} --figures {output.figures}"
        " --bench {input.bench} --train {input.train} > {log} 2>&1"


rule costmodel:
    input: bench=[f"{R}/{j.path}" for j in JOBS["microbench"]] + commands.other_runs_bench(config)
    output:
        tables=[f"{R}/tables/costmodel_{t}.{ext}" for t in COSTMODEL_TABLES for ext in ("csv", "md")],
        figures=report(directory(f"{R}/figures/costmodel"), patterns=["{name}.png"], category="Cost models"),
    log: f"{R}/logs/costmodel.log"
    conda: "../envs/driver.yaml"
    params: ranks=" ".join(map(str, config["costmodel"]["predict_ranks"])), python=sys.executable,
        results=results_folder, cores=config["cpus_per_node"],
    shell:
        "{params.python} -m ardlab.cli predict --results {params.results} --figures {output.figures}"
        " --ranks {params.ranks} --cores-per-node {params.cores} --fit {input.bench} > {log} 2>&1"


rule compare:
    input: rules.report.output.tables, reference=ancient(f"{config['reference']}/run.yaml") if config["reference"] else []
    output: [f"{R}/tables/{t}.{ext}" for t in REPRODUCE_TABLES for ext in ("csv", "md")]
    log: f"{R}/logs/compare.log"
    conda: "../envs/driver.yaml"
    params: python=sys.executable, results=results_folder,
        reference=lambda wc, input: os.path.dirname(input.reference),
    shell:
        "{params.python} -m ardlab.cli report --compare {params.reference} {params.results}"
        " --output {params.results}/tables > {log} 2>&1"
