"""The comparisons a run's tables make, each from variants measured in the same paired, interleaved rounds.

Every function takes the rows of ``ardlab.analysis.read`` and returns a tidy table (pandas). Pairing: two
variants are compared only within one comparison group (the ``group`` column), round by round (``round``). Each
variant's median carries a nonparametric interval, each speedup a paired bootstrap interval and a verdict
(``ardlab.stats``). Speedup > 1 means the variant is faster than what it is compared with.

- ``microbench_speedup``: every algorithm against its library's default, per size;
- ``across_libraries``: per size, the best (library, algorithm) against each library's default and the worst;
- ``best_ranges``: per library, the best algorithm per size range (and whether it beats the default);
- ``training``: img/s of every (library, algorithm), against its library's default and the group's worst;
- ``training_defaults``: each library's default against every other library's default, per training group (every
  pair, so no pair is chosen after the data);
- ``loss_check`` / ``agreeing``: whether each training variant ended its rounds with the loss of the others (at 2
  ranks it must, exactly); the variants that did not are left out of every claim;
- ``tuned``: each tuned file against its library's default and the best single algorithm, in the same rounds;
- ``drift``: each library default's per-round reference over the run, with a trend test;
- ``claims``: every significant difference the tables state (what ``reproduce`` checks in a second run);
- ``site_vs_wheel``: each site's own build of a family (``ardlab.comm.sites``) against that family's wheel, for every
  algorithm both ran, per size and per training group.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats as sps

from ardlab.analysis.study_claims import ACROSS, BEST, WORST, roles
from ardlab.comm.libraries import DEFAULT, LIBRARIES, TUNED
from ardlab.comm.transport import wire
from ardlab.results import TRANSPORT_COLUMNS
from ardlab.stats import FASTER, SAME, SLOWER, TOO_FEW, geomean_speedup_ci, median_ci, speedup_ci, verdict

TUNED_PHASE = "microbench_tuned/"  # groups whose name starts so measure tuned files (ardlab.study.config)
TRAINING_GROUP = ["group", "framework", "model", "parallel_mode", "ranks", "nodes"]  # a training comparison's setting
# The verdict of a comparison between variants whose rows ran on different wires (ardlab.comm.transport.wire): it
# compares the networks, so it is stated with its transports and never counted as a claim.
TRANSPORTS_DIFFER = "transports differ"


def by_round(g: pd.DataFrame, value: str) -> pd.DataFrame:
    """round x variant ('library/algorithm') table of `value` (one row per round)."""
    return g.assign(variant=g.library + "/" + g.algorithm).pivot_table(
        index="round", columns="variant", values=value, aggfunc="first")


def median_summary(x: pd.Series) -> dict:
    med, lo, hi, level = median_ci(x.to_numpy())
    return {"median": med, "ci_low": lo, "ci_high": hi, "ci_level": level, "rounds": int(x.notna().sum())}


def paired_speedup(faster_if_lower: bool, base: pd.Series, other: pd.Series, prefix: str) -> dict:
    """Speedup of `other` over `base` (aligned by round) with its interval and verdict, keys prefixed."""
    if faster_if_lower:
        sp, lo, hi = speedup_ci(base.to_numpy(), other.to_numpy())
    else:  # rates: higher is faster
        sp, lo, hi = speedup_ci(other.to_numpy(), base.to_numpy())
    return {f"{prefix}": sp, f"{prefix}_ci_low": lo, f"{prefix}_ci_high": hi, f"{prefix}_verdict": verdict(lo, hi)}


def wires(g: pd.DataFrame) -> dict[str, str]:
    """Per variant ('library/algorithm'): the wires its rows ran on within a node and between nodes
    (``transport.wire``), "" where its rows recorded no transport (files from before rows carried it)."""
    def said(intra: str, inter: str) -> str:
        return ", ".join(f"{where} {w}" for where, w in (("within a node", wire(intra)), ("between nodes",
                                                                                        wire(inter))) if w)

    # rows without the columns read as rows of files from before them (ardlab.results' era fill: not recorded)
    intra, inter = (g.get(c, pd.Series("", index=g.index)).fillna("") for c in TRANSPORT_COLUMNS)
    w = pd.Series([said(a, b) for a, b in zip(intra, inter)], index=g.index)
    variants = g.library + "/" + g.algorithm
    return {variant: " or ".join(sorted(set(seen) - {""})) for variant, seen in w.groupby(variants)}


def refuse_across_wires(row: dict, ran_on: dict[str, str], base: str, other: str, prefix: str) -> dict:
    """`row` with the comparison of `other` against `base` (its `prefix` columns) refused where the two ran on
    different wires: its verdict TRANSPORTS_DIFFER, the wires named in `<prefix>_transports`."""
    a, b = ran_on.get(base, ""), ran_on.get(other, "")
    if a and b and a != b:
        row[f"{prefix}_verdict"] = TRANSPORTS_DIFFER
        row[f"{prefix}_transports"] = f"{other}: {b}; {base}: {a}"
    return row


def main_phase(b: pd.DataFrame) -> pd.DataFrame:
    return b[~b.group.str.startswith(TUNED_PHASE)]


def microbench_speedup(b: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (group, ranks, nodes, size), g in main_phase(b).groupby(["group", "ranks", "nodes", "size_bytes"]):
        piv = by_round(g, "avg_us")
        impl = dict(zip(g.library + "/" + g.algorithm, g.implementation))
        for variant in piv.columns:
            lib, alg = variant.split("/", 1)
            s = median_summary(piv[variant])
            row = {"group": group, "library": lib, "ranks": ranks, "nodes": nodes, "size_bytes": size,
                   "algorithm": alg, "implementation": impl[variant], "median_us": s["median"],
                   "ci_low_us": s["ci_low"], "ci_high_us": s["ci_high"], "ci_level": s["ci_level"],
                   "rounds": s["rounds"]}
            d = f"{lib}/{DEFAULT}"
            row.update(paired_speedup(True, piv[d], piv[variant], "speedup_vs_default") if d in piv else
                       {"speedup_vs_default": np.nan, "speedup_vs_default_ci_low": np.nan,
                        "speedup_vs_default_ci_high": np.nan, "speedup_vs_default_verdict": TOO_FEW})
            rows.append(row)
    return pd.DataFrame(rows)


def across_libraries(b: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (group, ranks, nodes, size), g in main_phase(b).groupby(["group", "ranks", "nodes", "size_bytes"]):
        piv = by_round(g, "avg_us")
        med = piv.median()
        best, worst = med.idxmin(), med.idxmax()
        row = {"group": group, "ranks": ranks, "nodes": nodes, "size_bytes": size, "best": best,
               "best_median_us": med[best], "worst": worst}
        ran_on = wires(g)
        row.update(paired_speedup(True, piv[worst], piv[best], "speedup_vs_worst"))
        refuse_across_wires(row, ran_on, worst, best, "speedup_vs_worst")
        for lib in LIBRARIES:
            d = f"{lib}/{DEFAULT}"
            if d in piv:
                row.update(paired_speedup(True, piv[d], piv[best], f"speedup_vs_{lib}_default"))
                refuse_across_wires(row, ran_on, d, best, f"speedup_vs_{lib}_default")
        rows.append(row)
    return pd.DataFrame(rows)


def best_ranges(speedups: pd.DataFrame) -> pd.DataFrame:
    """From ``microbench_speedup``: per group and library, the best algorithm (median) per size, merged into
    ranges of the same winner; how many of the range's sizes it beats the default significantly."""
    rows = []
    for (group, lib), g in speedups.groupby(["group", "library"]):
        winners = g.loc[g.groupby("size_bytes").median_us.idxmin()].sort_values("size_bytes")
        for w in winners.itertuples():
            faster = int(w.speedup_vs_default_verdict == "faster")
            if rows and (rows[-1]["group"], rows[-1]["library"], rows[-1]["best_algorithm"]) == (group, lib,
                                                                                                  w.algorithm):
                r = rows[-1]
                r.update(to_bytes=int(w.size_bytes), sizes=r["sizes"] + 1, sizes_faster=r["sizes_faster"] + faster,
                         max_speedup_vs_default=max(r["max_speedup_vs_default"], w.speedup_vs_default))
            else:
                rows.append({"group": group, "library": lib, "from_bytes": int(w.size_bytes),
                             "to_bytes": int(w.size_bytes), "best_algorithm": w.algorithm, "sizes": 1,
                             "sizes_faster": faster, "max_speedup_vs_default": w.speedup_vs_default})
    return pd.DataFrame(rows)


