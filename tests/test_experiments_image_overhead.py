"""Inside the image against outside (ardlab.experiments.image_overhead): the paired ratios on rows with a known
overhead,
the committed table made from the committed rows, and bad input named before anything runs."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ardlab.experiments import image_overhead as io

ROOT = Path(__file__).resolve().parents[1]


def test_a_known_overhead_is_recovered_paired_by_round():
    rng, rows = np.random.default_rng(0), []
    for r in range(6):
        drift = rng.uniform(0.6, 1.4)  # the machine's speed changes between rounds, not within one
        for where, factor in (("env", 1.0), ("image", 1.1)):
            rows.append({"kind": "bench", "forced": "ring", "size_bytes": 1 << 20, "round": r, "where": where,
                         "avg_us": 1000 * drift * factor * rng.normal(1, 0.01)})
            rows.append({"kind": "train", "forced": "default", "size_bytes": 0, "round": r, "where": where,
                         "img_per_s": 500 / drift / factor})
    t = io.ratios(pd.DataFrame(rows)).set_index("kind")
    assert t.loc["microbenchmark (time)", "image_over_env"] == pytest.approx(1.1, rel=0.02)
    assert t.loc["microbenchmark (time)", "interval"] == "excludes 1"
    assert t.loc["Horovod training (img/s)", "image_over_env"] == pytest.approx(1 / 1.1)


def test_the_committed_table_is_made_from_the_committed_rows(tmp_path):
    rows = ROOT / "results/experiments/images/mpich_image_vs_env_rows.csv"
    assert io.main(["--image", "unused", "--summarize", str(rows), "--output", str(tmp_path / "x.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "x_ratio.csv"),
                                  pd.read_csv(rows.with_name("mpich_image_vs_env_ratio.csv")))


def test_bad_input_is_named_before_anything_runs(tmp_path, monkeypatch):
    with pytest.raises(SystemExit, match="is not a file"):
        io.main(["--image", str(tmp_path / "none.sif")])
    image = tmp_path / "x.sif"
    image.write_bytes(b"")
    monkeypatch.setenv("PATH", str(tmp_path))  # no apptainer
    with pytest.raises(SystemExit, match="apptainer is not on PATH"):
        io.main(["--image", str(image)])
