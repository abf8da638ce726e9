"""Network traffic of an Allreduce: the bytes a node sends on its interface, measured and as each algorithm's model.

Measured: the transmit counter of the node's network interface (``/proc/net/dev`` of the process's own network
namespace; the interface is ``$ARDLAB_NET_INTERFACE``, default ``eth0``). Only traffic through the kernel's network
stack is counted (TCP, as the PyPI builds use); RDMA on a real cluster bypasses it.

Modelled: per algorithm family (the table's ``cost_model`` or ``traffic`` key; each family's bytes are defined in
``ardlab.comm.families``), the bytes sent per Allreduce of n bytes among p nodes with one rank each, for the whole
job and for the node that sends most. Powers of two only, where every family's count is exact.
"""

from __future__ import annotations

import os
from pathlib import Path

from ardlab.comm.families import FAMILIES


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
    bytes on `p` nodes (the family's entry in ardlab.comm.families)."""
    if p < 2 or p & (p - 1):
        raise ValueError(f"the traffic models are exact for a power of two of nodes >= 2; got {p}")
    fam = FAMILIES.get(family)
    if fam is None or fam.traffic is None:
        raise ValueError(f"no traffic model for the cost-model family {family!r}")
    return fam.traffic(p, n)
