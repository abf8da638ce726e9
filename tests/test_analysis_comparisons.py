"""The comparisons of ardlab.analysis.comparisons that no other test file covers, on rows made with a known answer."""

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
