"""The simulated cluster (ardlab.sim): ardlab's timing loop under SimGrid's SMPI, checked against the network's own
arithmetic (an independent reference: the bytes each pattern must send over the link's rate)."""

import pytest

from ardlab.cluster.links import rate_bits_per_s
from ardlab.comm.families import bandwidth_bound
from ardlab.sim import loop
from ardlab.sim.platform import Link, hostfile, platform_xml

LINK = Link("1gbit", latency_us=10.0)
BIG = 4 << 20


def _us(family, nodes, ranks, sizes, link=LINK):
    return {r["size_bytes"]: r for r in loop.run(family, nodes, ranks, sizes, link, iterations=2)}


def test_a_ring_takes_the_bandwidth_bound_over_the_link():
    """4 nodes: a ring sends 2(p-1)/p n from every node at once, each NIC sending and receiving together (split
    duplex): the bound over the rate, plus 2(p-1) latencies, and up to 8% more (SMPI's TCP model has each flow's
    acknowledgments take a share of the other direction: 5% here; the emulated cluster's ring at 4 nodes and
    4 MiB measured 3.5% over the bound, results/runs/costmodel-1gbit)."""
    (row,) = _us("ring", 4, 4, [BIG]).values()
    wire = bandwidth_bound(4, BIG) * 8 / rate_bits_per_s("1gbit") * 1e6 + 2 * 3 * LINK.latency_us
    assert wire <= row["avg_us"] <= 1.08 * wire, (row, wire)
    assert row["simulator"].startswith("SimGrid ") and row["fallback"] == ""


def test_recursive_doubling_sends_lg_p_vectors_and_rabenseifner_the_bound():
    """At 4 nodes recursive doubling sends 2n from each node, Rabenseifner 1.5n (as a ring): 4/3 apart, as the
    emulated cluster's interface counters showed (tests/test_cluster.py)."""
    rd, rab, ring = (_us(f, 4, 4, [BIG])[BIG]["avg_us"] for f in ("recursive_doubling", "rabenseifner", "ring"))
    assert rd / ring == pytest.approx(4 / 3, rel=0.05) and rab / ring == pytest.approx(1.0, rel=0.05)


def test_ranks_on_one_node_talk_over_its_loopback():
    """2 nodes x 2 ranks: the pairs within a node cross no link, so the ring is faster than on 4 nodes."""
    two_by_two = _us("ring", 2, 4, [BIG])[BIG]["avg_us"]
    assert two_by_two < _us("ring", 4, 4, [BIG])[BIG]["avg_us"]


def test_a_fallback_is_named_in_its_row():
    """SMPI's ring needs an element a rank: at 4 bytes on 4 ranks it runs its default instead, and the row says so."""
    row = _us("ring", 4, 4, [4])[4]
    assert "MPI_allreduce_lr" in row["fallback"] and "default" in row["fallback"], row


def test_every_family_with_an_smpi_pattern_runs():
    for family in loop.SIMULATED:
        (row,) = loop.run(family, 2, 2, [1024], LINK, iterations=1)
        assert row["avg_us"] > 0 and row["smpi"].startswith("allreduce:"), row


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="SMPI has no algorithm of family 'unbalanced_ring'"):
        loop.run("unbalanced_ring", 2, 2, [1024], LINK)
    with pytest.raises(ValueError, match=r"multiples of 4 bytes\), not \[6\]"):
        loop.run("ring", 2, 2, [6], LINK)
    with pytest.raises(ValueError, match="3 ranks do not spread evenly over 2 nodes"):
        hostfile(2, 3)
    with pytest.raises(ValueError, match="link rate 'fast'"):
        Link("fast", 10.0)
    with pytest.raises(ValueError, match="latency_us must be > 0"):
        Link("1gbit", 0)


def test_missing_simgrid_names_the_set_up(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(FileNotFoundError, match="containers/setup-envs installs SimGrid"):
        loop.tools()


def test_the_platform_is_split_duplex_with_half_the_latency_on_each_link():
    xml = platform_xml(4, 2, LINK)
    assert 'sharing_policy="SPLITDUPLEX"' in xml and 'lat="5us"' in xml and 'bw="125000000Bps"' in xml
    assert 'radical="1-4"' in xml and 'core="2"' in xml
    assert hostfile(2, 4) == "n1\nn1\nn2\nn2\n"
