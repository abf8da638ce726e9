"""The prepared run for a machine with a core per rank (ardlab.experiments.core_per_rank): its checks refuse, before
anything runs, a machine whose cores would be time-shared, a non-root user and malformed shapes; its training
summary pairs rounds. (Its full run needs 8 cores: see docs/cluster.md; here its refusals and pieces.)"""

import pandas as pd
import pytest

from ardlab.experiments import core_per_rank as cpr


@pytest.mark.parametrize("nodes, rpn, fallback, have, root, message", [
    ([2, 4], 2, 8, 2, True, r"needs 8 cores for 4 nodes x 2 ranks .* this machine has 2"),
    ([2], 1, 8, 4, True, r"needs 8 cores .*the fallback's 8"),
    ([1], 2, 8, 16, True, r"--nodes: each count must be at least 2"),
    ([2], 0, 8, 16, True, r"--ranks-per-node must be at least 1"),
    ([2, 4], 2, 8, 16, False, r"needs root"),
])
def test_refusals_before_anything_runs(nodes, rpn, fallback, have, root, message):
    with pytest.raises(SystemExit, match=message):
        cpr.check(nodes, rpn, fallback, have, root)


def test_a_machine_with_a_core_per_rank_passes():
    cpr.check([2, 4], 2, 8, 16, True)


def test_this_machine_is_refused_by_the_command_itself():
    if cpr.cores() >= 8:
        pytest.skip("this machine has a core per rank")
    with pytest.raises(SystemExit, match=rf"this machine has {cpr.cores()}"):
        cpr.main(["--nodes", "2,4"])
    with pytest.raises(SystemExit, match="not a comma-separated list"):
        cpr.main(["--nodes", "2,x"])


def test_the_tuning_files_it_forces_are_installed():
    missing = [f for f in cpr.FILES.values() if not (cpr.tuning_dir() / f).is_file()]
    assert not missing, (cpr.tuning_dir(), missing)


def test_training_pairs_rounds_per_file(tmp_path):
    paths = []
    for r in range(5):
        for fname, speed in (("generic", {"default": 10.0, "rabenseifner": 40.0}),
                             ("skx", {"default": 40.0, "rabenseifner": 40.0})):
            for alg, ips in speed.items():
                p = tmp_path / f"train-round{r}-{fname}-{alg}.csv"
                pd.DataFrame({"img_per_s": [ips * (1 + 0.1 * r)],
                              "mpi_tuning_file": [cpr.FILES[fname]]}).to_csv(p, index=False)
                paths.append(p)
    t = cpr.train_ratios(paths).set_index("file")
    assert t.loc["tuning_generic_shm-ofi.dat", "selection_speedup"] == pytest.approx(4.0)
    assert t.loc["tuning_skx_shm-ofi_tcp.dat", "selection_speedup"] == pytest.approx(1.0)
    assert (t.rounds == 5).all()


def test_shared_cores_are_half_of_the_spread_ones():
    sets = cpr.core_sets(2)
    mine = sorted(__import__("os").sched_getaffinity(0))
    assert sets["spread"] == mine[:2] and sets["shared"] == mine[:1]


def test_a_shared_launch_gets_the_time_shared_settings_and_the_callers_win():
    from ardlab.comm import library

    shared = library("intelmpi").time_shared_env
    assert shared  # the cluster's time-shared launches have it; the fallback's shared ones must too
    env = cpr._variant_env({}, "generic", "shared")
    assert all(env[k] == v for k, v in shared.items())
    assert env["I_MPI_TUNING_BIN"].endswith(cpr.FILES["generic"])
    assert not set(shared) & set(cpr._variant_env({}, "skx", "spread"))
    mine = dict.fromkeys(shared, "mine")
    assert cpr._variant_env(mine, "skx", "shared").items() >= mine.items()


def test_microbenchmark_pairs_rounds_per_file_cores_and_size(tmp_path):
    """The default's time over rabenseifner's per file, cores and size; and time-sharing's share of it: the shared
    ratio over the spread one, paired by round (here 3x under the generic file, 1x under skx)."""
    paths = []
    for r in range(5):
        for fname, core, default in (("generic", "spread", 20.0), ("generic", "shared", 60.0),
                                     ("skx", "spread", 10.0), ("skx", "shared", 20.0)):
            for alg, us in (("default", default), ("rabenseifner", 10.0 if core == "spread" else 20.0)):
                p = tmp_path / f"bench-round{r}-{fname}-{alg}-{core}.csv"
                pd.DataFrame({"size_bytes": [1 << 20, 4 << 20], "avg_us": [us * (1 + 0.2 * r), 4 * us],
                              "mpi_tuning_file": [cpr.FILES[fname]] * 2,
                              "threads_per_core": [2.0 if core == "shared" else 1.0] * 2}).to_csv(p, index=False)
                paths.append(p)
    t = cpr.bench_ratios(paths).set_index(["file", "cores", "size_bytes"])
    generic, skx = cpr.FILES["generic"], cpr.FILES["skx"]
    assert t.loc[(generic, "spread", 1 << 20), "default_over_rabenseifner"] == pytest.approx(2.0)
    assert t.loc[(generic, "shared", 4 << 20), "default_over_rabenseifner"] == pytest.approx(3.0)
    assert t.loc[(generic, "shared over spread", 1 << 20), "default_over_rabenseifner"] == pytest.approx(1.5)
    assert t.loc[(skx, "shared over spread", 4 << 20), "default_over_rabenseifner"] == pytest.approx(1.0)
    assert t.loc[(generic, "shared", 1 << 20), "threads_per_core"] == "2.0"
    assert (t.rounds == 5).all()


def test_the_cluster_check_names_what_is_missing(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda c: None if c in ("slurmctld", "munged") else f"/usr/bin/{c}")
    assert cpr.cluster_missing().startswith("slurmctld, munged not found")


@pytest.mark.parametrize("run", ["h200-a-4rounds", "h200-b-6rounds"])
def test_the_committed_tables_are_made_from_the_committed_rows(tmp_path, run):
    """--summarize re-makes each committed run's tables from its rows, equal to what is committed."""
    import shutil
    from pathlib import Path

    committed = Path(__file__).resolve().parents[1] / "results/experiments/gaps_2x2/core_per_rank" / run
    shutil.copytree(committed / "fallback", tmp_path / "fallback")
    assert cpr.main(["--summarize", str(tmp_path)]) == 0
    for kind in ("microbench", "train"):
        name = f"fallback_{kind}_ratio.csv"
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / name), pd.read_csv(committed / name))
    with pytest.raises(SystemExit, match="no fallback rows"):
        cpr.main(["--summarize", str(tmp_path / "nothing")])
