"""`ardlab report --compare RUN_A RUN_B` on two synthetic runs: every significant claim of A, and whether B agrees."""

import numpy as np
import pandas as pd

from ardlab.results import BENCH_COLUMNS, BENCH_LOSS_COLUMNS, write_csv
from conftest import ardlab


def synthetic_run(folder, ring_speedup_by_size, seed, algorithms=("default", "ring")):
    """A run folder whose raw/ holds 6 paired rounds of MPICH's default and ring (times in us)."""
    rng = np.random.default_rng(seed)
    for r in range(6):
        drift = np.exp(rng.normal(0, 0.2))
        rows = []
        for pos, alg in enumerate(algorithms):
            for size, speedup in ring_speedup_by_size.items():
                t = 100 * drift * np.exp(rng.normal(0, 0.02)) / (speedup if alg == "ring" else 1)
                rows.append({"library": "mpich", "library_version": "5.0.2", "algorithm": alg,
                             "implementation": "native", "ranks": 2, "nodes": 1, "hostname": "h", "dtype": "float32",
                             "size_bytes": size, "iterations": 10, "avg_us": f"{t:.3f}", "min_us": f"{t:.3f}",
                             "max_us": f"{t:.3f}", "knobs": "", "started_at": f"2026-12-01T00:{r:02d}:{pos:02d}+00:00",
                             "group": "microbench/n1-r2", "round": r, "position": pos, "order_seed": 0,
                             "link_rate": "", "link_queue": "", "image_source": "", "image_commit": "",
                             "transport_intra_node": "", "transport_inter_node": "", "library_family": "mpich",
                             "threads_per_core": "", "net_tx_bytes_per_call": "",
                             "net_tx_max_node_bytes_per_call": "",
                             "mpi_tuning_file": "builtin", "mpi_thread_level": "multiple",
                             "timer": "c", **dict.fromkeys(BENCH_LOSS_COLUMNS, "")})
        write_csv(folder / "raw" / "microbench" / "n1-r2" / f"round{r}.csv", BENCH_COLUMNS, rows)


