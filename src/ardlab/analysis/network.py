"""The network regime's tables: how close each library's best Allreduce comes to the link's bandwidth bound, and
whether the bytes each algorithm put on the wire match its traffic model.

Both read microbenchmark rows measured on several nodes whose link rate is known (the emulated cluster records
it in every row). The bound: each of N nodes must send at least 2(N-1)/N n bytes of an n-byte Allreduce (Patarasuk
and Yuan), so at a link rate R (bits/s per direction) no algorithm beats 2(N-1)/N n * 8 / R. Sizes below 1 MiB are
latency-bound and left out of the bound table.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ardlab.analysis.comparisons import by_round, main_phase, median_summary
from ardlab.cluster.links import allreduce_wire_us
from ardlab.comm.libraries import wire_family
from ardlab.comm.traffic import model

BOUND_FROM_BYTES = 1 << 20


def link_bits_per_s(rate: str) -> float | None:
    """A row's link rate in bits/s; None for an unlimited ('none') or unknown ('') link (where
    ardlab.cluster.links.rate_bits_per_s, for rates only, raises)."""
    from ardlab.cluster.links import rate_bits_per_s as parse

    return parse(rate) if rate and rate != "none" else None


def _networked(b: pd.DataFrame) -> pd.DataFrame:
    m = main_phase(b)
    return m[(m.nodes > 1) & m.link_rate.astype(str).map(lambda r: link_bits_per_s(r) is not None)] if len(m) else m


def bound(b: pd.DataFrame) -> pd.DataFrame:
    """Per group, library and size (>= 1 MiB): the library's best algorithm (median over rounds, with its interval)
    against the bandwidth bound."""
    rows = []
    for (group, ranks, nodes, rate, size), g in _networked(b).groupby(
            ["group", "ranks", "nodes", "link_rate", "size_bytes"]):
        if size < BOUND_FROM_BYTES:
            continue
        piv = by_round(g, "avg_us")
        bound_us = allreduce_wire_us(nodes, size, rate)
        for lib, cols in pd.Series(piv.columns).groupby(pd.Series(piv.columns).str.split("/").str[0]):
            med = piv[list(cols)].median()
            best = med.idxmin()
            s = median_summary(piv[best])
            rows.append({"group": group, "library": lib, "nodes": nodes, "ranks": ranks, "link_rate": rate,
                         "size_bytes": size, "best_algorithm": best.split("/", 1)[1], "median_us": s["median"],
                         "ci_low_us": s["ci_low"], "ci_high_us": s["ci_high"], "ci_level": s["ci_level"],
                         "rounds": s["rounds"], "bound_us": bound_us, "ratio_to_bound": s["median"] / bound_us,
                         "ratio_ci_low": s["ci_low"] / bound_us, "ratio_ci_high": s["ci_high"] / bound_us})
    return pd.DataFrame(rows)


def traffic(b: pd.DataFrame) -> pd.DataFrame:
    """Per algorithm and size, on groups of one rank per node (a power of two of nodes): the median bytes per
    Allreduce on the wire (all nodes; the busiest node) against its traffic model (ardlab.comm.traffic) under the
    tuning file the library loaded (ardlab.comm.libraries.wire_family)."""
    rows = []
    m = _networked(b)
    m = m[(m.ranks == m.nodes) & m.net_tx_bytes_per_call.notna()] if len(m) else m
    for (group, nodes, lib, alg, size, tuning_file), g in m.groupby(
            ["group", "nodes", "library", "algorithm", "size_bytes", "mpi_tuning_file"]):
        family = wire_family(lib, alg, tuning_file) if alg != "tuned" else None
        if family is None or nodes & (nodes - 1):
            total = busiest = None
        else:
            total, busiest = model(family, int(nodes), int(size))
        sent, most = g.net_tx_bytes_per_call.median(), g.net_tx_max_node_bytes_per_call.median()
        rows.append({"group": group, "library": lib, "algorithm": alg, "nodes": nodes, "size_bytes": size,
                     "traffic_model": family or "", "bytes_per_call": sent, "model_bytes": total or np.nan,
                     "ratio": sent / total if total else np.nan, "busiest_node_bytes": most,
                     "busiest_model_bytes": busiest or np.nan,
                     "busiest_ratio": most / busiest if busiest else np.nan,
                     "rounds": int(g["round"].nunique())})
    out = pd.DataFrame(rows)
    return out[out.size_bytes >= BOUND_FROM_BYTES].reset_index(drop=True) if len(out) else out
