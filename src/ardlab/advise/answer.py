"""What ``ardlab advise`` answers, from what it measured: a short table (library, setting, predicted and measured
speedup over the library's default with intervals, verdict), the lines to export per library (one env file each),
the tuning's cost and the training steps that repay it; the same as JSON and Markdown in the run folder.

Predicted: the geometric mean over the microbenchmark's rounds of the default's predicted Allreduce time per step over
the pick's (paired by round; its interval needs 5 rounds). Measured: the training check's img/s, pick over default,
paired by round (ardlab.stats.speedup_ci). "the default is within noise of the best here" is an answer too.

The answer's first line is a recommendation (``recommendation``): the setting of any library that trained fastest,
with its speedup over every other library's default and over its own library's default, each interval adjusted for
its being the largest of the variants checked, and the steps that repay the tuning (a library's default it is within
noise of may be kept); or, where it beats no default beyond noise, "keep the library you have". Its status is the
exit code of ``ardlab advise``: ANSWERED (0) or INCONCLUSIVE (3); a failure exits 2. ``answer.json`` carries
SCHEMA_VERSION.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from ardlab.comm.libraries import DEFAULT, TUNED, library
from ardlab.stats import FASTER, SLOWER, max_adjusted_ci, speedup_ci, verdict

# answer.json's layout: 2 adds the recommendation, the steps taken apart and this field; 3 the stage the answer is of
# (`stage`: defaults or complete), when each stage's answer was written (`stages`) and why a later one did not run
SCHEMA_VERSION = 3
ANSWERED, INCONCLUSIVE = "answered", "inconclusive"
# The stage an answer is of (``Advice.stage``): each library's default alone, first; then everything
DEFAULTS, COMPLETE = "defaults", "complete"
EXIT_CODES = {ANSWERED: 0, INCONCLUSIVE: 3}  # ardlab advise's exit status per recommendation status (failed: 2)


def _rate(check, lib: str, alg: str, column: str = "rate"):
    """Per round, the rate (training steps, or runs of the user's program, a second) of one variant; or its `column`
    (empty: NaN)."""
    rows = check[(check["library"] == lib) & (check["algorithm"] == alg)]
    return rows.set_index(rows["round"].astype(int))[column].replace("", np.nan).astype(float)


def _steps_to_repay(check, lib: str, speedup: float, seconds: float) -> int | None:
    """The units (steps, or runs) of `lib`'s default after which a `speedup` over it repays `seconds` of tuning: from
    the seconds a unit of the default took (`unit_s`: a training step, not an image; a run of one's own program)."""
    saved = _rate(check, lib, DEFAULT, "unit_s").median() * (1 - 1 / speedup)  # seconds a unit saved
    return math.ceil(seconds / saved) if saved > 0 else None


def _speedup(check, variant: tuple[str, str], baseline: tuple[str, str], n: int | None = None
             ) -> tuple[float, float, float]:
    """(speedup, lower, upper) of `variant` over `baseline` ((library, algorithm) each) in the training check, paired
    by round (rates: ardlab.stats.speedup_ci the other way round); with `n`, of a variant chosen as the largest of `n`
    comparisons, its interval at level 1 - 0.05 / n (ardlab.stats.max_adjusted_ci)."""
    a, b = _rate(check, *variant), _rate(check, *baseline)
    both = a.index.intersection(b.index)
    if n is None:
        return speedup_ci(a[both].to_numpy(), b[both].to_numpy())
    return max_adjusted_ci(a[both].to_numpy(), b[both].to_numpy(), max(1, n))


def rows(advice) -> list[dict]:
    """One row per library: its pick, the predicted and measured speedup over its default, the verdict."""
    from ardlab.advise.prove import PICKABLE

    out = []
    pred = advice.predictions
    for lib, alg in advice.picks.items():
        proofs = [p for p in advice.proofs if p["library"] == lib]
        rejected = [p for p in proofs if p["proof"] not in PICKABLE]
        if advice.stage == DEFAULTS:
            why = "only the defaults checked so far" if not advice.stopped else "only the defaults checked (the budget)"
        elif rejected:
            why = (f"the default: its {len(rejected)} better-predicted candidate(s) ran something else ("
                   + ", ".join(p["algorithm"] for p in rejected) + ")")
        else:
            why = "the default is the best predicted here"
        row = {"library": lib, "setting": alg, "proof": "; ".join(f"{p['algorithm']}: {p['proof']}" for p in proofs)
               or "-", "predicted": 1.0, "predicted_low": math.nan,
               "predicted_high": math.nan, "measured": 1.0, "measured_low": math.nan, "measured_high": math.nan,
               "verdict": why, "env": library(lib).algorithm_env(alg)}
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
    predicted = ({} if pred is None else  # the first stage: no microbenchmark yet
                 pred.groupby(["library", "algorithm"])["predicted_us_per_step"].median() / 1e6)
    out = []
    for (lib, alg), g in check.groupby(["library", "algorithm"], sort=True):
        step = g["step_s"].astype(float).median()
        inside = g["allreduce_in_step_s"].replace("", np.nan).astype(float).median()
        out.append({"library": lib, "setting": alg, "step_s": step, "allreduce_s": inside, "rest_s": step - inside,
                    "predicted_allreduce_s": float(predicted.get((lib, alg), np.nan))})
    return out


def _ms(seconds: float) -> str:
    """Seconds as milliseconds, 3 significant digits below a second and whole milliseconds from there (never an
    exponent: 1620 ms, not 1.62e+03 ms); "-" where unknown."""
    if seconds != seconds:
        return "-"
    ms = seconds * 1e3
    return f"{ms:.0f} ms" if abs(ms) >= 999.5 else f"{ms:.3g} ms"


def step_gaps(advice) -> list[str]:
    """In words, for each library's default against the default with the shortest step: how much shorter that step
    is, how much of the difference is Allreduce (timed in training) and what the microbenchmark predicted, from the
    medians the step table shows (so the words and the table agree; a median of per-round differences can have the
    other sign); said plainly where most of the gap is not the Allreduce."""
    parts = [p for p in step_parts(advice) if p["setting"] == DEFAULT]
    if len(parts) < 2:
        return []
    fastest = min(parts, key=lambda p: p["step_s"])
    out = []
    for p in parts:
        if p is fastest:
            continue
        step = p["step_s"] - fastest["step_s"]
        inside = p["allreduce_s"] - fastest["allreduce_s"]
        predicted = p["predicted_allreduce_s"] - fastest["predicted_allreduce_s"]
        said = "" if predicted != predicted else f"; the microbenchmark predicted {_ms(predicted)}"
        name, other_name = library(fastest["library"]).display, library(p["library"]).display
        line = f"{name}'s step is {_ms(step)} shorter than {other_name}'s; "  # step >= 0: the shortest median
        if 0 <= inside <= step:
            line += f"{_ms(inside)} of that is Allreduce (timed in training{said})"
        elif inside > step:  # the Allreduce alone more than the gap: the rest of the step goes the other way
            line += (f"its Allreduce takes {_ms(inside)} less, more than the whole gap, so the rest of its step is "
                     f"{_ms(inside - step)} longer (timed in training{said})")
        else:  # the Allreduce goes the other way: the rest of the step carries more than the whole gap
            line += (f"its Allreduce takes {_ms(-inside)} longer, so the rest of its step is {_ms(step - inside)} "
                     f"shorter (timed in training{said})")
        if inside < 0.5 * step:
            line += (": most of the gap is in the rest of the step (compute, the framework, ranks waiting for one "
                     "another or sharing cores), not in the Allreduce")
        out.append(line + ".")
    return out


def _geomean_rates(check) -> dict[tuple[str, str], float]:
    """Per (library, setting) of the check, the geometric mean rate over its rounds."""
    return {(lib, alg): float(np.exp(np.log(g["rate"].astype(float)).mean()))
            for (lib, alg), g in check.groupby(["library", "algorithm"])}


def _interval(m: float, lo: float, hi: float) -> dict:
    return {"speedup": m, "low": None if lo != lo else lo, "high": None if hi != hi else hi}


def overall(advice) -> dict:
    """The fastest setting of any library in the training check (the highest geometric mean rate over the rounds),
    and its speedup over every library's default, paired by round (all were measured in the same rounds), each
    interval adjusted for the fastest being the largest of the `of` variants checked."""
    check = advice.check
    means = _geomean_rates(check)
    lib, alg = max(means, key=means.get)
    over = {other: _interval(*_speedup(check, (lib, alg), (other, DEFAULT), len(means) - 1))
            for other in advice.picks}
    return {"library": lib, "setting": alg, "of": len(means), "over_defaults": over}


def recommendation(advice, spent: dict | None = None) -> dict:
    """What to do, from the training check (see the module's docstring): the setting of any library that trained
    fastest (the evidence is its own: its library's default may be no faster than the others'); its speedup over every
    other library's default and over its own library's default (intervals adjusted: the largest of the variants
    checked); which defaults it beats and which it is within noise of; the steps (Job.unit) that repay the tuning's
    time against each library it beats; ANSWERED, or INCONCLUSIVE where it beats no default."""
    check, job = advice.check, advice.job
    means = _geomean_rates(check)
    n = len(means)
    lib, setting = max(means, key=means.get)
    within = None
    if setting != DEFAULT:  # chosen as the fastest of all n: adjusted as the "fastest in training" line is
        within = _interval(*_speedup(check, (lib, setting), (lib, DEFAULT), n - 1))
    total = (spent or {}).get("seconds") or advice.seconds.get("total", sum(advice.seconds.values()))
    over, beaten, tied, repay, other_wire = {}, [], [], {}, {}
    from ardlab.analysis.comparisons import wires  # pandas: the driver's environment has it, a library's need not

    ran_on = wires(check)  # a library on another wire than the fastest setting's is not compared as a library
    for other in advice.picks:
        if other == lib:
            continue
        mine, theirs = ran_on.get(f"{lib}/{setting}", ""), ran_on.get(f"{other}/{DEFAULT}", "")
        if mine and theirs and mine != theirs:
            other_wire[other] = f"{theirs}, against {mine}"
            continue
        # the fastest setting itself carries the evidence (the same interval as the "fastest in training" line's)
        m, lo, hi = _speedup(check, (lib, setting), (other, DEFAULT), n - 1)
        over[other] = _interval(m, lo, hi)
        if lo == lo and lo > 1:
            beaten.append(other)
            repay[other] = _steps_to_repay(check, other, m, total)
        else:
            tied.append(other)
    own_beaten = within is not None and within["low"] is not None and within["low"] > 1
    status = ANSWERED if beaten or own_beaten else INCONCLUSIVE
    text = _recommend_text(lib, setting, within, own_beaten, over, beaten, tied, repay, n, job.unit, status)
    if other_wire:
        text += " Not compared: " + "; ".join(f"{library(o).display}'s default ran on another wire ({w})"
                                               for o, w in other_wire.items()) + "."
    return {"status": status, "library": lib, "setting": setting, "of": n, "within_library": within,
            "over_defaults": over, "beats": beaten, "within_noise_of": tied, "steps_to_repay": repay,
            "other_wire": other_wire, "unit": job.unit, "text": text}


def _bytes(n: int) -> str:
    """A message size for a reader: 24 B, 2.96 MiB, 2 GiB."""
    for unit, f in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f:
            return f"{n / f:.3g} {unit}"
    return f"{n} B"


def _ci_text(v: dict) -> str:
    return f"{v['speedup']:.2f}x" if v["low"] is None else f"{v['speedup']:.2f}x [{v['low']:.2f}, {v['high']:.2f}]"


def _recommend_text(lib, setting, within, own_beaten, over, beaten, tied, repay, n, unit, status) -> str:
    """The recommendation in one sentence (the answer's first line)."""
    name = library(lib).display
    what = name if setting == DEFAULT else f"{name} with {'its tuned file' if setting == TUNED else setting}"
    if status == INCONCLUSIVE:
        largest = max(over.items(), key=lambda kv: kv[1]["speedup"], default=None)
        gain = (f" (the largest measured: {what if setting != DEFAULT else name + ' (its default)'} "
                f"{_ci_text(largest[1])} over {library(largest[0]).display}'s default, chosen as the fastest of {n} "
                "settings, interval adjusted)") if largest else ""
        return (f"**Keep the library you have**: nothing measured here beats another library's default, or a "
                f"library's own default, beyond noise{gain}.")
    parts = [f"{_ci_text(within)} over its default"] if own_beaten else []
    for other in beaten:
        cost = f", the tuning repaid after {repay[other]} {unit}s" if repay.get(other) else ""
        parts.append(f"{_ci_text(over[other])} over {library(other).display}'s default{cost}")
    text = f"**Use {what}**: " + "; ".join(parts)
    noise = ([f"{name}'s own default ({_ci_text(within)})"] if within is not None and not own_beaten else []) + [
        f"{library(o).display}'s default ({_ci_text(over[o])})" for o in tied]
    if noise:
        text += "; within noise of " + " and ".join(noise) + ", which may be kept"
    return text + f" (largest of {n} settings checked, intervals adjusted)."


def cost(advice, table: list[dict]) -> dict:
    """The tuning's wall time, and per library the training steps (or runs of the user's program: Job.unit) whose
    saved time repays it (None where the pick saves nothing measurable)."""
    total = advice.seconds.get("total", sum(advice.seconds.values()))
    repay = {}
    for row in table:
        repay[row["library"]] = _steps_to_repay(advice.check, row["library"], row["measured"], total) \
            if row["verdict"].startswith("faster") else None
    return {"seconds": round(total, 1), "unit": advice.job.unit, "steps_to_repay": repay}


# The variable an env file for srun takes the library's prefix from (none of this checkout's paths is written there).
PREFIX_VAR = "ARDLAB_MPI_PREFIX"


def exports(lib: str, alg: str, tuned: str | None = None, *, srun: bool = False, measured: str = "",
            tuned_measured: str = "", folder: Path | None = None) -> str:
    """An env file: the settings that force `alg` in `lib`, to `source` before launching the job, with what they
    measured (`measured`, over the library's default); with `tuned`, the settings that make the library select per
    size from that file follow, commented out, as the alternative, with its measured number (`tuned_measured`);
    with `srun`, what the library's ranks need when srun starts them from its environment (the table's srun_env and
    program_env, the library's prefix from PREFIX_VAR) and the srun flag, first. With `folder` (where the file is
    written), the tuned file is named relative to the env file's own folder, so that the file names no absolute
    path and works wherever the folder is copied."""
    import os
    import shlex

    from ardlab.comm.launch import is_path_list

    row = library(lib)
    env = row.algorithm_env(alg)
    head = f"# ardlab advise: {row.display}, {alg}" + (f": measured {measured} over its default" if measured else "")
    head += "\n"
    if srun:
        if row.slurm_start == "hydra":
            head += (f"# launch the job's ranks with {row.display}'s own mpiexec inside an allocation: mpiexec "
                     f"-launcher slurm -n <ranks> ... (srun --mpi={row.srun_mpi} can leave them in MPI_Init: "
                     f"docs/cluster.md)\n")
        else:
            head += f"# launch the job's ranks with: srun --mpi={row.srun_mpi} ...\n"
        head += "".join(f"export {k}={shlex.quote(v)}\n" for k, v in row.srun_env.items())
        if row.program_env:
            head += (f': "${{{PREFIX_VAR}:?set {PREFIX_VAR} to the prefix of {row.display} (the folder whose lib/ '
                     f'holds {row.soname}: ardlab\'s environment .envs/{lib}, or the site\'s install)}}"\n')
        for k, v in row.program_env.items():
            v = v.format(prefix=f"${{{PREFIX_VAR}}}")
            head += f'export {k}="{v}${{{k}:+:${k}}}"\n' if is_path_list(k) else f'export {k}="{v}"\n'
    body = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()) if env else \
        "# the library's default selection: nothing to set\n"
    if tuned:
        settings = library(lib).tuned_env(tuned)
        resolved = str(Path(tuned).resolve())
        if folder is not None and any(resolved in v for v in settings.values()):
            head += 'ardlab_advice=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # this file\'s folder\n'
            where = "$ardlab_advice/" + os.path.relpath(resolved, Path(folder).resolve())
            lines = [f'# export {k}="{v.replace(resolved, where)}"\n' for k, v in settings.items()]
        else:
            lines = [f"# export {k}={shlex.quote(str(v))}\n" for k, v in settings.items()]
        body += (f"# or, the library selecting per size from the tuned file {Path(tuned).name}"
                 + (f" (measured {tuned_measured} over its default)" if tuned_measured else "")
                 + ", instead of the lines above:\n" + "".join(lines))
    return head + body


def markdown(advice, table: list[dict], spent: dict, best: dict | None = None, recommended: dict | None = None
             ) -> str:
    def ci(m, lo, hi):
        return f"{m:.2f}x" if lo != lo else f"{m:.2f}x [{lo:.2f}, {hi:.2f}]"

    job = advice.job
    what = f"{job.model} ({job.framework})" if job.model else f"`{job.name}`"
    lines = [f"# ardlab advise: {what}, {job.ranks} ranks on {job.nodes} node(s)", ""]
    if recommended:
        lines += [recommended["text"], ""]
    if advice.stage == DEFAULTS:
        when = advice.stages[0]["written_at_s"] / 60 if advice.stages else spent["seconds"] / 60
        lines += [f"The first stage's answer (each library's default in paired training rounds, after {when:.1f} min): "
                  + (f"it stands, as {advice.stopped}." if advice.stopped else "the race, the proven picks and tuned "
                     "files and their check in new paired rounds follow, and rewrite it."), ""]
    lines += ["| library | setting | predicted | measured | verdict | proof of the forced setting "
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
        lines += ["", f"Fastest in training here: **{library(best['library']).display}, {best['setting']}**, the "
                  f"largest of {best['of']} settings checked" + (f" ({over}; intervals adjusted for it)." if over
                                                                   else ".")]
    lines += ["", f"Speedups over each library's default (predicted: the microbenchmark's rounds; measured: "
              f"{advice.settings.check_rounds} paired training rounds, per {job.unit}, 95% intervals). The tuning took "
              f"{spent['seconds'] / 60:.1f} min."]
    for lib, n in spent["steps_to_repay"].items():
        if n is not None:
            lines.append(f"- {library(lib).display}: repaid after {n} of the job's {spent['unit']}s.")
    if advice.tuned_proofs:
        lines += ["", "What the tuned files rest on (each size range's algorithm proven forced, then the file itself "
                  "probed in that range):"]
        for lib in sorted({p["library"] for p in advice.tuned_proofs}):
            lines.append(f"- {library(lib).display}: " + "; ".join(
                f"{_bytes(p['lo_bytes'])}-{_bytes(p['hi_bytes'])} {p['algorithm']}: forced {p['forced']}, in the file "
                f"{p['in_file']}" for p in advice.tuned_proofs if p["library"] == lib))
    if advice.tuned_log:
        lines += ["", "Left out of the tuned files (a tuned file holds only what ran what it names here):"]
        lines += [f"- {library(e['library']).display}, {e['algorithm']}: {e['left_out']}" for e in advice.tuned_log]
    parts = step_parts(advice)
    if parts:
        lines += ["", "The step taken apart (medians over the check's rounds; Allreduce: the seconds inside it, timed "
                  "in the training itself; predicted: the microbenchmark's Allreduce for the same calls):", "",
                  "| library | setting | step | Allreduce | rest | predicted Allreduce |", "|---|---|---|---|---|---|"]
        lines += [f"| {library(p['library']).display} | {p['setting']} | {_ms(p['step_s'])} | "
                  f"{_ms(p['allreduce_s'])} | {_ms(p['rest_s'])} | {_ms(p['predicted_allreduce_s'])} |"
                  for p in parts]
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
    recommended = recommendation(advice, spent)
    paths = []
    for r in table:
        lib, alg = r["library"], r["setting"]

        def measured(m, lo, hi, what=""):
            slower = ", slower" if verdict(lo, hi) == SLOWER else ""
            return (f"{m:.2f}x" if lo != lo else f"{m:.2f}x [{lo:.2f}, {hi:.2f}]") + slower if m == m else what

        path = output / f"{lib}.env"
        with atomic_open(path, "w") as f:
            f.write(exports(lib, alg, advice.tuned.get(lib), srun=advice.job.launcher == "srun",
                            measured="" if alg == DEFAULT else measured(r["measured"], r["measured_low"],
                                                                        r["measured_high"]),
                            tuned_measured=measured(r["tuned"], r["tuned_low"], r["tuned_high"], "not measured"),
                            folder=output))
        paths.append(path)
    kept = {k: getattr(advice.settings, k) for k in ("budget_s", "rounds", "check_rounds", "check_steps", "seed")}
    doc = {"schema_version": SCHEMA_VERSION, "recommendation": recommended, "stage": advice.stage,
           "stages": advice.stages, "stopped": advice.stopped,
           "job": vars(advice.job), "libraries": advice.settings.libraries, "settings": kept, "race": advice.race,
           "proofs": advice.proofs, "tuned_proofs": advice.tuned_proofs, "tuned_left_out": advice.tuned_log,
           "answer": [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()} for r in table],
           "overall": best, "cost": spent,
           "steps": [{k: (None if isinstance(v, float) and v != v else v) for k, v in p.items()}
                     for p in step_parts(advice)], "step_gaps": step_gaps(advice)}
    with atomic_open(output / "answer.json", "w") as f:
        json.dump(doc, f, indent=2, default=str)
    with atomic_open(output / "answer.md", "w") as f:
        f.write(markdown(advice, table, spent, best, recommended))
    return paths + [output / "answer.json", output / "answer.md"]
