"""The training loop of `ardlab train`: data-parallel SGD-family training with timing and a tidy summary row.

Runs inside MPI (one process per rank). Rank 0 shows a progress bar (loss, accuracy, img/s) and writes the
summary row atomically; a NaN or exploding loss stops the run with a clear error and writes nothing.
Per epoch: the mean loss over ranks drives reduce-on-plateau and early stopping, and rank 0 writes a
checkpoint (``ardlab.nn.checkpoint``) from which ``resume`` continues with the same result.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ardlab.comm.libraries import DEFAULT
from ardlab.plan import RunPlan, check_algorithm, option, options_of, workflow_default
from ardlab.results import utc_now


def _models():
    from ardlab.nn.models import MODELS

    return list(MODELS)


def _datasets():
    from ardlab.nn.data import DATASETS

    return DATASETS


def optimizer_names():
    """The optimizers a training run may name (ardlab.nn.optim; TensorFlow + Horovod offers the same)."""
    from ardlab.nn.optim import OPTIMIZERS

    return list(OPTIMIZERS)


def _parallel_modes():
    from ardlab.nn import PARALLEL_MODES

    return PARALLEL_MODES


def _backends():
    from ardlab.nn.backend import CHOICES

    return CHOICES


@dataclass
class TrainingOptions:
    """The settings both frameworks' training runs share (ardlab.nn's TrainConfig, TensorFlow + Horovod's TFConfig in
    ardlab.horovod.train), declared once; a framework narrows a field's choices by declaring it again."""

    dataset: str = option("synthetic", "images: class folders of JPEG/PNG; npz: shards <split>-*.npz with x, y",
                          _datasets)
    data_path: str | None = option(None)
    optimizer: str = option("sgd", choices=optimizer_names)
    lr: float = option(0.01)
    momentum: float = option(0.9)
    seed: int = option(0)
    progress: bool = option(True, cli=False)  # --no-progress


@dataclass
class TrainConfig(TrainingOptions):
    """The settings of an ardlab.nn training run: each is also an option of `ardlab train` (made from the field;
    ``cli=False``: not offered there, or offered in another form)."""

    model: str = option("simplecnn", choices=_models)
    input_shape: tuple | None = option(None, cli=False)  # --input-shape HxWxC (synthetic only)
    classes: int = option(10)
    synthetic_size: int = option(1024, "samples of the synthetic data set")
    # --batch-per-rank | --global-batch on the command line
    batch_per_rank: int | None = option(None, cli=False, schema=True, workflow_default=16, minimum=1)
    global_batch: int | None = option(None, cli=False)
    epochs: int = option(1)
    steps: int | None = option(None, "stop after this many steps (overrides --epochs)", schema=True, workflow_default=8,
                               minimum=2)
    weight_decay: float = option(0.0)
    warmup_steps: int = option(0)
    parallel_mode: str = option("blocking", choices=_parallel_modes)
    allreduce: str = option("native", cli=False)  # native (the library's algorithm in force) or own_* (--algorithm)
    algorithm_label: str = option("default", cli=False)  # the native algorithm forced at launch (for the summary row)
    bucket_bytes: int = option(4 << 20, "bucketed mode: gradients per Allreduce, MiB", schema=True, mib=True,
                               exclusiveMinimum=0)
    augment: bool = option(False, "random crop + horizontal flip")
    evaluate: bool = option(True, "after training, the test set's accuracy (digits, mnist, cifar10)")
    checkpoint_dir: str | None = option(None, "write a checkpoint after every epoch (atomically, rank 0)")
    resume: bool = option(False, "continue from the newest checkpoint in --checkpoint-dir")
    plateau_patience: int = option(0, "reduce the learning rate when the epoch loss stalls this many epochs (0: off)")
    plateau_factor: float = option(0.1)
    early_stop_patience: int = option(0, "stop after this many stalled epochs (0: off)")
    prefetch: int = option(2, "batches loaded ahead in a thread (0: none)")
    layer_timing: str | None = option(None, "CSV of per-layer forward/backward/Allreduce seconds per step")
    backend: str = option("auto", "compute backend of the layers: onednn (oneDNN's primitives: Conv2D, Dense, "
                          "MaxPool2D, BatchNormalization, ReLU, Add; the rest NumPy), numpy (NumPy + BLAS, the "
                          "reference), or auto (default: onednn where its library loads, numpy where not; the row "
                          "records which ran)", _backends, schema=True)


