"""The Allreduce algorithm families, each defined once: its cost coefficients and the bytes it puts on the wire.

A family is how an algorithm moves data, whatever library implements it (the table's ``cost_model`` and
``traffic`` keys name one). Each entry gives:

- ``costs(n, p)``: the coefficients of the Hockney-style cost model ``ardlab.analysis.costmodel`` fits, per
  Allreduce of n bytes among p ranks: latency steps (alpha), bytes through the busiest rank (beta), bytes reduced
  there (gamma) and the bytes of the fold that brings a p that is not a power of two down to one (phi);
- ``traffic(p, n)``: the bytes sent per Allreduce of n bytes by p nodes with one rank each, by all nodes and by the
  node that sends most (None where the bytes are unevenly spread), which ``ardlab.comm.traffic`` checks against the
  nodes' interface counters; exact for a power of two of nodes;
- ``bandwidth_optimal``: whether each rank sends the 2(p-1)/p n that bounds any Allreduce (``bandwidth_bound``), so
  a link's rate sets its beta.

A new family is one entry in FAMILIES. Standard library at import (the emulated cluster reads the bandwidth bound);
the cost coefficients take NumPy arrays. Two families exist for their traffic alone: what the counters showed of
Intel MPI across nodes (a binomial reduce with a scatter + allgather broadcast from 4 nodes on; a ring whose bytes
are unevenly spread).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ardlab.comm.libraries import SEGMENT_BYTES


def bandwidth_bound(p, n):
    """The bytes each of p parties must send per Allreduce of n bytes (any algorithm): 2(p-1)/p n."""
    return 2 * (p - 1) / p * n


@dataclass(frozen=True)
class Family:
    name: str
    costs: Callable | None = None  # (n, p arrays) -> (alpha, beta, gamma, phi) coefficient arrays
    traffic: Callable | None = None  # (p, n) -> (bytes by all nodes, bytes by the busiest node or None)
    bandwidth_optimal: bool = False
    # SimGrid SMPI's collective settings (``--cfg=smpi/<collective>:<algorithm>``) that run the same pattern, for the
    # simulated cluster (ardlab.sim); () where SMPI has none
    smpi: tuple[str, ...] = ()


def _lg(p):
    import numpy as np

    return np.floor(np.log2(p))


def _extra(p):
    """1 where p is not a power of two (the fold adds steps and bytes), else 0."""
    return (2 ** _lg(p) != p).astype(float)


def _recursive_doubling_costs(n, p):
    lg, ex = _lg(p), _extra(p)
    return lg + 2 * ex, lg * n, lg * n, 2 * ex * n


def _rabenseifner_costs(n, p):
    lg, ex = _lg(p), _extra(p)
    pp = 2 ** lg  # the power of two the fold reduces to
    return 2 * lg + 2 * ex, bandwidth_bound(pp, n), bandwidth_bound(pp, n) / 2, 2 * ex * n


def _ring_costs(n, p):
    return 2 * (p - 1), bandwidth_bound(p, n), bandwidth_bound(p, n) / 2, 0 * n


def _segmented_ring_costs(n, p):
    import numpy as np

    _, b, c, f = _ring_costs(n, p)
    return 2 * (p - 1) * np.maximum(1.0, np.ceil(n / p / SEGMENT_BYTES)), b, c, f


def _binomial_costs(n, p):
    import numpy as np

    steps = np.ceil(np.log2(p))
    return 2 * steps, 2 * steps * n, steps * n, 0 * n


def _linear_costs(n, p):
    return 2 * (p - 1), 2 * (p - 1) * n, (p - 1) * n, 0 * n


def _balanced(p, n):
    return p * bandwidth_bound(p, n), bandwidth_bound(p, n)


def _recursive_doubling_traffic(p, n):
    lg = math.log2(p)
    return p * lg * n, lg * n


def _binomial_traffic(p, n):
    return 2 * (p - 1) * n, math.log2(p) * n


def _binomial_scatter_allgather_traffic(p, n):
    if p == 2:  # on 2 nodes the broadcast was binomial
        return _binomial_traffic(p, n)
    lg = math.log2(p)
    return (2 * (p - 1) + lg / 2) * n, (1 + (p / 2 - 1) / p + (p - 1) / p) * n  # the subtree root at p/2 sends most


FAMILIES = {f.name: f for f in (
    Family("recursive_doubling", _recursive_doubling_costs, _recursive_doubling_traffic, smpi=("allreduce:rdb",)),
    Family("recursive_multiplying", _recursive_doubling_costs, _recursive_doubling_traffic,  # k = 2, as forced
           smpi=("allreduce:rdb",)),
    # recursive halving reduce-scatter, recursive doubling allgather
    Family("rabenseifner", _rabenseifner_costs, _balanced, bandwidth_optimal=True, smpi=("allreduce:rab_rdb",)),
    # ring reduce-scatter, ring allgather (SMPI's "logical ring")
    Family("ring", _ring_costs, _balanced, bandwidth_optimal=True, smpi=("allreduce:lr",)),
    Family("segmented_ring", _segmented_ring_costs, _balanced, bandwidth_optimal=True,
           smpi=("allreduce:ompi_ring_segmented",)),
    Family("binomial", _binomial_costs, _binomial_traffic,
           smpi=("allreduce:redbcast", "reduce:binomial", "bcast:binomial_tree")),
    Family("linear", _linear_costs, lambda p, n: (2 * (p - 1) * n, (p - 1) * n),
           smpi=("allreduce:redbcast", "reduce:flat_tree", "bcast:flattree")),
    Family("binomial_scatter_allgather", traffic=_binomial_scatter_allgather_traffic,
           smpi=("allreduce:redbcast", "reduce:binomial", "bcast:scatter_rdb_allgather")),
    Family("unbalanced_ring", traffic=lambda p, n: (2 * (p - 1) * n, None)),  # a ring's bytes, unevenly spread
)}

COST_FAMILIES = tuple(n for n, f in FAMILIES.items() if f.costs)  # the families the cost model fits
BANDWIDTH_OPTIMAL = tuple(n for n, f in FAMILIES.items() if f.bandwidth_optimal)


def family(name: str) -> Family:
    """The family `name`; ValueError naming the known ones."""
    if name not in FAMILIES:
        raise ValueError(f"no Allreduce family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]
