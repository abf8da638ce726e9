"""The `ardlab` command line: one subcommand per job, each a parser-building function and a handler.

    info | probe | transport | bench allreduce | train | train-tf | tune | report | predict | cluster | image | run |
    rank

Measuring subcommands build a validated run plan (the program's ``plan``, ``ardlab.programs``) and hand it to the driver
(``ardlab.driver``),
which starts the ranks; with ``--in-mpi`` (started by the user's own launcher, e.g. srun) the plan runs in this
process (``ardlab.rank``). Choice lists come from ardlab's registries, never typed twice.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ardlab.comm.libraries import BUILT_IN, DEFAULT, LIBRARIES, OWN_ALGORITHMS
from ardlab.plan import LAUNCHERS, cli_options, option_default, option_name, option_type, option_value

# --------------------------------------------------------------------------------------------- handlers


def _info(args: argparse.Namespace) -> int:
    from ardlab.comm.launch import env_prefix
    from ardlab.comm.startup import cpu

    c = cpu()
    print(f"CPU: {c['model']} (vendor {c.get('vendor', '?')}, family {c.get('family', '?')}, "
          f"model {c.get('model_number', '?')})")
    for lib in LIBRARIES.values():
        prefix = env_prefix(lib.name)
        installed = (prefix / "bin" / "mpiexec").exists()
        if lib.site:
            from ardlab.comm.sites import describe

            print(f"{lib.display} [{lib.name}]  site library of family {lib.family}, registered in {lib.site.source}: "
                  + describe(lib.site))
            if lib.refused:
                print(f"  its build refused (probed at set-up): {', '.join(sorted(lib.refused))}")
        else:
            print(f"{lib.display} [{lib.name}]  packages: {' '.join(lib.pip_packages)}")
        print(f"  environment: {prefix} ({'installed' if installed else 'missing'})")
        print(f"  launcher: mpiexec {' '.join(lib.launcher_flags)} -n N"
              + (f"   env: {' '.join(f'{k}={v}' for k, v in lib.launcher_env.items())}" if lib.launcher_env else ""))
        print(f"  forcing adds: {' '.join(f'{k}={v}' for k, v in lib.force_env.items()) or '-'}")
        print(f"  cluster launch: {lib.pmi}"
              + (f"   env: {' '.join(f'{k}={v}' for k, v in lib.srun_env.items())}" if lib.srun_env else ""))
        if lib.slurm_start_why:
            print(f"  why {lib.slurm_start} inside an allocation: {lib.slurm_start_why}")
        if lib.container_peer_env:
            print(f"  container peers (an image at several ranks a node, under srun) add: "
                  f"{' '.join(f'{k}={v}' for k, v in lib.container_peer_env.items())}")
        if lib.time_shared_env:
            print(f"  srun on time-shared cores (emulated cluster, more ranks than cores) adds: "
                  f"{' '.join(f'{k}={v}' for k, v in lib.time_shared_env.items())}")
        if lib.srun_proof:
            print(f"  proven under srun: {lib.srun_proof}")
        elif lib.site:
            print("  proven under srun: not by ardlab's tests for this build (a site's own; its family's way above is "
                  "what ardlab runs: `ardlab transport --launcher srun` shows what it reports)")
        if lib.tuning_file_var:
            from ardlab.comm.startup import tuning_file_here

            here = tuning_file_here(lib.name) if installed else "(environment missing)"
            print(f"  tuning file (per CPU and fabric, chosen at MPI_Init): {here} for one node here; across nodes "
                  f"the fabric part differs. Name one with {lib.tuning_file_var}=<file> (its own: "
                  f"{prefix / lib.tuning_file_dir}/tuning_*.dat); every row records the file in mpi_tuning_file")
        for alg in lib.algorithms.values():
            env = " ".join(f"{k}={v}" for k, v in alg.env.items()) or "(nothing forced)"
            wire = f"traffic: {alg.traffic}" if alg.traffic else ""
            extra = "; ".join(filter(None, [", ".join(alg.constraints()), alg.note, wire]))
            print(f"    {alg.name:30s} {env}" + (f"   [{extra}]" if extra else ""))
    print("Our own algorithms (any library):")
    for alg in OWN_ALGORITHMS.values():
        extra = ", ".join(alg.constraints())
        print(f"    {alg.name:30s} {alg.description}" + (f"   [{extra}]" if extra else ""))
    from ardlab.nn import backend, onednn

    where = (f"oneDNN {onednn.version()} from {onednn.library_path()}" if onednn.available()
             else f"not loadable here ({onednn.library_path()})")
    print(f"ardlab.nn backends: numpy (the reference), onednn ({where}); auto (training's default) means "
          f"{backend.resolve('auto')} in this environment")
    return 0


def _probe(args: argparse.Namespace) -> int:
    from ardlab.comm.probe import probe

    hits = probe(args.library, args.algorithm, ranks=args.ranks, noncommutative=args.noncommutative)
    for key, n in sorted(hits.items()):
        print(f"{n:6d}  {key}")
    if not hits:
        print("no algorithm function or fallback message observed")
    return 0


def _transport(args: argparse.Namespace) -> int:
    from ardlab.comm.transport import wire
    from ardlab.driver import transport
    from ardlab.plan import RunPlan

    env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--env {item!r} is not NAME=VALUE")
        env[key] = value
    if args.image and args.launcher != "srun":
        raise ValueError("--image needs --launcher srun (an image's ranks are started by srun)")
    got = transport(RunPlan("microbench", args.library, args.ranks, nodes=args.nodes, launcher=args.launcher,
                            env=env, timeout_s=args.timeout, image=args.image))
    if args.shell:  # for `eval`: the settings that hand the result to an --in-mpi launch's rows
        import shlex

        from ardlab.comm.transport import settings

        print("\n".join(f"export {k}={shlex.quote(v)}" for k, v in settings(got).items()))
        return 0
    for kind, where in (("intra_node", "within a node"), ("inter_node", "between nodes")):
        t = got[kind]
        print(f"{where:14s} {t or '-':24s} {wire(t) or 'no pair of ranks there'}")
    return 0


def _launch_settings(args: argparse.Namespace) -> dict:
    """The RunPlan fields every measuring subcommand takes from its command line."""
    return {"timeout_s": args.timeout, "output": str(args.output) if args.output else None,
            "progress": not args.no_progress, "threads": args.threads, "launcher": args.launcher}


def _mpi_world(training: bool) -> tuple[str, int, int]:
    """(library name, ranks, nodes) of the MPI job this process is part of (--in-mpi); a `training` run's Allreduce
    timer loaded first."""
    from ardlab.bench import callsizes
    from ardlab.comm import detect, startup

    callsizes.load_if_asked(training=training)  # ahead of MPI: a training run's Allreduce timer
    startup.init()
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    return (detect(MPI.Get_library_version())[0].name, comm.Get_size(),
            len(set(comm.allgather(MPI.Get_processor_name()))))


def _library(args: argparse.Namespace, training: bool = False) -> tuple[str, int, int]:
    """(library, ranks, nodes): given (driver mode) or of the running MPI job (--in-mpi; `training`: one whose
    Allreduce calls are timed)."""
    if args.in_mpi:
        lib, ranks, nodes = _mpi_world(training)
        if args.library and args.library != lib:
            raise ValueError(f"--library {args.library} given, but this process runs {LIBRARIES[lib].display}")
        return lib, ranks, nodes
    if not args.library:
        raise ValueError(f"--library is required (one of: {', '.join(LIBRARIES)}) unless --in-mpi")
    if args.nodes > 1 and args.launcher != "srun":
        raise ValueError(f"--nodes {args.nodes} needs --launcher srun (the local launcher runs on one node)")
    return args.library, args.ranks, args.nodes


def _bench_allreduce(args: argparse.Namespace) -> int:
    from ardlab.bench import allreduce
    from ardlab.bench.allreduce import Plan
    from ardlab.bench.sizes import parse_sizes

    lib, ranks, nodes = _library(args)
    names = args.algorithm.split(",") if args.algorithm else None
    sweep, skip = args.sweep, args.skip_inapplicable
    if args.in_mpi and sweep:  # inside one launch only the native algorithm forced at launch can run, plus ours
        from ardlab.comm import forced_algorithm

        names = [forced_algorithm(lib, os.environ)] + ([] if args.no_own else list(OWN_ALGORITHMS))
        sweep, skip = False, True
    env = {}
    if args.thread_level:
        from ardlab.comm.startup import THREAD_LEVEL_VAR

        if args.in_mpi:
            raise ValueError(f"--thread-level needs the driver: inside a launch MPI has started already (set "
                             f"{THREAD_LEVEL_VAR}={args.thread_level} in the launch environment instead)")
        env[THREAD_LEVEL_VAR] = args.thread_level
    options = _option_values(args, Plan) | {"skip_inapplicable": skip}
    plan = allreduce.plan(lib, ranks=ranks, nodes=nodes, sizes=parse_sizes(args.sizes), algorithms=names,
                          sweep=sweep, own=not args.no_own, tuned=args.tuned, env=env, **options,
                          **_launch_settings(args))
    if args.in_mpi:
        if args.rounds != 1:
            raise ValueError("--rounds needs the driver (one launch per variant per round); without --in-mpi")
        from ardlab.rank import execute

        rows = execute(plan)
    else:
        from ardlab.bench.allreduce import comparison
        from ardlab.driver import run_comparison

        rows = run_comparison(comparison(plan, rounds=args.rounds, seed=args.seed))
    if rows is not None:  # rank 0, or the driver
        _print_latencies(rows)
        if plan.output:
            print(f"wrote {plan.output}")
    return 0


def _print_latencies(rows: list[dict]) -> None:
    """An OSU-style table per algorithm: size, then the per-rank-mean latency avg/min/max across ranks (us) of
    one round; over several rounds, the median of the round averages with its interval and, where the default
    ran in the same rounds, the speedup over it with its interval and verdict."""
    from ardlab.bench.sizes import format_size

    rounds = len({r["round"] for r in rows})
    times: dict[tuple[str, int], list[float]] = {}
    for r in sorted(rows, key=lambda r: int(r["round"])):
        times.setdefault((r["algorithm"], int(r["size_bytes"])), []).append(float(r["avg_us"]))
    for name in dict.fromkeys(r["algorithm"] for r in rows):
        mine = [r for r in rows if r["algorithm"] == name]
        r0 = mine[0]
        print(f"# {r0['library']} {r0['library_version']}, {name}, {r0['ranks']} ranks on {r0['nodes']} node(s), "
              f"{r0['dtype']}" + (f", {rounds} rounds" if rounds > 1 else ""))
        if rounds == 1:
            print(f"{'size':>10s} {'iterations':>10s} {'avg_us':>12s} {'min_us':>12s} {'max_us':>12s}")
            for r in mine:
                print(f"{format_size(int(r['size_bytes'])):>10s} {r['iterations']:>10} {float(r['avg_us']):12.2f} "
                      f"{float(r['min_us']):12.2f} {float(r['max_us']):12.2f}")
            continue
        from ardlab.stats import median_ci, speedup_ci, verdict

        print(f"{'size':>10s} {'median_us':>12s} {'ci95_us':>21s} {'level':>6s}  speedup over default (ci95)")
        for size in dict.fromkeys(int(r["size_bytes"]) for r in mine):
            x = times[name, size]
            med, lo, hi, level = median_ci(x)
            line = f"{format_size(size):>10s} {med:12.2f} {f'[{lo:.2f}, {hi:.2f}]':>21s} {level:6.1%}"
            base = times.get((DEFAULT, size))
            if base and name != DEFAULT and len(base) == len(x):
                sp, slo, shi = speedup_ci(base, x)
                line += f"  {sp:.2f} [{slo:.2f}, {shi:.2f}] {verdict(slo, shi)}"
            print(line)


TRAIN_BATCH_PER_RANK = 32  # `ardlab train` without --batch-per-rank or --global-batch (as train-tf's default)


def _train(args: argparse.Namespace) -> int:
    from ardlab.nn import trainer
    from ardlab.nn.trainer import TrainConfig

    lib, ranks, nodes = _library(args, training=True)
    options = _option_values(args, TrainConfig)
    options.update(batch_per_rank=args.batch_per_rank, global_batch=args.global_batch)
    if args.batch_per_rank is None and args.global_batch is None:
        options["batch_per_rank"] = TRAIN_BATCH_PER_RANK
    options["input_shape"] = [int(v) for v in args.input_shape.split("x")] if args.input_shape else None
    plan = trainer.plan(lib, ranks=ranks, algorithm=args.algorithm, tuned=args.tuned, options=options, nodes=nodes,
                        **_launch_settings(args))
    return _execute(plan, args.in_mpi)


def _train_tf(args: argparse.Namespace) -> int:
    from ardlab.horovod import train
    from ardlab.horovod.train import HOROVOD_KNOBS, TFConfig, require_horovod

    if args.in_mpi:
        require_horovod()
    lib, ranks, nodes = _library(args, training=True)
    settings = {**_launch_settings(args), "nodes": nodes}
    if args.in_mpi and not args.threads:  # the launcher's thread setting, as TensorFlow's thread pools
        settings["threads"] = int(os.environ.get("OMP_NUM_THREADS", "0")) or None
    plan = train.plan(lib, ranks=ranks, algorithm=args.algorithm, tuned=args.tuned,
                      options=_option_values(args, TFConfig),
                      knobs={k: getattr(args, k) for k in HOROVOD_KNOBS}, **settings)
    return _execute(plan, args.in_mpi)


def _execute(plan, in_mpi: bool) -> int:
    """A training plan: in this process (--in-mpi) or launched by the driver."""
    if in_mpi:
        from ardlab.rank import execute

        execute(plan)
        return 0
    from ardlab.driver import run_training

    return run_training(plan)


def _run(args: argparse.Namespace) -> int:
    """A workflow job: one round (or more) of a comparison group made by ``ardlab.study.commands`` (its variants
    were validated when the job was planned)."""
    from ardlab.driver import run_comparison
    from ardlab.plan import Comparison

    run_comparison(Comparison.from_json(Path(args.comparison).read_text()))
    return 0


def _rank(args: argparse.Namespace) -> int:
    from ardlab.plan import RunPlan
    from ardlab.rank import execute, finished

    execute(RunPlan.load(args.plan))
    finished(args.plan)
    return 0


def _tune(args: argparse.Namespace) -> int:
    from ardlab.analysis import read, tuned
    from ardlab.comm import library

    lib = library(args.library)
    ranges = tuned.best_ranges(read.bench(args.inputs), lib.name, args.ranks)
    out = args.output or tuned.path(Path("results") / "tuned", lib.name, args.ranks)
    tuned.write(lib.name, ranges, args.ranks, out, libmpi=args.libmpi)
    for r in ranges:
        print(f"{lib.name} x{args.ranks}: {r.lo:>11d} - {r.hi:>11d} B  {r.algorithm}")
    print(f"wrote {out}  (use: ardlab bench allreduce --library {lib.name} --tuned {out} ...; settings "
          f"{', '.join(lib.tuning_env)})")
    return 0


def _pick(args: argparse.Namespace) -> int:
    import pandas as pd

    from ardlab.analysis import picks, read
    from ardlab.results import save_frame

    table = picks.predict(read.bench(args.bench), pd.concat([pd.read_csv(f) for f in args.calls]))
    print(table.to_string(index=False))
    print(*save_frame(table, args.output))
    return 0


def _report(args: argparse.Namespace) -> int:
    from ardlab.analysis import copies, report

    if args.copies:
        paths = copies.refresh(copies.pages(Path.cwd()), Path.cwd())
    elif args.regimes is not None:
        from ardlab.analysis.versus_study import study_runs

        paths = report.regimes_report(args.regimes or study_runs()[0], args.output or "results/study")
        here = Path.cwd().resolve()
        written = {str(p.resolve().relative_to(here)) for p in map(Path, paths) if p.resolve().is_relative_to(here)}
        paths += copies.refresh(copies.pages(here), here, written)
    elif args.compare:
        paths = report.compare_runs(*args.compare, args.output or Path(args.compare[0]) / "tables")
        import pandas as pd

        print(pd.read_csv(paths[0]).to_string(index=False))
    else:
        if args.run:
            args.bench, args.train = report.run_files(args.run)
            args.results = args.results or args.run
        paths = report.report(args.bench, args.train, args.results or "results", args.figures)
    for path in paths:
        print(path)
    return 0


def _predict(args: argparse.Namespace) -> int:
    from ardlab.analysis import costmodel_report
    from ardlab.bench.sizes import parse_sizes

    ranks = [int(r) for r in args.ranks]
    if any(r < 2 for r in ranks):
        raise ValueError(f"--ranks must all be >= 2, got {args.ranks}")
    figures = args.figures or Path(args.results) / "figures" / "costmodel"
    if args.cores_per_node is not None and args.cores_per_node < 1:
        raise ValueError(f"--cores-per-node must be >= 1, got {args.cores_per_node}")
    network = None
    if (args.link_rate is None) != (args.latency is None):
        raise ValueError("--link-rate and --latency go together: a network is its rate and its latency")
    if args.link_rate is not None:
        from ardlab.analysis.costmodel import Network, parse_latency
        from ardlab.cluster.links import rate_bits_per_s

        rate_bits_per_s(args.link_rate)  # raises naming a bad rate
        network = Network(args.link_rate, parse_latency(args.latency))
    for path in costmodel_report.run(args.fit, args.results, figures, ranks, parse_sizes(args.sizes),
                                     args.cores_per_node or os.cpu_count(), fits_file=args.fits, network=network):
        print(path)
    return 0


# ----------------------------------------------------------------------------------------------- parsers


def _launch_arguments(s: argparse.ArgumentParser, *, ranks: int, threads: int | None, threads_help: str) -> None:
    """The options of a measuring subcommand that say how and where it runs (become RunPlan fields)."""
    s.add_argument("--library", choices=list(LIBRARIES), help="the MPI library (detected with --in-mpi)")
    s.add_argument("--ranks", type=int, default=ranks, help="processes to launch (driver mode)")
    s.add_argument("--nodes", type=int, default=1, help="nodes to spread them over (driver mode, --launcher srun)")
    s.add_argument("--launcher", choices=LAUNCHERS, default="local",
                   help="local: the environment's mpiexec on this machine; srun: Slurm's srun with the table's PMI "
                   "(on a cluster, or the emulated one: `ardlab cluster up`)")
    s.add_argument("--threads", type=int, default=threads, help=threads_help)
    s.add_argument("--timeout", type=float, help="seconds per launch before it is killed (driver mode)")
    s.add_argument("--in-mpi", action="store_true", help="already started by mpiexec/srun: run in place")
    s.add_argument("--output", help="write the result rows (CSV, atomically, by rank 0) there; without it the "
                   "terminal shows the result and nothing is written")
    s.add_argument("--no-progress", action="store_true")


def _info_parser(s):
    s.set_defaults(func=_info)


def _probe_parser(s):
    s.add_argument("--library", required=True, choices=list(LIBRARIES))
    s.add_argument("--algorithm", default=DEFAULT)
    s.add_argument("--ranks", type=int, default=4)
    s.add_argument("--noncommutative", action="store_true",
                   help="use a non-commutative op (MPICH: makes commutative-only algorithms report fallback)")
    s.set_defaults(func=_probe)


def _transport_parser(s):
    s.add_argument("--library", required=True, choices=list(LIBRARIES))
    s.add_argument("--ranks", type=int, default=2)
    s.add_argument("--nodes", type=int, default=1, help="nodes to spread them over (--launcher srun)")
    s.add_argument("--launcher", choices=LAUNCHERS, default="local", help="as the measuring commands'")
    s.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting for every rank (e.g. UCX_TLS=tcp, FI_PROVIDER=tcp, OMPI_MCA_pml=ucx); repeatable")
    s.add_argument("--timeout", type=float, help="seconds before the probe launch is killed (default 300)")
    s.add_argument("--image", help="--launcher srun: the Apptainer image the ranks run in (its library's build)")
    s.add_argument("--shell", action="store_true", help="print the result as shell exports (ARDLAB_TRANSPORT_*) "
                   "that hand it to the rows of an --in-mpi launch of the same shape")
    s.set_defaults(func=_transport)


def _bench_allreduce_parser(s):
    from ardlab.bench.allreduce import Plan
    from ardlab.bench.sizes import DEFAULT_SIZES
    from ardlab.comm.startup import THREAD_LEVELS

    _launch_arguments(s, ranks=2, threads=None, threads_help="thread variables of every rank (default: unset)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--algorithm", help="comma list of native algorithms of the library and/or own_* (default: default)")
    g.add_argument("--sweep", action="store_true", help="every algorithm that applies here, native and own")
    g.add_argument("--tuned", metavar="FILE", help="let the library select per size from a tuned file "
                   "(ardlab tune); algorithm label 'tuned'")
    s.add_argument("--no-own", action="store_true", help="with --sweep: native algorithms only")
    s.add_argument("--sizes", default=DEFAULT_SIZES, help="bytes: list '4,1K,64M' and/or ranges 'LO:HI[:xF]'")
    _add_options(s, Plan)  # the measurement options, declared once in the plan
    s.add_argument("--thread-level", choices=THREAD_LEVELS,
                   help="the thread level the ranks ask MPI for (default: mpi4py's, multiple, as Horovod needs); "
                        "MPICH's default Allreduce is several times slower at multiple for small messages; rows "
                        "record the level MPI provides (mpi_thread_level)")
    s.add_argument("--rounds", type=int, default=1, help="paired, interleaved rounds: each runs every algorithm "
                   "once (one launch each) in a shuffled order; the terminal shows medians with 95%% intervals")
    s.add_argument("--seed", type=int, default=0, help="seed of the rounds' orders (recorded in every row)")
    s.set_defaults(func=_bench_allreduce)


def _bench_parser(s):
    sub = s.add_subparsers(dest="bench", required=True)
    _register(sub, [("allreduce", "Allreduce latency per message size (OSU/IMB method)", _bench_allreduce_parser)])


def _add_options(group, config_class) -> None:
    """One option per field of a kind's settings (ardlab.plan.option): --name-like-this, its default, help, choices
    and type (booleans: --x/--no-x where the default is on, --x where it is off)."""
    for f in cli_options(config_class):
        type_name = option_type(f)[0]
        kw = {"default": option_default(f), "help": f.metadata.get("help")}
        if f.metadata.get("choices"):
            kw["choices"] = list(f.metadata["choices"]())
        if type_name == "bool":
            kw["action"] = argparse.BooleanOptionalAction if f.default else "store_true"
        else:
            kw["type"] = {"int": int, "float": float, "str": str}[type_name]
        group.add_argument("--" + option_name(f).replace("_", "-"), **kw)


def _option_values(args: argparse.Namespace, config_class) -> dict:
    """The values of the options ``_add_options`` made, as the fields of `config_class` hold them."""
    return {f.name: option_value(f, getattr(args, option_name(f))) for f in cli_options(config_class)}


def _train_parser(s):
    from ardlab.nn.trainer import TrainConfig

    _launch_arguments(s, ranks=1, threads=1, threads_help="BLAS/OpenMP threads per rank")
    s.add_argument("--algorithm", default=DEFAULT, help="native algorithm of the library, or own_*")
    s.add_argument("--tuned", metavar="FILE", help="the library selects per size from this tuned file")
    s.set_defaults(func=_train)
    t = s.add_argument_group("training")
    _add_options(t, TrainConfig)
    t.add_argument("--input-shape", help="synthetic data shape HxWxC (default 32x32x3); images: HxW to resize to")
    b = t.add_mutually_exclusive_group()
    b.add_argument("--batch-per-rank", type=int, help=f"images per rank and step (default {TRAIN_BATCH_PER_RANK} "
                   "when --global-batch is not given either)")
    b.add_argument("--global-batch", type=int, help="images per step over all ranks")


def _train_tf_parser(s):
    from ardlab.horovod.train import HOROVOD_KNOBS, TFConfig

    _launch_arguments(s, ranks=1, threads=None, threads_help="TensorFlow intra/inter-op and BLAS threads per rank")
    s.add_argument("--algorithm", default=DEFAULT, help="native Allreduce algorithm of the library")
    s.add_argument("--tuned", metavar="FILE", help="the library selects per size from this tuned file")
    s.set_defaults(func=_train_tf)
    t = s.add_argument_group("training")
    _add_options(t, TFConfig)
    for name, (_, _, kind, help_) in HOROVOD_KNOBS.items():
        t.add_argument("--" + name.replace("_", "-"), type=kind, help=help_)


def _tune_parser(s):
    s.add_argument("--library", required=True, choices=list(LIBRARIES))
    s.add_argument("--ranks", type=int, required=True, help="the communicator size to tune for")
    s.add_argument("--output", help="default results/tuned/<library>-r<N>.<suffix>")
    s.add_argument("--libmpi", help="MPICH: the libmpi whose built-in selection tree the file extends "
                   "(default: the mpich environment's)")
    s.add_argument("inputs", nargs="+", help="microbenchmark CSVs (ardlab bench allreduce)")
    s.set_defaults(func=_tune)


def _pick_parser(s):
    s.add_argument("--bench", nargs="+", required=True, help="microbenchmark CSVs of one scale (ranks, nodes)")
    s.add_argument("--calls", nargs="+", required=True,
                   help="the model's Allreduce calls per step (ardlab.bench.callsizes CSVs)")
    s.add_argument("--output", required=True, help="the pick file (.csv; .md beside it)")
    s.set_defaults(func=_pick)


def _report_parser(s):
    s.add_argument("--results", help="folder that gets tables/ and figures/ (default: --run, else results)")
    s.add_argument("--figures", help="folder for the figures (default <results>/figures/measured)")
    s.add_argument("--bench", nargs="*", default=[], help="microbenchmark CSVs")
    s.add_argument("--train", nargs="*", default=[], help="training summary CSVs (ardlab.nn and TensorFlow)")
    s.add_argument("--run", help="a run folder: report every CSV under its raw/ (instead of --bench/--train)")
    s.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                   help="list every significant claim of run A and whether run B agrees (reproduce tables)")
    s.add_argument("--regimes", nargs="*", metavar="RUN",
                   help="reported runs across nodes (default: the study's, results/study/runs.yaml): their claims "
                        "per regime side by side, their selections' speedups against the Allreduce share, in tables "
                        "and figures (into --output, default results/study)")
    s.add_argument("--copies", action="store_true",
                   help="rewrite the tables that README.md and docs/*.md copy (each marked `<!-- copy: PATH -->`) "
                        "from their files; --regimes does this for the tables it writes")
    s.add_argument("--output", help="with --compare: folder for reproduce*.{csv,md} (default RUN_A/tables); "
                                    "with --regimes: folder for tables/ and figures/ (default results/study)")
    s.set_defaults(func=_report)


def _predict_parser(s):
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--fit", nargs="+", help="microbenchmark CSVs to fit")
    g.add_argument("--fits", metavar="FILE", help="a costmodel_fits.csv (of an earlier run, e.g. on your cluster) "
                   "to predict from instead of fitting (no validation)")
    s.add_argument("--link-rate", help="predict for a network with links at this rate (tc notation: 100gbit, "
                   "25gbit, 800mbit), from the fits across nodes; with --latency")
    s.add_argument("--latency", help="that network's per-message latency (1us, 0.5us, 0.05ms)")
    s.add_argument("--ranks", nargs="+", default=["16", "64", "256", "1024"], help="rank counts to predict")
    s.add_argument("--sizes", default="4:1G:x4", help="message sizes to predict (bytes, as in bench)")
    s.add_argument("--results", default="results", help="folder that gets tables/ and tuned/predicted/")
    s.add_argument("--figures", help="default <results>/figures/costmodel")
    s.add_argument("--cores-per-node", type=int, help="cores of a measured node: validation points with more "
                   "ranks are reported as oversubscribed (default: this machine's core count)")
    s.set_defaults(func=_predict)


def _run_parser(s):
    s.add_argument("--comparison", required=True, metavar="FILE",
                   help="the comparison: a file of ardlab.plan.Comparison as JSON (the workflow writes one per job)")
    s.set_defaults(func=_run)


def _cluster_parser(s):
    from ardlab.cluster.__main__ import add_arguments, run

    add_arguments(s)
    s.set_defaults(func=run)


def _image_parser(s):
    from ardlab.images.__main__ import add_arguments, run

    add_arguments(s)
    s.set_defaults(func=run)


def _advise_parser(s):
    from ardlab.advise import run

    s.add_argument("--model", help="one of ardlab's models (alexnet, resnet20, vgg16, ...); or, instead, the job's own "
                   "command after --: a Python script (or -m MODULE) and its arguments, e.g. -- train.py --epochs 1")
    s.add_argument("--framework", default="tensorflow", choices=["tensorflow", "nn"],
                   help="TensorFlow + Horovod, or ardlab.nn (default %(default)s)")
    s.add_argument("--ranks", type=int, default=2, help="ranks of the job (default %(default)s)")
    s.add_argument("--nodes", type=int, default=1, help="nodes they spread over (--launcher srun)")
    s.add_argument("--launcher", default="local", choices=["local", "srun"])
    s.add_argument("--libraries", default=",".join(LIBRARIES), help="comma-separated (default: all of the table's)")
    s.add_argument("--budget", default="30m", help="wall time for all of it: 30m, 90s, 1h (default %(default)s)")
    s.add_argument("--batch-per-rank", type=int, default=16)
    s.add_argument("--rounds", type=int, default=8, help="microbenchmark rounds at most (racing)")
    s.add_argument("--check-rounds", type=int, default=5, help="paired training rounds of the check")
    s.add_argument("--bench-mib", type=float, default=run.Settings.bench_mib,
                   help="the microbenchmark's MiB reduced per size and launch (default %(default)g)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--output", default="advice", help="the run folder (default %(default)s)")
    s.add_argument("--steps", type=int, help="the job's command: the training steps one run of it makes (its calls "
                   "and times are then per step; without: per run)")
    s.add_argument("--first-call-timeout", type=float, default=run.Job.first_call_s,
                   help="the job's command: seconds after MPI_Init within which it must make a summing "
                        "MPI_Allreduce, or it is refused (default %(default)g)")
    s.add_argument("--no-progress", action="store_true")
    s.add_argument("command", nargs=argparse.REMAINDER, help="-- then the job's own command")
    s.set_defaults(func=_advise)


def _advise(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from ardlab.advise import answer, run

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    job = run.Job(args.framework, args.model, args.ranks, nodes=args.nodes, launcher=args.launcher,
                  batch_per_rank=args.batch_per_rank, command=command, steps=args.steps,
                  first_call_s=args.first_call_timeout)
    settings = run.Settings([x for x in args.libraries.split(",") if x], run.parse_budget(args.budget),
                            rounds=args.rounds, check_rounds=args.check_rounds, bench_mib=args.bench_mib,
                            seed=args.seed,
                            progress=not args.no_progress, output=Path(args.output))
    advice = run.advise(job, settings, on_answer=lambda a: run.write(a, Path(args.output)))  # each stage's answer
    written = run.write(advice, Path(args.output))
    print((Path(args.output) / "answer.md").read_text())
    print(f"wrote {len(written)} files to {args.output}: " + ", ".join(p.name for p in written))
    status = json.loads((Path(args.output) / "answer.json").read_text())["recommendation"]["status"]
    return answer.EXIT_CODES[status]  # answered 0, inconclusive 3 (docs/advise.md)


def _advise_answer_parser(s):
    s.add_argument("folder", help="the run folder of an `ardlab advise` (answer.json of schema 3 on)")
    s.set_defaults(func=_advise_answer)


def _advise_answer(args: argparse.Namespace) -> int:
    """The answer (answer.md, answer.json, the env files) made again from the run folder's rows alone."""
    from pathlib import Path

    from ardlab.advise import answer, run

    advice = run.load(Path(args.folder))
    written = answer.write(advice, Path(args.folder))
    print((Path(args.folder) / "answer.md").read_text())
    print(f"wrote {len(written)} files to {args.folder}: " + ", ".join(p.name for p in written))
    return 0


