"""The run plan: what a driver hands the ranks it launches, as one JSON file.

A driver (``ardlab bench allreduce``, ``ardlab train``, ``ardlab train-tf``, or a workflow job through ``ardlab
run``) validates every choice, writes the plan beside its output and starts the ranks under the library's
launcher; each rank runs ``python -m ardlab.rank --plan FILE``. No option is re-encoded as command-line text
between them, so there is no list of "driver-only" options to keep in step with the parser.

``program`` names the measuring program (``ardlab.programs``); ``options`` holds the fields of its own settings:
``ardlab.bench.allreduce.Plan`` (program ``microbench``), ``ardlab.nn.trainer.TrainConfig`` (``train``) or
``ardlab.horovod.train.TFConfig`` (``horovod``). Each of those modules has the one builder of its plans (``plan``),
which the CLI and the workflow share; the checks common to all programs are here.
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path

from ardlab.comm.libraries import DEFAULT, OWN_ALGORITHMS, TUNED, algorithm, library
from ardlab.programs import program
from ardlab.results import MIB, mib_bytes

# Fields of the programs' settings that the plan itself carries (or the rank derives), never among its options.
PLAN_FIELDS = frozenset({"library", "ranks", "nodes", "tuned", "threads", "progress", "allreduce", "algorithm_label",
                         "group", "round", "position", "order_seed"})
LAUNCHERS = ("local", "srun")


@dataclass
class RunPlan:
    program: str  # a name of ardlab.programs.PROGRAMS
    library: str
    ranks: int
    algorithm: str = DEFAULT  # the variant's algorithm: the native one forced at launch, own_* (train), or tuned
    nodes: int = 1
    threads: int | None = None  # per rank: the thread variables (and TensorFlow's thread pools)
    tuned: str | None = None  # a tuned selection file: the library selects per size (algorithm "tuned")
    timeout_s: float | None = None  # a launch running longer is killed, and nothing is written
    output: str | None = None  # the CSV the driver writes (None: only the terminal shows the result)
    env: dict[str, str] = field(default_factory=dict)  # further settings for every rank (Horovod's knobs)
    launcher: str = "local"  # local: the environment's mpiexec; srun: Slurm's srun (several nodes)
    srun_mpi: str | None = None  # srun's --mpi (default: the table's PMI for the library)
    image: str | None = None  # srun: the Apptainer image the ranks run in (None: the environment of the library)
    # what carries its bytes, intra_node and inter_node (ardlab.comm.transport; the driver's probe fills it)
    transport: dict[str, str] = field(default_factory=dict)
    progress: bool = True
    options: dict = field(default_factory=dict)
    # where this launch stands in a comparison's paired rounds (ardlab.rounds); recorded in every row
    group: str = ""
    round: int = 0
    position: int = 0
    order_seed: int = 0  # the seed of the round's order
    # Several variants in one launch (train, train-tf; ardlab.comm.switch): the algorithms it measures one after
    # another, switched inside it, and each one's position in the round. Empty: the plan's own algorithm alone.
    switch: list[str] = field(default_factory=list)
    switch_positions: list[int] = field(default_factory=list)

    def __post_init__(self):
        program(self.program)  # unknown names fail here, listing the valid ones
        if self.launcher not in LAUNCHERS:
            raise ValueError(f"unknown launcher {self.launcher!r}; valid: {', '.join(LAUNCHERS)}")
        if self.ranks < 1:
            raise ValueError(f"ranks must be >= 1, got {self.ranks}")
        if self.nodes < 1:
            raise ValueError(f"nodes must be >= 1, got {self.nodes}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.switch:
            self._check_switch()

    def _check_switch(self) -> None:
        lib = library(self.library)
        where = f"a launch switching {lib.display}'s algorithm ({', '.join(self.switch)})"
        if lib.switching is None:
            raise ValueError(f"{where}: {lib.display} cannot switch inside a launch: {lib.switching_note}")
        if not program(self.program).trains:
            raise ValueError(f"{where}: the microbenchmark measures one forced algorithm a launch")
        if self.tuned or self.algorithm != DEFAULT:
            raise ValueError(f"{where} starts at the default, without a tuned file (it has {self.algorithm!r}, "
                             f"tuned file {self.tuned!r})")
        if len(self.switch_positions) != len(self.switch):
            raise ValueError(f"{where}: {len(self.switch_positions)} positions for {len(self.switch)} algorithms")
        for name in self.switch:
            if name in OWN_ALGORITHMS or name == TUNED:
                raise ValueError(f"{where}: {name!r} is not a native algorithm it can switch to")
            algorithm(self.library, name)  # unknown names fail here, listing the valid ones

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RunPlan":
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict) -> "RunPlan":
        return cls(**_known(cls, data, "run plan"))

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "RunPlan":
        return cls.from_json(Path(path).read_text())

    @property
    def label(self) -> str:
        """The variant this plan measures: library/algorithm (library/a+b+c: the algorithms it switches between)."""
        if self.switch:
            return f"{self.library}/{'+'.join(self.switch)}"
        return f"{self.library}/{self.algorithm}"

    def variant(self, name: str, **changes) -> "RunPlan":
        """This plan measuring the algorithm `name` instead (`changes`: further fields replaced), the name in its
        algorithm field and, for a program that reads it from its options too, there."""
        where = program(self.program).algorithms_option
        options = {**self.options, where: [name]} if where else dict(self.options)
        return replace(self, algorithm=name, options=options, **changes)

    def stamp(self, row: dict) -> dict:
        """`row` with this plan's place in its rounds."""
        row.update(group=self.group, round=self.round, position=self.position, order_seed=self.order_seed)
        return row


