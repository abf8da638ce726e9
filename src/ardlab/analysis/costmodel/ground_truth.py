"""Against a known link: the inter-node beta of bandwidth-optimal algorithms against the wire's 8/rate
(``ground_truth``) and its scaling between two rates (``rate_scaling``)."""

from __future__ import annotations

import pandas as pd

from ardlab.analysis.costmodel.model import Fit, model_of
from ardlab.cluster.links import rate_bits_per_s, wire_beta_us
from ardlab.comm.families import BANDWIDTH_OPTIMAL

GROUND_TRUTH_TOLERANCE = 0.15


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