def plan(library_name: str, *, ranks: int, algorithm: str = DEFAULT, tuned: str | None = None,
         options: dict, **run) -> RunPlan:
    """The validated run plan of ardlab.nn training (`options`: TrainConfig fields; `run`: launch fields)."""

    name = check_algorithm(library_name, algorithm, tuned, own=True)
    opts = options_of(TrainConfig, options, "training")  # the model, parallel mode, backend, ... from their fields
    if opts.get("input_shape") is not None:
        opts["input_shape"] = list(opts["input_shape"])
    return RunPlan("train", library_name, ranks, algorithm=name, tuned=tuned, options=opts, **run)


def job_plan(library_name: str, *, ranks: int, model: str, timed_steps: int, batch_per_rank: int | None = None,
             setting: dict | None = None, **run) -> RunPlan:
    """A training job's plan as ``advise`` and the call counter run it (ardlab.programs): `timed_steps` timed steps
    after one untimed, of `model` on synthetic data, `batch_per_rank` images a rank (None: the workflow's default);
    `setting`: the options that shape its calls (``call_setting``'s; None: the defaults); `run`: the plan's fields."""
    return plan(library_name, ranks=ranks, options={
        "model": model, "dataset": "synthetic",
        "batch_per_rank": batch_per_rank or workflow_default(TrainConfig, "batch_per_rank"),
        **ask_steps(timed_steps), **(setting or {})}, **run)


def on_rank(plan: RunPlan, comm, label: str | None) -> dict | None:
    """The program's launch on this rank (ardlab.programs): a training run on `comm` (None: COMM_WORLD); its row on
    rank 0, labelled `label` (None: the algorithm the launch forces)."""
    import os

    from mpi4py import MPI

    from ardlab.comm import OWN_ALGORITHMS, forced_algorithm

    opts = dict(plan.options)
    if opts.get("input_shape") is not None:
        opts["input_shape"] = tuple(opts["input_shape"])
    own = plan.algorithm if plan.algorithm in OWN_ALGORITHMS else None
    cfg = TrainConfig(**opts, allreduce=own or "native",
                      algorithm_label=label or forced_algorithm(plan.library, os.environ), progress=plan.progress)
    row = run(cfg, comm)
    return row if MPI.COMM_WORLD.Get_rank() == 0 else None


def steps_run(options: dict) -> int:
    """The training steps a plan with these options runs, its untimed first step included (the call counter's
    divisor). `warmup_steps` is the learning rate's warm-up, within those steps, not steps of its own."""
    if not options.get("steps"):
        raise ValueError("a counted ardlab.nn run needs a step count (steps), not epochs")
    return int(options["steps"])


def ask_steps(timed: int) -> dict:
    """The options that ask for `timed` timed steps after one untimed step (the first step is never timed)."""
    return {"steps": timed + 1}


def call_setting(plan: RunPlan) -> str:
    """The settings that shape a plan's Allreduce calls: its parallel mode (and bucket)."""
    mode = plan.options.get("parallel_mode", "blocking")
    bucket = f";bucket_bytes={plan.options['bucket_bytes']}" if mode == "bucketed" else ""
    return f"parallel_mode={mode}{bucket}"


