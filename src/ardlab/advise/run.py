"""``ardlab advise``: the question answered for one training job on the allocation it runs on, within a time budget.

1. Learn the job's calls: a few training steps with every MPI_Allreduce counted (``ardlab.bench.callsizes``), the
   sizes and calls a step hands MPI (Horovod's fused buffers included). The job is one of ardlab's models, or the
   user's own Python program (an mpi4py or Horovod script and its arguments, run by each library environment's
   Python), whose calls are counted with the counter preloaded (LD_PRELOAD) and divided by the steps it says it runs
   (per run of the program where it says none).
2. The first answer: each library's default in paired, interleaved training rounds, the cross-library answer one can
   act on within minutes, written at once (stage DEFAULTS).
3. Measure only what matters: the microbenchmark at those sizes, every installed library x applicable algorithm
   (the table's silent fallbacks left out), validated (each call's sum checked), in paired, interleaved rounds;
   after each round, algorithms clearly slower than their library's leader leave the race (``ardlab.advise.race``);
   each library's default always stays (it is what the choice is checked against).
4. Predict each candidate's Allreduce time per step (``ardlab.analysis.picks.predict``: the calls x the measured
   times), pick per library the fastest that the library's own behaviour proves it runs (``ardlab.advise.prove``;
   a silent fallback is reported and the next candidate taken).
5. Write each library's tuned selection file from the raced rows (``ardlab.analysis.tuned.tested_ranges``: per size
   the forced algorithm faster than the default beyond noise in a paired test over the rounds, the library's own
   selection elsewhere; in the library's own format), so the library selects per size as the job's calls need.
6. Check in training: each library's default against its pick and its tuned file, paired and interleaved in new
   rounds (``ardlab.driver``; a user's program timed per step from inside where it says its steps), the measured
   speedup with its interval beside the predicted one; the answer rewritten from these rows (stage COMPLETE).

Racing stops when the rounds asked for are done or when the proofs and the training check would no longer fit the
budget; where the race or the check cannot fit at all, the defaults' answer stands, saying why. What cannot be seen
is said: calls other than sums (Horovod's coordination) are listed but not tuned for.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ardlab.advise.answer import COMPLETE, DEFAULTS
from ardlab.programs import FRAMEWORKS

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$")


def parse_budget(text: str) -> float:
    """Seconds of a budget written as 90s, 30m, 1.5h or a bare number of minutes."""
    m = _DURATION.match(str(text))
    if not m:
        raise ValueError(f"--budget {text!r} is not a duration (e.g. 30m, 90s, 1h)")
    value, unit = float(m.group(1)), (m.group(2) or "m")[0]
    seconds = value * {"s": 1, "m": 60, "h": 3600}[unit]
    if seconds <= 0:
        raise ValueError(f"--budget {text!r} must be positive")
    return seconds


@dataclass
class Job:
    """What is advised for: a model of one of ardlab's frameworks, or a user's program (`command`: a Python script or
    ``-m module`` and its arguments, `steps`: the training steps it runs, if it says), on `ranks` ranks over `nodes`
    nodes."""

    framework: str
    model: str | None
    ranks: int
    nodes: int = 1
    launcher: str = "local"
    batch_per_rank: int = 16
    threads: int = 1
    timeout_s: float = 900
    command: list[str] = field(default_factory=list)
    steps: int | None = None
    # seconds after MPI_Init within which the job's own command must make a summing Allreduce (its first run, whose
    # calls are learned): a job that makes none (an NCCL or gloo one) is refused then, not after a whole run
    first_call_s: float = 60

    @property
    def name(self) -> str:
        return self.model or " ".join(self.command)

    @property
    def unit(self) -> str:
        """What a measured time is of: a training step, or a whole run of the user's program."""
        return "training step" if self.model or self.steps else "run of the program"

    def __post_init__(self):
        if bool(self.model) == bool(self.command):
            raise ValueError("give --model or the job's own command after --, one of them")
        if self.command:
            first = self.command[0]
            if first not in ("-m", "-c") and not Path(first).is_file():
                raise ValueError(f"command: {first!r} is not a file (the command after -- is a Python script, or -m "
                                 "MODULE, and its arguments, run by each library environment's Python)")
            if self.steps is not None and self.steps < 1:
                raise ValueError(f"--steps {self.steps} must be at least 1")
            if self.first_call_s <= 0:
                raise ValueError(f"--first-call-timeout {self.first_call_s:g} must be positive (seconds)")
        if self.framework not in FRAMEWORKS:
            raise ValueError(f"--framework {self.framework!r}: one of {', '.join(FRAMEWORKS)}")
        if self.ranks < 2:
            raise ValueError(f"--ranks {self.ranks}: an Allreduce needs at least 2 ranks")
        if self.nodes > 1 and self.launcher != "srun":
            raise ValueError(f"--nodes {self.nodes} needs --launcher srun (the local launcher runs on one node)")
        if self.ranks % self.nodes:
            raise ValueError(f"--ranks {self.ranks} do not divide over --nodes {self.nodes}")

    def launch_fields(self) -> dict:
        return {"nodes": self.nodes, "launcher": self.launcher, "threads": self.threads, "timeout_s": self.timeout_s,
                "progress": False}

    def command_launch(self, library_name: str, algorithm: str = "default", extra_env: dict | None = None,
                       tuned: str | None = None):
        """(argv, env) that run the user's program on this job's ranks with `algorithm` forced, or the library
        selecting from the `tuned` file."""
        from ardlab.comm import launch
        from ardlab.comm.libraries import library

        if tuned:
            extra_env = {**library(library_name).tuned_env(tuned), **(extra_env or {})}

        if self.launcher == "srun":
            python = str(launch.require_env(library_name) / "bin" / "python")
            extra_env = {**launch.program_env(library_name), **(extra_env or {})}
            return launch.allocation_command(library_name, self.ranks, self.nodes, [python, *self.command],
                                             algorithm=algorithm, extra_env=extra_env)
        return launch.command(library_name, self.ranks, self.command, algorithm=algorithm, extra_env=extra_env)

    def training_plan(self, library_name: str, *, steps: int, algorithm: str = "default", tuned: str | None = None):
        """A training run of this job (ardlab.plan.RunPlan): `steps` timed steps after one warm-up; with `tuned`, the
        library selects from that file."""
        if not self.model:
            raise ValueError("the job is a command: it has no training plan")
        from ardlab.programs import of_framework

        return of_framework(self.framework).code().job_plan(
            library_name, ranks=self.ranks, model=self.model, timed_steps=steps, batch_per_rank=self.batch_per_rank,
            algorithm=algorithm, tuned=tuned, **self.launch_fields())


