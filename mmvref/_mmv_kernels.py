"""Numba loops behind the MMV-RAM instructions of ``mmvref.mmv``.

Each kernel is the plain, sequential definition of one instruction; none
reorders a floating-point sum (no fastmath), so the golden model's rounding is
the rounding of the stated order.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def matmul_rows(x, a, lo, hi, finite, out):
    """out = X @ A for X = x viewed row-major as ceil(n/s) x s, zero-padded.

    ``lo[k]:hi[k]`` is the range of columns where row k of A may be non-zero,
    so a banded or triangular A costs only its band. Products are accumulated
    over k in ascending order, in the word type of ``x`` (fp32 for fp16 data,
    as the cube unit does). A zero x(k) skips row k only when that row is
    finite (0 * inf = NaN must still happen). Padding positions of the product
    are dropped.
    """
    s = a.shape[0]
    n = x.shape[0]
    rows = (n + s - 1) // s
    acc = np.zeros(s, dtype=out.dtype)
    for r in range(rows):
        base = r * s
        m = min(s, n - base)
        acc[:] = 0
        xr = x[base:base + m]
        for k in range(m):
            xk = xr[k]
            if xk != 0 or not finite[k]:
                ak = a[k]
                for j in range(lo[k], hi[k]):
                    acc[j] += xk * ak[j]
        orow = out[base:base + m]
        for j in range(m):
            orow[j] = acc[j]


@njit(cache=True)
def lmatmul_tiles(a, x, out):
    """out = A @ X for every s x s tile X of x (row-major, zero-padded); the
    products are accumulated over k in ascending order, in the word type."""
    s = a.shape[0]
    n = x.shape[0]
    t = np.zeros((s, s), dtype=out.dtype)
    acc = np.zeros(s, dtype=out.dtype)
    for base in range(0, n, s * s):
        m = min(s * s, n - base)
        t[:, :] = 0
        for e in range(m):
            t[e // s, e % s] = x[base + e]
        for i in range(s):
            if (i * s) >= m:
                break
            acc[:] = 0
            for k in range(s):
                aik = a[i, k]
                if aik != 0:
                    for j in range(s):
                        acc[j] += aik * t[k, j]
            for j in range(min(s, m - i * s)):
                out[base + i * s + j] = acc[j]


@njit(cache=True)
def revspec_blocks(xbar, fbar, s, out):
    """REVSPEC (Lemma A.1), block by block.

    In each s-block, xbar and fbar are block-local unsegmented scans of x and
    of the flags. z(j) = xbar(j) - xbar(i) for the unique i < j (same block)
    with fbar(i) != fbar(i+1) and fbar(j) == fbar(i+1): subtract the
    speculative sum that ends just before j's segment starts, if that segment
    starts inside the block.
    """
    n = xbar.shape[0]
    for base in range(0, n, s):
        m = min(s, n - base)
        xb = xbar[base:base + m]
        fb = fbar[base:base + m]
        ob = out[base:base + m]
        u = xb[0] - xb[0]  # zero of the word type
        ob[0] = xb[0]
        for j in range(1, m):
            if fb[j] != fb[j - 1]:  # a segment starts at j: Q(j-1, .) fires
                u = xb[j - 1]
            ob[j] = xb[j] - u


@njit(cache=True)
def gather_idx(x, idx, out):
    n = x.shape[0]
    for i in range(idx.shape[0]):
        k = idx[i]
        if 0 <= k < n:
            out[i] = x[k]


@njit(cache=True)
def scatter_idx(x, idx, out):
    m = out.shape[0]
    for i in range(idx.shape[0]):
        k = idx[i]
        if 0 <= k < m:
            out[k] = x[i]
