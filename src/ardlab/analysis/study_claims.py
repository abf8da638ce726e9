"""The study's claims, written down before the data: what ardlab's training rows are allowed to say about them.

The study (MPI_Allreduce in MPICH, Open MPI and Intel MPI under TensorFlow + Horovod) reports that choosing the
algorithm sped training up 1.2x over the library's default, and that choosing the library as well gave up to 2.8x.
Its method chooses from a microbenchmark, so every claim here is about *the pipeline's* choice, made before
training (``ardlab tune``: a tuned file; ``ardlab pick``: the algorithm the microbenchmark predicts best and worst
for the group's calls), never a best or worst read off the training rows. ``CLAIMS`` is the table, one row a claim;
nothing else decides what is compared:

- within a library: its tuned file over its default, and its picked-best algorithm over its default (the 1.2x);
  its picked-worst algorithm over its default as a control that the microbenchmark's ranking carries into
  training (it never enters a "best" claim);
- across libraries: the library+algorithm the microbenchmark predicts fastest for the group's calls (each
  library's default and picked best are the candidates: they carry a prediction), over each library's default and
  over the default it predicts slowest (the 2.8x, which is the study's *maximum*).

Every claim is measured in every training group that has both of its variants (``rounds``: one row per claim,
group and round, the per-round ratio), estimated per group with the paired estimator (``stats.speedup_ci``) and
pooled over the groups of one regime only (``stats.pooled_speedup_ci``, a t interval over the group estimates): one
rank a node has a core to itself; two ranks a node time-share this machine's two cores, the emulation's own regime,
never pooled with the other (issue 53's audit: its groups carried 92-103% of the effects the old pool over all
groups showed).
The largest single group of a claim appears only as "largest of N", with an interval adjusted for N
(``stats.max_adjusted_ci``). Verdicts (``agreement``) say what an interval supports: "consistent with" a study's
value where the interval holds it and excludes 1; "equivalent" to no change only within ``EQUIVALENCE`` fixed here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ardlab.comm.libraries import DEFAULT, LIBRARIES, TUNED, library as library_of
from ardlab.stats import max_adjusted_ci, pooled_speedup_ci, speedup_ci, verdict

STUDY_ALGORITHM, STUDY_LIBRARY = 1.2, 2.8  # the study's two numbers
EQUIVALENCE = 1.05  # a speedup interval inside [1 / 1.05, 1.05] is "equivalent to the default", fixed beforehand
BEST, WORST, FASTEST = "picked best", "picked worst", "predicted fastest"  # the pipeline's roles of a variant
SLOWEST_DEFAULT = "predicted slowest default"
ACROSS = "across libraries"  # the library column of a claim over the predicted slowest default


@dataclass(frozen=True)
class Claim:
    """One comparison fixed before the data: `variant` (a role) over `versus` ("default": the library's own, or
    SLOWEST_DEFAULT), set against the study's value `study` (None: no study value, e.g. a control)."""

    key: str
    text: str  # {library} stands for the library's display name
    variant: str
    versus: str
    study: float | None
    control: bool = False


CLAIMS = (
    Claim("tuned", "{library}: its tuned file over its default", TUNED, DEFAULT, STUDY_ALGORITHM),
    Claim("picked_best", "{library}: the microbenchmark's pick over its default", BEST, DEFAULT, STUDY_ALGORITHM),
    Claim("picked_worst", "{library}: the microbenchmark's worst pick over its default (control)", WORST, DEFAULT,
          None, control=True),
    Claim("fastest_over_slowest_default", "the predicted fastest library+algorithm over the predicted slowest default",
          FASTEST, SLOWEST_DEFAULT, STUDY_LIBRARY),
    Claim("fastest_over_default", "the predicted fastest library+algorithm over {library}'s default", FASTEST,
          DEFAULT, None),
)
CLAIM = {c.key: c for c in CLAIMS}

ROUND_COLUMNS = ["claim", "library", "group", "framework", "model", "nodes", "ranks", "time_shared", "link_rate",
                 "tuning_file", "variant", "baseline", "round", "ratio"]
GROUP_COLUMNS = ["claim", "library", "group", "framework", "model", "nodes", "ranks", "time_shared", "link_rate",
                 "tuning_file", "variant", "baseline", "rounds", "speedup", "ci_low", "ci_high", "verdict"]
POOLED_COLUMNS = ["claim", "text", "library", "regime", "study", "groups", "groups_faster", "groups_slower", "speedup",
                  "ci_low", "ci_high", "agreement", "largest_of", "group", "time_shared", "tuning_files"]