@dataclass
class _Run:
    """A training run's state between set-up, epochs and the summary."""

    cfg: TrainConfig
    comm: object
    rank: int
    size: int
    library: str
    version: str
    train: object  # the training data set
    global_batch: int
    model: object
    opt: object
    schedule: object
    plateau: object
    early: object
    loss_fn: object
    dp: object
    total: int  # steps to run
    step: int = 0
    epoch: int = 0
    bar: object = None
    compute_s: float = 0.0
    update_s: float = 0.0
    times: list = field(default_factory=list)
    loss: float = float("nan")
    acc: float = float("nan")
    top5: float = float("nan")
    stopped_early: bool = False
    started: str = ""
    backend: str = ""  # the one that ran (cfg.backend resolved: auto -> onednn or numpy)
    # the Allreduce timer (ardlab.comm.calltimer): whether it times this run's calls (MPI's own Allreduce, the
    # interposer loaded), and each step's seconds and calls inside Allreduce
    timed: bool = False
    in_allreduce: list = field(default_factory=list)


def run(cfg: TrainConfig, comm=None) -> dict:
    """Train inside MPI; return the summary row (every rank; rank 0 writes it)."""
    r = _setup(cfg, comm)
    while r.step < r.total and not r.stopped_early:
        if not _epoch(r):
            break
        r.epoch += 1
    if r.bar:
        r.bar.close()
    r.dp.close()
    if cfg.layer_timing and r.rank == 0:
        _write_layer_timing(cfg.layer_timing, r.model, r.dp, r.update_s, max(len(r.times), 1))
    return _summary(r)


def _setup(cfg: TrainConfig, comm) -> _Run:
    """Data, model (weights broadcast from rank 0), optimizer and schedules, data parallelism, a checkpoint to
    resume from, the progress bar."""
    from mpi4py import MPI

    from ardlab.comm import calltimer, detect
    from ardlab.nn import checkpoint, data, initializers, losses, models, optim
    from ardlab.nn.parallel import DataParallel

    comm = comm or MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    lib, version = detect(MPI.Get_library_version())
    if (cfg.batch_per_rank is None) == (cfg.global_batch is None):
        raise ValueError("give exactly one of batch_per_rank and global_batch")
    global_batch = cfg.global_batch or cfg.batch_per_rank * size
    if global_batch % size:
        raise ValueError(f"global batch {global_batch} is not divisible by {size} ranks")
    train = data.load(cfg.dataset, cfg.data_path, "train", cfg.input_shape, cfg.classes, cfg.synthetic_size, cfg.seed)
    if len(train) < global_batch:
        raise ValueError(f"data set {train.name} has {len(train)} samples, fewer than one global batch "
                         f"({global_batch})")
    initializers.seed(cfg.seed)
    from ardlab.nn import backend

    backend_name = backend.resolve(cfg.backend)
    with backend.use(backend_name):  # OnednnUnavailable (naming the library) where oneDNN does not load
        model = models.get(cfg.model, train.x.shape[1:], train.classes)
    if model.output_shape != (train.classes,):
        raise ValueError(f"model {cfg.model} outputs {model.output_shape}, data has {train.classes} classes")
    opt_kwargs = {"lr": cfg.lr, "weight_decay": cfg.weight_decay}
    if cfg.optimizer == "sgd":
        opt_kwargs["momentum"] = cfg.momentum
    dp = DataParallel(model, comm, cfg.parallel_mode, cfg.allreduce, cfg.bucket_bytes)
    dp.broadcast_weights()
    if cfg.layer_timing:
        model.timing = {}
    steps_per_epoch = len(train) // global_batch
    r = _Run(cfg=cfg, comm=comm, rank=rank, size=size, library=lib.name, version=version, train=train,
             global_batch=global_batch, model=model, opt=optim.get(cfg.optimizer, **opt_kwargs),
             schedule=optim.warmup_step_schedule(cfg.lr, cfg.warmup_steps),
             plateau=(optim.ReduceLROnPlateau(cfg.plateau_factor, cfg.plateau_patience) if cfg.plateau_patience
                      else None),
             early=optim.EarlyStopping(cfg.early_stop_patience) if cfg.early_stop_patience else None,
             loss_fn=losses.get("categorical_crossentropy"), dp=dp,
             total=cfg.steps if cfg.steps is not None else cfg.epochs * steps_per_epoch)
    if cfg.resume:
        if not cfg.checkpoint_dir:
            raise ValueError("resume needs a checkpoint directory")
        path = checkpoint.latest(cfg.checkpoint_dir)
        if path is None:
            raise FileNotFoundError(f"no checkpoint to resume from in {cfg.checkpoint_dir}")
        meta = checkpoint.load(path, model, r.opt)
        r.epoch, r.step = meta["epoch"] + 1, meta["step"]
        for obj, key in ((r.plateau, "plateau"), (r.early, "early")):
            if obj is not None and key in meta["extra"]:
                obj.restore(meta["extra"][key])
    if cfg.progress and rank == 0:
        from tqdm import tqdm

        r.bar = tqdm(total=r.total, initial=r.step, desc=f"{cfg.model} x{size}", unit="step", file=sys.stderr)
    r.started = utc_now()
    r.backend = backend_name
    r.timed = cfg.allreduce == "native" and calltimer.loaded()
    return r


