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
