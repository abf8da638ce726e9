"""Alpha-beta-gamma cost models of Allreduce algorithms, fitted to microbenchmarks, predicting beyond them.

T(n, p) = o + a(p, n) * alpha + b(p) * n * beta + c(p) * n * gamma + f(p) * n * phi, with n the message size in
bytes, alpha the latency per message (us), beta the transfer time per byte, gamma the reduction time per byte
(Thakur, Rabenseifner and Gropp 2005; Patarasuk and Yuan 2009), plus o, the per-call software overhead (LogP's o),
which on one node is of the order of alpha and would otherwise be forced into it, and phi, the cost per byte of
the fold: where p is not a power of two, recursive doubling and Rabenseifner first fold the p - 2^k extra ranks'
vectors into partners and send the result back at the end (f = 2: the whole vector there and back). The fold
is a phase of its own (its transfers are serial, half the ranks idle, the reduction between them unoverlapped):
measured across 3 nodes at 1 Gbit/s, Intel MPI's Rabenseifner took 2.1-2.2x the wire time of its fold's and
reduce-scatter's bytes, the others (MPICH's, Open MPI's, ours) 0.83-1.35x, so the fold gets its own constant instead
of beta's.
Each algorithm in ardlab.comm's table names its model (``Algorithm.cost_model``), so this module holds the
formulas once per family:

- recursive_doubling: lg p steps of the whole vector (+ the fold's 2 steps when p is not a power of two);
- rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather (+ the fold's);
- ring: 2(p-1) steps of n/p; segmented_ring: the same bytes, one message per segment;
- binomial: binomial reduce + binomial bcast, 2 lg p steps of the whole vector;
- recursive_multiplying: k-ary recursive doubling (k=2 in MPICH's defaults: as recursive_doubling);
- linear: p-1 whole vectors to a root and back.

Fits are least squares with o, alpha, beta, gamma >= 0 (scipy), per library, algorithm, node class (one
node: intra-node constants; several: inter-node) and link rate (the emulated cluster's, recorded in every
row). Across nodes an algorithm is modelled by the bytes its ranks put on the wire (the table's ``traffic``
family where the byte counts showed another family than its name suggests, e.g. Intel MPI's
topo_reduce_bcast moves a ring's bytes). Where an algorithm's beta and gamma coefficients are proportional at
every measured point (every family here once the fold has its own constant: b = 2c, or b = c for recursive
doubling) only their combination is determined: gamma is then 0 and beta holds the whole per-byte cost
(``gamma_folded``). A fit is rejected, with the reason, when it has fewer than 4 sizes, or its median relative
error exceeds 50%.

Against a known link (the emulated cluster's tc rate): the inter-node beta of a bandwidth-optimal algorithm
should be 8/rate seconds per byte (``ground_truth``), and follow the rate between two settings
(``rate_scaling``). Held out (``validate``): the largest sizes, the larger rank counts (one node) or the
largest node count (several nodes); a held-out point is *decided* where the paired interval of the predicted
pick's time over the measured best's lies wholly on one side of 1.10.

For another network (``Network``: a user's link rate and latency) the inter-node fits keep their software
overhead o and the per-byte cost the measured link did not explain (reduction, copies, the TCP stack:
beta - 8/rate_measured), and take the given latency as alpha and 8/rate as the wire's beta.

Regimes: the per-message and per-byte costs are not the same at every size (the library switches from eager
to rendezvous copies at a few KiB; the working set leaves the caches beyond a few hundred KiB: measured here,
4x the size costs 8-10x the time between 256 KiB and 1 MiB). A fit therefore may split at measured sizes into
up to three sets of constants, each fitted on its own points (>= 4 sizes in the first, >= 3 in the others);
more splits are taken where they at least halve the sum of squared relative errors of the fit kept so far,
which must miss by more than 1% (RMS), over all points or over those from the split's lowest size up (scatter
that no constants explain below it, such as ranks time-sharing cores at a few bytes, must not veto constants
that describe the larger sizes: on the emulated cluster at 1 Gbit/s it had kept Open MPI's ring at one set of
constants, predicting 4 MiB on 4 nodes at 0.88x the measured time, 0.97x with the split).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ardlab.cluster.links import allreduce_wire_us, rate_bits_per_s, wire_beta_us
from ardlab.comm.families import BANDWIDTH_OPTIMAL, COST_FAMILIES, FAMILIES
from ardlab.comm.libraries import DEFAULT, OWN_ALGORITHMS, TUNED, library
from ardlab.stats import speedup_ci

MIN_SIZES = 4  # message sizes a fit (or its small-message regime) needs
MIN_REGIME_SIZES = 3  # message sizes every further regime needs
MAX_SPLITS = 2  # at most three regimes: latency-bound, in-cache and memory-bound transfers
SPLIT_GAIN = 0.5  # one more regime must at least halve the sum of squared relative errors ...
SPLIT_MIN_RMS = 0.01  # ... of fewer regimes that miss by more than 1% (root mean square)
HELD_SIZES = 3  # the "sizes" hold-out predicts the largest measured sizes from the others
WITHIN = 1.10  # a pick scores where its measured time is within 10% of the measured best's
GROUND_TRUTH_TOLERANCE = 0.15
LINK_BOUND = 0.5  # a held-out point across nodes is link-bound where the wire time is >= half the measured best


def coefficients(model: str, n: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(len, 5) matrix of the o, alpha, beta, gamma, phi (fold) coefficients of `model` (a family of
    ardlab.comm.families) at sizes n (bytes), ranks p."""
    n, p = np.asarray(n, float), np.asarray(p, float)
    fam = FAMILIES.get(model)
    if fam is None or fam.costs is None:
        raise ValueError(f"no cost model {model!r}; known: {', '.join(MODELS)}")
    a, b, c, f = (np.broadcast_to(x, n.shape).astype(float) for x in fam.costs(n, p))
    return np.stack([np.ones_like(a), a, b, c, f], axis=1)


