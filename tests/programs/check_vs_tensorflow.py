"""Compare every ardlab.nn layer's forward and backward with TensorFlow's (tf_keras) on random inputs.

Run with a library environment's Python (it has TensorFlow):  python check_vs_tensorflow.py OUT.json
Each case builds Input -> layer in ardlab.nn, translates it to Keras (ardlab.horovod.models.from_ardlab, the
same weights), and records the largest error of y, dL/dx and every parameter gradient relative to the
largest magnitude of TensorFlow's value, for L = sum(y * dy) with a random dy. float32 throughout.
"""

import json
import sys

import numpy as np
import tensorflow as tf  # noqa: E402

from ardlab.horovod import models as kmodels  # sets TF_USE_LEGACY_KERAS before TensorFlow loads
from ardlab.nn import layers as L, losses
from ardlab.nn.model import Model

CASES = {
    "conv3x3_same": ((9, 9, 3), lambda: L.Conv2D(8, 3, 1, "same")),
    "conv3x3_stride2_valid_odd": ((9, 11, 3), lambda: L.Conv2D(5, 3, 2, "valid")),
    "conv3x5_stride21_same": ((8, 7, 2), lambda: L.Conv2D(6, (3, 5), (2, 1), "same")),
    "conv5x5_stride2_same_nobias": ((11, 11, 4), lambda: L.Conv2D(4, 5, 2, "same", use_bias=False)),
    "conv1x1": ((6, 6, 8), lambda: L.Conv2D(16, 1)),
    "conv_groups2": ((8, 8, 4), lambda: L.Conv2D(6, 3, 1, "same", groups=2)),
    "conv_depthwise": ((8, 8, 4), lambda: L.Conv2D(4, 3, 1, "same", groups=4)),
    "conv_depthwise_stride2": ((9, 9, 6), lambda: L.Conv2D(6, 3, 2, "same", groups=6)),
    "maxpool2": ((8, 8, 3), lambda: L.MaxPool2D(2)),
    "maxpool2_ties": ((8, 8, 3), lambda: L.MaxPool2D(2)),  # ReLU-like input: whole windows of zeros
    "maxpool2_odd_valid": ((9, 7, 3), lambda: L.MaxPool2D(2)),  # the last row/column is in no window
    "maxpool3_stride2_ties": ((9, 9, 2), lambda: L.MaxPool2D(3, 2, "valid")),
    "maxpool3_stride2_same_odd": ((9, 9, 3), lambda: L.MaxPool2D(3, 2, "same")),
    "avgpool2": ((8, 6, 3), lambda: L.AveragePool2D(2)),
    "avgpool3_stride2_valid_odd": ((9, 9, 2), lambda: L.AveragePool2D(3, 2, "valid")),
    "global_avgpool": ((5, 7, 4), lambda: L.GlobalAveragePool()),
    "dense": ((10,), lambda: L.Dense(7)),
    "dense_nobias": ((10,), lambda: L.Dense(3, use_bias=False)),
    "batchnorm_train": ((6, 6, 5), lambda: L.BatchNormalization()),
    "batchnorm_inference": ((6, 6, 5), lambda: L.BatchNormalization()),
    "relu": ((4, 4, 3), lambda: L.ReLU()),
    "leaky_relu": ((4, 4, 3), lambda: L.LeakyReLU(0.2)),
    "sigmoid": ((12,), lambda: L.Sigmoid()),
    "tanh": ((12,), lambda: L.Tanh()),
    "softmax": ((10,), lambda: L.Softmax()),
    "flatten": ((3, 4, 5), lambda: L.Flatten()),
    "dropout_inference": ((12,), lambda: L.Dropout(0.5)),
}
TRAINING = {"batchnorm_train": True}


def run_case(name, shape, make, rng):
    layer = make()
    inp = L.Input(shape)
    model = Model(inp, layer(inp), name)
    layer.need_input_grad = True  # the model skips its input's gradient; this check compares it with TF's
    for p in layer.params.values():
        p[...] = rng.standard_normal(p.shape).astype(np.float32) * 0.5
    if isinstance(layer, L.BatchNormalization):  # running statistics that are not the initial ones
        layer.state["running_mean"][...] = rng.standard_normal(shape[-1])
        layer.state["running_var"][...] = rng.uniform(0.5, 2.0, shape[-1])
    keras_model = kmodels.from_ardlab(model)
    kmodels.copy_weights(model, keras_model)
    klayer = keras_model.get_layer(layer.name)
    training = TRAINING.get(name, False)
    x = rng.standard_normal((4, *shape)).astype(np.float32)
    if "ties" in name:
        x = np.maximum(np.round(x), 0)
    y = layer.forward(x, training)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = layer.backward(dy)
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        yt = klayer(xt, training=training)
        loss = tf.reduce_sum(yt * dy)
    weights = klayer.trainable_weights
    grads = tape.gradient(loss, [xt, *weights])
    out = {"y": _err(y, yt.numpy()), "dx": _err(dx, grads[0].numpy())}
    names = [k for k in ("kernel", "gamma", "beta", "bias") if k in layer.grads]
    for k, w, g in zip(sorted(names, key=_keras_order), weights, grads[1:]):
        ours = layer.grads[k]
        if k == "kernel" and type(klayer).__name__ == "DepthwiseConv2D":
            ours = ours.transpose(0, 1, 3, 2)
        out[f"d{k}"] = _err(ours, g.numpy())
    return out


def _keras_order(k):
    return {"kernel": 0, "gamma": 0, "bias": 1, "beta": 1}[k]


def _err(ours, ref):
    if ours.shape != ref.shape:
        return float("inf")
    return float(np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-12))


def top_k_case(rng):
    """|ours - TF's in_top_k| of the top-k accuracy on 257 random 10-class logits (no ties), k = 1, 3, 5, 10."""
    logits = rng.standard_normal((257, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 257)
    out = {}
    for k in (1, 3, 5, 10):
        theirs = float(tf.reduce_mean(tf.cast(tf.math.in_top_k(labels, logits, k), tf.float32)))
        out[f"k{k}"] = abs(losses.top_k_accuracy(logits, labels, k) - theirs)
    return out


def main():
    rng = np.random.default_rng(0)
    results = {}
    for name, (shape, make) in CASES.items():
        try:
            results[name] = run_case(name, shape, make, rng)
        except Exception as e:  # recorded per case, so one unsupported TF op names itself in the test
            results[name] = {"error": f"{type(e).__name__}: {e}"}
    results["top_k_accuracy"] = top_k_case(rng)
    with open(sys.argv[1], "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
