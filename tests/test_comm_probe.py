"""Proof, from each library's own behaviour, that a forced Allreduce algorithm is the one that runs.

Open MPI and Intel MPI: breakpoints (gdb) on the library's internal algorithm functions count the calls
that reach each one. MPICH (stripped build): with MPIR_CVAR_COLLECTIVE_FALLBACK=print, a forced
commutative-only algorithm reports that it cannot be applied to a non-commutative op, once per call,
while a forced algorithm that does apply, or no forcing at all, stays silent.
"""

import pytest

from ardlab.comm import library
from ardlab.comm.probe import probe

CALLS = 3


@pytest.mark.parametrize("library_name, forced, other, ranks", [
    ("openmpi", "ring", "recursive_doubling", 4),
    ("openmpi", "rabenseifner", "segmented_ring", 4),
    ("openmpi", "basic_linear", "nonoverlapping", 3),
    ("intelmpi", "ring", "recursive_doubling", 4),
    ("intelmpi", "shumilin_ring", "ring_blocking", 4),
    ("intelmpi", "rabenseifner", "nreduce", 4),
])
def test_breakpoint_proof(library_name, forced, other, ranks):
    lib = library(library_name)
    sym, other_sym = lib.algorithms[forced].symbol, lib.algorithms[other].symbol
    hits = probe(library_name, forced, ranks=ranks, calls=CALLS)
    assert hits[sym] >= CALLS * (ranks if library_name == "openmpi" else 1), hits
    assert hits[other_sym] == 0, hits
    hits = probe(library_name, other, ranks=ranks, calls=CALLS)
    assert hits[other_sym] >= CALLS and hits[sym] == 0, hits


@pytest.mark.parametrize("forced", ["ring", "recursive_multiplying", "k_reduce_scatter_allgather"])
def test_mpich_fallback_proof(forced):
    hits = probe("mpich", forced, ranks=3, calls=CALLS, noncommutative=True)
    assert hits[f"fallback:{forced}"] == CALLS, hits


@pytest.mark.parametrize("forced", ["default", "recursive_doubling", "tree"])
def test_mpich_silent_when_the_algorithm_applies(forced):
    assert probe("mpich", forced, ranks=3, calls=CALLS, noncommutative=True) == {}


def test_mpich_count_constraint_reported():
    hits = probe("mpich", "reduce_scatter_allgather", ranks=4, count=1, calls=CALLS)
    assert hits["fallback:reduce_scatter_allgather"] == CALLS, hits
