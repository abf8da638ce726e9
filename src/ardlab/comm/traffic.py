"""Network traffic of an Allreduce: the bytes a node sends on its interface, measured and as each algorithm's model.

Measured: the transmit counter of the node's network interface (``/proc/net/dev`` of the process's own network
namespace; the interface is ``$ARDLAB_NET_INTERFACE``, default ``eth0``). Only traffic through the kernel's network
stack is counted (TCP, as the PyPI builds use); RDMA on a real cluster bypasses it.

Lost: the segments TCP retransmitted and its retransmission timeouts (``/proc/net/snmp``'s ``Tcp: RetransSegs``,
``/proc/net/netstat``'s ``TcpExt: TCPTimeouts``), per network namespace as well; on a real host they count every TCP
connection of the host, not the job's alone. A starved receiver or a full link queue shows up there.

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


def _mib(path: str, group: str, names: tuple[str, ...]) -> tuple[int, ...]:
    """The named counters of `group` in a /proc/net MIB file (a line of names, then a line of values)."""
    lines = [line.split() for line in Path(path).read_text().splitlines() if line.startswith(group + ":")]
    header, values = lines[0], lines[1]
    return tuple(int(values[header.index(n)]) for n in names)


def tcp_losses() -> tuple[int, int]:
    """(segments TCP retransmitted, retransmission timeouts) so far in this process's network namespace."""
    (retransmitted,) = _mib("/proc/net/snmp", "Tcp", ("RetransSegs",))
    (timeouts,) = _mib("/proc/net/netstat", "TcpExt", ("TCPTimeouts",))
    return retransmitted, timeouts


def node_leader(hosts: list[str], rank: int) -> bool:
    """Whether `rank` is the lowest rank of its node, given every rank's host name in rank order: the one that reads
    its node's counters."""
    return hosts.index(hosts[rank]) == rank


class LossCounter:
    """TCP's losses on every node of a job between start() and stop() (both collective on `comm`): stop() returns, on
    rank 0, (retransmitted segments, timeouts) summed over the nodes, None on the other ranks."""

    def __init__(self, comm, leader: bool):
        self.comm, self.leader, self.before = comm, leader, None

    def start(self) -> "LossCounter":
        self.before = tcp_losses() if self.leader else None
        return self

    def stop(self) -> tuple[int, int] | None:
        mine = None
        if self.leader:
            after = tcp_losses()
            mine = (after[0] - self.before[0], after[1] - self.before[1])
        counts = self.comm.gather(mine, root=0)
        if self.comm.Get_rank() != 0:
            return None
        counts = [c for c in counts if c is not None]
        return sum(c[0] for c in counts), sum(c[1] for c in counts)


def loss_fields(lost: tuple[int, int] | None, count: int, columns: list[str]) -> dict[str, str]:
    """A LossCounter's (retransmitted segments, timeouts) per call or step (`count` of them) under the two `columns`
    (ardlab.results' loss columns); empty strings where nothing was counted (one node)."""
    values = ("", "") if lost is None else (f"{lost[0] / count:.4g}", f"{lost[1] / count:.4g}")
    return dict(zip(columns, values))


def model(family: str, p: int, n: int) -> tuple[float, float | None]:
    """(bytes sent by all nodes, bytes sent by the busiest node, None where not modelled) per Allreduce of `n`
    bytes on `p` nodes (the family's entry in ardlab.comm.families)."""
    if p < 2 or p & (p - 1):
        raise ValueError(f"the traffic models are exact for a power of two of nodes >= 2; got {p}")
    fam = FAMILIES.get(family)
    if fam is None or fam.traffic is None:
        raise ValueError(f"no traffic model for the cost-model family {family!r}")
    return fam.traffic(p, n)
