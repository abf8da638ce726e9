"""The alpha-beta-gamma cost models: fits recover the constants that generated the times, two regimes are found
where the per-byte cost changes, poorly determined fits are rejected with their reason, and the held-out
validation scores picks and keeps oversubscribed points apart.

The times are generated from the formulas with known constants, so the expected answers are exact (tolerances
1e-6 relative); the real-data fits and their validation run in the workflow tests and `results/`.
"""

import math

import numpy as np
import pandas as pd
import pytest

from ardlab.analysis import costmodel
from ardlab.analysis.costmodel import MODELS, coefficients, fit_one, score, validate

SIZES = [4 * 4 ** i for i in range(11)]  # 4 B .. 4 MiB
TRUE = np.array([3.0, 1.5, 2e-4, 5e-5, 7e-4])  # o (us), alpha (us), beta, gamma and the fold's phi (us per byte)


def frame(rows):
    return pd.DataFrame(rows, columns=["library", "algorithm", "nodes", "ranks", "size_bytes", "avg_us"])


def times(model, consts, ranks, sizes=SIZES):
    n = np.array([s for _ in ranks for s in sizes], float)
    p = np.array([r for r in ranks for _ in sizes], float)
    return n, p, coefficients(model, n, p) @ consts


@pytest.mark.parametrize("model", MODELS)
def test_fit_recovers_the_generating_constants(model):
    """Fitted on 2-8 ranks (powers of two and not), the model predicts 1024 ranks and 1 GiB exactly."""
    n, p, t = times(model, TRUE, [2, 3, 4, 6, 8])
    data = pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t})
    fit = fit_one("mpich", "x", model, data, "intra")
    assert fit.status == "ok" and fit.max_rel_err < 1e-6 and len(fit.regimes) == 1
    far_n, far_p = np.array([1 << 30, 64.0]), np.array([1024.0, 1000.0])
    np.testing.assert_allclose(fit.predict(far_n, far_p), coefficients(model, far_n, far_p) @ TRUE, rtol=1e-6)


def test_two_regimes_where_the_per_byte_cost_changes():
    """beta and gamma triple from 256 KiB on (the working set leaves the cache): the fit splits there."""
    large = TRUE * np.array([1, 1, 3, 3, 3])
    n, p, small_t = times("ring", TRUE, [2, 4])
    _, _, large_t = times("ring", large, [2, 4])
    t = np.where(n >= 256 << 10, large_t, small_t)
    fit = fit_one("mpich", "ring", "ring", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t}), "intra")
    assert [r.from_bytes for r in fit.regimes] == [0, 256 << 10] and fit.max_rel_err < 1e-6
    want = [coefficients("ring", [16 << 20], [4])[0] @ large, coefficients("ring", [1024], [4])[0] @ TRUE]
    np.testing.assert_allclose(fit.predict([16 << 20, 1024], [4, 4]), want, rtol=1e-6)


def test_the_fold_has_its_own_constant():
    """Rabenseifner's fold (3 ranks) costs 3.5x its bytes at beta: fitted on 2 and 3 ranks, the model predicts 4
    (no fold) from beta alone, and 6 (a fold again) with phi."""
    n, p, t = times("rabenseifner", TRUE, [2, 3])
    fit = fit_one("mpich", "x", "rabenseifner", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t}), "intra")
    (r,) = fit.regimes
    assert r.fold_us_per_byte == pytest.approx(TRUE[4], rel=1e-6) and fit.gamma_folded
    assert r.beta_us_per_byte == pytest.approx(TRUE[2] + TRUE[3] / 2, rel=1e-6)  # gamma folded into beta
    far_n, far_p = np.array([1 << 30, 1 << 30]), np.array([4.0, 6.0])
    np.testing.assert_allclose(fit.predict(far_n, far_p), coefficients("rabenseifner", far_n, far_p) @ TRUE,
                               rtol=1e-6)


def test_scatter_at_small_sizes_does_not_veto_the_larger_sizes_regime():
    """Latency-bound points scattered +-30% (ranks time-sharing cores: no constants explain it) and a per-byte
    cost 1.5x higher from 64 KiB up: the fit still splits there, and predicts the large sizes within 1e-6."""
    large = TRUE * np.array([1, 1, 1.5, 1.5, 1.5])
    n, p, small_t = times("ring", TRUE, [2, 3])
    _, _, large_t = times("ring", large, [2, 3])
    scatter = np.random.default_rng(0).uniform(0.7, 1.3, n.size)
    t = np.where(n >= 64 << 10, large_t, small_t * scatter)
    fit = fit_one("mpich", "ring", "ring", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t}), "intra")
    assert fit.regimes[-1].from_bytes == 64 << 10
    big = n >= 64 << 10
    np.testing.assert_allclose(fit.predict(n[big], p[big]), large_t[big], rtol=1e-6)


