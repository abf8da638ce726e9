"""Paired, interleaved rounds: the seeded order in which a comparison group's variants run in each round.

A comparison group is the set of variants compared with each other (every library's algorithms at one scale, or
one model's training under every library and algorithm). It is measured in rounds; each round runs every variant
once, in a freshly shuffled order, so that slow drift of the machine's speed falls on all variants alike and no
variant always runs first or last (ReproMPI's lesson: launch-to-launch variation dominates, so each round is
one launch per variant). The order depends only on (seed, group, round): a run can be re-made in the same order.
"""

from __future__ import annotations

import random
from typing import Sequence, TypeVar

T = TypeVar("T")


def order(variants: Sequence[T], *, seed: int, group: str, round_index: int) -> list[T]:
    """The variants in the order of one round (a permutation; the same for the same seed, group and round)."""
    out = list(variants)
    random.Random(f"ardlab/{seed}/{group}/{round_index}").shuffle(out)
    return out


def schedule(variants: Sequence[T], *, rounds: int, seed: int, group: str, first: int = 0) -> list[list[T]]:
    """The order of every round `first` .. `first + rounds - 1`."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if len(set(map(str, variants))) != len(variants):
        raise ValueError(f"comparison group {group!r} lists a variant twice: {list(variants)}")
    return [order(variants, seed=seed, group=group, round_index=r) for r in range(first, first + rounds)]