@dataclass
class Comparison:
    """A comparison group measured in paired, interleaved rounds: every round runs each variant once (one
    launch each), in the seeded shuffled order of ``ardlab.rounds``, and the rows of all go to one CSV.

    `selected_from` names tuned selection files: the algorithms each selects (its ranges file, written beside it
    by ``ardlab tune``) join as variants when the comparison starts (a tuned file is made by an earlier job), as
    copies of that library's default variant -- so a tuned file is measured in the same rounds as the default and
    the single algorithms it selects from. `picks` join the same way from `picked_from`.
    """

    group: str
    variants: list[RunPlan]
    rounds: int = 1
    first_round: int = 0
    seed: int = 0
    output: str | None = None
    selected_from: list[str] = field(default_factory=list)
    progress: bool = True
    # library -> picks (best, worst): the algorithms a pick file (ardlab.analysis.picks, made from the run's
    # microbenchmark for this group's Allreduce calls) names join as variants when the comparison starts, as copies
    # of that library's default variant; a pick that is already a variant is not measured twice
    picks: dict[str, list[str]] = field(default_factory=dict)
    picked_from: str | None = None
    # Measure a library's native variants of a round in one launch, switching the algorithm inside it, where the
    # library can (ardlab.comm.switch; train and train-tf): one start-up (TensorFlow's, Horovod's) instead of one per
    # variant. Tuned files, our own algorithms and libraries that cannot switch keep a launch each.
    switch_in_launch: bool = False

    def __post_init__(self):
        self.variants = [v if isinstance(v, RunPlan) else RunPlan.from_dict(v) for v in self.variants]
        if not self.variants:
            raise ValueError(f"comparison group {self.group!r} has no variant")
        programs = {v.program for v in self.variants}
        if len(programs) > 1:
            raise ValueError(f"comparison group {self.group!r} mixes programs {sorted(programs)}")
        if self.rounds < 1:
            raise ValueError(f"rounds must be >= 1, got {self.rounds}")
        if self.picks and not self.picked_from:
            raise ValueError(f"comparison group {self.group!r} picks algorithms but names no pick file")
        if self.switch_in_launch and not program(self.program).trains:
            raise ValueError(f"comparison group {self.group!r}: switching inside a launch is for training; the "
                             "microbenchmark measures one forced algorithm a launch")

    @property
    def program(self) -> str:
        return self.variants[0].program

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Comparison":
        return cls(**_known(cls, json.loads(text), "comparison"))


def _known(cls, data: dict, what: str) -> dict:
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{what} has unknown fields {unknown}; valid: {', '.join(sorted(known))}")
    return data



def option(default, help: str | None = None, choices=None, cli: bool = True, schema: bool = False,
           workflow_default=MISSING, mib: bool = False, **bounds):
    """A field of a program's settings (TrainConfig, TFConfig, the microbenchmark's Plan) that is also its command-line
    option: ``--name-like-this`` with this default, help and choices (a callable giving them, read when the parser is
    made), made by the CLI from the field (``ardlab.cli``); `cli` False: a setting the command line does not offer.
    `schema` True: also a key of the workflow config's section of the program, named like the option, whose JSON schema
    (``schema_properties``) has `bounds` (minimum, exclusiveMinimum) besides the type, default, help and choices, and
    whose value the workflow's jobs pass on (``config_options``); `workflow_default`: the config's default where a
    study's groups differ from the command line's (shorter runs). `mib` True: the field holds bytes (its name ends in
    ``_bytes``) and the command line and the config give it in MiB, named ``..._mb``."""
    if mib and default % MIB:
        raise ValueError(f"an option given in MiB has a default of whole MiB, not {default} bytes")
    return field(default=default, metadata={"help": help, "choices": choices, "cli": cli, "schema": schema,
                                            "workflow_default": workflow_default, "mib": mib, "bounds": bounds})


def option_name(f) -> str:
    """An option's name on the command line (with dashes) and in the workflow config: the field's, or for a size
    given in MiB ``<name>_mb`` where the field is ``<name>_bytes``."""
    return f.name.removesuffix("_bytes") + "_mb" if f.metadata.get("mib") else f.name


