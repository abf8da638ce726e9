"""ImageNet-size CNNs: AlexNet (Krizhevsky et al. 2012, single tower), ResNet-18/34/50 (He et al. 2016) and
DenseNet-121 (Huang et al. 2017). Any input side works (224 as published); classes as given."""

from __future__ import annotations

from ardlab.nn.layers import (
    Add,
    AveragePool2D,
    BatchNormalization,
    Concatenate,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAveragePool,
    Input,
    MaxPool2D,
    ReLU,
)
from ardlab.nn.model import Model
from ardlab.nn.models.registry import model


@model("alexnet_imagenet", imagenet=True)
def alexnet_imagenet(input_shape, classes):
    x = inp = Input(input_shape)
    x = MaxPool2D(3, 2)(ReLU()(Conv2D(64, 11, 4, padding="same")(x)))
    x = MaxPool2D(3, 2)(ReLU()(Conv2D(192, 5, padding="same")(x)))
    x = ReLU()(Conv2D(384, 3, padding="same")(x))
    x = ReLU()(Conv2D(256, 3, padding="same")(x))
    x = MaxPool2D(3, 2)(ReLU()(Conv2D(256, 3, padding="same")(x)))
    x = Flatten()(x)
    x = ReLU()(Dense(4096)(Dropout(0.5)(x)))
    x = ReLU()(Dense(4096)(Dropout(0.5)(x)))
    return Model(inp, Dense(classes)(x), "alexnet_imagenet")


def _cbr(x, filters, k, s=1, relu=True):
    x = BatchNormalization()(Conv2D(filters, k, s, padding="same", use_bias=False)(x))
    return ReLU()(x) if relu else x


def _basic(x, filters, stride):
    y = _cbr(_cbr(x, filters, 3, stride), filters, 3, relu=False)
    if stride != 1 or x.shape[-1] != filters:
        x = _cbr(x, filters, 1, stride, relu=False)
    return ReLU()(Add()(y, x))


def _bottleneck(x, filters, stride):
    y = _cbr(_cbr(_cbr(x, filters, 1), filters, 3, stride), 4 * filters, 1, relu=False)
    if stride != 1 or x.shape[-1] != 4 * filters:
        x = _cbr(x, 4 * filters, 1, stride, relu=False)
    return ReLU()(Add()(y, x))


_RESNETS = {18: (_basic, (2, 2, 2, 2)), 34: (_basic, (3, 4, 6, 3)), 50: (_bottleneck, (3, 4, 6, 3))}


@model("resnet50", imagenet=True, depth=50)
@model("resnet34", imagenet=True, depth=34)
@model("resnet18", imagenet=True, depth=18)
def resnet_imagenet(input_shape, classes, depth=50):
    if depth not in _RESNETS:
        raise ValueError(f"ImageNet ResNet depth must be one of {sorted(_RESNETS)}, got {depth}")
    block, counts = _RESNETS[depth]
    x = inp = Input(input_shape)
    x = MaxPool2D(3, 2, padding="same")(_cbr(x, 64, 7, 2))
    for stage, (filters, n) in enumerate(zip((64, 128, 256, 512), counts)):
        for i in range(n):
            x = block(x, filters, 2 if stage and i == 0 else 1)
    x = GlobalAveragePool()(x)
    return Model(inp, Dense(classes)(x), f"resnet{depth}")


@model("densenet121", imagenet=True)
def densenet121(input_shape, classes, growth=32, blocks=(6, 12, 24, 16)):
    def bn_relu_conv(x, filters, k):
        return Conv2D(filters, k, padding="same", use_bias=False)(ReLU()(BatchNormalization()(x)))

    x = inp = Input(input_shape)
    x = MaxPool2D(3, 2, padding="same")(_cbr(x, 2 * growth, 7, 2))
    for b, n in enumerate(blocks):
        for _ in range(n):
            y = bn_relu_conv(bn_relu_conv(x, 4 * growth, 1), growth, 3)
            x = Concatenate()(x, y)
        if b < len(blocks) - 1:  # transition: halve channels and resolution
            x = AveragePool2D(2)(bn_relu_conv(x, x.shape[-1] // 2, 1))
    x = GlobalAveragePool()(ReLU()(BatchNormalization()(x)))
    return Model(inp, Dense(classes)(x), "densenet121")