ONE_PER_NODE, TIME_SHARED = "1 rank a node", "ranks time-share the cores"
REGIMES = (ONE_PER_NODE, TIME_SHARED)  # pooled apart, never together


def agreement(lo: float, hi: float, study: float | None) -> str:
    """What an interval [lo, hi] of a speedup says, set against the study's value `study` (None: against 1 only)."""
    if np.isnan(lo) or np.isnan(hi):
        return "no interval (too few rounds or groups)"
    if hi < 1:
        return "slower"
    if lo > 1:
        if study is None:
            return "faster"
        if lo <= study <= hi:
            return f"consistent with the study's {study:g}x"
        return "faster, less than the study's" if hi < study else "faster, more than the study's"
    if 1 / EQUIVALENCE <= lo and hi <= EQUIVALENCE:
        return f"equivalent to the default (within the +-{EQUIVALENCE - 1:.0%} margin fixed beforehand)"
    if study is not None and lo <= study <= hi:
        return "not significant: the interval holds both 1x and the study's value"
    return "not significant" + (f", and excludes the study's {study:g}x" if study is not None else "")


def roles(group_picks: dict, library: str) -> dict[str, str]:
    """role -> algorithm of one library in one group: its default, tuned file and the pipeline's picks."""
    lp = group_picks.get(library, {})
    roles = {DEFAULT: DEFAULT, TUNED: TUNED}
    roles.update({role: lp[label] for role, label in ((BEST, "best"), (WORST, "worst")) if lp.get(label)})
    return roles


def _predicted(group_picks: dict, libraries) -> dict[str, float]:
    """'library/algorithm' -> predicted Allreduce time per step (us) of each library's default and picked best,
    the candidates of the across-library claims."""
    out = {}
    for lib in libraries:
        lp = group_picks.get(lib, {})
        times = lp.get("predicted", {})
        for alg in (DEFAULT, lp.get("best")):
            if alg and alg in times:
                out[f"{lib}/{alg}"] = float(times[alg])
    return out


def time_shared(t: pd.DataFrame) -> pd.Series:
    """Per training row: did its ranks time-share cores (more ranks on a node than it has cores:
    ``threads_per_core`` above 1)?"""
    tpc = pd.to_numeric(t.get("threads_per_core", pd.Series(np.nan, index=t.index)), errors="coerce")
    return tpc.gt(1).fillna(False).astype(bool)


def rounds(t: pd.DataFrame, picks: dict | None = None) -> pd.DataFrame:
    """One row per claim, training group and round: the per-round ratio of img/s, variant over baseline (> 1: the
    variant trains faster). `t` holds the training rows claims may be made from (``report.trusted``), `picks` is
    ``versus_study.read_picks``: without a group's picks only its tuned-file claim is measured."""
    if t.empty:
        return pd.DataFrame(columns=ROUND_COLUMNS)
    picks = picks or {}
    t = t.assign(variant=t.library + "/" + t.algorithm, time_shared=time_shared(t))
    out = []
    for group, g in t.groupby("group"):
        first = g.iloc[0]
        piv = g.pivot_table(index="round", columns="variant", values="img_per_s", aggfunc="first")
        files = dict(zip(g.variant, g.get("mpi_tuning_file", pd.Series("", index=g.index)).fillna("").astype(str)))
        where = {"group": group, "framework": first.framework, "model": first.model, "nodes": int(first.nodes),
                 "ranks": int(first.ranks), "time_shared": bool(g.time_shared.any()),
                 "link_rate": str(first.get("link_rate", "") or "") if pd.notna(first.get("link_rate")) else ""}

        def add(claim: Claim, library: str, variant: str, baseline: str) -> None:
            if variant not in piv or baseline not in piv or variant == baseline:
                return
            fileset = sorted({files.get(variant, ""), files.get(baseline, "")} - {"", "builtin"})
            for rnd, (v, b) in enumerate(zip(piv[variant], piv[baseline])):
                if not (np.isnan(v) or np.isnan(b)):
                    out.append({"claim": claim.key, "library": library, **where, "tuning_file": ";".join(fileset),
                                "variant": variant, "baseline": baseline, "round": int(piv.index[rnd]),
                                "ratio": v / b})

        libraries = sorted(g.library.unique())
        gp = picks.get(group, {})
        for claim in CLAIMS:
            if claim.variant == FASTEST:
                continue
            for lib in libraries:
                role = roles(gp, lib)
                if claim.variant in role:
                    add(claim, lib, f"{lib}/{role[claim.variant]}", f"{lib}/{DEFAULT}")
        predicted = {v: p for v, p in _predicted(gp, libraries).items() if v in piv}
        defaults = {v: p for v, p in predicted.items() if v.endswith(f"/{DEFAULT}")}
        if len(defaults) >= 2:
            fastest = min(predicted, key=predicted.get)
            add(CLAIM["fastest_over_slowest_default"], ACROSS, fastest, max(defaults, key=defaults.get))
            for d in defaults:
                add(CLAIM["fastest_over_default"], d.split("/")[0], fastest, d)
    return pd.DataFrame(out, columns=ROUND_COLUMNS)