MODELS = COST_FAMILIES


def model_of(library_name: str, algorithm: str, node_class: str = "intra") -> str | None:
    """The cost model of an algorithm; across nodes ("inter") the family of the bytes it was seen to send."""
    alg = OWN_ALGORITHMS.get(algorithm) or library(library_name).algorithms.get(algorithm)
    if alg is None:
        return None
    if node_class == "inter" and alg.traffic_family in MODELS:
        return alg.traffic_family
    return alg.cost_model


def parse_latency(text: str) -> float:
    """'1us', '0.05ms', '2e-6s' -> microseconds; ValueError naming text that is not a latency."""
    units = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            try:
                value = float(text[: -len(unit)])
            except ValueError:
                break
            if value >= 0:
                return value * units[unit]
            break
    raise ValueError(f"latency {text!r} is not a time like 1us, 0.05ms or 2e-6s (a number >= 0 and one of "
                     f"{', '.join(units)})")


@dataclass(frozen=True)
class Network:
    """A network to predict for: its link rate (tc notation, e.g. 100gbit) and per-message latency (us)."""
    link_rate: str
    latency_us: float

    @property
    def beta_us(self) -> float:
        return wire_beta_us(self.link_rate)


@dataclass
class Regime:
    """One set of constants, for the sizes from `from_bytes` up to the next regime's."""
    from_bytes: float
    overhead_us: float
    alpha_us: float
    beta_us_per_byte: float
    gamma_us_per_byte: float
    fold_us_per_byte: float = 0.0  # phi: per byte of the fold (0 where the fits saw no rank count that folds)

    @property
    def constants(self) -> np.ndarray:
        return np.array([self.overhead_us, self.alpha_us, self.beta_us_per_byte, self.gamma_us_per_byte,
                         self.fold_us_per_byte])


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
    link_rate: str = ""  # the emulated cluster's link rate ("": not measured on one)
    gamma_folded: bool = False  # beta and gamma proportional at every point: beta holds both, gamma is 0

    def predict(self, n, p) -> np.ndarray:
        n = np.asarray(n, float)
        A = coefficients(self.model, n, p)
        t = np.zeros(len(n))
        for r in self.regimes:
            t = np.where(n >= r.from_bytes, A @ r.constants, t)
        return t

    def rows(self) -> list[dict]:
        """The fit as table rows, one per regime."""
        head = {k: getattr(self, k) for k in ("library", "algorithm", "model", "node_class", "link_rate")}
        tail = {k: getattr(self, k) for k in ("gamma_folded", "points", "median_rel_err", "max_rel_err", "status")}
        return [{**head, "regime": i, **r.__dict__, **tail} for i, r in enumerate(self.regimes)]

    def on(self, network: Network) -> "Fit":
        """This inter-node fit moved to another network: alpha is its latency, beta (and the fold's phi) its wire
        time per byte plus the per-byte cost the measured link did not explain."""
        if self.node_class != "inter" or self.link_rate in ("", "none"):
            raise ValueError(f"{self.library} {self.algorithm}: only a fit across nodes at a known link rate can be "
                             f"moved to another network (this one: {self.node_class}, link rate {self.link_rate!r})")
        host = wire_beta_us(self.link_rate)
        regimes = [Regime(r.from_bytes, r.overhead_us, network.latency_us,
                          network.beta_us + max(0.0, r.beta_us_per_byte - host), r.gamma_us_per_byte,
                          network.beta_us + max(0.0, r.fold_us_per_byte - host) if r.fold_us_per_byte else 0.0)
                   for r in self.regimes]
        return dataclasses.replace(self, regimes=regimes, link_rate=network.link_rate)


