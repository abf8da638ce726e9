"""Convolution on oneDNN's primitives, ungrouped, grouped and depthwise: forward, backward-data and
backward-weights with the bias, created once per input shape and kept.

Conv2D -> ReLU: where a ReLU is the convolution's only reader, the model fuses it into the forward primitive as
a post-op (``fuse_relu``): one pass over the output instead of two; backward is as before (the ReLU masks the
gradient with the output it kept, then the convolution's backward runs).

Layouts: activations and their gradients stay NHWC, ardlab's own layout, which oneDNN's direct convolutions read
and write natively (so consecutive layers never reorder them); the weights live in the HWIO array the other
backends and the optimizers use, and are reordered each step into the blocked layout the primitive chose
(``format_tag_any``), and the weight gradient back from it. ``weights_layout = "hwio"`` makes an ungrouped
layer's primitives read the HWIO array itself (no reorders): slower implementations, kept for the measurement
that says so (``python -m ardlab.experiments.onednn_layouts``). float32 only.
"""

from __future__ import annotations

import numpy as np

from ardlab.nn import onednn as dn
from ardlab.nn.layers.conv import Conv2D
from ardlab.nn.layers.onednn_layers import Float32Only, FusesReLU, Planned

WEIGHTS_LAYOUTS = ("any", "hwio")  # the primitives' choice (the default) | the HWIO array as it is


class _Plan:
    """The primitives and memories of one input shape."""

    def __init__(self, layer: "OnednnConv2D", shape):
        n, h, w, c = shape
        f, (kh, kw), (sh, sw) = layer.filters, layer.k, layer.s
        ho, wo = layer.ho, layer.wo
        pt, pb, pl, pr = layer.pads
        eng, _ = dn.engine_and_stream()
        src, dst = dn.md((n, c, h, w), "nhwc"), dn.md((n, f, ho, wo), "nhwc")
        g = layer.groups
        if layer.weights_layout not in WEIGHTS_LAYOUTS:
            raise ValueError(f"{layer.name}: weights_layout {layer.weights_layout!r}; valid: "
                             f"{', '.join(WEIGHTS_LAYOUTS)}")
        if g == 1:
            user_w, any_w = dn.md((f, c, kh, kw), "hwio"), dn.md((f, c, kh, kw), layer.weights_layout)
        elif layer.weights_layout != "any":
            raise ValueError(f"{layer.name}: weights_layout {layer.weights_layout!r} is for ungrouped convolutions "
                             f"(this one has {g} groups)")
        else:  # oneDNN's (G, O/G, I/G, KH, KW) over the (KH, KW, C/G, F) array, output channel f = g * F/G + o
            cg, fg = c // g, f // g
            user_w = dn.md_strided((g, fg, cg, kh, kw), (fg, 1, f, kw * cg * f, cg * f))
            any_w = dn.md((g, fg, cg, kh, kw), "any")
        bias = dn.md((f,), "a") if layer.use_bias else None
        geo = (dn.dims((sh, sw)), dn.dims((0, 0)), dn.dims((pt, pl)), dn.dims((pb, pr)))
        lib = dn.lib()

        fwd = dn.P()
        attr = dn.relu_post_op() if layer.fused_relu else None
        dn.check(lib.dnnl_convolution_forward_primitive_desc_create(
            dn.C.byref(fwd), eng, dn.FORWARD_TRAINING, dn.CONVOLUTION_DIRECT, src, any_w, bias, dst, *geo, attr),
            f"{layer.name}: convolution forward {tuple(shape)}")
        bwd_d = dn.P()
        dn.check(lib.dnnl_convolution_backward_data_primitive_desc_create(
            dn.C.byref(bwd_d), eng, dn.CONVOLUTION_DIRECT, src, any_w, dst, *geo, fwd, None),
            f"{layer.name}: convolution backward data")
        bwd_w = dn.P()
        dn.check(lib.dnnl_convolution_backward_weights_primitive_desc_create(
            dn.C.byref(bwd_w), eng, dn.CONVOLUTION_DIRECT, src, any_w, bias, dst, *geo, fwd, None),
            f"{layer.name}: convolution backward weights")
        self.implementations = {"forward": dn.implementation(fwd), "backward_data": dn.implementation(bwd_d),
                                "backward_weights": dn.implementation(bwd_w)}
        self.fwd, self.bwd_d, self.bwd_w = (dn.Primitive(fwd, "convolution forward"),
                                            dn.Primitive(bwd_d, "convolution backward data"),
                                            dn.Primitive(bwd_w, "convolution backward weights"))
        self.src, self.dst, self.diff_src, self.diff_dst = (dn.Memory(src), dn.Memory(dst),
                                                            dn.Memory(src), dn.Memory(dst))
        self.user_w = dn.Memory(user_w)  # the kernel (HWIO)
        self.user_gw = dn.Memory(user_w)  # its gradient (HWIO)
        self.fwd_w = self._weights(fwd, "weights", user_w)
        d_w = dn.query(bwd_d, "weights")
        self.bwd_d_w = self.fwd_w if dn.same(d_w, dn.query(fwd, "weights")) else self._weights(bwd_d, "weights", user_w)
        g_w = dn.query(bwd_w, "diff_weights")
        self.diff_w = dn.Memory(g_w)
        self.diff_w_out = None if dn.same(g_w, user_w) else dn.reorder(g_w, user_w)
        self.bias = dn.Memory(bias) if bias else None
        self.diff_bias = dn.Memory(bias) if bias else None

    @staticmethod
    def _weights(pd, what, user_w):
        """(memory in the primitive's chosen layout, reorder from HWIO or None)."""
        chosen = dn.query(pd, what)
        if dn.same(chosen, user_w):
            return None, None
        return dn.Memory(chosen), dn.reorder(user_w, chosen)


