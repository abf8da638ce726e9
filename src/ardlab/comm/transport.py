"""The path an MPI library's bytes take between ranks, as the library itself reports it.

Read by a *probe launch*: the same library, launcher, ranks, nodes, image and settings as the measurement (a plan's
``env``: ``UCX_TLS``, ``FI_PROVIDER``, ``OMPI_MCA_btl`` and the like choose transports), with the library's own
reports switched on (the table's ``transport_report_env``) and rank 0 exchanging a small and a large message with one
rank of its node and one of another node. From rank 0's lines, per family:

- Open MPI: the point-to-point layer it selected (``select: component ob1 selected``); under ob1 the byte transfer
  layer to each peer (``mca: bml: Using tcp btl for send to [[...],1] on node n2``); under pml ucx UCX's transports.
- MPICH (ch4): between nodes its netmod, with libfabric the provider (``libfabric provider: tcp;ofi_rxm - ...``),
  with UCX the transports UCX chose; within a node its shared memory (``MPID/shm: ...``), or UCX's where UCX
  carries the node's messages.
- Intel MPI: its fabric (``I_MPI_DEBUG``'s start-up lines: ``libfabric provider: tcp;ofi_rxm``, or a single node's
  ``Defaulting to shm fabric``).
- UCX (MPICH's ucx netmod, Open MPI's pml ucx): the transports in the tables of tagged messages it prints
  (``UCX_PROTO_INFO=y``) for the intra-node and inter-node endpoints, e.g. ``tcp``, ``rc_mlx5``, ``sysv``, ``cma``;
  a UCX without those tables (1.13, in Debian's MPICH 4.0 and Open MPI 4.1) names its endpoints' tagged-message lanes
  (``UCX_LOG_LEVEL=info``: ``ep_cfg[1]: tag(tcp/eth0)``).
  UCX prints them when an endpoint is made, for what it would use: under MPICH a node's messages go through ch4's
  shared memory all the same (measured here: MPICH's intra-node endpoints print ``cma,sysv`` tables too).

A transport is a short string, ``<layer>:<what>``: ``ob1:sm``, ``ob1:tcp``, ``ucx:tcp``, ``ofi:tcp;ofi_rxm``,
``shm:posix``, ``shm``; "" where no pair of ranks of that kind exists (a one-node launch has no inter-node transport).
Algorithm settings choose among collective algorithms, not transports: the probe runs the library's default.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from dataclasses import dataclass

MARK = "ardlab-transport:"
KINDS = ("intra_node", "inter_node")
# A launch ardlab does not start (``--in-mpi``: the user's srun) cannot be probed from inside: whoever probed its
# launch hands the result to its ranks in these settings (``given``; ``ardlab transport --shell`` prints them)
GIVEN = {"intra_node": "ARDLAB_TRANSPORT_INTRA_NODE", "inter_node": "ARDLAB_TRANSPORT_INTER_NODE"}


@dataclass(frozen=True)
class Transport:
    """What carried the bytes between two ranks of one node, and between ranks of two nodes ("" where none)."""

    intra_node: str = ""
    inter_node: str = ""

    def fields(self) -> dict[str, str]:
        """The rows' columns (ardlab.results.TRANSPORT_COLUMNS)."""
        return {"transport_intra_node": self.intra_node, "transport_inter_node": self.inter_node}


@dataclass(frozen=True)
class Rank0:
    """What rank 0 of the probe said of itself: its process, host and node, and which kinds of peer it had."""

    pid: int
    host: str
    node: str
    kinds: tuple[str, ...]


def _rank0(text: str) -> Rank0:
    m = re.search(rf"^{MARK} pid=(\d+) host=(\S+) node=(\S+) kinds=(\S*)$", text, re.M)
    if not m:
        raise RuntimeError(f"the transport probe's rank 0 printed no '{MARK}' line (its output: {text[-1500:]!r})")
    return Rank0(int(m.group(1)), m.group(2), m.group(3), tuple(k for k in m.group(4).split(",") if k))


def _own_lines(text: str, r0: Rank0) -> list[str]:
    """Lines a process prefixes with its host and pid (Open MPI's ``[host:pid]``, UCX's ``[host:pid:thread]``):
    rank 0's only."""
    # Open MPI pads the pid with zeros, UCX with blanks
    tag = re.compile(rf"\[{re.escape(r0.host)}:[ 0]*{r0.pid} *(?::\d+)?\]")
    return [ln for ln in text.splitlines() if tag.search(ln)]


_UCX_TABLE = re.compile(r"\|\s*ucp_context_\d+\s+(intra-node|inter-node|self)\s+cfg#\d+\s*\|\s*(.*?)\s*\|")
_UCX_ROW = re.compile(r"\|\s*[\dKMGinf.]+\.\.[\dKMGinf.]+\s*\|.*\|\s*([a-z0-9_]+)/[^|\s]+\s*\|\s*$")


