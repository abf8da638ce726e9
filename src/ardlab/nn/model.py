"""Model: runs a layer graph forward in topological order and backward in reverse.

``backward`` calls ``on_grads(layer)`` as soon as a layer's parameter gradients are final, so data
parallelism can start their Allreduce while earlier layers are still differentiating.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from ardlab.nn import memory
from ardlab.nn.layers.base import Layer, Tensor


class Model:
    def __init__(self, inputs: Tensor, outputs: Tensor, name: str = "model"):
        self.name, self.input, self.output = name, inputs, outputs
        memory.keep_freed_memory()  # a step's large arrays are reused, not page-faulted in again
        order: list[Tensor] = []
        seen: set[int] = set()

        def visit(t: Tensor):
            if t.id in seen:
                return
            seen.add(t.id)
            for i in t.inputs:
                visit(i)
            order.append(t)

        visit(outputs)
        if inputs not in order:
            raise ValueError(f"model {name}: the output does not depend on the input")
        self.nodes = [t for t in order if t.layer is not None]
        self.layers: list[Layer] = [t.layer for t in self.nodes]
        self.timing: dict[str, list[float]] | None = None  # layer -> [forward s, backward s] when enabled
        self.consumers: dict[int, int] = {}
        for t in self.nodes:
            for i in t.inputs:
                self.consumers[i.id] = self.consumers.get(i.id, 0) + 1
            # nobody needs the gradient of the model's input: a layer fed only by it may skip computing it
            t.layer.need_input_grad = not all(i is inputs for i in t.inputs)
        for t in self.nodes:  # a layer that can apply the ReLU reading only it (oneDNN's post-op) takes it over
            (src,) = t.inputs if len(t.inputs) == 1 else (None,)
            if src is not None and src.layer is not None and self.consumers.get(src.id) == 1 \
                    and hasattr(src.layer, "fuse_relu") and type(t.layer).__name__ == "OnednnReLU":
                src.layer.fuse_relu(t.layer)

    @property
    def input_shape(self):
        return self.input.shape

    @property
    def output_shape(self):
        return self.output.shape

    def trainable(self) -> list[Layer]:
        """Layers with parameters, in forward order."""
        return [layer for layer in self.layers if layer.params]

    def parameters(self) -> list[tuple[Layer, str]]:
        return [(layer, k) for layer in self.trainable() for k in layer.params]

    def count_params(self) -> int:
        return sum(layer.params[k].size for layer, k in self.parameters())

    def set_dtype(self, dtype) -> "Model":
        for layer in self.layers:
            layer.set_dtype(dtype)
        return self

    def forward(self, x: np.ndarray, training: bool = False) -> np.ndarray:
        if tuple(x.shape[1:]) != self.input.shape:
            raise ValueError(f"model {self.name} expects inputs of shape (N, {', '.join(map(str, self.input.shape))}), "
                             f"got {tuple(x.shape)}")
        values = {self.input.id: x}
        remaining = dict(self.consumers)
        timing = self.timing
        for t in self.nodes:
            args = [values[i.id] for i in t.inputs]
            t0 = time.perf_counter() if timing is not None else 0.0
            values[t.id] = t.layer.forward(args if t.layer.multi_input else args[0], training)
            if timing is not None:
                timing.setdefault(t.layer.name, [0.0, 0.0])[0] += time.perf_counter() - t0
            for i in t.inputs:  # free activations nobody else reads
                remaining[i.id] -= 1
                if remaining[i.id] == 0 and i.id != self.input.id:
                    del values[i.id]
        return values[self.output.id]

    __call__ = forward

    def backward(self, dy: np.ndarray, on_grads: Callable[[Layer], None] | None = None) -> None:
        grads = {self.output.id: dy}
        timing = self.timing
        for t in reversed(self.nodes):
            g = grads.pop(t.id)
            t0 = time.perf_counter() if timing is not None else 0.0
            dx = t.layer.backward(g)
            if timing is not None:
                timing.setdefault(t.layer.name, [0.0, 0.0])[1] += time.perf_counter() - t0
            if on_grads is not None and t.layer.params:
                on_grads(t.layer)
            dxs = dx if t.layer.multi_input else [dx]
            for i, d in zip(t.inputs, dxs):
                if i is self.input:
                    continue  # the input's gradient is not needed
                grads[i.id] = grads[i.id] + d if i.id in grads else d

    def weight_arrays(self) -> list[np.ndarray]:
        """Every weight array, in place: the parameters in forward order, then the non-trainable state."""
        return [layer.params[k] for layer, k in self.parameters()] + [
            v for layer in self.layers for v in layer.state.values()]

    def get_weights(self) -> list[np.ndarray]:
        return [w.copy() for w in self.weight_arrays()]

    def set_weights(self, weights: list[np.ndarray]) -> None:
        targets = self.weight_arrays()
        if len(weights) != len(targets):
            raise ValueError(f"set_weights: expected {len(targets)} arrays, got {len(weights)}")
        for t, w in zip(targets, weights):
            if t.shape != w.shape:
                raise ValueError(f"set_weights: shape {w.shape} does not fit {t.shape}")
        for t, w in zip(targets, weights):
            t[...] = w

    def summary(self) -> str:
        lines = [f"{self.name}: input {self.input.shape}"]
        for t in self.nodes:
            n = sum(p.size for p in t.layer.params.values())
            lines.append(f"  {t.layer.name:24s} -> {str(t.shape):18s} {n:>10,d} params")
        lines.append(f"  total {self.count_params():,d} parameters")
        return "\n".join(lines)
