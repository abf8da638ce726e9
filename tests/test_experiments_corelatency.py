"""The cache-line latency probe (ardlab.experiments.corelatency) and the IMB cross-check's use of it: the probe
measures a
round trip between two pinned CPUs and names CPUs it cannot pin; every launch of the cross-check carries the round
trips before and after it, and the table compares the tools again within the machine's fast and slow windows."""

import math
import os

import pytest

from ardlab.experiments import corelatency, vs_imb

two_cpus = pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0), reason="needs CPUs 0 and 1")


@two_cpus
def test_probe_measures_a_round_trip_and_gives_the_cpus_back():
    before = os.sched_getaffinity(0)
    ns = corelatency.round_trip_ns((0, 1), 20_000)
    # a cache line between two cores: tens of ns on bare metal, up to a few us on a busy virtual machine
    assert math.isfinite(ns) and 10 < ns < 20_000, ns
    assert os.sched_getaffinity(0) == before


def test_probe_names_what_it_cannot_do(capsys):
    with pytest.raises(ValueError, match="two different CPUs, got 0 twice"):
        corelatency.round_trip_ns((0, 0))
    with pytest.raises(RuntimeError, match="could not pin the second CPU .*CPUs 0, 4096"):
        corelatency.round_trip_ns((0, 4096), 10)
    assert corelatency.main(["measure", "--cpus", "0"]) == 2
    assert "two CPU numbers like 0,1 are needed, got '0'" in capsys.readouterr().err


def test_window_from_the_round_trips_around_a_launch():
    assert corelatency.window(100, 130, 100) == "fast"
    assert corelatency.window(450, 510, 100) == "slow"
    assert corelatency.window(120, 480, 100) == "mixed"


def test_table_compares_the_tools_within_each_window():
    """12 paired rounds of MPICH's default at 4 B: IMB drew a slow window in 2 launches, ardlab's `c` in 6, the
    tools equal within a window. Over all rounds `c` looks 2x IMB; within the fast and within the slow windows it
    agrees."""
    rows = []
    for r in range(12):
        for tool, slow in (("imb", r >= 10), ("c", r >= 6)):
            rtt = 480.0 if slow else 105.0
            rows.append({"library": "mpich", "algorithm": "default", "tool": tool, "round": r, "position": 0,
                         "size_bytes": 4, "iterations": 1000, "avg_us": (1.0 if slow else 0.30) + 0.001 * r,
                         "core_rtt_before_ns": rtt, "core_rtt_after_ns": rtt + 5})
    (row,) = vs_imb.summarize(rows)
    # the paired estimate over all rounds: 4 of 12 rounds at 3.3x (c slow, IMB fast), the rest at 1x: 3.3^(4/12)
    assert row["c_over_imb"] == pytest.approx(1.49, abs=0.02) and row["agreement"] != "within 10%"
    assert row["rounds_fast"] == 6 and row["rounds_slow"] == 2
    assert row["agreement_fast"] == "within 10%" and abs(row["c_over_imb_fast"] - 1) < 0.05
    assert abs(row["c_over_imb_slow"] - 1) < 0.05


def test_rows_from_before_the_probe_give_the_same_table():
    rows = [{"library": "intelmpi", "algorithm": "ring", "tool": t, "round": r, "position": 0, "size_bytes": 4,
             "iterations": 1000, "avg_us": 0.5 + 0.01 * r} for r in range(5) for t in ("imb", "c")]
    (row,) = vs_imb.summarize(rows)
    assert row["agreement"] == "within 10%" and "rounds_fast" not in row


@two_cpus
def test_every_launch_carries_the_round_trips_around_it():
    got = vs_imb.measure(["mpich"], [64], 2, rounds=1, seed=3)
    assert {(r["algorithm"], r["tool"]) for r in got} == {(a, t) for a in vs_imb.ALGORITHMS["mpich"]
                                                          for t in vs_imb.DEFAULT_TOOLS}
    assert all(r["core_rtt_before_ns"] > 0 and r["core_rtt_after_ns"] > 0 for r in got)
