"""Alpha-beta-gamma cost models of Allreduce algorithms, fitted to microbenchmarks, predicting beyond them.

T(n, p) = o + a(p, n) * alpha + b(p) * n * beta + c(p) * n * gamma, with n the message size in bytes, alpha the
latency per message (us), beta the transfer time per byte, gamma the reduction time per byte (Thakur,
Rabenseifner and Gropp 2005; Patarasuk and Yuan 2009), plus o, the per-call software overhead (LogP's o),
which on one node is of the order of alpha and would otherwise be forced into it. Each algorithm in ardlab.comm's table names its model
(``Algorithm.cost_model``), so this module holds the formulas once per family:

- recursive_doubling: lg p steps of the whole vector (with the fold: +2 steps when p is not a power of two);
- rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather (+ the fold);
- ring: 2(p-1) steps of n/p; segmented_ring: the same bytes, one message per segment;
- binomial: binomial reduce + binomial bcast, 2 lg p steps of the whole vector;
- recursive_multiplying: k-ary recursive doubling (k=2 in MPICH's defaults: as recursive_doubling);
- linear: p-1 whole vectors to a root and back.

Fits are least squares with o, alpha, beta, gamma >= 0 (scipy), per library, algorithm and node class
(one node: intra-node constants; several: inter-node). Where an algorithm's coefficients are proportional
(ring: b = 2c at every p) only the combination is determined; predictions use that combination, which is
all the model needs. A fit is rejected, with the reason, when it has fewer than 4 sizes, or its median
relative error exceeds 50%.

Regimes: the per-message and per-byte costs are not the same at every size (the library switches from eager
to rendezvous copies at a few KiB; the working set leaves the caches beyond a few hundred KiB: measured here,
4x the size costs 8-10x the time between 256 KiB and 1 MiB). A fit therefore may split at measured sizes into
up to three sets of constants, each fitted on its own points (>= 4 sizes in the first, >= 3 in the others);
more splits are taken where they at least halve the sum of squared relative errors of the fit kept so far,
which must miss by more than 1% (RMS).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ardlab.comm.libraries import DEFAULT, OWN_ALGORITHMS, TUNED, library

SEGMENT = 65536  # bytes: Open MPI's segmented ring as forced by the table
MIN_SIZES = 4  # message sizes a fit (or its small-message regime) needs
MIN_REGIME_SIZES = 3  # message sizes every further regime needs
MAX_SPLITS = 2  # at most three regimes: latency-bound, in-cache and memory-bound transfers
SPLIT_GAIN = 0.5  # one more regime must at least halve the sum of squared relative errors ...
SPLIT_MIN_RMS = 0.01  # ... of fewer regimes that miss by more than 1% (root mean square)
HELD_SIZES = 3  # the "sizes" hold-out predicts the largest measured sizes from the others


def _lg(p: np.ndarray) -> np.ndarray:
    return np.floor(np.log2(p))


def _extra(p: np.ndarray) -> np.ndarray:
    """1 where p is not a power of two (the fold adds steps), else 0."""
    return (2 ** _lg(p) != p).astype(float)


def coefficients(model: str, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(len, 4) matrix of the o, alpha, beta, gamma coefficients of `model` at sizes n (bytes), ranks p."""
    n, p = np.asarray(n, float), np.asarray(p, float)
    lg, ex = _lg(p), _extra(p)
    pp = 2 ** lg  # the power of two the fold reduces to
    if model in ("recursive_doubling", "recursive_multiplying"):
        a, b, c = lg + 2 * ex, (lg + 2 * ex) * n, (lg + ex) * n
    elif model == "rabenseifner":
        a = 2 * lg + 2 * ex
        b = (2 * (pp - 1) / pp + 2 * ex) * n
        c = ((pp - 1) / pp + ex) * n
    elif model == "ring":
        a, b, c = 2 * (p - 1), 2 * (p - 1) / p * n, (p - 1) / p * n
    elif model == "segmented_ring":
        a = 2 * (p - 1) * np.maximum(1.0, np.ceil(n / p / SEGMENT))
        b, c = 2 * (p - 1) / p * n, (p - 1) / p * n
    elif model == "binomial":
        steps = np.ceil(np.log2(p))
        a, b, c = 2 * steps, 2 * steps * n, steps * n
    elif model == "linear":
        a, b, c = 2 * (p - 1), 2 * (p - 1) * n, (p - 1) * n
    else:
        raise ValueError(f"no cost model {model!r}; known: {', '.join(MODELS)}")
    return np.stack([np.ones_like(a), a, b, c], axis=1)


MODELS = ("recursive_doubling", "recursive_multiplying", "rabenseifner", "ring", "segmented_ring", "binomial",
          "linear")


def model_of(library_name: str, algorithm: str) -> str | None:
    alg = OWN_ALGORITHMS.get(algorithm) or library(library_name).algorithms.get(algorithm)
    return alg.cost_model if alg else None