def test_one_rank_count_leaves_the_overhead_to_alpha():
    """At one rank count o and alpha are inseparable: the fit is the classical model, o = 0."""
    n, p, t = times("ring", TRUE, [2])
    fit = fit_one("mpich", "ring", "ring", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t}), "intra")
    (r,) = fit.regimes
    assert r.overhead_us == 0.0 and r.alpha_us == pytest.approx((TRUE[0] + 2 * TRUE[1]) / 2, rel=1e-6)


def test_three_regimes_protocol_and_cache():
    """Latency quadruples from 4 KiB (rendezvous) and per-byte costs triple from 256 KiB: two splits."""
    consts = [TRUE, TRUE * np.array([4, 4, 1, 1, 1]), TRUE * np.array([4, 4, 3, 3, 3])]
    n, p, _ = times("rabenseifner", TRUE, [2, 3, 4])
    regime = (n >= 4096).astype(int) + (n >= 256 << 10)
    t = np.array([coefficients("rabenseifner", [a], [b])[0] @ consts[r] for a, b, r in zip(n, p, regime)])
    fit = fit_one("mpich", "x", "rabenseifner", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t}), "intra")
    assert [r.from_bytes for r in fit.regimes] == [0, 4096, 256 << 10] and fit.max_rel_err < 1e-6
    assert len(fit.rows()) == 3 and fit.rows()[2]["regime"] == 2


