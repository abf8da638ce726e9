"""oneDNN's C API (libdnnl.so.3 of PyPI's onednn-cpu-gomp) through ctypes: memory descriptors, primitive
descriptors, primitives, reorders, and the plain NumPy buffers they read and write.

Why ctypes and not a compiled extension: the call overhead. Measured side by side (``python -m
ardlab.experiments.onednn_overhead``, eltwise ReLU, 1 thread, 5 interleaved rounds): a primitive run through this
binding (argument array, execute, stream wait) costs about 6 us on a 32-byte tensor, NumPy's
``np.maximum(x, 0, out=y)`` about 1.4 us; the layers' primitives take 0.1-100 ms, so the binding's overhead is
about 0.2% of a training step (some 100 primitive runs), and ctypes needs nothing built at install time.

The constants are those of oneDNN 3.2's ``dnnl_types.h`` / ``dnnl_common_types.h`` (the pinned wheel);
tests/test_nn_onednn.py checks them against the headers of ``onednn-devel-cpu-gomp`` where it is installed.
Everything is float32: oneDNN's CPU primitives train in f32 (bf16 aside), so the layers on this backend do too.
"""

from __future__ import annotations

import ctypes as C
import os
import sys
from pathlib import Path

import numpy as np

LIBRARY_ENV = "ARDLAB_DNNL_LIBRARY"  # a libdnnl.so.3 to load instead of the environment's own

F32 = 3  # dnnl_f32
TAGS = {"any": 1, "a": 2, "ab": 3, "abcd": 5, "ba": 14, "nhwc": 22, "hwio": 28, "io": 14}  # dnnl_format_tag_t
FORWARD_TRAINING, FORWARD_INFERENCE, BACKWARD_DATA, BACKWARD_WEIGHTS, BACKWARD = 64, 96, 160, 192, 128
CONVOLUTION_DIRECT = 0x1
ELTWISE_RELU, ELTWISE_RELU_USE_DST_FOR_BWD = 0x20, 0x100
POOLING_MAX = 0x1FF
BINARY_ADD = 0x1FFF0
USE_GLOBAL_STATS, USE_SCALE, USE_SHIFT, FUSE_NORM_RELU = 0x1, 0x2, 0x4, 0x8  # dnnl_normalization_flags_t
QUERY = {"src": 129, "diff_src": 130, "weights": 131, "diff_weights": 132, "dst": 133, "diff_dst": 134,
         "workspace": 135}  # dnnl_query_*_md
QUERY_IMPL_INFO_STR = 8  # dnnl_query_impl_info_str: the implementation's name
ARG = {"src": 1, "src_1": 2, "dst": 17, "weights": 33, "bias": 41, "workspace": 64, "diff_src": 129, "diff_dst": 145,
       "diff_weights": 161, "diff_bias": 169, "from": 1, "to": 17, "mean": 49, "variance": 50, "scale": 51,
       "shift": 52, "diff_scale": 255, "diff_shift": 256}  # DNNL_ARG_*
STATUS = {1: "out of memory", 2: "invalid arguments", 3: "unimplemented", 4: "last implementation reached",
          5: "runtime error", 6: "not required", 7: "invalid graph", 8: "invalid graph op",
          9: "invalid shape", 10: "invalid data type"}
CPU = 1  # dnnl_cpu
STREAM_IN_ORDER = 1
ALIGN = 64  # bytes: oneDNN's preferred alignment of buffers

P = C.c_void_p
Dims = C.c_int64 * 12  # dnnl_dims_t


class OnednnUnavailable(ImportError):
    """libdnnl could not be loaded (the onednn-cpu-gomp wheel is not in this environment)."""


class OnednnError(RuntimeError):
    """A oneDNN call returned an error status."""


class _Arg(C.Structure):
    _fields_ = [("arg", C.c_int), ("memory", P)]


def library_path() -> Path:
    """libdnnl.so.3 of this environment (the wheel puts it in <prefix>/lib), or $ARDLAB_DNNL_LIBRARY."""
    return Path(os.environ.get(LIBRARY_ENV) or Path(sys.prefix) / "lib" / "libdnnl.so.3")


_lib = None
_engine = None
_stream = None


