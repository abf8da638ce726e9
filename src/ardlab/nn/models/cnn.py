"""Plain CNNs: simplecnn (MNIST-size), LeNet-5, AlexNet (CIFAR), VGG11/16 (CIFAR, with or without BN), MobileNetV1."""

from __future__ import annotations

from ardlab.nn.layers import (
    AveragePool2D,
    BatchNormalization,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAveragePool,
    Input,
    MaxPool2D,
    ReLU,
    Tanh,
)
from ardlab.nn.model import Model
from ardlab.nn.models.registry import model


@model("simplecnn")
def simplecnn(input_shape, classes):
    x = inp = Input(input_shape)
    x = ReLU()(Conv2D(16, 3)(x))
    x = MaxPool2D(2)(x)
    x = ReLU()(Conv2D(32, 3)(x))
    x = Flatten()(x)
    x = ReLU()(Dense(64)(x))
    return Model(inp, Dense(classes)(x), "simplecnn")


@model("lenet5")
def lenet5(input_shape, classes):
    x = inp = Input(input_shape)
    x = AveragePool2D(2)(Tanh()(Conv2D(6, 5, padding="same")(x)))
    x = AveragePool2D(2)(Tanh()(Conv2D(16, 5, padding="valid")(x)))
    x = Flatten()(x)
    x = Tanh()(Dense(120)(x))
    x = Tanh()(Dense(84)(x))
    return Model(inp, Dense(classes)(x), "lenet5")


@model("alexnet")
def alexnet_cifar(input_shape, classes):
    """AlexNet adapted to 32x32 inputs (as in PyDTNN's and the study's CIFAR variant)."""
    x = inp = Input(input_shape)
    x = MaxPool2D(2)(ReLU()(Conv2D(64, 3, padding="same")(x)))
    x = MaxPool2D(2)(ReLU()(Conv2D(192, 3, padding="same")(x)))
    x = ReLU()(Conv2D(384, 3, padding="same")(x))
    x = ReLU()(Conv2D(256, 3, padding="same")(x))
    x = MaxPool2D(2)(ReLU()(Conv2D(256, 3, padding="same")(x)))
    x = Flatten()(x)
    x = ReLU()(Dense(512)(Dropout(0.5)(x)))
    x = ReLU()(Dense(512)(Dropout(0.5)(x)))
    return Model(inp, Dense(classes)(x), "alexnet")


_VGG = {11: [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
        16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]}


@model("vgg16bn", depth=16, bn=True)
@model("vgg16", depth=16, bn=False)
@model("vgg11bn", depth=11, bn=True)
@model("vgg11", depth=11, bn=False)
def vgg(input_shape, classes, depth=11, bn=False):
    x = inp = Input(input_shape)
    for v in _VGG[depth]:
        if v == "M":
            x = MaxPool2D(2)(x)
        else:
            x = Conv2D(v, 3, padding="same", use_bias=not bn)(x)
            if bn:
                x = BatchNormalization()(x)
            x = ReLU()(x)
    x = Flatten()(x)
    x = ReLU()(Dense(512)(x))
    x = ReLU()(Dense(512)(x))
    return Model(inp, Dense(classes)(x), f"vgg{depth}{'bn' if bn else ''}")


@model("mobilenetv1")
def mobilenet_v1(input_shape, classes, alpha=1.0):
    """MobileNetV1: depthwise (groups = channels) + pointwise convolutions."""
    def cbr(x, filters, k, s, groups=1):
        x = Conv2D(filters, k, s, padding="same", groups=groups, use_bias=False)(x)
        return ReLU()(BatchNormalization()(x))

    x = inp = Input(input_shape)
    c = int(32 * alpha)
    x = cbr(x, c, 3, 2 if input_shape[0] > 64 else 1)
    blocks = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    for filters, s in blocks:
        x = cbr(x, c, 3, s, groups=c)  # depthwise
        c = int(filters * alpha)
        x = cbr(x, c, 1, 1)  # pointwise
    x = GlobalAveragePool()(x)
    return Model(inp, Dense(classes)(x), "mobilenetv1")
