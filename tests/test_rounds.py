"""The round scheduler: every round holds every variant exactly once, orders differ across rounds, and the seed
(with the group) reproduces them."""

import pytest

from ardlab import rounds

VARIANTS = [f"lib/alg{i}" for i in range(12)]


def test_every_round_holds_every_variant_once():
    for order in rounds.schedule(VARIANTS, rounds=20, seed=1, group="g"):
        assert sorted(order) == sorted(VARIANTS)


def test_orders_differ_across_rounds():
    orders = rounds.schedule(VARIANTS, rounds=20, seed=1, group="g")
    assert len({tuple(o) for o in orders}) == 20
    firsts = {o[0] for o in orders}
    assert len(firsts) > 5, "the same variant keeps running first"


def test_the_seed_reproduces_the_order():
    a = rounds.schedule(VARIANTS, rounds=5, seed=42, group="g")
    assert a == rounds.schedule(VARIANTS, rounds=5, seed=42, group="g")
    assert a != rounds.schedule(VARIANTS, rounds=5, seed=43, group="g")
    assert a != rounds.schedule(VARIANTS, rounds=5, seed=42, group="h")
    # a later round alone (one workflow job) has the order it has within the whole schedule
    assert rounds.schedule(VARIANTS, rounds=1, seed=42, group="g", first=3)[0] == a[3]


def test_bad_schedules_are_named():
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        rounds.schedule(VARIANTS, rounds=0, seed=0, group="g")
    with pytest.raises(ValueError, match="lists a variant twice"):
        rounds.schedule(["a", "a"], rounds=1, seed=0, group="g")
