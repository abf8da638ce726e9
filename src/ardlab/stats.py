"""Statistics of paired, interleaved rounds, for ardlab.analysis's tables and the benchmark scripts alike: medians
with nonparametric intervals, speedups with paired bootstrap intervals, and a verdict only where the interval
excludes 1 (Hoefler & Belli, SC15: report nonparametric confidence intervals of the median and test a
difference before claiming it).

- ``median_ci``: the median and the order-statistic interval around it (binomial distribution of the number of
  draws below the median; distribution-free). With n draws the interval cannot reach every level: n = 5 gives at
  most 93.75% (the minimum and maximum); the achieved level is returned.
- ``speedup_ci``: the speedup of a variant over a baseline from the *per-round ratios* baseline / variant (> 1: the
  variant is faster): their geometric mean, with a percentile bootstrap interval that resamples *rounds*, keeping
  each round's pair together (the two were measured minutes apart, so the machine's drift between rounds cancels).
  The point estimate always lies inside its interval (a ratio of two medians, which can come from different rounds,
  need not). Up to EXACT_ROUNDS rounds the bootstrap distribution is enumerated, every distinct resample with its
  multinomial probability (126 at 5 rounds, 92,378 at 10), so the interval has no seed and no verdict moves with
  one; beyond, BOOTSTRAP random resamples are drawn.
- ``pooled_speedup_ci``: one speedup over several comparison groups of one regime (the geometric mean of the groups'
  estimates, each group weighted alike) with a t interval over the group estimates, which carry the spread within
  each group and between groups once each (it holds its level in simulation; no seed moves it).
- ``max_adjusted_ci``: the interval of one comparison chosen as the largest of N, at level 1 - (1 - confidence) / N
  (Bonferroni; for the largest of N it is Holm's first step), a t interval on the per-round log ratios: 5 rounds
  cannot reach such a level without a model (a bootstrap interval never leaves the range of the ratios, which all
  lie above 1 with probability 1/32 when nothing differs).
- ``verdict``: "faster", "slower" or "no significant difference" (the interval contains 1); "too few rounds"
  below MIN_ROUNDS paired rounds, where a bootstrap interval means nothing (simulated with 30% drift between
  rounds and 10% noise, its coverage is 94% at 5 rounds and 95-99% from 6 on).
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
from scipy import special, stats

CONFIDENCE = 0.95
BOOTSTRAP = 4000  # random resamples of the rounds per speedup, beyond EXACT_ROUNDS rounds
EXACT_ROUNDS = 10  # up to this many rounds every distinct resample is enumerated (C(2n - 1, n) of them)
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


def log_ratios(baseline, variant) -> np.ndarray:
    """Per-round log(baseline / variant) of paired rounds (same length; rounds where either is NaN dropped)."""
    b, v = np.asarray(baseline, dtype=float), np.asarray(variant, dtype=float)
    if b.shape != v.shape:
        raise ValueError(f"paired samples differ in length: {b.shape} vs {v.shape}")
    keep = ~(np.isnan(b) | np.isnan(v))
    return np.log(b[keep] / v[keep])


def expanded_alpha(confidence: float, n: int) -> float:
    """The tail probability at which an *expanded* percentile interval reads its bootstrap distribution, with `n`
    resampled units: Phi(-sqrt(n / (n - 1)) * t_{n-1}(1 - (1 - confidence) / 2)) (Hesterberg, "What teachers should
    know about the bootstrap", 2015). A plain percentile interval of a mean is too narrow for few units (it covers
    86% at 5-6 paired rounds, simulated with 30% drift between rounds and 10% noise); the expanded one 93-95%."""
    if n < 2:
        raise ValueError(f"an interval needs at least 2 resampled units, got {n}")
    return float(stats.norm.cdf(-np.sqrt(n / (n - 1)) * stats.t.ppf(1 - (1 - confidence) / 2, n - 1)))


@functools.lru_cache(maxsize=None)
def _resamples(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every distinct bootstrap resample of `n` units as (counts: how often each unit is drawn, one row a resample;
    probabilities: n! / (prod counts!) / n^n, summing to 1)."""
    drawn = np.array(list(itertools.combinations_with_replacement(range(n), n)))
    counts = np.zeros((len(drawn), n))
    np.add.at(counts, (np.repeat(np.arange(len(drawn)), n), drawn.ravel()), 1)
    log_p = special.gammaln(n + 1) - special.gammaln(counts + 1).sum(axis=1) - n * np.log(n)
    return counts, np.exp(log_p)


