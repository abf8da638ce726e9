"""The simulator's calibration (ardlab.experiments.simulator): the committed table is what the committed runs' rows
and the simulator make (SMPI is deterministic: the same numbers every time)."""

import pandas as pd
import pytest

from ardlab.experiments import simulator
from conftest import ROOT

TABLE = ROOT / "results" / "experiments" / "simulator" / "calibration.csv"


def test_the_committed_calibration_recomputes_exactly():
    committed = pd.read_csv(TABLE, keep_default_na=False)
    run = "costmodel-250mbit-nodes"  # the smaller of the two (sizes from 16 KiB)
    mine = committed[committed.run == run].reset_index(drop=True)
    (latency,) = set(committed.link_latency_us)
    again = pd.DataFrame(simulator.calibrate(str(ROOT / "results" / "runs" / run), latency))
    pd.testing.assert_frame_equal(again[simulator.COLUMNS].astype(str), mine[simulator.COLUMNS].astype(str))


def test_the_latency_is_half_the_smallest_exchange_on_two_nodes():
    runs = [simulator.measured(str(ROOT / r)) for r in simulator.RUNS]
    (latency,) = set(pd.read_csv(TABLE).link_latency_us)
    assert simulator.latency_us(runs) == latency
    with pytest.raises(ValueError, match="give --latency-us"):
        simulator.latency_us([runs[1]])  # that run's sizes start at 16 KiB


def test_a_later_regime_keeps_the_first_regimes_latency():
    from ardlab.analysis.costmodel.model import read_fits

    fits = read_fits(ROOT / "results/runs/costmodel-1gbit/tables/costmodel_fits.csv")
    (ring,) = [f for f in fits if (f.library, f.algorithm, f.node_class) == ("openmpi", "ring", "inter")]
    assert ring.regimes[1].alpha_us < 1e-6 < ring.regimes[0].alpha_us  # fitted from 64 KiB up: no latency seen
    kept = simulator.latency_kept(ring)
    assert kept.regimes[1].alpha_us == ring.regimes[0].alpha_us and kept.regimes[0] == ring.regimes[0]
    # at 256 nodes a ring's 510 steps: the kept latency makes its 64 KiB Allreduce dearer, by 510 alphas
    n, p = [65536], [256]
    assert kept.predict(n, p)[0] - ring.predict(n, p)[0] == pytest.approx(510 * ring.regimes[0].alpha_us, rel=1e-6)


def test_the_model_and_the_simulator_choose_among_the_same_algorithms():
    """At 8 nodes: each side picks among the run's accepted fits whose family SMPI has, leaving out a family at a size
    where SMPI fell back; every row names the same pick for its library and size."""
    (latency,) = set(pd.read_csv(TABLE).link_latency_us)
    rows = pd.DataFrame(simulator.scale(str(ROOT / simulator.RUNS[0]), [8], latency, sizes=[4, 1 << 20]))
    for (lib, size), g in rows.groupby(["library", "size_bytes"]):
        compared = g[g.fallback == ""]
        for pick, column in (("model_pick", "model_us"), ("simulator_pick", "simulated_us"),
                             ("latency_kept_pick", "latency_kept_us")):
            (chosen,) = set(g[pick])
            assert chosen == compared.loc[compared[column].idxmin(), "algorithm"], (lib, size, pick)
    table = simulator.agreement(rows.to_dict("records"))
    assert set(table.model) == {"fits", "latency kept"} and (table.sizes == 2).all()
    assert ((table.best <= table.within_5pct) & (table.regret_max >= 1)).all()
