"""Plain-loop oracles, obviously correct and independent of the code under test.

Integers are computed with Python ints (exact, unbounded) and returned as
lists of Python ints; floats with float64 loops, returned as lists of floats.
Flags mark segment starts; position 0 always starts a segment.
"""
from __future__ import annotations


def _vals(x):
    if getattr(x, "dtype", None) is not None:  # numpy: tolist() gives Python ints / floats, in C
        if x.dtype.kind in "iu":
            return x.tolist()
        return [int(v) for v in x.tolist()] if x.dtype.kind == "b" else [float(v) for v in x.tolist()]
    return [float(v) for v in x]


def _ints(a):
    """An index array (indptr, indices) as a list of Python ints."""
    if getattr(a, "dtype", None) is not None and a.dtype.kind in "iu":
        return a.tolist()
    return [int(v) for v in a]


def oracle_scan(x, exclusive=False):
    out, acc = [], 0
    for v in _vals(x):
        if exclusive:
            out.append(acc)
        acc = acc + v
        if not exclusive:
            out.append(acc)
    return out


def oracle_segmented_scan(x, f, exclusive=False):
    out, acc = [], 0
    for i, v in enumerate(_vals(x)):
        if i == 0 or f[i]:
            acc = 0
        if exclusive:
            out.append(acc)
        acc = acc + v
        if not exclusive:
            out.append(acc)
    return out


def oracle_segmented_sum(x, f):
    out, acc = [], 0
    for i, v in enumerate(_vals(x)):
        if i > 0 and f[i]:
            out.append(acc)
            acc = 0
        acc = acc + v
    if len(x):
        out.append(acc)
    return out


def oracle_segment_sum_csr(x, indptr):
    xs = _vals(x)
    return [sum(xs[indptr[r]:indptr[r + 1]], 0) for r in range(len(indptr) - 1)]


def oracle_compress(x, mask):
    return [v for v, m in zip(list(x), list(mask)) if m]


def oracle_spmv(indptr, indices, data, x):
    ds, xs = _vals(data), _vals(x)
    ptr, cols = _ints(indptr), _ints(indices)  # Python ints: no numpy scalar per entry
    out = []
    for r in range(len(ptr) - 1):
        acc = 0
        for k in range(ptr[r], ptr[r + 1]):
            acc = acc + ds[k] * xs[cols[k]]
        out.append(acc)
    return out


def wrap(v, bits):
    """Two's-complement wrap of a Python int to ``bits`` bits."""
    return (int(v) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
