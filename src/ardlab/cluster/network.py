"""The emulated cluster's network: one Linux bridge, one network namespace per host joined to it by a veth pair,
and optional tbf rate limits on both ends of every link.

Names (all at most 15 characters, the kernel's limit): the bridge ``ardlab-br``, namespaces ``ardlab-<host>``,
host-side veths ``ardv-<host>``; inside a namespace the link is ``eth0``. Only the addresses made here are used,
and a subnet that the machine already has an address or route in is refused.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from pathlib import Path

from ardlab.cluster.links import DEFAULT_QUEUE, tbf_queue

BRIDGE = "ardlab-br"
NS_PREFIX = "ardlab-"
VETH_PREFIX = "ardv-"
NETNS_DIR = Path("/run/netns")

# tbf's bucket: a message up to this size leaves at the veth's own speed, only larger ones see the rate (the cost
# models' ground truth fits the sizes from here up).
BURST_BYTES = 256 << 10


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one command; on failure raise RuntimeError with the command and what it printed."""
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()}")
    return proc


def namespace(host: str) -> str:
    return NS_PREFIX + host


def host_veth(host: str) -> str:
    return VETH_PREFIX + host


def in_use(subnet: ipaddress.IPv4Network) -> list[str]:
    """The machine's addresses and routes (outside this cluster's bridge) that overlap `subnet`."""
    clashes = []
    for line in json.loads(sh("ip", "-j", "-4", "addr", "show").stdout or "[]"):
        if line.get("ifname") == BRIDGE:
            continue
        for a in line.get("addr_info", []):
            net = ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
            if net.overlaps(subnet):
                clashes.append(f"{line['ifname']} has {a['local']}/{a['prefixlen']}")
    for r in json.loads(sh("ip", "-j", "-4", "route", "show").stdout or "[]"):
        if r.get("dev") == BRIDGE or r.get("dst") in (None, "default"):
            continue
        if ipaddress.ip_network(r["dst"], strict=False).overlaps(subnet):
            clashes.append(f"route {r['dst']} via {r.get('dev', '?')}")
    return clashes


def addresses(subnet: ipaddress.IPv4Network, nodes: int) -> dict[str, str]:
    """host name -> address: n1..nN from the start of the subnet, the controller and the bridge at its end."""
    hosts = list(subnet.hosts())
    if nodes + 2 > len(hosts):
        raise ValueError(f"subnet {subnet} has room for {len(hosts) - 2} nodes, not {nodes}")
    out = {f"n{i}": str(hosts[i - 1]) for i in range(1, nodes + 1)}
    out["ctl"] = str(hosts[-2])
    out["bridge"] = str(hosts[-1])
    return out


def shape(run_prefix: list[str], dev: str, rate: str, queue: str = DEFAULT_QUEUE) -> None:
    """Limit egress of `dev` to `rate`, queueing at most `queue` of it (``ardlab.cluster.links.check_queue``: a time
    at the rate or bytes; packets beyond it are dropped. tbf: this kernel has no netem, so latency cannot be
    added)."""
    sh(*run_prefix, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", f"{BURST_BYTES}b",
       *tbf_queue(queue))


def links(hosts: list[str]) -> list[tuple[list[str], str]]:
    """(command prefix, device) of both ends of each host's link."""
    return [end for h in hosts for end in ((["ip", "netns", "exec", namespace(h)], "eth0"), ([], host_veth(h)))]


def shape_links(hosts: list[str], rate: str, queue: str = DEFAULT_QUEUE) -> None:
    """Both ends of every host's link limited to `rate`, queueing at most `queue`."""
    for prefix, dev in links(hosts):
        shape(prefix, dev, rate, queue)


def drops(hosts: list[str]) -> int:
    """Packets tbf has dropped so far on both ends of the hosts' links (its queue was full)."""
    total = 0
    for prefix, dev in links(hosts):
        for q in json.loads(sh(*prefix, "tc", "-s", "-j", "qdisc", "show", "dev", dev).stdout or "[]"):
            if q.get("kind") == "tbf":
                total += int(q.get("drops", 0))
    return total


def create(subnet: ipaddress.IPv4Network, addrs: dict[str, str], rate: str | None,
           queue: str = DEFAULT_QUEUE) -> None:
    """The bridge, and one namespace per host (every key of `addrs` but the bridge), each with lo and eth0 up."""
    prefix = subnet.prefixlen
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "addr", "add", f"{addrs['bridge']}/{prefix}", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    for host, addr in addrs.items():
        if host == "bridge":
            continue
        ns, veth = namespace(host), host_veth(host)
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", veth, "master", BRIDGE, "up")
        inside = ["ip", "netns", "exec", ns]
        sh(*inside, "ip", "addr", "add", f"{addr}/{prefix}", "dev", "eth0")
        sh(*inside, "ip", "link", "set", "lo", "up")
        sh(*inside, "ip", "link", "set", "eth0", "up")
        if rate and host != "ctl":
            shape_links([host], rate, queue)


def ours() -> tuple[list[str], list[str]]:
    """(namespaces, links) on this machine with this module's names, whoever made them."""
    spaces = sorted(p.name for p in NETNS_DIR.glob(NS_PREFIX + "*")) if NETNS_DIR.is_dir() else []
    links = [link["ifname"] for link in json.loads(sh("ip", "-j", "link", "show").stdout or "[]")
             if link["ifname"] == BRIDGE or link["ifname"].startswith(VETH_PREFIX)]
    return spaces, links


def remove() -> list[str]:
    """Delete every veth, namespace and the bridge of this module's names; what was removed."""
    spaces, links = ours()
    # a veth's deletion takes its peer (the namespace's eth0) with it; the bridge goes last
    for link in sorted(links, key=lambda name: name == BRIDGE):
        proc = sh("ip", "link", "del", link, check=False)
        if proc.returncode != 0 and "Cannot find device" not in proc.stderr:
            raise RuntimeError(f"`ip link del {link}` failed: {proc.stderr.strip()}")
    for ns in spaces:
        sh("ip", "netns", "del", ns)
    return spaces + links

