"""An advice confirmed independently: its paired, interleaved training check made again afterwards (new launches, a
new seed and order), each library's pick and tuned file against its default and the fastest setting against every
library's default, beside what the advice measured; an interval of the confirmation that does not overlap the
advice's is said, not hidden.

    ardlab advise-confirm results/advise/<run> [--rounds 5] [--seed N]

Reads the run folder (``answer.json``: the job, the libraries, the picks; ``tuned/``: the tuned files) and writes
``confirm.csv`` (its training rows) and ``confirm.md`` into it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ardlab.advise.answer import _speedup
from ardlab.comm.libraries import DEFAULT, TUNED, library


def load(folder: Path):
    """(job, settings, picks, tuned files, the advice's comparisons) of an advice's run folder."""
    from ardlab.advise.run import Job, Settings, tuned_files

    doc_path = Path(folder) / "answer.json"
    if not doc_path.is_file():
        raise FileNotFoundError(f"{doc_path} does not exist: give the run folder of an `ardlab advise`")
    doc = json.loads(doc_path.read_text())
    job = Job(**doc["job"])
    kept = doc.get("settings", {})
    settings = Settings(doc["libraries"], budget_s=0, check_rounds=kept.get("check_rounds", 5),
                        check_steps=kept.get("check_steps", 3), seed=kept.get("seed", 0))
    picks = {r["library"]: r["setting"] for r in doc["answer"]}
    tuned = {lib: str(p) for lib, p in tuned_files(Path(folder), job, picks).items()}
    return job, settings, picks, tuned, comparisons_of(doc)


def comparisons_of(doc: dict) -> list[dict]:
    """What the advice measured: per library its pick and tuned file over its default, and the fastest setting over
    every library's default (variant, baseline, speedup, low, high)."""
    out = []
    for r in doc["answer"]:
        lib = r["library"]
        if r["setting"] != DEFAULT:
            out.append(_comparison((lib, r["setting"]), (lib, DEFAULT), r["measured"], r["measured_low"],
                                   r["measured_high"]))
        if r.get("tuned") is not None:
            out.append(_comparison((lib, TUNED), (lib, DEFAULT), r["tuned"], r["tuned_low"], r["tuned_high"]))
    best = doc["overall"]
    seen = {(c["variant"], c["baseline"]) for c in out}
    for other, v in best["over_defaults"].items():
        pair = ((best["library"], best["setting"]), (other, DEFAULT))
        if pair[0] != pair[1] and pair not in seen:
            out.append(_comparison((best["library"], best["setting"]), (other, DEFAULT), v["speedup"], v["low"],
                                   v["high"]))
    return out


def _comparison(variant, baseline, m, lo, hi) -> dict:
    nan = math.nan
    return {"variant": variant, "baseline": baseline, "advice": m,
            "advice_low": nan if lo is None else lo, "advice_high": nan if hi is None else hi}


def confirm(folder: Path, *, rounds: int | None = None, seed: int | None = None, progress: bool = True):
    """The check made again: (the job, its training rows, ``compare``'s table)."""
    from ardlab.advise.run import check_inputs, check_training

    job, settings, picks, tuned, compared = load(folder)
    settings.check_rounds = rounds or settings.check_rounds
    settings.seed = settings.seed + 1000 if seed is None else seed  # another order than the advice's check
    settings.progress = progress
    check_inputs(job, settings)
    check = check_training(job, settings, picks, tuned)
    return job, check, compare(compared, check)


def compare(compared: list[dict], check) -> list[dict]:
    """Each of the advice's comparisons with the confirmation's speedup (paired by round in `check`), both intervals
    and whether they overlap (None where either has none)."""
    table = []
    for c in compared:
        m, lo, hi = _speedup(check, c["variant"], c["baseline"])
        bounds = (lo, hi, c["advice_low"], c["advice_high"])
        overlap = None if any(math.isnan(x) for x in bounds) else max(lo, c["advice_low"]) <= min(hi, c["advice_high"])
        table.append({**c, "confirmed": m, "confirmed_low": lo, "confirmed_high": hi, "overlap": overlap})
    return table


def markdown(folder: Path, table: list[dict], rounds: int, unit: str) -> str:
    def ci(m, lo, hi):
        return f"{m:.2f}x" if math.isnan(lo) else f"{m:.2f}x [{lo:.2f}, {hi:.2f}]"

    def name(v):
        return f"{library(v[0]).display} {v[1]}"

    lines = [f"# ardlab advise-confirm: {folder}", "",
             f"The advice's training check made again afterwards ({rounds} paired, interleaved rounds, its own order; "
             f"per {unit}, 95% intervals).", "",
             "| setting | over | advice measured | confirmation | intervals overlap |", "|---|---|---|---|---|"]
    for r in table:
        said = {True: "yes", False: "**no**", None: "-"}[r["overlap"]]
        lines.append(f"| {name(r['variant'])} | {name(r['baseline'])} | "
                     f"{ci(r['advice'], r['advice_low'], r['advice_high'])} | "
                     f"{ci(r['confirmed'], r['confirmed_low'], r['confirmed_high'])} | {said} |")
    n = sum(r["overlap"] is True for r in table)
    lines += ["", f"{n} of {len(table)} intervals overlap the advice's."]
    return "\n".join(lines) + "\n"


def write(folder: Path, check, table: list[dict], rounds: int, unit: str) -> list[Path]:
    from ardlab.results import atomic_open

    folder = Path(folder)
    with atomic_open(folder / "confirm.csv", "w", newline="") as f:
        check.to_csv(f, index=False)
    with atomic_open(folder / "confirm.md", "w") as f:
        f.write(markdown(folder, table, rounds, unit))
    return [folder / "confirm.csv", folder / "confirm.md"]