@dataclass
class Settings:
    libraries: list[str]
    budget_s: float
    rounds: int = 8  # microbenchmark rounds at most (racing may end them earlier)
    check_rounds: int = 5  # paired training rounds of the check (ardlab.stats.MIN_ROUNDS for an interval)
    check_steps: int = 3
    # the microbenchmark's bytes reduced per size and launch (ardlab.bench.allreduce's budget_mib, 256 in the study):
    # less time a launch, more rounds in the budget (pairing cancels the drift between rounds; the calls within a
    # launch add little once there are 10 of them, the least the microbenchmark times). Measured on the emulated
    # cluster at 1 Gbit/s with AlexNet's 8-10 MB fused buffers: 256 MiB made a launch 11-14 s and a round of 32
    # candidates 7.5 min, two rounds in a 30 min budget (no racing).
    bench_mib: float = 32
    seed: int = 0
    progress: bool = True
    output: Path | None = None  # the run folder: the tuned files are written to its tuned/ (none without it)


@dataclass
class Advice:
    """Everything measured and decided (see ardlab.advise.answer for how it is shown and written)."""

    job: Job
    settings: Settings
    calls: object  # pandas: bytes, op, calls_per_step (what one step hands MPI)
    bench: object = None  # pandas: every microbenchmark row
    race: list[dict] = field(default_factory=list)  # per round: who was measured, who left
    predictions: object = None  # pandas: library, algorithm, predicted_us_per_step (median over rounds)
    picks: dict[str, str] = field(default_factory=dict)  # library -> algorithm
    proofs: list[dict] = field(default_factory=list)  # each probe of a pick: library, algorithm, proof, hits
    tuned: dict[str, str] = field(default_factory=dict)  # library -> its tuned selection file from the raced rows
    tuned_log: list[dict] = field(default_factory=list)  # what was left out of the tuned files, and why
    # what each offered tuned file rests on, a record per size range: library, algorithm, lo_bytes, hi_bytes, the
    # algorithm's proof forced alone (forced) and the file's probe in that range (in_file)
    tuned_proofs: list[dict] = field(default_factory=list)
    check: object = None  # pandas: every training row of the check
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> wall seconds
    # the stage the answer is of: DEFAULTS (each library's default in paired training rounds, the first answer) or
    # COMPLETE (the race, the proven picks and tuned files, checked against the defaults in new paired rounds);
    # each stage's answer, when it was written (seconds from the start); why a later stage did not run
    stage: str = ""
    stages: list[dict] = field(default_factory=list)
    stopped: str = ""
    defaults_check: object = None  # pandas: the first stage's training rows, kept once the complete check replaces them



class NoTimeToRace(ValueError):
    """The first microbenchmark round left too little of the budget for the proofs and the training check: what was
    measured so far travels with it (rows, predictions, log), and advise() keeps the defaults' answer."""

    def __init__(self, message: str, rows=None, predictions=None, log=None):
        super().__init__(message)
        self.rows, self.predictions, self.log = rows, predictions, log or []