def _advise_confirm_parser(s):
    s.add_argument("folder", help="the run folder of an `ardlab advise`")
    s.add_argument("--rounds", type=int, help="paired training rounds (default: the advice's)")
    s.add_argument("--seed", type=int, help="the rounds' order (default: the advice's seed + 1000)")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=_advise_confirm)


def _advise_confirm(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ardlab.advise import confirm

    folder = Path(args.folder)
    job, check, table = confirm.confirm(folder, rounds=args.rounds, seed=args.seed, progress=not args.no_progress)
    written = confirm.write(folder, check, table, int(check["round"].nunique()), job.unit)
    print((folder / "confirm.md").read_text())
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def _libraries(args: argparse.Namespace) -> int:
    from ardlab.comm import sites
    from ardlab.comm.libraries import FAMILIES

    if args.action == "add":
        needed = ("family",) if args.module else ("family", "mpicc", "mpiexec")  # a module's PATH has the tools
        missing = [f"--{k}" for k in needed if not getattr(args, k)]
        if not args.name or missing:
            raise ValueError(f"ardlab libraries add NAME needs {', '.join(missing or ['NAME'])}"
                             + ("" if args.module else " (or --module, whose PATH has mpicc and mpiexec)"))
        path = Path(args.file) if args.file else sites.registry_files()[0]

        def tool(key: str) -> str:  # a path made absolute; a bare name stays one, found on the module's PATH
            given = getattr(args, key) or sites.MODULE_DEFAULTS[key]
            return given if args.module and "/" not in given else os.path.abspath(given)

        site = sites.Site(args.name, args.family, tool("mpicc"), tool("mpiexec"), args.display or "", str(path),
                          args.module or "")  # no display: the registry's default (sites.parse)
        print(f"registered {args.name} in {sites.add(site, path, FAMILIES)}; set up its environment with: "
              f"containers/setup-envs")
        return 0
    for lib in LIBRARIES.values():
        site = lib.site
        where = f"site, {site.source}: {sites.describe(site)}" if site else "built in"
        print(f"{lib.name:20s} {lib.display} (family {lib.family}; {where})")
        if site and sites.accepts(lib.name) is None:
            print(f"{'':20s} its build not probed yet (containers/setup-envs): the family's every algorithm offered")
        for name, why in lib.refused.items():
            print(f"{'':20s} refuses {name}: {why}")
        if site and lib.switching is None and BUILT_IN[lib.family].switching is not None:
            print(f"{'':20s} switches no algorithm inside a launch: {lib.switching_note}")
    return 0


def _libraries_parser(s):
    s.add_argument("action", choices=["list", "add"], help="list the libraries, or register a site's MPI")
    s.add_argument("name", nargs="?", help="add: the name every command will know it by (e.g. openmpi-site)")
    s.add_argument("--family", help="add: whose knobs, tuned files and proofs it shares: one of the built-in "
                                    "libraries (ardlab libraries list)")
    s.add_argument("--module", help="add: the environment module that provides it (Environment Modules or Lmod): "
                                    "loaded for its set-up and every launch")
    s.add_argument("--mpicc", help="add: its C compiler wrapper (mpi4py and Horovod are built with it; with --module "
                                   "a bare name, default mpicc, is found on the module's PATH)")
    s.add_argument("--mpiexec", help="add: its launcher (with --module: a bare name, default mpiexec, likewise)")
    s.add_argument("--display", help="add: how tables name it (default: the family's name and NAME)")
    s.add_argument("--file", help="add: the registry file to write (default: the checkout's site-libraries.toml, "
                                  "or $ARDLAB_SITE_LIBRARIES)")
    s.set_defaults(func=_libraries)


def _rank_parser(s):
    s.add_argument("--plan", required=True, help="the run plan file the driver wrote")
    s.set_defaults(func=_rank)


COMMANDS = [
    ("info", "the library/algorithm table and which environments are installed", _info_parser),
    ("libraries", "the MPI libraries ardlab knows: the three built in and a site's registered ones (add one)",
     _libraries_parser),
    ("probe", "show which internal Allreduce algorithm a forced setting really runs", _probe_parser),
    ("transport", "what carries the library's bytes within a node and between nodes, as it reports them (the probe "
                  "every row's transport columns come from)", _transport_parser),
    ("bench", "microbenchmarks", _bench_parser),
    ("train", "train a CNN with ardlab.nn, data parallel over MPI", _train_parser),
    ("train-tf", "train with TensorFlow + Horovod over the library's MPI (Horovod's synthetic-benchmark method)",
     _train_tf_parser),
    ("tune", "write the library's own per-size selection file from microbenchmark CSVs", _tune_parser),
    ("pick", "the best and worst Allreduce algorithm per library for a model's calls, from the microbenchmark",
     _pick_parser),
    ("report", "speedup tables (CSV, Markdown) and figures from result CSVs", _report_parser),
    ("predict", "fit alpha-beta-gamma cost models to microbenchmarks and predict the best Allreduce at larger "
                "scale (tables, tuned files, figures)", _predict_parser),
    ("cluster", "an emulated multi-node Slurm cluster on this machine: up, down, status, env (root)",
     _cluster_parser),
    ("image", "the Apptainer definitions proven in fresh Debian roots (root), ranks inside them under srun",
     _image_parser),
    ("advise", "which library and algorithm make this training job fastest here: its calls raced within a budget, "
               "the choice checked in training", _advise_parser),
    ("advise-confirm", "an advice's training check made again independently, beside what the advice measured",
     _advise_confirm_parser),
    ("advise-answer", "an advice's answer made again from its run folder's rows alone (nothing measured)",
     _advise_answer_parser),
    ("run", "run a workflow job: rounds of a comparison group (JSON) with the driver", _run_parser),
    ("rank", "what each launched rank runs: the plan file written by the driver", _rank_parser),
]


def _register(sub, commands) -> None:
    for name, help_text, build in commands:
        build(sub.add_parser(name, help=help_text, description=help_text))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ardlab", description="Which MPI library and Allreduce algorithm make "
                                "data-parallel CNN training fastest here? Measured.")
    _register(p.add_subparsers(dest="command", required=True), COMMANDS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError, FloatingPointError, PermissionError) as e:
        print(f"ardlab: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        return 0


if __name__ == "__main__":
    sys.exit(main())