def _epoch(r: _Run) -> bool:
    """One epoch (or what is left of the step budget); False when the data gave no step at all.

    After a whole epoch: the mean loss over ranks drives reduce-on-plateau and early stopping, and rank 0
    writes a checkpoint."""
    from mpi4py import MPI

    from ardlab.comm import calltimer
    from ardlab.nn import checkpoint, data, losses

    cfg, model, dp = r.cfg, r.model, r.dp
    source = data.batches(r.train, r.global_batch, r.rank, r.size, r.epoch, cfg.seed,
                          augment_fn=data.augment if cfg.augment else None)
    epoch_loss, epoch_steps = 0.0, 0
    for x, y in (data.prefetch(source, cfg.prefetch) if cfg.prefetch else source):
        if r.step >= r.total:
            break
        t0 = time.perf_counter()
        logits = model.forward(x, training=True)
        loss, dlogits = r.loss_fn(logits, y)
        losses.check_loss(loss, f"step {r.step}, rank {r.rank}", cfg.lr)
        r.loss, r.acc, r.top5 = loss, losses.accuracy(logits, y), losses.top_k_accuracy(logits, y, 5)
        a0, w0 = dp.allreduce_s, dp.wait_s
        timer0 = calltimer.read() if r.timed else None
        model.backward(dlogits, dp.on_grads)
        dp.finish()
        if r.timed:
            r.in_allreduce.append(calltimer.read() - timer0)
        u0 = time.perf_counter()
        r.opt.step(model, r.schedule(r.step) * (r.plateau.scale if r.plateau else 1.0))
        r.update_s += time.perf_counter() - u0
        dt = time.perf_counter() - t0
        r.compute_s += dt - (dp.allreduce_s - a0) - (dp.wait_s - w0)
        r.times.append(dt)
        r.step += 1
        epoch_loss, epoch_steps = epoch_loss + loss, epoch_steps + 1
        if r.bar:
            r.bar.update()
            r.bar.set_postfix(loss=f"{loss:.3f}", acc=f"{r.acc:.3f}", img_s=f"{r.global_batch / dt:.0f}")
    if epoch_steps == len(r.train) // r.global_batch:  # a whole epoch: schedules, early stopping, checkpoint
        mean = np.array([epoch_loss / epoch_steps])
        r.comm.Allreduce(MPI.IN_PLACE, mean, op=MPI.SUM)
        mean = float(mean[0] / r.size)
        if r.plateau is not None and r.plateau.update(mean) and r.bar:
            r.bar.write(f"epoch {r.epoch}: loss {mean:.4f} stalled, learning rate x{r.plateau.scale:g}")
        if r.early is not None and r.early.update(mean):
            r.stopped_early = True
            if r.bar:
                r.bar.write(f"epoch {r.epoch}: loss {mean:.4f} stalled for {r.early.patience} epochs, stopping")
        if cfg.checkpoint_dir and r.rank == 0:
            extra = {k: o.state() for k, o in (("plateau", r.plateau), ("early", r.early)) if o is not None}
            checkpoint.save(cfg.checkpoint_dir, model, r.opt, epoch=r.epoch, step=r.step, extra=extra)
        r.comm.Barrier()  # no rank races ahead of a checkpoint being written
    return epoch_steps > 0


