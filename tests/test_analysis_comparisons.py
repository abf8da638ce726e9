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
             "img_per_s": img * d} for v, img in rate.items() for r, d in enumerate(drift)]
    t = cmp.training_defaults(pd.DataFrame(rows))
    assert len(t) == 6 and set(zip(t.library, t.versus)) == {(a, b) for a in ("mpich", "openmpi", "intelmpi")
                                                              for b in ("mpich", "openmpi", "intelmpi") if a != b}
    pair = t.set_index(["library", "versus"])
    assert pair.loc[("mpich", "openmpi"), "speedup"] == pytest.approx(1.5)
    assert pair.loc[("openmpi", "mpich"), "speedup"] == pytest.approx(1 / 1.5)
    assert pair.loc[("mpich", "intelmpi"), "speedup_verdict"] == "faster"
    assert pair.loc[("intelmpi", "mpich"), "speedup_verdict"] == "slower"
    assert pair.loc[("intelmpi", "openmpi"), "speedup"] == pytest.approx(1.0)
