"""Does a run reproduce another? Every significant claim of run A, and whether run B agrees.

A claim is a comparison whose interval excludes 1 (``comparisons.claims``). Run B agrees in direction when its
speedup for the same comparison lies on the same side of 1; the table also says whether B found it significant
too and whether the two intervals overlap. The share that agrees in direction is the reproduce share
(target: >= 90% between two runs of the local default on one machine type).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ardlab.analysis.comparisons import CLAIM_KEYS
from ardlab.stats import FASTER, SLOWER


def compare(claims_a: pd.DataFrame, claims_b: pd.DataFrame) -> pd.DataFrame:
    """One row per significant claim of A: its speedup and interval in both runs, and the agreement."""
    sig = claims_a[claims_a.verdict.isin([FASTER, SLOWER])]
    m = sig.merge(claims_b, on=CLAIM_KEYS, how="left", suffixes=("_a", "_b"))
    m["in_b"] = m.speedup_b.notna()
    m["same_direction"] = m.in_b & (np.sign(np.log(m.speedup_a)) == np.sign(np.log(m.speedup_b)))
    m["significant_in_b"] = m.verdict_b == m.verdict_a
    m["intervals_overlap"] = m.in_b & (m.ci_low_a <= m.ci_high_b) & (m.ci_low_b <= m.ci_high_a)
    return m


def summary(m: pd.DataFrame) -> pd.DataFrame:
    """Per table and overall: significant claims of A, how many B has, agrees with in direction, confirms."""
    rows = []
    for name, g in [*m.groupby("table"), ("all", m)]:
        n = int(g.in_b.sum())
        rows.append({"table": name, "claims_in_a": len(g), "measured_in_b": n,
                     "same_direction": int(g.same_direction.sum()),
                     "share_same_direction": float(g.same_direction.sum() / n) if n else np.nan,
                     "significant_in_b": int(g.significant_in_b.sum()),
                     "intervals_overlap": int(g.intervals_overlap.sum())})
    return pd.DataFrame(rows)
