"""What ``ardlab advise`` answers, from what it measured: a short table (library, setting, predicted and measured
speedup over the library's default with intervals, verdict), the lines to export per library (one env file each),
the tuning's cost and the training steps that repay it; the same as JSON and Markdown in the run folder.

Predicted: the geometric mean over the microbenchmark's rounds of the default's predicted Allreduce time per step over
the pick's (paired by round; its interval needs 5 rounds). Measured: the training check's img/s, pick over default,
paired by round (ardlab.stats.speedup_ci). "the default is within noise of the best here" is an answer too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ardlab.comm.libraries import DEFAULT, TUNED, library
from ardlab.stats import FASTER, speedup_ci, verdict


def _rate(check, lib: str, alg: str):
    """Per round, the rate (training steps, or runs of the user's program, a second) of one variant."""
    rows = check[(check["library"] == lib) & (check["algorithm"] == alg)]
    return rows.set_index(rows["round"].astype(int))["rate"].astype(float)


def _speedup(check, variant: tuple[str, str], baseline: tuple[str, str]) -> tuple[float, float, float]:
    """(speedup, lower, upper) of `variant` over `baseline` ((library, algorithm) each) in the training check, paired
    by round (rates: ardlab.stats.speedup_ci the other way round)."""
    a, b = _rate(check, *variant), _rate(check, *baseline)
    both = a.index.intersection(b.index)
    return speedup_ci(a[both].to_numpy(), b[both].to_numpy())


def rows(advice) -> list[dict]:
    """One row per library: its pick, the predicted and measured speedup over its default, the verdict."""
    out = []
    pred = advice.predictions
    for lib, alg in advice.picks.items():
        proofs = [p for p in advice.proofs if p["library"] == lib]
        row = {"library": lib, "setting": alg, "proof": "; ".join(f"{p['algorithm']}: {p['proof']}" for p in proofs)
               or "-", "predicted": 1.0, "predicted_low": math.nan,
               "predicted_high": math.nan, "measured": 1.0, "measured_low": math.nan, "measured_high": math.nan,
               "verdict": "the default is the best predicted here", "env": library(lib).algorithm_env(alg)}
        if alg != DEFAULT:
            p = pred[pred["library"] == lib].pivot_table(index="round", columns="algorithm",
                                                         values="predicted_us_per_step")[[DEFAULT, alg]].dropna()
            row["predicted"], row["predicted_low"], row["predicted_high"] = speedup_ci(p[DEFAULT], p[alg])
            m, lo, hi = _speedup(advice.check, (lib, alg), (lib, DEFAULT))
            row.update(measured=m, measured_low=lo, measured_high=hi)
            v = verdict(lo, hi)
            row["verdict"] = ("faster than the default" if v == FASTER else
                              "the default is within noise of the best here" if lo == lo and lo <= 1 <= hi else v)
        row.update(tuned=math.nan, tuned_low=math.nan, tuned_high=math.nan)
        if lib in advice.tuned and (advice.check["algorithm"] == TUNED).any():
            row["tuned"], row["tuned_low"], row["tuned_high"] = _speedup(advice.check, (lib, TUNED), (lib, DEFAULT))
        out.append(row)
    return out


def step_parts(advice) -> list[dict]:
    """Per library and setting of the training check, its step taken apart (medians over the rounds, seconds): the
    step, the time inside Allreduce timed in the training itself (ardlab.comm.calltimer), the rest, and the
    microbenchmark's prediction of the Allreduce for the same calls (none for a tuned file). Empty where the check has
    no timed steps (one's own program, timed as whole launches)."""
    check, pred = advice.check, advice.predictions
    if "allreduce_in_step_s" not in check or check["allreduce_in_step_s"].replace("", np.nan).isna().all():
        return []
    predicted = pred.groupby(["library", "algorithm"])["predicted_us_per_step"].median() / 1e6
    out = []
    for (lib, alg), g in check.groupby(["library", "algorithm"], sort=True):
        step = g["step_s"].astype(float).median()
        inside = g["allreduce_in_step_s"].replace("", np.nan).astype(float).median()
        out.append({"library": lib, "setting": alg, "step_s": step, "allreduce_s": inside, "rest_s": step - inside,
                    "predicted_allreduce_s": float(predicted.get((lib, alg), np.nan))})
    return out


def _paired_median(check, column: str, a: tuple[str, str], b: tuple[str, str]) -> float:
    """The median over rounds of `column`, variant `a` less variant `b` in the same round."""
    def per_round(lib, alg):
        rows = check[(check["library"] == lib) & (check["algorithm"] == alg)]
        return rows.set_index(rows["round"].astype(int))[column].replace("", np.nan).astype(float)

    return float((per_round(*a) - per_round(*b)).dropna().median())


def step_gaps(advice) -> list[str]:
    """In words, for each library's default against the default with the shortest step: how much shorter that step
    is, how much of the difference is Allreduce (timed in training, paired by round), and what the microbenchmark
    predicted; said plainly where most of the gap is not the Allreduce."""
    parts = [p for p in step_parts(advice) if p["setting"] == DEFAULT]
    if len(parts) < 2:
        return []
    fastest = min(parts, key=lambda p: p["step_s"])
    base = (fastest["library"], DEFAULT)
    out = []
    for p in parts:
        if p is fastest:
            continue
        other = (p["library"], DEFAULT)
        step = _paired_median(advice.check, "step_s", other, base)
        inside = _paired_median(advice.check, "allreduce_in_step_s", other, base)
        predicted = p["predicted_allreduce_s"] - fastest["predicted_allreduce_s"]
        line = (f"{library(fastest['library']).display}'s step is {step * 1e3:.0f} ms shorter than "
                f"{library(p['library']).display}'s; {inside * 1e3:.0f} ms of that is Allreduce (timed in training; "
                f"the microbenchmark predicted {predicted * 1e3:.1f} ms)")
        if abs(inside) < 0.5 * abs(step):
            line += (": most of the gap is in the rest of the step (compute, the framework, ranks waiting for one "
                     "another or sharing cores), not in the Allreduce")
        out.append(line + ".")
    return out


def overall(advice) -> dict:
    """The fastest setting of any library in the training check (the highest geometric mean img/s over the rounds),
    and its speedup over every library's default, paired by round (all were measured in the same rounds)."""
    check = advice.check
    means = {(lib, alg): float(np.exp(np.log(g["rate"].astype(float)).mean()))
             for (lib, alg), g in check.groupby(["library", "algorithm"])}
    lib, alg = max(means, key=means.get)
    over = {}
    for other in advice.picks:
        m, lo, hi = _speedup(check, (lib, alg), (other, DEFAULT))
        over[other] = {"speedup": m, "low": None if lo != lo else lo, "high": None if hi != hi else hi}
    return {"library": lib, "setting": alg, "over_defaults": over}


def cost(advice, table: list[dict]) -> dict:
    """The tuning's wall time, and per library the training steps (or runs of the user's program: Job.unit) whose
    saved time repays it (None where the pick saves nothing measurable)."""
    total = advice.seconds.get("total", sum(advice.seconds.values()))
    repay = {}
    for row in table:
        base = _rate(advice.check, row["library"], DEFAULT)
        saved = (1 / base.median()) * (1 - 1 / row["measured"]) if row["measured"] > 1 else 0.0
        repay[row["library"]] = math.ceil(total / saved) if saved > 0 and row["verdict"].startswith("faster") \
            else None
    return {"seconds": round(total, 1), "unit": advice.job.unit, "steps_to_repay": repay}


def exports(lib: str, alg: str, tuned: str | None = None, *, srun: bool = False) -> str:
    """An env file: the settings that force `alg` in `lib`, to `source` before launching the job; with `tuned`, the
    settings that make the library select per size from that file follow, commented out, as the alternative; with
    `srun`, what the library's ranks need when srun starts them from its environment (the table's srun_env and
    program_env) and the srun flag, first."""
    import shlex

    from ardlab.comm.launch import env_prefix, is_path_list

    row = library(lib)
    env = row.algorithm_env(alg)
    head = f"# ardlab advise: {row.display}, {alg}\n"
    if srun:
        head += f"# launch the job's ranks with: srun --mpi={row.srun_mpi} ...\n"
        head += "".join(f"export {k}={shlex.quote(v)}\n" for k, v in row.srun_env.items())
        for k, v in row.program_env.items():
            v = shlex.quote(v.format(prefix=env_prefix(lib)))
            head += f"export {k}={v}${{{k}:+:${k}}}\n" if is_path_list(k) else f"export {k}={v}\n"
    body = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()) if env else \
        "# the library's default selection: nothing to set\n"
    if tuned:
        body += (f"# or, the library selecting per size from the tuned file {tuned}, instead of the lines above:\n"
                 + "".join(f"# export {k}={shlex.quote(str(v))}\n" for k, v in library(lib).tuned_env(tuned).items()))
    return head + body