def ucx_transports(lines: list[str]) -> dict[str, str]:
    """The transports in UCX's protocol tables (``UCX_PROTO_INFO=y``) of tagged messages (the point-to-point data
    path of MPICH's ucx netmod and Open MPI's pml ucx; a connection's wire-up alone prints active-message tables), by
    endpoint kind: {"intra_node": "cma,sysv", "inter_node": "tcp"} (sorted, joined by commas; a kind without such a
    table is absent)."""
    found: dict[str, set[str]] = {}
    kind = None
    for ln in lines:
        t = _UCX_TABLE.search(ln)
        if t:
            tagged = t.group(2).startswith("tagged message")
            kind = {"intra-node": "intra_node", "inter-node": "inter_node"}.get(t.group(1)) if tagged else None
            continue
        row = _UCX_ROW.search(ln)
        if row and kind:
            found.setdefault(kind, set()).add(row.group(1))
    if not found:
        found = _ucx_endpoint_configs(lines)
    return {k: ",".join(sorted(v)) for k, v in found.items()}


_UCX_EP_CFG = re.compile(r"ep_cfg\[\d+\]: tag\(([^)]*)\)")
# UCX's transports within a node (memory: self, shared memory, cross-memory attach); any other carries a network's
_UCX_MEMORY = {"self", "sysv", "posix", "cma", "knem", "xpmem"}


def _ucx_endpoint_configs(lines: list[str]) -> dict[str, set[str]]:
    """UCX before its protocol tables (1.13, Debian bookworm's): the transports of each endpoint configuration's
    tagged-message lanes (``UCX_LOG_LEVEL=info``: ``ep_cfg[1]: tag(sysv/memory cma/memory) ...``), an endpoint of
    the node where all are memory transports (the process's own endpoint, with ``self``, left out), of another node
    otherwise."""
    found: dict[str, set[str]] = {}
    for ln in lines:
        m = _UCX_EP_CFG.search(ln)
        if not m:
            continue
        tls = {lane.split("/", 1)[0] for lane in m.group(1).split()}
        if not tls or "self" in tls:
            continue
        found.setdefault("intra_node" if tls <= _UCX_MEMORY else "inter_node", set()).update(tls)
    return found


def parse_openmpi(text: str, r0: Rank0) -> Transport:
    lines = _own_lines(text, r0)
    pml = next((m.group(1) for ln in lines if (m := re.search(r"select: component (\w+) selected", ln))), None)
    if pml is None:
        raise RuntimeError("Open MPI named no selected pml (select: component ... selected) in the probe's output")
    out = {}
    if pml == "ob1":
        for ln in lines:
            m = re.search(r"mca: bml: Using (\w+) btl for send to \S+ on node (\S+)", ln)
            if m and m.group(1) != "self":
                kind = "intra_node" if m.group(2) == r0.node else "inter_node"
                out.setdefault(kind, set()).add(m.group(1))
        return Transport(**{k: "ob1:" + ",".join(sorted(v)) for k, v in out.items() if k in r0.kinds})
    if pml == "ucx":
        return Transport(**{k: f"ucx:{v}" for k, v in ucx_transports(lines).items() if k in r0.kinds})
    return Transport(**{k: pml for k in r0.kinds})  # cm: a matching transport layer (mtl) the pml does not name


def parse_mpich(text: str, r0: Rank0) -> Transport:
    provider = re.search(r"^libfabric provider: (\S+)", text, re.M)
    if provider:
        netmod = f"ofi:{provider.group(1)}"
        ucx: dict[str, str] = {}
    elif "==== UCX netmod Capability ====" in text:
        ucx = ucx_transports(_own_lines(text, r0))
        netmod = f"ucx:{ucx['inter_node']}" if "inter_node" in ucx else "ucx"
    else:
        raise RuntimeError("MPICH named no netmod (MPIR_CVAR_DEBUG_SUMMARY's UCX capability or libfabric provider "
                           "line) in the probe's output")
    shm = re.search(r"^MPID/shm: MPIDI_(\w+?)_", text, re.M)  # ch4's shared memory, which carries a node's messages
    intra = f"shm:{shm.group(1).lower()}" if shm else (f"ucx:{ucx['intra_node']}" if "intra_node" in ucx else netmod)
    return Transport(intra_node=intra if "intra_node" in r0.kinds else "",
                     inter_node=netmod if "inter_node" in r0.kinds else "")


