"""The training loop of `ardlab train-tf`: TensorFlow 2 + Horovod data parallelism over the library's MPI.

Runs inside MPI (one process per rank). Gradients are averaged by ``hvd.DistributedGradientTape`` (Keras 2 /
tf_keras, never Keras 3's optimizer wrapper, which does not average), initial weights are broadcast from rank 0
before the first step. Timing follows Horovod's synthetic benchmark: warm-up batches, then timed iterations of
several batches each; img/s is the global rate with a 95% interval over iterations. The summary row has the
same columns as `ardlab train` and is written atomically by the caller.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from ardlab.comm.libraries import DEFAULT
from ardlab.nn.trainer import TrainingOptions, optimizer_names
from ardlab.plan import RunPlan, check_algorithm, option, options_of, workflow_default
from ardlab.results import mib_bytes

# The fusion threshold ardlab runs Horovod at wherever a user does not choose one (the study's horovod section, the
# calls `ardlab advise` and `ardlab callsizes` learn): 64 MiB, half Horovod's own 128, as the study's runs had it.
FUSION_THRESHOLD_MB = 64

# Horovod's knobs, read when it initialises (they set the message sizes MPI sees): the option (`ardlab train-tf
# --fusion-threshold-mb`, the workflow's horovod section) -> its variable, how a value is written there, the option's
# type and help (None: Horovod's default).
HOROVOD_KNOBS = {
    "fusion_threshold_mb": ("HOROVOD_FUSION_THRESHOLD", lambda v: str(mib_bytes(v)), float,
                            "HOROVOD_FUSION_THRESHOLD in MiB (Horovod: 128)"),
    "cycle_time_ms": ("HOROVOD_CYCLE_TIME", str, float, "HOROVOD_CYCLE_TIME (Horovod: 1)"),
    "cache_capacity": ("HOROVOD_CACHE_CAPACITY", str, int, "HOROVOD_CACHE_CAPACITY (Horovod: 1024)"),
    "timeline": ("HOROVOD_TIMELINE", str, str, "write a Horovod timeline (JSON) to this file"),
}


def _models():
    from ardlab.horovod.models import model_names

    return model_names()


def _datasets():
    from ardlab.nn.data import DATASETS

    return [d for d in DATASETS if d not in ("images", "npz")]


# ardlab.nn's optimizers (ardlab.nn.optim.OPTIMIZERS, the one registry) that TensorFlow + Horovod offers: the Keras
# class of each. An optimizer ardlab.nn has and this lacks is refused when a run's options are read, naming it.
KERAS_OPTIMIZERS = {"sgd": "SGD", "adam": "Adam", "rmsprop": "RMSprop", "nadam": "Nadam"}


def tf_optimizer_names() -> list[str]:
    """The optimizers of ardlab.nn's registry that train-tf offers (KERAS_OPTIMIZERS)."""
    return [n for n in optimizer_names() if n in KERAS_OPTIMIZERS]


@dataclass
class TFConfig(TrainingOptions):
    """The settings of a TensorFlow + Horovod training run: the shared ones (ardlab.nn.trainer.TrainingOptions), its
    data sets and optimizers narrowed to those it has, and its own; each is also an option of `ardlab train-tf` (made
    from the field; ``cli=False``: not offered there, or in another form)."""

    dataset: str = option("synthetic", choices=_datasets)
    optimizer: str = option("sgd", choices=tf_optimizer_names)
    model: str = option("resnet20", "an ardlab.nn model (same architecture) or keras.applications' (keras_*)",
                        _models)
    image_size: int | None = option(None, "synthetic images are SIZExSIZEx3 (default 32; 224 for keras.applications "
                                    "models)", schema=True, minimum=8)
    classes: int | None = option(None, "synthetic classes (default 10; 1000 for keras.applications)")
    # The workflow's groups run shorter than a command line's default run (workflow_default).
    batch_per_rank: int = option(32, schema=True, workflow_default=16, minimum=1)
    warmup_batches: int = option(2, schema=True, minimum=0)
    batches_per_iter: int = option(5, schema=True, workflow_default=3, minimum=1)
    iterations: int = option(5, "timed iterations (img/s mean and 95%% interval)", schema=True, workflow_default=3,
                             minimum=1)
    compute_batches: int = option(0, "then time this many batches without the Allreduce (each rank's compute alone, "
                                  "same placement, one untimed first): the row's compute_s and allreduce_s say how "
                                  "much of a step the Allreduce adds (default 0: not measured)", schema=True,
                                  minimum=0)
    threads: int | None = option(None, cli=False)  # --threads (a launch setting)
    save_weights: str | None = option(None, "each rank saves its final weights (.npz; '{rank}' in the name)")

    def __post_init__(self):
        if self.optimizer not in tf_optimizer_names():
            lacks = " (ardlab.nn has it; TensorFlow + Horovod here does not)" if self.optimizer in optimizer_names() \
                else ""
            raise ValueError(f"optimizer {self.optimizer!r}{lacks}; train-tf offers {', '.join(tf_optimizer_names())}")


