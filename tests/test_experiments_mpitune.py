"""mpitune_fast beside ardlab advise (ardlab.experiments.mpitune): the variants told apart in the rows, the paired
speedups recovered from rows with known ones, the table made again from a run folder's data, bad input named."""

import json

import numpy as np
import pandas as pd
import pytest

from ardlab.experiments import mpitune


def _rows(speedups: dict, rounds: int = 6, dat: str = "/x/tuning.dat"):
    rng, rows = np.random.default_rng(1), []
    for r in range(rounds):
        drift = rng.uniform(0.6, 1.4)  # the machine's speed changes between rounds, not within one
        for variant, s in speedups.items():
            rows.append({"round": r, "library": "intelmpi", "algorithm": "tuned" if variant == "advise" else "default",
                         "knobs": f"I_MPI_TUNING_BIN={dat}" if variant == "mpitune_fast" else "I_MPI_PIN=0",
                         "img_per_s": 100 * s * drift})
    return pd.DataFrame(rows)


class _Plan:
    env = {"I_MPI_TUNING_BIN": "/x/tuning.dat"}


def test_variants_are_told_apart_and_their_paired_speedups_recovered():
    rows = mpitune._named(_rows({"default": 1.0, "advise": 1.2, "mpitune_fast": 0.9}), {"mpitune_fast": _Plan()})
    assert rows.groupby("variant").size().to_dict() == {"advise": 6, "default": 6, "mpitune_fast": 6}
    t = {(r["variant"], r["baseline"]): r for r in mpitune.table(rows, {"advise": 600.0, "mpitune_fast": 300.0})}
    assert t["advise", "default"]["speedup"] == pytest.approx(1.2)
    assert t["mpitune_fast", "default"]["speedup"] == pytest.approx(0.9)
    assert t["advise", "mpitune_fast"]["speedup"] == pytest.approx(1.2 / 0.9)
    assert t["advise", "default"]["tuning_s"] == 600.0 and t["advise", "default"]["rounds"] == 6


def test_the_table_is_made_again_from_the_folders_data(tmp_path):
    rows = mpitune._named(_rows({"default": 1.0, "advise": 1.1, "mpitune_fast": 1.0}), {"mpitune_fast": _Plan()})
    rows.to_csv(tmp_path / "training.csv", index=False)
    job = {"framework": "tensorflow", "model": "alexnet", "ranks": 2, "nodes": 2, "launcher": "srun"}
    (tmp_path / "mpitune.json").write_text(json.dumps({"job": job, "mpitune_s": 120.0, "advise_s": 1500.0,
                                                       "command": "python -m ardlab.experiments.mpitune ..."}))
    assert mpitune.main(["--output", str(tmp_path), "--summarize"]) == 0
    text = (tmp_path / "mpitune.md").read_text()
    assert "| advise | default | 25.0 min | 1.10x" in text and "| mpitune_fast | default | 2.0 min | 1.00x" in text


def test_bad_input_is_named(tmp_path):
    with pytest.raises(SystemExit):
        mpitune.main(["--output", str(tmp_path)])
    with pytest.raises(SystemExit):
        mpitune.main(["--output", str(tmp_path), "--advice", str(tmp_path / "none")])


def test_the_committed_table_is_made_from_the_committed_rows(tmp_path):
    import shutil
    from pathlib import Path

    run = Path(__file__).resolve().parents[1] / "results/experiments/mpitune/alexnet-tensorflow-2x1-1gbit"
    for name in ("training.csv", "mpitune.json"):
        shutil.copy(run / name, tmp_path / name)
    assert mpitune.main(["--output", str(tmp_path), "--summarize"]) == 0
    assert (tmp_path / "mpitune.md").read_text() == (run / "mpitune.md").read_text()
