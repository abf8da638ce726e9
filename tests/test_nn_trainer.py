"""ardlab.nn beyond the layers: checkpoints and resume, schedules, early stopping, data formats, prefetch,
per-layer timing, the ImageNet models.

Resuming from a checkpoint gives bit-identical weights to an uninterrupted run (real `ardlab train` runs on
2 ranks); a write that fails midway leaves the previous checkpoint intact; the ImageNet models have the
published parameter counts; images and .npz shards are read from files written in the real formats.
"""

import csv
import os

import numpy as np
import pytest

from ardlab.nn import checkpoint, data, models, optim
from conftest import ardlab


def train(tmp_path, ckpt, *extra):
    return ardlab("train", "--library", "mpich", "--ranks", 2, "--model", "simplecnn", "--dataset", "digits",
                  "--global-batch", 64, "--optimizer", "sgd", "--momentum", 0.9, "--lr", 0.02, "--no-progress",
                  "--plateau-patience", 1, "--checkpoint-dir", ckpt, *extra)


def weights(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files if k != "meta"}


def test_resume_gives_the_uninterrupted_weights(tmp_path):
    train(tmp_path, tmp_path / "straight", "--epochs", 3)
    train(tmp_path, tmp_path / "resumed", "--epochs", 1)
    assert checkpoint.latest(tmp_path / "resumed").name == "ckpt-epoch0.npz"
    train(tmp_path, tmp_path / "resumed", "--epochs", 3, "--resume")
    a, b = weights(tmp_path / "straight" / "ckpt-epoch2.npz"), weights(tmp_path / "resumed" / "ckpt-epoch2.npz")
    assert a.keys() == b.keys() and any(k.startswith("opt/") for k in a)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_resume_without_checkpoint_is_an_error(tmp_path):
    proc = ardlab("train", "--library", "mpich", "--ranks", 1, "--model", "simplecnn", "--dataset", "digits",
                  "--global-batch", 32, "--checkpoint-dir", tmp_path / "empty", "--resume", "--no-progress",
                  check=False)
    assert proc.returncode != 0 and "no checkpoint to resume from" in proc.stdout + proc.stderr


def test_failed_write_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    model = models.get("simplecnn", (8, 8, 1), 10)
    opt = optim.get("sgd", lr=0.1, momentum=0.9)
    good = checkpoint.save(tmp_path, model, opt, epoch=0, step=10)
    before = good.read_bytes()

    def disk_full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        checkpoint.save(tmp_path, model, opt, epoch=1, step=20)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-epoch0.npz"]  # no partial file, no temp left
    assert checkpoint.latest(tmp_path) == good and good.read_bytes() == before


def test_plateau_and_early_stopping():
    plateau = optim.ReduceLROnPlateau(factor=0.5, patience=2)
    reduced = [plateau.update(v) for v in (1.0, 0.9, 0.95, 0.93, 0.92, 0.91, 0.5)]
    assert reduced == [False, False, False, True, False, True, False] and plateau.scale == 0.25
    early = optim.EarlyStopping(patience=2)
    assert [early.update(v) for v in (1.0, 0.8, 0.85, 0.81)] == [False, False, False, True]


def test_early_stopping_ends_training(tmp_path):
    out = tmp_path / "row.csv"
    # 1024 synthetic samples, batch 128 (every sample every epoch), lr 1e-9: the epoch loss cannot improve by
    # the minimum delta; epoch 0 sets the best, epochs 1 and 2 stall: stop after three of twenty epochs
    ardlab("train", "--library", "mpich", "--ranks", 1, "--model", "simplecnn", "--dataset", "synthetic",
           "--input-shape", "8x8x1", "--global-batch", 128, "--epochs", 20, "--lr", 1e-9, "--early-stop-patience",
           2, "--no-progress", "--output", out)
    (row,) = list(csv.DictReader(open(out)))
    assert int(row["steps"]) == 3 * 8