# Every variant of a training group trains the same model, data, seed and steps; only the Allreduce differs. At 2
# ranks each element is a + b, one rounding in any order, so every variant ends a round with the same loss (seen: equal
# to the 6 decimals written, in every 2-rank run), and a different loss means an Allreduce that reduced wrongly (seen:
# an MPICH tuned file that left each rank its own data above 4 MiB, 5e-4 to 3e-2 off). At more ranks the order of the
# sums legitimately moves the loss (seen: up to 8e-4 relative after 8 steps, AlexNet at 4 ranks), as much as that bug
# did (2e-4 to 1e-3), so the loss cannot tell there: the workflow's checks of the tuned files are the guard.
EXACT_LOSS_RANKS = 2
LOSS_RTOL = 1e-6  # the loss is written with 6 decimals


def loss_check(t: pd.DataFrame) -> pd.DataFrame:
    """Per training group and variant: the largest relative departure of its final loss from the median of its
    round's variants, and whether it agrees (True/False at EXACT_LOSS_RANKS ranks; NA where the loss cannot tell)."""
    cols = ["group", "library", "algorithm", "loss_departure", "loss_agrees"]
    if t.empty or "final_loss" not in t:
        return pd.DataFrame(columns=cols)
    rows = []
    for (group, ranks), g in t.groupby(["group", "ranks"]):
        piv = by_round(g, "final_loss")
        med = piv.median(axis=1)
        dep = piv.sub(med, axis=0).abs().div(med.abs(), axis=0).max()
        for variant, d in dep.items():
            lib, alg = variant.split("/", 1)
            agrees = bool(d <= LOSS_RTOL) if ranks == EXACT_LOSS_RANKS and not np.isnan(d) else pd.NA
            rows.append({"group": group, "library": lib, "algorithm": alg, "loss_departure": d,
                         "loss_agrees": agrees})
    return pd.DataFrame(rows, columns=cols)


