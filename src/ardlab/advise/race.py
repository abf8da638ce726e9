"""Racing: which candidates stop being measured, round by round, because they are clearly slower than the leader.

``ardlab advise`` measures every library x algorithm in paired, interleaved rounds; each round gives every candidate
still in the race one predicted Allreduce time per training step. A candidate leaves the race when, over the rounds
so far (at least ``MIN_ROUNDS_TO_DROP``), it is slower than the current leader (the lowest geometric mean) with
confidence: the lower end of a t interval of the per-round log ratios candidate / leader lies above 0, at level
1 - (1 - confidence) / k for k candidates compared with the leader (Bonferroni over the comparisons of one round).
The budget then goes to the close calls (F-race's idea: Birattari et al., GECCO 2002; with a paired t test in place
of Friedman's, as the rounds pair the candidates).

Candidates named in `keep` (each library's default: the training check compares against it) are never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
from scipy import stats

MIN_ROUNDS_TO_DROP = 3
CONFIDENCE = 0.99


def leader(times: Mapping[str, Iterable[float]]) -> str:
    """The candidate with the lowest geometric mean over its rounds."""
    if not times:
        raise ValueError("no candidates to lead")
    return min(times, key=lambda c: float(np.mean(np.log(np.asarray(list(times[c]), dtype=float)))))


def to_drop(times: Mapping[str, Iterable[float]], keep: Iterable[str] = (), confidence: float = CONFIDENCE,
            min_rounds: int = MIN_ROUNDS_TO_DROP) -> set[str]:
    """The candidates clearly slower than the leader. `times`: candidate -> its per-round times, aligned by round
    (the same rounds for every candidate; lower is better)."""
    series = {c: np.asarray(list(t), dtype=float) for c, t in times.items()}
    lengths = {len(t) for t in series.values()}
    if len(lengths) > 1:
        raise ValueError(f"candidates with different numbers of rounds: {sorted(lengths)}")
    if not series or lengths.pop() < min_rounds:
        return set()
    best = leader(series)
    others = [c for c in series if c != best and c not in set(keep)]
    if not others:
        return set()
    level = 1 - (1 - confidence) / max(1, len(series) - 1)
    out = set()
    for c in others:
        r = np.log(series[c] / series[best])
        n = len(r)
        half = stats.t.ppf(1 - (1 - level) / 2, n - 1) * r.std(ddof=1) / np.sqrt(n)
        if r.mean() - half > 0:
            out.add(c)
    return out


def simulate(means: Mapping[str, float], rounds: int, seed: int, drift: float = 0.3, noise: float = 0.1,
             keep: Iterable[str] = ()) -> tuple[dict[str, int], str]:
    """A race over candidates whose true times are `means`, each round's times drawn with a factor common to the
    round (the machine's drift) and a candidate's own noise (log-normal); (candidate -> the round it was dropped
    after, absent if it never was; the leader at the end). For tests and for choosing the rule's settings."""
    rng = np.random.default_rng(seed)
    alive = dict.fromkeys(means)
    history: dict[str, list[float]] = {c: [] for c in means}
    dropped: dict[str, int] = {}
    for r in range(rounds):
        common = np.exp(rng.normal(0, drift))
        for c in means:
            history[c].append(means[c] * common * np.exp(rng.normal(0, noise)))
        for c in to_drop({c: history[c] for c in alive}, keep):
            dropped[c] = r
            alive.pop(c)
    return dropped, leader({c: history[c] for c in alive})
