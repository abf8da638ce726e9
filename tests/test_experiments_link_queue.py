"""The link-queue investigation's paired ratio table (ardlab.experiments.link_queue.paired_ratios) on rows whose times,
bytes and losses are known, and its refusals of a malformed --ratio before anything runs."""

import numpy as np
import pandas as pd
import pytest

from ardlab.experiments import link_queue


def _rounds(ratio_by_queue: dict, rounds: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for r in range(rounds):
        speed = np.exp(rng.normal(0, 0.3))  # the machine's drift between rounds, shared by a round's launches
        for queue, ratio in ratio_by_queue.items():
            for alg, t, nbytes, drops in (("default", 100.0 * ratio, 4.2e6, 70.0),
                                          ("rabenseifner", 100.0, 2.1e6, 25.0)):
                rows.append({"round": r, "queue": queue, "settings": "none", "library": "intelmpi", "algorithm": alg,
                             "size_bytes": 1 << 20, "mpi_tuning_file": "tuning_generic_shm-ofi.dat",
                             "avg_us": t * speed * np.exp(rng.normal(0, 0.02)), "net_tx_bytes_per_call": nbytes,
                             "drops_per_call": drops if queue == "1ms" else 0.0, "retransmits_per_call": 1.0})
    return pd.DataFrame(rows)


def test_paired_ratio_beside_the_bytes_ratio():
    table = link_queue.paired_ratios(_rounds({"1ms": 8.0, "30ms": 2.0}), "default", "rabenseifner")
    table = table.set_index("queue")
    assert table.loc["1ms", "time_ratio"] == pytest.approx(8.0, rel=0.03)
    assert table.loc["30ms", "time_ratio"] == pytest.approx(2.0, rel=0.03)
    assert (table.bytes_ratio == 2.0).all()
    assert table.loc["30ms", "time_over_bytes_ratio"] == pytest.approx(1.0, rel=0.03)
    assert (table.ci_low <= table.time_ratio).all() and (table.time_ratio <= table.ci_high).all()
    assert table.loc["1ms", "default_drops_per_call"] == 70 and table.loc["30ms", "default_drops_per_call"] == 0
    assert (table.rounds == 6).all() and set(table.mpi_tuning_file) == {"tuning_generic_shm-ofi.dat"}


@pytest.mark.parametrize("argv, message", [
    (["--ratio", "default"], "--ratio: 'default' is not NUMERATOR/DENOMINATOR"),
    (["--summarize", "x.csv"], "--summarize needs --ratio"),
])
def test_a_malformed_ratio_is_refused_before_anything_runs(argv, message):
    with pytest.raises(SystemExit, match=message):
        link_queue.main(argv)
