"""The layer protocol and the symbolic graph that models are built from.

A layer has ``build(input_shape) -> output_shape`` (shapes exclude the batch dimension),
``forward(x, training) -> y`` and ``backward(dy) -> dx``; its parameters and their gradients sit side by side
in ``params`` and ``grads`` (same keys, same shapes), and arrays that are part of its weights but not trained
(BatchNormalization's running statistics; Keras's non-trainable weights) in ``state``. Calling a layer on a ``Tensor``
records the graph:

    x = Input((32, 32, 3)); y = ReLU()(Conv2D(16, 3)(x)); model = Model(x, y)
"""

from __future__ import annotations

import itertools

import numpy as np

_ids = itertools.count()

# (public layer class, backend) -> the class implementing it there (ardlab.nn.backend; registered by the modules
# that define them, e.g. layers.onednn_layers, imported when the backend is chosen).
BACKEND_VARIANTS: dict[tuple[type, str], type] = {}


def register_variant(public: type, backend_name: str):
    """Class decorator: the decorated subclass of `public` implements it on `backend_name`."""
    def register(cls):
        BACKEND_VARIANTS[public, backend_name] = cls
        return cls
    return register


class Tensor:
    """A symbolic value in the graph: which layer makes it from which inputs, and its shape."""

    def __init__(self, layer: "Layer | None", inputs: tuple["Tensor", ...], shape: tuple[int, ...]):
        self.layer, self.inputs, self.shape = layer, inputs, tuple(int(s) for s in shape)
        self.id = next(_ids)

    def __repr__(self) -> str:
        return f"Tensor({self.layer.name if self.layer else 'input'}, shape={self.shape})"


class Layer:
    """Base class: subclasses implement build/forward/backward and fill params/grads."""

    multi_input = False  # Add / Concatenate take a list of inputs
    # Set False by Model when a layer's only input is the model's input (nobody needs that gradient): layers
    # with a costly input gradient (Conv2D) then return None from backward.
    need_input_grad = True
    _counter: dict[str, itertools.count] = {}
    kind: str | None = None  # the public class a default name is made from (None: the class itself)

    def keras_equivalent(self, k, in_shape):
        """The Keras layer with the same arithmetic and parameter shapes (`k`: keras.layers; `in_shape`: this
        layer's input shape, batch excluded), for TensorFlow + Horovod (ardlab.horovod.models)."""
        raise ValueError(f"no Keras equivalent for ardlab.nn layer {type(self).__name__} ({self.name})")

    def __new__(cls, *args, **kwargs):
        """On a backend other than numpy, the layer it registered for this class (if any) is made instead."""
        from ardlab.nn import backend

        name = backend.get()
        if name != "numpy":
            cls = BACKEND_VARIANTS.get((cls, name), cls)
        return super().__new__(cls)

    def __init__(self, name: str | None = None):
        cls = (self.kind or type(self).__name__).lower()
        self.name = name or f"{cls}_{next(Layer._counter.setdefault(cls, itertools.count()))}"
        self.params: dict[str, np.ndarray] = {}
        self.grads: dict[str, np.ndarray] = {}
        self.state: dict[str, np.ndarray] = {}  # non-trainable weights: saved, loaded and broadcast with params
        self.dtype = np.float32
        self.built = False

    def __call__(self, *inputs: Tensor) -> Tensor:
        if self.built:
            raise ValueError(f"layer {self.name} is already used in a graph; create a new layer")
        if not self.multi_input and len(inputs) != 1:
            raise ValueError(f"layer {self.name} takes one input, got {len(inputs)}")
        shapes = [t.shape for t in inputs]
        out = self.build(shapes if self.multi_input else shapes[0])
        self.built = True
        return Tensor(self, tuple(inputs), out)

    def add_param(self, name: str, value: np.ndarray) -> np.ndarray:
        self.params[name] = np.ascontiguousarray(value, dtype=self.dtype)
        self.grads[name] = np.zeros_like(self.params[name])
        return self.params[name]

    def add_state(self, name: str, value: np.ndarray) -> np.ndarray:
        self.state[name] = np.ascontiguousarray(value, dtype=self.dtype)
        return self.state[name]

    def build(self, input_shape):  # -> output shape
        return input_shape

    def forward(self, x, training: bool = False):
        raise NotImplementedError

    def backward(self, dy):
        raise NotImplementedError

    def set_dtype(self, dtype) -> None:
        self.dtype = np.dtype(dtype).type
        for k in self.params:
            self.params[k] = self.params[k].astype(self.dtype)
            self.grads[k] = np.zeros_like(self.params[k])
        for k in self.state:
            self.state[k] = self.state[k].astype(self.dtype)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


def Input(shape) -> Tensor:
    """The graph's input placeholder (shape without the batch dimension)."""
    return Tensor(None, (), tuple(shape))
