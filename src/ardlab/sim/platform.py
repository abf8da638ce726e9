"""A SimGrid platform for the simulated cluster: N nodes of C cores, each with one full-duplex link to a switch.

The link is the emulated cluster's (``ardlab cluster up --rate``): its rate, and the one-way latency a message sees
between two nodes (the switch's two link crossings together). Ranks on one node talk over its loopback: the
shared-memory path, with its own rate and latency. The hostfile places ranks in blocks of `ranks / nodes` per node,
as ``srun`` does by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import quoteattr

from ardlab.cluster.links import rate_bits_per_s


@dataclass(frozen=True)
class Link:
    """What a simulated message sees: between nodes `rate` (e.g. "1gbit") and `latency_us` one way; within a node
    `loopback_rate` and `loopback_latency_us`."""

    rate: str
    latency_us: float
    loopback_rate: str = "40gbit"
    loopback_latency_us: float = 1.0

    def __post_init__(self):
        for name in ("latency_us", "loopback_latency_us"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        rate_bits_per_s(self.rate)  # a bad rate is named here
        rate_bits_per_s(self.loopback_rate)


def node_names(nodes: int) -> list[str]:
    return [f"n{i + 1}" for i in range(nodes)]  # the emulated cluster's names


def platform_xml(nodes: int, cores: int, link: Link) -> str:
    """The platform: a SimGrid cluster of `nodes` hosts with `cores` cores each, every host's link split-duplex (a
    NIC sends and receives at once, as the emulated veth pairs do), half the one-way latency on each of the two
    links a message between nodes crosses."""
    if nodes < 1 or cores < 1:
        raise ValueError(f"a platform needs at least one node and one core, got nodes={nodes}, cores={cores}")
    bw = rate_bits_per_s(link.rate) / 8
    loop_bw = rate_bits_per_s(link.loopback_rate) / 8
    attrs = {
        "id": "ardlab", "prefix": "n", "suffix": "", "radical": f"1-{nodes}", "speed": "1Gf", "core": str(cores),
        "bw": f"{bw:.0f}Bps", "lat": f"{link.latency_us / 2:g}us", "sharing_policy": "SPLITDUPLEX",
        "loopback_bw": f"{loop_bw:.0f}Bps", "loopback_lat": f"{link.loopback_latency_us:g}us",
    }
    cluster = " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items())
    return ("<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
            f"<platform version=\"4.1\">\n  <cluster {cluster}/>\n</platform>\n")


def hostfile(nodes: int, ranks: int) -> str:
    """One line per rank: ranks / nodes consecutive ranks on each node (block placement)."""
    if ranks < nodes or ranks % nodes:
        raise ValueError(f"{ranks} ranks do not spread evenly over {nodes} nodes")
    return "".join(f"{name}\n" * (ranks // nodes) for name in node_names(nodes))


def write(folder: Path, nodes: int, ranks: int, link: Link) -> tuple[Path, Path]:
    """The platform and hostfile for `ranks` ranks on `nodes` nodes (a core per rank) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    plat, hosts = folder / "platform.xml", folder / "hosts"
    plat.write_text(platform_xml(nodes, ranks // nodes if ranks >= nodes else 1, link))
    hosts.write_text(hostfile(nodes, ranks))
    return plat, hosts
