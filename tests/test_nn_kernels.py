"""ardlab.nn's compiled kernels against independent NumPy references.

im2row against NumPy's sliding windows of the padded input (exact); col2im as im2row's adjoint
(<im2row(x), D> = <x, col2im(D)>, float64, rtol 1e-12) and against a scatter-add reference (exact up to float32
summation order, rtol 1e-6); BatchNormalization's moments against np.mean/np.var (float64 accumulation: rtol 1e-6
on float32 data).
"""

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from ardlab.nn import kernels
from ardlab.nn.layers.windows import out_and_pads

CASES = [  # (N, H, W, C), kernel, stride, padding
    ((2, 5, 6, 3), (3, 3), (1, 1), "same"),
    ((3, 7, 6, 2), (3, 3), (2, 2), "same"),
    ((2, 9, 11, 4), (3, 3), (2, 2), "valid"),
    ((1, 8, 7, 5), (3, 5), (2, 1), "same"),
    ((2, 11, 11, 1), (5, 5), (2, 2), "same"),
    ((2, 4, 4, 16), (1, 1), (2, 2), "valid"),
]


def reference_im2row(x, k, s, padding):
    n, h, w, c = x.shape
    ho, wo, (pt, pb, pl, pr) = out_and_pads(h, w, k, s, padding)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)))
    win = sliding_window_view(xp, k, axis=(1, 2))[:, : (ho - 1) * s[0] + 1 : s[0], : (wo - 1) * s[1] + 1 : s[1]]
    return win.transpose(0, 1, 2, 4, 5, 3).reshape(n * ho * wo, -1), ho, wo, (pt, pb, pl, pr)


def run_im2row(x, k, s, padding):
    ref, ho, wo, pads = reference_im2row(x, k, s, padding)
    out = np.full_like(ref, np.nan)
    kernels.im2row(x, *k, *s, pads[0], pads[2], ho, wo, out)
    return out, ref, ho, wo, pads


@pytest.mark.parametrize("shape, k, s, padding", CASES)
def test_im2row_matches_sliding_windows(shape, k, s, padding):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out, ref, *_ = run_im2row(x, k, s, padding)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("shape, k, s, padding", CASES)
def test_col2im_is_the_adjoint_of_im2row(shape, k, s, padding):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    cols, _, ho, wo, pads = run_im2row(x, k, s, padding)
    d = rng.standard_normal(cols.shape)
    dx = np.full_like(x, np.nan)
    kernels.col2im(d, *k, *s, pads[0], pads[2], ho, wo, dx)
    np.testing.assert_allclose(np.vdot(cols, d), np.vdot(x, dx), rtol=1e-12)
    # and cell by cell against a scatter-add of every window row into the padded input
    n, h, w, c = shape
    ref = np.zeros((n, h + pads[0] + pads[1], w + pads[2] + pads[3], c))
    d6 = d.reshape(n, ho, wo, k[0], k[1], c)
    for i in range(k[0]):
        for j in range(k[1]):
            ref[:, i : i + (ho - 1) * s[0] + 1 : s[0], j : j + (wo - 1) * s[1] + 1 : s[1]] += d6[:, :, :, i, j]
    np.testing.assert_allclose(dx, ref[:, pads[0] : pads[0] + h, pads[2] : pads[2] + w], rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("rows, c", [(1, 3), (7, 1), (1000, 16), (4099, 5)])
def test_batch_moments(rows, c):
    X = (np.random.default_rng(2).standard_normal((rows, c)) * 3 + 10).astype(np.float32)
    mean, var = kernels.batch_moments(X)
    np.testing.assert_allclose(mean, X.astype(np.float64).mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(var, X.astype(np.float64).var(axis=0), rtol=1e-6, atol=1e-12)