def option_value(f, value):
    """A value given on the command line or in the config, as the field holds it (MiB made bytes)."""
    return mib_bytes(value) if f.metadata.get("mib") and value is not None else value


def option_default(f, *, workflow: bool = False):
    """An option's default as given (in MiB for a size in MiB); `workflow`: the config's default."""
    value = f.default
    if workflow and f.metadata.get("workflow_default", MISSING) is not MISSING:
        value = f.metadata["workflow_default"]
    if f.metadata.get("mib") and value is not None:
        value = value // MIB if value % MIB == 0 else value / MIB
    return value


def workflow_default(config_class, name: str):
    """The workflow config's default of `config_class`'s option `name` (``option_default`` with `workflow`): what a
    run made for a study or a job's advice takes where its caller gives none."""
    (f,) = [f for f in fields(config_class) if f.name == name]
    return option_default(f, workflow=True)


def option_type(f) -> tuple[str, bool]:
    """An option's type as given ("int", "float", "str", "bool"; a size in MiB: "float") and whether the field may
    be None."""
    kind = f.type if isinstance(f.type, str) else f.type.__name__
    return ("float" if f.metadata.get("mib") else kind.replace(" | None", "")), kind.endswith("| None")


def config_options(config_class, section: dict) -> dict:
    """The settings of `config_class` that a workflow config's section gives (``option``'s `schema`), as the fields
    hold them: what a job of that section passes to its run plan."""
    return {f.name: option_value(f, section[option_name(f)]) for f in fields(config_class)
            if f.metadata.get("schema")}


_JSON_TYPES = {"int": "integer", "float": "number", "str": "string", "bool": "boolean"}


def schema_properties(config_class) -> dict:
    """The JSON schema properties of the options of `config_class` that the workflow config offers (``option``'s
    `schema`): each option's type (null too where the field may be None and the config's default is None), the
    config's default, help as description, choices as enum, bounds."""
    out = {}
    for f in fields(config_class):
        if not f.metadata.get("schema"):
            continue
        kind, nullable = option_type(f)
        default = option_default(f, workflow=True)
        base = _JSON_TYPES[kind]
        prop = {"type": [base, "null"] if nullable and default is None else base, "default": default}
        if f.metadata.get("choices"):
            prop["enum"] = list(f.metadata["choices"]())
        prop.update(f.metadata.get("bounds") or {})
        if f.metadata.get("help"):
            prop["description"] = f.metadata["help"].replace("%%", "%")  # argparse's escape
        out[option_name(f)] = prop
    return out


def cli_options(config_class) -> list:
    """The fields of a program's settings that are command-line options (made by ``option``), in order."""
    return [f for f in fields(config_class) if f.name not in PLAN_FIELDS and f.metadata.get("cli")]


def check_algorithm(library_name: str, name: str, tuned: str | None, *, own: bool) -> str:
    """The algorithm label of a training run: `name` checked against the table, or TUNED with a tuned file."""
    library(library_name)
    if tuned is not None:
        if name != DEFAULT:
            raise ValueError(f"--tuned and --algorithm {name} exclude each other (a tuned file selects per size)")
        return TUNED
    if name in OWN_ALGORITHMS and not own:
        raise ValueError(f"{name}: Horovod calls MPI_Allreduce itself, so only the library's native algorithms "
                         f"apply to {program('horovod').command}")
    algorithm(library_name, name)  # unknown names fail here, listing the valid ones
    return name


def check_options(config_class, values: dict) -> None:
    """Every option of `config_class` that `values` gives (not None) checked against its declaration (``option``'s
    choices and bounds, the same the workflow's schema has): ValueError naming the option as the command line and the
    config name it, its value and what is valid."""
    for f in fields(config_class):
        value = values.get(f.name)
        if value is None:
            continue
        name = option_name(f)
        choices = f.metadata.get("choices")
        if choices is not None:
            valid = list(choices())
            if value not in valid:
                raise ValueError(f"unknown {name} {value!r}; valid: {', '.join(map(str, valid))}")
        bounds = f.metadata.get("bounds") or {}
        given = value / MIB if f.metadata.get("mib") else value  # bounds are in the unit the option is given in
        if "minimum" in bounds and given < bounds["minimum"]:
            raise ValueError(f"{name} must be >= {bounds['minimum']}, got {given:g}")
        if "exclusiveMinimum" in bounds and not given > bounds["exclusiveMinimum"]:
            raise ValueError(f"{name} must be > {bounds['exclusiveMinimum']}, got {given:g}")


def options_of(config_class, options: dict, what: str) -> dict:
    """`options` checked as fields of `config_class` (a dataclass; the plan's own fields excluded): the class's own
    checks, then each option's declared choices and bounds (``check_options``)."""
    known = {f.name for f in fields(config_class)} - PLAN_FIELDS
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown {what} settings {unknown}; valid: {', '.join(sorted(known))}")
    config_class(**options)  # the class's own defaults and checks
    check_options(config_class, options)
    return dict(options)
