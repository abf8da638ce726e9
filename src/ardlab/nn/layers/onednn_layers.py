"""Dense, ReLU, Add, MaxPool2D and BatchNormalization on oneDNN's primitives (the onednn backend; ``conv_onednn`` has
the
convolution). Each keeps the NumPy layer's protocol and parameters and replaces its forward and backward; the
primitives are made once per input shape. Activations stay NHWC (or (N, C)), as on the numpy backend.
"""

from __future__ import annotations

import numpy as np

from ardlab.nn import onednn as dn
from ardlab.nn.layers.activations import ReLU
from ardlab.nn.layers.base import register_variant
from ardlab.nn.layers.dense import Dense
from ardlab.nn.layers.misc import Add
from ardlab.nn.layers.norm import BatchNormalization
from ardlab.nn.layers.pool import MaxPool2D
from ardlab.nn.layers.windows import out_and_pads


def _f32(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


class Float32Only:
    """The oneDNN layers' precision: float32 only, any other is an error naming the layer."""

    def set_dtype(self, dtype) -> None:
        if np.dtype(dtype) != np.float32:
            raise ValueError(f"{self.name}: the oneDNN backend computes in float32, not {np.dtype(dtype)}; "
                             "use the numpy backend for other precisions")
        super().set_dtype(dtype)


class Planned:
    """A oneDNN layer's primitives and memories, made once per key (the input's shape; BatchNormalization's with
    training or not) by the layer's ``_make_plan(*key)`` and kept: ``_plan(*key)``."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.plans = {}

    def _plan(self, *key):
        k = key if len(key) > 1 else key[0]
        if k not in self.plans:
            self.plans[k] = self._make_plan(*key)
        return self.plans[k]


class FusesReLU:
    """A oneDNN layer that can apply the ReLU reading only it (Model, at build): ``relu_mode`` "forward" (a post-op:
    the ReLU passes forward through and masks backward with the output it keeps) or "both" (the layer masks its
    own gradient too: the ReLU passes through both ways). Only before the layer's first primitive is made."""

    relu_mode = "forward"
    fused_relu = False

    def can_fuse(self) -> bool:
        return not self.plans

    def fuse_relu(self, relu) -> bool:
        if not self.can_fuse() or getattr(relu, "fused", None) != "":
            return False
        self.fused_relu = True
        relu.fused = self.relu_mode
        return True


@register_variant(Dense, "onednn")
class OnednnDense(Planned, Float32Only, Dense):
    """y = x W + b as oneDNN matmuls: forward (bias fused), dx = dy W^T and dW = x^T dy read the same row-major
    arrays through transposed descriptors ("ba"), db = 1^T dy. On this backend every kernel of a step then runs
    in oneDNN's OpenMP threads; a BLAS call between them wakes a second pool that competes for the same cores
    (measured on VGG-11, 2 threads: OpenBLAS at 1 thread instead of 2 took the step from 413 to 328 ms)."""

    kind = "Dense"

    def _make_plan(self, n: int):
        d, u = self.params["kernel"].shape
        mm = "matmul_primitive_desc_create"
        bias = dn.md((1, u), "ab") if self.use_bias else None
        fwd = dn.primitive_desc(mm, f"{self.name}: matmul", dn.md((n, d), "ab"), dn.md((d, u), "ab"), bias,
                                dn.md((n, u), "ab"), None)
        bwd_d = dn.primitive_desc(mm, f"{self.name}: matmul (input gradient)", dn.md((n, u), "ab"),
                                  dn.md((u, d), "ba"), None, dn.md((n, d), "ab"), None)
        bwd_w = dn.primitive_desc(mm, f"{self.name}: matmul (kernel gradient)", dn.md((d, n), "ba"),
                                  dn.md((n, u), "ab"), None, dn.md((d, u), "ab"), None)
        plan = {"fwd": dn.Primitive(fwd, "dense forward"), "bwd_d": dn.Primitive(bwd_d, "dense input gradient"),
                "bwd_w": dn.Primitive(bwd_w, "dense kernel gradient"),
                **{k: dn.Memory(dn.query(pd, k2)) for k, (pd, k2) in {
                    "x": (fwd, "src"), "w": (fwd, "weights"), "y": (fwd, "dst"), "dy": (bwd_d, "src"),
                    "wt": (bwd_d, "weights"), "dx": (bwd_d, "dst"), "xt": (bwd_w, "src"),
                    "dy2": (bwd_w, "weights"), "dw": (bwd_w, "dst")}.items()}}
        if self.use_bias:
            ones = np.ones((1, n), np.float32)
            bwd_b = dn.primitive_desc(mm, f"{self.name}: matmul (bias gradient)", dn.md((1, n), "ab"),
                                      dn.md((n, u), "ab"), None, dn.md((1, u), "ab"), None)
            plan.update(bwd_b=dn.Primitive(bwd_b, "dense bias gradient"), b=dn.Memory(bias),
                        ones=dn.Memory(dn.md((1, n), "ab"), ones), dy3=dn.Memory(dn.md((n, u), "ab")),
                        db=dn.Memory(dn.md((1, u), "ab")))
        return plan

    def forward(self, x, training=False):
        x = _f32(x)
        p = self._plan(x.shape[0])
        y = np.empty((x.shape[0], self.units), np.float32)
        args = {"src": p["x"].bind(x), "weights": p["w"].bind(self.params["kernel"]), "dst": p["y"].bind(y)}
        if self.use_bias:
            args["bias"] = p["b"].bind(self.params["bias"].reshape(1, -1))
        p["fwd"].run(**args)
        self.x = x
        return y

    def backward(self, dy):
        dy = _f32(dy)
        p = self._plan(dy.shape[0])
        p["bwd_w"].run(src=p["xt"].bind(self.x), weights=p["dy2"].bind(dy), dst=p["dw"].bind(self.grads["kernel"]))
        if self.use_bias:
            p["bwd_b"].run(src=p["ones"], weights=p["dy3"].bind(dy),
                           dst=p["db"].bind(self.grads["bias"].reshape(1, -1)))
        dx = None
        if self.need_input_grad:
            dx = np.empty(self.x.shape, np.float32)
            p["bwd_d"].run(src=p["dy"].bind(dy), weights=p["wt"].bind(self.params["kernel"]), dst=p["dx"].bind(dx))
        self.x = None
        return dx


@register_variant(ReLU, "onednn")
class OnednnReLU(Planned, Float32Only, ReLU):
    """Eltwise ReLU; backward reads the kept output (relu_use_dst_for_bwd), as the NumPy layer does."""

    kind = "ReLU"

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        # Set by the layer before it when that layer applies this ReLU (Model, fuse_relu): "forward" (a
        # convolution's post-op: forward passes through, backward masks with the kept output) or "both"
        # (BatchNormalization's fuse_norm_relu: its backward masks too, so both directions pass through).
        self.fused = ""

    def _make_plan(self, size: int):
        d = dn.md((size,), "a")
        fwd = dn.primitive_desc("eltwise_forward_primitive_desc_create", f"{self.name}: ReLU",
                                dn.FORWARD_TRAINING, dn.ELTWISE_RELU_USE_DST_FOR_BWD, d, d, 0.0, 0.0, None)
        bwd = dn.primitive_desc("eltwise_backward_primitive_desc_create", f"{self.name}: ReLU backward",
                                dn.ELTWISE_RELU_USE_DST_FOR_BWD, d, d, d, 0.0, 0.0, fwd, None)
        return (dn.Primitive(fwd, "ReLU"), dn.Primitive(bwd, "ReLU backward"), *(dn.Memory(d) for _ in range(3)))

    def forward(self, x, training=False):
        x = _f32(x)
        if self.fused:
            self.y = x if self.fused == "forward" else None
            return x
        fwd, _, src, dst, _ = self._plan(x.size)
        self.y = np.empty_like(x)
        fwd.run(src=src.bind(x.reshape(-1)), dst=dst.bind(self.y.reshape(-1)))
        return self.y

    def backward(self, dy):
        dy = _f32(dy)
        if self.fused == "both":
            return dy
        _, bwd, data, diff, out = self._plan(dy.size)
        dx = np.empty_like(dy)
        bwd.run(dst=data.bind(self.y.reshape(-1)), diff_dst=diff.bind(dy.reshape(-1)),
                diff_src=out.bind(dx.reshape(-1)))
        self.y = None
        return dx


@register_variant(Add, "onednn")
class OnednnAdd(Planned, FusesReLU, Float32Only, Add):
    """The sum of its inputs as oneDNN binary adds (the first two into the output, each further one added in
    place). Add -> ReLU (ResNet's block ending): where a ReLU is its only reader, the model fuses it as the last
    add's post-op (``fuse_relu``), as for a convolution: the ReLU passes forward through, backward masks."""

    kind = "Add"

    def can_fuse(self) -> bool:
        return super().can_fuse() and self.n >= 2

    def _make_plan(self, shape):
        d = dn.activation_md(shape) if len(shape) in (2, 4) else dn.md((int(np.prod(shape)),), "a")
        make = [dn.primitive_desc("binary_primitive_desc_create", f"{self.name}: add", dn.BINARY_ADD, d, d, d,
                                  dn.relu_post_op() if relu else None) for relu in (False, self.fused_relu)]
        return ([dn.Primitive(pd, "add") for pd in make], [dn.Memory(d) for _ in range(3)])

    def forward(self, xs, training=False):
        xs = [_f32(x) for x in xs]
        if len(xs) == 1:
            return xs[0].copy()
        (plain, last), (a, b, out) = self._plan(xs[0].shape)
        y = np.empty_like(xs[0])
        acc = xs[0]
        for i, x in enumerate(xs[1:], start=2):
            (last if i == len(xs) else plain).run(src=a.bind(acc), src_1=b.bind(x), dst=out.bind(y))
            acc = y
        return y


@register_variant(MaxPool2D, "onednn")
class OnednnMaxPool2D(Planned, Float32Only, MaxPool2D):
    """Max pooling (padding excluded from the maximum); backward routes each gradient through the workspace the
    forward pass keeps."""

    kind = "MaxPool2D"

    def _make_plan(self, shape):
        n, h, w, c = shape
        ho, wo, (pt, pb, pl, pr) = out_and_pads(h, w, self.k, self.s, self.padding)
        src, dst = dn.md((n, c, h, w), "nhwc"), dn.md((n, c, ho, wo), "nhwc")
        geo = (dn.dims(self.s), dn.dims(self.k), dn.dims((0, 0)), dn.dims((pt, pl)), dn.dims((pb, pr)))
        fwd = dn.primitive_desc("pooling_forward_primitive_desc_create", f"{self.name}: max pooling",
                                dn.FORWARD_TRAINING, dn.POOLING_MAX, src, dst, *geo, None)
        bwd = dn.primitive_desc("pooling_backward_primitive_desc_create", f"{self.name}: max pooling backward",
                                dn.POOLING_MAX, src, dst, *geo, fwd, None)
        return {"fwd": dn.Primitive(fwd, "max pooling"), "bwd": dn.Primitive(bwd, "max pooling backward"),
                "src": dn.Memory(src), "dst": dn.Memory(dst), "ws": dn.Memory(dn.query(fwd, "workspace")),
                "diff_src": dn.Memory(src), "diff_dst": dn.Memory(dst), "out": (n, ho, wo, c)}

    def forward(self, x, training=False):
        x = _f32(x)
        p = self._plan(x.shape)
        y = np.empty(p["out"], dtype=np.float32)
        self.x_shape = x.shape
        p["fwd"].run(src=p["src"].bind(x), dst=p["dst"].bind(y), workspace=p["ws"])
        return y

    def backward(self, dy):
        p = self._plan(self.x_shape)
        dx = np.empty(self.x_shape, dtype=np.float32)
        p["bwd"].run(diff_dst=p["diff_dst"].bind(_f32(dy)), workspace=p["ws"], diff_src=p["diff_src"].bind(dx))
        return dx


@register_variant(BatchNormalization, "onednn")
class OnednnBatchNormalization(Planned, FusesReLU, Float32Only, BatchNormalization):
    """Batch statistics in training (the running ones updated from them, as the NumPy layer does), the running
    statistics in inference; backward with the scale and shift gradients. BatchNormalization -> ReLU: where a ReLU
    is its only reader, the model fuses it (``fuse_relu``, oneDNN's fuse_norm_relu): forward applies it and keeps
    a workspace of where it passed, backward masks the gradient with that workspace; the ReLU layer passes
    through both ways (ResNet's Conv2D -> BatchNormalization -> ReLU: one pass over the activation less each way)."""

    kind = "BatchNormalization"

    relu_mode = "both"

    def _make_plan(self, shape, training: bool):
        d = dn.activation_md(shape)
        flags = (dn.USE_SCALE | dn.USE_SHIFT | (0 if training else dn.USE_GLOBAL_STATS)
                 | (dn.FUSE_NORM_RELU if self.fused_relu else 0))
        prop = dn.FORWARD_TRAINING if training else dn.FORWARD_INFERENCE
        fwd = dn.primitive_desc("batch_normalization_forward_primitive_desc_create",
                                f"{self.name}: batch normalization", prop, d, d, self.epsilon, flags, None)
        hint = fwd if training else dn.primitive_desc(
            "batch_normalization_forward_primitive_desc_create", f"{self.name}: batch normalization",
            dn.FORWARD_TRAINING, d, d, self.epsilon, flags, None)
        bwd = dn.primitive_desc("batch_normalization_backward_primitive_desc_create",
                                f"{self.name}: batch normalization backward", dn.BACKWARD, d, d, d, self.epsilon,
                                flags, hint, None)
        c = dn.md((shape[-1],), "a")
        return {"fwd": dn.Primitive(fwd, "batch normalization"),
                "ws": dn.Memory(dn.query(fwd, "workspace")),  # where the fused ReLU passed
                "bwd": dn.Primitive(bwd, "batch normalization backward"),
                **{k: dn.Memory(d) for k in ("src", "dst", "diff_src", "diff_dst")},
                **{k: dn.Memory(c) for k in ("mean", "variance", "scale", "shift", "diff_scale", "diff_shift")}}

    def forward(self, x, training=False):
        x = _f32(x)
        p = self._plan(x.shape, training)
        y = np.empty_like(x)
        c = x.shape[-1]
        if training:
            mean, var = np.empty(c, np.float32), np.empty(c, np.float32)
        else:
            mean, var = _f32(self.state["running_mean"]), _f32(self.state["running_var"])
        args = {"workspace": p["ws"]} if self.fused_relu and training else {}
        p["fwd"].run(src=p["src"].bind(x), dst=p["dst"].bind(y), mean=p["mean"].bind(mean),
                     variance=p["variance"].bind(var), scale=p["scale"].bind(self.params["gamma"]),
                     shift=p["shift"].bind(self.params["beta"]), **args)
        if training:
            self.update_running(mean, var)
        self.x, self.mean, self.var, self.batch_stats = x, mean, var, training
        return y

    def backward(self, dy):
        p = self._plan(self.x.shape, self.batch_stats)
        dx = np.empty_like(self.x)
        args = {"workspace": p["ws"]} if self.fused_relu and self.batch_stats else {}
        p["bwd"].run(**args, src=p["src"].bind(self.x), mean=p["mean"].bind(self.mean),
                     variance=p["variance"].bind(self.var),
                     diff_dst=p["diff_dst"].bind(_f32(dy)), scale=p["scale"].bind(self.params["gamma"]),
                     diff_src=p["diff_src"].bind(dx), diff_scale=p["diff_scale"].bind(self.grads["gamma"]),
                     diff_shift=p["diff_shift"].bind(self.grads["beta"]))
        self.x = None
        return dx