def markdown(advice, table: list[dict], spent: dict, best: dict | None = None) -> str:
    def ci(m, lo, hi):
        return f"{m:.2f}x" if lo != lo else f"{m:.2f}x [{lo:.2f}, {hi:.2f}]"

    job = advice.job
    what = f"{job.model} ({job.framework})" if job.model else f"`{job.name}`"
    lines = [f"# ardlab advise: {what}, {job.ranks} ranks on {job.nodes} node(s)", "",
             "| library | setting | predicted | measured | verdict | proof of the forced setting "
             "| tuned file, measured |",
             "|---|---|---|---|---|---|---|"]
    for r in table:
        lines.append(f"| {library(r['library']).display} | {r['setting']} | "
                     f"{ci(r['predicted'], r['predicted_low'], r['predicted_high'])} | "
                     f"{ci(r['measured'], r['measured_low'], r['measured_high'])} | {r['verdict']} | {r['proof']} | "
                     + (f"{ci(r['tuned'], r['tuned_low'], r['tuned_high'])} |" if r["tuned"] == r["tuned"] else "- |"))
    if best:
        over = ", ".join(f"{ci(v['speedup'], v['low'] if v['low'] is not None else math.nan, v['high'] or math.nan)}"
                         f" over {library(lib).display}'s default" for lib, v in best["over_defaults"].items()
                         if not (lib == best["library"] and best["setting"] == DEFAULT))
        lines += ["", f"Fastest in training here: **{library(best['library']).display}, {best['setting']}**"
                  + (f" ({over})." if over else ".")]
    lines += ["", f"Speedups over each library's default (predicted: the microbenchmark's rounds; measured: "
              f"{advice.settings.check_rounds} paired training rounds, per {job.unit}, 95% intervals). The tuning took "
              f"{spent['seconds'] / 60:.1f} min."]
    for lib, n in spent["steps_to_repay"].items():
        if n is not None:
            lines.append(f"- {library(lib).display}: repaid after {n} of the job's {spent['unit']}s.")
    parts = step_parts(advice)
    if parts:
        lines += ["", "The step taken apart (medians over the check's rounds; Allreduce: the seconds inside it, timed "
                  "in the training itself; predicted: the microbenchmark's Allreduce for the same calls):", "",
                  "| library | setting | step | Allreduce | rest | predicted Allreduce |", "|---|---|---|---|---|---|"]
        lines += [f"| {library(p['library']).display} | {p['setting']} | {p['step_s'] * 1e3:.0f} ms | "
                  f"{p['allreduce_s'] * 1e3:.0f} ms | {p['rest_s'] * 1e3:.0f} ms | "
                  + ("-" if p["predicted_allreduce_s"] != p["predicted_allreduce_s"]
                     else f"{p['predicted_allreduce_s'] * 1e3:.0f} ms") + " |" for p in parts]
        lines += [""] + [f"- {g}" for g in step_gaps(advice)]
    elif job.command:
        lines += ["", "One's own program is timed as whole launches (start-up included): its step is not taken apart."]
    lines += ["", "To use a setting: `source <library>.env` (in this folder) before launching the job."]
    return "\n".join(lines) + "\n"


