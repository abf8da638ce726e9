"""The training loop of `ardlab train`: data-parallel SGD-family training with timing and a tidy summary row.

Runs inside MPI (one process per rank). Rank 0 shows a progress bar (loss, accuracy, img/s) and writes the
summary row atomically; a NaN or exploding loss stops the run with a clear error and writes nothing.
Per epoch: the mean loss over ranks drives reduce-on-plateau and early stopping, and rank 0 writes a
checkpoint (``ardlab.nn.checkpoint``) from which ``resume`` continues with the same result.
"""

from __future__ import annotations

import datetime as _dt
import math
import sys
import time
from dataclasses import dataclass

import numpy as np


@dataclass
class TrainConfig:
    model: str = "simplecnn"
    dataset: str = "synthetic"
    data_path: str | None = None
    input_shape: tuple | None = None  # synthetic only
    classes: int = 10
    synthetic_size: int = 1024
    batch_per_rank: int | None = None
    global_batch: int | None = None
    epochs: int = 1
    steps: int | None = None  # stop after this many steps (overrides epochs)
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 0.0
    warmup_steps: int = 0
    parallel_mode: str = "blocking"
    allreduce: str = "native"  # native (the library's algorithm in force) or own_*
    algorithm_label: str = "default"  # the native algorithm forced at launch (for the summary row)
    bucket_bytes: int = 4 << 20
    seed: int = 0
    augment: bool = False
    evaluate: bool = True
    progress: bool = True
    checkpoint_dir: str | None = None  # a checkpoint after every epoch (rank 0, atomic)
    resume: bool = False  # continue from the newest checkpoint in checkpoint_dir
    plateau_patience: int = 0  # reduce-on-plateau of the epoch's mean loss (0: off)
    plateau_factor: float = 0.1
    early_stop_patience: int = 0  # stop when the epoch's mean loss stalls (0: off)
    prefetch: int = 2  # batches loaded ahead in a background thread (0: none)
    layer_timing: str | None = None  # CSV of per-layer forward/backward/Allreduce seconds (rank 0)


