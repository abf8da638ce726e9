"""ResNet-20/32/56 for CIFAR (He et al. 2016, option B shortcuts: 1x1 conv + BN when the shape changes)."""

from __future__ import annotations

from ardlab.nn.layers import Add, BatchNormalization, Conv2D, Dense, GlobalAveragePool, Input, ReLU
from ardlab.nn.model import Model
from ardlab.nn.models.registry import model


def _basic_block(x, filters, stride):
    shortcut = x
    y = ReLU()(BatchNormalization()(Conv2D(filters, 3, stride, padding="same", use_bias=False)(x)))
    y = BatchNormalization()(Conv2D(filters, 3, 1, padding="same", use_bias=False)(y))
    if stride != 1 or x.shape[-1] != filters:
        shortcut = BatchNormalization()(Conv2D(filters, 1, stride, padding="same", use_bias=False)(x))
    return ReLU()(Add()(y, shortcut))


@model("resnet56", depth=56)
@model("resnet32", depth=32)
@model("resnet20", depth=20)
def resnet_cifar(input_shape, classes, depth=20):
    if (depth - 2) % 6:
        raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
    n = (depth - 2) // 6
    x = inp = Input(input_shape)
    x = ReLU()(BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(x)))
    for stage, filters in enumerate((16, 32, 64)):
        for i in range(n):
            x = _basic_block(x, filters, 2 if stage and i == 0 else 1)
    x = GlobalAveragePool()(x)
    return Model(inp, Dense(classes)(x), f"resnet{depth}")