def horovod_env(**knobs) -> dict[str, str]:
    """Environment variables for the Horovod knobs that are set (None = Horovod's default)."""
    env = {}
    for key, value in knobs.items():
        if key not in HOROVOD_KNOBS:
            raise ValueError(f"unknown Horovod knob {key!r}; valid: {', '.join(HOROVOD_KNOBS)}")
        if value is not None:
            name, fmt = HOROVOD_KNOBS[key][:2]
            env[name] = fmt(value)
    env.setdefault("HOROVOD_AUTOTUNE", "0")  # a fixed configuration, or the measurements mean nothing
    return env


def plan(library_name: str, *, ranks: int, algorithm: str = DEFAULT, tuned: str | None = None,
         options: dict, knobs: dict | None = None, **run) -> RunPlan:
    """The validated run plan of TensorFlow + Horovod training (`options`: TFConfig fields; `knobs`: Horovod's,
    see ``horovod_env``; `run`: launch fields)."""
    from ardlab.horovod.models import model_names

    name = check_algorithm(library_name, algorithm, tuned, own=False)
    model = options.get("model", TFConfig.model)
    if model not in model_names():
        raise ValueError(f"unknown model {model!r}; valid: {', '.join(model_names())}")
    opts = options_of(TFConfig, options, "train-tf")
    env = {**horovod_env(**(knobs or {})), "TF_CPP_MIN_LOG_LEVEL": "2"}
    given = run.pop("env", None) or {}
    clash = sorted(set(given) & set(env))
    if clash:
        raise ValueError(f"setting {clash[0]} is Horovod's knob here; pass it as a knob")
    env = {**given, **env}
    return RunPlan("horovod", library_name, ranks, algorithm=name, tuned=tuned, options=opts, env=env, **run)


def job_plan(library_name: str, *, ranks: int, model: str, timed_steps: int, batch_per_rank: int | None = None,
             setting: dict | None = None, **run) -> RunPlan:
    """A training job's plan as ``advise`` and the call counter run it (ardlab.programs): `timed_steps` timed steps
    after one warm-up batch, of `model` on synthetic data, `batch_per_rank` images a rank (None: the workflow's
    default); `setting`: Horovod's knobs that shape its calls (``call_setting``'s; None: the fusion threshold the
    study's runs had); `run`: the plan's fields."""
    return plan(library_name, ranks=ranks, knobs=setting or {"fusion_threshold_mb": FUSION_THRESHOLD_MB},
                options={"model": model,
                         "batch_per_rank": batch_per_rank or workflow_default(TFConfig, "batch_per_rank"),
                         **ask_steps(timed_steps)}, **run)


def on_rank(plan: RunPlan, comm, label: str | None) -> dict | None:
    """The program's launch on this rank (ardlab.programs): a training run, Horovod started on `comm` (None:
    COMM_WORLD) and shut down after it when given one; its row on rank 0, labelled `label` (None: the algorithm the
    launch forces)."""
    os.environ.update(plan.env)  # Horovod's knobs, before hvd.init() (in-mpi runs have them nowhere else)
    return run(TFConfig(**plan.options, threads=plan.threads, progress=plan.progress), comm=comm,
               algorithm_label=label)


def steps_run(options: dict) -> int:
    """The training steps a plan with these options runs, warm-up included (the call counter's divisor)."""
    return int(options.get("warmup_batches", 0)) + int(options["iterations"]) * int(options["batches_per_iter"])


def ask_steps(timed: int) -> dict:
    """The options that ask for `timed` timed steps after one warm-up batch, as one timed iteration."""
    return {"warmup_batches": 1, "batches_per_iter": timed, "iterations": 1}


def call_setting(plan: RunPlan) -> str:
    """The settings that shape a plan's Allreduce calls: Horovod's fusion threshold."""
    return f"fusion_threshold_mb={int(plan.env.get('HOROVOD_FUSION_THRESHOLD', 0)) / 2**20:g}"


def require_horovod() -> None:
    """RuntimeError naming the fix when this environment lacks TensorFlow, Horovod or mpi4py (checked without
    loading them)."""
    import importlib.util

    missing = [m for m in ("tensorflow", "horovod", "mpi4py") if importlib.util.find_spec(m) is None]
    if missing:
        raise RuntimeError(f"this environment ({sys.prefix}) has no TensorFlow/Horovod (missing: "
                           f"{', '.join(missing)}); set it up with containers/install-env LIBRARY PREFIX")