def test_poorly_determined_fits_are_rejected_with_the_reason():
    n, p, t = times("ring", TRUE, [2, 4], sizes=SIZES[:3])
    few = fit_one("mpich", "ring", "ring", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t}), "intra")
    assert few.status == "rejected: only 3 message sizes (need >= 4)"
    rng = np.random.default_rng(0)
    n, p, t = times("ring", TRUE, [2, 4])
    noise = t * rng.choice([0.05, 20.0], size=t.size)  # half the points 400x the other half
    bad = fit_one("mpich", "ring", "ring", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": noise}), "intra")
    assert bad.status.startswith("rejected: median relative error") and "(> 50%)" in bad.status


def bench_frame(slow_large: str, ranks=(2, 4)):
    """MPICH ring vs recursive doubling from the formulas (RD reduces the whole vector each step: slower
    for large messages); `slow_large` is made 3x slower at the held-out sizes when it is a name."""
    rows = []
    for alg, model in (("ring", "ring"), ("recursive_doubling", "recursive_doubling")):
        n, p, t = times(model, TRUE, list(ranks))
        t = np.where((n >= SIZES[-3]) & (alg == slow_large), 3 * t, t)
        rows += [("mpich", alg, 1, int(r), int(s), float(v)) for s, r, v in zip(n, p, t)]
    return frame(rows)


def test_validation_scores_the_held_out_picks():
    val = validate(bench_frame(slow_large=None), "sizes", cores_per_node=4)
    assert len(val) == 3 * 2 and val.within_10pct.all() and not val.oversubscribed.any()
    assert set(val.size_bytes) == set(SIZES[-3:])
    assert (val[val.size_bytes == SIZES[-1]].predicted_best == "ring").all()
    s = score(val)
    assert s[(s.holdout == "sizes") & (s.library == "all")].score.item() == 1.0


def test_validation_counts_a_wrong_pick():
    """Ring turns 3x slower only at the held-out sizes: the model (fitted below them) picks it, wrongly."""
    val = validate(bench_frame(slow_large="ring"), "sizes", cores_per_node=4)
    wrong = val[val.size_bytes == SIZES[-1]]
    assert (wrong.predicted_best == "ring").all() and not wrong.within_10pct.any()


def test_oversubscribed_points_are_scored_apart():
    val = validate(bench_frame(slow_large=None, ranks=(2, 3, 4)), "ranks", cores_per_node=2)
    assert (val.ranks == 4).all() and val.oversubscribed.all()
    s = score(val).set_index(["holdout", "library"])
    assert s.loc[("ranks", "all"), "points"] == 0 and math.isnan(s.loc[("ranks", "all"), "score"])
    assert s.loc[("ranks", "all"), "oversubscribed_points"] == len(SIZES)


def test_one_count_cannot_predict_another():
    """Fits from one rank (node) count cannot tell o from alpha nor beta from gamma: no hold-out from it."""
    with pytest.raises(ValueError, match=r"needs >= 3 rank counts .* got \[2, 4\]"):
        validate(bench_frame(slow_large=None), "ranks")
    b = cluster_frame()
    with pytest.raises(ValueError, match=r"needs >= 3 node counts .* got \[2, 3\]"):
        validate(b[b.nodes < 4], "nodes")
    # a second link rate with too few node counts leaves the first one's hold-out standing
    slow = cluster_frame(rate="250mbit", nodes=(2,))
    val = validate(pd.concat([b, slow], ignore_index=True), "nodes")
    assert set(val.link_rate) == {"1gbit"} and len(val) == len(validate(b, "nodes"))
    assert "at link rate 250mbit" in val.attrs["skipped"][0]


def test_too_few_sizes_to_hold_out():
    b = bench_frame(slow_large=None)
    with pytest.raises(ValueError, match="needs >= 7 measured sizes, got 6"):
        validate(b[b.size_bytes <= SIZES[5]], "sizes")


def test_unknown_holdout():
    with pytest.raises(ValueError, match="unknown hold-out 'cores'"):
        costmodel.validate(bench_frame(slow_large=None), "cores")


# ------------------------------------------------------------------ across nodes, against the link's known rate

def cluster_frame(rate="1gbit", nodes=(2, 3, 4), rounds=5, slow=None, seed=0):
    """Rows as the emulated cluster writes them (1 rank per node, per-round times with 2% noise): MPICH ring and
    recursive doubling on links whose beta is 8/rate, with a host per-byte cost of 0.5 ns; `slow` (a name) is 3x
    slower on the most nodes."""
    rng = np.random.default_rng(seed)
    beta = costmodel.wire_beta_us(rate) + 5e-4
    consts = np.array([20.0, 30.0, beta, 2e-4, 2 * beta])
    rows = []
    for alg in ("ring", "recursive_doubling"):
        n, p, t = times(alg, consts, list(nodes))
        t = np.where((p == max(nodes)) & (alg == slow), 3 * t, t)
        for r in range(rounds):
            for s, q, v in zip(n, p, t * rng.normal(1, 0.02, t.size)):
                rows.append({"library": "mpich", "algorithm": alg, "nodes": int(q), "ranks": int(q),
                             "size_bytes": int(s), "avg_us": float(v), "round": r, "link_rate": rate})
    return pd.DataFrame(rows)


def test_ring_beta_folds_gamma_and_matches_the_link_rate():
    """Ring's b = 2c at every p: gamma is folded into beta, which is 8/rate plus the host's share."""
    b = pd.concat([cluster_frame("1gbit"), cluster_frame("250mbit", seed=1)])
    fits = costmodel.fit_all(b)
    ring = {f.link_rate: f for f in fits if f.algorithm == "ring"}
    assert ring["1gbit"].gamma_folded and ring["1gbit"].node_class == "inter"
    assert next(f for f in fits if f.algorithm == "recursive_doubling").gamma_folded  # b = c: lg p whole vectors
    gt = costmodel.ground_truth(fits)
    assert list(gt.algorithm) == ["ring", "ring"] and gt.within_15pct.all()
    # 8 ns/B + 0.5 ns/B host + gamma/2: 1.07x the wire at 1 Gbit/s, 1.02x at 250 Mbit/s (noise 2%)
    got = dict(zip(gt.link_rate, gt.fitted_over_wire))
    assert got["1gbit"] == pytest.approx(1 + (5e-4 + 1e-4) / 8e-3, rel=0.03)
    assert got["250mbit"] == pytest.approx(1 + (5e-4 + 1e-4) / 32e-3, rel=0.03)
    sc = costmodel.rate_scaling(gt)
    assert sc.rate_ratio.item() == pytest.approx(4.0) and sc.within_15pct.item()


def test_ground_truth_rows_leave_out_the_burst_and_the_fold():
    """Sizes below tbf's burst ride at the veth's speed; Rabenseifner at 3 nodes folds (not bandwidth-optimal)."""
    from ardlab.cluster.network import BURST_BYTES

    b = cluster_frame()
    b = pd.concat([b, b[b.algorithm == "ring"].assign(algorithm="reduce_scatter_allgather")])
    kept = costmodel.ground_truth_rows(b)
    assert kept.size_bytes.min() >= BURST_BYTES and set(kept.nodes) == {2, 3, 4}
    assert set(kept[kept.algorithm == "reduce_scatter_allgather"].nodes) == {2, 4}
    fits = costmodel.fit_all(kept, min_sizes=costmodel.GROUND_TRUTH_MIN_SIZES)
    gt = costmodel.ground_truth(fits)
    assert set(gt.algorithm) == {"ring", "reduce_scatter_allgather"} and (gt.from_bytes == BURST_BYTES).all()


def test_node_count_hold_out_with_paired_intervals():
    """Fit on 2-3 nodes, predict 4: ring wins large sizes, RD small ones, every pick decided; making ring 3x slower
    on 4 nodes only turns its large-size picks into decided misses."""
    val = validate(cluster_frame(), "nodes")
    assert set(val.nodes) == {4} and val.within_10pct.all() and val.decided.all()
    assert (val[val.size_bytes == SIZES[-1]].predicted_best == "ring").all()
    assert val[val.size_bytes == SIZES[-1]].link_bound.all() and not val[val.size_bytes == 4].link_bound.any()
    s = score(val).set_index(["holdout", "library"])
    assert s.loc[("nodes", "all"), "decided_score"] == 1.0
    miss = validate(cluster_frame(slow="ring"), "nodes")
    large = miss[miss.size_bytes == SIZES[-1]].iloc[0]
    assert large.predicted_best == "ring" and not large.within_10pct and large.decided
    assert large.pick_over_best_lo > 1.1


def test_too_few_rounds_leave_points_undecided():
    val = validate(cluster_frame(rounds=3, slow="ring"), "nodes")
    missed = val[val.predicted_best != val.measured_best]
    assert len(missed) and not missed.decided.any() and missed.pick_over_best_lo.isna().all()


def test_predict_for_another_network(tmp_path):
    """Moved to 100 Gbit/s and 1 us, the fits keep o and the host's per-byte cost; a fit file predicts the same."""
    b = cluster_frame()
    fits = costmodel.fit_all(b)
    net = costmodel.Network("100gbit", costmodel.parse_latency("1us"))
    ring = next(f for f in fits if f.algorithm == "ring")
    moved = ring.on(net)
    for r, m in zip(ring.regimes, moved.regimes):
        assert m.alpha_us == 1.0 and m.overhead_us == r.overhead_us
        assert m.beta_us_per_byte == pytest.approx(8e-5 + r.beta_us_per_byte - 8e-3)
    pred = costmodel.predict(fits, b, [1024], [4, 1 << 30], net)
    assert set(pred.link_rate) == {"100gbit"} and list(pred.predicted_best) == ["recursive_doubling", "ring"]
    pd.DataFrame([row for f in fits for row in f.rows()]).to_csv(tmp_path / "fits.csv", index=False)
    again = costmodel.predict(costmodel.read_fits(tmp_path / "fits.csv"), None, [1024], [4, 1 << 30], net)
    np.testing.assert_allclose(again.predicted_us, pred.predicted_us, rtol=1e-9)


def test_a_network_needs_fits_across_nodes():
    fits = costmodel.fit_all(bench_frame(slow_large=None))
    with pytest.raises(ValueError, match="needs fits across nodes"):
        costmodel.predict(fits, None, [64], [4], costmodel.Network("10gbit", 1.0))


@pytest.mark.parametrize("text, us", [("1us", 1.0), ("0.05ms", 50.0), ("2e-6s", 2.0), ("500ns", 0.5)])
def test_latency_notation(text, us):
    assert costmodel.parse_latency(text) == pytest.approx(us)


@pytest.mark.parametrize("text", ["1", "fast", "-1us", "1 parsec"])
def test_bad_latency_is_named(text):
    with pytest.raises(ValueError, match=f"latency {text!r} is not a time"):
        costmodel.parse_latency(text)


def test_no_hold_out_leaves_no_earlier_points(tmp_path):
    """A run with a node-count hold-out writes its points; the same folder made again from rows with too few node
    counts (2 and 3) has an empty score and no points table left from before."""
    from ardlab.analysis import costmodel_report
    from conftest import ROOT

    runs = ROOT / "results" / "runs"
    tables = tmp_path / "tables"
    three = sorted((runs / "costmodel-250mbit-nodes" / "raw" / "microbench").glob("n*-r*/round0.csv"))
    costmodel_report.run(three, tmp_path, tmp_path / "figures", [16], [1 << 20], cores_per_node=2)
    assert (tables / "costmodel_validation_points.csv").is_file()
    two = [f for f in three if not f.parent.name.startswith("n4")]
    costmodel_report.run(two, tmp_path, tmp_path / "figures", [16], [1 << 20], cores_per_node=2)
    assert pd.read_csv(tables / "costmodel_validation.csv").empty
    assert not (tables / "costmodel_validation_points.csv").exists()
    assert not (tables / "costmodel_validation_points.md").exists()
