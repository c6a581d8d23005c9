"""§4.3: integer products from scans (Lemma 4.4, Cor. 4.5) and the
dot-product matrix product with MMU reductions (Thm 4.6)."""
from __future__ import annotations

import operator

import numpy as np

from .. import bounds, mmv
from .._dtypes import INT_VALUE_DTYPES
from .._validate import _asarray, as_values, check_s
from ._words import DEFAULT_S, finish, max_abs_int
from .scan import scan_words
from .segscan import seg_scan_words

__all__ = ["int_mult", "mult", "mult_words", "matrix_product"]

_I64_MAX = np.iinfo(np.int64).max


def _abs_sign(x):
    """(|x|, x < 0) with VCU instructions: neg = MASK(x, LEQ(x, -1)); |x| = x - 2 neg."""
    sx = mmv.leq(x, -1)
    neg = mmv.mask(x, sx)
    return mmv.sub(mmv.sub(x, neg), neg), sx


def _apply_sign(p, sign):
    neg = mmv.mask(p, sign)
    return mmv.sub(mmv.sub(p, neg), neg)


def int_mult(a, b, s=DEFAULT_S):
    """a*b by Lemma 4.4 (school method + one scan), for Python/numpy integers.

    c_i = |a| * 2^i where bit i of |b| is 1 (the printed lemma says "if b_i = 0":
    an erratum), built with BITSHL / BIT / MASK from scalar-broadcast vectors;
    the last element of SCAN(c) (Alg. 1) is |a||b|; the sign is applied with
    MASK/SUB. Returns a Python int. Raises OverflowError when the lemma's
    partial sums would not fit the 64-bit word.
    """
    try:
        a = operator.index(a)
    except TypeError:
        raise TypeError(f"a must be an integer, got {type(a).__name__}") from None
    try:
        b = operator.index(b)
    except TypeError:
        raise TypeError(f"b must be an integer, got {type(b).__name__}") from None
    s = check_s(s)
    bd = bounds.int_mult(abs(a), abs(b), s)
    if bd.magnitude > _I64_MAX:
        raise OverflowError(f"int_mult: partial sums need {bd.bits} bits, more than the 64-bit word")
    m = max(abs(b).bit_length(), 1)
    av = np.full(m, abs(a), dtype=np.int64)   # scalar broadcast load
    bv = np.full(m, abs(b), dtype=np.int64)
    k = np.arange(m, dtype=np.int64)          # constant vector 0..m-1
    c = mmv.mask(mmv.bitshl(av, k), mmv.bit(bv, k))
    z = scan_words(c, s)
    p = int(z[-1])
    return -p if (a < 0) != (b < 0) else p


def _segment_ends(z, length):
    """Last element of every block of ``length`` (GATHERS with that block length)."""
    if length == 1:
        return z
    return mmv.gathers(z, length)


def mult_words(x, y, s):
    """Mult(x, y) of Cor. 4.5 on int64 words: one segmented scan (App. Alg. 1)
    over n segments of m = bit length of max|y| school-method rows."""
    n = len(x)
    if n == 0:
        return x[:0].copy()
    ax, sx = _abs_sign(x)
    ay, sy = _abs_sign(y)
    m = max(max_abs_int(ay).bit_length(), 1)
    N = n * m
    starts = np.arange(n, dtype=np.int64) * m            # constant index vector
    X = mmv.fills(mmv.scatter(ax, starts, N), max(m, 2)) if m > 1 else ax
    Y = mmv.fills(mmv.scatter(ay, starts, N), max(m, 2)) if m > 1 else ay
    k = np.tile(np.arange(m, dtype=np.int64), n)          # constant bit positions
    c = mmv.mask(mmv.bitshl(X, k), mmv.bit(Y, k))
    if m > 1:
        F = mmv.first_of_block(N, m)                     # constant: a segment every m
        z = seg_scan_words(c, F, s)
    else:
        z = c
    p = _segment_ends(z, m)
    return _apply_sign(p, mmv.xor(sx, sy))