def _import_horovod():
    require_horovod()
    from ardlab.horovod import models  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow loads)

    try:
        import horovod.tensorflow as hvd
        import tensorflow as tf
    except ImportError as e:
        raise RuntimeError(f"this environment ({sys.prefix}) has no TensorFlow/Horovod ({e}); set it up with "
                           "containers/install-env LIBRARY PREFIX") from e
    if not hvd.mpi_built():
        raise RuntimeError("Horovod in this environment was built without MPI")
    return tf, hvd


def _dataset(cfg: TFConfig, global_batch: int):
    from ardlab.horovod.models import APPLICATIONS
    from ardlab.nn import data

    app = cfg.model in APPLICATIONS
    if cfg.dataset == "synthetic":
        side = cfg.image_size or (224 if app else 32)
        classes = cfg.classes or (1000 if app else 10)
        # Enough distinct samples for a few batches; the Horovod benchmark reuses one random batch.
        return data.synthetic((side, side, 3), classes, n=max(4 * global_batch, 256), seed=cfg.seed)
    if cfg.image_size or cfg.classes:
        raise ValueError("--image-size and --classes apply to synthetic data only")
    return data.load(cfg.dataset, cfg.data_path, "train")


def _compute_only(tf, hvd, cfg: TFConfig, model, loss_fn, opt, batches) -> float:
    """Seconds per batch of each rank's compute alone (forward, backward, update; no Allreduce), averaged over the
    ranks: one untimed batch (tracing), then cfg.compute_batches timed. The ranks start together and end together
    (Horovod Allreduces outside the timed span)."""
    from ardlab.horovod.models import plain_step

    local_step = plain_step(tf, model, loss_fn, opt)
    float(local_step(*next(batches)))
    hvd.allreduce(tf.constant(0.0), op=hvd.Sum).numpy()  # every rank starts the timed span together
    t0 = time.perf_counter()
    for _ in range(cfg.compute_batches):
        float(local_step(*next(batches)))
    per_batch = (time.perf_counter() - t0) / cfg.compute_batches
    return float(hvd.allreduce(tf.constant(per_batch, tf.float64), op=hvd.Average).numpy())


def run(cfg: TFConfig, comm=None, algorithm_label: str | None = None) -> dict | None:
    """Train; return the summary row on rank 0 (None on the other ranks). With `comm` (an mpi4py communicator, e.g.
    the one a switch of the algorithm returns, ardlab.comm.switch) Horovod starts on it and shuts down at the end, so
    that the next run of the launch starts it again; `algorithm_label` names the algorithm in the row (default: the
    one the launch forces)."""
    from ardlab.horovod import models

    if cfg.batch_per_rank < 1 or cfg.iterations < 1 or cfg.batches_per_iter < 1 or cfg.warmup_batches < 0 \
            or cfg.compute_batches < 0:
        raise ValueError("batch per rank, iterations and batches per iteration must be >= 1, warm-up and compute "
                         "batches >= 0")
    if cfg.model not in models.model_names():  # before TensorFlow takes seconds to load
        raise ValueError(f"unknown model {cfg.model!r}; valid: {', '.join(models.model_names())}")
    tf, hvd = _import_horovod()
    if cfg.threads and tf.config.threading.get_intra_op_parallelism_threads() != cfg.threads:
        # (a second run in one launch finds them set: TensorFlow refuses to change them once it has started)
        tf.config.threading.set_intra_op_parallelism_threads(cfg.threads)
        tf.config.threading.set_inter_op_parallelism_threads(cfg.threads)
    if comm is None:
        hvd.init()
        return _train(tf, hvd, cfg, algorithm_label)
    hvd.init(comm=comm)
    try:
        return _train(tf, hvd, cfg, algorithm_label)
    finally:
        hvd.shutdown()


def _optimizer(tf, cfg: TFConfig):
    """The Keras optimizer `cfg` names (KERAS_OPTIMIZERS; TFConfig refused any other), at its learning rate."""
    make = getattr(tf.keras.optimizers, KERAS_OPTIMIZERS[cfg.optimizer])
    return make(cfg.lr, momentum=cfg.momentum) if cfg.optimizer == "sgd" else make(cfg.lr)


def _distributed_step(tf, hvd, model, loss_fn, opt, classes: int):
    """One training step whose gradients Horovod averages over the ranks: (loss, accuracy, top-5) of its batch."""

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
        top5 = tf.reduce_mean(tf.cast(tf.math.in_top_k(y, logits, min(5, classes)), tf.float32))
        return loss, acc, top5

    return step


def _feed(tf, train, global_batch: int, rank: int, size: int, seed: int):
    """This rank's share of each global batch, epoch after epoch, as tensors."""
    from ardlab.nn import data

    epoch = 0
    while True:
        for x, y in data.batches(train, global_batch, rank, size, epoch, seed):
            yield tf.constant(x), tf.constant(y.astype(np.int64))
        epoch += 1


