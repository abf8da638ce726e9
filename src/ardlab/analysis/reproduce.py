"""Does a run reproduce another? Every significant claim of either run, and what the other run says of it.

A claim is a comparison whose interval excludes 1 (``comparisons.claims``: one row per comparison, a tuned file's
training rows once, a pick keyed by its role so that a replication compares the pipeline's choices whichever
algorithm each run picked). ``compare`` takes the claims of run A and of run B, both ways: every comparison that is
significant in either run, with its estimate and verdict in A and in B. ``summary`` counts, per table and overall,
for A's claims checked in B, B's claims checked in A, and every claim of either run once: how many the other run
did not measure, how many it measured in the same direction, and how many it found significant the same way; each
share is over *all* the claims, the unmeasured ones in the denominator (``share_same_direction_measured`` is the
share among the measured only, for comparison with runs reported before).

Counted once per comparison (``once``, the summary's last rows): several tables can state one comparison of the same
two variants in one group (the pipeline's pick over its library's default is a training claim and an across-library
claim, and again the fastest over the slowest default when that default is the pick's own library's), so each pair
of concrete variants of a group (and size, for the per-size tables) counts once, as its first table states it
(``ONCE_ORDER``); comparisons with a picked-worst variant are controls (slower by construction), counted apart from
the speedup claims.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ardlab.analysis.comparisons import CLAIM_KEYS
from ardlab.analysis.study_claims import WORST
from ardlab.stats import FASTER, SLOWER

SIGNIFICANT = (FASTER, SLOWER)
DIRECTIONS = ("A's claims in B", "B's claims in A", "either run's claims")
PER_POINT = ("microbench_speedup", "across_libraries", "tuned_speedup")  # `what` (a size, a workload) is the point
ONCE_ORDER = ("training_throughput", "tuned_speedup", "study_across_libraries", "microbench_speedup",
              "across_libraries")  # which table's statement of a comparison counts, where several state it
ONCE = ("speedup claims, once per comparison", "controls (picked worst), once per comparison",
        "all, once per comparison")


def compare(claims_a: pd.DataFrame, claims_b: pd.DataFrame) -> pd.DataFrame:
    """One row per comparison significant in A or in B (duplicates dropped): its speedup, interval and verdict in
    both runs (NaN where a run did not measure it), which run claims it, and the agreement."""
    a = claims_a.drop_duplicates(CLAIM_KEYS)
    b = claims_b.drop_duplicates(CLAIM_KEYS)
    m = a.merge(b, on=CLAIM_KEYS, how="outer", suffixes=("_a", "_b"))
    m["claimed_in_a"] = m.verdict_a.isin(SIGNIFICANT)
    m["claimed_in_b"] = m.verdict_b.isin(SIGNIFICANT)
    m = m[m.claimed_in_a | m.claimed_in_b].copy()
    m["in_a"], m["in_b"] = m.speedup_a.notna(), m.speedup_b.notna()
    m["same_direction"] = m.in_a & m.in_b & (np.sign(np.log(m.speedup_a)) == np.sign(np.log(m.speedup_b)))
    m["same_significant_verdict"] = m.claimed_in_a & m.claimed_in_b & (m.verdict_a == m.verdict_b)
    m["intervals_overlap"] = m.in_a & m.in_b & (m.ci_low_a <= m.ci_high_b) & (m.ci_low_b <= m.ci_high_a)
    return m.reset_index(drop=True)


def _counts(g: pd.DataFrame, measured: pd.Series) -> dict:
    n = len(g)
    same, verdict = int(g.same_direction.sum()), int(g.same_significant_verdict.sum())
    k = int(measured.sum())
    return {"claims": n, "not_measured": n - k, "same_direction": same, "same_significant_verdict": verdict,
            "share_not_measured": (n - k) / n if n else np.nan, "share_same_direction": same / n if n else np.nan,
            "share_same_significant_verdict": verdict / n if n else np.nan,
            "share_same_direction_measured": same / k if k else np.nan}


def pair(row) -> frozenset:
    """The two concrete variants ('library/algorithm') a claim compares, as the run that claims it names them (A's
    where both do: a pick is keyed by its role, and the runs may have picked different algorithms)."""
    selected = row.selected_a if row.claimed_in_a else row.selected_b
    if row.table in ("study_across_libraries", "across_libraries"):
        return frozenset(str(selected).split(" over "))
    if row.table == "tuned_speedup":
        return frozenset({f"{row.library}/{row.algorithm}", f"{row.library}/{row.versus}"})
    return frozenset({f"{row.library}/{selected}", f"{row.library}/{row.versus}"})


def once(m: pd.DataFrame) -> pd.DataFrame:
    """``compare``'s rows with each comparison once (the module's docstring): a `comparison` key (group, point where
    the table is per point, the two variants), a `control` flag (a picked-worst variant in any statement of it), the
    statement of the first table in ONCE_ORDER kept."""
    if m.empty:
        return m.assign(comparison=[], control=[])
    keyed = m.assign(comparison=[(r.group, r.what if r.table in PER_POINT else "", *sorted(pair(r)))
                                 for r in m.itertuples()],
                     order=m.table.map({t: i for i, t in enumerate(ONCE_ORDER)}).fillna(len(ONCE_ORDER)))
    control = keyed.assign(worst=keyed.algorithm.eq(WORST)).groupby("comparison").worst.any()
    kept = keyed.sort_values(["order"], kind="stable").drop_duplicates("comparison")
    return kept.assign(control=kept.comparison.map(control)).drop(columns="order").sort_index()


def summary(m: pd.DataFrame) -> pd.DataFrame:
    """Per table and overall, both ways and once over either run's claims: claims, not measured in the other run,
    same direction, same significant verdict, and their shares over all the claims; then the same counted once per
    comparison (``once``), the speedup claims and the controls apart."""
    rows = []
    one = once(m)
    for name, g in [*m.groupby("table"), ("all", m), (ONCE[0], one[~one.control]), (ONCE[1], one[one.control]),
                    (ONCE[2], one)]:
        for direction, part, measured in ((DIRECTIONS[0], g[g.claimed_in_a], g[g.claimed_in_a].in_b),
                                          (DIRECTIONS[1], g[g.claimed_in_b], g[g.claimed_in_b].in_a),
                                          (DIRECTIONS[2], g, g.in_a & g.in_b)):
            rows.append({"table": name, "claims_checked": direction, **_counts(part, measured)})
    return pd.DataFrame(rows)