def parse_intelmpi(text: str, r0: Rank0) -> Transport:
    lines = [ln for ln in text.splitlines() if ln.startswith("[0] MPI startup():")]
    provider = next((m.group(1) for ln in lines if (m := re.search(r"libfabric provider: (\S+)", ln))), None)
    shm_only = any("Defaulting to shm fabric" in ln for ln in lines)
    if provider is None and not shm_only:
        raise RuntimeError("Intel MPI named no fabric (I_MPI_DEBUG's libfabric provider or shm line) in the probe's "
                           "output")
    fabrics = next((m.group(1) for ln in lines if (m := re.search(r"I_MPI_FABRICS=(\S+)", ln))), "shm:ofi")
    intra = "shm" if shm_only or fabrics.startswith("shm") else f"ofi:{provider}"
    return Transport(intra_node=intra if "intra_node" in r0.kinds else "",
                     inter_node=f"ofi:{provider}" if "inter_node" in r0.kinds and provider else "")


PARSERS = {"openmpi": parse_openmpi, "mpich": parse_mpich, "intelmpi": parse_intelmpi}

SHARED_MEMORY = frozenset({"sm", "shm", "posix", "sysv", "cma", "xpmem", "knem", "vader", "self"})
TCP = frozenset({"tcp", "sockets", "udp"})
LAYERED = frozenset({"ofi_rxm", "ofi_rxd"})  # libfabric's utility providers over a core provider


# The fast networks by the transports of UCX, libfabric and Open MPI that drive them (a name's prefix)
NETWORKS = {"verbs": ("rc_verbs", "ud_verbs", "rc_mlx5", "dc_mlx5", "ud_mlx5", "rc_x", "dc_x", "ud_x", "verbs",
                      "mlx", "openib", "ib", "rdmacm"),
            "omni-path": ("psm2", "psmx2", "opx"), "efa": ("efa",), "psm3": ("psm3",)}


def _network(part: str) -> str:
    return next((net for net, names in NETWORKS.items() if any(part.startswith(n) for n in names)), part)


def wire(transport: str) -> str:
    """What a transport runs on, whichever library's layers carry it: "shared memory", "tcp", or the fast network
    ("verbs": InfiniBand or RoCE, whether UCX's rc_mlx5 or libfabric's verbs drives it; "omni-path", "efa", "psm3";
    else the transport's own name); "" where none was recorded. Libraries compared on different wires compare the
    networks, not the libraries (ardlab.analysis.comparisons)."""
    if not transport:
        return ""
    what = transport.split(":", 1)[1] if ":" in transport else transport
    parts = set(re.split(r"[,;]", what)) - LAYERED
    if parts <= SHARED_MEMORY:
        return "shared memory"
    if parts <= TCP | SHARED_MEMORY:
        return "tcp"
    return "+".join(sorted({_network(p) for p in parts - SHARED_MEMORY - TCP}))


def given(env: dict[str, str] | None = None) -> dict[str, str]:
    """The transports handed to a launch in its settings (``GIVEN``), by kind; {} where none was."""
    env = os.environ if env is None else env
    if not any(name in env for name in GIVEN.values()):
        return {}
    return {kind: env.get(name, "") for kind, name in GIVEN.items()}


def settings(transport: dict[str, str]) -> dict[str, str]:
    """The settings that hand `transport` (a probe's result, by kind) to a launch's ranks."""
    return {name: transport.get(kind, "") for kind, name in GIVEN.items()}


def parse(family: str, text: str) -> Transport:
    """The transport a probe's output (stdout and stderr together) names, for a library of `family`."""
    if family not in PARSERS:
        raise ValueError(f"no transport reader for the library family {family!r} (one of: {', '.join(PARSERS)})")
    return PARSERS[family](text, _rank0(text))


def on_ranks() -> None:
    """The probe's program (every rank): rank 0 exchanges a small and a large message with the first other rank on
    its node and the first on another node, then says who it is."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    names = comm.allgather(MPI.Get_processor_name())
    same = next((r for r in range(1, comm.size) if names[r] == names[0]), None)
    other = next((r for r in range(1, comm.size) if names[r] != names[0]), None)
    for peer in (p for p in (same, other) if p is not None):
        for count in (16, 1 << 20):  # an eager and a rendezvous message: protocols are chosen per size
            buf = np.zeros(count, np.uint8)
            if comm.rank == 0:
                comm.Send(buf, peer)
                comm.Recv(buf, peer)
            elif comm.rank == peer:
                comm.Recv(buf, 0)
                comm.Send(buf, 0)
    comm.Barrier()
    if comm.rank == 0:
        kinds = [k for k, p in zip(KINDS, (same, other)) if p is not None]
        print(f"{MARK} pid={os.getpid()} host={socket.gethostname()} node={names[0]} kinds={','.join(kinds)}",
              flush=True)


if __name__ == "__main__":
    on_ranks()
    sys.exit(0)
