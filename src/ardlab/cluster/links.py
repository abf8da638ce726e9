"""The links of a cluster: tc's rate notation, the wire time of an Allreduce at a rate, and the rate of the emulated
cluster a process runs on (what result rows record). Used by the cluster itself, the drivers and the cost model."""

from __future__ import annotations

import json
import os
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


def link_rate(environ=None) -> str:
    """The link rate of the emulated cluster this process runs on, for result rows: its rate, "none" when its links
    are unlimited, "" when the process runs on no emulated cluster (its Slurm configuration, $SLURM_CONF or
    /etc/slurm/slurm.conf, has no cluster.json beside it)."""
    conf = Path((os.environ if environ is None else environ).get("SLURM_CONF") or "/etc/slurm/slurm.conf")
    record = conf.resolve().parent / "cluster.json"  # on a node, /etc/slurm/slurm.conf links to the state folder
    if not record.is_file():
        return ""
    return json.loads(record.read_text()).get("rate") or "none"