def test_layer_timing(tmp_path):
    path = tmp_path / "layers.csv"
    ardlab("train", "--library", "openmpi", "--ranks", 2, "--model", "simplecnn", "--dataset", "synthetic",
           "--input-shape", "8x8x1", "--global-batch", 16, "--steps", 4, "--no-progress", "--layer-timing", path)
    rows = list(csv.DictReader(open(path)))
    by = {r["layer"]: r for r in rows}
    assert "(model)" in by and any(n.startswith("conv2d") for n in by)
    conv = next(r for n, r in by.items() if n.startswith("conv2d"))
    assert float(conv["forward_s"]) > 0 and float(conv["backward_s"]) > 0 and float(conv["allreduce_s"]) > 0


@pytest.mark.parametrize("name, params", [("resnet18", 11_689_512), ("resnet34", 21_797_672),
                                          ("resnet50", 25_557_032), ("densenet121", 7_978_856),
                                          ("alexnet_imagenet", 61_100_840)])
def test_imagenet_models_have_the_published_size(name, params):
    model = models.get(name, (224, 224, 3), 1000)
    assert model.count_params() == params and model.output_shape == (1000,)


def test_npz_shards(tmp_path):
    rng = np.random.default_rng(0)
    for i in range(2):
        np.savez(tmp_path / f"train-{i:03d}.npz", x=rng.integers(0, 256, (5, 6, 6, 3), dtype=np.uint8),
                 y=rng.integers(0, 4, 5))
    ds = data.load("npz", tmp_path, "train")
    assert ds.x.shape == (10, 6, 6, 3) and ds.x.dtype == np.float32 and ds.x.max() <= 1
    (tmp_path / "train-002.npz").write_bytes((tmp_path / "train-000.npz").read_bytes()[:100])
    with pytest.raises(ValueError, match="train-002.npz: unreadable or truncated"):
        data.load("npz", tmp_path, "train")


def test_image_folders(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls in ("cat", "dog"):
        (tmp_path / "train" / cls).mkdir(parents=True)
        for i in range(3):
            pixels = rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(tmp_path / "train" / cls / f"{i}.jpg")
    ds = data.load("images", tmp_path, "train", shape=(16, 16))
    assert ds.x.shape == (6, 16, 16, 3) and ds.classes == 2 and list(ds.y) == [0, 0, 0, 1, 1, 1]
    (tmp_path / "train" / "dog" / "bad.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match="bad.jpg: not a readable image"):
        data.load("images", tmp_path, "train", shape=(16, 16))


def test_prefetch_keeps_order_and_raises_producer_errors():
    assert list(data.prefetch(iter(range(10)), 3)) == list(range(10))

    def broken():
        yield 1
        raise OSError("disk gone")

    it = data.prefetch(broken(), 2)
    assert next(it) == 1
    with pytest.raises(OSError, match="disk gone"):
        next(it)


def test_threads_never_exceed_a_ranks_share_of_the_cores():
    """A local launch's threads per rank: the plan's where they fit the rank's share of the cores, that share
    where the plan has none, an error naming the counts where they do not fit; one thread always fits."""
    from ardlab import driver
    from ardlab.plan import RunPlan

    cores = driver.cores_here()
    plan = lambda ranks, threads: RunPlan("train", "mpich", ranks, threads=threads)  # noqa: E731
    assert driver.local_threads(plan(1, None)) == cores
    assert driver.local_threads(plan(2, None)) == max(1, cores // 2)
    assert driver.local_threads(plan(cores + 3, 1)) == 1
    with pytest.raises(ValueError, match=rf"{cores} threads per rank x 2 ranks is more than the {cores} cores here "
                                         rf"\(a rank's share: {max(1, cores // 2)}\)"):
        driver.local_threads(plan(2, cores))


def test_train_without_a_batch_option_takes_the_default(tmp_path):
    """`ardlab train` with neither --batch-per-rank nor --global-batch trains at the documented default (the ranks
    once refused it after launching)."""
    from ardlab.cli import TRAIN_BATCH_PER_RANK

    out = tmp_path / "row.csv"
    ardlab("train", "--library", "mpich", "--ranks", 2, "--model", "lenet5", "--steps", 2, "--output", out,
           "--no-progress")
    assert int(next(csv.DictReader(out.open()))["batch_per_rank"]) == TRAIN_BATCH_PER_RANK