def lib():
    """The loaded library, with the signatures ardlab calls (loaded once; OnednnUnavailable if it cannot be)."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    try:
        dl = C.CDLL(str(path))
    except OSError as e:
        raise OnednnUnavailable(f"oneDNN is not available: cannot load {path} ({e}); install the pinned "
                                "onednn-cpu-gomp wheel (containers/requirements/base.txt) or choose the numpy "
                                "backend") from None
    sigs = {
        "dnnl_engine_create": [C.POINTER(P), C.c_int, C.c_size_t],
        "dnnl_stream_create": [C.POINTER(P), P, C.c_uint],
        "dnnl_stream_wait": [P],
        "dnnl_memory_desc_create_with_tag": [C.POINTER(P), C.c_int, Dims, C.c_int, C.c_int],
        "dnnl_memory_desc_create_with_strides": [C.POINTER(P), C.c_int, Dims, C.c_int, Dims],
        "dnnl_memory_desc_destroy": [P],
        "dnnl_memory_desc_equal": [P, P],
        "dnnl_memory_desc_get_size": [P],
        "dnnl_memory_create": [C.POINTER(P), P, P, P],
        "dnnl_memory_set_data_handle": [P, P],
        "dnnl_primitive_desc_query_md": [P, C.c_int, C.c_int],
        "dnnl_primitive_desc_query": [P, C.c_int, C.c_int, P],
        "dnnl_primitive_create": [C.POINTER(P), P],
        "dnnl_primitive_execute": [P, P, C.c_int, P],
        "dnnl_reorder_primitive_desc_create": [C.POINTER(P), P, P, P, P, P],
        "dnnl_convolution_forward_primitive_desc_create":
            [C.POINTER(P), P, C.c_int, C.c_int, P, P, P, P, Dims, Dims, Dims, Dims, P],
        "dnnl_convolution_backward_data_primitive_desc_create":
            [C.POINTER(P), P, C.c_int, P, P, P, Dims, Dims, Dims, Dims, P, P],
        "dnnl_convolution_backward_weights_primitive_desc_create":
            [C.POINTER(P), P, C.c_int, P, P, P, P, Dims, Dims, Dims, Dims, P, P],
        "dnnl_eltwise_forward_primitive_desc_create": [C.POINTER(P), P, C.c_int, C.c_int, P, P, C.c_float, C.c_float,
                                                       P],
        "dnnl_eltwise_backward_primitive_desc_create":
            [C.POINTER(P), P, C.c_int, P, P, P, C.c_float, C.c_float, P, P],
        "dnnl_pooling_forward_primitive_desc_create":
            [C.POINTER(P), P, C.c_int, C.c_int, P, P, Dims, Dims, Dims, Dims, Dims, P],
        "dnnl_pooling_backward_primitive_desc_create":
            [C.POINTER(P), P, C.c_int, P, P, Dims, Dims, Dims, Dims, Dims, P, P],
        "dnnl_batch_normalization_forward_primitive_desc_create":
            [C.POINTER(P), P, C.c_int, P, P, C.c_float, C.c_uint, P],
        "dnnl_batch_normalization_backward_primitive_desc_create":
            [C.POINTER(P), P, C.c_int, P, P, P, C.c_float, C.c_uint, P, P],
        "dnnl_matmul_primitive_desc_create": [C.POINTER(P), P, P, P, P, P, P],
        "dnnl_binary_primitive_desc_create": [C.POINTER(P), P, C.c_int, P, P, P, P],
        "dnnl_primitive_attr_create": [C.POINTER(P)],
        "dnnl_primitive_attr_set_post_ops": [P, P],
        "dnnl_post_ops_create": [C.POINTER(P)],
        "dnnl_post_ops_append_eltwise": [P, C.c_int, C.c_float, C.c_float],
        "dnnl_version": [],
    }
    for name, args in sigs.items():
        getattr(dl, name).argtypes = args
    dl.dnnl_primitive_desc_query_md.restype = P
    dl.dnnl_memory_desc_get_size.restype = C.c_size_t
    dl.dnnl_version.restype = C.POINTER(C.c_int * 3)
    _lib = dl
    return dl


def version() -> str:
    v = lib().dnnl_version().contents
    return ".".join(map(str, v[:3]))


def check(status: int, what: str) -> None:
    if status != 0:
        raise OnednnError(f"oneDNN {what}: {STATUS.get(status, f'status {status}')}")


def engine_and_stream():
    """The process's CPU engine and its in-order stream (made once)."""
    global _engine, _stream
    if _engine is None:
        e, s = P(), P()
        check(lib().dnnl_engine_create(C.byref(e), CPU, 0), "engine")
        check(lib().dnnl_stream_create(C.byref(s), e, STREAM_IN_ORDER), "stream")
        _engine, _stream = e, s
    return _engine, _stream


def dims(values) -> Dims:
    return Dims(*values)


def md(shape, tag: str) -> P:
    """A float32 memory descriptor of logical `shape` (oneDNN's order: N, C, H, W / O, I, H, W) in layout `tag`."""
    out = P()
    check(lib().dnnl_memory_desc_create_with_tag(C.byref(out), len(shape), dims(shape), F32, TAGS[tag]),
          f"memory descriptor {tuple(shape)} {tag}")
    return out


