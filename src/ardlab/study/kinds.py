"""The workflow's measurement kinds, each declared once: the config section that sets it, its job matrix (one job a
comparison group and round) and the run each variant of a job plans. Where a kind's rows go under the run folder,
and what they are, is the leaf's (``ardlab.results.ROW_FILES``); a kind here without its rows there, or rows there
without a kind here, fails at import.

A training kind (ardlab.nn's, Horovod's) measures models at the scales of its section, its groups along one more
axis of its own (``Axis``: ardlab.nn's parallel modes, Horovod's fusion thresholds). Its config section is made from
the training keys every such kind has (the schema's ``definitions/training``), its axis and its options' declaration
(``ardlab.study.config.schema``); the workflow gives it a rule, callsizes and picks with no further line. Another
kind's section is the schema file's (the microbenchmark's) or its own ``Kind.schema``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ardlab.bench import allreduce
from ardlab.bench.sizes import parse_sizes
from ardlab.horovod import train as horovod_train
from ardlab.nn import PARALLEL_MODES, trainer
from ardlab.plan import RunPlan, config_options
from ardlab.programs import program
from ardlab.results import ROW_FILES, scale_name


@dataclass(frozen=True)
class Job:
    """One round of one comparison group: every variant of the group measured once, in a shuffled order.

    Groups span the libraries, so that every comparison a table makes (an algorithm against its library's default,
    the best library and algorithm against the worst, a tuned file against the default and the single algorithms
    it selects from) is between variants measured in the same rounds.
    """

    kind: str  # a key of KINDS
    round: int
    ranks: int
    nodes: int = 1
    model: str = ""
    mode: str = ""  # a training group's value of its kind's axis, as named in its folder (Axis.name)

    @property
    def path(self) -> str:
        # a training group on one node keeps the name it had before groups could span nodes: runs stay comparable
        return PATTERNS[self.kind].format(**self.__dict__, scale=scale_name(self.ranks, self.nodes))

    @property
    def group(self) -> str:
        """The comparison group's name (recorded in every row): the path of its folder under raw/."""
        return self.path.removeprefix("raw/").rpartition("/round")[0]


PATTERNS = {kind: pattern for kind, (pattern, _) in ROW_FILES.items()}  # declared in ardlab.results


@dataclass(frozen=True)
class Axis:
    """A training kind's own axis of groups: the config key that lists its values, the schema of one value, the
    values a config that names none gets, and a value's name in the group's folder (a Job's `mode`) and back."""

    key: str
    item_schema: Mapping[str, Any]
    default: list
    name: Callable[[Any], str] = str
    value: Callable[[str], Any] = str


@dataclass(frozen=True)
class Kind:
    """One kind of measurement job. `variant(job, section, lib, algorithm, tuned, launch)` plans one variant of a
    job's group: `lib` running `algorithm` (the default where `tuned`, the path of a tuned file, is given), with the
    launch fields `launch`, from the kind's config `section`."""

    name: str
    program: str  # the measuring program its jobs run (ardlab.programs): its own name, but for the tuned phase
    section: str  # the config key that sets it (the microbenchmark's two kinds share one)
    options: type | None  # whose schema=True fields are options of its section (ardlab.plan.option)
    variant: Callable[..., RunPlan]
    jobs: Callable[[dict, Kind], list[Job]]
    axis: Axis | None = None  # a training kind's axis of groups; None: not a training kind
    # The JSON schema of its config section where that is neither a training kind's (made from the axis) nor
    # written in workflow/schemas/config.schema.yaml (the microbenchmark's is); its options are added to it.
    schema: Mapping[str, Any] | None = None
    models: Callable[[], Mapping[str, Any]] | None = None  # a training kind: the models its section may name
    own: bool = True  # its section's algorithm lists may name ardlab's own algorithms
    # the tuned phase: its groups measure each library's tuned file against its default and every algorithm the file
    # selects (added when a job starts), instead of its section's algorithm lists
    tuned_phase: bool = False

    @property
    def trains(self) -> bool:
        """Whether its groups train a model (their own threads, picks, tuned re-runs, switching inside a launch)."""
        return self.axis is not None


