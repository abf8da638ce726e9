"""The network tables on synthetic rows: the bandwidth bound of a known link, the traffic models, earlier files."""

import csv
import glob

import numpy as np
import pandas as pd
import pytest

from ardlab.analysis import network, read
from ardlab.comm.traffic import model
from ardlab.results import BENCH_COLUMNS
from conftest import ROOT

MIB16 = 16 << 20


def rows(nodes=2, rate="1gbit", rounds=5):
    rng = np.random.default_rng(0)
    out = []
    for r in range(rounds):
        for alg, seconds, family in (("ring", 0.140, "ring"), ("recursive_doubling", 0.150, "recursive_doubling"),
                                     ("default", 0.145, None)):
            total, busiest = model(family or "ring", nodes, MIB16) if nodes > 1 else (0, 0)
            out.append({c: "" for c in BENCH_COLUMNS} | {
                "library": "mpich", "algorithm": alg, "implementation": "native", "ranks": nodes, "nodes": nodes,
                "size_bytes": MIB16, "avg_us": seconds * 1e6 * rng.uniform(0.99, 1.01), "group": "microbench/n2-r2",
                "round": r, "link_rate": rate, "net_tx_bytes_per_call": total * 1.003,
                "net_tx_max_node_bytes_per_call": busiest * 1.003})
    return pd.DataFrame(out)


def test_bound_of_a_1gbit_link():
    t = network.bound(rows())
    (row,) = t.itertuples()
    assert row.best_algorithm == "ring"
    assert row.bound_us == pytest.approx(MIB16 * 8 / 1e9 * 1e6)  # 2 nodes: n bytes each way, 134 ms
    assert row.ratio_to_bound == pytest.approx(0.140 / (MIB16 * 8 / 1e9), rel=0.02)
    assert row.ratio_ci_low <= row.ratio_to_bound <= row.ratio_ci_high


def test_unknown_rate_and_one_node_make_no_rows():
    assert network.bound(rows(rate="")).empty and network.bound(rows(rate="none")).empty
    assert network.bound(rows(nodes=1)).empty


def test_traffic_against_the_models():
    t = network.traffic(rows()).set_index("algorithm")
    assert t.loc["ring", "ratio"] == pytest.approx(1.003) and t.loc["ring", "traffic_model"] == "ring"
    assert np.isnan(t.loc["default", "ratio"])  # a library's default has no single model


def test_models_tell_ring_from_recursive_doubling_at_4_nodes():
    assert model("ring", 4, 1) == (6, 1.5) and model("recursive_doubling", 4, 1) == (8, 2)
    assert model("binomial", 4, 1) == (6, 2) and model("linear", 4, 1) == (6, 3)
    with pytest.raises(ValueError, match="power of two"):
        model("ring", 3, 1)


def _cut_down(tmp_path, kind: str, pattern: str):
    """(header, fill, frame): the first committed row matching `pattern`, written under each earlier header of
    `kind` and read back."""
    from ardlab.results import EARLIER_COLUMNS

    (row,) = list(csv.DictReader(open(sorted(glob.glob(str(ROOT / pattern)))[0])))[:1]
    for i, (header, fill) in enumerate(EARLIER_COLUMNS[kind]):
        path = tmp_path / f"{kind}{i}.csv"
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=header, extrasaction="ignore")
            w.writeheader()
            w.writerow(row)
        yield header, fill, (read.bench if kind == "bench" else read.train)([str(path)])


def test_earlier_files_still_read(tmp_path):
    # the cluster runs' microbenchmark rows were written before the start-up and timer columns existed
    b = read.bench(sorted(glob.glob(str(ROOT / "results/runs/cluster-2nodes/raw/microbench/*/*.csv")))[:2])
    assert len(b) and (b.timer == "python").all() and (b.mpi_tuning_file == "").all() and (b.link_rate != "").all()
    # rows of every earlier header: a committed row cut down to it; every column added since takes its fill
    for header, fill, b in _cut_down(tmp_path, "bench", "results/runs/reference-a/raw/microbench/*/*.csv"):
        assert len(b) == 1, header
        assert "timer" not in fill or ((b.timer == "python").all() and (b.mpi_thread_level == "").all()), header
        for column in fill:  # the loss counters: empty (NaN once read) in files from before them
            assert b[column].isna().all() if column.startswith("tcp_") else True, (header, column)
    for header, fill, t in _cut_down(tmp_path, "train", "results/runs/reference-a/raw/train/*/*/*.csv"):
        assert len(t) == 1, header
        for column, value in fill.items():
            got = t[column].iloc[0]
            assert (got == int(value)) if column == "nodes" else pd.isna(got) or got == value, (header, column, got)
        if "nodes" in fill:
            assert (t.nodes == 1).all() and t.threads_per_core.isna().all()