def run(cfg: TrainConfig, comm=None) -> dict:
    from mpi4py import MPI

    from ardlab.analysis.columns import knobs_in_force
    from ardlab.comm import detect
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
        raise ValueError(f"data set {train.name} has {len(train)} samples, fewer than one global batch ({global_batch})")
    initializers.seed(cfg.seed)
    model = models.get(cfg.model, train.x.shape[1:], train.classes)
    if model.output_shape != (train.classes,):
        raise ValueError(f"model {cfg.model} outputs {model.output_shape}, data has {train.classes} classes")
    opt_kwargs = {"lr": cfg.lr, "weight_decay": cfg.weight_decay}
    if cfg.optimizer == "sgd":
        opt_kwargs["momentum"] = cfg.momentum
    opt = optim.get(cfg.optimizer, **opt_kwargs)
    schedule = optim.warmup_step_schedule(cfg.lr, cfg.warmup_steps)
    plateau = optim.ReduceLROnPlateau(cfg.plateau_factor, cfg.plateau_patience) if cfg.plateau_patience else None
    early = optim.EarlyStopping(cfg.early_stop_patience) if cfg.early_stop_patience else None
    loss_fn = losses.get("categorical_crossentropy")
    dp = DataParallel(model, comm, cfg.parallel_mode, cfg.allreduce, cfg.bucket_bytes)
    dp.broadcast_weights()
    if cfg.layer_timing:
        model.timing = {}
    aug = data.augment if cfg.augment else None
    steps_per_epoch = len(train) // global_batch
    total = cfg.steps if cfg.steps is not None else cfg.epochs * steps_per_epoch
    step, epoch = 0, 0
    if cfg.resume:
        if not cfg.checkpoint_dir:
            raise ValueError("resume needs a checkpoint directory")
        path = checkpoint.latest(cfg.checkpoint_dir)
        if path is None:
            raise FileNotFoundError(f"no checkpoint to resume from in {cfg.checkpoint_dir}")
        meta = checkpoint.load(path, model, opt)
        epoch, step = meta["epoch"] + 1, meta["step"]
        for obj, key in ((plateau, "plateau"), (early, "early")):
            if obj is not None and key in meta["extra"]:
                obj.restore(meta["extra"][key])
    bar = None
    if cfg.progress and rank == 0:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=step, desc=f"{cfg.model} x{size}", unit="step", file=sys.stderr)
    compute_s, update_s, times = 0.0, 0.0, []
    loss = acc = top5 = float("nan")
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    stopped_early = False
    while step < total and not stopped_early:
        source = data.batches(train, global_batch, rank, size, epoch, cfg.seed, augment_fn=aug)
        epoch_loss, epoch_steps = 0.0, 0
        for x, y in (data.prefetch(source, cfg.prefetch) if cfg.prefetch else source):
            if step >= total:
                break
            t0 = time.perf_counter()
            logits = model.forward(x, training=True)
            loss, dlogits = loss_fn(logits, y)
            if not math.isfinite(loss) or loss > 1e4:
                raise FloatingPointError(f"loss is {loss} at step {step} (rank {rank}): lower the learning rate "
                                         f"(now {cfg.lr}) or check the data")
            acc, top5 = losses.accuracy(logits, y), losses.top_k_accuracy(logits, y, 5)
            a0, w0 = dp.allreduce_s, dp.wait_s
            model.backward(dlogits, dp.on_grads)
            dp.finish()
            u0 = time.perf_counter()
            opt.step(model, schedule(step) * (plateau.scale if plateau else 1.0))
            update_s += time.perf_counter() - u0
            dt = time.perf_counter() - t0
            compute_s += dt - (dp.allreduce_s - a0) - (dp.wait_s - w0)
            times.append(dt)
            step += 1
            epoch_loss, epoch_steps = epoch_loss + loss, epoch_steps + 1
            if bar:
                bar.update()
                bar.set_postfix(loss=f"{loss:.3f}", acc=f"{acc:.3f}", img_s=f"{global_batch / dt:.0f}")
        if epoch_steps == steps_per_epoch:  # a whole epoch: schedules, early stopping, checkpoint
            mean = np.array([epoch_loss / epoch_steps])
            comm.Allreduce(MPI.IN_PLACE, mean, op=MPI.SUM)
            mean = float(mean[0] / size)
            if plateau is not None and plateau.update(mean) and bar:
                bar.write(f"epoch {epoch}: loss {mean:.4f} stalled, learning rate x{plateau.scale:g}")
            if early is not None and early.update(mean):
                stopped_early = True
                if bar:
                    bar.write(f"epoch {epoch}: loss {mean:.4f} stalled for {early.patience} epochs, stopping")
            if cfg.checkpoint_dir and rank == 0:
                extra = {k: o.state() for k, o in (("plateau", plateau), ("early", early)) if o is not None}
                checkpoint.save(cfg.checkpoint_dir, model, opt, epoch=epoch, step=step, extra=extra)
            comm.Barrier()  # no rank races ahead of a checkpoint being written
        elif epoch_steps == 0:
            break
        epoch += 1
    if bar:
        bar.close()
    dp.close()
    if cfg.layer_timing and rank == 0:
        _write_layer_timing(cfg.layer_timing, model, dp, update_s, max(len(times), 1))
    # Throughput from every step but the first (warm-up), with a 95% interval over steps.
    t = np.array(times[1:] or times)
    ips = global_batch / t
    final = np.array([loss, acc, top5])
    comm.Allreduce(MPI.IN_PLACE, final, op=MPI.SUM)
    final /= size
    test_acc = test_top5 = None
    if cfg.evaluate and cfg.dataset in ("digits", "mnist", "cifar10"):
        test = data.load(cfg.dataset, cfg.data_path, "test")
        part = np.array_split(np.arange(len(test)), size)[rank]
        logits = np.concatenate([model.forward(test.x[part[j:j + 256]]) for j in range(0, len(part), 256)]) \
            if len(part) else np.zeros((0, test.classes))
        correct = np.array([float((logits.argmax(1) == test.y[part]).sum()),
                            float(losses.top_k_hits(logits, test.y[part], 5))])
        comm.Allreduce(MPI.IN_PLACE, correct, op=MPI.SUM)
        test_acc, test_top5 = (float(v / len(test)) for v in correct)
    return {
        "framework": "ardlab.nn", "model": cfg.model, "dataset": train.name, "library": lib.name,
        "library_version": version, "algorithm": cfg.allreduce if cfg.allreduce != "native" else cfg.algorithm_label,
        "parallel_mode": cfg.parallel_mode, "ranks": size, "batch_per_rank": global_batch // size,
        "steps": step, "img_per_s": f"{ips.mean():.2f}",
        "img_per_s_ci95": f"{1.96 * ips.std(ddof=1) / math.sqrt(len(ips)):.2f}" if len(ips) > 1 else "0",
        "compute_s": f"{compute_s:.4f}", "allreduce_s": f"{dp.allreduce_s:.4f}", "wait_s": f"{dp.wait_s:.4f}",
        "final_loss": f"{final[0]:.6f}",
        "final_accuracy": f"{test_acc if test_acc is not None else final[1]:.4f}",
        "final_top5_accuracy": f"{test_top5 if test_top5 is not None else final[2]:.4f}",
        "knobs": knobs_in_force(), "started_at": started,
    }


def _write_layer_timing(path, model, dp, update_s: float, steps: int) -> None:
    """Per-layer seconds per step: forward, backward, Allreduce (blocking call or posting); wait and update
    are whole-model (they happen once per step, after backward)."""
    from ardlab.analysis.columns import write_csv_atomic

    rows = [{"layer": name, "forward_s": f"{f / steps:.6f}", "backward_s": f"{b / steps:.6f}",
             "allreduce_s": f"{dp.layer_allreduce_s.get(name, 0.0) / steps:.6f}", "wait_s": "", "update_s": ""}
            for name, (f, b) in model.timing.items()]
    rows.append({"layer": "(model)", "forward_s": "", "backward_s": "", "allreduce_s": "",
                 "wait_s": f"{dp.wait_s / steps:.6f}", "update_s": f"{update_s / steps:.6f}"})
    write_csv_atomic(path, ["layer", "forward_s", "backward_s", "allreduce_s", "wait_s", "update_s"], rows)
