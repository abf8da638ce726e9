"""Fitting: least squares of the constants per library, algorithm, node class and link rate, split into regimes
where that halves the error (``fit_one``, ``fit_all``)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from ardlab.analysis.costmodel.model import Fit, Regime, coefficients, model_of
from ardlab.comm.libraries import DEFAULT, TUNED

MIN_SIZES = 4  # message sizes a fit (or its small-message regime) needs


MIN_REGIME_SIZES = 3  # message sizes every further regime needs


MAX_SPLITS = 2  # at most three regimes: latency-bound, in-cache and memory-bound transfers


SPLIT_GAIN = 0.5  # one more regime must at least halve the sum of squared relative errors ...


SPLIT_MIN_RMS = 0.01  # ... of fewer regimes that miss by more than 1% (root mean square)


def _lsq(A: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Constants >= 0 minimising the relative errors (every point weighs the same whatever its magnitude)."""
    from scipy.optimize import lsq_linear

    used = A.any(axis=0)  # a column of zeros (o at one rank count) stays 0
    x = np.zeros(A.shape[1])
    x[used] = lsq_linear(A[:, used] / t[:, None], np.ones_like(t), bounds=(0, np.inf)).x
    return x, (A @ x - t) / t


def _regimes(A: np.ndarray, t: np.ndarray, n: np.ndarray, cuts: tuple, seen: dict
             ) -> tuple[float, list, np.ndarray]:
    """Fit each regime between consecutive cuts: (sum of squared relative errors, regimes, errors).

    `seen` keeps each (lo, hi) segment's fit: the candidate splits of one fit share most of their segments.
    """
    edges = [0.0, *cuts, np.inf]
    cost, regimes, rel = 0.0, [], np.zeros_like(t)
    for lo, hi in zip(edges, edges[1:]):
        sel = (n >= lo) & (n < hi)
        if (lo, hi) not in seen:
            seen[lo, hi] = _lsq(A[sel], t[sel])
        x, r = seen[lo, hi]
        cost += float(np.sum(r ** 2))
        regimes.append(Regime(float(lo), *map(float, x)))
        rel[sel] = r
    return cost, regimes, rel


def _describes_above(trial: tuple, best: tuple, n: np.ndarray) -> bool:
    """Does `trial` at least halve the squared relative error of the sizes from its lowest cut up, which `best`
    misses by more than 1% RMS? (Scatter below the cut that no constants explain, e.g. ranks time-sharing
    cores at a few bytes, must not veto constants that describe the larger sizes.)"""
    above = n >= trial[1][1].from_bytes
    before, after = float(np.sum(best[2][above] ** 2)), float(np.sum(trial[2][above] ** 2))
    return before > SPLIT_MIN_RMS ** 2 * np.count_nonzero(above) and after <= SPLIT_GAIN * before


def fit_one(library_name: str, algorithm: str, model: str, data: pd.DataFrame, node_class: str,
            link_rate: str = "", min_sizes: int = MIN_SIZES) -> Fit:
    n, p, t = data.size_bytes.to_numpy(float), data.ranks.to_numpy(float), data.avg_us.to_numpy(float)
    A = coefficients(model, n, p)
    if len(np.unique(p)) == 1:  # o and alpha are inseparable at one rank count: the classical model (o = 0)
        A[:, 0] = 0.0
    ratio = A[:, 2] / np.where(A[:, 3] > 0, A[:, 3], np.nan)
    folded = bool(np.all(np.isfinite(ratio)) and np.allclose(ratio, ratio[0], rtol=1e-9))
    if folded:  # only beta + gamma * c/b is determined: beta holds it
        A[:, 3] = 0.0
    sizes = np.unique(n)
    seen: dict = {}
    best = _regimes(A, t, n, (), seen)
    for k in range(1, MAX_SPLITS + 1):
        if best[0] <= SPLIT_MIN_RMS ** 2 * len(t):
            break
        found = None
        for cuts in itertools.combinations(sizes[min_sizes:], k):
            bounds = [*cuts, np.inf]
            if any(np.count_nonzero((sizes >= a) & (sizes < b)) < MIN_REGIME_SIZES for a, b in zip(bounds, bounds[1:])):
                continue
            trial = _regimes(A, t, n, cuts, seen)
            if found is None or trial[0] < found[0]:
                found = trial
        if found is not None and (found[0] <= SPLIT_GAIN * best[0] or _describes_above(found, best, n)):
            best = found
    _, regimes, rel = best
    rel = np.abs(rel)
    status = "ok"
    if len(sizes) < min_sizes:
        status = f"rejected: only {len(sizes)} message sizes (need >= {min_sizes})"
    elif np.median(rel) > 0.5:
        status = f"rejected: median relative error {np.median(rel):.0%} (> 50%): the model does not describe it"
    return Fit(library_name, algorithm, model, node_class, regimes, len(t), float(np.median(rel)),
               float(rel.max()), status, link_rate, folded)


KEY = ["library", "algorithm", "link_rate", "nodes", "ranks", "size_bytes"]


def _rates(b: pd.DataFrame) -> pd.Series:
    """Each row's link rate ("" where the rows carry none: not measured on an emulated cluster)."""
    return b.link_rate.astype(str) if "link_rate" in b else pd.Series("", index=b.index)


def _medians(b: pd.DataFrame) -> pd.DataFrame:
    b = b[~b.algorithm.isin([DEFAULT, TUNED])]
    return b.assign(link_rate=_rates(b)).groupby(KEY, as_index=False).avg_us.median()


def _rounds(b: pd.DataFrame) -> dict:
    """Per KEY: the times of its rounds, in round order (for paired intervals between algorithms)."""
    b = b.assign(link_rate=_rates(b), round=b["round"] if "round" in b else 0)
    return {k: g.sort_values("round").avg_us.to_numpy(float) for k, g in b.groupby(KEY)}


def _fair(m: pd.DataFrame, cores_per_node: int | None) -> pd.Series:
    """True for measurements with no more ranks per node than cores (the others time-share cores)."""
    return pd.Series(True, index=m.index) if cores_per_node is None else m.ranks <= cores_per_node * m.nodes


def fit_all(b: pd.DataFrame, cores_per_node: int | None = None, min_sizes: int = MIN_SIZES) -> list[Fit]:
    """One fit per library, algorithm with a model, node class and link rate, from the measurements that are not
    oversubscribed (more ranks per node than `cores_per_node`)."""
    m = _medians(b)
    m = m[_fair(m, cores_per_node)]
    m["node_class"] = np.where(m.nodes > 1, "inter", "intra")
    fits = []
    for (lib, alg, cls, rate), g in m.groupby(["library", "algorithm", "node_class", "link_rate"]):
        model = model_of(lib, alg, cls)
        if model:
            fits.append(fit_one(lib, alg, model, g, cls, rate, min_sizes))
    return fits