def scales(section: dict) -> list[tuple[int, int]]:
    """(nodes, ranks) of a section: every node count with every rank count that spreads evenly over it (and, where
    the section names `ranks_per_node`, gives one of those per node)."""
    per = section.get("ranks_per_node")
    return [(n, r) for n in section["nodes"] for r in section["ranks"]
            if r >= n and r % n == 0 and (not per or r // n in per)]


def skipped(section: dict, model: str, ranks: int, nodes: int) -> bool:
    """Whether an entry of the section's `skip` list matches a training group in all of its keys."""
    here = {"model": model, "ranks": ranks, "nodes": nodes}
    return any(all(here[k] == v for k, v in entry.items()) for entry in section.get("skip", ()))


def tuned_ranks(config: dict) -> int:
    """The rank count of the tuned phase (one node)."""
    return config["tuned"]["ranks"] or max(config["microbench"]["ranks"])


def training_jobs(config: dict, kind: Kind) -> list[Job]:
    """A training kind's groups: every model x axis value x scale of its section, each round, less those skipped."""
    sec = config[kind.section]
    return [Job(kind.name, r, ranks, nodes, model, kind.axis.name(value)) for model in sec["models"]
            for value in sec[kind.axis.key] for nodes, ranks in scales(sec) for r in range(config["rounds"])
            if not skipped(sec, model, ranks, nodes)]


def bench_jobs(config: dict, kind: Kind) -> list[Job]:
    """A microbenchmark kind's groups: every scale of its section, each round (its own `rounds`, where it has them
    and they are set, else the run's)."""
    sec = config[kind.section]
    return [Job(kind.name, r, ranks, nodes) for nodes, ranks in scales(sec)
            for r in range(sec.get("rounds") or config["rounds"])]


def _tuned_phase_jobs(config: dict, kind: Kind) -> list[Job]:
    if not (config["tuned"]["enabled"] and config["tuned"]["microbench"]):
        return []
    return [Job(kind.name, r, tuned_ranks(config)) for r in range(config["rounds"])]


def bench_variant(job: Job, sec: dict, lib: str, algorithm: str, tuned: str | None, launch: dict) -> RunPlan:
    return allreduce.plan(lib, ranks=job.ranks, nodes=job.nodes, sizes=parse_sizes(sec["sizes"]),
                          algorithms=None if tuned else [algorithm], tuned=tuned,
                          **config_options(allreduce.Plan, sec), skip_inapplicable=True, **launch)


def _nn_variant(job: Job, sec: dict, lib: str, algorithm: str, tuned: str | None, launch: dict) -> RunPlan:
    return trainer.plan(lib, ranks=job.ranks, nodes=job.nodes, algorithm=algorithm, tuned=tuned, options={
        "model": job.model, "dataset": "synthetic", "parallel_mode": job.mode,
        **config_options(trainer.TrainConfig, sec)}, **launch)


FUSION = Axis("fusion_threshold_mb", {"type": "number", "minimum": 0}, [horovod_train.FUSION_THRESHOLD_MB],
              name=lambda mib: f"f{mib:g}",
              value=lambda name: float(name.removeprefix("f")))


def _horovod_variant(job: Job, sec: dict, lib: str, algorithm: str, tuned: str | None, launch: dict) -> RunPlan:
    return horovod_train.plan(lib, ranks=job.ranks, nodes=job.nodes, algorithm=algorithm, tuned=tuned,
                              options={"model": job.model, **config_options(horovod_train.TFConfig, sec)},
                              knobs={"fusion_threshold_mb": FUSION.value(job.mode)}, **launch)


def _nn_models() -> Mapping[str, Any]:
    from ardlab.nn.models import MODELS

    return MODELS


def _horovod_models() -> Mapping[str, Any]:
    from ardlab.horovod.models import APPLICATIONS
    from ardlab.nn.models import MODELS

    return {**MODELS, **APPLICATIONS}


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("microbench", "microbench", "microbench", allreduce.Plan, bench_variant, bench_jobs),
    # the tuned phase: each library's one-node tuned file against its default and the algorithms the file selects
    Kind("microbench_tuned", "microbench", "microbench", None, bench_variant, _tuned_phase_jobs, tuned_phase=True),
    Kind("train", "train", "train", trainer.TrainConfig, _nn_variant, training_jobs, models=_nn_models,
         axis=Axis("parallel_modes", {"type": "string", "enum": list(PARALLEL_MODES)}, ["bucketed"])),
    Kind("horovod", "horovod", "horovod", horovod_train.TFConfig, _horovod_variant, training_jobs,
         models=_horovod_models, axis=FUSION, own=False),
)}
if list(KINDS) != list(ROW_FILES):  # a kind without rows, or rows without a kind: loud, at import
    raise ValueError(f"ardlab.study.kinds.KINDS ({', '.join(KINDS)}) and ardlab.results.ROW_FILES "
                     f"({', '.join(ROW_FILES)}) must name the same kinds, in the same order")
for _kind in KINDS.values():  # a kind's rows and training are its program's
    if (ROW_FILES[_kind.name][1], _kind.trains) != (program(_kind.program).rows, program(_kind.program).trains):
        raise ValueError(f"ardlab.study.kinds: kind {_kind.name!r} (rows {ROW_FILES[_kind.name][1]!r}, training "
                         f"{_kind.trains}) does not match its program {_kind.program!r} (ardlab.programs)")
TRAINING = [k.name for k in KINDS.values() if k.trains]  # the training kinds
SECTIONS = list(dict.fromkeys(k.section for k in KINDS.values()))  # the config sections of the kinds


def of(job_or_kind: Job | str) -> Kind:
    """The kind of a job (or of a kind's name)."""
    return KINDS[job_or_kind if isinstance(job_or_kind, str) else job_or_kind.kind]


def section_kind(section: str) -> Kind:
    """The first kind a config section sets (the one whose options the section holds)."""
    return next(k for k in KINDS.values() if k.section == section)

