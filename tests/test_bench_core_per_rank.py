"""The prepared run for a machine with a core per rank (ardlab.bench.core_per_rank): its checks refuse, before
anything runs, a machine whose cores would be time-shared, a non-root user and malformed shapes; its training
summary pairs rounds. (Its full run needs 8 cores: see docs/cluster.md; here its refusals and pieces.)"""

import pandas as pd
import pytest

from ardlab.bench import core_per_rank as cpr


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