@dataclass
class Regime:
    """One set of constants, for the sizes from `from_bytes` up to the next regime's."""
    from_bytes: float
    overhead_us: float
    alpha_us: float
    beta_us_per_byte: float
    gamma_us_per_byte: float

    @property
    def constants(self) -> np.ndarray:
        return np.array([self.overhead_us, self.alpha_us, self.beta_us_per_byte, self.gamma_us_per_byte])


@dataclass
class Fit:
    library: str
    algorithm: str
    model: str
    node_class: str  # intra (one node) | inter (several)
    regimes: list[Regime]  # by size, the first from 0
    points: int
    median_rel_err: float
    max_rel_err: float
    status: str  # "ok" or "rejected: <why>"

    def predict(self, n, p) -> np.ndarray:
        n = np.asarray(n, float)
        A = coefficients(self.model, n, p)
        t = np.zeros(len(n))
        for r in self.regimes:
            t = np.where(n >= r.from_bytes, A @ r.constants, t)
        return t

    def rows(self) -> list[dict]:
        """The fit as table rows, one per regime."""
        head = {k: getattr(self, k) for k in ("library", "algorithm", "model", "node_class")}
        tail = {k: getattr(self, k) for k in ("points", "median_rel_err", "max_rel_err", "status")}
        return [{**head, "regime": i, **r.__dict__, **tail} for i, r in enumerate(self.regimes)]


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


def fit_one(library_name: str, algorithm: str, model: str, data: pd.DataFrame, node_class: str) -> Fit:
    n, p, t = data.size_bytes.to_numpy(float), data.ranks.to_numpy(float), data.avg_us.to_numpy(float)
    A = coefficients(model, n, p)
    if len(np.unique(p)) == 1:  # o and alpha are inseparable at one rank count: the classical model (o = 0)
        A[:, 0] = 0.0
    sizes = np.unique(n)
    seen: dict = {}
    best = _regimes(A, t, n, (), seen)
    for k in range(1, MAX_SPLITS + 1):
        if best[0] <= SPLIT_MIN_RMS ** 2 * len(t):
            break
        found = None
        for cuts in itertools.combinations(sizes[MIN_SIZES:], k):
            bounds = [*cuts, np.inf]
            if any(np.count_nonzero((sizes >= a) & (sizes < b)) < MIN_REGIME_SIZES for a, b in zip(bounds, bounds[1:])):
                continue
            trial = _regimes(A, t, n, cuts, seen)
            if found is None or trial[0] < found[0]:
                found = trial
        if found is not None and found[0] <= SPLIT_GAIN * best[0]:
            best = found
    _, regimes, rel = best
    rel = np.abs(rel)
    status = "ok"
    if len(sizes) < MIN_SIZES:
        status = f"rejected: only {len(sizes)} message sizes (need >= {MIN_SIZES})"
    elif np.median(rel) > 0.5:
        status = f"rejected: median relative error {np.median(rel):.0%} (> 50%): the model does not describe it"
    return Fit(library_name, algorithm, model, node_class, regimes, len(t), float(np.median(rel)),
               float(rel.max()), status)


def _medians(b: pd.DataFrame) -> pd.DataFrame:
    b = b[~b.algorithm.isin([DEFAULT, TUNED])]
    return b.groupby(["library", "algorithm", "nodes", "ranks", "size_bytes"], as_index=False).avg_us.median()


def _fair(m: pd.DataFrame, cores_per_node: int | None) -> pd.Series:
    """True for measurements with no more ranks per node than cores (the others time-share cores)."""
    return pd.Series(True, index=m.index) if cores_per_node is None else m.ranks <= cores_per_node * m.nodes


def fit_all(b: pd.DataFrame, cores_per_node: int | None = None) -> list[Fit]:
    """One fit per library, algorithm with a model, and node class, from the measurements that are not
    oversubscribed (more ranks per node than `cores_per_node`)."""
    m = _medians(b)
    m = m[_fair(m, cores_per_node)]
    m["node_class"] = np.where(m.nodes > 1, "inter", "intra")
    fits = []
    for (lib, alg, cls), g in m.groupby(["library", "algorithm", "node_class"]):
        model = model_of(lib, alg)
        if model:
            fits.append(fit_one(lib, alg, model, g, cls))
    return fits


HOLDOUTS = ("sizes", "ranks")


class TooFewSizes(ValueError):
    """The measurements have too few sizes for the sizes hold-out."""


