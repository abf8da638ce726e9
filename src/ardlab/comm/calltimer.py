"""The time a rank spends inside MPI_Allreduce while it trains: the in-training Allreduce timer.

A training step is the Allreduce plus the rest (compute, the framework, waiting for the slowest rank to arrive); a gap
between two libraries' steps is an Allreduce result only where the Allreduce carries it. The call interposer
(``ardlab/bench/callsizes.c``, loaded into every training rank ahead of its MPI library by ardlab.rank, and by
ardlab advise into one's own program) keeps running totals of the seconds inside summing Allreduce calls (MPI_SUM:
the gradients; blocking calls from entry to return, non-blocking ones their posting and the waits that complete them)
and of their number; this module reads them, so a trainer can take the difference around its timed steps.

Every training row carries the result (``results.STEP_COLUMNS``): the mean timed step, and per step the seconds
inside Allreduce and the calls, both the mean over ranks. Empty where the interposer is not loaded (MPI was loaded
before it: an ``--in-mpi`` run whose own code imported mpi4py first) or where the Allreduce is not MPI's (our own
algorithms, which run on point-to-point calls).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

FUNCTION = "ardlab_allreduce_timer"  # the interposer's reader (callsizes.c)


@dataclass(frozen=True)
class Reading:
    """The interposer's running totals at one moment."""

    seconds: float
    calls: int

    def __sub__(self, other: Reading) -> Reading:
        return Reading(self.seconds - other.seconds, self.calls - other.calls)


def _reader():
    """The interposer's reader function, where this process loaded it (into the global namespace); else None."""
    try:
        fn = getattr(ctypes.CDLL(None), FUNCTION)
    except AttributeError:
        return None
    fn.argtypes = (ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_longlong), ctypes.POINTER(ctypes.c_int))
    fn.restype = None
    return fn


def loaded() -> bool:
    """Whether this process's MPI_Allreduce calls are timed."""
    return _reader() is not None


def read() -> Reading | None:
    """The running totals now; None where the interposer is not loaded. RuntimeError where it lost track of
    non-blocking requests (more in flight at once than it holds), since its totals are then incomplete."""
    fn = _reader()
    if fn is None:
        return None
    seconds, calls, overflow = ctypes.c_double(), ctypes.c_longlong(), ctypes.c_int()
    fn(ctypes.byref(seconds), ctypes.byref(calls), ctypes.byref(overflow))
    if overflow.value:
        raise RuntimeError("the Allreduce timer lost track of non-blocking Allreduce requests (more in flight at once "
                           "than callsizes.c's PENDING holds): its totals are incomplete")
    return Reading(seconds.value, calls.value)


def step_fields(step_s: float, spent: list[Reading] | None, gather) -> dict[str, str]:
    """The row's step columns (``results.STEP_COLUMNS``) from the mean timed step `step_s`, this rank's Allreduce
    time and calls in each timed step (`spent`; None: not timed here) and `gather` (a collective allgather of one
    Python object over the training's ranks: every rank must call this). The Allreduce columns are the mean over
    ranks of the mean per step; empty where any rank was not timed."""
    mine = None if spent is None else (sum(r.seconds for r in spent) / len(spent),
                                       sum(r.calls for r in spent) / len(spent))
    everyone = gather(mine)
    fields = {"step_s": f"{step_s:.6f}", "allreduce_in_step_s": "", "allreduce_calls_per_step": ""}
    if spent and all(v is not None for v in everyone):
        fields["allreduce_in_step_s"] = f"{sum(s for s, _ in everyone) / len(everyone):.6f}"
        fields["allreduce_calls_per_step"] = f"{sum(c for _, c in everyone) / len(everyone):g}"
    return fields
