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
TRUE = np.array([3.0, 1.5, 2e-4, 5e-5])  # o (us), alpha (us), beta and gamma (us per byte)


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
    large = TRUE * np.array([1, 1, 3, 3])
    n, p, small_t = times("ring", TRUE, [2, 4])
    _, _, large_t = times("ring", large, [2, 4])
    t = np.where(n >= 256 << 10, large_t, small_t)
    fit = fit_one("mpich", "ring", "ring", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t}), "intra")
    assert [r.from_bytes for r in fit.regimes] == [0, 256 << 10] and fit.max_rel_err < 1e-6
    want = [coefficients("ring", [16 << 20], [4])[0] @ large, coefficients("ring", [1024], [4])[0] @ TRUE]
    np.testing.assert_allclose(fit.predict([16 << 20, 1024], [4, 4]), want, rtol=1e-6)


def test_one_rank_count_leaves_the_overhead_to_alpha():
    """At one rank count o and alpha are inseparable: the fit is the classical model, o = 0."""
    n, p, t = times("ring", TRUE, [2])
    fit = fit_one("mpich", "ring", "ring", pd.DataFrame({"size_bytes": n, "ranks": p, "avg_us": t}), "intra")
    (r,) = fit.regimes
    assert r.overhead_us == 0.0 and r.alpha_us == pytest.approx((TRUE[0] + 2 * TRUE[1]) / 2, rel=1e-6)


def test_three_regimes_protocol_and_cache():
    """Latency quadruples from 4 KiB (rendezvous) and per-byte costs triple from 256 KiB: two splits."""
    consts = [TRUE, TRUE * np.array([4, 4, 1, 1]), TRUE * np.array([4, 4, 3, 3])]
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
    val = validate(bench_frame(slow_large=None), "ranks", cores_per_node=2)
    assert (val.ranks == 4).all() and val.oversubscribed.all()
    s = score(val).set_index(["holdout", "library"])
    assert s.loc[("ranks", "all"), "points"] == 0 and math.isnan(s.loc[("ranks", "all"), "score"])
    assert s.loc[("ranks", "all"), "oversubscribed_points"] == len(SIZES)


def test_too_few_sizes_to_hold_out():
    b = bench_frame(slow_large=None)
    with pytest.raises(ValueError, match="needs >= 7 measured sizes, got 6"):
        validate(b[b.size_bytes <= SIZES[5]], "sizes")


def test_unknown_holdout():
    with pytest.raises(ValueError, match="unknown hold-out 'cores'"):
        costmodel.validate(bench_frame(slow_large=None), "cores")
