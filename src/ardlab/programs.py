"""The measuring programs, each named once: the microbenchmark and the two trainings, as records.

A program's name is the one the run plan carries (``ardlab.plan.RunPlan.program``), the workflow's kind of its jobs
and the folder its committed rows lie in (``results/runs/<run>/raw/<name>/``). Its record says where its code is and
what the driver, the ranks, the call counter and ``advise`` need to know of it, so none of them branches on its
name. Its module offers the same interface:

- ``plan(library_name, *, ranks, ..., **launch) -> RunPlan``: the one validated builder of its plans, which the CLI,
  the workflow, ``advise`` and the call counter share;
- ``on_rank(plan, comm, label)``: what every rank of a launch runs; rank 0 returns its rows (a training: its one
  summary row), the others None. `comm` is the communicator to train on (None: COMM_WORLD), `label` the algorithm
  its row names (None: the one the launch forces);
- a training's also ``steps_run(options) -> int`` (the steps a plan runs, warm-up included), ``ask_steps(timed) ->
  dict`` (the options asking for `timed` timed steps after one untimed step), ``call_setting(plan) -> str`` (the
  settings that shape its Allreduce calls, as the call counter's rows name them) and ``job_plan(library_name, *,
  ranks, model, timed_steps, batch_per_rank=None, setting=None, **run) -> RunPlan`` (a job's training as ``advise``
  and the call counter run it: synthetic data, the study's defaults).

This module imports none of them until asked: the driver reads a record without loading TensorFlow.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from types import ModuleType


@dataclass(frozen=True)
class Program:
    name: str  # the plan's program, the workflow's kind, the raw folder: one name
    command: str  # its command line: ardlab <command>
    module: str  # where plan(), on_rank() (and a training's steps_run(), ask_steps(), call_setting()) are
    rows: str  # the columns its rows have: "bench" (ardlab.results.BENCH_COLUMNS) or "train" (TRAIN_COLUMNS)
    framework: str = ""  # a training's rows' framework column (and advise --framework); "" for the microbenchmark
    env: dict = field(default_factory=dict)  # settings every launch of it gets (the plan's own env wins)
    shown: tuple = ()  # what rank 0 prints of a training row
    # Where a variant's algorithm also travels in the plan's options, as the one-element list the program reads there
    # (the microbenchmark measures a list of algorithms; a launch of the comparison measures one). None: the plan's
    # algorithm field alone.
    algorithms_option: str | None = None

    @property
    def trains(self) -> bool:
        """Whether it is a training (one summary row a variant; the call counter and advise run it)."""
        return self.rows == "train"

    def code(self) -> ModuleType:
        return importlib.import_module(self.module)

    def columns(self) -> list[str]:
        from ardlab import results

        return {"bench": results.BENCH_COLUMNS, "train": results.TRAIN_COLUMNS}[self.rows]


PROGRAMS: dict[str, Program] = {p.name: p for p in (
    # The microbenchmark's buffers as a C benchmark's malloc gets them (IMB-MPI1, OSU): NumPy asks the kernel for
    # transparent huge pages behind arrays of 4 MiB and more (madvise) unless told not to, and with them the reducing
    # algorithms ran at 0.65-0.76x their time without at 16 MiB (results/experiments/vs_imb/vs_imb.md, `c-huge` over
    # `c`). Inside a launch the caller started (--in-mpi) the caller's environment decides; rows record it among their
    # knobs.
    Program("microbench", "bench allreduce", "ardlab.bench.allreduce", "bench",
            env={"NUMPY_MADVISE_HUGEPAGE": "0"}, algorithms_option="algorithms"),
    Program("train", "train", "ardlab.nn.trainer", "train", framework="nn",
            shown=("model", "library", "algorithm", "parallel_mode", "ranks", "img_per_s", "final_loss",
                   "final_accuracy", "final_top5_accuracy")),
    Program("horovod", "train-tf", "ardlab.horovod.train", "train", framework="tensorflow",
            shown=("framework", "model", "library", "algorithm", "ranks", "img_per_s", "img_per_s_ci95",
                   "final_loss")),
)}
FRAMEWORKS = {p.framework: p for p in PROGRAMS.values() if p.trains}  # advise --framework, the call counter's rows


def program(name: str) -> Program:
    """The program named `name`; ValueError listing the valid names."""
    try:
        return PROGRAMS[name]
    except KeyError:
        raise ValueError(f"unknown program {name!r}; valid: {', '.join(PROGRAMS)}") from None


def of_framework(framework: str) -> Program:
    """The training program of `framework` (nn, tensorflow); ValueError listing the valid ones."""
    try:
        return FRAMEWORKS[framework]
    except KeyError:
        raise ValueError(f"unknown framework {framework!r}; valid: {', '.join(FRAMEWORKS)}") from None
