"""What runs inside one chunk's tasks: the carry summaries (the reduce pass of MCScan: each chunk's
open-segment sum and whether it holds a start), their combination, and the exact overflow decision
of a chunk whose first segment continues from earlier chunks.

Carries are exact: integer values travel as Python ints (so a carry never wraps, whatever the number
of chunks), float values as scalars of the result dtype. A chunk's own results come from the
single-machine fast ops; these helpers only decide what the carry changes."""
from __future__ import annotations

import numba
import numpy as np

from .._fast._policy import overflow_error as _overflow
from .._fast._policy import wrap_int as _wrap
from .._threading import guarded

__all__ = ["check_flags", "first_last", "summary", "stats", "exact_sum", "combine", "identity", "open_overflows",
           "closing_value", "rows_exact_sums", "rows_overflow"]


@numba.njit(cache=True, nogil=True)
def _first_last(f):
    """(first, last) positions of a nonzero flag; (len(f), -1) when there is none. Reads from both ends
    and stops at the first hit, so a chunk with starts costs the distance to its first and last one."""
    n = f.shape[0]
    first = n
    for i in range(n):
        if f[i] != 0:
            first = i
            break
    last = -1
    for i in range(n - 1, first - 1, -1):
        if f[i] != 0:
            last = i
            break
    return first, last


def first_last(f):
    return _first_last(np.ascontiguousarray(f).view(np.uint8))


@numba.njit(cache=True, nogil=True, parallel=True)
def _int_stats(x):
    """(sum, min, max) of int8/16/32 values in int64 words (exact below 2**32 elements), one pass."""
    s = np.int64(0)
    lo = np.int64(np.iinfo(np.int64).max)
    hi = np.int64(np.iinfo(np.int64).min)
    for i in numba.prange(x.shape[0]):
        v = np.int64(x[i])
        s += v
        lo = min(lo, v)
        hi = max(hi, v)
    return s, lo, hi


def stats(x, rdt):
    """(exact sum as ``exact_sum``, (min, max) of integer values as Python ints, or None for floats and
    empty x): one pass for 8-32-bit integers."""
    if rdt.kind == "f" or x.size == 0:
        return exact_sum(x, rdt), None
    if x.dtype.itemsize <= 4:
        s, lo, hi = _int_stats(np.ascontiguousarray(x))
        return int(s), (int(lo), int(hi))
    return exact_sum(x, rdt), (int(x.min()), int(x.max()))


def exact_sum(x, rdt):
    """Sum of ``x`` in ``rdt``'s arithmetic: integers exactly (a Python int: int64 words for 8-32-bit
    values; int64 values split into 32-bit halves, each summed exactly), floats in ``rdt`` (numpy's
    pairwise sum; any order is within the sequential bound)."""
    if rdt.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            return rdt.type(np.add.reduce(x, dtype=rdt)) if x.size else rdt.type(0)
    if x.dtype.itemsize <= 4:
        return int(np.add.reduce(x, dtype=np.int64))
    x = x.astype(np.int64, copy=False)
    hi = int(np.add.reduce(x >> 32, dtype=np.int64))
    lo = int(np.add.reduce(x & 0xFFFFFFFF, dtype=np.int64))
    return (hi << 32) + lo


def check_flags(f, name):
    """ValueError naming ``name`` when a chunk of flags / mask (bool, int8 or uint8) holds a value other
    than 0 or 1; one pass over its bytes."""
    if f.dtype != np.bool_ and f.size and f.view(np.uint8).max() > 1:
        bad = int(np.flatnonzero(f.view(np.uint8) > 1)[0])
        raise ValueError(f"{name} must hold 0 or 1; a chunk's position {bad} holds {f[bad]}")