def _per_group(r: pd.DataFrame):
    """(key columns, per-round ratios) of each claim, library and group in ``rounds`` rows, in order."""
    keys = [c for c in GROUP_COLUMNS if c in ROUND_COLUMNS and c not in ("round", "ratio")]
    for key, g in r.sort_values("round").groupby(["claim", "library", "group"], sort=True):
        yield dict(zip(keys, g.iloc[0][keys])), g.ratio.to_numpy()


def groups(r: pd.DataFrame) -> pd.DataFrame:
    """Per claim, library and group: the paired speedup (geometric mean of the per-round ratios) with its bootstrap
    interval and a verdict (``agreement`` against 1)."""
    rows = []
    for key, ratios in _per_group(r) if len(r) else ():
        sp, lo, hi = speedup_ci(ratios, np.ones_like(ratios))
        rows.append({**key, "rounds": len(ratios), "speedup": sp, "ci_low": lo, "ci_high": hi,
                     "verdict": verdict(lo, hi)})
    return pd.DataFrame(rows, columns=GROUP_COLUMNS)


def regime_of(shared: bool) -> str:
    return TIME_SHARED if shared else ONE_PER_NODE


def display(library: str) -> str:
    """A library's display name (MPICH, Open MPI, Intel MPI); other labels as they are."""
    return library_of(library).display if library in LIBRARIES else library


def pooled(r: pd.DataFrame) -> pd.DataFrame:
    """Per claim and library: the pooled speedup over its groups (``stats.pooled_speedup_ci``) in each regime apart,
    with its verdict; then, for each claim set against a study value, the largest single group labelled "largest of
    N" with its interval adjusted for N (``stats.max_adjusted_ci``)."""
    rows = []
    if r.empty:
        return pd.DataFrame(columns=POOLED_COLUMNS)
    per = list(_per_group(r))
    order = {c.key: i for i, c in enumerate(CLAIMS)}
    by_claim: dict = {}
    for key, ratios in per:
        by_claim.setdefault((key["claim"], key["library"]), []).append((key, ratios))
    for (ck, lib), members in sorted(by_claim.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        claim = CLAIM[ck]
        text = claim.text.format(library=display(lib))
        regimes = [(regime_of(shared), part) for shared in (False, True)
                   if (part := [m for m in members if m[0]["time_shared"] == shared])]
        for regime, part in regimes:
            logs = [np.log(ratios) for _, ratios in part]
            sp, lo, hi = pooled_speedup_ci(logs)
            each = [speedup_ci(x, np.ones_like(x)) for _, x in part]
            files = sorted({f for k, _ in part for f in str(k["tuning_file"]).split(";") if f})
            rows.append({"claim": ck, "text": text, "library": lib, "regime": regime, "study": claim.study,
                         "groups": len(part), "groups_faster": sum(e[1] > 1 for e in each),
                         "groups_slower": sum(e[2] < 1 for e in each), "speedup": sp, "ci_low": lo, "ci_high": hi,
                         "agreement": agreement(lo, hi, claim.study), "largest_of": np.nan, "group": "",
                         "time_shared": {ONE_PER_NODE: "no", TIME_SHARED: "yes"}[regime],
                         "tuning_files": ";".join(files)})
        if claim.study is not None:
            key, ratios = max(members, key=lambda m: np.mean(np.log(m[1])))
            sp, lo, hi = max_adjusted_ci(ratios, np.ones_like(ratios), len(members))
            rows.append({"claim": ck, "text": text, "library": lib, "regime": f"largest of {len(members)}",
                         "study": claim.study, "groups": 1, "groups_faster": np.nan, "groups_slower": np.nan,
                         "speedup": sp, "ci_low": lo, "ci_high": hi, "agreement": agreement(lo, hi, claim.study),
                         "largest_of": len(members), "group": key["group"],
                         "time_shared": "yes" if key["time_shared"] else "no", "tuning_files": key["tuning_file"]})
    return pd.DataFrame(rows, columns=POOLED_COLUMNS)
