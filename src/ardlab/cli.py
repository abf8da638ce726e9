"""The `ardlab` command line: info, probe, bench allreduce (more subcommands join as they land)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ardlab.comm.libraries import DEFAULT, LIBRARIES, OWN_ALGORITHMS, env_prefix


def _info(args: argparse.Namespace) -> int:
    for lib in LIBRARIES.values():
        prefix = env_prefix(lib.name)
        installed = (prefix / "bin" / "mpiexec").exists()
        print(f"{lib.display} [{lib.name}]  packages: {' '.join(lib.pip_packages)}")
        print(f"  environment: {prefix} ({'installed' if installed else 'missing'})")
        print(f"  launcher: mpiexec {' '.join(lib.launcher_flags)} -n N"
              + (f"   env: {' '.join(f'{k}={v}' for k, v in lib.launcher_env.items())}" if lib.launcher_env else ""))
        print(f"  forcing adds: {' '.join(f'{k}={v}' for k, v in lib.force_env.items()) or '-'}")
        print(f"  cluster launch: {lib.pmi}")
        for alg in lib.algorithms.values():
            env = " ".join(f"{k}={v}" for k, v in alg.env.items()) or "(nothing forced)"
            extra = "; ".join(filter(None, [", ".join(alg.constraints()), alg.note]))
            print(f"    {alg.name:30s} {env}" + (f"   [{extra}]" if extra else ""))
    print("Our own algorithms (any library):")
    for alg in OWN_ALGORITHMS.values():
        extra = ", ".join(alg.constraints())
        print(f"    {alg.name:30s} {alg.description}" + (f"   [{extra}]" if extra else ""))
    return 0


def _probe(args: argparse.Namespace) -> int:
    from ardlab.comm.probe import probe

    hits = probe(args.library, args.algorithm, ranks=args.ranks, noncommutative=args.noncommutative)
    for key, n in sorted(hits.items()):
        print(f"{n:6d}  {key}")
    if not hits:
        print("no algorithm function or fallback message observed")
    return 0


def _bench_allreduce(args: argparse.Namespace) -> int:
    from ardlab.bench import allreduce as bench
    from ardlab.bench.sizes import parse_sizes

    sizes = parse_sizes(args.sizes)
    names = args.algorithm.split(",") if args.algorithm else None
    if args.in_mpi:
        from mpi4py import MPI

        from ardlab.analysis.columns import BENCH_COLUMNS, write_csv_atomic
        from ardlab.comm import detect

        lib, _ = detect(MPI.Get_library_version())
        if args.library and args.library != lib.name:
            raise ValueError(f"--library {args.library} given, but this process runs {lib.display}")
        nodes = len(set(MPI.COMM_WORLD.allgather(MPI.Get_processor_name())))
        sweep = args.sweep
        if sweep:  # inside one launch only the native algorithm forced at launch can run, plus ours
            from ardlab.comm import forced_algorithm

            names = [forced_algorithm(lib.name, os.environ)] + ([] if args.no_own else list(OWN_ALGORITHMS))
            sweep, args.skip_inapplicable = False, True
        plan = bench.make_plan(lib.name, algorithm_names=names, sweep=sweep, sizes=sizes,
                               ranks=MPI.COMM_WORLD.Get_size(), nodes=nodes, dtype=args.dtype,
                               iterations=args.iterations, warmup=args.warmup, validate=args.validate,
                               own=not args.no_own, skip_inapplicable=args.skip_inapplicable)
        rows = bench.measure(plan, progress=not args.no_progress)
        if MPI.COMM_WORLD.Get_rank() == 0:
            out = args.output or default_bench_output(lib.name, names, args.sweep, plan.ranks)
            write_csv_atomic(out, BENCH_COLUMNS, rows)
        return 0
    if not args.library:
        raise ValueError(f"--library is required (one of: {', '.join(LIBRARIES)}) unless --in-mpi")
    plan = bench.make_plan(args.library, algorithm_names=names, sweep=args.sweep, sizes=sizes, ranks=args.ranks,
                           dtype=args.dtype, iterations=args.iterations, warmup=args.warmup,
                           validate=args.validate, own=not args.no_own, tuned=args.tuned,
                           skip_inapplicable=args.skip_inapplicable)
    out = args.output or default_bench_output(args.library, plan.algorithms, args.sweep, args.ranks)
    path = bench.drive(plan, Path(out), timeout=args.timeout, progress=not args.no_progress)
    print(f"wrote {path}")
    return 0


def _train(args: argparse.Namespace) -> int:
    from ardlab.comm.libraries import algorithm
    from ardlab.nn import PARALLEL_MODES as MODES

    if args.parallel_mode not in MODES:
        raise ValueError(f"unknown parallel mode {args.parallel_mode!r}; valid: {', '.join(MODES)}")
    if args.in_mpi:
        from mpi4py import MPI

        from ardlab.comm import detect, forced_algorithm
        from ardlab.nn.trainer import TrainConfig, run

        lib, _ = detect(MPI.Get_library_version())
        own = args.algorithm if args.algorithm in OWN_ALGORITHMS else None
        cfg = TrainConfig(
            model=args.model, dataset=args.dataset, data_path=args.data_path,
            input_shape=tuple(int(v) for v in args.input_shape.split("x")) if args.input_shape else None,
            classes=args.classes, batch_per_rank=args.batch_per_rank, global_batch=args.global_batch,
            epochs=args.epochs, steps=args.steps, optimizer=args.optimizer, lr=args.lr, momentum=args.momentum,
            weight_decay=args.weight_decay, warmup_steps=args.warmup_steps, parallel_mode=args.parallel_mode,
            allreduce=own or "native", algorithm_label=forced_algorithm(lib.name, os.environ),
            bucket_bytes=int(args.bucket_mb * (1 << 20)), seed=args.seed, augment=args.augment,
            progress=not args.no_progress, checkpoint_dir=args.checkpoint_dir, resume=args.resume,
            plateau_patience=args.plateau_patience, plateau_factor=args.plateau_factor,
            early_stop_patience=args.early_stop_patience, prefetch=args.prefetch, layer_timing=args.layer_timing)
        row = run(cfg)
        if MPI.COMM_WORLD.Get_rank() == 0:
            _emit_row(row, args.output, ("model", "library", "algorithm", "parallel_mode", "ranks", "img_per_s",
                                         "final_loss", "final_accuracy", "final_top5_accuracy"))
        return 0
    if not args.library:
        raise ValueError(f"--library is required (one of: {', '.join(LIBRARIES)}) unless --in-mpi")
    algorithm(args.library, args.algorithm)  # unknown names fail here, before MPI starts
    from ardlab.comm import launch

    inner = ["-m", "ardlab.cli", "train", "--in-mpi", *args.passthrough]
    native = args.algorithm if args.algorithm not in OWN_ALGORITHMS else DEFAULT
    threads = {k: str(args.threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
    proc = launch.run(args.library, args.ranks, inner, algorithm=native,
                      extra_env={**threads, **_tuned_env(args)}, capture=False, timeout=args.timeout)
    return proc.returncode


def _emit_row(row: dict, output: str | None, shown: tuple[str, ...]) -> None:
    """Rank 0's end of a training run: the summary row to its CSV (atomically) and a line to stdout."""
    from ardlab.analysis.columns import TRAIN_COLUMNS, write_csv_atomic

    if output:
        write_csv_atomic(output, TRAIN_COLUMNS, [row])
    print(", ".join(f"{k}={row[k]}" for k in shown))


