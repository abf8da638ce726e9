"""Predictions beyond the measured scale: each library's fastest algorithm per (ranks, size) from the fits, for this
network or another (``predict``)."""

from __future__ import annotations

import math

import pandas as pd

from ardlab.analysis.costmodel.model import Fit, Network
from ardlab.analysis.costmodel.validate import default_proxy
from ardlab.cluster.links import rate_bits_per_s
from ardlab.comm.libraries import OWN_ALGORITHMS


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