def write(advice, output: Path) -> list[Path]:
    """answer.json, answer.md and one <library>.env per library into `output`."""
    from ardlab.results import atomic_open

    table = rows(advice)
    spent = cost(advice, table)
    best = overall(advice)
    paths = []
    for lib, alg in advice.picks.items():
        path = output / f"{lib}.env"
        with atomic_open(path, "w") as f:
            f.write(exports(lib, alg, advice.tuned.get(lib), srun=advice.job.launcher == "srun"))
        paths.append(path)
    kept = {k: getattr(advice.settings, k) for k in ("budget_s", "rounds", "check_rounds", "check_steps", "seed")}
    doc = {"job": vars(advice.job), "libraries": advice.settings.libraries, "settings": kept, "race": advice.race,
           "proofs": advice.proofs,
           "answer": [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in table],
           "overall": best, "cost": spent,
           "steps": [{k: (None if isinstance(v, float) and v != v else v) for k, v in p.items()}
                     for p in step_parts(advice)], "step_gaps": step_gaps(advice)}
    with atomic_open(output / "answer.json", "w") as f:
        json.dump(doc, f, indent=2, default=str)
    with atomic_open(output / "answer.md", "w") as f:
        f.write(markdown(advice, table, spent, best))
    return paths + [output / "answer.json", output / "answer.md"]