def _tuned_env(args: argparse.Namespace) -> dict[str, str]:
    """The settings of --tuned FILE (only with the default algorithm: a tuned file selects per size)."""
    if not args.tuned:
        return {}
    if args.algorithm != DEFAULT:
        raise ValueError(f"--tuned and --algorithm {args.algorithm} exclude each other")
    from ardlab.comm import library

    return library(args.library).tuned_env(args.tuned)


def _train_tf(args: argparse.Namespace) -> int:
    from ardlab.horovod.train import TFConfig, horovod_env

    knobs = horovod_env(fusion_threshold_mb=args.fusion_threshold_mb, cycle_time_ms=args.cycle_time_ms,
                        cache_capacity=args.cache_capacity, timeline=args.timeline)
    if args.in_mpi:
        from ardlab.horovod.train import run

        os.environ.update(knobs)  # before hvd.init()
        threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", "0")) or None
        cfg = TFConfig(model=args.model, dataset=args.dataset, data_path=args.data_path, image_size=args.image_size,
                       classes=args.classes, batch_per_rank=args.batch_per_rank, warmup_batches=args.warmup_batches,
                       batches_per_iter=args.batches_per_iter, iterations=args.iterations,
                       optimizer=args.optimizer, lr=args.lr, momentum=args.momentum, threads=threads,
                       seed=args.seed, save_weights=args.save_weights, progress=not args.no_progress)
        row = run(cfg)
        if row is not None:  # rank 0
            _emit_row(row, args.output, ("framework", "model", "library", "algorithm", "ranks", "img_per_s",
                                         "img_per_s_ci95", "final_loss"))
        return 0
    if not args.library:
        raise ValueError(f"--library is required (one of: {', '.join(LIBRARIES)}) unless --in-mpi")
    from ardlab.comm import launch
    from ardlab.comm.libraries import algorithm
    from ardlab.horovod.models import model_names

    if args.algorithm in OWN_ALGORITHMS:
        raise ValueError(f"{args.algorithm}: Horovod calls MPI_Allreduce itself, so only the library's native "
                         "algorithms apply to train-tf")
    algorithm(args.library, args.algorithm)  # unknown names fail here, before MPI starts
    if args.model not in model_names():
        raise ValueError(f"unknown model {args.model!r}; valid: {', '.join(model_names())}")
    inner = ["-m", "ardlab.cli", "train-tf", "--in-mpi", *args.passthrough]
    threads = {k: str(args.threads) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")} \
        if args.threads else {}
    proc = launch.run(args.library, args.ranks, inner, algorithm=args.algorithm,
                      extra_env={**threads, **knobs, **_tuned_env(args), "TF_CPP_MIN_LOG_LEVEL": "2"},
                      capture=False, timeout=args.timeout)
    return proc.returncode


def _tune(args: argparse.Namespace) -> int:
    from ardlab.analysis import read, tuned
    from ardlab.comm import library

    lib = library(args.library)
    ranges = tuned.best_ranges(read.bench(args.inputs), lib.name, args.ranks)
    out = args.output or Path("results/tuned") / f"{lib.name}-ranks{args.ranks}{lib.tuning_suffix}"
    tuned.write(lib.name, ranges, args.ranks, out, libmpi=args.libmpi)
    for r in ranges:
        print(f"{lib.name} x{args.ranks}: {r.lo:>11d} - {r.hi:>11d} B  {r.algorithm}")
    print(f"wrote {out}  (use: ardlab bench allreduce --library {lib.name} --tuned {out} ...; settings "
          f"{', '.join(lib.tuning_env)})")
    return 0


def _report(args: argparse.Namespace) -> int:
    from ardlab.analysis.report import report

    for path in report(args.bench, args.train, args.results, figures=args.figures):
        print(path)
    return 0


def _predict(args: argparse.Namespace) -> int:
    from ardlab.analysis import costmodel
    from ardlab.bench.sizes import parse_sizes

    ranks = [int(r) for r in args.ranks]
    if any(r < 2 for r in ranks):
        raise ValueError(f"--ranks must all be >= 2, got {args.ranks}")
    figures = args.figures or Path(args.results) / "figures" / "costmodel"
    if args.cores_per_node is not None and args.cores_per_node < 1:
        raise ValueError(f"--cores-per-node must be >= 1, got {args.cores_per_node}")
    for path in costmodel.run(args.fit, args.results, figures, ranks, parse_sizes(args.sizes),
                              args.cores_per_node or os.cpu_count()):
        print(path)
    return 0


def default_bench_output(library: str, names: list[str] | None, sweep: bool, ranks: int) -> Path:
    label = "sweep" if sweep else "-".join(names or [DEFAULT])
    return Path("results/raw/microbench") / library / label / f"ranks{ranks}.csv"


def build_parser() -> argparse.ArgumentParser:
    from ardlab.bench.allreduce import DTYPES
    from ardlab.bench.sizes import DEFAULT_SIZES

    p = argparse.ArgumentParser(prog="ardlab", description="Which MPI library and Allreduce algorithm make "
                                "data-parallel CNN training fastest here? Measured.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("info", help="the library/algorithm table and which environments are installed")
    s.set_defaults(func=_info)

    s = sub.add_parser("probe", help="show which internal Allreduce algorithm a forced setting really runs")
    s.add_argument("--library", required=True, choices=list(LIBRARIES))
    s.add_argument("--algorithm", default=DEFAULT)
    s.add_argument("--ranks", type=int, default=4)
    s.add_argument("--noncommutative", action="store_true",
                   help="use a non-commutative op (MPICH: makes commutative-only algorithms report fallback)")
    s.set_defaults(func=_probe)

    bench = sub.add_parser("bench", help="microbenchmarks")
    bsub = bench.add_subparsers(dest="bench", required=True)
    s = bsub.add_parser("allreduce", help="Allreduce latency per message size (OSU/IMB method)")
    s.add_argument("--library", help=f"one of {', '.join(LIBRARIES)} (detected with --in-mpi)")
    s.add_argument("--ranks", type=int, default=2, help="processes to launch (driver mode)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--algorithm", help="comma list of native algorithms of the library and/or own_* (default: default)")
    g.add_argument("--sweep", action="store_true", help="every algorithm that applies here, native and own")
    g.add_argument("--tuned", metavar="FILE", help="let the library select per size from a tuned file "
                   "(ardlab tune); algorithm label 'tuned'")
    s.add_argument("--no-own", action="store_true", help="with --sweep: native algorithms only")
    s.add_argument("--sizes", default=DEFAULT_SIZES, help="bytes: list '4,1K,64M' and/or ranges 'LO:HI[:xF]'")
    s.add_argument("--dtype", default="float32", choices=DTYPES)
    s.add_argument("--iterations", type=int, help="timed calls per size (default: by size, OSU-like)")
    s.add_argument("--warmup", type=int, help="untimed calls per size (default: a tenth of the timed ones)")
    s.add_argument("--validate", action="store_true", help="check every result against the exact sum")
    s.add_argument("--output", help="CSV path (default results/raw/microbench/<library>/<algorithm>/ranks<N>.csv)")
    s.add_argument("--timeout", type=float, help="seconds per launch before it is killed (driver mode)")
    s.add_argument("--in-mpi", action="store_true", help="already started by mpiexec/srun: measure in place")
    s.add_argument("--skip-inapplicable", action="store_true",
                   help="skip sizes an algorithm cannot run instead of failing (as --sweep does)")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=_bench_allreduce)
    s = sub.add_parser("train", help="train a CNN with ardlab.nn, data parallel over MPI")
    s.add_argument("--library", help=f"one of {', '.join(LIBRARIES)} (detected with --in-mpi)")
    s.add_argument("--ranks", type=int, default=1)
    s.add_argument("--algorithm", default=DEFAULT, help="native algorithm of the library, or own_*")
    s.add_argument("--threads", type=int, default=1, help="BLAS threads per rank")
    s.add_argument("--timeout", type=float)
    s.add_argument("--in-mpi", action="store_true", help="already started by mpiexec/srun")
    s.add_argument("--tuned", metavar="FILE", help="the library selects per size from this tuned file")
    s.set_defaults(func=_train)
    t = s.add_argument_group("training (passed to every rank)")
    t.add_argument("--model", default="simplecnn")
    t.add_argument("--dataset", default="synthetic", help="synthetic, digits, mnist, cifar10, images (class "
                   "folders of JPEG/PNG), npz (shards <split>-*.npz with x, y)")
    t.add_argument("--data-path")
    t.add_argument("--input-shape", help="synthetic data shape HxWxC (default 32x32x3); images: HxW to resize to")
    t.add_argument("--classes", type=int, default=10)
    b = t.add_mutually_exclusive_group()
    b.add_argument("--batch-per-rank", type=int)
    b.add_argument("--global-batch", type=int)
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--steps", type=int)
    t.add_argument("--optimizer", default="sgd", help="sgd, rmsprop, adam, nadam")
    t.add_argument("--lr", type=float, default=0.01)
    t.add_argument("--momentum", type=float, default=0.9)
    t.add_argument("--weight-decay", type=float, default=0.0)
    t.add_argument("--warmup-steps", type=int, default=0)
    t.add_argument("--parallel-mode", default="blocking", help="blocking, nonblocking, bucketed")
    t.add_argument("--bucket-mb", type=float, default=4.0)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--augment", action="store_true", help="random crop + horizontal flip")
    t.add_argument("--checkpoint-dir", help="write a checkpoint after every epoch (atomically, rank 0)")
    t.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in --checkpoint-dir")
    t.add_argument("--plateau-patience", type=int, default=0,
                   help="reduce the learning rate when the epoch loss stalls this many epochs (0: off)")
    t.add_argument("--plateau-factor", type=float, default=0.1)
    t.add_argument("--early-stop-patience", type=int, default=0, help="stop after this many stalled epochs (0: off)")
    t.add_argument("--prefetch", type=int, default=2, help="batches loaded ahead in a thread (0: none)")
    t.add_argument("--layer-timing", help="CSV of per-layer forward/backward/Allreduce seconds per step")
    t.add_argument("--output", help="summary row CSV (written atomically by rank 0)")
    t.add_argument("--no-progress", action="store_true")

    s = sub.add_parser("tune", help="write the library's own per-size selection file from microbenchmark CSVs")
    s.add_argument("--library", required=True, choices=list(LIBRARIES))
    s.add_argument("--ranks", type=int, required=True, help="the communicator size to tune for")
    s.add_argument("--output", help="default results/tuned/<library>-ranks<N>.<suffix>")
    s.add_argument("--libmpi", help="MPICH: the libmpi whose built-in selection tree the file extends "
                   "(default: the mpich environment's)")
    s.add_argument("inputs", nargs="+", help="microbenchmark CSVs (ardlab bench allreduce)")
    s.set_defaults(func=_tune)

    s = sub.add_parser("report", help="speedup tables (CSV, Markdown) and figures from result CSVs")
    s.add_argument("--results", default="results", help="folder that gets tables/ and figures/")
    s.add_argument("--figures", help="folder for the figures (default <results>/figures/measured)")
    s.add_argument("--bench", nargs="*", default=[], help="microbenchmark CSVs")
    s.add_argument("--train", nargs="*", default=[], help="training summary CSVs (ardlab.nn and TensorFlow)")
    s.set_defaults(func=_report)

    s = sub.add_parser("predict", help="fit alpha-beta-gamma cost models to microbenchmarks and predict the best "
                       "Allreduce at larger scale (tables, tuned files, figures)")
    s.add_argument("--fit", nargs="+", required=True, help="microbenchmark CSVs to fit")
    s.add_argument("--ranks", nargs="+", default=["16", "64", "256", "1024"], help="rank counts to predict")
    s.add_argument("--sizes", default="4:1G:x4", help="message sizes to predict (bytes, as in bench)")
    s.add_argument("--results", default="results", help="folder that gets tables/ and tuned/predicted/")
    s.add_argument("--figures", help="default <results>/figures/costmodel")
    s.add_argument("--cores-per-node", type=int, help="cores of a measured node: validation points with more "
                   "ranks are reported as oversubscribed (default: this machine's core count)")
    s.set_defaults(func=_predict)

    s = sub.add_parser("train-tf", help="train with TensorFlow + Horovod over the library's MPI (Horovod's "
                       "synthetic-benchmark method)")
    s.add_argument("--library", help=f"one of {', '.join(LIBRARIES)} (detected with --in-mpi)")
    s.add_argument("--ranks", type=int, default=1)
    s.add_argument("--algorithm", default=DEFAULT, help="native Allreduce algorithm of the library")
    s.add_argument("--timeout", type=float)
    s.add_argument("--in-mpi", action="store_true", help="already started by mpiexec/srun")
    s.add_argument("--tuned", metavar="FILE", help="the library selects per size from this tuned file")
    s.set_defaults(func=_train_tf)
    t = s.add_argument_group("training (passed to every rank)")
    t.add_argument("--threads", type=int, help="TensorFlow intra/inter-op threads per rank")
    t.add_argument("--model", default="resnet20", help="an ardlab.nn model (same architecture, e.g. resnet20, "
                   "resnet50) or keras.applications': keras_resnet50, keras_vgg16, keras_inceptionv3, "
                   "keras_mobilenetv2, keras_densenet121")
    t.add_argument("--dataset", default="synthetic", help="synthetic, digits, mnist, cifar10")
    t.add_argument("--data-path")
    t.add_argument("--image-size", type=int, help="synthetic images are SIZExSIZEx3 (default 32; 224 for "
                   "keras.applications models)")
    t.add_argument("--classes", type=int, help="synthetic classes (default 10; 1000 for keras.applications)")
    t.add_argument("--batch-per-rank", type=int, default=32)
    t.add_argument("--warmup-batches", type=int, default=2)
    t.add_argument("--batches-per-iter", type=int, default=5)
    t.add_argument("--iterations", type=int, default=5, help="timed iterations (img/s mean and 95%% interval)")
    t.add_argument("--optimizer", default="sgd", help="sgd, rmsprop, adam, nadam")
    t.add_argument("--lr", type=float, default=0.01)
    t.add_argument("--momentum", type=float, default=0.9)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--fusion-threshold-mb", type=float, help="HOROVOD_FUSION_THRESHOLD (Horovod: 128)")
    t.add_argument("--cycle-time-ms", type=float, help="HOROVOD_CYCLE_TIME (Horovod: 1)")
    t.add_argument("--cache-capacity", type=int, help="HOROVOD_CACHE_CAPACITY (Horovod: 1024)")
    t.add_argument("--timeline", help="write a Horovod timeline (JSON) to this file")
    t.add_argument("--save-weights", help="each rank saves its final weights (.npz; '{rank}' in the name)")
    t.add_argument("--output", help="summary row CSV (written atomically by rank 0)")
    t.add_argument("--no-progress", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.passthrough = _strip_driver_options(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, RuntimeError, FloatingPointError) as e:
        print(f"ardlab: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and the like
        return 0


def _strip_driver_options(argv: list[str]) -> list[str]:
    """The training options of a `train` command line, without the driver's own (library, ranks, ...)."""
    # --algorithm stays: the ranks need it to pick our own Allreduce (a native one is forced by the launch env).
    drop_with_value = {"--library", "--ranks", "--threads", "--timeout", "--tuned"}
    out, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
            continue
        key = a.split("=", 1)[0]
        if key in drop_with_value:
            skip = "=" not in a
            continue
        if key == "--in-mpi":
            continue
        out.append(a)
    return out


if __name__ == "__main__":
    sys.exit(main())
