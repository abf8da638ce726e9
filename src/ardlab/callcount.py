"""The Allreduce calls a training run makes, counted: a training plan run with the call counter loaded on every rank
(``ardlab.bench.callsizes``, the instrument), its counts as a table.

    python -m ardlab.callcount measure --library mpich --ranks 2 \
        --output results/experiments/call_sizes/allreduce_sizes.csv
    python -m ardlab.callcount count --plan-json PLAN --output FILE   # a workflow group's (workflow/rules/picks.smk)
    python -m ardlab.bench.callsizes summary results/experiments/call_sizes/allreduce_sizes*.csv \
        --output results/experiments/call_sizes/allreduce_sizes_summary.csv

The table has one row per run, operation and size (rank 0's counts; every rank's must agree, or it is an error):
framework, model, library, ranks, setting (the program's ``call_setting``: ardlab.nn's parallel mode and bucket,
Horovod's fusion threshold), steps (every training step of the run, warm-up included), op, bytes, calls,
calls_per_step. It sits above the training programs (it plans and runs them); the instrument below them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from ardlab.bench import callsizes
from ardlab.programs import FRAMEWORKS as TRAINING_FRAMEWORKS, of_framework, program

COLUMNS = ["framework", "model", "library", "library_version", "ranks", "nodes", "setting", "steps", "op", "bytes",
           "calls", "calls_per_step"]
FRAMEWORKS = tuple(TRAINING_FRAMEWORKS)  # nn, tensorflow


def measure(framework: str, library_name: str, ranks: int, model: str, *, setting: dict | None = None,
            steps: int = 4) -> list[dict]:
    """One local training run of `steps` steps with every Allreduce counted; its rows (see the module's
    docstring)."""
    prog = of_framework(framework)
    if steps < 2:
        raise ValueError(f"steps must be >= 2 (one warm-up, one timed), got {steps}")
    return count(prog.code().job_plan(library_name, ranks=ranks, model=model, timed_steps=steps - 1, setting=setting,
                                      threads=1, progress=False))


def count(plan, capture: bool = False) -> list[dict]:
    """Run a training plan (ardlab.plan.RunPlan of a training program, any launcher) with every Allreduce
    counted on every rank; its rows (see the module's docstring). `capture`: the run's output is kept, shown only if
    it fails."""
    import csv
    import dataclasses

    from ardlab import driver

    prog = program(plan.program)
    if not prog.trains:
        raise ValueError(f"only training runs are counted, not {plan.program!r}")
    # beside the output where there is one: on a cluster every node writes there (a shared file system)
    base = Path(plan.output).resolve().parent if plan.output else None
    if base is not None:
        base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".ardlab-callsizes-", dir=base) as folder:
        plan = dataclasses.replace(plan, env={**plan.env, callsizes.ENV: folder}, output=str(Path(folder) / "row.csv"))
        driver.run_training(plan, capture=capture)
        with open(plan.output, newline="") as f:
            summary = next(csv.DictReader(f))
        counts = callsizes.read(folder, plan.ranks)
    steps, setting = prog.code().steps_run(plan.options), prog.code().call_setting(plan)
    return [{"framework": prog.framework, "model": plan.options["model"],
             "library": plan.library, "library_version": summary["library_version"], "ranks": plan.ranks,
             "nodes": plan.nodes, "setting": setting, "steps": steps, "op": c.op, "bytes": int(c.bytes),
             "calls": int(c.calls), "calls_per_step": f"{c.calls / steps:g}"}
            for c in counts.itertuples()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ardlab.callcount", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="action", required=True)
    m = sub.add_parser("measure", help="count the Allreduce calls of training runs, both frameworks")
    m.add_argument("--library", required=True)
    m.add_argument("--ranks", type=int, default=2)
    m.add_argument("--models", nargs="+", default=["alexnet", "resnet20", "vgg16"])
    m.add_argument("--frameworks", nargs="+", default=list(FRAMEWORKS), choices=FRAMEWORKS)
    m.add_argument("--steps", type=int, default=4)
    m.add_argument("--output", required=True, help="the CSV to write (atomically)")
    c = sub.add_parser("count", help="count the Allreduce calls of one training run plan (a workflow job's)")
    c.add_argument("--plan-json", required=True, help="the run plan (ardlab.plan.RunPlan as JSON)")
    c.add_argument("--output", required=True, help="the CSV to write (atomically)")
    a = p.parse_args(argv)
    from ardlab.results import write_csv

    if a.action == "count":
        from ardlab.plan import RunPlan

        plan = RunPlan.from_json(a.plan_json)
        plan.output = a.output  # its folder holds the counts while the run lasts
        write_csv(a.output, COLUMNS, count(plan))
        print(f"wrote {a.output}")
        return 0
    rows = [row for fw in a.frameworks for model in a.models
            for row in measure(fw, a.library, a.ranks, model, steps=a.steps)]
    write_csv(a.output, COLUMNS, rows)
    print(f"wrote {len(rows)} rows to {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
