"""A user's own data-parallel training script, independent of ardlab: TensorFlow + Horovod, a small CNN on synthetic
CIFAR-shaped data, a fixed number of steps. It is what `ardlab advise` is given after `--` to learn a job's calls and
check its choice on the job itself:

    ardlab advise --ranks 2 --steps 20 -- examples/horovod_synthetic.py --steps 20

Run alone: mpiexec -n 2 python examples/horovod_synthetic.py --steps 20 (any environment with TensorFlow, tf_keras
and Horovod built against its MPI).
"""

import argparse
import os
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # Horovod averages gradients with Keras 2's (tf_keras) tape
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import horovod.tensorflow as hvd  # noqa: E402  (after the settings above)
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def model(classes: int = 10) -> tf.keras.Model:
    layers = tf.keras.layers
    return tf.keras.Sequential([
        layers.Input((32, 32, 3)),
        layers.Conv2D(32, 3, padding="same", activation="relu"), layers.MaxPool2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"), layers.MaxPool2D(),
        layers.Flatten(), layers.Dense(256, activation="relu"), layers.Dense(classes),
    ])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch", type=int, default=16, help="images per rank and step")
    a = p.parse_args()
    hvd.init()
    tf.keras.utils.set_random_seed(hvd.rank())
    net = model()
    opt = tf.keras.optimizers.SGD(0.01 * hvd.size())
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    x = tf.constant(np.random.default_rng(hvd.rank()).random((a.batch, 32, 32, 3), dtype=np.float32))
    y = tf.constant(np.arange(a.batch) % 10)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True))
        tape = hvd.DistributedGradientTape(tape)
        opt.apply_gradients(zip(tape.gradient(loss, net.trainable_variables), net.trainable_variables))
        return loss

    step()
    hvd.broadcast_variables(net.variables, root_rank=0)
    hvd.broadcast_variables(opt.variables(), root_rank=0)
    started = time.perf_counter()
    for _ in range(a.steps):
        loss = float(step())
    took = time.perf_counter() - started
    if hvd.rank() == 0:
        print(f"{a.steps} steps in {took:.3f} s, {a.steps * a.batch * hvd.size() / took:.1f} img/s, loss {loss:.4f}")


if __name__ == "__main__":
    main()