def check_inputs(job: Job, settings: Settings) -> None:
    """Every reason advice cannot be given, before anything is measured."""
    from ardlab.comm import LIBRARIES
    from ardlab.comm.launch import require_env

    unknown = [lib for lib in settings.libraries if lib not in LIBRARIES]
    if unknown:
        raise ValueError(f"--libraries: unknown {', '.join(map(repr, unknown))}; valid: {', '.join(LIBRARIES)}")
    for lib in settings.libraries:
        require_env(lib)  # names the set-up command
    if job.model:
        job.training_plan(settings.libraries[0], steps=settings.check_steps)  # an unknown model fails here
    if settings.check_rounds < 5:
        raise ValueError(f"--check-rounds {settings.check_rounds}: a speedup needs 5 paired rounds for an interval")
    if settings.rounds < 1:
        raise ValueError(f"--rounds {settings.rounds} must be at least 1")
    if job.launcher == "srun":
        import os

        if not os.environ.get("SLURM_CONF") and not os.environ.get("SLURM_JOB_ID"):
            raise RuntimeError("--launcher srun needs a Slurm cluster: run inside an allocation (salloc), or on the "
                               "emulated one after `ardlab cluster up` and `eval \"$(ardlab cluster env)\"`")
        from ardlab.comm.launch import check_fits

        check_fits(job.ranks, job.nodes)  # ranks and nodes the allocation or the cluster cannot hold


def sizes_of(calls, most: int = 8) -> list[int]:
    """The message sizes to measure: every summed size a step hands MPI when there are at most `most`, else the
    smallest, the largest and the byte-weighted quantiles between (interpolation covers the rest)."""
    import numpy as np

    sums = calls[calls["op"] == "sum"].groupby("bytes", as_index=False)["calls_per_step"].sum()
    if sums.empty:
        raise RuntimeError("the job made no summing MPI_Allreduce: nothing for an Allreduce algorithm to speed up")
    sizes = sorted(int(b) for b in sums["bytes"])
    if len(sizes) <= most:
        return sizes
    weight = (sums["bytes"] * sums["calls_per_step"]).to_numpy()
    cum = np.cumsum(weight) / weight.sum()
    picked = {sizes[0], sizes[-1]}
    for q in np.linspace(0, 1, most)[1:-1]:
        picked.add(int(sums["bytes"].to_numpy()[np.searchsorted(cum, q)]))
    return sorted(picked)


