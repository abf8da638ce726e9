"""ardlab's study: Allreduce microbenchmarks, ardlab.nn and TensorFlow+Horovod training across every
library x algorithm x scale x model of the config, tuned selection files, cost models, tables and figures.

    snakemake --profile workflow/profiles/local                      # the local default (workflow/run)
    snakemake --profile workflow/profiles/slurm --configfile workflow/config/full.yaml

The config is validated (schema + ardlab's tables) before any job is planned.
"""

import json
import os
import sys

from snakemake.utils import min_version

from ardlab.analysis import tuned
from ardlab.analysis.costmodel_report import TABLES as COSTMODEL_TABLES
from ardlab.analysis.report import tables_made as report_tables
from ardlab.study import commands
from ardlab.study import config as study
from ardlab.results import RANGES_SUFFIX, REPRODUCE_TABLES, kinds_of

min_version("9.0")

if not config:
    raise ValueError("no configuration: run with --profile workflow/profiles/local (the local default, "
                     "workflow/config/local.yaml) or --configfile FILE")
study.validate(config)
R = config["results"]


onstart:
    study.check_images(config)  # before the first job; a dry run plans without the images
JOBS = study.jobs(config)

wildcard_constraints:
    library="|".join(config["libraries"]),
    ranks=r"\d+",
    nodes=r"\d+",
    scale=r"(n\d+-)?r\d+",
    round=r"\d+",
    model=r"[a-z0-9_]+",
    mode=r"[a-z0-9.]+",

include: "workflow/rules/common.smk"
include: "workflow/rules/measure.smk"
include: "workflow/rules/tune.smk"
include: "workflow/rules/picks.smk"
include: "workflow/rules/report.smk"

rule all:
    input:
        rules.report.output,
        rules.costmodel.output if config["costmodel"]["enabled"] and config["microbench"]["enabled"] else [],
        rules.compare.output if config["reference"] else [],
    default_target: True
