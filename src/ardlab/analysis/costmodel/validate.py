"""Held-out validation: fits made without the largest sizes, rank counts or node counts predict them, and a
pick is scored against the measured best with a paired interval (``validate``, ``score``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ardlab.analysis.costmodel.fit import MIN_SIZES, _fair, _medians, _rates, _rounds, fit_one
from ardlab.analysis.costmodel.model import model_of
from ardlab.cluster.links import allreduce_wire_us
from ardlab.comm.libraries import DEFAULT, OWN_ALGORITHMS, TUNED
from ardlab.stats import speedup_ci

HELD_SIZES = 3  # the "sizes" hold-out predicts the largest measured sizes from the others


WITHIN = 1.10  # a pick scores where its measured time is within 10% of the measured best's


LINK_BOUND = 0.5  # a held-out point across nodes is link-bound where the wire time is >= half the measured best


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