FIT_COLUMNS = ["library", "algorithm", "model", "node_class", "link_rate", "regime", "from_bytes", "overhead_us",
               "alpha_us", "beta_us_per_byte", "gamma_us_per_byte", "fold_us_per_byte", "gamma_folded", "points",
               "median_rel_err", "max_rel_err", "status"]


def read_fits(path) -> list[Fit]:
    """The fits of a costmodel_fits.csv (`ardlab predict` writes it), e.g. from the user's own cluster."""
    df = pd.read_csv(path, dtype={"link_rate": str}, keep_default_na=False)
    missing = [c for c in FIT_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a cost-model fit table of this ardlab (columns {missing} missing; "
                         "`ardlab predict --fit <microbenchmark csv files>` writes one)")
    fits = []
    for key, g in df.groupby(["library", "algorithm", "node_class", "link_rate"], sort=False):
        g = g.sort_values("regime")
        r0 = g.iloc[0]
        if r0.model not in MODELS:
            raise ValueError(f"{path}: {r0.library} {r0.algorithm}: unknown model {r0.model!r}")
        regimes = [Regime(float(r.from_bytes), float(r.overhead_us), float(r.alpha_us), float(r.beta_us_per_byte),
                          float(r.gamma_us_per_byte), float(r.fold_us_per_byte)) for r in g.itertuples()]
        fits.append(Fit(r0.library, r0.algorithm, r0.model, r0.node_class, regimes, int(r0.points),
                        float(r0.median_rel_err), float(r0.max_rel_err), r0.status, r0.link_rate,
                        str(r0.gamma_folded) == "True"))
    return fits


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


HOLDOUTS = ("sizes", "ranks", "nodes")


class TooFewSizes(ValueError):
    """The measurements have too few sizes (or node counts) for a hold-out."""


def _split(m: pd.DataFrame, holdout: str, fair: pd.Series, held_sizes: int):
    """(train, held) rows of a hold-out."""
    if holdout == "sizes":
        sizes = np.sort(m.size_bytes.unique())
        if len(sizes) < held_sizes + MIN_SIZES:
            raise TooFewSizes(f"holding out the {held_sizes} largest sizes needs >= {held_sizes + MIN_SIZES} "
                              f"measured sizes, got {len(sizes)}")
        cut = sizes[-held_sizes]
        return m[(m.size_bytes < cut) & fair], m[m.size_bytes >= cut]
    if holdout in ("ranks", "nodes"):
        # At one count every model's step and byte coefficients are constants times the size: one count cannot
        # tell o from alpha, nor beta from gamma and phi, so it cannot predict another count.
        counts = sorted(m[holdout].unique().tolist())
        if len(counts) < 3:
            raise TooFewSizes(f"holding out the largest {holdout[:-1]} count needs >= 3 {holdout[:-1]} counts (the "
                              f"fits need two to tell the per-step from the per-byte costs), got {counts}")
        return m[(m[holdout] < counts[-1]) & fair], m[m[holdout] == counts[-1]]
    raise ValueError(f"unknown hold-out {holdout!r}; valid: {', '.join(HOLDOUTS)}")


def validate(b: pd.DataFrame, holdout: str = "sizes", *, held_sizes: int = HELD_SIZES,
             cores_per_node: int | None = None) -> pd.DataFrame:
    """Fit on part of the measurements, predict the held-out rest.

    holdout "sizes": fit all but the `held_sizes` largest measured sizes (one node, every rank count), predict
    those; "ranks": fit the rank counts below the largest on one node, predict the largest (every size); "nodes":
    fit the runs on fewer nodes than the most (1 rank per node or more), predict the most (every size), per link
    rate. Both need at least two counts to fit. A (library, link rate) with too few sizes or counts is left out
    (named in ``attrs["skipped"]``); TooFewSizes when every one is.
    Per held-out (library, link rate, nodes, ranks, size): is the predicted best algorithm's measured time within
    10% of the measured best (among the algorithms with an accepted fit)? `pick_over_best` is the paired ratio of
    medians over rounds with its bootstrap interval; the point is `decided` where that interval lies wholly on one
    side of 1.10 (or the pick is the best). Points with more ranks than `cores_per_node` are marked
    oversubscribed. Across nodes, `link_bound` marks points whose wire time (a bandwidth-optimal algorithm's bytes
    at the link rate) is at least half the measured best: there the links, not the shared cores, set the time.
    """
    if holdout not in HOLDOUTS:
        raise ValueError(f"unknown hold-out {holdout!r}; valid: {', '.join(HOLDOUTS)}")
    m = _medians(b)
    m = m[m.nodes > 1] if holdout == "nodes" else m[m.nodes == 1]
    cls = "inter" if holdout == "nodes" else "intra"
    if m.empty:
        raise TooFewSizes(f"no {'multi-node' if cls == 'inter' else 'one-node'} measurements for the {holdout} "
                          "hold-out")
    rounds = _rounds(b[~b.algorithm.isin([DEFAULT, TUNED])])
    rows, skipped = [], []
    for (lib, rate), mg in m.groupby(["library", "link_rate"]):
        fair = _fair(mg, cores_per_node)
        try:
            train, held = _split(mg, holdout, fair, held_sizes)
        except TooFewSizes as e:  # another library or link rate may still have enough
            skipped.append(f"{lib} at link rate {rate or 'unknown'}: {e}")
            continue
        fits = {}
        for alg, tg in train.groupby("algorithm"):
            model = model_of(lib, alg, cls)
            if model:
                f = fit_one(lib, alg, model, tg, cls, rate)
                if f.status == "ok":
                    fits[alg] = f
        for (nodes, ranks, size), h in held.groupby(["nodes", "ranks", "size_bytes"]):
            h = h[h.algorithm.isin(fits)]
            if len(h) < 2:
                continue
            measured = dict(zip(h.algorithm, h.avg_us))
            predicted = {a: float(fits[a].predict([size], [ranks])[0]) for a in measured}
            pick = min(predicted, key=predicted.get)
            best = min(measured, key=measured.get)
            key = (lib, pick, rate, nodes, ranks, size)
            ratio, lo, hi = (1.0, 1.0, 1.0) if pick == best else speedup_ci(
                rounds[key], rounds[(lib, best, rate, nodes, ranks, size)])
            wire = (allreduce_wire_us(ranks, size, rate) if cls == "inter" and rate not in ("", "none")
                    else math.nan)
            rows.append({"holdout": holdout, "library": lib, "link_rate": rate, "nodes": nodes, "ranks": ranks,
                         "size_bytes": size, "predicted_best": pick, "measured_best": best,
                         "measured_best_us": measured[best], "predicted_pick_measured_us": measured[pick],
                         "within_10pct": measured[pick] <= WITHIN * measured[best],
                         "pick_over_best": ratio, "pick_over_best_lo": lo, "pick_over_best_hi": hi,
                         "decided": pick == best or bool(hi < WITHIN or lo > WITHIN),
                         "predicted_us": predicted[pick], "wire_us": wire,
                         "link_bound": bool(wire >= LINK_BOUND * measured[best]) if cls == "inter" else False,
                         "oversubscribed": not fair[h.index].all()})
    if not rows and skipped:
        raise TooFewSizes("; ".join(skipped))
    val = pd.DataFrame(rows)
    val.attrs["skipped"] = skipped  # the groups left out, for the caller to say so
    return val


SCORE_COLUMNS = ["holdout", "library", "link_rate", "score", "points", "decided_score", "decided_points",
                 "link_bound_score", "link_bound_points", "oversubscribed_score", "oversubscribed_points"]


def score(val: pd.DataFrame) -> pd.DataFrame:
    """Per hold-out, link rate and library (and "all"): the share of held-out points whose predicted best is within
    10% of the measured best, over the points that are not oversubscribed; over those of them whose verdict the
    paired intervals decide; over the decided ones that are link-bound (across nodes); and over the
    oversubscribed ones."""
    rows = []

    def share(g):
        return (g.within_10pct.mean() if len(g) else math.nan), len(g)

    for (h, rate), g in (val.groupby(["holdout", "link_rate"]) if len(val) else ()):
        for lib, gl in list(g.groupby("library")) + [("all", g)]:
            fair, over = gl[~gl.oversubscribed], gl[gl.oversubscribed]
            decided = fair[fair.decided]
            rows.append([h, lib, rate, *share(fair), *share(decided), *share(decided[decided.link_bound]),
                         *share(over)])
    return pd.DataFrame(rows, columns=SCORE_COLUMNS)


def default_proxy(b: pd.DataFrame, lib: str, node_class: str = "intra", link_rate: str = "") -> dict[int, str]:
    """Per measured size at the largest measured rank count (one node; across nodes: the most nodes at
    `link_rate`): the modelled algorithm closest to the default."""
    m = b[b.library == lib].assign(link_rate=_rates(b[b.library == lib]))
    m = m[(m.nodes > 1) & (m.link_rate == link_rate)] if node_class == "inter" else m[m.nodes == 1]
    if m.empty:
        return {}
    m = m[m.nodes == m.nodes.max()]
    m = m.groupby(["algorithm", "ranks", "size_bytes"], as_index=False).avg_us.median()
    m = m[m.ranks == m.ranks.max()]
    out = {}
    for size, g in m.groupby("size_bytes"):
        d = g[g.algorithm == DEFAULT].avg_us
        cand = g[g.algorithm.map(lambda a: model_of(lib, a, node_class) is not None)
                 & ~g.algorithm.isin(OWN_ALGORITHMS)]
        if len(d) and len(cand):
            out[int(size)] = cand.iloc[(cand.avg_us - d.iloc[0]).abs().argmin()].algorithm
    return out


def prediction_fits(fits: list[Fit], network: Network | None) -> list[tuple[str, str, str, list[Fit]]]:
    """(library, node class, measured link rate, accepted native fits) to predict with: on `network`, the
    fits across nodes at the fastest measured rate, moved to it; else the one-node fits where a library has
    them, and its fits across nodes (per link rate) where it has none."""
    out = []
    for lib in sorted({f.library for f in fits}):
        ok = [f for f in fits if f.library == lib and f.status == "ok" and f.algorithm not in OWN_ALGORITHMS]
        inter = [f for f in ok if f.node_class == "inter" and f.link_rate not in ("", "none")]
        if network is not None:
            if not inter:
                continue
            fastest = max({f.link_rate for f in inter}, key=rate_bits_per_s)
            out.append((lib, "inter", fastest, [f.on(network) for f in inter if f.link_rate == fastest]))
            continue
        intra = [f for f in ok if f.node_class == "intra"]
        if intra:
            out.append((lib, "intra", "", intra))
        else:
            for rate in sorted({f.link_rate for f in ok if f.node_class == "inter"}):
                out.append((lib, "inter", rate, [f for f in ok if f.node_class == "inter" and f.link_rate == rate]))
    return out


def predict(fits: list[Fit], b: pd.DataFrame | None, ranks: list[int], sizes: list[int],
            network: Network | None = None) -> pd.DataFrame:
    """Per library, ranks and size: predicted time of each accepted native fit, the best, and its speedup
    over the algorithm that behaves like the library's default at the measured scale (default_proxy; none
    without measurements `b`). Across nodes the ranks are nodes with one rank each; with `network` the fits
    across nodes are moved to it (Fit.on) and `network`'s rate is the predictions' link rate."""
    if network is not None and not any(f.node_class == "inter" and f.status == "ok" for f in fits):
        raise ValueError("predicting for a network (--link-rate/--latency) needs fits across nodes: measure on "
                         "several nodes (the emulated cluster: ardlab cluster up) or pass such a fit file")
    rows = []
    for lib, cls, rate, ok in prediction_fits(fits, network):
        proxy = default_proxy(b, lib, cls, rate) if b is not None else {}
        for p in ranks:
            t = {f.algorithm: f.predict(sizes, [p] * len(sizes)) for f in ok}
            for i, n in enumerate(sizes):
                times = {a: float(v[i]) for a, v in t.items()}
                best = min(times, key=times.get)
                near = [s for s in proxy if s <= n] or list(proxy)
                dflt = proxy[max(near)] if proxy else None
                rows.append({"library": lib, "node_class": cls,
                             "link_rate": network.link_rate if network else rate,
                             "ranks": p, "size_bytes": n, "predicted_best": best,
                             "predicted_us": times[best], "default_like": dflt,
                             "predicted_speedup_vs_default": times[dflt] / times[best] if dflt in times else math.nan})
    return pd.DataFrame(rows)


GROUND_TRUTH_COLUMNS = ["library", "algorithm", "model", "link_rate", "from_bytes", "fitted_beta_us_per_byte",
                        "gamma_folded", "wire_beta_us_per_byte", "fitted_over_wire", "within_15pct", "fit_status"]


GROUND_TRUTH_MIN_SIZES = 3


def ground_truth_rows(b: pd.DataFrame) -> pd.DataFrame:
    """The measurements the ground truth fits (with >= 3 sizes): across nodes, at sizes from the shaper's burst
    up (smaller messages leave at the veth's own speed: they cannot show the rate), and for the Rabenseifner
    family (reduce-scatter + allgather) only at powers of two, where it is bandwidth-optimal (elsewhere its fold
    sends the whole vector to a partner and back: 3n per node at 3 nodes against the ring's 4n/3)."""
    from ardlab.cluster.network import BURST_BYTES

    b = b[(b.nodes > 1) & (b.size_bytes >= BURST_BYTES)]
    rab = b.apply(lambda r: model_of(r.library, r.algorithm, "inter") == "rabenseifner", axis=1) if len(b) else False
    return b[~(rab & (b.nodes & (b.nodes - 1) != 0))]


def ground_truth(fits: list[Fit]) -> pd.DataFrame:
    """Per bandwidth-optimal fit across nodes at a known link rate: the beta of its largest-size regime against
    the link's 8/rate (us per byte). Pass fits of ``ground_truth_rows``."""
    from ardlab.cluster.network import BURST_BYTES

    rows = []
    for f in fits:
        if f.node_class != "inter" or f.model not in BANDWIDTH_OPTIMAL or f.link_rate in ("", "none"):
            continue
        r, wire = f.regimes[-1], wire_beta_us(f.link_rate)
        rows.append([f.library, f.algorithm, f.model, f.link_rate, max(r.from_bytes, BURST_BYTES), r.beta_us_per_byte,
                     f.gamma_folded, wire, r.beta_us_per_byte / wire,
                     abs(r.beta_us_per_byte / wire - 1) <= GROUND_TRUTH_TOLERANCE, f.status])
    return pd.DataFrame(rows, columns=GROUND_TRUTH_COLUMNS).sort_values(["library", "algorithm", "link_rate"],
                                                                        ignore_index=True)


RATE_SCALING_COLUMNS = ["library", "algorithm", "fast_rate", "slow_rate", "rate_ratio", "beta_ratio",
                        "beta_ratio_over_rate_ratio", "within_15pct"]


def rate_scaling(gt: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm of the ground-truth table measured at several rates: slow/fast beta against fast/slow rate
    (1: beta follows the link rate), the fastest rate against each slower one."""
    rows = []
    for (lib, alg), g in gt[gt.fit_status == "ok"].groupby(["library", "algorithm"]):
        by_rate = dict(zip(g.link_rate, g.fitted_beta_us_per_byte))
        rates = sorted(by_rate, key=rate_bits_per_s, reverse=True)
        for slow in rates[1:]:
            rr = rate_bits_per_s(rates[0]) / rate_bits_per_s(slow)
            br = by_rate[slow] / by_rate[rates[0]]
            rows.append([lib, alg, rates[0], slow, rr, br, br / rr, abs(br / rr - 1) <= GROUND_TRUTH_TOLERANCE])
    return pd.DataFrame(rows, columns=RATE_SCALING_COLUMNS)