def md_strided(shape, strides) -> P:
    """A float32 memory descriptor of logical `shape` whose elements lie `strides` (in elements) apart: a NumPy
    array's own layout, where no format tag names it."""
    out = P()
    check(lib().dnnl_memory_desc_create_with_strides(C.byref(out), len(shape), dims(shape), F32, dims(strides)),
          f"memory descriptor {tuple(shape)} strides {tuple(strides)}")
    return out


def query(pd: P, what: str) -> P:
    """The memory descriptor a primitive descriptor chose for `what` (owned by the primitive descriptor)."""
    return P(lib().dnnl_primitive_desc_query_md(pd, QUERY[what], 0))


def implementation(pd: P) -> str:
    """The name of the implementation oneDNN chose for a primitive descriptor (e.g. brg:avx512_core, gemm:jit)."""
    name = C.c_char_p()
    check(lib().dnnl_primitive_desc_query(pd, QUERY_IMPL_INFO_STR, 0, C.cast(C.byref(name), P)),
          "implementation name")
    return name.value.decode()


def same(a: P, b: P) -> bool:
    return bool(lib().dnnl_memory_desc_equal(a, b))


def buffer(desc: P) -> np.ndarray:
    """A 64-byte aligned float32 buffer large enough for `desc` (a layout oneDNN chose)."""
    n = lib().dnnl_memory_desc_get_size(desc)
    raw = np.empty(n + ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % ALIGN
    return raw[off: off + n].view(np.float32)


class Memory:
    """A oneDNN memory object over a NumPy buffer; `bind` points it at another buffer of the same layout."""

    def __init__(self, desc: P, array: np.ndarray | None = None):
        self.desc = desc
        self.array = buffer(desc) if array is None else array
        self.handle = P()
        check(lib().dnnl_memory_create(C.byref(self.handle), desc, engine_and_stream()[0], P(self.array.ctypes.data)),
              "memory")

    def bind(self, array: np.ndarray) -> "Memory":
        if array.dtype != np.float32 or not array.flags.c_contiguous:
            raise ValueError(f"oneDNN buffers must be C-contiguous float32, got {array.dtype}"
                             f"{'' if array.flags.c_contiguous else ', not contiguous'}")
        self.array = array
        check(lib().dnnl_memory_set_data_handle(self.handle, P(array.ctypes.data)), "set data handle")
        return self


class Primitive:
    """A primitive made from its descriptor; `run` executes it with {argument name: Memory} and waits."""

    def __init__(self, pd: P, what: str):
        self.pd, self.what = pd, what
        self.handle = P()
        check(lib().dnnl_primitive_create(C.byref(self.handle), pd), f"{what} primitive")

    def run(self, **args: Memory) -> None:
        arr = (_Arg * len(args))(*(_Arg(ARG[k], m.handle) for k, m in args.items()))
        _, stream = engine_and_stream()
        check(lib().dnnl_primitive_execute(self.handle, stream, len(args), arr), self.what)
        check(lib().dnnl_stream_wait(stream), f"{self.what} (wait)")


def primitive_desc(function: str, what: str, *args) -> P:
    """Call dnnl_<function>(&pd, engine, *args) and return the primitive descriptor (OnednnError naming `what`)."""
    pd = P()
    check(getattr(lib(), f"dnnl_{function}")(C.byref(pd), engine_and_stream()[0], *args), what)
    return pd


def relu_post_op() -> P:
    """Primitive attributes that apply ReLU to a primitive's output (a fused post-op)."""
    attr, ops = P(), P()
    check(lib().dnnl_primitive_attr_create(C.byref(attr)), "primitive attributes")
    check(lib().dnnl_post_ops_create(C.byref(ops)), "post-ops")
    check(lib().dnnl_post_ops_append_eltwise(ops, ELTWISE_RELU, 0.0, 0.0), "ReLU post-op")
    check(lib().dnnl_primitive_attr_set_post_ops(attr, ops), "set post-ops")
    return attr


def activation_md(shape) -> P:
    """The descriptor of an NHWC activation (N, H, W, C) or a 2-D one (N, C), in oneDNN's logical order."""
    if len(shape) == 4:
        n, h, w, c = shape
        return md((n, c, h, w), "nhwc")
    if len(shape) == 2:
        return md(shape, "ab")
    raise ValueError(f"oneDNN layers take (N, H, W, C) or (N, C) activations, got shape {tuple(shape)}")


def reorder(src: P, dst: P) -> Primitive:
    """The primitive copying from layout `src` into layout `dst`."""
    pd = P()
    eng = engine_and_stream()[0]
    check(lib().dnnl_reorder_primitive_desc_create(C.byref(pd), src, eng, dst, eng, None), "reorder")
    return Primitive(pd, "reorder")


def available() -> bool:
    """Whether oneDNN loads in this environment."""
    try:
        lib()
    except OnednnUnavailable:
        return False
    return True
