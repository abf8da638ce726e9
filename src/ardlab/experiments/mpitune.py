"""Benchmark: Intel's `mpitune_fast` side by side with `ardlab advise` for Intel MPI on the emulated cluster (issue 41):
the time each takes to tune, and the training speedup of each one's file over Intel MPI's default, measured paired and
interleaved in one run.

    python -m ardlab.experiments.mpitune --advice results/advise/<run> [--rounds 6] [--seed N]
        [--output results/experiments/mpitune/<run>]

1. Tunes with `mpitune_fast` (the impi-rt wheel's; it launches IMB-MPI1 with Intel MPI's autotuner over the
   allocation's nodes, the advice's ranks a node, Allreduce only) as a Slurm batch job on the advice's nodes (`sbatch
   --wait`; Intel MPI's hydra starts its proxies through Slurm), timed (queueing included: none on the emulated
   cluster), its log and .dat file kept.
2. Trains the advice's job (its model and framework, ranks and nodes) in paired, interleaved rounds: Intel MPI's default
   selection, the advice's tuned file (``tuned/intelmpi-*.adjust``: I_MPI_ADJUST_ALLREDUCE with its ranges) and
   mpitune_fast's file (I_MPI_TUNING_BIN), every variant once a round in a shuffled order (``ardlab.driver``).
3. Writes the rows, and a table: per file, the tuning's wall time (the advice's whole run, learning and the training
   check included, beside mpitune_fast's) and the training speedup over the default with its 95% interval, paired by
   round (``ardlab.stats.speedup_ci``); the two files against each other too.

Needs the emulated cluster up (``ardlab cluster up``; its client settings in the environment) and the advice's run
folder (made on that cluster with ``--launcher srun``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

LIBRARY = "intelmpi"
VARIANTS = ("default", "advise", "mpitune_fast")


def tune(nodes: int, ranks_per_node: int, folder: Path, timeout_s: float = 1200) -> tuple[Path, float]:
    """mpitune_fast over `nodes` nodes of a new allocation, Allreduce only: (its tuning file, wall seconds). Its log
    is kept as ``mpitune_fast.log`` in `folder`."""
    from ardlab.comm.launch import program_env, require_env

    prefix = require_env(LIBRARY)
    folder.mkdir(parents=True, exist_ok=True)
    work = folder / "mpitune_fast"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    env = {**os.environ, "I_MPI_ROOT": str(prefix), "PATH": f"{prefix / 'bin'}:{os.environ['PATH']}",
           "I_MPI_HYDRA_BOOTSTRAP": "slurm", "I_MPI_PIN": "0", **program_env(LIBRARY)}
    log = (folder / "mpitune_fast.log").resolve()
    tool = [str(prefix / "bin" / "mpitune_fast"), "-n", str(nodes), "-ppn", str(ranks_per_node), "-c", "allreduce",
            "-d", str(work.resolve())]
    # A batch job, as on a site: the tool (and Intel MPI's hydra, which starts its proxies through Slurm) runs on the
    # allocation's first node, whose name the other nodes resolve (run from this host, the proxies could not reach
    # it: "unable to connect to server vm").
    argv = ["sbatch", "--wait", "-N", str(nodes), "--job-name", "mpitune_fast", "-o", str(log),
            f"--time={int(timeout_s // 60) + 1}", "--wrap", " ".join(tool)]
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, cwd=work, capture_output=True, text=True, timeout=timeout_s + 120)
    took = time.monotonic() - started
    if proc.returncode != 0:
        said = log.read_text()[-3000:] if log.is_file() else ""
        raise RuntimeError(f"mpitune_fast failed (exit {proc.returncode}; `{' '.join(argv)}`); its log: {log}\n"
                           f"{proc.stdout}{proc.stderr}{said}")
    files = sorted(work.rglob("*.dat"))
    if not files:
        raise RuntimeError(f"mpitune_fast wrote no .dat tuning file under {work}; its log: "
                           f"{folder / 'mpitune_fast.log'}")
    return files[-1], took


def plans(advice: Path, mpitune_file: Path, steps: int):
    """The three training variants of the advice's job (ardlab.plan.RunPlan), labelled by `VARIANTS`."""
    import dataclasses

    from ardlab.advise.confirm import load

    job, settings, _, tuned, _ = load(advice)
    if LIBRARY not in tuned:
        raise ValueError(f"{advice} holds no Intel MPI tuned file (tuned/): the advice raced no Intel MPI algorithm")
    default = job.training_plan(LIBRARY, steps=steps)
    return job, {
        "default": default,
        "advise": job.training_plan(LIBRARY, steps=steps, tuned=tuned[LIBRARY]),
        "mpitune_fast": dataclasses.replace(default, env={**default.env, "I_MPI_TUNING_BIN": str(mpitune_file)}),
    }


