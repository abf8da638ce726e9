"""The in-training Allreduce timer (ardlab.comm.calltimer, callsizes.c): on every library, against a known delay (the
independent reference: one rank sleeps before each call, so the other waits that long inside it), blocking and
non-blocking, and in real training rows of both frameworks beside the framework's own timing."""

import csv
import json

import pytest

from ardlab.comm import calltimer
from ardlab.results import STEP_COLUMNS
from conftest import ardlab, mpirun

DELAY_S = 0.25  # rank 1 sleeps this long before each call: rank 0 waits about as long inside it
CALLS = 3

# Rank 1 arrives late at each call; rank 0 reads its timer around each kind of call. MAX is not a gradient sum and is
# not timed; a non-blocking sum is timed in its posting and in the Wait/Waitall that complete it.
PROGRAM = f"""
import json, sys, time
from ardlab.bench import callsizes
callsizes.load_if_asked(training=True)
import numpy as np
from mpi4py import MPI
from ardlab.comm import calltimer
c = MPI.COMM_WORLD
x = np.ones(1000, np.float32); y = np.empty_like(x); z = np.empty_like(x)  # buffers outlive their requests
def late():
    if c.rank == 1:
        time.sleep({DELAY_S})
out = {{}}
for name, call in [("sum", lambda: c.Allreduce(x, y)),
                   ("max", lambda: c.Allreduce(x, y, op=MPI.MAX)),
                   ("wait", lambda: c.Iallreduce(x, y).Wait()),
                   ("waitall", lambda: MPI.Request.Waitall([c.Iallreduce(x, y), c.Iallreduce(x, z)]))]:
    c.Barrier()
    r0 = calltimer.read()
    for _ in range({CALLS}):
        late()
        call()
    d = calltimer.read() - r0
    out[name] = [d.seconds, d.calls]
with open(f"{{sys.argv[1]}}/{{c.rank}}.json", "w") as f:  # a file a rank: a launcher may mix the ranks' output lines
    json.dump(out, f)
"""


def test_the_timer_counts_the_wait_inside_summing_calls(library, tmp_path):
    mpirun(library, 2, ["-c", PROGRAM, tmp_path])
    waited, early = (json.loads((tmp_path / f"{rank}.json").read_text()) for rank in (0, 1))
    for name, calls in (("sum", CALLS), ("wait", CALLS), ("waitall", 2 * CALLS)):
        seconds, counted = waited[name]
        assert counted == calls, (name, waited)
        # rank 0 waits for rank 1's sleep inside each call (less the time rank 1's previous call took to return)
        assert CALLS * DELAY_S * 0.8 <= seconds <= CALLS * DELAY_S + 0.5, (name, waited)
        assert early[name][0] < 0.5 * CALLS * DELAY_S, (name, early)  # rank 1 arrives last: it hardly waits
    assert waited["max"] == [0.0, 0], waited  # not a gradient sum: neither timed nor counted


def test_unloaded_means_untimed():
    """This test process never loaded the interposer: nothing to read, and the row's columns stay empty."""
    assert not calltimer.loaded() and calltimer.read() is None
    fields = calltimer.step_fields(0.5, None, lambda mine: [mine, mine])
    assert fields == {"step_s": "0.500000", "allreduce_in_step_s": "", "allreduce_calls_per_step": ""}
    assert list(fields) == STEP_COLUMNS


def test_the_mean_over_ranks_and_steps():
    spent = [calltimer.Reading(0.1, 4), calltimer.Reading(0.3, 4)]
    other = (0.4, 6.0)  # another rank's mean step
    fields = calltimer.step_fields(1.0, spent, lambda mine: [mine, other])
    assert fields["allreduce_in_step_s"] == "0.300000" and fields["allreduce_calls_per_step"] == "5"


@pytest.mark.parametrize("mode", ["blocking", "nonblocking"])
def test_nn_training_rows_carry_the_allreduce_part_of_the_step(mode, tmp_path):
    """ardlab.nn times its own Allreduce calls in Python (the row's allreduce_s and wait_s, the first step
    included): the interposer's time, inside those calls, cannot exceed theirs; a blocking step makes one call per
    parameter array (lenet5: 5 layers x weights and bias)."""
    out = tmp_path / "row.csv"
    ardlab("train", "--library", "mpich", "--ranks", 2, "--model", "lenet5", "--steps", 6, "--batch-per-rank", 16,
           "--parallel-mode", mode, "--output", out, "--no-progress")
    row = next(csv.DictReader(out.open()))
    step, inside = float(row["step_s"]), float(row["allreduce_in_step_s"])
    framework_s = (float(row["allreduce_s"]) + float(row["wait_s"])) / int(row["steps"])
    assert 0 < inside < step, row
    assert inside <= framework_s * 1.5 + 1e-3, row  # the framework's per-step time holds the first step too
    assert float(row["allreduce_calls_per_step"]) == 10, row


def test_own_algorithms_are_not_timed_by_the_interposer(tmp_path):
    """Our own algorithms run on point-to-point calls: no MPI_Allreduce to time, so the columns are empty, not 0."""
    out = tmp_path / "row.csv"
    ardlab("train", "--library", "mpich", "--ranks", 2, "--model", "lenet5", "--steps", 3, "--batch-per-rank", 16,
           "--algorithm", "own_ring", "--output", out, "--no-progress")
    row = next(csv.DictReader(out.open()))
    assert float(row["step_s"]) > 0 and row["allreduce_in_step_s"] == row["allreduce_calls_per_step"] == "", row