def candidates(library_name: str, job: Job, sizes: list[int]) -> list[str]:
    """The library's default and every native algorithm that applies at some size and does not silently run the
    default on this build (the table's runs_default)."""
    from ardlab.bench.allreduce import why_inapplicable
    from ardlab.comm.libraries import DEFAULT, library

    lib = library(library_name)
    out = [DEFAULT]
    for name, alg in lib.algorithms.items():
        if name == DEFAULT or alg.implementation != "native" or alg.runs_default:
            continue
        if any(why_inapplicable(alg, ranks=job.ranks, nodes=job.nodes, count=max(1, s // 4)) is None for s in sizes):
            out.append(name)
    return out


def learn_calls(job: Job, library_name: str, steps: int = 3):
    """The Allreduce calls of `steps` training steps (one warm-up before), counted on every rank; of a user's program,
    one run of it divided by the steps it runs (``Job.steps``; 1: per run)."""
    import pandas as pd

    from ardlab.callcount import count

    if job.command:
        return _learn_command_calls(job, library_name)
    calls = pd.DataFrame(count(job.training_plan(library_name, steps=steps), capture=True))
    return calls.astype({"bytes": int, "calls": int, "calls_per_step": float})


def _counted(library_name: str, folder: str) -> dict[str, str]:
    """The settings that preload `library_name`'s call counter into the job's own command, its ranks writing their
    counts and timelines to `folder` (a folder in the working one: on a cluster every node writes there, a shared
    file system); FileNotFoundError naming the set-up where the counter is missing."""
    from ardlab.bench import callsizes
    from ardlab.comm import launch

    counter = callsizes.library_path(launch.require_env(library_name))
    if not counter.is_file():
        raise FileNotFoundError(f"the Allreduce call counter {counter} is missing: set up the environment again "
                                "(containers/setup-envs)")
    return {callsizes.ENV: str(Path(folder).resolve()), "LD_PRELOAD": str(counter)}


def _learn_command_calls(job: Job, library_name: str):
    import tempfile

    from ardlab.bench import callsizes
    from ardlab.comm import launch

    with tempfile.TemporaryDirectory(prefix=".ardlab-advise-calls-", dir=".") as folder:
        argv, env = job.command_launch(library_name, extra_env={**_counted(library_name, folder),
                                                                callsizes.FIRST_CALL_ENV: f"{job.first_call_s:g}"})
        proc = launch.execute(argv, env, timeout=job.timeout_s, capture=True)
        if callsizes.NO_ALLREDUCE_MARK in proc.stderr:
            raise ValueError(f"the job's command made no summing MPI_Allreduce within {job.first_call_s:g} s of "
                             f"MPI_Init, under {library_name}: an NCCL or gloo job, or one that averages no gradients "
                             "over MPI, has nothing for an MPI Allreduce algorithm to speed up (a slow start? raise "
                             "--first-call-timeout)")
        if proc.returncode != 0:
            raise RuntimeError(f"the job's command failed in its first run, under {library_name} (exit "
                               f"{proc.returncode}): {' '.join(argv)}\n{(proc.stdout + proc.stderr)[-3000:]}")
        calls = callsizes.read(folder, job.ranks)
    calls = calls.assign(calls_per_step=calls["calls"] / (job.steps or 1), library=library_name, ranks=job.ranks,
                         nodes=job.nodes)
    return calls.astype({"bytes": int, "calls": int, "calls_per_step": float})


def _bench_round(job: Job, alive: dict[str, list[str]], sizes: list[int], r: int, seed: int, bench_mib: float):
    """One round of the microbenchmark: every candidate still racing, one launch each, in a shuffled order."""
    import pandas as pd

    from ardlab.bench.allreduce import plan
    from ardlab.driver import run_comparison
    from ardlab.plan import Comparison

    variants = []
    for lib, names in alive.items():
        base = plan(lib, ranks=job.ranks, sizes=sizes, algorithms=names, own=False, validate=True,
                    skip_inapplicable=True, budget_mib=bench_mib, **job.launch_fields())
        variants += [base.variant(n) for n in names]
    c = Comparison("advise-microbench", variants, rounds=1, first_round=r, seed=seed, progress=False)
    return pd.DataFrame(run_comparison(c))


def predicted(bench, calls):
    """Per round, library and algorithm: the predicted Allreduce microseconds per step (ardlab.analysis.picks)."""
    import pandas as pd

    from ardlab.analysis.picks import predict

    bench = bench.assign(avg_us=bench["avg_us"].astype(float), size_bytes=bench["size_bytes"].astype(int),
                         ranks=bench["ranks"].astype(int), nodes=bench["nodes"].astype(int))
    sums = calls[calls["op"] == "sum"]
    frames = []
    for r, g in bench.groupby("round"):
        p = predict(g, sums)
        frames.append(p.assign(round=int(r))[["round", "library", "algorithm", "predicted_us_per_step"]])
    return pd.concat(frames, ignore_index=True)


# What racing leaves time for after its last round, besides the training check: the proofs, PROBES_RESERVED a
# library (its pick's and its tuned file's), each about PROBE_LAUNCHES microbenchmark launches (gdb on every rank:
# measured 1.7-2.6 s a probe at 2 ranks here against 0.6-1.4 s a microbenchmark launch).
PROBES_RESERVED, PROBE_LAUNCHES = 2, 3


def race(job: Job, settings: Settings, calls, sizes: list[int], deadline: float, check_estimate_s: float,
         tick=lambda: None, clock=time.monotonic):
    """The racing rounds: (every microbenchmark row, per-round predictions, the race's log, the seconds a probe is
    estimated to take). A round starts only where it, the proofs (``PROBES_RESERVED`` a library, each
    ``PROBE_LAUNCHES`` launches of the last round's) and the training check (`check_estimate_s`) fit before
    `deadline` (on `clock`)."""
    import pandas as pd

    from ardlab.advise.race import to_drop
    from ardlab.comm.libraries import DEFAULT

    alive = {lib: candidates(lib, job, sizes) for lib in settings.libraries}
    rows, log, round_s, probe_s = [], [], 0.0, 0.0
    for r in range(settings.rounds):
        reserve = check_estimate_s + len(alive) * PROBES_RESERVED * probe_s
        if r > 0 and clock() + round_s + reserve > deadline:
            log.append({"round": r, "event": f"stopped: the next round ({round_s:.0f} s), the proofs and the training "
                                              f"check ({reserve:.0f} s) would exceed the budget"})
            break
        started = clock()
        measured = sum(len(v) for v in alive.values())
        rows.append(_bench_round(job, alive, sizes, r, settings.seed, settings.bench_mib))
        round_s = clock() - started
        probe_s = PROBE_LAUNCHES * round_s / measured
        pred = predicted(pd.concat(rows, ignore_index=True), calls)
        if r == 0:
            try:
                _refuse_if_short(settings.budget_s, deadline - clock(), round_s,
                                 len(alive) * PROBES_RESERVED * probe_s, check_estimate_s)
            except ValueError as e:
                log.append({"round": r, "measured": measured, "seconds": round(round_s, 1), "dropped": "",
                            "event": f"stopped: {e}"})
                raise NoTimeToRace(str(e), pd.concat(rows, ignore_index=True), pred, log) from None
        left = []
        for lib in list(alive):
            p = pred[pred["library"] == lib].pivot_table(index="round", columns="algorithm",
                                                         values="predicted_us_per_step")
            p = p[[a for a in alive[lib] if a in p.columns]].dropna()
            gone = to_drop({a: p[a].to_numpy() for a in p.columns}, keep=[DEFAULT])
            alive[lib] = [a for a in alive[lib] if a not in gone]
            left += [f"{lib}/{a}" for a in sorted(gone)]
        log.append({"round": r, "measured": measured, "seconds": round(round_s, 1), "dropped": " ".join(left)})
        tick()
    return pd.concat(rows, ignore_index=True), pred, log, probe_s  # pred: of every round so far


def _refuse_if_short(budget_s: float, left_s: float, round_s: float, proofs_s: float, check_s: float) -> None:
    """After the first microbenchmark round: ValueError (before anything is proven or checked: ``race`` raises it as
    NoTimeToRace, and advise() keeps the defaults' answer) when the proofs and the training check no longer fit in
    what the budget has `left_s`, saying what each was measured or estimated to take and the budget that would hold
    them; the answer would otherwise overrun the budget or come without its check."""
    if proofs_s + check_s <= left_s:
        return
    used = budget_s - left_s
    need = (used + proofs_s + check_s) * 1.3 / 60
    raise ValueError(f"--budget {budget_s / 60:.0f}m cannot hold the answer: learning the calls and one microbenchmark "
                     f"round took {used / 60:.1f} min (the round {round_s:.0f} s), and the proofs (about {proofs_s:.0f}"
                     f" s) and the training check (about {check_s:.0f} s) need more than the {max(left_s, 0) / 60:.1f}"
                     f" min left; give at least {need:.0f}m, or fewer libraries (--libraries)")


def ranked(predictions) -> dict[str, list[str]]:
    """Per library, its candidates by median predicted time per step over the rounds, fastest first (the default
    among them: it may be the best)."""
    med = predictions.groupby(["library", "algorithm"], as_index=False)["predicted_us_per_step"].median()
    return {lib: list(g.sort_values("predicted_us_per_step")["algorithm"]) for lib, g in med.groupby("library")}


def write_tuned(job: Job, bench, folder: Path, allowed: dict[str, set[str]] | None = None,
                why_none: dict[str, str] | None = None) -> dict[str, str]:
    """Each library's tuned selection file from the raced rows, in `folder`: per measured size the forced algorithm
    that beat the library's default beyond noise in a paired test over the rounds, the library's own selection
    where none did (``ardlab.analysis.tuned.tested_ranges``); with `allowed`, from those algorithms of each library
    only. A library where no size has such a winner gets none (why, in `why_none` where given)."""
    from ardlab.analysis import tuned
    from ardlab.comm.libraries import DEFAULT

    bench = bench.assign(avg_us=bench["avg_us"].astype(float), size_bytes=bench["size_bytes"].astype(int),
                         ranks=bench["ranks"].astype(int), round=bench["round"].astype(int))
    out = {}
    for lib in sorted(set(bench["library"])):
        rows = bench[bench["library"] == lib]
        if allowed is not None:
            rows = rows[rows["algorithm"].isin(allowed[lib] | {DEFAULT})]
        try:
            ranges = tuned.tested_ranges(rows, lib, job.ranks)
        except ValueError as e:  # only the default raced, or nothing beat it beyond noise: nothing to select
            if why_none is not None:
                why_none[lib] = str(e)
            continue
        out[lib] = str(tuned.write(lib, ranges, job.ranks, tuned.path(folder, lib, job.ranks, job.nodes)))
    return out


def proven_tuned(job: Job, bench, folder: Path, verdicts: dict[tuple[str, str], str],
                 prover: Callable[[str, str, int], str], file_prover: Callable[[str, str, str, int], str],
                 out_of_time: Callable[[], bool] = lambda: False,
                 proofs: list[dict] | None = None) -> tuple[dict[str, str], list[dict]]:
    """Tuned files that hold only what ran what it names at this scale (``ardlab.advise.prove``): each library's
    ranges from its raced rows, less the algorithms the table knows to run another at the job's ranks
    (``runs_instead``) and those whose proof is a silent fallback; every range's winner is proven first (`verdicts`:
    the proofs made so far, (library, algorithm) -> verdict; `prover(library, algorithm, count)` makes the others),
    and a fallback leaves and the ranges are made again. The file itself is then probed once in each range
    (`file_prover(library, file, algorithm the range names, count)`: the verdict with the file in force) and offered
    only where every range runs what it names; where `out_of_time()` says so before a probe, the library's file is
    left out (the budget). Returns (library -> file, the log of what was left out and why); `proofs`, where given,
    gets a record per range of every offered file: its algorithm's proof forced alone and the file's probe there."""
    import pandas as pd

    from ardlab.advise.prove import PICKABLE
    from ardlab.analysis import tuned
    from ardlab.comm.libraries import DEFAULT, library

    sizes = sorted({int(s) for s in bench["size_bytes"]})
    log, out = [], {}
    for lib in sorted(set(bench["library"])):
        table = library(lib).algorithms
        allowed = {a for a in set(bench.loc[bench["library"] == lib, "algorithm"])
                   if a != DEFAULT and job.ranks not in table[a].runs_instead}
        log += [{"library": lib, "algorithm": a, "left_out": f"the table: runs {table[a].runs_instead[job.ranks]} at "
                 f"{job.ranks} ranks"} for a in sorted(set(bench.loc[bench["library"] == lib, "algorithm"]))
                if a != DEFAULT and job.ranks in table[a].runs_instead]
        while True:
            why_none: dict[str, str] = {}
            files = write_tuned(job, bench[bench["library"] == lib], folder, {lib: allowed}, why_none)
            if lib not in files:
                log += [{"library": lib, "algorithm": "tuned", "left_out": why_none[lib]}] if lib in why_none else []
                break
            ranges = [r for r in tuned.read_ranges(files[lib]) if r.algorithm != DEFAULT]  # the others name nothing
            unproven = [r for r in ranges if (lib, r.algorithm) not in verdicts]
            if unproven and out_of_time():
                break
            for r in unproven:
                verdicts[lib, r.algorithm] = prover(lib, r.algorithm, _count_in(r, sizes))
            bad = {r.algorithm for r in ranges if verdicts[lib, r.algorithm] not in PICKABLE}
            if not bad:
                break
            log += [{"library": lib, "algorithm": a, "left_out": f"its proof: {verdicts[lib, a]}"} for a in sorted(bad)]
            allowed -= bad
            _drop(files[lib])
        if lib not in files:
            continue
        if out_of_time():
            log.append({"library": lib, "algorithm": "tuned", "left_out": "the budget: no time left to prove it"})
            _drop(files[lib])
            continue
        named = [r for r in tuned.read_ranges(files[lib]) if r.algorithm != DEFAULT]
        probed = [(r, file_prover(lib, files[lib], r.algorithm, _count_in(r, sizes))) for r in named]
        wrong = [(r, v) for r, v in probed if v not in PICKABLE]
        if wrong:
            log += [{"library": lib, "algorithm": "tuned", "left_out": "the file's probe: " + "; ".join(
                f"{r.lo}-{r.hi} bytes ({r.algorithm}): {v}" for r, v in wrong)}]
            _drop(files[lib])
            continue
        out[lib] = files[lib]
        if proofs is not None:
            proofs += [{"library": lib, "algorithm": r.algorithm, "lo_bytes": r.lo, "hi_bytes": r.hi,
                        "forced": verdicts[lib, r.algorithm], "in_file": v} for r, v in probed]
    return out, pd.DataFrame(log).to_dict("records")


def _drop(selection_file: str) -> None:
    """Remove a tuned file that is not offered, and its ranges table."""
    from ardlab.results import ranges_path

    Path(selection_file).unlink()
    ranges_path(selection_file).unlink(missing_ok=True)


def _count_in(r, sizes: list[int]) -> int:
    """Float32 elements of the largest measured size within range `r` (its own smallest where none is)."""
    inside = [s for s in sizes if r.lo <= s <= r.hi]
    return max(1, (max(inside) if inside else r.lo) // 4)


def check_training(job: Job, settings: Settings, picks: dict[str, str], tuned_files: dict[str, str] | None = None):
    """Each library's default, its pick (where it is not the default) and its tuned file in paired, interleaved
    training rounds: the rows with `unit_s` (seconds a training step, or a run of the user's program, took) and `rate`
    (its inverse); a tuned file's rows name the algorithm "tuned"."""
    import pandas as pd

    from ardlab.comm.libraries import DEFAULT
    from ardlab.driver import run_comparison
    from ardlab.plan import Comparison

    tuned_files = tuned_files or {}
    if job.command:
        return _check_command(job, settings, picks, tuned_files)
    variants = []
    for lib, alg in picks.items():
        variants.append(job.training_plan(lib, steps=settings.check_steps))
        if alg != DEFAULT:
            variants.append(job.training_plan(lib, steps=settings.check_steps, algorithm=alg))
        if lib in tuned_files:
            variants.append(job.training_plan(lib, steps=settings.check_steps, tuned=tuned_files[lib]))
    c = Comparison("advise-check", variants, rounds=settings.check_rounds, seed=settings.seed + 1,
                   progress=settings.progress, switch_in_launch=True)
    rows = pd.DataFrame(run_comparison(c))
    rate = rows["img_per_s"].astype(float)
    return rows.assign(round=rows["round"].astype(int), rate=rate, unit_s=job.batch_per_rank * job.ranks / rate)


def _check_command(job: Job, settings: Settings, picks: dict[str, str], tuned_files: dict[str, str]):
    """The user's program, a launch per variant and round in each round's shuffled order. With the steps it runs
    (``Job.steps``, at least 2) it is timed per step from inside: the call counter, preloaded, keeps each rank's
    timeline of summing Allreduce calls, whose period in its later half is the step (``callsizes.period_of``: past
    start-up and warm-up; `unit_s` and `step_s`, the mean over ranks), with the time inside Allreduce a step beside it
    (`allreduce_in_step_s`) and the rest of the launch (start-up, imports, MPI_Init, warm-up, the end) apart
    (`startup_s`: the launch less `steps` steps). Without steps, a whole run is the unit, start-up included."""
    import tempfile

    import pandas as pd

    from ardlab import rounds
    from ardlab.bench import callsizes
    from ardlab.comm import launch
    from ardlab.comm.libraries import DEFAULT, TUNED

    variants = [(lib, a) for lib, alg in picks.items() for a in dict.fromkeys([DEFAULT, alg])]
    variants += [(lib, TUNED) for lib in picks if lib in tuned_files]
    order = rounds.schedule(list(range(len(variants))), rounds=settings.check_rounds, seed=settings.seed + 1,
                            group="advise-check")
    per_step = (job.steps or 1) >= 2
    rows = []
    for r, indices in enumerate(order):
        for pos, i in enumerate(indices):
            lib, alg = variants[i]
            with tempfile.TemporaryDirectory(prefix=".ardlab-advise-check-", dir=".") as folder:
                timed = _counted(lib, folder) if per_step else {}
                argv, env = (job.command_launch(lib, tuned=tuned_files[lib], extra_env=timed) if alg == TUNED
                             else job.command_launch(lib, alg, extra_env=timed))
                started = time.monotonic()
                proc = launch.execute(argv, env, timeout=job.timeout_s, capture=True)
                took = time.monotonic() - started
                if proc.returncode != 0:
                    raise RuntimeError(f"the job's command failed under {lib} with {alg} (round {r}, exit "
                                       f"{proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
                lines = callsizes.read_timelines(folder, job.ranks) if per_step else []
            row = {"round": r, "position": pos, "library": lib, "algorithm": alg, "seconds": took}
            if per_step:
                try:
                    periods = [callsizes.period_of(t) for t in lines]
                except RuntimeError as e:
                    raise RuntimeError(f"the job's command under {lib} with {alg} cannot be timed per step from "
                                       f"inside: {e} (without --steps it is timed as whole runs)") from None
                unit = sum(p[0] for p in periods) / len(periods)
                row.update(step_s=unit, allreduce_in_step_s=sum(p[1] for p in periods) / len(periods),
                           startup_s=took - unit * job.steps)
            else:
                unit = took
            rows.append({**row, "unit_s": unit, "rate": 1 / unit})
    return pd.DataFrame(rows)


def check_launches(job: Job, libraries: list[str]) -> float:
    """The training launches of the complete check a round, per launch of the first stage's (one a library: its
    default), on average over the libraries: ardlab's models switch the default and the pick inside one launch where
    the library can (``Library.switching``) and run the tuned file in another (2), else a launch each (3); one's own
    program runs each variant in its own launch (3). The complete check is estimated as the first stage's time times
    this, and a tenth more."""
    from ardlab.comm.libraries import library

    if job.command:
        return 3.0
    return sum(2 if library(lib).switching is not None else 3 for lib in libraries) / len(libraries)


def advise(job: Job, settings: Settings, on_answer: Callable[[Advice], None] | None = None) -> Advice:
    """Learn, check the defaults, race, choose, check (the module's docstring), within settings.budget_s: anytime,
    each stage's answer handed to `on_answer` as soon as it exists (the defaults' within minutes), the last returned.
    A budget too small for the first stage is refused (ValueError) after the first training run, before anything else
    runs; one too small for the race or the complete check ends with the defaults' answer, saying why (``stopped``)."""
    from tqdm import tqdm

    from ardlab.comm.libraries import DEFAULT

    check_inputs(job, settings)
    start = time.monotonic()
    deadline = start + settings.budget_s
    bar = tqdm(total=int(settings.budget_s), unit="s", desc="advise", disable=not settings.progress,
               bar_format="{desc}: {percentage:3.0f}% of the budget |{bar}| {postfix}")

    def tick(what: str = "") -> None:
        bar.n = min(int(time.monotonic() - start), int(settings.budget_s))
        bar.set_postfix_str(f"{what} {max(0, deadline - time.monotonic()) / 60:.1f} min left".strip())

    def answered(stage: str) -> None:
        advice.stage = stage
        advice.seconds["total"] = time.monotonic() - start
        if not advice.stages or advice.stages[-1]["stage"] != stage:
            advice.stages.append({"stage": stage, "written_at_s": round(advice.seconds["total"], 1)})
        if on_answer is not None:
            on_answer(advice)

    def finished() -> Advice:
        tick("done")
        bar.close()
        return advice

    tick("learning the job's calls")
    t0 = time.monotonic()
    calls = learn_calls(job, settings.libraries[0], steps=settings.check_steps)
    learn_s = time.monotonic() - t0
    advice = Advice(job, settings, calls, seconds={"learn": learn_s})
    sizes = sizes_of(calls)
    # the first stage: a training launch a library and round, each about as long as the first run
    first_estimate = learn_s * settings.check_rounds * len(settings.libraries)
    if start + learn_s + first_estimate > deadline:
        need = (learn_s + first_estimate) * 1.3 / 60
        raise ValueError(f"--budget {settings.budget_s / 60:.0f}m cannot hold the first stage, each library's default "
                         f"in {settings.check_rounds} paired training rounds ({first_estimate / 60:.1f} min estimated "
                         f"from the first training run, which took {learn_s:.0f} s); give at least {need:.0f}m")
    tick("the defaults in training")
    t0 = time.monotonic()
    defaults = {lib: DEFAULT for lib in settings.libraries}
    advice.picks = dict(defaults)
    advice.check = check_training(job, settings, defaults)
    advice.seconds["defaults"] = time.monotonic() - t0
    answered(DEFAULTS)

    check_estimate = advice.seconds["defaults"] * check_launches(job, settings.libraries) * 1.1
    if time.monotonic() + check_estimate > deadline:
        advice.stopped = (f"the budget left no time for the race: the complete check alone (about "
                          f"{check_estimate / 60:.1f} min, from the first stage's {advice.seconds['defaults'] / 60:.1f}"
                          f" min) would not fit in the {max(0, deadline - time.monotonic()) / 60:.1f} min left")
        answered(DEFAULTS)
        return finished()
    tick("racing")
    t0 = time.monotonic()
    try:
        advice.bench, advice.predictions, advice.race, probe_s = race(
            job, settings, calls, sizes, deadline, check_estimate, tick=lambda: tick("racing"))
    except NoTimeToRace as e:
        advice.bench, advice.predictions, advice.race = e.rows, e.predictions, e.log
        advice.seconds["microbench"] = time.monotonic() - t0
        advice.stopped = f"the race stopped after its first round: {e}"
        answered(DEFAULTS)
        return finished()
    advice.seconds["microbench"] = time.monotonic() - t0
    tick("proving the picks")
    from ardlab.advise import prove

    count = prove.dominant_count(calls)
    picks, advice.proofs = prove.proven_picks(
        ranked(advice.predictions), lambda lib, alg: prove.probe_pick(job, lib, alg, count))
    tuned_files: dict[str, str] = {}
    if settings.output is not None:
        tick("proving the tuned files")
        verdicts = {(p["library"], p["algorithm"]): p["proof"] for p in advice.proofs}
        tuned_files, advice.tuned_log = proven_tuned(
            job, advice.bench, Path(settings.output) / "tuned", verdicts,
            lambda lib, alg, n: prove.probe_pick(job, lib, alg, n)[0],
            lambda lib, path, alg, n: prove.probe_tuned(job, lib, path, alg, n),
            lambda: time.monotonic() + probe_s + check_estimate > deadline, advice.tuned_proofs)
    tick("training check")
    t0 = time.monotonic()
    check = check_training(job, settings, picks, tuned_files)
    advice.seconds["check"] = time.monotonic() - t0
    advice.defaults_check, advice.check, advice.picks, advice.tuned = advice.check, check, picks, tuned_files
    answered(COMPLETE)
    return finished()


def tuned_files(folder: Path, job, libraries) -> dict[str, Path]:
    """The advice's tuned file of each library that has one."""
    from ardlab.analysis import tuned

    out = {}
    for lib in libraries:
        path = tuned.path(folder / "tuned", lib, job.ranks, job.nodes)
        if path.is_file():
            out[lib] = path
    return out


def load(folder: Path) -> Advice:
    """An advice as its run folder holds it (answer.json and the rows as measured), for its answer to be made again
    from those rows alone (``ardlab advise-answer``): answer.json of schema 3 on. FileNotFoundError or ValueError
    naming what is missing."""
    import json

    import pandas as pd

    from ardlab.advise.answer import SCHEMA_VERSION

    folder = Path(folder)
    path = folder / "answer.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: give the run folder of an `ardlab advise`")
    doc = json.loads(path.read_text())
    version = doc.get("schema_version", 1)
    if version < 3:
        raise ValueError(f"{path}: schema {version}; an answer is made again from the rows of schema 3 on (its "
                         "stages and the rows of each are kept from there)")
    if version > SCHEMA_VERSION:
        raise ValueError(f"{path}: schema {version}, newer than this ardlab's {SCHEMA_VERSION}")
    kept = doc["settings"]
    settings = Settings(doc["libraries"], kept["budget_s"], rounds=kept["rounds"], check_rounds=kept["check_rounds"],
                        check_steps=kept["check_steps"], seed=kept["seed"], progress=False, output=folder)

    def rows(name: str, required: bool = True):
        csv = folder / f"{name}.csv"
        if not csv.is_file():
            if required:
                raise FileNotFoundError(f"{csv} does not exist: the advice's rows are incomplete")
            return None
        return pd.read_csv(csv)

    job = Job(**doc["job"])
    advice = Advice(job, settings, rows("calls"), bench=rows("microbench", False),
                    predictions=rows("predictions", False), race=doc["race"],
                    picks={r["library"]: r["setting"] for r in doc["answer"]}, proofs=doc["proofs"],
                    tuned_log=doc["tuned_left_out"], tuned_proofs=doc.get("tuned_proofs", []), check=rows("check"),
                    seconds={"total": doc["cost"]["seconds"]},
                    stage=doc["stage"], stages=doc["stages"], stopped=doc["stopped"],
                    defaults_check=rows("check-defaults", False))
    advice.tuned = {lib: str(p) for lib, p in tuned_files(folder, job, advice.picks).items()}
    return advice


def write(advice: Advice, output: Path) -> list[Path]:
    """The run folder: the rows as measured, the answer (ardlab.advise.answer) as JSON and Markdown, env files."""
    from ardlab.advise import answer
    from ardlab.results import atomic_open

    output.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in (("calls", advice.calls), ("microbench", advice.bench), ("predictions", advice.predictions),
                        ("check", advice.check), ("check-defaults", advice.defaults_check)):
        if frame is None:  # not measured (yet): the first stage's answer has no microbenchmark
            continue
        path = output / f"{name}.csv"
        with atomic_open(path, "w", newline="") as f:
            frame.to_csv(f, index=False)
        written.append(path)
    return written + answer.write(advice, output)