def _check_int(a, name):
    if a.dtype not in INT_VALUE_DTYPES:
        raise TypeError(f"{name} must have an integer dtype (int8/16/32/64), got {a.dtype}")


def mult(x, y, s=DEFAULT_S, *, overflow="raise"):
    """Element-wise product of integer vectors by Cor. 4.5 (through a segmented scan).

    Result dtype: the project rule applied to np.result_type(x, y)."""
    x = as_values(x, "x")
    y = as_values(y, "y")
    _check_int(x, "x")
    _check_int(y, "y")
    if len(x) != len(y):
        raise ValueError(f"y has length {len(y)} but x has length {len(x)}")
    s = check_s(s)
    dt = np.result_type(x, y)
    bd = bounds.mult(len(x), s, max_abs_int(x), max_abs_int(y))
    if bd.magnitude > _I64_MAX and overflow == "raise":
        exact = [int(a) * int(b) for a, b in zip(x.tolist(), y.tolist())]
        rng = np.iinfo(np.int64)
        if any(v < rng.min or v > rng.max for v in exact):
            raise OverflowError("golden.mult: a product overflows int64; pass overflow='wrap'")
    z = mult_words(x.astype(np.int64), y.astype(np.int64), s)
    return finish(z, dt, overflow, op="golden.mult")


def matrix_product(A, B, s=DEFAULT_S, *, overflow="raise"):
    """C = A B for integer matrices by Thm 4.6.

    An AC[0] preparation (constant index vectors + GATHER) lays out, for every
    output (i, j) in row-major order, the row A(i, :) in ``a`` and the column
    B(:, j) in ``b``; c = Mult(a, b) (Cor. 4.5) holds every scalar product; a
    second segmented scan with a segment every p entries, read at the segment
    ends, gives C. Works for n x p times p x q.
    """
    A = _asarray(A, "A")  # the shared boundary: byte order, torch tensors
    B = _asarray(B, "B")
    if A.ndim != 2:
        raise ValueError(f"A must be 2-D, got shape {A.shape}")
    if B.ndim != 2:
        raise ValueError(f"B must be 2-D, got shape {B.shape}")
    as_values(A.reshape(-1), "A")
    as_values(B.reshape(-1), "B")
    _check_int(A, "A")
    _check_int(B, "B")
    n, p = A.shape
    p2, q = B.shape
    if p != p2:
        raise ValueError(f"A has {p} columns but B has {p2} rows")
    s = check_s(s)
    dt = np.result_type(A, B)
    if n * q == 0:
        return np.zeros((n, q), dtype=finish(np.zeros(0, np.int64), dt, "wrap").dtype)
    if p == 0:
        return finish(np.zeros(n * q, np.int64), dt, overflow).reshape(n, q)
    bd = bounds.matrix_product(n, p, q, s, max_abs_int(A), max_abs_int(B))
    if bd.magnitude > _I64_MAX and overflow == "raise":
        exact = A.astype(object) @ B.astype(object)
        rng = np.iinfo(np.int64)
        if any(v < rng.min or v > rng.max for v in exact.reshape(-1).tolist()):
            raise OverflowError("golden.matrix_product: a result overflows int64; pass overflow='wrap'")
    i, j, k = np.meshgrid(np.arange(n), np.arange(q), np.arange(p), indexing="ij")
    a = mmv.gather(A.astype(np.int64).reshape(-1), (i * p + k).reshape(-1))
    b = mmv.gather(B.astype(np.int64).reshape(-1), (k * q + j).reshape(-1))
    c = mult_words(a, b, s)
    if p > 1:
        z = seg_scan_words(c, mmv.first_of_block(len(c), p), s)
    else:
        z = c
    C = _segment_ends(z, p)
    return finish(C, dt, overflow, op="golden.matrix_product").reshape(n, q)
