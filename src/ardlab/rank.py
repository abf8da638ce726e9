"""The rank entry point: what every process started by a driver runs.

    python -m ardlab.rank --plan FILE      (ardlab.driver writes FILE; see ardlab.plan)

It reads the plan, checks that this process runs the plan's library, runs the plan's program (``ardlab.programs``:
the microbenchmark, ardlab.nn training, TensorFlow + Horovod training) and, on rank 0, writes the result atomically
and prints it.
``ardlab ... --in-mpi`` (started by the user's own launcher) builds the same plan in-process and calls
``execute``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ardlab.comm.transport import Transport, given
from ardlab.plan import RunPlan
from ardlab.programs import program
from ardlab.results import TRAIN_LOSS_COLUMNS, write_csv


def execute(plan: RunPlan) -> list[dict] | None:
    """Run `plan` in this MPI process; rank 0 writes plan.output and returns its rows (None elsewhere)."""
    from ardlab.bench import callsizes
    from ardlab.comm import detect, startup

    prog = program(plan.program)
    # ahead of the MPI library: a training run times its Allreduce calls, and counts them where asked
    callsizes.load_if_asked(training=prog.trains)
    startup.init()
    from mpi4py import MPI

    lib, _ = detect(MPI.Get_library_version())
    if lib.name != plan.library:
        raise RuntimeError(f"the plan is for {plan.library}, but this process runs {lib.display}")
    if plan.threads:
        from ardlab.comm.launch import thread_env

        os.environ.update(thread_env(plan.threads))  # for runtimes that read them when they load
    # what carries the bytes: the driver's probe of this launch, or (--in-mpi) what its launcher's probe handed over
    where = placement(plan.threads or 1) | Transport(**(plan.transport or given())).fields() \
        | {"library_family": lib.family}
    if not prog.trains:
        return _bench(prog, plan, where)
    train = _counted(prog.code().on_rank, int(where["nodes"]))
    if plan.switch:
        rows = _switched(plan, train)
    else:
        rows = [train(plan, None, None)]
        if rows[0] is not None:
            plan.stamp(rows[0])["launch_variants"] = "1"
    if rows[0] is None:  # not rank 0
        return None
    for row in rows:
        row.update(where)
        print(", ".join(f"{k}={row[k]}" for k in prog.shown), flush=True)
    if plan.output:
        write_csv(plan.output, prog.columns(), rows)
    return rows


def _switched(plan: RunPlan, train) -> list:
    """Every algorithm of plan.switch in turn, switched inside this launch (ardlab.comm.switch): one training run
    each, on the communicator the switch returns; its row (rank 0) with its own position, the cvars written in its
    knobs. With ARDLAB_PROBE_PHASES set, each phase is marked for ``ardlab.comm.probe.probe_switched``."""
    from mpi4py import MPI

    from ardlab.comm.probe import PHASE, SWITCHING, mark
    from ardlab.comm.switch import Switch

    marks = bool(os.environ.get("ARDLAB_PROBE_PHASES"))
    rows = []
    with Switch(plan.library) as sw:
        for i, (name, pos) in enumerate(zip(plan.switch, plan.switch_positions)):
            if marks:
                mark(MPI.COMM_WORLD, f"{PHASE} {i} {name} {SWITCHING}")
            comm = sw.to(name)
            if marks:
                mark(MPI.COMM_WORLD, f"{PHASE} {i} {name}")
            row = train(plan, comm, name)
            if row is not None:
                plan.stamp(row).update(position=pos, launch_variants=str(len(plan.switch)))
                row["knobs"] = ";".join(filter(None, [row["knobs"],
                                                      *(f"MPI_T:{k}={v}" for k, v in sw.changed(name).items())]))
            rows.append(row)
    return rows


def _counted(train, nodes: int):
    """`train` with TCP's losses on every node counted around it (ardlab.comm.traffic.LossCounter, on COMM_WORLD,
    whatever communicator the run trains on) and written into its row per step run; nothing counted on one node."""
    import socket

    from mpi4py import MPI

    from ardlab.comm.traffic import LossCounter, loss_fields, node_leader

    world = MPI.COMM_WORLD
    leader = node_leader(world.allgather(socket.gethostname()), world.Get_rank())

    def counted(plan: RunPlan, comm, label: str | None) -> dict | None:
        losses = LossCounter(world, leader).start() if nodes > 1 else None
        row = train(plan, comm, label)
        lost = losses.stop() if losses else None
        if row is not None:
            row.update(loss_fields(lost, int(row["steps"]), TRAIN_LOSS_COLUMNS))
        return row

    return counted


def placement(threads: int) -> dict:
    """Where this job's ranks run (collective): its nodes (distinct processor names), the threads per core of
    the busiest machine (its ranks' threads over the cores their affinity masks allow, together: a launch confined
    to fewer cores than the machine has is time-shared on those; machines told apart by /etc/machine-id: the
    emulated cluster's nodes share one), the emulated cluster's link rate and queue, the tuning file the MPI library
    loaded and its thread level (ardlab.comm.startup), and the image it ran in (its labels:
    ardlab.images.provenance)."""
    from ardlab.cluster.links import link_queue, link_rate
    from ardlab.comm import startup
    from ardlab.images import provenance

    tuning_file = startup.init()
    from mpi4py import MPI

    try:
        machine = Path("/etc/machine-id").read_text().strip()
    except OSError:
        machine = MPI.Get_processor_name()
    ranks = MPI.COMM_WORLD.allgather((MPI.Get_processor_name(), machine, sorted(os.sched_getaffinity(0)), threads))
    cores: dict[str, set[int]] = {}
    threads_on: dict[str, int] = {}
    for _, m, mask, t in ranks:
        cores.setdefault(m, set()).update(mask)
        threads_on[m] = threads_on.get(m, 0) + t
    load = {m: threads_on[m] / len(cores[m]) for m in cores}
    return {"nodes": len({r[0] for r in ranks}), "threads_per_core": f"{max(load.values()):.2f}",
            "link_rate": link_rate(), "link_queue": link_queue(), "mpi_tuning_file": tuning_file,
            "mpi_thread_level": startup.thread_level(), **provenance.row_fields()}


def _bench(prog, plan: RunPlan, where: dict) -> list[dict] | None:
    """A launch of a program that does not train (the microbenchmark): its rows (rank 0) with their place in the rounds
    and where they ran."""
    rows = prog.code().on_rank(plan, None, None)
    if rows is None:  # not rank 0
        return None
    rows = [plan.stamp(r) | where for r in rows]
    if plan.output:
        write_csv(plan.output, prog.columns(), rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ardlab.rank", description=__doc__.splitlines()[0])
    p.add_argument("--plan", required=True, help="the run plan (JSON) written by the driver")
    args = p.parse_args(argv)
    try:
        execute(RunPlan.load(args.plan))
    except (ValueError, FileNotFoundError, RuntimeError, FloatingPointError) as e:
        print(f"ardlab: error: {e}", file=sys.stderr)
        return 2
    finished(args.plan)
    return 0


def finished(plan_file: str) -> None:
    """Once every rank's work is done (its rows written by rank 0): rank 0 leaves the plan's finished mark
    (``ardlab.comm.launch.finished_mark``), which lets the driver stop a launch that then hangs in MPI_Finalize."""
    from mpi4py import MPI

    from ardlab.comm.launch import finished_mark

    if MPI.Is_initialized() and not MPI.Is_finalized():
        MPI.COMM_WORLD.Barrier()
        if MPI.COMM_WORLD.rank == 0:
            finished_mark(Path(plan_file)).touch()


if __name__ == "__main__":
    sys.exit(main())