def bootstrap_mean_bounds(values, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP,
                          seed: int = 0) -> tuple[float, float]:
    """Expanded percentile bounds (``expanded_alpha``) of the bootstrap distribution of the mean of `values` (one
    per resampled unit: a round): enumerated exactly up to EXACT_ROUNDS units (no seed), else from `resamples`
    random resamples drawn with `seed`."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    alpha = expanded_alpha(confidence, n)
    if n > EXACT_ROUNDS:
        idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
        lo, hi = np.quantile(x[idx].mean(axis=1), [alpha, 1 - alpha])
        return float(lo), float(hi)
    counts, prob = _resamples(n)
    means = counts @ x / n
    order = np.argsort(means, kind="stable")
    means, cum = means[order], np.cumsum(prob[order])
    cum /= cum[-1]

    def quantile(q: float) -> float:  # the smallest mean whose cumulative probability reaches q (rounding allowed)
        return float(means[min(np.searchsorted(cum, q - 1e-12), len(means) - 1)])

    return quantile(alpha), quantile(1 - alpha)


def _ratio_bounds(point: float, log_ratios: np.ndarray, confidence: float, resamples: int,
                  seed: int) -> tuple[float, float]:
    """The bootstrap bounds of a ratio from its per-round log ratios (``bootstrap_mean_bounds``), widened where
    needed to hold `point` (a percentile interval of a discrete bootstrap distribution can just miss its estimate)."""
    lo, hi = bootstrap_mean_bounds(log_ratios, confidence, resamples, seed)
    return float(min(np.exp(lo), point)), float(max(np.exp(hi), point))


def _paired(baseline, variant) -> tuple[np.ndarray, float]:
    """(per-round log ratios, their geometric-mean ratio; NaN without rounds) of paired rounds."""
    r = log_ratios(baseline, variant)
    return r, float(np.exp(r.mean())) if len(r) else np.nan


def speedup_ci(baseline, variant, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP,
               seed: int = 0) -> tuple[float, float, float]:
    """(speedup, lower, upper): the geometric mean of the per-round ratios baseline / variant over paired rounds,
    with an expanded percentile bootstrap interval over rounds (NaN with fewer than MIN_ROUNDS rounds). `baseline`
    and `variant` are aligned by round. Times (lower is better); for rates (img/s) pass them the other way round."""
    r, point = _paired(baseline, variant)
    if len(r) < MIN_ROUNDS:
        return point, np.nan, np.nan
    return point, *_ratio_bounds(point, r, confidence, resamples, seed)


def pooled_speedup_ci(groups: list, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(speedup, lower, upper) pooled over comparison groups of one regime: `groups` holds each group's per-round log
    ratios (``log_ratios``). The estimate is exp(mean over groups of each group's mean log ratio); the interval a t
    interval over those group means (k - 1 degrees of freedom): each group mean carries its own rounds' noise and the
    spread between groups once, so the interval holds its level, and it is the same whatever the seed (there is
    none). Simulated (tests/test_analysis_stats.py): 94-96% coverage at 3-9 groups of 5 rounds, with a shared effect
    and with 10% heterogeneity between groups, and 3.5-6% significant where nothing differs; the two-stage bootstrap it
    replaces counted the within-group variance twice (99.4% coverage, issue 53's audit). Groups with fewer than
    MIN_ROUNDS rounds are left out; with fewer than 2 groups left there is no interval (NaN)."""
    groups = [np.asarray(g, dtype=float) for g in groups]
    groups = [g[~np.isnan(g)] for g in groups]
    means = np.array([g.mean() for g in groups if len(g) >= MIN_ROUNDS])
    if not len(means):
        return (np.nan,) * 3
    point = float(np.exp(means.mean()))
    if len(means) < 2:
        return point, np.nan, np.nan
    half = stats.t.ppf(1 - (1 - confidence) / 2, len(means) - 1) * means.std(ddof=1) / np.sqrt(len(means))
    return point, float(np.exp(means.mean() - half)), float(np.exp(means.mean() + half))


def max_adjusted_ci(baseline, variant, n: int, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(speedup, lower, upper) of one comparison that was chosen as the largest of `n`: the geometric mean of the
    per-round ratios with a t interval on their logs at level 1 - (1 - confidence) / n (NaN with fewer than
    MIN_ROUNDS rounds)."""
    if n < 1:
        raise ValueError(f"the number of comparisons a maximum was chosen from must be at least 1, got {n}")
    r, point = _paired(baseline, variant)
    if len(r) < MIN_ROUNDS:
        return point, np.nan, np.nan
    half = stats.t.ppf(1 - (1 - confidence) / (2 * n), len(r) - 1) * r.std(ddof=1) / np.sqrt(len(r))
    return point, float(np.exp(r.mean() - half)), float(np.exp(r.mean() + half))


def geomean_speedup_ci(baseline, variant, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP,
                       seed: int = 0) -> tuple[float, float, float]:
    """(speedup, lower, upper): the geometric mean over points (columns: sizes) and rounds (rows) of the per-round
    ratios baseline / variant, with a bootstrap interval that resamples whole rounds (every point of a round
    together, as they were measured). Columns with a NaN are dropped."""
    b, v = np.asarray(baseline, dtype=float), np.asarray(variant, dtype=float)
    if b.shape != v.shape or b.ndim != 2:
        raise ValueError(f"paired round x point matrices needed, got {b.shape} and {v.shape}")
    keep = ~(np.isnan(b).any(axis=0) | np.isnan(v).any(axis=0))
    b, v = b[:, keep], v[:, keep]
    if b.shape[1] == 0:
        return (np.nan,) * 3
    logs = np.log(b / v)  # round x point

    per_round = logs.mean(axis=1)  # the geometric mean over points and rounds is exp(mean of these)
    point = float(np.exp(per_round.mean()))
    if b.shape[0] < MIN_ROUNDS:
        return point, np.nan, np.nan
    return point, *_ratio_bounds(point, per_round, confidence, resamples, seed)


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
