"""The gaps at 2 x 2 taken apart (ardlab.experiments.gaps): on simulated rounds with known parts (bytes 2x, a shallow
queue 3x, nothing beyond) each part is recovered and the parts multiply to the gap; the committed decomposition is
made from the committed rows."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ardlab.experiments import gaps

ROOT = Path(__file__).resolve().parents[1]


def simulated(rounds: int = 6, seed: int = 0) -> pd.DataFrame:
    """link_queue rounds of one library: `slow` sends 2x `fast`'s bytes; a deep queue leaves time proportional to
    bytes; the shallow queue triples `slow`'s time only; every round drifts and each launch has 5% noise."""
    rng, rows = np.random.default_rng(seed), []
    for r in range(rounds):
        drift = rng.uniform(0.7, 1.3)
        for queue, extra in (("1ms", 3.0), ("30ms", 1.0)):
            for alg, nbytes, factor in (("slow", 2e6, 2.0 * extra), ("fast", 1e6, 1.0)):
                rows.append({"round": r, "queue": queue, "settings": "none", "link_rate": "1gbit",
                             "mpi_tuning_file": "", "library": "lib", "algorithm": alg, "size_bytes": 1 << 20,
                             "net_tx_bytes_per_call": nbytes * rng.normal(1, 0.002),
                             "avg_us": 1000 * factor * drift * rng.normal(1, 0.05),
                             "drops_per_call": 10.0 if queue == "1ms" and alg == "slow" else 0.0,
                             "retransmits_per_call": 0.0})
    return pd.DataFrame(rows)


def test_known_parts_are_recovered_and_multiply_to_the_gap():
    t = pd.DataFrame(gaps.decompose(simulated(), "lib", "slow", "fast", "slow over fast")).set_index("part")
    assert t.loc["gap", "factor"] == pytest.approx(6.0, rel=0.1)
    assert t.loc["bytes", "factor"] == pytest.approx(2.0, rel=0.01)
    assert t.loc["beyond the bytes", "factor"] == pytest.approx(1.0, rel=0.1)
    assert t.loc["the shallow queue", "factor"] == pytest.approx(3.0, rel=0.1)
    product = t.loc[["bytes", "beyond the bytes", "the shallow queue"], "factor"].prod()
    assert product == pytest.approx(t.loc["gap", "factor"], rel=1e-9)  # exact: geometric means of paired rounds
    assert t.loc["the shallow queue", "interval"] == "above 1"
    assert t.loc["beyond the bytes", "interval"] == "holds 1"
    assert t.loc["gap", "slow_drops_per_call_1ms"] == 10.0 and t.loc["gap", "fast_drops_per_call_1ms"] == 0.0


def test_a_gap_without_both_queues_is_left_out():
    r = simulated()
    assert gaps.decompose(r[r.queue == "1ms"], "lib", "slow", "fast", "x") == []


def test_missing_rounds_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="queue_file_waitmode_rounds.csv"):
        gaps.decomposition(tmp_path)


def test_the_committed_decomposition_is_made_from_the_committed_rows(tmp_path):
    import shutil

    folder = ROOT / "results/experiments/gaps_2x2"
    for name in {g[0] for g in gaps.GAPS}:
        shutil.copy(folder / name, tmp_path / name)
    (tmp_path / gaps.CORE_PER_RANK).parent.mkdir(parents=True)
    shutil.copy(folder / gaps.CORE_PER_RANK, tmp_path / gaps.CORE_PER_RANK)
    runs = ",".join(str(ROOT / "results/runs" / r) for r in ("cluster", "cluster-rerun", "cluster-250mbit"))
    assert gaps.main(["--folder", str(tmp_path), "--runs", runs]) == 0
    assert (tmp_path / "decomposition.md").read_text() == (folder / "decomposition.md").read_text()
    for name in ("decomposition.csv", "training_bound.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), pd.read_csv(folder / name))


def test_the_bytes_alone_bound_training_below_what_the_shallow_queue_made():
    """On the committed runs: a 2x Allreduce bounds the default's step at under 1.8x; the emulated cluster measured
    3.6-5.5x where the calls are large (AlexNet, VGG-16), about 1x for ResNet-20 (small calls: bytes not doubled)."""
    t = pd.read_csv(ROOT / "results/experiments/gaps_2x2/training_bound.csv")
    assert (t.bytes_only_bound < 1.8).all() and (t.bytes_only_bound > 1.4).all()
    large = t[t.model != "resnet20"]
    assert (large.measured_default_over_selection > 2 * large.bytes_only_bound).all()