def test_compare_lists_claims_and_agreement(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    synthetic_run(a, {64: 1.3, 1024: 1.3, 4096: 1.0}, seed=1)  # ring faster at 64 B and 1 KiB; no difference at 4 KiB
    synthetic_run(b, {64: 0.8, 1024: 1.3, 4096: 1.0}, seed=2)  # ... but slower at 64 B in the second run
    ardlab("report", "--compare", a, b, "--output", tmp_path / "out")
    m = pd.read_csv(tmp_path / "out" / "reproduce.csv")
    speed = m[m.table == "microbench_speedup"].set_index("what")
    assert set(speed.index) == {64, 1024}  # the 4 KiB non-difference is no claim
    assert bool(speed.loc[1024, "same_direction"]) and not bool(speed.loc[64, "same_direction"])
    s = pd.read_csv(tmp_path / "out" / "reproduce_summary.csv").set_index(["table", "claims_checked"])
    assert s.loc[("microbench_speedup", "A's claims in B"), "share_same_direction"] == 0.5
    assert s.loc[("microbench_speedup", "B's claims in A"), "share_same_direction"] == 0.5  # 64 B slower in B
    assert s.loc[("microbench_speedup", "either run's claims"), "claims"] == 2


def _claims(rows):
    from ardlab.analysis.comparisons import CLAIM_COLUMNS

    return pd.DataFrame([{**dict.fromkeys(CLAIM_COLUMNS, ""), "table": "training_throughput", **r} for r in rows],
                        columns=CLAIM_COLUMNS)


def test_a_claim_the_other_run_did_not_measure_counts_in_the_denominator():
    from ardlab.analysis import reproduce

    a = _claims([{"group": "g1", "algorithm": "picked best", "speedup": 1.3, "ci_low": 1.1, "ci_high": 1.5,
                  "verdict": "faster"},
                 {"group": "g2", "algorithm": "picked best", "speedup": 1.3, "ci_low": 1.1, "ci_high": 1.5,
                  "verdict": "faster"},
                 {"group": "g3", "algorithm": "picked best", "speedup": 1.0, "ci_low": 0.9, "ci_high": 1.1,
                  "verdict": "no significant difference"}])
    b = _claims([{"group": "g1", "algorithm": "picked best", "speedup": 1.2, "ci_low": 1.05, "ci_high": 1.4,
                  "verdict": "faster"},  # same significant verdict
                 {"group": "g3", "algorithm": "picked best", "speedup": 0.8, "ci_low": 0.7, "ci_high": 0.9,
                  "verdict": "slower"},  # B's claim; A measured it and found nothing
                 {"group": "g3", "algorithm": "picked best", "speedup": 0.8, "ci_low": 0.7, "ci_high": 0.9,
                  "verdict": "slower"}])  # a duplicate: dropped
    m = reproduce.compare(a, b)
    assert len(m) == 3  # g1, g2 (A only, B did not measure it), g3 (B only)
    s = reproduce.summary(m).set_index(["table", "claims_checked"]).loc["all"]
    a_in_b = s.loc["A's claims in B"]
    assert a_in_b.claims == 2 and a_in_b.not_measured == 1 and a_in_b.share_same_direction == 0.5
    assert a_in_b.share_same_direction_measured == 1.0 and a_in_b.share_same_significant_verdict == 0.5
    b_in_a = s.loc["B's claims in A"]
    assert b_in_a.claims == 2 and b_in_a.not_measured == 0 and b_in_a.share_same_direction == 0.5
    either = s.loc["either run's claims"]
    assert either.claims == 3 and either.not_measured == 1 and either.same_significant_verdict == 1


def test_a_comparison_several_tables_state_counts_once_and_controls_apart():
    """One group: Intel MPI's pick (topo_reduce_bcast) over its default is stated three times (the training claim,
    the across-library claim over that default, and the fastest over the slowest default, which is Intel MPI's), MPICH's
    tuned file over its default once, MPICH's picked worst (a control) once: counted once per comparison there are 2
    speedup claims and 1 control."""
    from ardlab.analysis import reproduce

    sig = {"speedup": 1.5, "ci_low": 1.2, "ci_high": 1.9, "verdict": "faster"}
    rows = [{"group": "g", "library": "intelmpi", "algorithm": "picked best", "versus": "default",
             "selected": "topo_reduce_bcast", **sig},
            {"table": "study_across_libraries", "group": "g", "what": "fastest_over_default", "library": "intelmpi",
             "algorithm": "predicted fastest", "versus": "intelmpi/default",
             "selected": "intelmpi/topo_reduce_bcast over intelmpi/default", **sig},
            {"table": "study_across_libraries", "group": "g", "what": "fastest_over_slowest_default",
             "library": "across libraries", "algorithm": "predicted fastest", "versus": "predicted slowest default",
             "selected": "intelmpi/topo_reduce_bcast over intelmpi/default", **sig},
            {"group": "g", "library": "mpich", "algorithm": "tuned", "versus": "default", "selected": "tuned", **sig},
            {"group": "g", "library": "mpich", "algorithm": "picked worst", "versus": "default", "selected": "tree",
             "speedup": 0.5, "ci_low": 0.4, "ci_high": 0.6, "verdict": "slower"}]
    m = reproduce.compare(_claims(rows), _claims(rows))
    one = reproduce.once(m)
    assert len(m) == 5 and len(one) == 3 and int(one.control.sum()) == 1
    assert set(one.table) == {"training_throughput"}  # the training table's statement is the one that counts
    s = reproduce.summary(m).set_index(["table", "claims_checked"])
    assert s.loc[(reproduce.ONCE[0], "either run's claims")].claims == 2
    assert s.loc[(reproduce.ONCE[1], "either run's claims")].same_significant_verdict == 1
    assert s.loc[(reproduce.ONCE[2], "either run's claims")].claims == 3
    assert s.loc[("all", "either run's claims")].claims == 5


def test_report_of_a_run_folder(tmp_path):
    synthetic_run(tmp_path / "run", {64: 1.3, 1024: 0.7}, seed=3)
    ardlab("report", "--run", tmp_path / "run")
    sp = pd.read_csv(tmp_path / "run" / "tables" / "microbench_speedup.csv")
    ring = sp[sp.algorithm == "ring"].set_index("size_bytes")
    assert ring.loc[64, "speedup_vs_default_verdict"] == "faster"
    assert ring.loc[1024, "speedup_vs_default_verdict"] == "slower"
    assert (ring.rounds == 6).all() and (ring.ci_level > 0.95).all()
    assert (tmp_path / "run" / "figures" / "measured" / "speedup_heatmap_mpich_n1_r2.png").exists()


def test_report_of_a_run_without_defaults(tmp_path):
    """A cost-model run measures only modelled algorithms: no speedup over a default, no heatmap, the rest made."""
    synthetic_run(tmp_path / "run", {64: 1.3, 1024: 0.7}, seed=4, algorithms=("ring", "recursive_doubling"))
    ardlab("report", "--run", tmp_path / "run")
    sp = pd.read_csv(tmp_path / "run" / "tables" / "microbench_speedup.csv")
    assert sp.speedup_vs_default.isna().all() and set(sp.algorithm) == {"ring", "recursive_doubling"}
    figures = tmp_path / "run" / "figures" / "measured"
    assert (figures / "latency_bandwidth_mpich_n1_r2.png").exists()
    assert not list(figures.glob("speedup_heatmap_*"))