def validate(b: pd.DataFrame, holdout: str = "sizes", *, held_sizes: int = HELD_SIZES,
             cores_per_node: int | None = None) -> pd.DataFrame:
    """Fit on part of the one-node measurements, predict the held-out rest.

    holdout "sizes": fit all but the `held_sizes` largest measured sizes (every rank count), predict those;
    holdout "ranks": fit the smallest rank count, predict the larger ones (every size).
    Per held-out (library, ranks, size): is the predicted best algorithm's measured time within 10% of the
    measured best (among the algorithms with an accepted fit)? Points with more ranks than `cores_per_node`
    are marked oversubscribed: their times show the ranks time-sharing cores, which no cost model describes.
    """
    m = _medians(b)
    m = m[m.nodes == 1]
    fair = _fair(m, cores_per_node)
    if holdout == "sizes":
        sizes = np.sort(m.size_bytes.unique())
        if len(sizes) < held_sizes + MIN_SIZES:
            raise TooFewSizes(f"holding out the {held_sizes} largest sizes needs >= {held_sizes + MIN_SIZES} "
                             f"measured sizes, got {len(sizes)}")
        cut = sizes[-held_sizes]
        train, held = m[(m.size_bytes < cut) & fair], m[m.size_bytes >= cut]
    elif holdout == "ranks":
        train, held = m[(m.ranks == m.ranks.min()) & fair], m[m.ranks > m.ranks.min()]
    else:
        raise ValueError(f"unknown hold-out {holdout!r}; valid: {', '.join(HOLDOUTS)}")
    rows = []
    for lib, g in held.groupby("library"):
        fits = {}
        for alg, tg in train[train.library == lib].groupby("algorithm"):
            model = model_of(lib, alg)
            if model:
                f = fit_one(lib, alg, model, tg, "intra")
                if f.status == "ok":
                    fits[alg] = f
        for (ranks, size), h in g.groupby(["ranks", "size_bytes"]):
            h = h[h.algorithm.isin(fits)]
            if len(h) < 2:
                continue
            measured = dict(zip(h.algorithm, h.avg_us))
            predicted = {a: float(fits[a].predict([size], [ranks])[0]) for a in measured}
            pick = min(predicted, key=predicted.get)
            best = min(measured, key=measured.get)
            rows.append({"holdout": holdout, "library": lib, "ranks": ranks, "size_bytes": size, "predicted_best": pick,
                         "measured_best": best, "measured_best_us": measured[best],
                         "predicted_pick_measured_us": measured[pick],
                         "within_10pct": measured[pick] <= 1.1 * measured[best],
                         "predicted_us": predicted[pick],
                         "oversubscribed": not fair[h.index].all()})
    return pd.DataFrame(rows)


def score(val: pd.DataFrame) -> pd.DataFrame:
    """Per hold-out and library (and "all"): the share of held-out points whose predicted best is within 10%
    of the measured best, over the points that are not oversubscribed, and separately over those that are."""
    cols = ["holdout", "library", "score", "points", "oversubscribed_score", "oversubscribed_points"]
    rows = []
    for h, g in (val.groupby("holdout") if len(val) else ()):
        for lib, gl in list(g.groupby("library")) + [("all", g)]:
            fair, over = gl[~gl.oversubscribed], gl[gl.oversubscribed]
            rows.append([h, lib, fair.within_10pct.mean() if len(fair) else math.nan, len(fair),
                         over.within_10pct.mean() if len(over) else math.nan, len(over)])
    return pd.DataFrame(rows, columns=cols)


def default_proxy(b: pd.DataFrame, lib: str) -> dict[int, str]:
    """Per measured size at the largest measured rank count: the modelled algorithm closest to the default."""
    m = b[(b.library == lib) & (b.nodes == 1)]
    if m.empty:
        return {}
    m = m.groupby(["algorithm", "ranks", "size_bytes"], as_index=False).avg_us.median()
    m = m[m.ranks == m.ranks.max()]
    out = {}
    for size, g in m.groupby("size_bytes"):
        d = g[g.algorithm == DEFAULT].avg_us
        cand = g[g.algorithm.map(lambda a: model_of(lib, a) is not None) & ~g.algorithm.isin(OWN_ALGORITHMS)]
        if len(d) and len(cand):
            out[int(size)] = cand.iloc[(cand.avg_us - d.iloc[0]).abs().argmin()].algorithm
    return out


def predict(fits: list[Fit], b: pd.DataFrame, ranks: list[int], sizes: list[int]) -> pd.DataFrame:
    """Per library, ranks and size: predicted time of each accepted native fit, the best, and its speedup
    over the algorithm that behaves like the library's default at the measured scale (default_proxy)."""
    rows = []
    for lib in sorted({f.library for f in fits}):
        ok = [f for f in fits if f.library == lib and f.status == "ok" and f.node_class == "intra"
              and f.algorithm not in OWN_ALGORITHMS]
        if not ok:
            continue
        proxy = default_proxy(b, lib)
        for p in ranks:
            t = {f.algorithm: f.predict(sizes, [p] * len(sizes)) for f in ok}
            for i, n in enumerate(sizes):
                times = {a: float(v[i]) for a, v in t.items()}
                best = min(times, key=times.get)
                near = [s for s in proxy if s <= n] or list(proxy)
                dflt = proxy[max(near)] if proxy else None
                rows.append({"library": lib, "ranks": p, "size_bytes": n, "predicted_best": best,
                             "predicted_us": times[best], "default_like": dflt,
                             "predicted_speedup_vs_default": times[dflt] / times[best] if dflt in times else math.nan})
    return pd.DataFrame(rows)
