"""Allreduce latency microbenchmark, OSU/IMB method, for native and our own algorithms.

Per message size: warm-up calls, then timed calls each preceded by a barrier; each rank averages its own times, and
the row reports avg/min/max of those per-rank means across ranks. Large sizes run fewer iterations. With
``--validate`` every result is checked (outside the timed region) against the exact sum.

Unless the plan fixes the warm-up, every point also warms up for at least POINT_WARMUP_S, the first point of a launch
for LAUNCH_WARMUP_S (IMB-MPI1 warms up before its first size too): a library's first calls after start-up, and after
its selection changes algorithm between sizes, are slow for hundreds to thousands of calls. Measured with Intel MPI,
2 ranks, 100 warm-up calls then 1000 timed ones: its forced ring at 4 B as a launch's first point averaged 1.2-1.5 us
(90th percentile 3 us; after an idle second first, 7-15 us), against 0.3-0.5 us for later passes and 0.26-0.32 us
after 10000 warm-up calls; its default at 64 B, where its selection changes algorithm, 1.8-2.7 us after 100 warm-up
calls and 0.3-0.5 us after 2000, with the buffers fresh or reused alike.

This module holds the plan (``make_plan`` validates it before any process starts) and the measurement inside
MPI (``measure``). ``ardlab.driver`` starts the launches (one per forced native algorithm, one for all of ours);
inside an existing launch (``srun ... ardlab bench allreduce --in-mpi``) a native algorithm must have been
forced by the launch environment.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import asdict, dataclass

from ardlab.bench.timeloop import TIMERS
from ardlab.comm.libraries import DEFAULT, TUNED, Algorithm, algorithm, algorithms, forced_algorithm, library
from ardlab.plan import PLAN_FIELDS, Comparison, RunPlan, check_options, cli_options, option
from ardlab.results import BENCH_LOSS_COLUMNS, mib_bytes, utc_now

DTYPES = ("float32", "float64", "int32", "int64")


BUDGET_MIB = 256
MAX_ITERATIONS = 1000
MIN_ITERATIONS = 10
# Every point warms up at least POINT_WARMUP_S, a launch's first point LAUNCH_WARMUP_S (module docstring): 2000
# calls at 64 B took ~1 ms, 10000 at 4 B ~4 ms.
POINT_WARMUP_S = 0.01
LAUNCH_WARMUP_S = 0.05


@dataclass
class Plan:
    """What one benchmark invocation measures (validated before any MPI process starts). The fields made with
    ``option`` are the microbenchmark's measurement options, declared here once: the CLI's options
    (``ardlab bench allreduce --budget-mib ...``), the workflow config's keys (its `microbench` section, where
    `schema` is true) and ``make_plan``'s keywords are made from them."""

    library: str
    algorithms: list[str]
    sizes: list[int]
    ranks: int
    nodes: int = 1
    dtype: str = option("float32", "the element type of the summed buffers", choices=lambda: DTYPES, schema=True)
    iterations: int | None = option(None, "timed calls per size (default: by size, OSU-like)", schema=True,
                                    minimum=1)
    warmup: int | None = option(None, "untimed calls per size (default: a tenth of the timed ones)", schema=True,
                                minimum=0)
    validate: bool = option(False, "check every result against the exact sum", schema=True)
    skip_inapplicable: bool = option(False, "skip sizes an algorithm cannot run instead of failing (as --sweep "
                                            "does)")
    tuned: str | None = None  # a tuned selection file (algorithm label "tuned")
    budget_mib: float = option(BUDGET_MIB, "without iterations: timed calls per size reduce about this many MiB "
                                           "(at least 10 calls)", schema=True, exclusiveMinimum=0)
    max_iterations: int = option(MAX_ITERATIONS, "without iterations: the most timed calls per size", schema=True,
                                 minimum=1)
    timer: str = option("c", "the loop that times native algorithms: c (compiled, a barrier before each timed call "
                             "as OSU), c-loop (compiled, the calls back to back after one barrier as IMB-MPI1) or "
                             "python; our own algorithms are always timed in Python (rows: column timer)",
                        choices=lambda: TIMERS, schema=True)


# The measurement options (``Plan``'s option fields), by name.
OPTIONS = {f.name: f for f in cli_options(Plan)}