def agreeing(t: pd.DataFrame, check: pd.DataFrame) -> pd.DataFrame:
    """The training rows without the variants whose loss disagrees (``loss_check``): what claims are made from."""
    bad = check[check.loss_agrees.eq(False).fillna(False).astype(bool)]
    if bad.empty:
        return t
    keys = set(zip(bad.group, bad.library, bad.algorithm))
    return t[[k not in keys for k in zip(t.group, t.library, t.algorithm)]]


def training(t: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (group, fw, model, mode, ranks, nodes), g in t.groupby(TRAINING_GROUP):
        piv = by_round(g, "img_per_s")
        worst = piv.median().idxmin()
        ran_on = wires(g)
        for variant in piv.columns:
            lib, alg = variant.split("/", 1)
            s = median_summary(piv[variant])
            row = {"group": group, "framework": fw, "model": model, "parallel_mode": mode, "ranks": ranks,
                   "nodes": nodes, "library": lib, "algorithm": alg, "img_per_s": s["median"], "ci_low": s["ci_low"],
                   "ci_high": s["ci_high"], "ci_level": s["ci_level"], "rounds": s["rounds"]}
            d = f"{lib}/{DEFAULT}"
            if d in piv:
                row.update(paired_speedup(False, piv[d], piv[variant], "speedup_vs_default"))
            row["worst"] = worst
            row.update(paired_speedup(False, piv[worst], piv[variant], "speedup_vs_worst"))
            refuse_across_wires(row, ran_on, worst, variant, "speedup_vs_worst")
            rows.append(row)
    return pd.DataFrame(rows)


def training_defaults(t: pd.DataFrame) -> pd.DataFrame:
    """Per training group, each library's default against every other library's default (img/s, paired by round):
    what choosing the library alone does, for every ordered pair measured, none picked after the data."""
    rows = []
    for (group, fw, model, mode, ranks, nodes), g in t.groupby(TRAINING_GROUP):
        piv = by_round(g, "img_per_s")
        ran_on = wires(g)
        present = [lib for lib in LIBRARIES if f"{lib}/{DEFAULT}" in piv]
        for lib in present:
            for versus in present:
                if versus != lib:
                    row = {"group": group, "framework": fw, "model": model, "parallel_mode": mode, "ranks": ranks,
                           "nodes": nodes, "library": lib, "versus": versus}
                    row.update(paired_speedup(False, piv[f"{versus}/{DEFAULT}"], piv[f"{lib}/{DEFAULT}"], "speedup"))
                    refuse_across_wires(row, ran_on, f"{versus}/{DEFAULT}", f"{lib}/{DEFAULT}", "speedup")
                    rows.append(row)
    return pd.DataFrame(rows)


def tuned(b: pd.DataFrame, t: pd.DataFrame) -> pd.DataFrame:
    """Each tuned file against its library's default and against the best single algorithm of the same rounds
    (the one with the lowest median time, or highest median img/s, among those measured beside it), per size
    (microbenchmark) or per training group."""
    rows = []
    parts = []
    if not b.empty:
        parts.append((b[b.group.str.startswith(TUNED_PHASE)], "avg_us", True, ["group", "ranks", "size_bytes"]))
    if not t.empty:
        parts.append((t, "img_per_s", False, ["group", "ranks"]))
    for df, value, lower, keys in parts:
        for key, g in df.groupby(keys):
            piv = by_round(g, value)
            for lib in LIBRARIES:
                tu, d = f"{lib}/{TUNED}", f"{lib}/{DEFAULT}"
                if tu not in piv:
                    continue
                singles = [c for c in piv.columns if c.startswith(f"{lib}/") and c != tu]
                med = piv[singles].median()
                best = med.idxmin() if lower else med.idxmax()
                base = {"workload": "microbench" if lower else key[0].split("/")[0], "group": key[0],
                        "library": lib, "ranks": key[1], "size_bytes": key[2] if lower else np.nan}
                for versus, col in (("default", d), ("best single algorithm", best)):
                    if col in piv:
                        rows.append({**base, "versus": versus, "versus_algorithm": col.split("/", 1)[1],
                                     **paired_speedup(lower, piv[col], piv[tu], "speedup")})
    return pd.DataFrame(rows, columns=["workload", "group", "library", "ranks", "size_bytes", "versus",
                                       "versus_algorithm", "speedup", "speedup_ci_low", "speedup_ci_high",
                                       "speedup_verdict"])


def tuned_summary(b: pd.DataFrame, tu: pd.DataFrame) -> pd.DataFrame:
    """Per group, library and comparison (default, best single algorithm): the geometric-mean speedup of the
    tuned file over the sizes (one point per training group) with a bootstrap interval over whole rounds, its
    verdict, and how many points were significantly faster, slower or not different."""
    rows = []
    for (group, lib, versus), g in tu.groupby(["group", "library", "versus"]) if len(tu) else ():
        counts = {v: int((g.speedup_verdict == v).sum()) for v in (FASTER, SLOWER, SAME, TOO_FEW)}
        if group.startswith(TUNED_PHASE):
            d = b[(b.group == group) & (b.library == lib)]
            per_size = {size: by_round(x, "avg_us") for size, x in d.groupby("size_bytes")}
            sizes = sorted(set(g.size_bytes))
            base_col = dict(zip(g.size_bytes, g.versus_algorithm))
            base = np.column_stack([per_size[z][f"{lib}/{base_col[z]}"].to_numpy() for z in sizes])
            tuned = np.column_stack([per_size[z][f"{lib}/{TUNED}"].to_numpy() for z in sizes])
            sp, lo, hi = geomean_speedup_ci(base, tuned)
        else:
            (r,) = list(g.itertuples())
            sp, lo, hi = r.speedup, r.speedup_ci_low, r.speedup_ci_high
        rows.append({"group": group, "library": lib, "versus": versus, "points": len(g), "speedup_geomean": sp,
                     "ci_low": lo, "ci_high": hi, "verdict": verdict(lo, hi),
                     **{f"points_{k.replace(' ', '_')}": n for k, n in counts.items()}})
    return pd.DataFrame(rows)


def references(b: pd.DataFrame, t: pd.DataFrame):
    """(group, library, measure, per-round frame) for each library default: its reference per round (the geometric
    mean over sizes of its time, or its img/s) and the round's start, in the order the rounds ran."""
    for df, value in ((b, "avg_us"), (t, "img_per_s")):
        d = df[df.algorithm == DEFAULT] if len(df) else df
        for (group, lib), g in (d.groupby(["group", "library"]) if len(d) else ()):
            per = g.groupby("round").agg(ref=(value, lambda v: float(np.exp(np.log(v).mean()))),
                                         started=("started_at", "min")).sort_values("started")
            yield group, lib, value, per


def drift(b: pd.DataFrame, t: pd.DataFrame) -> pd.DataFrame:
    """Each library default's reference per round: the geometric mean over sizes of its time (microbenchmark)
    or its img/s (training), against the round's start. Flagged where it moved monotonically over the run
    (Spearman's rank correlation with the start time, p < 0.05) -- the drift pairing removes from comparisons."""
    rows = []
    for group, lib, value, per in references(b, t):
        rho, p = (sps.spearmanr(np.arange(len(per)), per.ref) if len(per) >= 3 and per.ref.nunique() > 1
                  else (np.nan, np.nan))
        rows.append({"group": group, "library": lib, "measure": value, "rounds": len(per),
                     "reference_median": float(per.ref.median()), "reference_min": float(per.ref.min()),
                     "reference_max": float(per.ref.max()), "spread": float(per.ref.max() / per.ref.min()),
                     "trend_rho": float(rho), "trend_p": float(p), "flagged": bool(p < 0.05)})
    return pd.DataFrame(rows)


CLAIM_KEYS = ["table", "group", "what", "library", "algorithm", "versus"]
CLAIM_COLUMNS = [*CLAIM_KEYS, "selected", "speedup", "ci_low", "ci_high", "verdict"]


def _roles(picks: dict, group: str, library: str, algorithm: str) -> list[str]:
    """The names a trained variant is claimed under: the pipeline's role where it has one (its pick, whichever
    algorithm that was in this run: a replication compares the pipeline's choices), else the algorithm."""
    picked = roles(picks.get(group, {}), library)
    return [role for role in (BEST, WORST) if picked.get(role) == algorithm] or [algorithm]


def claims(speedups: pd.DataFrame, across: pd.DataFrame, train: pd.DataFrame, tu: pd.DataFrame,
           picks: dict | None = None, study: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every comparison the tables make, once, with its speedup, interval and verdict (significant or not);
    ``reproduce`` matches them across runs by CLAIM_KEYS. A trained pick is keyed by its role ("picked best"), its
    algorithm in ``selected``; a tuned file's training rows appear once (as a training claim); the across-library
    claims fixed beforehand come from ``study`` (``study_claims.groups``)."""
    picks = picks or {}
    rows = []
    for r in speedups[speedups.algorithm != DEFAULT].itertuples() if len(speedups) else ():
        rows.append(("microbench_speedup", r.group, str(int(r.size_bytes)), r.library, r.algorithm, "default",
                     r.algorithm, r.speedup_vs_default, r.speedup_vs_default_ci_low, r.speedup_vs_default_ci_high,
                     r.speedup_vs_default_verdict))
    for r in across.itertuples() if len(across) else ():  # keyed by role: the fastest measured, whichever it was
        rows.append(("across_libraries", r.group, str(int(r.size_bytes)), ACROSS, "fastest measured",
                     "slowest measured", f"{r.best} over {r.worst}", r.speedup_vs_worst, r.speedup_vs_worst_ci_low,
                     r.speedup_vs_worst_ci_high, r.speedup_vs_worst_verdict))
    for r in train[train.algorithm != DEFAULT].itertuples() if len(train) else ():
        if "speedup_vs_default" in train and not np.isnan(r.speedup_vs_default):
            for name in _roles(picks, r.group, r.library, r.algorithm):
                rows.append(("training_throughput", r.group, f"{r.framework} {r.model} {r.parallel_mode}", r.library,
                             name, "default", r.algorithm, r.speedup_vs_default, r.speedup_vs_default_ci_low,
                             r.speedup_vs_default_ci_high, r.speedup_vs_default_verdict))
    for r in tu.itertuples() if len(tu) else ():
        if np.isnan(r.size_bytes) and r.versus == "default":
            continue  # the training claim of the same rows
        what = str(int(r.size_bytes)) if not np.isnan(r.size_bytes) else r.workload
        rows.append(("tuned_speedup", r.group, what, r.library, TUNED, r.versus, TUNED, r.speedup, r.speedup_ci_low,
                     r.speedup_ci_high, r.speedup_verdict))
    across_claims = study[study.claim.str.startswith("fastest_")] if study is not None and len(study) else ()
    for r in across_claims.itertuples() if len(across_claims) else ():
        rows.append(("study_across_libraries", r.group, r.claim, r.library, "predicted fastest", r.baseline
                     if r.claim == "fastest_over_default" else "predicted slowest default",
                     f"{r.variant} over {r.baseline}", r.speedup, r.ci_low, r.ci_high, r.verdict))
    return pd.DataFrame(rows, columns=CLAIM_COLUMNS)


def headline(speedups: pd.DataFrame, across: pd.DataFrame, train: pd.DataFrame,
             tuned_sum: pd.DataFrame) -> pd.DataFrame:
    """A run's largest numbers, each with its interval and verdict: per library the largest significant
    speedup over its default; the largest significant gap between the best and the worst (library, algorithm);
    the best against each library's default; each tuned file against the default and the best single algorithm;
    and per training framework the same against the default and across libraries. Every "largest" and "best" row is
    chosen after the data and says from how many (its interval is not adjusted for the choice: the claims fixed
    beforehand, with adjusted intervals, are ``study_claims``')."""
    rows = []

    def add(claim, where, r, prefix):
        rows.append({"claim": claim, "where": where, "speedup": r[prefix], "ci_low": r[f"{prefix}_ci_low"],
                     "ci_high": r[f"{prefix}_ci_high"], "verdict": r[f"{prefix}_verdict"], "group": r["group"]})

    def largest_significant(df, prefix):
        sig = df[df[f"{prefix}_verdict"] == FASTER]
        return sig.loc[sig[prefix].idxmax()] if len(sig) else None

    for lib, g in speedups.groupby("library") if len(speedups) else ():
        r = largest_significant(g[g.algorithm != DEFAULT], "speedup_vs_default")
        if r is not None:
            add(f"microbenchmark, {lib}: largest significant speedup of an algorithm over the default (chosen after "
                f"the data from {len(g[g.algorithm != DEFAULT])}, interval not adjusted)",
                f"{r.algorithm} at {int(r.size_bytes)} B, {r.group}", r, "speedup_vs_default")
    if len(across):
        r = largest_significant(across, "speedup_vs_worst")
        if r is not None:
            add(f"microbenchmark: largest significant speedup of the best library+algorithm over the worst (chosen "
                f"after the data from {len(across)}, interval not adjusted)",
                f"{r.best} over {r.worst} at {int(r.size_bytes)} B, {r.group}", r, "speedup_vs_worst")
        for lib in LIBRARIES:
            if f"speedup_vs_{lib}_default" in across:
                r = largest_significant(across, f"speedup_vs_{lib}_default")
                if r is not None:
                    add(f"microbenchmark: largest significant speedup of the best library+algorithm over {lib}'s "
                        "default", f"{r.best} at {int(r.size_bytes)} B, {r.group}", r, f"speedup_vs_{lib}_default")
    for r in tuned_sum.itertuples() if len(tuned_sum) else ():
        rows.append({"claim": f"tuned file of {r.library} against the {r.versus} (geometric mean over "
                              f"{'sizes' if r.group.startswith(TUNED_PHASE) else 'the group'})",
                     "where": r.group, "speedup": r.speedup_geomean, "ci_low": r.ci_low, "ci_high": r.ci_high,
                     "verdict": r.verdict, "group": r.group})
    for (group, fw), g in train.groupby(["group", "framework"]) if len(train) else ():
        singles = g[~g.algorithm.isin([DEFAULT, TUNED])]
        for lib, gl in singles.groupby("library"):
            r = gl.loc[gl.speedup_vs_default.idxmax()]
            add(f"training, {fw}, {lib}: best of {len(gl)} algorithms over the default (chosen after the data, "
                "interval not adjusted)", f"{r.algorithm}, {group}", r,
                "speedup_vs_default")
        best = g.loc[g.img_per_s.idxmax()]
        add(f"training, {fw}: best library+algorithm over the worst (chosen after the data from {len(g)} variants, "
            "interval not adjusted)",
            f"{best.library}/{best.algorithm} over {best.worst}, {group}", best, "speedup_vs_worst")
    return pd.DataFrame(rows, columns=["claim", "where", "speedup", "ci_low", "ci_high", "verdict", "group"])


def trusted(t: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the training rows claims are made from, the loss check): without the variants whose loss disagrees."""
    check = loss_check(t)
    return agreeing(t, check), check


def family_of(rows: pd.DataFrame) -> pd.Series:
    """Each row's library family: its ``library_family``, or, in files from before that column (the three wheels
    only), its library."""
    fam = rows.get("library_family", pd.Series("", index=rows.index)).fillna("").astype(str)
    return fam.where(fam != "", rows.library)


def has_site_builds(rows: pd.DataFrame) -> bool:
    """Whether `rows` hold a site's build beside the wheel of its family in one comparison group."""
    if rows.empty:
        return False
    fam = family_of(rows)
    return any(set(f[g.library != f]) & set(g.library) for _, g in rows.groupby("group") if len(f := fam[g.index]))


def _site_pairs(g: pd.DataFrame):
    """(site, wheel, algorithm) for each site's build in `g` and each algorithm it and its family's wheel both ran
    there (the family's same knob; tuned files, a library's own, left out)."""
    fam = family_of(g)
    for site in sorted(set(g.library[fam != g.library])):
        wheel = fam[g.library == site].iloc[0]
        common = set(g.algorithm[g.library == site]) & set(g.algorithm[g.library == wheel]) - {TUNED}
        for algorithm in sorted(common, key=lambda a: (a != DEFAULT, a)):
            yield site, wheel, algorithm


def site_vs_wheel(b: pd.DataFrame, t: pd.DataFrame) -> pd.DataFrame:
    """A site's own build against the wheel of its family, measured in the same rounds: per microbenchmark size
    (time) and per training group (img/s), for every algorithm both ran, none chosen after the data; ``speedup`` > 1:
    the site's build is faster. Refused (``TRANSPORTS_DIFFER``) where the two ran on different wires."""
    rows = []
    blank = {"size_bytes": pd.NA, "framework": "", "model": "", "parallel_mode": ""}
    if len(b):
        for (group, ranks, nodes, size), g in main_phase(b).groupby(["group", "ranks", "nodes", "size_bytes"]):
            piv, ran_on = by_round(g, "avg_us"), wires(g)
            for site, wheel, alg in _site_pairs(g):
                row = {"measure": "microbench", "group": group, "ranks": ranks, "nodes": nodes, **blank,
                       "size_bytes": size, "site": site, "wheel": wheel, "algorithm": alg}
                row.update(paired_speedup(True, piv[f"{wheel}/{alg}"], piv[f"{site}/{alg}"], "speedup"))
                rows.append(refuse_across_wires(row, ran_on, f"{wheel}/{alg}", f"{site}/{alg}", "speedup"))
    if len(t):
        for (group, fw, model, mode, ranks, nodes), g in t.groupby(TRAINING_GROUP):
            piv, ran_on = by_round(g, "img_per_s"), wires(g)
            for site, wheel, alg in _site_pairs(g):
                row = {"measure": "training", "group": group, "ranks": ranks, "nodes": nodes, **blank,
                       "framework": fw, "model": model, "parallel_mode": mode, "site": site, "wheel": wheel,
                       "algorithm": alg}
                row.update(paired_speedup(False, piv[f"{wheel}/{alg}"], piv[f"{site}/{alg}"], "speedup"))
                rows.append(refuse_across_wires(row, ran_on, f"{wheel}/{alg}", f"{site}/{alg}", "speedup"))
    out = pd.DataFrame(rows)
    return out.astype({"size_bytes": "Int64"}) if len(out) else out  # bytes, blank in training rows