def _summary(r: _Run) -> dict:
    """The summary row: throughput from every step but the first (warm-up) with a 95% interval over steps; the
    last step's loss and accuracy averaged over ranks, or the test split's accuracy where the data set has one."""
    from mpi4py import MPI

    from ardlab.comm import calltimer
    from ardlab.comm.libraries import knobs_in_force
    from ardlab.nn import data, losses
    from ardlab.results import summary_row

    cfg, comm, size = r.cfg, r.comm, r.size
    t = np.array(r.times[1:] or r.times)
    ips = r.global_batch / t
    # the same steps' Allreduce time (every rank's, before the summary's own calls below)
    steps = calltimer.step_fields(float(t.mean()), (r.in_allreduce[1:] or r.in_allreduce) if r.timed else None,
                                  comm.allgather)
    final = np.array([r.loss, r.acc, r.top5])
    comm.Allreduce(MPI.IN_PLACE, final, op=MPI.SUM)
    final /= size
    test_acc = test_top5 = None
    if cfg.evaluate and cfg.dataset in ("digits", "mnist", "cifar10"):
        test = data.load(cfg.dataset, cfg.data_path, "test")
        part = np.array_split(np.arange(len(test)), size)[r.rank]
        logits = np.concatenate([r.model.forward(test.x[part[j:j + 256]]) for j in range(0, len(part), 256)]) \
            if len(part) else np.zeros((0, test.classes))
        correct = np.array([float((logits.argmax(1) == test.y[part]).sum()),
                            float(losses.top_k_hits(logits, test.y[part], 5))])
        comm.Allreduce(MPI.IN_PLACE, correct, op=MPI.SUM)
        test_acc, test_top5 = (float(v / len(test)) for v in correct)
    dp = r.dp
    return summary_row(
        rates=list(ips), loss=final[0], accuracy=test_acc if test_acc is not None else final[1],
        top5=test_top5 if test_top5 is not None else final[2], compute_s=r.compute_s, allreduce_s=dp.allreduce_s,
        wait_s=dp.wait_s, framework="ardlab.nn", model=cfg.model, dataset=r.train.name, library=r.library,
        library_version=r.version, algorithm=cfg.allreduce if cfg.allreduce != "native" else cfg.algorithm_label,
        parallel_mode=cfg.parallel_mode, ranks=size, batch_per_rank=r.global_batch // size, steps=r.step,
        knobs=knobs_in_force(), started_at=r.started, backend=r.backend, **steps)


def _write_layer_timing(path, model, dp, update_s: float, steps: int) -> None:
    """Per-layer seconds per step: forward, backward, Allreduce (blocking call or posting); wait and update
    are whole-model (they happen once per step, after backward)."""
    from ardlab.results import LAYER_TIMING_COLUMNS, write_csv

    rows = [{"layer": name, "forward_s": f"{f / steps:.6f}", "backward_s": f"{b / steps:.6f}",
             "allreduce_s": f"{dp.layer_allreduce_s.get(name, 0.0) / steps:.6f}", "wait_s": "", "update_s": ""}
            for name, (f, b) in model.timing.items()]
    rows.append({"layer": "(model)", "forward_s": "", "backward_s": "", "allreduce_s": "",
                 "wait_s": f"{dp.wait_s / steps:.6f}", "update_s": f"{update_s / steps:.6f}"})
    write_csv(path, LAYER_TIMING_COLUMNS, rows)