def _train(tf, hvd, cfg: TFConfig, algorithm_label: str | None) -> dict | None:
    """run()'s training, once Horovod has started."""
    from mpi4py import MPI

    from ardlab.comm import calltimer, detect, forced_algorithm
    from ardlab.comm.libraries import knobs_in_force
    from ardlab.horovod import models
    from ardlab.nn import losses
    from ardlab.results import summary_row, utc_now

    rank, size = hvd.rank(), hvd.size()
    lib, version = detect(MPI.Get_library_version())
    global_batch = cfg.batch_per_rank * size
    train = _dataset(cfg, global_batch)
    if len(train) < global_batch:
        raise ValueError(f"data set {train.name} has {len(train)} samples, fewer than one global batch "
                         f"({global_batch})")
    tf.keras.utils.set_random_seed(cfg.seed)
    model = models.build(cfg.model, train.x.shape[1:], train.classes)
    if model.output_shape[1:] != (train.classes,):
        raise ValueError(f"model {cfg.model} outputs {model.output_shape[1:]}, data has {train.classes} classes")
    opt = _optimizer(tf, cfg)
    # keras.applications end in softmax unless told otherwise; ours give logits.
    from_logits = model.layers[-1].get_config().get("activation") != "softmax"
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=from_logits)
    step = _distributed_step(tf, hvd, model, loss_fn, opt, train.classes)
    hvd.broadcast_variables(model.variables, root_rank=0)  # same start everywhere, before any step
    batches = _feed(tf, train, global_batch, rank, size, cfg.seed)
    total = cfg.warmup_batches + cfg.iterations * cfg.batches_per_iter
    bar = None
    if cfg.progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=f"{cfg.model} tf x{size}", unit="step", file=sys.stderr)
    started = utc_now()
    loss = acc = top5 = float("nan")

    def one():
        nonlocal loss, acc, top5
        loss_t, acc_t, top5_t = step(*next(batches))
        loss, acc, top5 = float(loss_t), float(acc_t), float(top5_t)  # synchronises, so times are real
        losses.check_loss(loss, f"rank {rank}", cfg.lr)
        if bar:
            bar.update()
            bar.set_postfix(loss=f"{loss:.3f}", acc=f"{acc:.3f}")

    for _ in range(cfg.warmup_batches):
        one()
    rates = []
    timer0 = calltimer.read()  # the Allreduce timer around the timed batches (Horovod's background thread calls)
    for _ in range(cfg.iterations):
        t0 = time.perf_counter()
        for _ in range(cfg.batches_per_iter):
            one()
        dt = time.perf_counter() - t0
        rates.append(global_batch * cfg.batches_per_iter / dt)
    timed_batches = cfg.iterations * cfg.batches_per_iter
    in_allreduce = None if timer0 is None else [calltimer.read() - timer0]
    if bar:
        bar.close()
    final = hvd.allreduce(tf.constant([loss, acc, top5], tf.float64), op=hvd.Average).numpy()
    if cfg.save_weights:
        from ardlab.results import atomic_open

        with atomic_open(cfg.save_weights.format(rank=rank), "wb") as f:
            np.savez(f, *[v.numpy() for v in model.weights])
    timed_s = sum(global_batch * cfg.batches_per_iter / r for r in rates)  # seconds of the timed batches
    # per timed batch (one Reading over them all, divided), every rank's, gathered by Horovod (its own thread)
    per_batch = None if in_allreduce is None else [calltimer.Reading(in_allreduce[0].seconds / timed_batches,
                                                                     in_allreduce[0].calls / timed_batches)]
    steps = calltimer.step_fields(timed_s / timed_batches, per_batch, hvd.allgather_object)
    compute_s = _compute_only(tf, hvd, cfg, model, loss_fn, opt, batches) * cfg.iterations * cfg.batches_per_iter \
        if cfg.compute_batches else None
    if rank != 0:
        return None
    # Horovod overlaps its Allreduce with backprop: what it adds to the timed batches is their time less the same
    # batches' compute alone (compute_batches, measured after them); empty without those, never a guess.
    return summary_row(
        rates=rates, loss=final[0], accuracy=final[1], top5=final[2], compute_s=compute_s,
        allreduce_s=timed_s - compute_s if compute_s is not None else None, wait_s=None, framework="tensorflow",
        model=cfg.model, dataset=train.name, library=lib.name, library_version=version,
        algorithm=algorithm_label or forced_algorithm(lib.name, os.environ), parallel_mode="horovod", ranks=size,
        batch_per_rank=cfg.batch_per_rank, steps=total, knobs=knobs_in_force(), started_at=started,
        backend="tensorflow", **steps)
