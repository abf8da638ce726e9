"""Network traffic of an Allreduce: the bytes a node sends on its interface, measured and as each algorithm's model.

Measured: the transmit counter of the node's network interface (``/proc/net/dev`` of the process's own network
namespace; the interface is ``$ARDLAB_NET_INTERFACE``, default ``eth0``). Only traffic through the kernel's network
stack is counted (TCP, as the PyPI builds use); RDMA on a real cluster bypasses it.

Modelled: per algorithm family (the table's ``cost_model`` key), the bytes sent per Allreduce of n bytes among p
nodes with one rank each, for the whole job and for the node that sends most. Ring and Rabenseifner send
2(p-1)/p n per node; recursive doubling (and k=2 recursive multiplying) log2(p) n per node; a binomial reduce +
broadcast and a linear reduce + broadcast 2(p-1) n in all, with the root (binomial: the root and the subtree roots)
sending log2(p) n (binomial) or (p-1) n (linear). Two families come from what the counters showed of Intel MPI
across nodes: a binomial reduce with a scatter + allgather broadcast from 4 nodes on ((2(p-1) + log2(p)/2) n in
all, the subtree root at p/2 sending most; on 2 nodes the broadcast was binomial), and a ring whose 2(p-1) n are
unevenly spread (no per-node model). Powers of two only,
where every family's count is exact.
"""

from __future__ import annotations

import math
import os
from pathlib import Path


def interface() -> str:
    return os.environ.get("ARDLAB_NET_INTERFACE", "eth0")


def tx_bytes(iface: str | None = None) -> int | None:
    """Bytes sent so far on `iface` in this process's network namespace; None where there is no such interface."""
    iface = iface or interface()
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, counters = line.partition(":")
        if name.strip() == iface:
            return int(counters.split()[8])
    return None


def model(family: str, p: int, n: int) -> tuple[float, float | None]:
    """(bytes sent by all nodes, bytes sent by the busiest node, None where not modelled) per Allreduce of `n`
    bytes on `p` nodes."""
    if p < 2 or p & (p - 1):
        raise ValueError(f"the traffic models are exact for a power of two of nodes >= 2; got {p}")
    lg = int(math.log2(p))
    if family in ("ring", "segmented_ring", "rabenseifner"):
        per = 2 * (p - 1) / p * n
        return p * per, per
    if family in ("recursive_doubling", "recursive_multiplying"):
        return p * lg * n, lg * n
    if family == "binomial":
        return 2 * (p - 1) * n, lg * n
    if family == "linear":
        return 2 * (p - 1) * n, (p - 1) * n
    if family == "binomial_scatter_allgather":  # binomial reduce, then a scatter + ring allgather broadcast ...
        if p == 2:  # ... from 4 nodes on: on 2 the broadcast was binomial
            return model("binomial", p, n)
        return (2 * (p - 1) + lg / 2) * n, (1 + (p / 2 - 1) / p + (p - 1) / p) * n
    if family == "unbalanced_ring":  # a ring's bytes in all, unevenly spread over the nodes
        return 2 * (p - 1) * n, None
    raise ValueError(f"no traffic model for the cost-model family {family!r}")
