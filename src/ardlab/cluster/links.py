"""The links of a cluster: tc's rate notation, the wire time of an Allreduce at a rate, the queue of an emulated link,
and the rate and queue of the emulated cluster a process runs on (what result rows record). Used by the cluster
itself, the drivers and the cost model."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from ardlab.comm.families import bandwidth_bound

RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}  # tc's rate units, in bits per second
# the same units as tables and papers write them
RATE_UNIT_NAMES = {"kbit": "kbit/s", "mbit": "Mbit/s", "gbit": "Gbit/s"}


def rate_text(rate: str) -> str:
    """A tc rate as a reader writes it (250mbit -> "250 Mbit/s"); anything else ("none", "") as it is."""
    unit = rate[-4:]
    return f"{rate[:-4]} {RATE_UNIT_NAMES[unit]}" if unit in RATE_UNIT_NAMES and rate[:-4] else rate


def check_rate(rate: str | None) -> str | None:
    """`rate` if it is a link rate in tc's notation (None for 'none' or no rate); ValueError naming it otherwise."""
    if rate is None or rate in ("", "none"):
        return None
    rate_bits_per_s(rate)
    return rate


def rate_bits_per_s(rate: str) -> float:
    """tc's rate notation in bits per second (1gbit -> 1e9); ValueError naming a rate that is not one."""
    unit = rate[-4:]
    try:
        value = float(rate[:-4]) * RATE_UNITS[unit]
    except (KeyError, ValueError):
        value = 0.0
    if not value > 0:
        raise ValueError(f"link rate {rate!r} is not a rate like 1gbit, 250mbit or 100000kbit "
                         f"(a positive number and one of {', '.join(RATE_UNITS)}; 'none' for unlimited)")
    return value


def wire_beta_us(rate: str) -> float:
    """The link's time per byte (us) at tc rate `rate` (8 bits a byte)."""
    return 8e6 / rate_bits_per_s(rate)


def allreduce_wire_us(p: int, size_bytes: float, rate: str) -> float:
    """The bandwidth bound of an Allreduce of `size_bytes` among `p` parties at tc rate `rate` (us): the
    2(p-1)/p x size that a bandwidth-optimal algorithm sends out of each party, at the link's speed."""
    return bandwidth_bound(p, size_bytes) * wire_beta_us(rate)


# The queue of an emulated link: how much waits behind the rate before tbf drops, either a time at the link's rate
# (tbf's `latency`: 1ms) or bytes (tbf's `limit`: 233016b). Named settings:
# - "switch-port": what a port of a shared-memory top-of-rack switch holds on average: Broadcom's Trident II
#   (BCM56854, 48 x 10G + 6 x 40G ports) has 12 MB of packet buffer on chip, most of it a pool shared by its 54 ports,
#   so 12 MiB / 54 = 233016 bytes a port (J. Warner's switch buffer pages, people.ucsc.edu/~warner/Bufs/, and their
#   successor port-buffers.forwardingplane.net/concepts/trident-ii). A port may borrow more of the pool while the
#   others are quiet, so this is a floor; 1.9 ms at 1 Gbit/s, 7.5 ms at 250 Mbit/s. docs/cluster.md.
# A time is tc's `latency`, from which tbf makes its limit as the rate x the time plus its bucket (BURST_BYTES): the
# emulation's queue before this setting, "1ms" and still the default, holds 387144 bytes at 1 Gbit/s and 293394 at
# 250 Mbit/s (read back with `tc -raw`), more than a switch port's share; every committed cluster run had it.
QUEUES = {"switch-port": f"{12 * 2**20 // 54}b"}
DEFAULT_QUEUE = "1ms"  # the committed runs' queue; a run states another with `cluster up --queue` / link_queue
_QUEUE = re.compile(r"^(?P<value>\d+(?:\.\d+)?)(?P<unit>ms|us|s|b|kb|mb)$")
_BYTE_UNITS = {"b": 1, "kb": 1024, "mb": 1024 * 1024}  # tc's: a kb is 1024 bytes


def check_queue(queue: str | None) -> str:
    """The tc value of a link queue: a name of QUEUES, or a time (1ms, 500us) or bytes (233016b, 300kb) as it is;
    ValueError naming anything else."""
    queue = DEFAULT_QUEUE if queue is None else str(queue).strip()
    queue = QUEUES.get(queue, queue)
    m = _QUEUE.match(queue)
    if not m or not float(m.group("value")) > 0:
        raise ValueError(f"link queue {queue!r} is not one: a name ({', '.join(QUEUES)}), a time at the link's rate "
                         "(1ms, 500us) or bytes (233016b, 300kb)")
    return queue


def tbf_queue(queue: str) -> list[str]:
    """tbf's arguments for a link queue (``check_queue``): `latency <time>` or `limit <bytes>b`."""
    queue = check_queue(queue)
    m = _QUEUE.match(queue)
    unit = m.group("unit")
    if unit in _BYTE_UNITS:
        return ["limit", f"{int(float(m.group('value')) * _BYTE_UNITS[unit])}b"]
    return ["latency", queue]


def queue_name(queue: str) -> str:
    """A link queue as a reader knows it: its name where it has one (233016b -> "switch-port"), else its value."""
    return next((name for name, value in QUEUES.items() if value == queue), queue)


def _record(environ=None) -> dict | None:
    conf = Path((os.environ if environ is None else environ).get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    record = conf.resolve().parent / "cluster.json"  # on a node, /etc/slurm/slurm.conf links to the state folder
    return json.loads(record.read_text()) if record.is_file() else None


def link_queue(environ=None) -> str:
    """The link queue of the emulated cluster this process runs on, for result rows (its name where it has one:
    ``queue_name``): "none" when its links are unlimited, "" when the process runs on no emulated cluster. A cluster
    brought up before the setting existed had the 1 ms queue."""
    record = _record(environ)
    if record is None:
        return ""
    if not record.get("rate"):
        return "none"
    return queue_name(record.get("queue") or DEFAULT_QUEUE)


def link_rate(environ=None) -> str:
    """The link rate of the emulated cluster this process runs on, for result rows: its rate, "none" when its links
    are unlimited, "" when the process runs on no emulated cluster (its Slurm configuration, $SLURM_CONF or
    /etc/slurm/slurm.conf, has no cluster.json beside it)."""
    record = _record(environ)
    if record is None:
        return ""
    return record.get("rate") or "none"
