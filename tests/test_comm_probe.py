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


def test_an_intel_mpi_selection_string_cannot_leave_a_size_to_the_librarys_own_choice():
    """Intel MPI's I_MPI_ADJUST_ALLREDUCE: preset 0, and a size its conditions leave out, run its "basic logic"
    (recursive doubling at 2 ranks), not what its default picks from its tuning file (nb_ring at 1 MiB on the
    machines of this project); so a tuned string names an algorithm in every range (Library.default_selection_value
    is empty; ardlab.analysis.tuned.tested_ranges)."""
    from ardlab.comm.probe import probe_ranks

    lib = library("intelmpi")
    assert not lib.default_selection_value
    rd = lib.algorithms["recursive_doubling"].symbol
    for value in ("1:0-64", "1:0-64;0:65-2147483647"):
        ev = probe_ranks("intelmpi", "default", ranks=2, nodes=1, launcher="local", count=1 << 18, calls=3,
                         timeout=120, extra_env={lib.algorithm_var: value})
        assert set(ev.totals()) == {rd}, (value, ev.totals())
    default = probe_ranks("intelmpi", "default", ranks=2, nodes=1, launcher="local", count=1 << 18, calls=3,
                          timeout=120)
    print("Intel MPI's default at 2 ranks, 1 MiB:", dict(default.totals()))


def test_an_open_mpi_rules_file_leaves_a_range_to_the_librarys_own_choice(tmp_path):
    """Open MPI's dynamic rules: a range whose algorithm is 0 (Library.default_selection_value) runs coll/tuned's
    fixed decision, the function the default runs there; the range before it runs what it names."""
    from ardlab.analysis import tuned
    from ardlab.comm.probe import probe_ranks

    lib = library("openmpi")
    ranges = [tuned.Range(0, 64, "recursive_doubling"), tuned.Range(65, tuned.MAX_BYTES, "default")]
    path = tuned.write("openmpi", ranges, 2, tmp_path / "openmpi-r2.rules")
    assert "\n65 0 0 0\n" in path.read_text()

    def ran(count, extra_env=None):
        return set(probe_ranks("openmpi", "default", ranks=2, nodes=1, launcher="local", count=count, calls=3,
                               timeout=120, extra_env=extra_env).totals())

    assert ran(1 << 18, lib.tuned_env(path)) == ran(1 << 18)
    assert ran(4, lib.tuned_env(path)) == {lib.algorithms["recursive_doubling"].symbol}


def test_phase_marks_merged_by_the_launcher_still_count():
    """srun may forward one rank's mark right after another's text, the newline after both (CI's output, 4 ranks):
    the phase still starts once all four marked it."""
    from ardlab.comm.probe import PHASE, parse_switched

    names = ["default", "ring", "default"]
    fallback = ("User set collective algorithm is not usable for the provided arguments\n"
                "Allreduce ring cannot be applied.\n")
    stderr = "".join([f"{PHASE} 0 default switching{PHASE} 0 default switching\n\n",
                      *[f"{PHASE} 0 default switching\n"] * 2, f"{PHASE} 0 default{PHASE} 0 default\n\n",
                      *[f"{PHASE} 0 default\n"] * 2, *[f"{PHASE} 1 ring switching\n"] * 4, *[f"{PHASE} 1 ring\n"] * 4,
                      fallback * 3, *[f"{PHASE} 2 default switching\n"] * 4, f"{PHASE} 2 default\n",
                      f"{PHASE} 2 default{PHASE} 2 default\n", f"{PHASE} 2 default\n"])
    assert parse_switched("mpich", names, 4, "", stderr) == [{}, {"fallback:ring": 3}, {}]
