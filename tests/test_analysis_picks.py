"""Picking the best and the worst algorithm for a model's Allreduce calls from microbenchmark rows
(ardlab.analysis.picks), on rows whose times are known."""

import numpy as np
import pandas as pd
import pytest

from ardlab.analysis import picks


def _bench(times: dict, sizes=(8, 1024, 1 << 20), rounds=3, ranks=4, nodes=2) -> pd.DataFrame:
    """Rows of (library, algorithm) -> time function of the size, every round alike but for a little noise."""
    rng = np.random.default_rng(0)
    rows = [{"library": lib, "algorithm": alg, "size_bytes": s, "avg_us": f(s) * (1 + 0.01 * rng.standard_normal()),
             "ranks": ranks, "nodes": nodes, "round": r}
            for (lib, alg), f in times.items() for s in sizes for r in range(rounds)]
    return pd.DataFrame(rows)


def test_time_between_below_and_above_the_measured_sizes():
    sizes, times = np.array([8, 1024, 1 << 20]), np.array([10.0, 20.0, 1000.0])
    at = np.array([1, 8, 90, 1024, 1 << 20, 1 << 22])
    got = picks.time_at(sizes, times, at)
    assert got[0] == pytest.approx(10.0) and got[1] == pytest.approx(10.0)  # below: the smallest's time
    assert got[3] == pytest.approx(20.0) and got[4] == pytest.approx(1000.0)
    assert 10.0 < got[2] < 20.0 and got[2] == pytest.approx(10 * (90 / 8) ** (np.log(2) / np.log(128)))  # log-log
    assert got[5] == pytest.approx(4000.0)  # above: scaled by size


def test_the_calls_decide_best_and_worst():
    """A latency-bound algorithm wins for many small calls, a bandwidth-bound one for large calls."""
    bench = _bench({("mpich", "default"): lambda s: 30 + s / 100,
                    ("mpich", "latency"): lambda s: 5 + s / 50,
                    ("mpich", "bandwidth"): lambda s: 50 + s / 400,
                    ("mpich", "own_ring"): lambda s: 1.0,  # ours are never picked
                    ("openmpi", "ring"): lambda s: 20 + s / 200})
    small = pd.DataFrame({"bytes": [8, 1024], "calls_per_step": [300, 40]})
    large = pd.DataFrame({"bytes": [1 << 20, 1 << 22], "calls_per_step": [4, 1]})
    for calls, best, worst in ((small, "latency", "bandwidth"), (large, "bandwidth", "latency")):
        table = picks.predict(bench, calls)
        mpich = table[table.library == "mpich"].set_index("algorithm")
        assert mpich.loc[best, "pick"] == "best" and mpich.loc[worst, "pick"] == "worst"
        assert mpich.loc["default", "pick"] == "" and "own_ring" not in mpich.index
        expected = sum(c * (5 + b / 50) for b, c in calls.itertuples(index=False))
        assert mpich.loc["latency", "predicted_us_per_step"] == pytest.approx(expected, rel=0.03)
        assert list(table[table.library == "openmpi"].pick) == ["best;worst"]  # its only forced one is both


def test_picked_reads_the_file(tmp_path):
    bench = _bench({("mpich", "default"): lambda s: 30.0, ("mpich", "a"): lambda s: 10.0,
                    ("mpich", "b"): lambda s: 40.0})
    path = tmp_path / "picks.csv"
    picks.predict(bench, pd.DataFrame({"bytes": [8], "calls_per_step": [1]})).to_csv(path, index=False)
    assert picks.picked(path, "mpich", "best") == "a" and picks.picked(path, "mpich", "worst") == "b"
    with pytest.raises(ValueError, match="names no best algorithm for openmpi"):
        picks.picked(path, "openmpi", "best")
    with pytest.raises(ValueError, match="unknown pick 'fastest'"):
        picks.picked(path, "mpich", "fastest")


def test_one_scale_only():
    bench = pd.concat([_bench({("mpich", "a"): lambda s: 1.0}, ranks=2),
                       _bench({("mpich", "a"): lambda s: 1.0}, ranks=4)])
    with pytest.raises(ValueError, match="2 scales"):
        picks.predict(bench, pd.DataFrame({"bytes": [8], "calls_per_step": [1]}))
