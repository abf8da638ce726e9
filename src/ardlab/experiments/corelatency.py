"""The machine's cache-line latency between two CPUs (corelatency.c): built at set-up, measured beside launches.

A shared-memory Allreduce whose ranks spin on shared flags is bound at small sizes by how long a cache line takes to
move between the ranks' CPUs. On a virtual machine that time is the hypervisor's: here it switches between about 100
and about 450-500 ns per round trip in windows of many seconds, while the guest sees the same CPUs 0 and 1, and
MPICH's default Allreduce runs about 3x slower in the slow windows, under IMB as under ardlab (docs/timing.md).
`ardlab.experiments.vs_imb` measures it before and after every launch, so that each launch carries the window it
ran in.

    python -m ardlab.experiments.corelatency build                  # (re)build it (containers/install-env, tools env)
    python -m ardlab.experiments.corelatency measure [--cpus 0,1] [--repeat 20] [--interval 1]
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from pathlib import Path

SOURCE = Path(__file__).with_name("corelatency.c")
LIBRARY_FILE = "libardlab_corelatency.so"
ROUND_TRIPS = 200_000  # about 20-100 ms a measurement here
# A launch's window: "slow" where the round trip before and after it are both at least SLOW_FACTOR x the run's
# fastest, "fast" where both are below, "mixed" where the window changed during the launch.
SLOW_FACTOR = 2.0
WINDOWS = ("fast", "slow", "mixed")
_FUNCTION = "ardlab_core_rtt_ns"
_ERRORS = {-1: "the first CPU", -2: "the second CPU", -3: "a thread"}


def build(prefix: str | Path | None = None) -> Path:
    """Compile corelatency.c into the environment at `prefix` (default: this interpreter's)."""
    from ardlab.bench.timeloop import compile_against

    return compile_against(SOURCE, LIBRARY_FILE, prefix, "the cache-line latency probe", mpi=False)


def round_trip_ns(cpus: tuple[int, int] = (0, 1), round_trips: int = ROUND_TRIPS) -> float:
    """Nanoseconds per round trip of one cache line between the two CPUs (after as many warm-up round trips)."""
    a, b = cpus
    if a == b:
        raise ValueError(f"the probe needs two different CPUs, got {a} twice")
    if round_trips < 1:
        raise ValueError(f"round_trips must be positive, got {round_trips}")
    from ardlab.bench.timeloop import load_built

    probe = load_built(LIBRARY_FILE, _FUNCTION, (ctypes.c_int, ctypes.c_int, ctypes.c_long), ctypes.c_double,
                       "the cache-line latency probe", "ardlab.experiments.corelatency")
    ns = probe(a, b, round_trips)
    if ns < 0:
        raise RuntimeError(f"the probe could not pin {_ERRORS.get(int(ns), 'a thread')} (CPUs {a}, {b}; this "
                           f"process may run on {sorted(os.sched_getaffinity(0))})")
    return ns


def parse_cpus(text: str) -> tuple[int, int]:
    """Two CPU numbers from "A,B"; ValueError naming the text otherwise."""
    try:
        cpus = tuple(int(c) for c in text.split(","))
    except ValueError:
        cpus = ()
    if len(cpus) != 2:
        raise ValueError(f"two CPU numbers like 0,1 are needed, got {text!r}")
    return cpus


def window(before_ns: float, after_ns: float, fastest_ns: float) -> str:
    """The window a launch ran in (WINDOWS) from the round trips measured right before and right after it, against
    the fastest of its run."""
    slow = [ns >= SLOW_FACTOR * fastest_ns for ns in (before_ns, after_ns)]
    return "slow" if all(slow) else "fast" if not any(slow) else "mixed"


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m ardlab.experiments.corelatency", description=__doc__.splitlines()[0])
    p.add_argument("action", choices=["build", "measure"])
    p.add_argument("--prefix", default=None, help="build: the environment (default: this interpreter's)")
    p.add_argument("--cpus", default="0,1", help="measure: the two CPUs (default: 0,1)")
    p.add_argument("--repeat", type=int, default=10, help="measure: how many measurements")
    p.add_argument("--interval", type=float, default=1.0, help="measure: seconds between measurements")
    args = p.parse_args(argv)
    try:
        if args.action == "build":
            print(f"built {build(args.prefix)}")
            return 0
        cpus = parse_cpus(args.cpus)
        for i in range(args.repeat):
            if i:
                time.sleep(args.interval)
            print(f"{time.strftime('%H:%M:%S')} CPUs {cpus[0]}-{cpus[1]}: {round_trip_ns(cpus):.0f} ns per round trip",
                  flush=True)
    except (RuntimeError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