def iterations_for(size_bytes: int, fixed: int | None = None, *, budget_mib: float = BUDGET_MIB,
                   max_iterations: int = MAX_ITERATIONS) -> int:
    """OSU-like budget: as many calls as reduce `budget_mib` MiB, between 10 and `max_iterations` (1000: small
    messages); a fixed count wins."""
    if fixed is not None:
        return fixed
    return max(min(MIN_ITERATIONS, max_iterations), min(max_iterations, mib_bytes(budget_mib) // size_bytes))


def warmup_for(iterations: int, fixed: int | None = None) -> int:
    return fixed if fixed is not None else max(2, iterations // 10)


_TUNED = Algorithm(TUNED, "native", "the library's own per-size selection, read from a tuned file")


def _algorithm(library_name: str, name: str) -> Algorithm:
    """A table entry, or the pseudo-algorithm of runs with a tuned selection file."""
    return _TUNED if name == TUNED else algorithm(library_name, name)


def why_inapplicable(alg: Algorithm, *, ranks: int, nodes: int, count: int) -> str | None:
    """Why `alg` cannot run at this size (None where it can; ops here are SUM: commutative)."""
    try:
        alg.check(ranks=ranks, nodes=nodes, count=count, commutative=True)
    except ValueError as e:
        return str(e)
    return None


def make_plan(library_name: str, *, algorithm_names: list[str] | None, sweep: bool, sizes: list[int], ranks: int,
              nodes: int = 1, own: bool = True, tuned: str | None = None, **options) -> Plan:
    """Check every choice against the table and raise ValueError naming a bad value and the valid ones; `options`:
    the measurement options (``OPTIONS``), the others at their defaults."""
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"unknown microbenchmark options {unknown}; valid: {', '.join(OPTIONS)}")
    o = {name: options.get(name, f.default) for name, f in OPTIONS.items()}
    lib = library(library_name)
    if ranks < 1:
        raise ValueError(f"ranks must be >= 1, got {ranks}")
    check_options(Plan, o)  # choices and bounds, from the fields' declarations
    import numpy as np

    itemsize = np.dtype(o["dtype"]).itemsize
    bad = [s for s in sizes if s % itemsize]
    if bad:
        raise ValueError(f"message sizes {bad} are not multiples of the {o['dtype']} element size ({itemsize} B)")
    if tuned is not None:
        if sweep or algorithm_names:
            raise ValueError("a tuned selection file replaces --algorithm/--sweep; give one or the other")
        # the file is read when the run starts (ardlab.driver): in a workflow an earlier job makes it
        return Plan(library_name, [TUNED], sizes, ranks, nodes, tuned=str(tuned), **{**o, "skip_inapplicable": False})
    if sweep:
        names = [n for n, a in algorithms(library_name, own=own).items()
                 if not (a.multi_node_only and nodes < 2)]
    else:
        names = algorithm_names or [DEFAULT]
        for n in names:
            if n == TUNED:  # inside a launch whose environment carries the tuned selection (checked there)
                continue
            alg = algorithm(library_name, n)  # raises on unknown names, listing the valid ones
            if alg.multi_node_only and nodes < 2:
                raise ValueError(f"{lib.display} algorithm {n!r} needs several nodes; this run has {nodes}")
            for s in sizes if not o["skip_inapplicable"] else ():
                reason = why_inapplicable(alg, ranks=ranks, nodes=nodes, count=s // itemsize)
                if reason:
                    raise ValueError(f"{reason} (message size {s} B)")
    return Plan(library_name, names, sizes, ranks, nodes, **{**o, "skip_inapplicable": sweep or o["skip_inapplicable"]})


def plan(library_name: str, *, ranks: int, sizes: list[int], algorithms: list[str] | None = None,
         sweep: bool = False, own: bool = True, nodes: int = 1, tuned: str | None = None, **more) -> RunPlan:
    """The validated run plan of a microbenchmark; `more`: measurement options (``OPTIONS``) and the RunPlan's launch
    fields. A plan of one algorithm carries it in its algorithm field too (a variant of a comparison)."""
    options = {k: more.pop(k) for k in list(more) if k in OPTIONS}
    p = make_plan(library_name, algorithm_names=algorithms, sweep=sweep, sizes=sizes, ranks=ranks, nodes=nodes,
                  own=own, tuned=tuned, **options)
    options = {k: v for k, v in asdict(p).items() if k not in PLAN_FIELDS}
    name = p.algorithms[0] if len(p.algorithms) == 1 else DEFAULT
    return RunPlan("microbench", p.library, p.ranks, algorithm=name, nodes=p.nodes, tuned=p.tuned, options=options,
                   **more)


def on_rank(plan: RunPlan, comm, label: str | None) -> list[dict] | None:
    """The program's launch on this rank (ardlab.programs): every (algorithm, size) of the plan measured on
    COMM_WORLD (`comm` and `label` are a training's: a microbenchmark launch measures the algorithms it forces); its
    rows on rank 0, None elsewhere."""
    from mpi4py import MPI

    if comm is not None or label is not None:
        raise ValueError("the microbenchmark measures on COMM_WORLD the algorithms its launch forces")
    rows = measure(Plan(library=plan.library, ranks=plan.ranks, nodes=plan.nodes, tuned=plan.tuned, **plan.options),
                   progress=plan.progress)
    return rows if MPI.COMM_WORLD.Get_rank() == 0 else None


def comparison(plan: RunPlan, *, rounds: int = 1, seed: int = 0) -> Comparison:
    """A microbenchmark plan as a comparison: one variant (one launch per round) per algorithm, the rows of all
    written to the plan's output."""
    each = [plan.variant(n, output=None) for n in plan.options["algorithms"]]
    return Comparison(f"{plan.library}/n{plan.nodes}-r{plan.ranks}", each, rounds=rounds, seed=seed,
                      output=plan.output, progress=plan.progress)


# ----------------------------------------------------------------------------------------------- inner


TRAFFIC_CALLS = 2  # untimed calls whose interface bytes are counted, after the timed ones


def _traffic(comm, call, x, y, leader: bool, nodes: int) -> list[float] | None:
    """On rank 0, the bytes each node sent on its interface per call, over TRAFFIC_CALLS untimed calls between two
    barriers (None on one node, where nothing crosses a network, or where a node lacks the interface)."""
    from ardlab.comm.traffic import tx_bytes

    if nodes < 2:
        return None
    comm.Barrier()
    before = tx_bytes() if leader else None
    for _ in range(TRAFFIC_CALLS):
        call(x, y)
    comm.Barrier()
    after = tx_bytes() if leader else None
    mine = (after - before) / TRAFFIC_CALLS if leader and before is not None else None
    counts = comm.gather((leader, mine), root=0)
    if comm.Get_rank() != 0:
        return None
    sent = [value for is_leader, value in counts if is_leader]
    return None if any(v is None for v in sent) else sent


def _warm_up(comm, batch, seconds: float) -> None:
    """Run `batch` (untimed calls, the same number on every rank) at least once and until `seconds` have passed on
    rank 0; the ranks decide together, so every rank runs as many batches."""
    from mpi4py import MPI

    start = MPI.Wtime()
    while True:
        batch()
        if comm.bcast(MPI.Wtime() - start >= seconds, root=0):
            return


def _python_loop(comm, call, x, y, warmup: int, iterations: int, expected, where: str) -> float:
    """The timing loop in Python (our own algorithms; native ones with --timer python): seconds of all timed
    calls, each after a barrier; with `expected`, y is checked after every call, outside the timed region."""
    import numpy as np
    from mpi4py import MPI

    for _ in range(warmup):
        call(x, y)
    total = 0.0
    for _ in range(iterations):
        comm.Barrier()
        t0 = MPI.Wtime()
        call(x, y)
        total += MPI.Wtime() - t0
        if expected is not None and not np.array_equal(y, expected):
            bad = int(np.flatnonzero(y != expected)[0])
            raise RuntimeError(f"validation failed: {where}: element {bad} is {y[bad]!r}, expected {expected[bad]!r}")
    return total


def measure(plan: Plan, *, progress: bool = True) -> list[dict]:
    """Run inside MPI: measure every (algorithm, size) of the plan; rows are returned on rank 0."""
    import numpy as np
    from mpi4py import MPI

    from ardlab.comm import detect
    from ardlab.comm.libraries import knobs_in_force
    from ardlab.comm.traffic import loss_fields, node_leader

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    lib, version = detect(MPI.Get_library_version())
    if lib.name != plan.library:
        raise RuntimeError(f"this process runs {lib.display}, but the plan is for {library(plan.library).display}")
    _check_forced(lib, plan.algorithms)
    hosts = comm.allgather(socket.gethostname())
    nodes = len(set(hosts))
    leader = node_leader(hosts, rank)  # the lowest rank of each node reads its interface and TCP counters
    dtype = np.dtype(plan.dtype)
    knobs, started = knobs_in_force(), utc_now()
    rows = []
    points = [(n, s) for n in plan.algorithms for s in plan.sizes]
    bar = None
    if progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=len(points), desc=f"{lib.name} {size} ranks", unit="size", file=sys.stderr)
    first = True
    for name, nbytes in points:
        alg = _algorithm(lib.name, name)
        if not why_inapplicable(alg, ranks=size, nodes=nodes, count=nbytes // dtype.itemsize):
            iters, timer, stats, sent, lost = _measure_point(comm, plan, lib, alg, nbytes, dtype, leader, nodes,
                                                             launch_warmup=first)
            first = False
            if rank == 0:
                rows.append({
                    "library": lib.name, "library_version": version, "algorithm": name,
                    "implementation": alg.implementation, "ranks": size, "nodes": nodes, "hostname": hosts[0],
                    "dtype": dtype.name, "size_bytes": nbytes, "iterations": iters,
                    "avg_us": f"{sum(stats) / len(stats):.3f}", "min_us": f"{min(stats):.3f}",
                    "max_us": f"{max(stats):.3f}", "knobs": knobs, "started_at": started, "timer": timer,
                    "net_tx_bytes_per_call": f"{sum(sent):.0f}" if sent else "",
                    "net_tx_max_node_bytes_per_call": f"{max(sent):.0f}" if sent else "",
                    **loss_fields(lost, iters, BENCH_LOSS_COLUMNS),
                })
        if bar:
            bar.update()
    if bar:
        bar.close()
    return rows


def _check_forced(lib, names: list[str]) -> None:
    """RuntimeError naming what is missing where this launch does not force what the plan measures."""
    for name in names:
        if name == TUNED and forced_algorithm(lib.name, os.environ) != TUNED:
            raise RuntimeError(f"a tuned run needs the settings {', '.join(lib.tuning_env)} at launch")
        alg = _algorithm(lib.name, name)
        if alg.implementation == "native" and name not in (DEFAULT, TUNED):
            wrong = {k: v for k, v in lib.algorithm_env(name).items() if os.environ.get(k) != v}
            if wrong:
                raise RuntimeError(
                    f"{lib.display} algorithm {name!r} must be forced at launch; missing settings: "
                    + ", ".join(f"{k}={v}" for k, v in wrong.items())
                )


def _measure_point(comm, plan: Plan, lib, alg: Algorithm, nbytes: int, dtype, leader: bool, nodes: int,
                   launch_warmup: bool = False):
    """One (algorithm, size) on every rank: (timed calls, the timer, each rank's mean microseconds on rank 0, the
    bytes each node sent per call or None). Warmed up for at least POINT_WARMUP_S, or LAUNCH_WARMUP_S where it is
    the launch's first point (`launch_warmup`)."""
    import numpy as np
    from mpi4py import MPI

    from ardlab.bench import timeloop
    from ardlab.comm.own import get as get_own
    from ardlab.comm.traffic import LossCounter

    rank, size = comm.Get_rank(), comm.Get_size()
    if alg.implementation == "own":
        own = get_own(alg.name)

        def call(x, y):
            own(comm, x, y, MPI.SUM)
    else:
        def call(x, y):
            comm.Allreduce(x, y, op=MPI.SUM)

    count = nbytes // dtype.itemsize
    x = (np.arange(count) % 7 + rank + 1).astype(dtype)
    y = np.zeros_like(x)
    expected = (np.arange(count) % 7 * size + size * (size + 1) // 2).astype(dtype)
    iters = iterations_for(nbytes, plan.iterations, budget_mib=plan.budget_mib, max_iterations=plan.max_iterations)
    warmup = warmup_for(iters, plan.warmup)
    timer = plan.timer if alg.implementation == "native" else "python"
    where = f"{lib.display} {alg.name} size {nbytes} B rank {rank}"
    compiled = timer in timeloop.COMPILED

    def warm_up_calls():
        if compiled:
            timeloop.time_allreduce(comm, x, y, MPI.SUM, warmup=warmup, iterations=0)
        else:
            _python_loop(comm, call, x, y, warmup, 0, None, where)

    # a warm-up the plan fixed (--warmup) is run as asked; else by time as well (the module's docstring)
    _warm_up(comm, warm_up_calls,
             0.0 if plan.warmup is not None else LAUNCH_WARMUP_S if launch_warmup else POINT_WARMUP_S)
    losses = LossCounter(comm, leader).start() if nodes > 1 else None
    if compiled:
        try:
            total = float(timeloop.time_allreduce(comm, x, y, MPI.SUM, warmup=0, iterations=iters,
                                                  expected=expected if plan.validate else None,
                                                  back_to_back=timer == "c-loop").sum())
        except RuntimeError as e:
            raise RuntimeError(f"{where}: {e}") from None
    else:
        total = _python_loop(comm, call, x, y, 0, iters, expected if plan.validate else None, where)
    lost = losses.stop() if losses else None
    stats = comm.gather(total / iters * 1e6, root=0)
    return iters, timer, stats, _traffic(comm, call, x, y, leader, nodes), lost