def measure(variants: dict, rounds: int, seed: int):
    """Every training row, with the variant's name (column `variant`), from one comparison's rounds."""
    import pandas as pd

    from ardlab.driver import run_comparison
    from ardlab.plan import Comparison

    names = list(variants)
    c = Comparison("mpitune-vs-advise", [variants[n] for n in names], rounds=rounds, seed=seed, progress=True)
    return _named(pd.DataFrame(run_comparison(c)), variants)


def _named(rows, variants: dict):
    """The rows with the variant each came from: the tuned file's rows say so in `tuned`, mpitune_fast's in
    `mpi_tuning_file` (the file Intel MPI reported loading)."""
    mpitune = str(variants["mpitune_fast"].env["I_MPI_TUNING_BIN"])

    def name(r) -> str:
        if str(r.get("algorithm")) == "tuned":
            return "advise"
        return "mpitune_fast" if mpitune in str(r.get("knobs", "")) else "default"

    return rows.assign(variant=[name(r) for _, r in rows.iterrows()])


def table(rows, seconds: dict) -> list[dict]:
    """Per tuned file: its tuning time and its training speedup over the default; then advise's over mpitune_fast's
    (each paired by round)."""
    from ardlab.stats import speedup_ci

    rate = rows.assign(rate=rows["img_per_s"].astype(float)).pivot_table(index="round", columns="variant",
                                                                          values="rate")
    out = []
    for variant, baseline in (("advise", "default"), ("mpitune_fast", "default"), ("advise", "mpitune_fast")):
        both = rate[[variant, baseline]].dropna()
        m, lo, hi = speedup_ci(both[variant].to_numpy(), both[baseline].to_numpy())
        out.append({"variant": variant, "baseline": baseline, "tuning_s": seconds.get(variant),
                    "speedup": m, "low": lo, "high": hi, "rounds": len(both)})
    return out


def markdown(out: list[dict], job, commands: list[str]) -> str:
    lines = [f"# mpitune_fast beside ardlab advise: Intel MPI, {job.model} ({job.framework}), {job.ranks} ranks on "
             f"{job.nodes} nodes", "",
             "| file | over | tuning wall time | training speedup (95% interval) | paired rounds |",
             "|---|---|---|---|---|"]
    for r in out:
        spent = "-" if r["tuning_s"] is None else f"{r['tuning_s'] / 60:.1f} min"
        lines.append(f"| {r['variant']} | {r['baseline']} | {spent} | {r['speedup']:.2f}x [{r['low']:.2f}, "
                     f"{r['high']:.2f}] | {r['rounds']} |")
    lines += ["", "Made by:", "", "```", *commands, "```"]
    return "\n".join(lines) + "\n"


def summarize(out: Path) -> str:
    """mpitune.md from the folder's rows (training.csv) and its record (mpitune.json): what the run wrote, made again
    from the committed data."""
    import pandas as pd

    from ardlab.advise.run import Job

    record = json.loads((out / "mpitune.json").read_text())
    rows = pd.read_csv(out / "training.csv")
    result = table(rows, {"advise": record["advise_s"], "mpitune_fast": record["mpitune_s"]})
    text = markdown(result, Job(**record["job"]), [record["command"]])
    (out / "mpitune.md").write_text(text)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--advice", help="an `ardlab advise --launcher srun` run folder")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=3, help="timed training steps a launch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mpitune-file", help="a tuning file mpitune_fast made before (skips the tuning)")
    p.add_argument("--mpitune-seconds", type=float, help="with --mpitune-file: the time it took")
    p.add_argument("--output", required=True)
    p.add_argument("--summarize", action="store_true", help="only make mpitune.md again from the output's rows")
    a = p.parse_args(argv)
    out = Path(a.output)
    if a.summarize:
        print(summarize(out))
        return 0
    if not a.advice:
        p.error("--advice is needed (the run folder of an `ardlab advise --launcher srun`)")
    advice = Path(a.advice)
    if not (advice / "answer.json").is_file():
        p.error(f"--advice {advice}: no answer.json there (the run folder of an `ardlab advise`)")
    if a.mpitune_file and a.mpitune_seconds is None:
        p.error("--mpitune-file needs --mpitune-seconds (the time its tuning took)")
    doc = json.loads((advice / "answer.json").read_text())
    job = doc["job"]
    if a.mpitune_file:
        mpitune_file, took = Path(a.mpitune_file), a.mpitune_seconds
    else:
        mpitune_file, took = tune(job["nodes"], job["ranks"] // job["nodes"], out)
    _, variants = plans(advice, mpitune_file, a.steps)
    rows = measure(variants, a.rounds, a.seed)
    out.mkdir(parents=True, exist_ok=True)
    rows.to_csv(out / "training.csv", index=False)
    command = "python -m ardlab.experiments.mpitune " + " ".join(sys.argv[1:] if argv is None else argv)
    (out / "mpitune.json").write_text(json.dumps({"job": job, "mpitune_file": str(mpitune_file), "mpitune_s": took,
                                                  "advise_s": doc["cost"]["seconds"], "command": command},
                                                 indent=2) + "\n")
    print(summarize(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
