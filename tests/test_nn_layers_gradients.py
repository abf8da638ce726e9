"""Every layer's backward against central finite differences in float64 (rtol 1e-5 on random inputs).

Covers strides, same/valid padding, odd sizes, grouped and depthwise convolution, both pools, BN in training
mode, activations, Dense, and the Add / Concatenate merges through a small graph.
"""

import numpy as np
import pytest

from ardlab.nn import initializers, losses
from ardlab.nn.layers import (
    Add,
    AveragePool2D,
    BatchNormalization,
    Concatenate,
    Conv2D,
    Dense,
    Flatten,
    GlobalAveragePool,
    Input,
    LeakyReLU,
    MaxPool2D,
    ReLU,
    Sigmoid,
    Softmax,
    Tanh,
)
from ardlab.nn.model import Model

EPS = 1e-6


def numerical_grad(f, arr):
    """Central differences of the scalar f() with respect to every element of arr (perturbed in place)."""
    num = np.zeros_like(arr)
    for i in np.ndindex(arr.shape):
        old = arr[i]
        arr[i] = old + EPS
        lp = f()
        arr[i] = old - EPS
        lm = f()
        arr[i] = old
        num[i] = (lp - lm) / (2 * EPS)
    return num


def check_layer(layer, in_shape, n=2, seed=0, training=True):
    initializers.seed(seed)
    inp = Input(in_shape)
    model = Model(inp, layer(inp)).set_dtype(np.float64)
    layer.need_input_grad = True  # the model skips its input's gradient; this test checks it
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, *in_shape))
    w = rng.standard_normal((n, *model.output_shape))  # loss = sum(w * y)

    def loss(xv):
        return float((model.forward(xv, training) * w).sum())

    model.forward(x, training)
    dx = layer.backward(w)
    grads = {k: g.copy() for k, g in layer.grads.items()}
    np.testing.assert_allclose(dx, numerical_grad(lambda: loss(x), x), rtol=1e-5, atol=1e-6)
    for k, p in layer.params.items():
        np.testing.assert_allclose(grads[k], numerical_grad(lambda: loss(x), p), rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("kw, shape", [
    (dict(filters=4, kernel_size=3, strides=1, padding="same"), (5, 6, 3)),
    (dict(filters=3, kernel_size=3, strides=2, padding="same"), (7, 6, 2)),
    (dict(filters=2, kernel_size=(2, 3), strides=(2, 1), padding="valid"), (7, 5, 3)),
    (dict(filters=4, kernel_size=3, strides=1, padding="same", groups=2), (5, 5, 4)),
    (dict(filters=4, kernel_size=3, strides=2, padding="same", groups=4), (6, 5, 4)),  # depthwise
    (dict(filters=3, kernel_size=1, strides=1, padding="valid", use_bias=False), (4, 4, 2)),
])
def test_conv2d(kw, shape):
    check_layer(Conv2D(**kw), shape)


@pytest.mark.parametrize("chunk_rows", [1, 31])  # 5x6 images: one per chunk; two, then a short last chunk
def test_conv2d_in_chunks(monkeypatch, chunk_rows):
    """The im2row rows built chunk by chunk (one image per chunk, or a smaller last chunk) give the same gradients."""
    from ardlab.nn.layers import conv_dense
    monkeypatch.setattr(conv_dense, "CHUNK_BYTES", 1)
    monkeypatch.setattr(conv_dense, "CHUNK_MIN_ROWS", chunk_rows)
    check_layer(Conv2D(filters=3, kernel_size=3, strides=1, padding="same"), (5, 6, 2), n=3)


@pytest.mark.parametrize("cls", [MaxPool2D, AveragePool2D])
@pytest.mark.parametrize("kw, shape", [
    (dict(pool_size=2), (4, 6, 2)),
    (dict(pool_size=3, strides=2, padding="same"), (5, 7, 2)),
    (dict(pool_size=(2, 3), strides=1, padding="valid"), (5, 5, 1)),
])
def test_pooling(cls, kw, shape):
    check_layer(cls(**kw), shape)


@pytest.mark.parametrize("layer, shape", [
    (lambda: Dense(4), (5,)),
    (lambda: BatchNormalization(), (3, 3, 4)),
    (lambda: BatchNormalization(), (6,)),
    (lambda: ReLU(), (3, 4)),
    (lambda: LeakyReLU(0.2), (3, 4)),
    (lambda: Sigmoid(), (7,)),
    (lambda: Tanh(), (7,)),
    (lambda: Softmax(), (6,)),
    (lambda: GlobalAveragePool(), (3, 4, 2)),
    (lambda: Flatten(), (3, 2, 2)),
])
def test_other_layers(layer, shape):
    check_layer(layer(), shape, n=3)


def test_merges_in_a_graph():
    inp = Input((4, 4, 2))
    a = Conv2D(3, 3)(inp)
    b = Conv2D(3, 1)(inp)
    y = Concatenate()(Add()(a, b), ReLU()(b))
    model = Model(inp, Flatten()(y)).set_dtype(np.float64)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 4, 4, 2))
    w = rng.standard_normal((2, model.output_shape[0]))
    model.forward(x, True)
    model.backward(w)
    conv = model.trainable()[0]
    num = numerical_grad(lambda: (model.forward(x) * w).sum(), conv.params["kernel"])
    np.testing.assert_allclose(conv.grads["kernel"], num, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("loss", ["categorical_crossentropy", "binary_crossentropy", "mse"])
def test_losses(loss):
    fn = losses.get(loss)
    rng = np.random.default_rng(2)
    z = rng.standard_normal((4, 5)) * 3
    y = rng.integers(0, 5, 4) if loss == "categorical_crossentropy" else rng.integers(0, 2, (4, 5)).astype(float)
    _, g = fn(z, y)
    np.testing.assert_allclose(g, numerical_grad(lambda: fn(z, y)[0], z), rtol=1e-5, atol=1e-8)


def test_softmax_cross_entropy_is_stable():
    loss, g = losses.get("categorical_crossentropy")(np.array([[1e4, 0.0, -1e4]]), np.array([0]))
    assert np.isfinite(loss) and np.isfinite(g).all() and loss < 1e-6
