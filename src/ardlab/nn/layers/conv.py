"""Conv2D (NHWC, stride, same/valid padding, groups incl. depthwise): the public layer and what its
implementations share (arguments, shapes, parameters).

``Conv2D(...)`` makes a ``DenseConv2D`` (``conv_dense``: groups = 1, im2row + one BLAS GEMM per chunk of images)
or a ``GroupedConv2D`` (``conv_grouped``: window views and one batched GEMM over groups), as Keras keeps its
depthwise convolution apart from the base convolution; on the onednn backend (``ardlab.nn.backend``) an
``OnednnConv2D`` (``conv_onednn``: oneDNN's primitives, any groups) instead. All are ``Conv2D`` instances.
"""

from __future__ import annotations

import numpy as np

from ardlab.nn import initializers, memory
from ardlab.nn.layers.base import Layer
from ardlab.nn.layers.windows import out_and_pads, pair


class Conv2D(Layer):
    kind = "Conv2D"  # every implementation is named conv2d_<n>, as Keras names them
    # "dense" / "grouped" -> the implementing subclass, registered by the module that defines it
    _variants: dict[str, type] = {}

    def __init_subclass__(cls, variant: str | None = None, **kw):
        super().__init_subclass__(**kw)
        if variant:
            Conv2D._variants[variant] = cls

    def __new__(cls, filters: int = 1, kernel_size=1, strides=1, padding: str = "same", groups: int = 1, *a, **kw):
        if cls is Conv2D:
            from ardlab.nn import backend

            if backend.get() == "onednn":
                cls = Conv2D._variants["onednn"]
            else:
                cls = Conv2D._variants["grouped" if groups != 1 else "dense"]
        return super().__new__(cls)

    def __init__(self, filters: int, kernel_size, strides=1, padding: str = "same", groups: int = 1,
                 use_bias: bool = True, kernel_initializer="he_uniform", name=None):
        super().__init__(name)
        if filters < 1 or groups < 1 or filters % groups:
            raise ValueError(f"{self.name}: filters ({filters}) must be a positive multiple of groups ({groups})")
        if padding not in ("same", "valid"):
            raise ValueError(f"{self.name}: padding must be 'same' or 'valid', got {padding!r}")
        self.filters, self.k, self.s = filters, pair(kernel_size), pair(strides)
        self.padding, self.groups, self.use_bias = padding, groups, use_bias
        self.kernel_initializer = kernel_initializer
        self.kept = memory.KeptArrays()  # large arrays reused from step to step while their shape stays

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(f"{self.name}: Conv2D needs (H, W, C) input, got {input_shape}")
        h, w, c = input_shape
        if c % self.groups:
            raise ValueError(f"{self.name}: input channels ({c}) must be a multiple of groups ({self.groups})")
        self.cin = c
        ho, wo, self.pads = out_and_pads(h, w, self.k, self.s, self.padding)
        fan_in = self.k[0] * self.k[1] * c // self.groups
        fan_out = self.k[0] * self.k[1] * self.filters // self.groups
        shape = (self.k[0], self.k[1], c // self.groups, self.filters)
        self.add_param("kernel", initializers.get(self.kernel_initializer)(shape, fan_in, fan_out))
        if self.use_bias:
            self.add_param("bias", np.zeros(self.filters))
        return (ho, wo, self.filters)

    def _start(self, x):
        """Record the shapes backward needs; (N, Ho, Wo, C)."""
        n, h, w, c = x.shape
        ho, wo, _ = out_and_pads(h, w, self.k, self.s, self.padding)
        self.x_shape, self.ho, self.wo = x.shape, ho, wo
        return n, ho, wo, c

    def _bias_grad(self, dY) -> None:
        if self.use_bias:
            self.grads["bias"][...] = memory.column_sums(dY)

    def keras_equivalent(self, k, in_shape):
        if self.groups > 1 and self.groups == in_shape[-1] == self.filters:  # depthwise
            return k.DepthwiseConv2D(self.k, self.s, padding=self.padding, use_bias=self.use_bias, name=self.name)
        return k.Conv2D(self.filters, self.k, self.s, padding=self.padding, groups=self.groups,
                        use_bias=self.use_bias, name=self.name)
