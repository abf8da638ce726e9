"""The layers of ardlab.nn, all following the protocol of ``base.Layer``."""

from ardlab.nn.layers.activations import LeakyReLU, ReLU, Sigmoid, Softmax, Tanh  # noqa: F401
from ardlab.nn.layers.base import Input, Layer, Tensor  # noqa: F401
from ardlab.nn.layers.conv import Conv2D  # noqa: F401
from ardlab.nn.layers.conv_dense import DenseConv2D  # noqa: F401  (registers Conv2D's implementations)
from ardlab.nn.layers.conv_grouped import GroupedConv2D  # noqa: F401
from ardlab.nn.layers.conv_onednn import OnednnConv2D  # noqa: F401  (the onednn backend's layers: registered
from ardlab.nn.layers.dense import Dense  # noqa: F401
from ardlab.nn.layers.misc import Add, Concatenate, Dropout, Flatten  # noqa: F401
from ardlab.nn.layers.norm import BatchNormalization  # noqa: F401
from ardlab.nn.layers.onednn_layers import OnednnBatchNormalization  # noqa: F401  here, loaded when first used)
from ardlab.nn.layers.pool import AveragePool2D, GlobalAveragePool, MaxPool2D  # noqa: F401
