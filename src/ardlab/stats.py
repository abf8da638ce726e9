"""Statistics of paired, interleaved rounds, for ardlab.analysis's tables and the benchmark scripts alike: medians
with nonparametric intervals, speedups with paired bootstrap intervals, and a verdict only where the interval
excludes 1 (Hoefler & Belli, SC15: report nonparametric confidence intervals of the median and test a
difference before claiming it).

- ``median_ci``: the median and the order-statistic interval around it (binomial distribution of the number of
  draws below the median; distribution-free). With n draws the interval cannot reach every level: n = 5 gives at
  most 93.75% (the minimum and maximum); the achieved level is returned.
- ``speedup_ci``: the speedup of a variant over a baseline as the ratio of medians, baseline / variant (> 1: the
  variant is faster), with a percentile bootstrap interval that resamples *rounds*, keeping each round's pair
  together (the two were measured minutes apart, so the machine's drift between rounds cancels).
- ``verdict``: "faster", "slower" or "no significant difference" (the interval contains 1); "too few rounds"
  below MIN_ROUNDS paired rounds, where a bootstrap interval means nothing (simulated with 30% drift between
  rounds and 10% noise, its coverage is 94% at 5 rounds and 95-99% from 6 on).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
BOOTSTRAP = 4000  # resamples of the rounds per speedup
MIN_ROUNDS = 5  # paired rounds a speedup needs for an interval and a verdict
FASTER, SLOWER, SAME, TOO_FEW = "faster", "slower", "no significant difference", "too few rounds"
VERDICTS = (FASTER, SLOWER, SAME, TOO_FEW)


def median_ci(x, confidence: float = CONFIDENCE) -> tuple[float, float, float, float]:
    """(median, lower, upper, achieved confidence) of the draws `x` (NaNs dropped).

    The interval is [x_(k), x_(n-k+1)] (1-based order statistics) with the largest k whose coverage
    1 - 2 * P(B <= k - 1), B ~ Binomial(n, 1/2), still reaches `confidence`; where even k = 1 falls short
    (n < 6 at 95%), it is [min, max] and the lower achieved level is returned.
    """
    x = np.sort(np.asarray(x, dtype=float))
    x = x[~np.isnan(x)]
    n = len(x)
    if n == 0:
        return (np.nan,) * 4
    med = float(np.median(x))
    if n == 1:
        return med, med, med, 0.0
    k = 1
    while k + 1 <= n // 2 and 1 - 2 * stats.binom.cdf(k, n, 0.5) >= confidence:
        k += 1
    achieved = float(1 - 2 * stats.binom.cdf(k - 1, n, 0.5))
    return med, float(x[k - 1]), float(x[n - k]), achieved


def speedup_ci(baseline, variant, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP,
               seed: int = 0) -> tuple[float, float, float]:
    """(speedup, lower, upper): median(baseline) / median(variant) over paired rounds, with a paired percentile
    bootstrap interval (NaN with fewer than MIN_ROUNDS rounds). `baseline` and `variant` are aligned by round (same length; rounds where either is NaN
    are dropped). Times (lower is better); for rates (img/s) pass them the other way round."""
    b, v = np.asarray(baseline, dtype=float), np.asarray(variant, dtype=float)
    if b.shape != v.shape:
        raise ValueError(f"paired samples differ in length: {b.shape} vs {v.shape}")
    keep = ~(np.isnan(b) | np.isnan(v))
    b, v = b[keep], v[keep]
    if len(b) == 0:
        return (np.nan,) * 3
    point = float(np.median(b) / np.median(v))
    if len(b) < MIN_ROUNDS:
        return point, np.nan, np.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(b), size=(resamples, len(b)))
    ratios = np.median(b[idx], axis=1) / np.median(v[idx], axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return point, float(lo), float(hi)


def geomean_speedup_ci(baseline, variant, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP,
                       seed: int = 0) -> tuple[float, float, float]:
    """(speedup, lower, upper): the geometric mean over points (columns: sizes) of median(baseline) /
    median(variant), rounds in rows, with a bootstrap interval that resamples whole rounds (every point of a
    round together, as they were measured). Columns with a NaN are dropped."""
    b, v = np.asarray(baseline, dtype=float), np.asarray(variant, dtype=float)
    if b.shape != v.shape or b.ndim != 2:
        raise ValueError(f"paired round x point matrices needed, got {b.shape} and {v.shape}")
    keep = ~(np.isnan(b).any(axis=0) | np.isnan(v).any(axis=0))
    b, v = b[:, keep], v[:, keep]
    if b.shape[1] == 0:
        return (np.nan,) * 3

    def gm(bb, vv):
        return np.exp(np.mean(np.log(np.median(bb, axis=-2) / np.median(vv, axis=-2)), axis=-1))

    point = float(gm(b, v))
    if b.shape[0] < MIN_ROUNDS:
        return point, np.nan, np.nan
    idx = np.random.default_rng(seed).integers(0, b.shape[0], size=(resamples, b.shape[0]))
    ratios = gm(b[idx], v[idx])
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return point, float(lo), float(hi)


def verdict(lower: float, upper: float) -> str:
    """FASTER where the whole interval is above 1, SLOWER where it is below, SAME where it contains 1, TOO_FEW
    where there is no interval (NaN)."""
    if np.isnan(lower) or np.isnan(upper):
        return TOO_FEW
    if lower > 1:
        return FASTER
    if upper < 1:
        return SLOWER
    return SAME