@guarded
def summary(x, f, first, rdt, check=False):
    """A chunk's (fs, ls, carry, open_sum, open_range): its first and last segment start (a chunk
    holding global position 0 starts there), the carry it hands on, (has_start, exact sum from its last
    start to its end, or of all of it), the exact sum before its first start (its part of a segment
    that began earlier) and that part's (min, max) for integers (None otherwise). One pass over x
    when the chunk has no start; else over its head and tail only. ``check``: the flags' 0/1 values are
    checked here (one pass over them), so a bad flag is reported before any chunk's result (an
    overflow elsewhere included): every output task depends on all summaries."""
    n = x.shape[0]
    if check and f is not None:
        check_flags(np.asarray(f), "flags")
    fs, ls = (n, -1) if f is None else first_last(f)
    if first and n:
        fs, ls = 0, max(ls, 0)
    if ls < 0:
        total, rng = stats(x, rdt)
        return fs, ls, (False, total), total, rng
    open_sum, rng = stats(x[:fs], rdt)
    return fs, ls, (True, exact_sum(x[ls:], rdt)), open_sum, rng


def combine(a, b):
    """The carry operator: (has_start, value); a start in ``b`` resets what ``a`` carried."""
    if b[0]:
        return b
    with np.errstate(over="ignore", invalid="ignore"):
        return (a[0], a[1] + b[1])


def identity(rdt):
    return (False, rdt.type(0) if rdt.kind == "f" else 0)


def _limits(rdt):
    info = np.iinfo(rdt)
    return int(info.min), int(info.max)


def open_overflows(x, carry, rdt, exclusive, rng=None):
    """Whether carry + a prefix sum of ``x`` (inclusive, or exclusive: 0 and the prefixes before the last
    element), the outputs of a chunk's continued first segment, leaves ``rdt``. A bound first
    (|carry| + len(x) max|x|, from ``rng`` = (min, max) of x when the summary has it); the exact
    prefixes only when the bound does not settle it."""
    if rdt.kind == "f" or x.size == 0:
        return False
    lo, hi = _limits(rdt)
    mn, mx = rng if rng is not None else (int(x.min()), int(x.max()))
    big = max(abs(mn), abs(mx))
    if abs(carry) + x.size * big <= hi:
        return False
    if x.dtype.itemsize <= 4:
        p = np.cumsum(x, dtype=np.int64)
    else:
        p = np.cumsum(x.astype(object))
    if exclusive:
        vmin, vmax = min(0, int(p[:-1].min()) if p.size > 1 else 0), max(0, int(p[:-1].max()) if p.size > 1 else 0)
    else:
        vmin, vmax = int(p.min()), int(p.max())
    return carry + vmin < lo or carry + vmax > hi


def closing_value(v, rdt, overflow, op):
    """An exact segment result (Python int, or float) as an element of ``rdt``: OverflowError under
    overflow="raise" when it does not fit, else wrapped."""
    if rdt.kind == "f":
        return rdt.type(v)
    lo, hi = _limits(rdt)
    if overflow == "raise" and not lo <= v <= hi:
        raise _overflow(op, rdt)
    return _wrap(v, rdt)


def rows_exact_sums(block, rdt):
    """Per-row sums of a 2-D block, exact for integers (an object array of Python ints), else in rdt."""
    if rdt.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            return np.add.reduce(block, axis=1, dtype=rdt)
    if block.dtype.itemsize <= 4:
        return np.add.reduce(block, axis=1, dtype=np.int64).astype(object)
    b = block.astype(np.int64, copy=False)
    hi = np.add.reduce(b >> 32, axis=1, dtype=np.int64).astype(object)
    lo = np.add.reduce(b & 0xFFFFFFFF, axis=1, dtype=np.int64).astype(object)
    return hi * (1 << 32) + lo


def rows_overflow(block, carry, rdt, exclusive):
    """Whether any row's carry + prefix sums (``open_overflows`` per row) leaves ``rdt``."""
    if rdt.kind == "f" or block.size == 0:
        return False
    lo, hi = _limits(rdt)
    big = np.maximum(np.abs(block.min(axis=1).astype(object)), np.abs(block.max(axis=1).astype(object)))
    suspect = np.flatnonzero([abs(c) + block.shape[1] * b > hi for c, b in zip(carry, big)])
    return any(open_overflows(block[r], carry[r], rdt, exclusive) for r in suspect)
