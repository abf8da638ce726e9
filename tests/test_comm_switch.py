"""Switching the Allreduce algorithm inside one launch (ardlab.comm.switch), proven by the library's own behaviour.

Each phase of a switched launch must run what a launch with that algorithm's settings runs: the same internal
functions (gdb breakpoints, Open MPI) or the same fallback messages (MPICH). Intel MPI cannot switch; the test of
that checks the reason the table gives. Across nodes (Open MPI's coll/han): tests/test_cluster.py.
"""

import json

import pytest

from ardlab.comm import library
from ardlab.comm.probe import probe, probe_switched
from ardlab.comm.switch import Switch
from conftest import mpirun

# A program for one rank: the value each named cvar has at start-up, and what the switch would write for a name.
READ_CVARS = """
import json, sys
from mpi4py import MPI
from ardlab.comm.switch import _Cvar, loaded_libmpi
import ctypes
mpi = loaded_libmpi()
mpi.MPI_T_init_thread(0, ctypes.byref(ctypes.c_int()))
out = {}
for name, text in json.loads(sys.argv[1]).items():
    c = _Cvar(mpi, name)
    out[name] = [c.initial, c.value_of(text)]
print("CVARS", json.dumps(out))
"""


def _cvars_at_launch(lib: str, algorithm: str) -> dict:
    spec = library(lib).switching
    wanted = {k.removeprefix(spec.cvar_prefix): v for k, v in library(lib).algorithms[algorithm].env.items()}
    proc = mpirun(lib, 1, ["-c", READ_CVARS, json.dumps(wanted)], algorithm=algorithm)
    return json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("CVARS"))[6:])


@pytest.mark.parametrize("lib", ["mpich", "openmpi"])
def test_names_become_the_values_a_launch_gets(lib):
    """Every forced algorithm's settings, launched: the cvar reads the value the switch would write for them
    (MPICH's names are read from the order of its description, which only this shows to be right)."""
    for name, alg in library(lib).algorithms.items():
        if alg.env:
            for cvar, (at_launch, switched) in _cvars_at_launch(lib, name).items():
                assert at_launch == switched, (name, cvar)


def test_mpich_switches_at_the_next_call():
    phases = probe_switched("mpich", ["default", "ring", "default", "ring"], noncommutative=True)
    assert phases == [{}, {"fallback:ring": 3}, {}, {"fallback:ring": 3}]


def test_openmpi_switches_with_a_new_communicator():
    names = ["default", "ring", "rabenseifner", "default", "segmented_ring"]
    phases = probe_switched("openmpi", names, count=1 << 18)
    for name, hits in zip(names, phases):
        assert hits == probe("openmpi", name, ranks=2, count=1 << 18), name
    assert phases[1] != phases[2]


@pytest.mark.slow
def test_openmpi_every_algorithm_switched_as_launched():
    names = [n for n in library("openmpi").algorithms] + ["default"]
    phases = probe_switched("openmpi", names, ranks=3, count=1 << 16)
    for name, hits in zip(names, phases):
        assert hits == probe("openmpi", name, ranks=3, count=1 << 16), name


# A rank's program: write Intel MPI's cvar for I_MPI_ADJUST_ALLREDUCE, then Allreduce on COMM_WORLD and on a Dup.
WRITE_IMPI = """
import ctypes, sys
import numpy as np
from mpi4py import MPI
from ardlab.comm.switch import _Cvar, loaded_libmpi
mpi = loaded_libmpi()
mpi.MPI_T_init_thread(0, ctypes.byref(ctypes.c_int()))
c = _Cvar(mpi, "MPIR_CVAR_USE_ALLREDUCE")  # a string
c.write(sys.argv[1])
assert c.read() == sys.argv[1], c.read()
x = np.ones(1 << 20, np.float32); y = np.empty_like(x)  # 4 MiB: the forced algorithm runs (at 16 KiB, 2 ranks: shm)
MPI.COMM_WORLD.Allreduce(x, y)
dup = MPI.COMM_WORLD.Dup()
MPI.COMM_WORLD.Barrier()
dup.Allreduce(x, y)
"""


def test_intelmpi_cannot_switch_and_why(tmp_path):
    """The write (a string, "8") is taken and reads back, but the launch's forced algorithm keeps running on both
    communicators."""
    with pytest.raises(ValueError, match="cannot switch .* Intel MPI builds its selection at MPI_Init"):
        Switch("intelmpi")
    lib = library("intelmpi")
    ring = lib.algorithms["ring"]
    program = tmp_path / "write_impi.py"  # a file: gdb starts the program through a shell, which splits `-c` text
    program.write_text(WRITE_IMPI)
    hits = probe("intelmpi", "recursive_doubling", ranks=2, program=[str(program), ring.env["I_MPI_ADJUST_ALLREDUCE"]])
    assert hits[ring.symbol] == 0 and hits[lib.algorithms["recursive_doubling"].symbol] >= 2, hits


def test_a_launch_that_forces_is_refused():
    with pytest.raises(RuntimeError, match="forces 'ring'"):
        Switch("mpich", environ=library("mpich").algorithm_env("ring"))
    with pytest.raises(RuntimeError, match="OMPI_MCA_coll_tuned_use_dynamic_rules=1"):
        Switch("openmpi", environ={})