class OnednnConv2D(Planned, FusesReLU, Float32Only, Conv2D, variant="onednn"):
    weights_layout = "any"  # see WEIGHTS_LAYOUTS; set before the layer first runs

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        dn.lib()  # raises OnednnUnavailable naming the library it could not load

    def _make_plan(self, shape) -> _Plan:
        return _Plan(self, shape)

    def _weights_for(self, mem_and_reorder, plan: _Plan) -> dn.Memory:
        """The kernel in a primitive's layout: the HWIO array itself, or its reorder into the kept buffer."""
        plan.user_w.bind(self.params["kernel"])
        mem, reorder = mem_and_reorder
        if reorder is None:
            return plan.user_w
        reorder.run(**{"from": plan.user_w, "to": mem})
        return mem

    def forward(self, x, training=False):
        n, ho, wo, _ = self._start(x)
        x = np.ascontiguousarray(x, dtype=np.float32)
        plan = self._plan(x.shape)
        y = np.empty((n, ho, wo, self.filters), dtype=np.float32)
        args = {"src": plan.src.bind(x), "weights": self._weights_for(plan.fwd_w, plan), "dst": plan.dst.bind(y)}
        if self.use_bias:
            args["bias"] = plan.bias.bind(self.params["bias"])
        plan.fwd.run(**args)
        self.x = x
        return y

    def backward(self, dy):
        dy = np.ascontiguousarray(dy, dtype=np.float32)
        plan = self._plan(self.x_shape)
        dx = None
        if self.need_input_grad:
            dx = np.empty(self.x_shape, dtype=np.float32)
            if plan.bwd_d_w is plan.fwd_w:  # forward's reordered kernel is still current
                w = plan.fwd_w[0] or plan.user_w.bind(self.params["kernel"])
            else:
                w = self._weights_for(plan.bwd_d_w, plan)
            plan.bwd_d.run(diff_dst=plan.diff_dst.bind(dy), weights=w, diff_src=plan.diff_src.bind(dx))
        args = {"src": plan.src.bind(self.x), "diff_dst": plan.diff_dst.bind(dy)}
        grad = self.grads["kernel"]
        if plan.diff_w_out is None:
            args["diff_weights"] = plan.user_gw.bind(grad)
        else:
            args["diff_weights"] = plan.diff_w
        if self.use_bias:
            args["diff_bias"] = plan.diff_bias.bind(self.grads["bias"])
        plan.bwd_w.run(**args)
        if plan.diff_w_out is not None:
            plan.diff_w_out.run(**{"from": plan.diff_w, "to": plan.user_gw.bind(grad)})
        self.x = None
        return dx
