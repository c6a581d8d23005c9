"""Fuzz every public entry point with bad and unusual inputs (issue 14, section 5).

    python tools/fuzz_api.py [--cases N] [--seed S] [--out FILE] [--workers W] [--timeout T]
                             [--families FAM ...]

``--families`` (alias ``--family``; names may also be comma-separated) selects case families: the
1-D ones (scan, batched, seg, csrsum, spmv, spmm, spgemm, sort, sample; group ``legacy``) and
  nd_reduce  mmvref.segment_csr / segment_coo / scatter / segmented_sum / segment_sum_csr, N-d
  nd_gather  mmvref.gather_csr, N-d
  nd_scan    mmvref.scan / segmented_scan, N-d
  nd_grad    the same ops on torch tensors that require grad: values, requires_grad, the gradient
  ts         mmvref.torch_scatter (its __all__, and the composites where present)
  dask       mmvref.dask (synchronous scheduler, random chunkings)
(groups: ``nd`` = the four nd_*, ``torch_scatter``, ``new`` = nd + ts + dask). The N-d families vary
dtypes (every numpy int/uint/float/bool/complex/object), ranks 0-4, axis=/dim= (negative, out of
range, both), malformed index/indptr/flags (unsorted, negative, out of range, float, near the int64
limits, wrong length, 2-D, empty list, big-endian), out= in every layout and byte order (C, F,
strided, reversed, big-endian, read-only, torch, wrong dtype/shape), dtype=, reduce=, overflow=,
torch tensors (float16, bfloat16, requires_grad); an out= argument must hold the result after the
call and be returned. The run ends with counts per family and one reproduction per distinct failure
(``ro(a)``: ``a`` made read-only).

Cases are generated over the public ops (``mmvref.*`` fast ops, ``mmvref.golden.*``,
the npu backends' methods, ``torch.ops.mmv.*``) and the input classes of the
issue: byte order, every dtype, 0-d / 2-d / empty arrays, non-contiguous and
negative strides, read-only arrays, wrong lengths, flags other than 0/1,
malformed CSR offsets and indices, NaN/inf, integer extremes (overflow raise vs
wrap, decided on exact Python-int sums), keyword arguments of the wrong type,
Python lists and torch tensors.

Each case runs in a long-lived worker subprocess with a per-case timeout; a
worker that dies (segfault, abort) or hangs is recorded as crash / hang and
replaced. The expected outcome comes from an independent reference written
here (Python ints / float64 loops) that also states which inputs are invalid
and which argument an error must name. Outcomes:

  ok       the reference's value (dtype and numbers), or an exception of the
           expected kind whose message names the argument
  crash    the worker died
  hang     no answer within the timeout
  wrong    a value that differs from the reference (or a value for an input
           the reference rejects)
  unclear  an exception of the wrong kind, or one not naming the argument

Prints the counts and writes the failing cases as JSON (``--out``).
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import sys
import time
import traceback

import numpy as np

# ----------------------------------------------------------------------------- expectations


class Expect(Exception):
    """The reference's verdict that an input is invalid: any of ``options``,
    each (exception types, argument name or None) is a clear error."""

    def __init__(self, options):
        super().__init__(options)
        self.options = options


class Errs:
    """Collects every violation the reference finds (an implementation may report any one)."""

    def __init__(self):
        self.opts = []

    def add(self, exc, name):
        self.opts.append(((exc,) if isinstance(exc, type) else tuple(exc), name))

    def raise_if(self):
        if self.opts:
            raise Expect(self.opts + getattr(self, "also_for_errors", []))


ANY = "ANY"  # a value the reference does not check (NaN/inf inputs): no crash, no hang, any value

INT_DT = [np.dtype(t) for t in ("int8", "int16", "int32", "int64")]
FLT_DT = [np.dtype(t) for t in ("float16", "float32", "float64")]
VAL_DT = INT_DT + FLT_DT
FLAG_DT = [np.dtype(t) for t in ("bool", "int8", "uint8")]
ODD_DT = [np.dtype(t) for t in ("uint8", "uint16", "uint32", "uint64", "bool", "complex64", "complex128",
                                "object", "datetime64[ns]", "timedelta64[s]", "U3")]
RES = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
       "float16": "float32", "float32": "float32", "float64": "float64"}


def native(a):
    """numpy view of an argument as the reference reads it (byte order normalised)."""
    if type(a).__module__.split(".")[0] == "torch":
        import torch
        if a.dtype == torch.bfloat16:
            return a
        return a.detach().numpy()
    return a


def _arr(a):
    a = native(a)
    if isinstance(a, np.ndarray):
        if a.dtype.byteorder not in "=|":
            a = a.astype(a.dtype.newbyteorder("="))
        return a
    if isinstance(a, (list, tuple, range)):
        try:
            return np.asarray(a)
        except Exception:
            return None
    return None


def is_torch(a):
    return type(a).__module__.split(".")[0] == "torch"


def vals(E, a, name, ndims=(1,), kinds=VAL_DT, fatal=True):
    """The values argument: array-like, ndim in ndims, dtype in kinds."""
    if is_torch(a):
        import torch
        if a.dtype == torch.bfloat16 or a.dtype not in _TORCH_NP:
            E.add(TypeError, name)
            if a.dim() not in ndims:
                E.add(ValueError, name)
            if fatal:
                E.raise_if()
            return None
    x = _arr(a)
    if x is None:
        E.add((TypeError, ValueError), name)
        if fatal:
            E.raise_if()
        return None
    bad = False
    if x.ndim not in ndims:
        E.add(ValueError, name)
        bad = True
    if x.dtype not in kinds:
        E.add(TypeError, name)
        bad = True
    if bad:
        if fatal:
            E.raise_if()
        return None
    return x


def flags(E, a, n, name):
    f = _arr(a)
    if f is None:
        E.add((TypeError, ValueError), name)
        return None
    if isinstance(a, (list, tuple)):
        if f.size and f.dtype.kind in "iub" and (f.min() < 0 or f.max() > 1):
            E.add(ValueError, name)
            return None
        if len(a) == 0:
            f = np.zeros(0, np.uint8)
        elif f.dtype.kind in "iub":
            f = f.astype(np.uint8)
    if f.ndim != 1:
        E.add(ValueError, name)
        return None
    if f.dtype not in FLAG_DT:
        E.add(TypeError, name)
        return None
    if n is not None and f.shape[0] != n:
        E.add(ValueError, name)
        return None
    if f.size and f.dtype != np.bool_ and (f.view(np.uint8) > 1).any():
        E.add(ValueError, name)
        return None
    return f.astype(np.uint8)


def indptr_(E, a, nnz, name="indptr", rows=None):
    p = _arr(a)
    if p is None:
        E.add((TypeError, ValueError), name)
        return None
    if isinstance(a, (list, tuple)) and len(a) == 0:
        p = np.zeros(0, np.int64)
    if p.ndim != 1:
        E.add(ValueError, name)
        return None
    if p.dtype.kind not in "iu":
        E.add(TypeError, name)
        return None
    if p.size == 0:
        E.add(ValueError, name)
        return None
    q = [int(v) for v in p]
    ok = q[0] == 0 and all(q[i] <= q[i + 1] for i in range(len(q) - 1)) and (nnz is None or q[-1] == nnz)
    if not ok:
        E.add(ValueError, name)
        return None
    if rows is not None and len(q) - 1 != rows:
        E.add(ValueError, (name, "A", "shape", "rows"))
        return None
    return q


def indices_(E, a, nnz, ncols, name="indices"):
    p = _arr(a)
    if p is None:
        E.add((TypeError, ValueError), name)
        return None
    if isinstance(a, (list, tuple)) and len(a) == 0:
        p = np.zeros(0, np.int64)
    if p.ndim != 1:
        E.add(ValueError, name)
        return None
    if p.dtype.kind not in "iu":
        E.add(TypeError, name)
        return None
    if nnz is not None and p.shape[0] != nnz:
        E.add(ValueError, (name, "data"))
        return None
    q = [int(v) for v in p]
    if ncols is not None and any(v < 0 or v >= ncols for v in q):
        E.add(ValueError, name)
        return None
    return q


def check_bool(E, v, name):
    if not isinstance(v, (bool, np.bool_)):
        E.add(TypeError, name)


def check_overflow(E, v):
    if not (isinstance(v, str) and v in ("raise", "wrap")):
        E.add((ValueError, TypeError), "overflow")


def check_int(E, v, name, lo, hi=None):
    if not isinstance(v, (int, np.integer, np.bool_)):  # bools count as 0/1 (operator.index)
        E.add(TypeError, name)
        return None
    v = int(v)
    if v < lo or (hi is not None and v > hi):
        E.add(ValueError, name)
        return None
    return v


def res_dtype(E, x, dtype, name="dtype"):
    if x is None:
        return None
    if dtype is None:
        return np.dtype(RES[x.dtype.name])
    try:
        d = np.dtype(dtype) if isinstance(dtype, (str, type, np.dtype)) else None
    except TypeError:
        d = None
    if d is None or d.name not in ("int32", "int64", "float32", "float64"):
        E.add(TypeError, name)
        return None
    if x.dtype.kind == "f" and d.kind != "f":
        E.add(TypeError, name)
        return None
    return d


def pyvals(x):
    return [int(v) for v in x.tolist()] if x.dtype.kind in "iu" else [float(v) for v in x.tolist()]


def finish(vals_, rdt, overflow, shape=None):
    """Exact results -> expected array: OverflowError when an integer leaves rdt under 'raise'."""
    if rdt.kind == "f":
        a = np.array(vals_, dtype=np.float64)
        if shape is not None:
            a = a.reshape(shape)
        return ("float", a, rdt.name)
    bits = 8 * rdt.itemsize
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if overflow == "raise" and any(v < lo or v > hi for v in vals_):
        raise Expect([((OverflowError,), None)])
    w = [(v - lo) % (1 << bits) + lo for v in vals_]
    a = np.array(w, dtype=rdt) if w else np.zeros(0, rdt)
    if shape is not None:
        a = a.reshape(shape)
    return ("exact", a, rdt.name)


def nonfinite(*arrs):
    return any(a is not None and a.dtype.kind == "f" and a.size and not np.isfinite(a.astype(np.float64)).all()
               for a in arrs)


# ----------------------------------------------------------------------------- references


def r_scan(x, exclusive=False, dtype=None, overflow="raise", *, E=None, ndims=(1,)):
    E = E or Errs()
    xa = vals(E, x, "x", ndims)
    check_bool(E, exclusive, "exclusive")
    rdt = res_dtype(E, xa, dtype)
    check_overflow(E, overflow)
    E.raise_if()
    if nonfinite(xa):
        return ANY
    rows = xa if xa.ndim == 2 else xa.reshape(1, -1)
    out = []
    for row in rows:
        acc = 0
        for v in pyvals(row):
            if exclusive:
                out.append(acc)
            acc += v
            if not exclusive:
                out.append(acc)
    return finish(out, rdt, overflow, xa.shape)


def r_segscan(x, f, exclusive=False, dtype=None, overflow="raise", fname="flags"):
    E = Errs()
    xa = vals(E, x, "x")
    fa = flags(E, f, None if xa is None else xa.size, fname)
    check_bool(E, exclusive, "exclusive")
    rdt = res_dtype(E, xa, dtype)
    check_overflow(E, overflow)
    E.raise_if()
    if nonfinite(xa):
        return ANY
    out, acc = [], 0
    for i, v in enumerate(pyvals(xa)):
        if i == 0 or fa[i]:
            acc = 0
        if exclusive:
            out.append(acc)
        acc += v
        if not exclusive:
            out.append(acc)
    return finish(out, rdt, overflow)


def r_segsum(x, f, dtype=None, overflow="raise", fname="flags"):
    E = Errs()
    xa = vals(E, x, "x")
    fa = flags(E, f, None if xa is None else xa.size, fname)
    rdt = res_dtype(E, xa, dtype)
    check_overflow(E, overflow)
    E.raise_if()
    if nonfinite(xa):
        return ANY
    out, acc = [], 0
    for i, v in enumerate(pyvals(xa)):
        if i > 0 and fa[i]:
            out.append(acc)
            acc = 0
        acc += v
    if xa.size:
        out.append(acc)
    return finish(out, rdt, overflow)


def r_csrsum(x, indptr, dtype=None, overflow="raise"):
    E = Errs()
    xa = vals(E, x, "x")
    p = indptr_(E, indptr, None if xa is None else xa.size)
    rdt = res_dtype(E, xa, dtype)
    check_overflow(E, overflow)
    E.raise_if()
    if nonfinite(xa):
        return ANY
    xs = pyvals(xa)
    return finish([sum(xs[p[r]:p[r + 1]], 0) for r in range(len(p) - 1)], rdt, overflow)


def r_compress(x, mask, name="mask", with_idx=False):
    E = Errs()
    xa = vals(E, x, "x")
    fa = flags(E, mask, None if xa is None else xa.size, name)
    E.raise_if()
    v = ("bits", xa[fa.astype(bool)] if xa.size else xa[:0], xa.dtype.name)
    idx = np.array([i for i in range(xa.size) if fa[i]], np.int64)
    return ("tuple", [v, ("exact", idx, "int64")]) if with_idx else v


def r_split(x, mask, with_idx):
    E = Errs()
    xa = vals(E, x, "x")
    fa = flags(E, mask, None if xa is None else xa.size, "mask")
    E.raise_if()
    idx = np.array([i for i in range(xa.size) if fa[i]] + [i for i in range(xa.size) if not fa[i]], np.int64)
    v = ("bits", xa[idx], xa.dtype.name)
    return ("tuple", [v, ("exact", idx, "int64")]) if with_idx else v


def _order(xa, descending):
    v = pyvals(xa)
    return sorted(range(len(v)), key=(lambda i: -v[i]) if descending else (lambda i: v[i]))


def r_sort(x, descending=False, which="both", ndims=(1, 2)):
    E = Errs()
    xa = vals(E, x, "x", ndims)
    check_bool(E, descending, "descending")
    E.raise_if()
    if nonfinite(xa):
        return ANY
    rows = xa if xa.ndim == 2 else xa.reshape(1, -1)
    idx = np.array([_order(r, descending) for r in rows], np.int64).reshape(xa.shape)
    sv = np.take_along_axis(rows, idx.reshape(rows.shape), 1).reshape(xa.shape) if xa.size else xa.copy()
    if which == "idx":
        return ("exact", idx, "int64")
    return ("tuple", [("bits", sv, xa.dtype.name), ("exact", idx, "int64")])


def r_topk(x, k, largest=True, ndims=(1, 2)):
    E = Errs()
    xa = vals(E, x, "x", ndims)
    check_bool(E, largest, "largest")
    kk = check_int(E, k, "k", 0, xa.shape[-1])
    E.raise_if()
    if nonfinite(xa):
        return ANY
    rows = xa if xa.ndim == 2 else xa.reshape(1, -1)
    sh = xa.shape[:-1] + (kk,)
    idx = np.array([_order(r, largest)[:kk] for r in rows], np.int64).reshape(sh)
    sv = np.take_along_axis(rows, idx.reshape(rows.shape[0], kk), 1).reshape(sh)
    return ("tuple", [("bits", sv, xa.dtype.name), ("exact", idx, "int64")])


def r_weighted(w, u):
    E = Errs()
    wa = vals(E, w, "w")
    E.raise_if()
    if wa.dtype.kind == "f" and not np.isfinite(wa.astype(np.float64)).all():
        raise Expect([((ValueError,), "w")])
    if (wa < 0).any():
        raise Expect([((ValueError,), "w")])
    try:
        ua = np.asarray(native(u))
        if ua.dtype.kind not in "iuf":
            raise TypeError
        ua = ua.astype(np.float64)
    except (TypeError, ValueError):
        raise Expect([((TypeError, ValueError), "u")]) from None
    if not ((ua >= 0) & (ua < 1)).all():
        raise Expect([((ValueError,), "u")])
    ws = pyvals(wa)
    c, acc = [], 0
    for v in ws:
        acc = acc + (v if wa.dtype.kind != "f" else float(v))
        c.append(acc)
    total = c[-1] if c else 0
    if not total > 0:
        raise Expect([((ValueError,), "w")])
    if wa.dtype.kind != "f" and total > (1 << 63) - 1:
        raise Expect([((OverflowError,), None)])

    def one(uu):
        t = uu * float(total)
        if wa.dtype.kind != "f":
            t = math.floor(t)
        for i, ci in enumerate(c):
            if ci > t:
                return i
        return max(i for i, v in enumerate(ws) if v > 0)
    if ua.ndim == 0:
        return ("exact", np.array(one(float(ua)), np.int64), "int64")
    return ("exact", np.array([one(float(v)) for v in ua.ravel()], np.int64).reshape(ua.shape), "int64")


def _csr_tuple(E, A, name="A"):
    """(indptr list, indices list, data array, (m, n)) or None."""
    if isinstance(A, (tuple, list)) and len(A) == 4:
        ip, ind, data, shape = A
    elif hasattr(A, "indptr") and getattr(A, "format", "csr") == "csr":
        ip, ind, data, shape = A.indptr, A.indices, A.data, A.shape
    else:
        E.add((TypeError, ValueError), name)
        return None
    try:
        m, n = (int(v) for v in shape)
    except Exception:
        E.add((TypeError, ValueError), (name, "shape"))
        return None
    E.shape = (m, n)
    da = vals(E, data, ("data", name), fatal=False)
    if da is None:  # the index arrays are checked all the same (an op may look at them first)
        indices_(E, ind, None, n, ("indices", name))
        indptr_(E, ip, None, ("indptr", name))
        return None
    ind = indices_(E, ind, da.size, n, ("indices", name))
    p = indptr_(E, ip, da.size, ("indptr", name), rows=m)
    if ind is None or p is None:
        return None
    return p, ind, da, (m, n)


def _promote(a, b):
    return np.dtype(RES[np.result_type(a, b).name]) if np.result_type(a, b).name in RES else None


def r_spmv(A, x, overflow="raise", *, golden=None, s=None):
    E = Errs()
    if golden is not None:
        A = (golden[0], golden[1], golden[2], None)
    csr = _csr_tuple(E, A) if golden is None else None
    xa = vals(E, x, "x", fatal=False)
    if xa is not None and getattr(E, "shape", None) is not None and xa.size != E.shape[1]:
        E.add(ValueError, "x")
    if golden is not None:
        ip, ind, data = golden[:3]
        da = vals(E, data, "data", fatal=False)
        n = None if xa is None else xa.size
        if da is not None:
            ind = indices_(E, ind, da.size, n, "indices")
            p = indptr_(E, ip, da.size, "indptr")
            if ind is not None and p is not None:
                csr = (p, ind, da, (len(p) - 1, n))
        if s is not None:
            check_int(E, s, "s", 2)
    check_overflow(E, overflow)
    E.raise_if()
    p, ind, da, (m, n) = csr
    if xa.size != n:
        raise Expect([((ValueError,), "x")])
    rdt = _promote(da.dtype, xa.dtype)
    if nonfinite(da, xa):
        return ANY
    ds, xs = pyvals(da), pyvals(xa)
    if rdt.kind == "f":
        ds, xs = [float(v) for v in ds], [float(v) for v in xs]
    out = [sum((ds[q] * xs[ind[q]] for q in range(p[r], p[r + 1])), 0) for r in range(m)]
    return finish(out, rdt, overflow)


def r_spmm(A, D, overflow="raise", *, golden=None, s=None):
    E = Errs()
    Da = vals(E, D, "D", (2,), fatal=False)
    if golden is not None:
        ip, ind, data = golden
        da = vals(E, data, "data", fatal=False)
        csr = None
        if da is not None and Da is not None:
            ind = indices_(E, ind, da.size, Da.shape[0], "indices")
            p = indptr_(E, ip, da.size, "indptr")
            if ind is not None and p is not None:
                csr = (p, ind, da, (len(p) - 1, Da.shape[0]))
        if s is not None:
            check_int(E, s, "s", 2)
    else:
        csr = _csr_tuple(E, A)
        if Da is not None and getattr(E, "shape", None) is not None and Da.shape[0] != E.shape[1]:
            E.add(ValueError, "D")
    check_overflow(E, overflow)
    E.raise_if()
    p, ind, da, (m, n) = csr
    if Da.shape[0] != n:
        raise Expect([((ValueError,), "D")])
    rdt = _promote(da.dtype, Da.dtype)
    if nonfinite(da, Da):
        return ANY
    ds = pyvals(da)
    k = Da.shape[1]
    Dl = [pyvals(Da[:, j]) for j in range(k)]
    out = [sum((ds[q] * Dl[j][ind[q]] for q in range(p[r], p[r + 1])), 0) for r in range(m) for j in range(k)]
    return finish(out, rdt, overflow, (m, k))


def r_spgemm(A, B, overflow="raise"):
    E = Errs()
    a = _csr_tuple(E, A, "A")
    sa = getattr(E, "shape", None)
    E.shape = None
    b = _csr_tuple(E, B, "B")
    sb = getattr(E, "shape", None)
    if sa is not None and sb is not None and sa[1] != sb[0]:
        E.add(ValueError, ("A", "B", "shape"))
    check_overflow(E, overflow)
    E.raise_if()
    (ap, ai, ad, (m, _)), (bp, bi, bd, (_, pp)) = a, b
    rdt = _promote(ad.dtype, bd.dtype)
    if nonfinite(ad, bd):
        return ANY
    av, bv = pyvals(ad), pyvals(bd)
    out = [0] * (m * pp)
    for r in range(m):
        for q in range(ap[r], ap[r + 1]):
            kk = ai[q]
            for t in range(bp[kk], bp[kk + 1]):
                out[r * pp + bi[t]] += av[q] * bv[t]
    return finish(out, rdt, overflow, (m, pp))


# ----------------------------------------------------------------------------- case generation

SEED_DTYPES = VAL_DT
S_MAX = 4096  # the golden model's largest tile parameter (s x s matrices)


class Gen:
    def __init__(self, rng):
        self.rng = rng

    def choice(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def p(self, prob):
        return self.rng.random() < prob

    def length(self):
        return int(self.choice([0, 1, 2, 3, 5, 8, 17, 33, 64, 130, 257]))

    def values(self, n, dt, extreme=False, nonfinite=False):
        dt = np.dtype(dt)
        if dt.kind in "iu":
            info = np.iinfo(dt)
            if extreme:
                pool = np.array([info.min, info.max, info.max - 1, info.min + 1, 0, -1, 1, info.max // 2 + 1]
                                if dt.kind == "i" else [info.max, 0, 1, info.max - 1], dtype=dt)
                return pool[self.rng.integers(0, len(pool), n)]
            lo, hi = (max(info.min, -100), min(info.max, 100))
            return self.rng.integers(lo, hi + 1, n).astype(dt)
        if dt.kind == "f":
            a = self.rng.integers(-50, 51, n).astype(dt)
            if nonfinite and n:
                a[self.rng.integers(0, n, max(1, n // 4))] = self.choice([np.nan, np.inf, -np.inf])
            return a
        if dt.kind == "b":
            return self.rng.integers(0, 2, n).astype(bool)
        if dt.kind == "c":
            return (self.rng.integers(-5, 5, n) + 1j).astype(dt)
        if dt.kind == "O":
            return np.array(list(self.rng.integers(-5, 5, n)), dtype=object)
        if dt.kind in "mM":
            return self.rng.integers(0, 100, n).astype(dt)
        if dt.kind == "U":
            return np.array(["ab"] * n, dtype=dt)
        raise AssertionError(dt)

    def flags(self, n, dt=None):
        dt = np.dtype(dt or self.choice(FLAG_DT))
        f = (self.rng.random(n) < self.choice([0.0, 0.1, 0.5, 1.0])).astype(dt)
        return f

    def indptr(self, m, nnz):
        if m == 0:
            return np.zeros(1, np.int64) if nnz == 0 else np.array([0, nnz])[:1]
        cuts = np.sort(self.rng.integers(0, nnz + 1, m - 1))
        return np.concatenate([[0], cuts, [nnz]]).astype(np.int64)

    def csr(self, m, n, nnz, dt):
        ip = self.indptr(m, nnz if m else 0)
        nnz = int(ip[-1])
        ind = self.rng.integers(0, max(n, 1), nnz).astype(np.int64) if n else np.zeros(nnz, np.int64)
        return ip, ind, self.values(nnz, dt)


def layout(g, a, which):
    """Same values, another memory layout / container."""
    if not isinstance(a, np.ndarray):
        return a
    if which == "be":
        return a.astype(a.dtype.newbyteorder(">")) if a.dtype.itemsize > 1 and a.dtype.kind in "iufcmM" else a
    if which == "nc":
        b = np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype) if a.ndim else a.copy()
        if a.ndim:
            b[..., ::2] = a
            return b[..., ::2]
        return b
    if which == "neg":
        return a[..., ::-1].copy()[..., ::-1] if a.ndim else a
    if which == "ro":
        b = a.copy()
        b.flags.writeable = False
        return b
    if which == "list":
        return a.tolist()
    if which == "torch":
        import torch
        if a.dtype.name in ("int8", "int16", "int32", "int64", "float16", "float32", "float64", "bool",
                            "uint8", "complex64", "complex128"):
            return torch.from_numpy(np.array(a, dtype=a.dtype.newbyteorder("="), order="C", copy=True))
        return a
    if which == "bf16":
        import torch
        if a.dtype.kind not in "iufb":
            return a
        return torch.from_numpy(np.array(a, dtype=np.float32, order="C", copy=True)).to(torch.bfloat16)
    return a


LAYOUTS = ["c", "c", "c", "be", "be", "nc", "neg", "ro", "list", "torch"]


def bad_kw(g, kind):
    """A wrong-typed or wrong-valued keyword."""
    if kind == "dtype":
        return g.choice(["int33", "foo", np.uint8, np.complex64, "bool", 3, np.float16, "float128", object])
    if kind == "bool":
        return g.choice([1, 0, "yes", None, 2.5, np.int64(1), [True]])
    if kind == "overflow":
        return g.choice(["Raise", "saturate", None, 1, True])
    if kind == "int":
        return g.choice([2.5, "4", None, -1, 0, 1, 10**30, True, np.float64(4.0)])
    return None


def gen_case(g, fam_filter=None):
    """One case: (target, args, kwargs, reference args, note)."""
    fams = [f for f in FAMILIES if fam_filter is None or f[0] in fam_filter]
    while True:
        fam, fn = fams[int(g.rng.integers(len(fams)))]
        case = fn(g)
        case["family"] = fam
        if case["target"].startswith("torch.") and not _torchify(g, case):
            continue  # an argument torch cannot hold (a string, datetime, ... array)
        return case


def _torchify(g, case):
    """torch.ops.mmv take tensors only: convert the array arguments, False if one cannot be."""
    out = []
    for a in case["args"]:
        if not is_torch(a):
            a = layout(g, np.asarray(a), "torch") if isinstance(a, (np.ndarray, list)) else a
            if not is_torch(a):
                return False
        out.append(a)
    case["args"] = out
    return True


def _mut_values(g, n):
    """(values array, note) with a dtype/extreme/nonfinite mutation."""
    r = g.rng.random()
    if r < 0.12:
        dt = g.choice(ODD_DT)
        return g.values(n, dt), f"dtype {dt}"
    dt = g.choice(SEED_DTYPES)
    if r < 0.35 and dt.kind == "i":
        return g.values(n, dt, extreme=True), f"extremes {dt}"
    if r < 0.42 and dt.kind == "f":
        return g.values(n, dt, nonfinite=True), f"nonfinite {dt}"
    return g.values(n, dt), f"{dt}"


def _shape_mut(g, x):
    r = g.rng.random()
    if r < 0.04:
        return (x[0] if x.size else x.sum()), "0-d"
    if r < 0.08:
        return np.stack([x, x]), "2-d"
    if r < 0.10:
        return (int(x[0]) if x.size and x.dtype.kind == "i" else 3), "python scalar"
    return x, ""


def _lay(g, a):
    w = g.choice(LAYOUTS)
    if w == "torch" and g.p(0.15):
        w = "bf16"
    return layout(g, a, w), w


FAST = "mmvref"
TARGETS_1D = {
    "scan": [("mmvref.scan", "fast"), ("golden.scan", "golden"), ("golden.scan_u", "golden"),
             ("golden.scan_ul1", "golden"), ("golden.mc_scan", "golden_mc"), ("emu.scan", "emu"),
             ("torch.scan", "torch"), ("mmvb.scan", "fast")],
}


def f_scan(g):
    n = g.length()
    x, note = _mut_values(g, n)
    x, shp = _shape_mut(g, x)
    tgt, kind = g.choice(TARGETS_1D["scan"])
    xl, lay = _lay(g, x) if isinstance(x, np.ndarray) else (x, "")
    kw = {}
    if g.p(0.5):
        kw["exclusive"] = bad_kw(g, "bool") if g.p(0.15) else bool(g.p(0.5))
    if kind in ("fast",) and g.p(0.4):
        kw["dtype"] = bad_kw(g, "dtype") if g.p(0.3) else g.choice([np.int32, np.int64, np.float32, np.float64, "int32", "int64"])
    if kind != "torch" and g.p(0.3):
        kw["overflow"] = bad_kw(g, "overflow") if g.p(0.2) else g.choice(["raise", "wrap"])
    args = [xl]
    if kind in ("golden", "golden_mc"):
        if g.p(0.6):
            args.append(bad_kw(g, "int") if g.p(0.2) else g.choice([2, 3, 4, 8, 128]))
        if kind == "golden_mc" and g.p(0.7):
            args.append(g.choice([1, 3, 20, 20, 3, 1, 7, 10**9, 10**18, 0, -2, 2.5]) if len(args) == 2 else None)
            if args[-1] is None:
                args.pop()
    if kind == "torch":
        if not is_torch(xl):
            xl = layout(g, np.asarray(x) if isinstance(x, np.ndarray) else np.asarray([1]), "torch")
            args = [xl]
    return dict(target=tgt, args=args, kwargs=kw, ref=("scan", kind), note=f"{note} {shp} {lay}".strip())


def f_batched(g):
    n, r = g.length(), g.choice([0, 1, 3])
    x, note = _mut_values(g, n * r)
    x = x.reshape(r, n)
    if g.p(0.06):
        x = x.reshape(-1)
        note += " 1-d"
    xl, lay = _lay(g, x)
    kw = {}
    if g.p(0.5):
        kw["exclusive"] = bad_kw(g, "bool") if g.p(0.15) else bool(g.p(0.5))
    if g.p(0.4):
        kw["dtype"] = bad_kw(g, "dtype") if g.p(0.3) else g.choice([np.int32, np.int64, np.float32, np.float64])
    if g.p(0.3):
        kw["overflow"] = bad_kw(g, "overflow") if g.p(0.2) else g.choice(["raise", "wrap"])
    return dict(target="mmvref.batched_scan", args=[xl], kwargs=kw, ref=("batched", "fast"), note=f"{note} {lay}")


def _flags_mut(g, n):
    r = g.rng.random()
    if r < 0.08:
        f = g.flags(n, g.choice(FLAG_DT))
        if n:
            f = f.astype(np.uint8 if g.p(0.5) else np.int8)
            f[g.rng.integers(0, n)] = g.choice([2, 127, -1] if f.dtype == np.int8 else [2, 255, 7])
        return f, "flag value"
    if r < 0.14:
        return g.flags(n, g.choice([np.int16, np.int32, np.float32, np.int64])), "flag dtype"
    if r < 0.20:
        return g.flags(max(0, n + g.choice([-1, 1, 5]))), "flag length"
    f = g.flags(n)
    if r < 0.24 and n:
        return f.tolist(), "flag list"
    return f, ""


SEG_T = {"segscan": [("mmvref.segmented_scan", "fast"), ("golden.seg_scan", "golden"),
                     ("golden.sscr", "golden"), ("emu.segmented_scan", "emu"), ("torch.segmented_scan", "torch"),
                     ("tcu.segmented_scan", "tcu")],
         "segsum": [("mmvref.segmented_sum", "fast"), ("golden.scd", "golden"), ("emu.segmented_sum", "emu"),
                    ("torch.segmented_sum", "torch"), ("tcu.segmented_sum", "tcu")],
         "compress": [("mmvref.compress", "fast"), ("golden.compress", "golden"), ("emu.compress", "emu"),
                      ("torch.compress", "torch"), ("tcu.compress", "tcu"), ("mmvref.compress_ind", "fast"),
                      ("golden.compress_ind", "golden"), ("emu.compress_ind", "emu")],
         "split": [("mmvref.split", "fast"), ("mmvref.split_ind", "fast"), ("golden.split", "golden"),
                   ("golden.split_ind", "golden"), ("emu.split", "emu"), ("emu.split_ind", "emu")]}


def f_seg(g):
    op = g.choice(list(SEG_T))
    tgt, kind = g.choice(SEG_T[op])
    n = g.length()
    x, note = _mut_values(g, n)
    if kind == "tcu" and g.p(0.7):
        x = g.values(n, np.float16)
        note = "float16"
    f, fnote = _flags_mut(g, n)
    xl, lay = _lay(g, x)
    fl, flay = _lay(g, f) if isinstance(f, np.ndarray) else (f, "")
    kw = {}
    if kind == "torch":
        xl = layout(g, np.asarray(x), "torch") if not is_torch(xl) else xl
        fl = layout(g, np.asarray(f), "torch") if not is_torch(fl) else fl
    if op == "segscan" and g.p(0.4):
        kw["exclusive"] = bad_kw(g, "bool") if g.p(0.15) else bool(g.p(0.5))
    if kind == "fast" and op in ("segscan", "segsum") and g.p(0.4):
        kw["dtype"] = bad_kw(g, "dtype") if g.p(0.3) else g.choice([np.int32, np.int64, np.float32, np.float64])
    if kind in ("fast", "golden", "emu") and op in ("segscan", "segsum") and g.p(0.3):
        kw["overflow"] = bad_kw(g, "overflow") if g.p(0.2) else g.choice(["raise", "wrap"])
    args = [xl, fl]
    if kind == "golden" and g.p(0.4):
        args.append(bad_kw(g, "int") if g.p(0.25) else g.choice([2, 3, 4, 128]))
    return dict(target=tgt, args=args, kwargs=kw, ref=(op, kind, tgt.endswith("_ind")),
                note=f"{note} {fnote} {lay}/{flay}".strip())


def _bad_indptr(g, ip, nnz):
    ip = ip.copy()
    m = ip.size - 1
    r = g.rng.random()
    if r < 0.2 and m >= 2:
        ip[1] = g.choice([-8, -1, nnz + 5])
        return ip, "indptr negative/huge"
    if r < 0.4 and m >= 2:
        i = int(g.rng.integers(1, m))
        ip[i], ip[i + 1] = ip[i + 1] + 3, max(ip[i] - 3, 0) if ip[i + 1] < nnz else ip[i + 1]
        return ip, "indptr decreasing"
    if r < 0.55:
        ip[0] = g.choice([1, -1])
        return ip, "indptr[0]"
    if r < 0.7:
        ip[-1] = ip[-1] + g.choice([1, -1, 10**12])
        return ip, "indptr end"
    if r < 0.8:
        return ip.astype(g.choice([np.float64, np.bool_, np.float32])), "indptr dtype"
    if r < 0.9:
        return ip[:0], "indptr empty"
    return np.stack([ip, ip]), "indptr 2-d"


def f_csrsum(g):
    tgt, kind = g.choice([("mmvref.segment_sum_csr", "fast"), ("golden.segment_sum_csr", "golden"),
                          ("emu.segment_sum_csr", "emu"), ("torch.segment_sum_csr", "torch"),
                          ("tcu.segment_sum_csr", "tcu")])
    n, m = g.length(), g.choice([0, 1, 2, 5, 17])
    x, note = _mut_values(g, n)
    ip = g.indptr(m, n)
    if m == 0 and n:
        ip = np.array([0, n])
    inote = ""
    if g.p(0.3):
        ip, inote = _bad_indptr(g, ip, n)
    elif g.p(0.3):
        ip = ip.astype(g.choice([np.int32, np.uint32, np.int16, np.uint64, np.int8]) if ip.max(initial=0) < 127 else np.int32)
    xl, lay = _lay(g, x)
    pl, play = _lay(g, ip)
    if kind == "torch":
        xl = layout(g, np.asarray(x), "torch") if not is_torch(xl) else xl
        pl = layout(g, np.asarray(ip), "torch") if not is_torch(pl) else pl
    kw = {}
    if kind == "fast" and g.p(0.4):
        kw["dtype"] = bad_kw(g, "dtype") if g.p(0.3) else g.choice([np.int32, np.int64, np.float32, np.float64])
    if kind in ("fast", "golden", "emu") and g.p(0.3):
        kw["overflow"] = bad_kw(g, "overflow") if g.p(0.2) else g.choice(["raise", "wrap"])
    return dict(target=tgt, args=[xl, pl], kwargs=kw, ref=("csrsum", kind), note=f"{note} {inote} {lay}/{play}")


def _csr_mut(g, m, n, dt_choice):
    nnz = g.choice([0, 1, 3, 8, 20])
    dt = dt_choice
    ip, ind, data = g.csr(m, n, nnz, dt)
    note = ""
    r = g.rng.random()
    if r < 0.25:
        ip, note = _bad_indptr(g, ip, int(ip[-1]))
    elif r < 0.35 and ind.size:
        ind = ind.copy()
        ind[g.rng.integers(0, ind.size)] = g.choice([-1, n, n + 7, -(2**31)])
        note = "index out of range"
    elif r < 0.40:
        ind = ind.astype(g.choice([np.float64, np.bool_]))
        note = "indices dtype"
    elif r < 0.45 and ind.size:
        ind = ind[:-1]
        note = "indices length"
    elif r < 0.6:
        it = g.choice([np.int32, np.uint32, np.int16, np.uint16, np.int8, np.uint64])
        if max(n, ip.max(initial=0)) < np.iinfo(it).max:
            ip, ind = ip.astype(it), ind.astype(it)
            note = f"index dtype {np.dtype(it)}"
    ip, l1 = _lay(g, ip)
    ind, l2 = _lay(g, ind)
    data, l3 = _lay(g, data)
    return ip, ind, data, f"{note} {l1}/{l2}/{l3}"


def _value_dt(g):
    r = g.rng.random()
    if r < 0.08:
        return g.choice(ODD_DT[:7]), False
    return g.choice(VAL_DT), r < 0.35


def f_spmv(g):
    tgt, kind = g.choice([("mmvref.spmv", "fast"), ("golden.spmv", "golden"), ("emu.spmv", "emu"),
                          ("mmvb.spmv", "fast"), ("torch.spmv", "torch"), ("tcu.spmv", "tcu")])
    m, n = g.choice([0, 1, 3, 7]), g.choice([0, 1, 4, 9])
    dt, ext = _value_dt(g)
    if kind == "tcu" and g.p(0.7):
        dt, ext = np.dtype(np.float16), False
    ip, ind, data, note = _csr_mut(g, m, n, dt)
    if ext and isinstance(data, np.ndarray) and np.dtype(dt).kind == "i":
        data = g.values(len(data), dt, extreme=True)
    xdt = dt if g.p(0.6) else g.choice(VAL_DT)
    nx = n if g.p(0.85) else n + g.choice([-1, 1, 3])
    x = g.values(max(nx, 0), xdt, extreme=ext and np.dtype(xdt).kind == "i")
    xl, lay = _lay(g, x)
    kw = {}
    if kind in ("fast", "golden", "emu") and g.p(0.3):
        kw["overflow"] = bad_kw(g, "overflow") if g.p(0.2) else g.choice(["raise", "wrap"])
    if kind == "golden":
        args = [ip, ind, data, xl] + ([g.choice([2, 4, 128, 1, 2.5])] if g.p(0.3) else [])
    elif kind == "torch":
        def conv(a):
            return a if is_torch(a) else layout(g, np.asarray(a), "torch")
        args = [conv(ip), conv(ind), conv(data), conv(x)]
    else:
        args = [(ip, ind, data, (m, n)), xl]
    return dict(target=tgt, args=args, kwargs=kw, ref=("spmv", kind), note=f"{dt} {note} x:{xdt} {nx} {lay}")


def f_spmm(g):
    tgt, kind = g.choice([("mmvref.spmm", "fast"), ("golden.spmm", "golden"), ("emu.spmm", "emu"),
                          ("mmvb.spmm", "fast"), ("tcu.spmm", "tcu")])
    m, n, k = g.choice([0, 1, 3]), g.choice([0, 1, 4]), g.choice([0, 1, 3])
    dt, ext = _value_dt(g)
    if kind == "tcu" and g.p(0.7):
        dt, ext = np.dtype(np.float16), False
    ip, ind, data, note = _csr_mut(g, m, n, dt)
    ddt = dt if g.p(0.6) else g.choice(VAL_DT)
    nd = n if g.p(0.85) else n + g.choice([-1, 1, 2])
    D = g.values(max(nd, 0) * k, ddt, extreme=ext and np.dtype(ddt).kind == "i").reshape(max(nd, 0), k)
    if g.p(0.05):
        D = D.reshape(-1)
    Dl, lay = _lay(g, D)
    kw = {}
    if kind in ("fast", "golden", "emu") and g.p(0.3):
        kw["overflow"] = bad_kw(g, "overflow") if g.p(0.2) else g.choice(["raise", "wrap"])
    args = [ip, ind, data, Dl] if kind == "golden" else [(ip, ind, data, (m, n)), Dl]
    return dict(target=tgt, args=args, kwargs=kw, ref=("spmm", kind), note=f"{dt} {note} D:{ddt} {nd} {lay}")


def f_spgemm(g):
    tgt, kind = g.choice([("mmvref.spgemm", "fast"), ("golden.spgemm_esc", "golden"),
                          ("golden.spgemm_gustavson", "golden"), ("golden.spgemm_ism", "golden"),
                          ("emu.spgemm", "emu"), ("mmvb.spgemm", "fast")])
    m, n, p = g.choice([0, 1, 3]), g.choice([0, 1, 4]), g.choice([0, 1, 5])
    dt, ext = _value_dt(g)
    A = _csr_mut(g, m, n, dt)
    bdt = dt if g.p(0.7) else g.choice(VAL_DT)
    nb = n if g.p(0.9) else n + 1
    B = _csr_mut(g, nb, p, bdt)
    note = f"{dt}/{bdt} {A[3]} | {B[3]}"
    A, B = list(A[:3]), list(B[:3])
    if ext and np.dtype(dt).kind == "i":
        A[2] = g.values(len(A[2]), dt, extreme=True)
        B[2] = g.values(len(B[2]), bdt, extreme=True) if np.dtype(bdt).kind == "i" else B[2]
        note += " extremes"
    kw = {}
    if kind == "fast" and g.p(0.3):
        kw["overflow"] = bad_kw(g, "overflow") if g.p(0.2) else g.choice(["raise", "wrap"])
    if kind == "fast" and g.p(0.3):
        kw["workspace"] = g.choice(["dense", "sparse", "auto"])
    if tgt == "golden.spgemm_ism" and g.p(0.4):
        kw["capacity"] = g.choice([1, 4, 0, -1, 2.5])
    return dict(target=tgt, args=[(A[0], A[1], A[2], (m, n)), (B[0], B[1], B[2], (nb, p))], kwargs=kw,
                ref=("spgemm", kind), note=note)


def f_sort(g):
    tgt, kind = g.choice([("mmvref.radix_sort", "fast"), ("mmvref.argsort", "fast"), ("mmvref.topk", "fast"),
                          ("golden.radix_sort", "golden"), ("golden.argsort", "golden"), ("golden.topk", "golden"),
                          ("emu.radix_sort", "emu"), ("emu.topk", "emu"), ("tcu.topk", "tcu"),
                          ("mmvb.topk", "fast")])
    n = g.length()
    x, note = _mut_values(g, n)
    if kind == "fast" and g.p(0.15):
        x = np.stack([x, x[::-1]])
    xl, lay = _lay(g, x)
    kw, args = {}, [xl]
    if tgt.endswith("topk"):
        args.append(bad_kw(g, "int") if g.p(0.3) else int(g.rng.integers(0, n + 1)))
        if g.p(0.3):
            kw["largest"] = bad_kw(g, "bool") if g.p(0.2) else bool(g.p(0.5))
    elif g.p(0.4):
        kw["descending"] = bad_kw(g, "bool") if g.p(0.2) else bool(g.p(0.5))
    if kind == "tcu":
        args[0] = g.values(n, np.int16) if not g.p(0.3) else xl
    return dict(target=tgt, args=args, kwargs=kw, ref=("sort", kind, tgt.split(".")[1]), note=f"{note} {lay}")


def f_sample(g):
    tgt = g.choice(["mmvref.weighted_sample", "golden.weighted_sample"])
    n = g.choice([0, 1, 3, 10, 50])
    dt = g.choice(VAL_DT + [np.dtype(np.uint8)])
    w = np.abs(g.values(n, dt)) if np.dtype(dt).kind != "u" else g.values(n, dt)
    note = f"{np.dtype(dt)}"
    if g.p(0.15) and n:
        w = w.copy()
        w[0] = -1 if np.dtype(dt).kind in "if" else w[0]
        note += " negative"
    if g.p(0.1) and np.dtype(dt).kind == "i" and n:
        w = np.full(n, np.iinfo(dt).max, dt)
        note += " extreme"
    u = g.choice([0.0, 0.5, 0.999, 1.0, -0.1, float("nan"), np.array([0.1, 0.7]), "0.5", None])
    wl, lay = _lay(g, w)
    return dict(target=tgt, args=[wl, u], kwargs={}, ref=("weighted",), note=f"{note} u={u!r} {lay}")


FAMILIES = [("scan", f_scan), ("batched", f_batched), ("seg", f_seg), ("seg2", f_seg), ("csrsum", f_csrsum),
            ("spmv", f_spmv), ("spmm", f_spmm), ("spgemm", f_spgemm), ("sort", f_sort), ("sample", f_sample)]


# ----------------------------------------------------------------------------- reference dispatch


def reference(case):
    """The expected outcome: a value spec, ANY, or raises Expect."""
    if case["ref"][0] == "nd":
        return r_nd(case)
    ref = case["ref"]
    args, kw = case["args"], dict(case["kwargs"])
    op, kind = ref[0], ref[1] if len(ref) > 1 else None
    E = Errs()
    if kind in ("golden", "golden_mc"):
        pos = {"scan": 1, "segscan": 2, "segsum": 2, "compress": 2, "split": 2, "csrsum": 2, "spmv": 4,
               "spmm": 4, "sort": 2 if op == "sort" and ref[2] == "topk" else 1}.get(op)
        if pos is not None and len(args) > pos:
            check_int(E, args[pos], "s", 2, S_MAX)
            if op in ("split", "sort") or kind == "golden_mc":
                pass
        if kind == "golden_mc" and len(args) > 2:
            check_int(E, args[2], "cores", 1, 1 << 24)
        if "capacity" in kw:
            check_int(E, kw.pop("capacity"), "capacity", 1)
    if kind == "tcu" and op in ("scan", "segscan", "segsum", "csrsum", "compress"):
        pass
    try:
        r = _reference_op(case, op, kind, args, kw, E)
    except Expect as e:  # every violation counts, the arguments checked above included
        raise Expect(E.opts + [o for o in e.options if o not in E.opts]) from None
    E.raise_if()
    return r


def _reference_op(case, op, kind, args, kw, E):
    ref = case["ref"]
    if kind == "torch" and isinstance(kw.get("exclusive"), (int, float, np.integer, np.floating)):
        kw["exclusive"] = bool(kw["exclusive"])  # torch's argument parser converts numbers (documented)
    if kind == "torch" and "exclusive" in kw and kw["exclusive"] is None:
        kw["exclusive"] = False  # ... and None to the schema's default
    if op == "scan":
        x = args[0]
        if kind == "torch":
            kw.pop("overflow", None)
        nd = (1, 2) if case["target"] in ("golden.scan_u", "golden.scan_ul1", "golden.mc_scan") else (1,)
        return r_scan(x, kw.get("exclusive", False), kw.get("dtype"), kw.get("overflow", "raise"), E=E,
                      ndims=nd)
    if op == "batched":
        return r_scan(args[0], kw.get("exclusive", False), kw.get("dtype"), kw.get("overflow", "raise"), E=E,
                      ndims=(2,))
    if op == "segscan":
        return r_segscan(args[0], args[1], kw.get("exclusive", False), kw.get("dtype"), kw.get("overflow", "raise"),
                         "f" if kind == "golden" else "flags")
    if op == "segsum":
        return r_segsum(args[0], args[1], kw.get("dtype"), kw.get("overflow", "raise"),
                        "f" if kind == "golden" else "flags")
    if op == "compress":
        return r_compress(args[0], args[1], "f" if kind == "golden" and not ref[2] else "mask", ref[2])
    if op == "split":
        return r_split(args[0], args[1], ref[2])
    if op == "csrsum":
        return r_csrsum(args[0], args[1], kw.get("dtype"), kw.get("overflow", "raise"))
    if op == "spmv":
        if kind == "golden":
            return r_spmv(None, args[3], kw.get("overflow", "raise"), golden=args[:3])
        if kind == "torch":
            A = (args[0], args[1], args[2], (len(args[0]) - 1, len(args[3])))
            return r_spmv(A, args[3])
        return r_spmv(args[0], args[1], kw.get("overflow", "raise"))
    if op == "spmm":
        if kind == "golden":
            return r_spmm(None, args[3], kw.get("overflow", "raise"), golden=args[:3])
        return r_spmm(args[0], args[1], kw.get("overflow", "raise"))
    if op == "spgemm":
        return r_spgemm(args[0], args[1], kw.get("overflow", "raise"))
    if op == "sort":
        name = ref[2]
        nd = (1, 2) if kind == "fast" else (1,)
        if name == "topk":
            return r_topk(args[0], args[1], kw.get("largest", True), nd)
        return r_sort(args[0], kw.get("descending", False), "idx" if name == "argsort" else "both", nd)
    if op == "weighted":
        return r_weighted(args[0], args[1])
    raise AssertionError(op)


# ============================================================================= N-d ops, torch_scatter, dask
#
# Families "nd_reduce", "nd_gather", "nd_scan" (the N-d forms of mmvref's segment ops), "nd_grad" (the same
# with torch tensors that require grad: values, requires_grad and the gradient), "ts" (mmvref.torch_scatter,
# every function of its __all__ plus the composites where present) and "dask" (mmvref.dask on small dask
# arrays with random chunkings, synchronous scheduler).
#
# Such a case runs through one harness in the worker, ``_fz_call(spec)``: ``spec`` names the function
# ("mmvref.<op>", "ts.<op>", "dask.<op>"), its arguments and keywords, where torch tensors and dask arrays
# appear as placeholders (``TT``/``DD``) built in the worker, so their layout, dtype (bfloat16 included) and
# requires_grad survive the trip. The harness returns the result, the ``out=`` argument as it is after the
# call (and whether it was returned), the result's requires_grad and the gradient of sum(result * w).
#
# The references below are plain Python loops over the positions (exact Python integers; floats against
# the documented error bounds), never the code under test.

ND_RES = [np.dtype(t) for t in ("int8", "int16", "int32", "int64", "float16", "float32", "float64")]
ND_RES_NAMES = [d.name for d in ND_RES]
ODD_ND = [np.dtype(t) for t in ("bool", "uint8", "uint16", "uint32", "uint64", "complex64", "complex128", "object")]
TORCH_VAL = ("int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
TORCH_NAMES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
               "complex64", "complex128")
_U = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24, "float64": 2.0 ** -53}
_FMAX = {"float16": 65504.0, "bfloat16": float((2 - 2.0 ** -7) * 2.0 ** 127),
         "float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}
# magnitudes at or above which a value rounds to inf
_FTHR = {"float16": 65520.0, "bfloat16": float((2 - 2.0 ** -8) * 2.0 ** 127),
         "float32": float((2 - 2.0 ** -24) * 2.0 ** 127), "float64": math.inf}
HUGE = 1 << 40  # an output length beyond this cannot be allocated: an error is expected


def TT(a, tdt=None, grad=False, lay="c"):
    """A torch tensor placeholder: the values ``a`` (native numpy; float32 data for bfloat16), built in the
    worker as dtype ``tdt`` (default: a's), layout ``lay`` ("c", "nc": a stride-2 view, "t": transposed
    strides), requiring grad when ``grad``."""
    a = np.array(_natv(a), order="C", copy=True)  # (np.ascontiguousarray would make a 0-d array 1-d)
    if tdt == "bfloat16":  # the values the tensor will hold
        import torch
        a = torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16).float().numpy()
    return {"__t__": a, "tdt": tdt, "grad": bool(grad), "lay": lay}


def DD(a, chunks):
    """A dask array placeholder: ``da.from_array(a, chunks=chunks)`` in the worker."""
    return {"__d__": a, "chunks": chunks}


def _natv(a):
    if isinstance(a, np.ndarray) and a.dtype.byteorder not in "=|":
        return a.astype(a.dtype.newbyteorder("="))
    return a


def _is_tdtype(v):
    return type(v).__module__.split(".")[0] == "torch" and type(v).__name__ == "dtype"


def _tname(v):
    return str(v).replace("torch.", "")


class _Arg:
    """An argument as the reference reads it: kind, native numpy values, torch dtype / grad, layout."""

    def __init__(self, v, empty=None):
        self.raw, self.torch, self.dask, self.grad, self.tdt, self.lay = v, False, False, False, None, None
        self.kind, self.arr, self.ro = "other", None, False
        if isinstance(v, dict) and "__t__" in v:
            self.kind, self.torch, self.arr = "torch", True, v["__t__"]
            self.tdt, self.grad, self.lay = v["tdt"] or v["__t__"].dtype.name, bool(v["grad"]), v["lay"]
        elif isinstance(v, dict) and "__d__" in v:
            self.kind, self.dask, self.arr = "dask", True, _natv(v["__d__"])
        elif isinstance(v, dict) and "__m__" in v:  # an np.matrix: read as the array it holds
            self.kind, self.arr = "np", _natv(np.asarray(v["__m__"]))
        elif isinstance(v, np.ndarray):
            self.kind, self.arr, self.ro = "np", _natv(v), not v.flags.writeable
        elif isinstance(v, (list, tuple, range)):
            self.kind = "list"
            if len(v) == 0 and empty is not None:
                self.arr = np.zeros(0, empty)
            else:
                try:
                    self.arr = np.asarray(v)
                except Exception:
                    self.arr = None
        elif v is None:
            self.kind = "none"
        elif isinstance(v, (bool, int, float, complex, str, np.generic)):
            self.kind = "scalar"

    @property
    def dt(self):
        if self.torch:
            return self.tdt
        return None if self.arr is None else self.arr.dtype.name


class NdErrs(Errs):
    """Errs whose options also take the error types of a torch route (RuntimeError from the dispatcher's
    schema checks, IndexError for a dim out of range), when ``torchy``."""

    def __init__(self, torchy=False):
        super().__init__()
        self.torchy = torchy

    def add(self, exc, name):
        exc = (exc,) if isinstance(exc, type) else tuple(exc)
        if self.torchy:
            exc = exc + (RuntimeError,)
        self.opts.append((exc, name))


# ----------------------------------------------------------------------------- exact / float specs


def _wrap_to(v, dt):
    bits = 8 * np.dtype(dt).itemsize
    return (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def _vint(vals, shape, fin, overflow):
    """Exact Python ints -> an exact spec of dtype fin (OverflowError under 'raise', else wrapped)."""
    fin = np.dtype(fin)
    info = np.iinfo(fin)
    if overflow == "raise" and any(v < info.min or v > info.max for v in vals):
        raise Expect([((OverflowError,), None)])
    w = np.empty(len(vals), object)
    for i, v in enumerate(vals):
        w[i] = _wrap_to(v, fin)
    return ("ndi", w.reshape(shape), fin.name)


def _round_to(v, name):
    """A float64 value rounded to dtype ``name`` (numpy's / torch's round-to-nearest-even)."""
    if name == "float64":
        return float(v)
    if name == "bfloat16":
        import torch
        return float(torch.tensor(v, dtype=torch.float64).to(torch.bfloat16).to(torch.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.dtype(name).type(v))


class _FSpec:
    """Builds a float spec element by element: the exact value (float64), its tolerance, and whether
    the element is checked at all; then the final rounding to the result dtype."""

    def __init__(self, n):
        self.w = np.zeros(n)
        self.t = np.zeros(n)
        self.c = np.ones(n, bool)

    def set(self, i, w, tol=0.0, care=True):
        self.w[i], self.t[i], self.c[i] = w, tol, care

    def spec(self, shape, cdt, fin, exact_cast=False):
        """cdt: the dtype the values were computed in; fin: the result dtype (a name). exact_cast: the
        values are exact in cdt (min/max) and the final cast is a rounding, computed exactly."""
        w, t, c = self.w.copy(), self.t.copy(), self.c.copy()
        for name in ([cdt] if cdt == fin else [cdt, fin]):
            for i in range(w.size):
                if not c[i] or not math.isfinite(w[i]):
                    continue
                if name != cdt:
                    if exact_cast and t[i] == 0:
                        w[i] = _round_to(w[i], name)
                        continue
                    t[i] += _U[name] * abs(w[i])
                a = abs(w[i])
                if a - t[i] >= _FTHR[name]:
                    w[i], t[i] = math.copysign(math.inf, w[i]), 0.0
                elif a + t[i] >= _FMAX[name]:
                    c[i] = False
        return ("ndf", w.reshape(shape), fin, t.reshape(shape), c.reshape(shape))


def _special(vals):
    """(NaN, +inf present, -inf present) of a list of floats."""
    return (any(v != v for v in vals), any(v == math.inf for v in vals), any(v == -math.inf for v in vals))


def _exact(v):
    """A finite float as an exact rational (an int when integral)."""
    from fractions import Fraction
    return int(v) if float(v).is_integer() else Fraction(v)


# ----------------------------------------------------------------------------- reductions over segments


def _reduce_core(x3, segs, red, cdt, fin, overflow, want_arg=False, int64_wrap_mean=False):
    """x3: [B, E, F] values (native numpy); segs: the positions of each segment, in increasing order.
    cdt/fin: compute and result dtype (names; fin may be "bfloat16"). Returns (spec of [B, N, F], arg
    [B, N, F] int64 (the position each min/max chose, E for an empty segment), extra for gradients)."""
    B, E, F = x3.shape
    N = len(segs)
    shape = (B, N, F)
    arg = np.full(shape, E, np.int64)
    if np.dtype(cdt if cdt != "bfloat16" else "float32").kind in "iu":
        xv = x3.astype(object)
        out = []
        for b in range(B):
            for n in range(N):
                pos = segs[n]
                for f in range(F):
                    vals = [int(xv[b, p, f]) for p in pos]
                    if red == "sum":
                        r = sum(vals)
                    elif red == "mean":
                        s = sum(vals)
                        if int64_wrap_mean:
                            s = _wrap_to(s, np.int64)
                        r = s // max(len(vals), 1)
                    elif red == "prod":
                        r = 1
                        for v in vals:
                            r *= v
                    else:
                        r, a = 0, E
                        for p, v in zip(pos, vals):
                            if a == E or (v < r if red == "min" else v > r):
                                r, a = v, p
                        arg[b, n, f] = a
                    out.append(r)
        return _vint(out, shape, fin, overflow), arg
    with np.errstate(all="ignore"):
        xc = x3.astype(cdt).astype(np.float64)
    u = _U[cdt]
    fs = _FSpec(B * N * F)
    i = 0
    for b in range(B):
        for n in range(N):
            pos = segs[n]
            k = len(pos)
            for f in range(F):
                vals = [float(xc[b, p, f]) for p in pos]
                nan, pinf, ninf = _special(vals)
                if red in ("sum", "mean"):
                    if nan or (pinf and ninf):
                        fs.set(i, math.nan)
                    elif pinf or ninf:
                        fs.set(i, math.inf if pinf else -math.inf)
                    else:
                        s = sum(_exact(v) for v in vals)
                        S = sum(abs(v) for v in vals)
                        tol = (k + 2) * u * S
                        if red == "mean":
                            s = s / max(k, 1)
                            tol = tol / max(k, 1) + 2 * u * abs(float(s))
                        fs.set(i, float(s), tol)
                elif red == "prod":
                    zero = any(v == 0 for v in vals)
                    if nan or ((pinf or ninf) and zero):
                        fs.set(i, math.nan)
                    elif pinf or ninf:
                        neg = sum(1 for v in vals if v < 0) % 2
                        fs.set(i, -math.inf if neg else math.inf)
                    else:
                        mag = 1
                        for v in vals:
                            if v != 0:
                                mag *= abs(_exact(v))
                        if zero:
                            # no partial product of integers >= 1 in magnitude can overflow below this
                            fs.set(i, 0.0, 0.0, mag < _FMAX[cdt] / 2)
                        else:
                            neg = sum(1 for v in vals if v < 0) % 2
                            p = float(-mag if neg else mag) if mag < 2 ** 1100 else (-math.inf if neg else math.inf)
                            if abs(p) < _FMAX[cdt] / 2:
                                fs.set(i, p, (k + 2) * u * abs(p))
                            elif abs(p) > 2 * _FMAX[cdt]:
                                fs.set(i, math.copysign(math.inf, p))
                            else:
                                fs.set(i, 0.0, 0.0, False)
                else:
                    r, a = 0.0, E
                    for p, v in zip(pos, vals):
                        if v != v:
                            r, a = v, p
                            break
                        if a == E or (v < r if red == "min" else v > r):
                            r, a = v, p
                    arg[b, n, f] = a
                    fs.set(i, r)
                i += 1
    return fs.spec(shape, cdt, fin, exact_cast=red in ("min", "max")), arg


def _grad_reduce(x3, segs, red, arg, w3, src_dt, res_dt):
    """Gradient of sum(result * w) with respect to x3 [B, E, F] (a float spec of x3's shape)."""
    B, E, F = x3.shape
    g = np.zeros((B, E, F))
    tol = np.zeros((B, E, F))
    care = np.ones((B, E, F), bool)
    xf = x3.astype(np.float64)
    u = _U.get(src_dt, 2.0 ** -24) + _U.get(res_dt, 2.0 ** -24)
    for b in range(B):
        for n, pos in enumerate(segs):
            k = len(pos)
            for f in range(F):
                wv = float(w3[b, n, f])
                if red == "sum":
                    for p in pos:
                        g[b, p, f] += wv
                elif red == "mean":
                    for p in pos:
                        g[b, p, f] += wv / k
                        tol[b, p, f] += 4 * u * abs(wv / k)
                elif red in ("min", "max"):
                    a = int(arg[b, n, f])
                    if a < E:
                        g[b, a, f] += wv
                else:
                    vals = [float(xf[b, p, f]) for p in pos]
                    bad = any(not math.isfinite(v) for v in vals)
                    lim = min(_FMAX.get(src_dt, 1e300), _FMAX.get(res_dt, 1e300)) / 8
                    full = 1
                    for v in vals:
                        if not bad and v != 0:
                            full *= abs(_exact(v))
                    bad = bad or full * 8 > lim
                    for j, p in enumerate(pos):
                        o = 1
                        for jj, v in enumerate(vals):
                            if jj != j and not bad:
                                o *= _exact(v)
                        if bad or abs(o) * 8 > lim:
                            care[b, p, f] = False
                            continue
                        g[b, p, f] += wv * float(o)
                        tol[b, p, f] += (k + 4) * u * abs(wv * float(o))
    return g, tol, care


def _grad_spec(g, tol, care, shape, dt):
    s = _FSpec(g.size)
    s.w, s.t, s.c = g.reshape(-1).copy(), tol.reshape(-1).copy(), care.reshape(-1).copy()
    return ("ndf", s.w.reshape(shape), dt, s.t.reshape(shape), s.c.reshape(shape))


# ----------------------------------------------------------------------------- scans over columns


def _scan_core(x3, starts, exclusive, cdt, fin, overflow):
    """Inclusive/exclusive (segmented: ``starts`` 0/1 per position, or None) scans of the columns of x3."""
    B, E, F = x3.shape
    shape = (B, E, F)
    if np.dtype(cdt).kind in "iu":
        xv = x3.astype(object)
        out = [None] * (B * E * F)
        for b in range(B):
            for f in range(F):
                acc = 0
                for e in range(E):
                    if e == 0 or (starts is not None and starts[e]):
                        acc = 0
                    v = int(xv[b, e, f])
                    out[(b * E + e) * F + f] = acc if exclusive else acc + v
                    acc += v
        return _vint(out, shape, fin, overflow)
    with np.errstate(all="ignore"):
        xc = x3.astype(cdt).astype(np.float64)
    u = _U[cdt]
    fs = _FSpec(B * E * F)
    for b in range(B):
        for f in range(F):
            terms = []
            for e in range(E):
                if e == 0 or (starts is not None and starts[e]):
                    terms = []
                v = float(xc[b, e, f])
                if not exclusive:
                    terms.append(v)
                i = (b * E + e) * F + f
                nan, pinf, ninf = _special(terms)
                if nan or (pinf and ninf):
                    fs.set(i, math.nan)
                elif pinf or ninf:
                    fs.set(i, math.inf if pinf else -math.inf)
                else:
                    s = float(sum(_exact(t) for t in terms))
                    fs.set(i, s, (len(terms) + 2) * u * sum(abs(t) for t in terms))
                if exclusive:
                    terms.append(v)
    return fs.spec(shape, cdt, fin)


def _grad_scan(w3, starts, exclusive):
    """Gradient of sum(scan(x) * w): per column, the (strict, when exclusive) suffix sums of w within
    each segment."""
    B, E, F = w3.shape
    g = np.zeros((B, E, F))
    seg_end = [0] * E  # one past the last position of the segment of e
    end = E
    for e in range(E - 1, -1, -1):
        seg_end[e] = end
        if e == 0 or (starts is not None and starts[e]):
            end = e
    for b in range(B):
        for f in range(F):
            for e in range(E):
                lo = e + 1 if exclusive else e
                g[b, e, f] = sum(float(w3[b, j, f]) for j in range(lo, seg_end[e]))
    return g


# ----------------------------------------------------------------------------- argument checks


def _v_values(E, a, name, routed=False, allow0=False):
    """The values argument of an N-d op: (native array, dtype name) or (None, None)."""
    if a.kind in ("other", "none"):
        E.add((TypeError, ValueError), name)
        return None, None
    if a.kind == "scalar":
        E.add((ValueError, TypeError), name)
        return None, None
    x = a.arr
    if x is None:
        E.add((TypeError, ValueError), name)
        return None, None
    dt = a.dt
    bad = False
    if x.ndim == 0 and not allow0:
        E.add(ValueError, name)
        bad = True
    ok = dt in VAL_NAMES or (a.torch and dt == "bfloat16")
    if not ok:
        E.add(TypeError, name)
        if x.ndim == 0:
            E.add(ValueError, name)
        bad = True
    return (None, None) if bad else (x, dt)


VAL_NAMES = [d.name for d in VAL_DT]


def _v_int1d(E, a, name, empty=np.int64):
    """A 1-D integer array argument (index, indptr): Python ints, or None."""
    if a.kind in ("other", "none"):
        E.add((TypeError, ValueError), name)
        return None
    if a.kind == "scalar":
        E.add((ValueError, TypeError), name)
        return None
    p = a.arr
    if p is None:
        E.add((TypeError, ValueError), name)
        return None
    if p.ndim != 1:
        E.add(ValueError, name)
        return None
    if p.dtype.kind not in "iu":
        E.add(TypeError, name)
        return None
    return [int(v) for v in p.tolist()]


def _v_indptr(E, a, nnz, name="indptr"):
    q = _v_int1d(E, a, name)
    if q is None:
        return None
    if not q:
        E.add(ValueError, name)
        return None
    if q[0] != 0 or any(q[i] > q[i + 1] for i in range(len(q) - 1)) or (nnz is not None and q[-1] != nnz):
        E.add(ValueError, name)
        return None
    return q


def _v_dim_size(E, v):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        E.add((ValueError, TypeError), "dim_size")
        return False
    return int(v)


def _v_index(E, a, npos, dim_size, sorted_req, name="index"):
    """scatter / segment_coo's index: (Python ints, n) or None; a huge n an expected error."""
    q = _v_int1d(E, a, name)
    if q is None:
        return None
    if npos is not None and len(q) != npos:
        E.add(ValueError, name)
        return None
    if a.arr.dtype == np.uint64 and q and max(q) > (1 << 63) - 1:
        E.add(ValueError, name)
        return None
    if dim_size is False:
        return None
    n = dim_size if dim_size is not None else (max(max(q) + 1, 0) if q else 0)
    if any(v < 0 or v >= n for v in q):
        E.add(ValueError, (name, "dim_size"))
        return None
    if n >= HUGE:
        E.add((ValueError, OverflowError, MemoryError), (name, "dim_size"))
        E.add((MemoryError,), None)
        return None
    if sorted_req and any(q[i] > q[i + 1] for i in range(len(q) - 1)):
        E.add(ValueError, name)
        return None
    return q, n


def _v_flags(E, a, n, name="flags"):
    raw = a.raw if a.kind == "list" else a.arr
    if a.kind in ("other", "none", "scalar") or raw is None:
        E.add((TypeError, ValueError), name)
        return None
    f = flags(E, raw, n, name)
    return None if f is None else [int(v) for v in f]


def _v_reduce(E, r, names=("sum", "add", "mean", "min", "max", "prod", "mul")):
    if not isinstance(r, str) or r not in names:
        E.add(ValueError, "reduce")
        return None
    return {"add": "sum", "mul": "prod"}.get(r, r)


def _nd_dtypes(E, xdt, dtype, torch_ok=False):
    """(compute dtype, result dtype) names of the N-d ops for values of dtype ``xdt`` (a numpy name)."""
    if dtype is None:
        r = RES[xdt]
        return r, r
    if torch_ok and _is_tdtype(dtype):
        d = _tname(dtype)
    elif isinstance(dtype, (str, type, np.dtype)):
        try:
            d = np.dtype(dtype).name
        except TypeError:
            d = None
    else:
        d = None
    if d not in ND_RES_NAMES:
        E.add(TypeError, "dtype")
        return None, None
    if np.dtype(xdt).kind == "f" and np.dtype(d).kind != "f":
        E.add(TypeError, "dtype")
        return None, None
    if np.dtype(d).kind == "f":
        return ("float32" if d == "float16" else d), d
    if xdt == "int64" or d == "int64":
        return "int64", d
    return "int32", d


def _routed_dtypes(E, xdt, dtype):
    """The torch route (bfloat16 or requires_grad): (kernel values dtype, compute, kernel result, final
    torch dtype) names."""
    kx = "float32" if xdt == "bfloat16" else xdt
    if dtype is None:
        td = "bfloat16" if xdt == "bfloat16" else RES[xdt]
    elif _is_tdtype(dtype):
        td = _tname(dtype)
    else:
        try:
            td = np.dtype(dtype).name
        except Exception:
            td = None
        if td not in ("bool", "uint8") + tuple(ND_RES_NAMES):
            E.add(TypeError, "dtype")
            return None
    kfin = "float32" if td == "bfloat16" else td
    if kfin not in ND_RES_NAMES or (np.dtype(kx).kind == "f" and np.dtype(kfin).kind != "f"):
        E.add(TypeError, "dtype")
        return None
    cdt, fin = _nd_dtypes(E, kx, kfin)
    return kx, cdt, fin, td


def _v_out(E, O, shape, dt, routed, grad):
    """The out= argument of mmvref's N-d ops (numpy route: an array or torch tensor of the result's shape
    and dtype, writeable; torch route: a tensor; with an input that requires grad: RuntimeError)."""
    if O is None:
        return False
    if routed:
        if grad:
            E.add(RuntimeError, "out")
            return True
        if not O.torch:
            E.add(TypeError, "out")
            return True
    if O.kind == "torch":
        odt = O.tdt
        if odt == "bfloat16" and not routed:
            E.add(TypeError, "out")
            return True
    elif O.kind == "np":
        odt = O.arr.dtype.name
    else:
        E.add(TypeError, "out")
        return True
    if shape is not None and tuple(O.arr.shape) != tuple(shape):
        E.add(ValueError, "out")
    if dt is not None and odt != dt:
        E.add(TypeError, "out")
    if O.ro:
        E.add(ValueError, "out")
    return True


def _axis_arg(E, kw, default, scan=False, conflict=None):
    """axis=/dim= (dim an alias; both given must agree): the axis asked for, None (scan: flattened), or
    False when invalid. Two spellings of one axis (0 and -1 of a 1-D array), or an axis= equal to the
    default (which an implementation cannot tell from an omitted one) beside another dim=, are recorded in
    ``conflict`` (the dim= value is then used, and a TypeError is fine too)."""
    has_a, has_d = "axis" in kw, "dim" in kw and kw["dim"] is not None
    axis = kw.get("axis", default)
    if has_d:
        d = kw["dim"]
        if has_a and not (scan and axis is None):
            try:
                same = bool(axis == d) and not isinstance(axis, bool) and not isinstance(d, bool)
            except Exception:
                same = False
            if not same:
                ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in (axis, d))
                if conflict is not None and ints:
                    conflict.append((int(axis), int(d), axis is default or axis == default))
                else:
                    E.add(TypeError, ("axis", "dim"))
                    return False
        axis = d
    if axis is None and scan:
        return None
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        E.add(TypeError, ("axis", "dim"))
        return False
    return int(axis)


def _norm_axis(E, axis, ndim, routed):
    if axis is False:
        return None
    if not -ndim <= axis < ndim:
        E.add((ValueError, IndexError) if routed else ValueError, ("axis", "dim"))
        return None
    return axis % ndim


def _check_bool(E, v, name):
    if not isinstance(v, (bool, np.bool_)):
        E.add(TypeError, name)
        return None
    return bool(v)


# ----------------------------------------------------------------------------- mmvref's N-d ops


_SRC_NAME = {"segment_csr": "src", "segment_coo": "src", "scatter": "src", "gather_csr": "src",
             "scan": "x", "segmented_scan": "x", "segmented_sum": "x", "segment_sum_csr": "x"}
_RED_OPS = ("segment_csr", "segment_coo", "scatter", "segmented_sum", "segment_sum_csr")


def _as3(x, axis):
    B = int(np.prod(x.shape[:axis], dtype=np.int64))
    F = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    return np.ascontiguousarray(x).reshape(B, x.shape[axis], F), B, F


def r_mm(name, spec):
    """The expectation of ``mmvref.<name>(*args, **kwargs)`` (an N-d op) as a dict, or raises Expect."""
    args, kw = spec["args"], spec["kwargs"]
    sname = _SRC_NAME[name]
    S = _Arg(args[0])
    routed = S.torch and (S.grad or S.tdt == "bfloat16")
    E = NdErrs(torchy=routed)
    also = []
    scan = name == "scan"
    conflict = []
    axis = _axis_arg(E, kw, None if scan else 0, scan=scan, conflict=conflict)
    if conflict:  # two spellings of one axis, or axis= at its default beside dim=: a TypeError is fine
        E.also_for_errors = [((TypeError,), ("axis", "dim"))]
    x, xdt = _v_values(E, S, sname, routed, allow0=scan and axis is None)
    if x is not None and x.ndim == 0:  # scan(0-d, axis=None): np.cumsum gives one element; an error is fine too
        also.append(((ValueError,), sname))
        E.also_for_errors = getattr(E, "also_for_errors", []) + [((ValueError,), sname)]
        x = x.reshape(1)
    overflow = kw.get("overflow", "raise")
    check_overflow(E, overflow)
    red = "sum"
    if name in ("segment_csr", "segment_coo", "scatter", "segmented_sum"):
        red = _v_reduce(E, kw.get("reduce", "sum"))
    want_arg = False
    if "return_arg" in kw:
        want_arg = _check_bool(E, kw["return_arg"], "return_arg")
        if want_arg and red not in (None, "min", "max"):
            E.add(ValueError, ("return_arg", "reduce"))
    if "exclusive" in kw:
        _check_bool(E, kw["exclusive"], "exclusive")
    dtype = kw.get("dtype")
    dts = None
    if x is not None:
        if routed:
            r = _routed_dtypes(E, xdt, dtype)
            if r is not None:
                kx, cdt, kfin, td = r
                dts = (cdt, kfin, "bfloat16" if td == "bfloat16" else kfin)
        elif name != "gather_csr":
            cdt, fin = _nd_dtypes(E, xdt, dtype, torch_ok=S.torch)
            if cdt is not None:
                dts = (cdt, fin, fin)
    if x is None:
        if kw.get("out") is not None and routed and S.grad:
            E.add(RuntimeError, "out")
        if routed and kw.get("dtype") is not None:  # the torch route looks at dtype= first
            _routed_dtypes(E, "int64", kw["dtype"])
        _second_checks(E, name, args, kw)
        E.raise_if()
    if scan and axis is None:
        x = x.reshape(-1)
        ax = 0
    else:
        if conflict:
            a0, d0, at_default = conflict[0]
            n0 = x.ndim
            if -n0 <= a0 < n0 and -n0 <= d0 < n0 and a0 % n0 == d0 % n0:
                also.append(((TypeError,), ("axis", "dim")))  # one axis, two spellings
            elif at_default:  # axis= equal to the default beside another dim=: dim= wins, or a TypeError
                also.append(((TypeError,), ("axis", "dim")))
            else:
                E.add(TypeError, ("axis", "dim"))
                E.raise_if()
        ax = _norm_axis(E, axis, x.ndim, routed)
    O = _Arg(kw["out"]) if kw.get("out") is not None else None
    if ax is None:
        if O is not None and routed and S.grad:
            E.add(RuntimeError, "out")
        _second_checks(E, name, args, kw)
        E.raise_if()
    x3, B, F = _as3(x, ax)
    Epos = x.shape[ax]
    second = _Arg(args[1], empty=np.uint8 if name in ("segmented_scan", "segmented_sum") else np.int64) \
        if len(args) > 1 else None
    segs = None
    n_out = None
    starts = None
    if name in ("segment_csr", "segment_sum_csr"):
        q = _v_indptr(E, second, Epos)
        if q is not None:
            segs = [list(range(q[i], q[i + 1])) for i in range(len(q) - 1)]
    elif name in ("segment_coo", "scatter"):
        ds = _v_dim_size(E, kw.get("dim_size"))
        r = _v_index(E, second, Epos, ds, name == "segment_coo")
        if r is not None:
            q, n = r
            segs = [[] for _ in range(n)]
            for p, v in enumerate(q):
                segs[v].append(p)
    elif name in ("segmented_scan", "segmented_sum"):
        starts = _v_flags(E, second, Epos)
        if starts is not None and name == "segmented_sum":
            cuts = [p for p in range(Epos) if p == 0 or starts[p]]
            segs = [list(range(cuts[i], cuts[i + 1] if i + 1 < len(cuts) else Epos)) for i in range(len(cuts))]
    elif name == "gather_csr":
        q = _v_indptr(E, second, None)
        if q is not None:
            if len(q) - 1 != Epos:
                E.add(ValueError, "indptr")
                q = None
            elif q[-1] >= HUGE:
                E.add((ValueError, MemoryError), "indptr")
                E.add((MemoryError,), None)
                n_out = q[-1]  # for the checks of out= (an implementation may look at it first)
                q = None
        if q is not None:
            n_out = q[-1]
    # out=
    if name in ("segment_csr", "segment_sum_csr") and segs is None and isinstance(second.arr, np.ndarray) \
            and second.arr.ndim == 1 and second.arr.dtype.kind in "iu" and second.arr.size:
        n_out = second.arr.size - 1  # offsets of bad values still say how many segments (for out=)
    if name in _RED_OPS:
        rshape = (x.shape[:ax] + (n_out,) + x.shape[ax + 1:] if n_out is not None else None) if segs is None else \
            x.shape[:ax] + (len(segs),) + x.shape[ax + 1:]
    elif name == "gather_csr":
        rshape = None if n_out is None else x.shape[:ax] + (n_out,) + x.shape[ax + 1:]
    else:
        rshape = x.shape
    rdt = (None if dts is None else dts[2]) if name != "gather_csr" else xdt
    has_out = _v_out(E, O, rshape, rdt, routed, S.grad)
    E.raise_if()
    try:
        return _mm_value(name, spec, S, x, x3, B, F, Epos, xdt, segs, starts, q if name == "gather_csr" else None,
                         n_out, rshape, red, want_arg, overflow, dts, has_out, also)
    except Expect as e:  # an overflow: the alternatives hold as well
        raise Expect(e.options + getattr(E, "also_for_errors", [])) from None


def _mm_value(name, spec, S, x, x3, B, F, Epos, xdt, segs, starts, q, n_out, rshape, red, want_arg, overflow, dts,
              has_out, also):
    kw = spec["kwargs"]
    cdt, fin, final = dts if dts is not None else (None, None, None)
    w = spec.get("grad_w")
    items, grad = [], None
    if name in _RED_OPS:
        mean_wrap = xdt == "int64" and overflow == "wrap" and red == "mean"
        vs, arg = _reduce_core(x3, segs, red, cdt, final, overflow, want_arg, mean_wrap)
        vs = _reshape_spec(vs, rshape)
        items.append(vs)
        if want_arg:
            items.append(("ndi", arg.astype(object).reshape(rshape), "int64"))
        if w is not None:
            g, tol, care = _grad_reduce(x3, segs, red, arg, w.reshape(B, len(segs), F), xdt, final)
            grad = _grad_spec(g, tol, care, S.arr.shape, xdt)
    elif name == "gather_csr":
        res = np.empty((B, n_out, F), x.dtype)
        for nseg in range(Epos):
            res[:, q[nseg]:q[nseg + 1], :] = x3[:, nseg:nseg + 1, :]
        items.append(("ndb", res.reshape(rshape), xdt))
        if w is not None:
            w3 = w.reshape(B, n_out, F)
            g = np.zeros((B, Epos, F))
            for nseg in range(Epos):
                g[:, nseg, :] = w3[:, q[nseg]:q[nseg + 1], :].sum(axis=1)
            grad = _grad_spec(g, np.abs(g) * 1e-2 if xdt in ("float16", "bfloat16") else np.abs(g) * 1e-6,
                              np.ones(g.shape, bool), S.arr.shape, xdt)
    else:
        ex = bool(kw.get("exclusive", False))
        vs = _scan_core(x3, starts, ex, cdt, final, overflow)
        items.append(_reshape_spec(vs, rshape))
        if w is not None:
            g = _grad_scan(w.reshape(B, Epos, F), starts, ex)
            tolg = np.abs(g) * (1e-2 if xdt in ("float16", "bfloat16") else 1e-5) + 1e-9
            grad = _grad_spec(g, tolg, np.ones(g.shape, bool), S.arr.shape, xdt)
    return {"items": items, "tuple": want_arg, "torch": S.torch, "out": has_out, "grad": grad,
            "req_grad": S.grad and not has_out, "also": also}


def _second_checks(E, name, args, kw):
    """The checks of the second argument (indptr / index / flags) that need no axis length."""
    if len(args) > 1:
        sec = _Arg(args[1], empty=np.uint8 if name in ("segmented_scan", "segmented_sum") else np.int64)
        if name in ("segment_csr", "segment_sum_csr", "gather_csr"):
            _v_indptr(E, sec, None)
        elif name in ("segment_coo", "scatter"):
            _v_index(E, sec, None, _v_dim_size(E, kw.get("dim_size")), name == "segment_coo")
        else:
            _v_flags(E, sec, None)


def _reshape_spec(vs, shape):
    if vs == ANY:
        return vs
    if vs[0] == "ndf":
        return ("ndf", vs[1].reshape(shape), vs[2], vs[3].reshape(shape), vs[4].reshape(shape))
    return (vs[0], vs[1].reshape(shape), vs[2])


# ----------------------------------------------------------------------------- mmvref.torch_scatter

_TS_KIND = {"scatter": ("scatter", None), "scatter_sum": ("scatter", "sum"), "scatter_add": ("scatter", "sum"),
            "scatter_mul": ("scatter", "prod"), "scatter_mean": ("scatter", "mean"),
            "scatter_min": ("scatter", "min"), "scatter_max": ("scatter", "max"),
            "segment_csr": ("csr", None), "segment_sum_csr": ("csr", "sum"), "segment_add_csr": ("csr", "sum"),
            "segment_mean_csr": ("csr", "mean"), "segment_min_csr": ("csr", "min"),
            "segment_max_csr": ("csr", "max"),
            "segment_coo": ("coo", None), "segment_sum_coo": ("coo", "sum"), "segment_add_coo": ("coo", "sum"),
            "segment_mean_coo": ("coo", "mean"), "segment_min_coo": ("coo", "min"),
            "segment_max_coo": ("coo", "max"),
            "gather_csr": ("gcsr", None), "gather_coo": ("gcoo", None),
            "scatter_softmax": ("comp", "softmax"), "scatter_log_softmax": ("comp", "log_softmax"),
            "scatter_logsumexp": ("comp", "logsumexp"), "scatter_std": ("comp", "std")}
_TS_COMPOSITES = ("scatter_softmax", "scatter_log_softmax", "scatter_logsumexp", "scatter_std")


def _ts_groups(full_idx, d):
    """Groups of a reduction by a full-shape index along d: {(other coords with d -> id): [positions]}."""
    groups = {}
    for pos in np.ndindex(*full_idx.shape):
        key = pos[:d] + (int(full_idx[pos]),) + pos[d + 1:]
        groups.setdefault(key, []).append(pos)
    return groups


def _ts_broadcast(E, idx, src_shape, d, name="index"):
    """torch_scatter's broadcast of a scatter index: a 1-D index aligned with d, trailing dims added."""
    sh = list(idx.shape)
    if idx.ndim == 1:
        sh = [1] * d + sh
    while len(sh) < len(src_shape):
        sh.append(1)
    if len(sh) != len(src_shape) or any(a != b and a != 1 for a, b in zip(sh, src_shape)):
        E.add((ValueError, RuntimeError), name)
        return None
    return np.broadcast_to(idx.reshape(sh), src_shape)


def _ts_value(vals, red, tdt, int_mean="floor"):
    """One reduced value of torch_scatter semantics at dtype tdt: (value, tol, care); vals as Python
    numbers in position order. Integers exact (overflow decided by the caller); floats accumulate in
    float32 for half types."""
    k = len(vals)
    if tdt in ("int8", "int16", "int32", "int64"):
        if red == "sum":
            return sum(vals), 0.0, True
        if red == "prod":
            r = 1
            for v in vals:
                r *= v
            return r, 0.0, True
        if red == "mean":
            s = sum(vals)
            c = max(k, 1)
            return (s // c if int_mean == "floor" else int(s / c) if abs(s) < 2 ** 52 else
                    (abs(s) // c) * (1 if s >= 0 else -1)), 0.0, True
        if not vals:
            return 0, 0.0, True
        return (min(vals) if red == "min" else max(vals)), 0.0, True
    cdt = "float32" if tdt in ("float16", "bfloat16") else tdt
    u = _U[cdt] + _U[tdt]
    nan, pinf, ninf = _special(vals)
    if red in ("sum", "mean"):
        if nan or (pinf and ninf):
            return math.nan, 0.0, True
        if pinf or ninf:
            return (math.inf if pinf else -math.inf), 0.0, True
        s = float(sum(_exact(v) for v in vals))
        S = sum(abs(v) for v in vals)
        if red == "mean":
            return s / max(k, 1), (k + 2) * u * S / max(k, 1) + 2 * u * abs(s / max(k, 1)), True
        return s, (k + 2) * u * S + u * abs(s), True
    if red == "prod":
        zero = any(v == 0 for v in vals)
        if nan or ((pinf or ninf) and zero):
            return math.nan, 0.0, True
        neg = sum(1 for v in vals if v < 0) % 2
        if pinf or ninf:
            return (-math.inf if neg else math.inf), 0.0, True
        mag = 1
        for v in vals:
            if v != 0:
                mag *= abs(_exact(v))
        if zero:
            return 0.0, 0.0, mag < _FMAX[cdt] / 2
        p = float(mag) if mag < 2 ** 1100 else math.inf
        p = -p if neg else p
        if abs(p) < _FMAX[tdt] / 2:
            return p, (k + 2) * u * abs(p), True
        if abs(p) > 2 * _FMAX[tdt]:
            return math.copysign(math.inf, p), 0.0, True
        return 0.0, 0.0, False
    if not vals:
        return 0.0, 0.0, True
    for v in vals:
        if v != v:
            return math.nan, 0.0, True
    return (min(vals) if red == "min" else max(vals)), 0.0, True


def _ts_arg(vals, positions_d, red, E):
    """(value, position along d) chosen by min/max (ties: the lowest position; NaN: the first NaN)."""
    r, a = None, E
    for v, p in zip(vals, positions_d):
        if isinstance(v, float) and v != v:
            return v, p
        if a == E or (v < r if red == "min" else v > r):
            r, a = v, p
    return r, a


def _pyvals(a):
    return [int(v) for v in a.tolist()] if a.dtype.kind in "iub" else [float(v) for v in a.tolist()]


class _Res:
    """An N-d result built element by element: exact ints or floats with tolerances."""

    def __init__(self, shape, tdt):
        self.shape, self.tdt = tuple(shape), tdt
        self.isint = tdt in ("int8", "int16", "int32", "int64")
        n = int(np.prod(self.shape, dtype=np.int64))
        self.v = [0] * n
        self.t = np.zeros(n)
        self.c = np.ones(n, bool)

    def idx(self, pos):
        return int(np.ravel_multi_index(pos, self.shape)) if self.shape else 0

    def set(self, pos, v, tol=0.0, care=True):
        i = self.idx(pos)
        self.v[i], self.t[i], self.c[i] = v, tol, care

    def get(self, pos):
        return self.v[self.idx(pos)]

    def spec(self, overflow="raise"):
        if self.isint:
            return _vint(self.v, self.shape, self.tdt, overflow)
        s = _FSpec(len(self.v))
        for i, v in enumerate(self.v):
            s.set(i, float(v), self.t[i], bool(self.c[i]))
        return s.spec(self.shape, self.tdt, self.tdt)

    def overflows(self):
        if not self.isint:
            return False
        info = np.iinfo(self.tdt)
        return any(v < info.min or v > info.max for v in self.v)


def r_ts(name, spec):
    """Expectation of ``mmvref.torch_scatter.<name>`` (torch_scatter 2.1.2 semantics plus the module
    docstring's documented differences)."""
    args, kw = spec["args"], spec["kwargs"]
    kind, red = _TS_KIND[name]
    E = NdErrs(torchy=True)
    S = _Arg(args[0])
    I = _Arg(args[1]) if len(args) > 1 else _Arg(None)
    iname = "indptr" if kind in ("csr", "gcsr") else "index"
    if not S.torch:
        E.add(TypeError, "src")
    if not I.torch:
        E.add(TypeError, iname)
    E.raise_if()
    src, tdt, idx = S.arr, S.tdt, I.arr
    rank = src.ndim
    # what an empty src is not checked for (it gives zeros without looking); the gathers only move values,
    # so any dtype may be taken by them
    soft = E if src.size else NdErrs(torchy=True)
    lenient = NdErrs(torchy=True)
    if kind == "comp":
        if tdt not in ("float16", "bfloat16", "float32", "float64"):
            if name == "scatter_std":
                return ANY  # torch_scatter's scatter_std computes something for integers; not judged
            E.add((ValueError, TypeError), ("src", "floating"))
    elif tdt not in TORCH_VAL:
        (lenient if kind in ("gcsr", "gcoo") else soft).add(TypeError, "src")
    if I.tdt not in ("int8", "int16", "int32", "int64", "uint8"):
        soft.add(TypeError, iname)
    if red is None and kind in ("scatter", "csr", "coo"):
        red = _v_reduce(E, kw.get("reduce", "sum"), ("sum", "add", "mean", "min", "max", "mul"))
    O = _Arg(kw["out"]) if kw.get("out") is not None else None
    has_out = O is not None
    if O is not None and not O.torch:
        E.add(TypeError, "out")
        O = None
    ret_arg = kind in ("scatter", "csr", "coo") and name.endswith(("_min", "_max", "_min_csr", "_max_csr",
                                                                    "_min_coo", "_max_coo"))

    def finish_checks(oshape):
        if O is not None and oshape is not None:
            if tuple(O.arr.shape) != tuple(oshape):
                E.add(ValueError, "out")
            if O.tdt != tdt:
                E.add(TypeError, "out")
        also = list(lenient.opts)
        if src.size == 0:
            also += list(soft.opts)
        if E.opts:
            E.opts.extend(lenient.opts)
        E.raise_if()
        return also

    def check_n(n):
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0):
            E.add((ValueError, TypeError), "dim_size")
            return None
        return n

    if kind in ("scatter", "comp"):
        dim = kw.get("dim", -1)
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            E.add((TypeError, ValueError), "dim")
            E.raise_if()
        d = dim + rank if dim < 0 else dim
        if not 0 <= d < rank:
            E.add((IndexError, ValueError), ("dim", "src"))
            E.raise_if()
        full = _ts_broadcast(E, idx, src.shape, d)
        if full is None:
            E.raise_if()
        E_ = src.shape[d]
        if O is not None:
            if O.arr.ndim != rank:
                E.add(ValueError, "out")
                E.raise_if()
            n = O.arr.shape[d]
        else:
            n = check_n(kw.get("dim_size"))
            if n is None:
                n = int(full.max()) + 1 if full.size else 0
        if src.size and full.size and (int(full.min()) < 0 or int(full.max()) >= n):
            soft.add(ValueError, ("index", "dim_size"))
            n = 0
        if n >= HUGE:
            E.add((ValueError, MemoryError, OverflowError), ("index", "dim_size"))
            E.add((MemoryError,), None)
            E.raise_if()
        n = max(n, 0)
        oshape = src.shape[:d] + (n,) + src.shape[d + 1:]
        also = finish_checks(oshape)
        if kind == "comp":
            return _ts_composite(red, src, tdt, full, d, n, kw, spec)
        groups = _ts_groups(full, d) if src.size else {}
        r = _ts_reduce(kind, red, src, tdt, groups, d, oshape, O, ret_arg, spec, E_, "floor", S.grad)
        r["also"] = also + r["also"]
        return r
    if kind in ("coo", "gcoo"):
        m = idx.ndim
        if m < 1 or m > rank:
            E.add(ValueError, "index")
            E.raise_if()
        d = m - 1
        if kind == "gcoo":
            for k in range(d):
                if idx.shape[k] not in (1, src.shape[k]):
                    E.add(ValueError, "index")
            E.raise_if()
            e_out = idx.shape[d]
            oshape = src.shape[:d] + (e_out,) + src.shape[d + 1:]
            full_i = np.broadcast_to(idx, src.shape[:d] + (e_out,))
            if full_i.size and (int(full_i.min()) < 0 or int(full_i.max()) >= src.shape[d]):
                soft.add(ValueError, "index")
            also = finish_checks(oshape)
            res = np.zeros(oshape, src.dtype)
            w = spec.get("grad_w")
            g = np.zeros(src.shape) if w is not None else None
            if src.size:
                for pos in np.ndindex(*oshape):
                    ip = int(full_i[pos[:d + 1]])
                    res[pos] = src[pos[:d] + (ip,) + pos[d + 1:]]
                    if g is not None:
                        g[pos[:d] + (ip,) + pos[d + 1:]] += w[pos]
            grad = None if g is None else _grad_spec(g, np.abs(g) * 1e-2 + 1e-9, np.ones(g.shape, bool), src.shape,
                                                     tdt)
            return {"items": [("ndb", res, tdt)], "tuple": False, "torch": True, "out": has_out, "grad": grad,
                    "req_grad": S.grad and not has_out, "also": also}
        if any(idx.shape[k] not in (1, src.shape[k]) for k in range(d)):
            E.add((ValueError, RuntimeError), "index")
            E.raise_if()
        full_d = np.broadcast_to(idx, src.shape[:d + 1])
        for pos in np.ndindex(*full_d.shape[:d]):
            row = full_d[pos]
            if any(int(row[i]) > int(row[i + 1]) for i in range(len(row) - 1)):
                soft.add(ValueError, "index")
                break
        full = np.broadcast_to(full_d.reshape(full_d.shape + (1,) * (rank - d - 1)), src.shape)
        E_ = src.shape[d]
        if O is not None:
            if O.arr.ndim != rank:
                E.add(ValueError, "out")
                E.raise_if()
            n = O.arr.shape[d]
        else:
            n = check_n(kw.get("dim_size"))
            if n is None:
                n = int(full.max()) + 1 if full.size else 0
        if src.size and full.size and (int(full.min()) < 0 or int(full.max()) >= n):
            soft.add(ValueError, ("index", "dim_size"))
            n = 0
        if n >= HUGE:
            E.add((ValueError, MemoryError, OverflowError), ("index", "dim_size"))
            E.add((MemoryError,), None)
            E.raise_if()
        n = max(n, 0)
        oshape = src.shape[:d] + (n,) + src.shape[d + 1:]
        also = finish_checks(oshape)
        groups = _ts_groups(full, d) if src.size else {}
        r = _ts_reduce("coo", red, src, tdt, groups, d, oshape, O, ret_arg, spec, E_, "trunc", S.grad)
        r["also"] = also + r["also"]
        return r
    # csr / gather_csr
    m = idx.ndim
    if m < 1 or m > rank:
        E.add(ValueError, "indptr")
        E.raise_if()
    d = m - 1
    K = idx.shape[-1]
    N = max(K - 1, 0)
    E_ = src.shape[d]
    if any(idx.shape[k] not in (1, src.shape[k]) for k in range(d)):
        E.add((ValueError, RuntimeError), "indptr")
        E.raise_if()
    ipf = np.broadcast_to(idx, src.shape[:d] + (K,))
    if kind == "gcsr":
        if src.shape[d] != N and src.size:
            E.add(ValueError, ("indptr", "src"))
            E.raise_if()
        e_out = int(idx.reshape(-1)[-1]) if idx.size else 0
        lim = e_out
    else:
        lim = E_
    for pos in np.ndindex(*ipf.shape[:d]):
        row = [int(v) for v in ipf[pos]]
        if row and (row[0] < 0 or row[-1] > lim or any(row[i] > row[i + 1] for i in range(len(row) - 1))):
            soft.add(ValueError, "indptr")
            break
    if kind == "gcsr":
        if e_out >= HUGE or e_out < 0:
            E.add((ValueError, MemoryError), "indptr")
            E.add((MemoryError,), None)
            E.opts.extend(lenient.opts)
            E.raise_if()
    oshape = src.shape[:d] + ((e_out if kind == "gcsr" else N),) + src.shape[d + 1:]
    also = finish_checks(oshape)
    if kind == "gcsr":
        res = np.zeros(oshape, src.dtype)
        w = spec.get("grad_w")
        g = np.zeros(src.shape) if w is not None else None
        if src.size:
            for lead in np.ndindex(*src.shape[:d]):
                row = [int(v) for v in ipf[lead]]
                for nseg in range(N):
                    for p in range(row[nseg], row[nseg + 1]):
                        res[lead + (p,)] = src[lead + (nseg,)]
                        if g is not None:
                            g[lead + (nseg,)] += w[lead + (p,)]
        grad = None if g is None else _grad_spec(g, np.abs(g) * 1e-2 + 1e-9, np.ones(g.shape, bool), src.shape,
                                                 tdt)
        return {"items": [("ndb", res, tdt)], "tuple": False, "torch": True, "out": has_out, "grad": grad,
                "req_grad": S.grad and not has_out, "also": also}
    groups = {}
    if src.size:
        for lead in np.ndindex(*src.shape[:d]):
            row = [int(v) for v in ipf[lead]]
            for nseg in range(N):
                for p in range(row[nseg], row[nseg + 1]):
                    for trail in np.ndindex(*src.shape[d + 1:]):
                        groups.setdefault(lead + (nseg,) + trail, []).append(lead + (p,) + trail)
    r = _ts_reduce("csr", red, src, tdt, groups, d, oshape, O, ret_arg, spec, E_, "trunc", S.grad)
    r["also"] = also + r["also"]
    return r


def _ts_reduce(kind, red, src, tdt, groups, d, oshape, O, ret_arg, spec, E_, int_mean, want_grad=False):
    """Values (and arg) of a torch_scatter reduction over ``groups`` {out position: src positions}, with
    out= semantics (scatter/coo reduce INTO out, csr overwrites)."""
    if tdt not in TORCH_VAL:  # an empty src of a dtype the ops refuse: zeros (into out: out) are fine too
        z = np.zeros(oshape, np.float32 if tdt == "bfloat16" else tdt)
        if O is not None and kind in ("scatter", "coo"):
            z = O.arr.copy()
        items = [("ndb", z, tdt)] + ([("ndi_m", np.full(oshape, -1, object), "int64")] if ret_arg else [])
        return {"items": items, "tuple": ret_arg, "torch": True, "out": O is not None, "grad": None,
                "req_grad": False, "also": []}
    res = _Res(oshape, tdt)
    arg = np.full(oshape, E_, np.int64)
    also = []
    vals_f = src.astype(np.float64) if tdt in ("float16", "bfloat16", "float32", "float64") else src
    for key, poss in groups.items():
        vals = [vals_f[p].item() if tdt not in ("int8", "int16", "int32", "int64") else int(src[p]) for p in poss]
        if red in ("min", "max"):
            v, a = _ts_arg(vals, [p[d] for p in poss], red, E_)
            res.set(key, v if v is not None else 0)
            arg[key] = a
        else:
            v, t, c = _ts_value(vals, red, tdt, int_mean)
            res.set(key, v, t, c)
    if red == "prod" and not src.size:
        pass  # documented: scatter_mul on an empty src gives 0
    elif red == "prod":
        for pos in np.ndindex(*oshape):
            if pos not in groups:
                res.set(pos, 1)
    into = O is not None and kind in ("scatter", "coo")
    if into and src.size:
        ov = O.arr.astype(np.float64) if not res.isint else O.arr.astype(object)
        if res.overflows():
            also.append(((OverflowError,), None))
        for pos in np.ndindex(*oshape):
            cur, t, c = res.get(pos), res.t[res.idx(pos)], res.c[res.idx(pos)]
            o = ov[pos] if not res.isint else int(ov[pos])
            cnt = len(groups.get(pos, ()))
            if red == "sum":
                res.set(pos, cur + o, t + _U.get(tdt, 0) * abs(float(cur) + float(o)) * 2, c)
            elif red == "prod":
                res.set(pos, cur * o, t * max(1.0, abs(float(o))) + _U.get(tdt, 0) * abs(float(cur) * float(o)) * 2,
                        c and (res.isint or abs(float(cur) * float(o)) < _FMAX.get(tdt, math.inf) / 2))
            elif red == "mean":
                s = sum((int(src[p]) for p in groups.get(pos, ())), 0) if res.isint else None
                if res.isint:
                    tot = s + o
                    cc = max(cnt, 1)
                    v = tot // cc if int_mean == "floor" else (abs(tot) // cc) * (1 if tot >= 0 else -1)
                    res.set(pos, v)
                else:
                    fs = float(cur) * max(cnt, 1)  # the sum
                    res.set(pos, (fs + o) / max(cnt, 1), t * 2 + 4 * _U[tdt] * (abs(fs) + abs(o)) / max(cnt, 1), c)
            else:
                a = int(arg[pos])
                take = a != E_ and ((cur < o) if red == "min" else (cur > o))
                if isinstance(cur, float) and cur != cur:
                    res.c[res.idx(pos)] = False
                    arg[pos] = -1
                    continue
                if not take:
                    res.set(pos, o)
                    arg[pos] = E_
    elif into:
        for pos in np.ndindex(*oshape):
            res.set(pos, O.arr[pos].item())
    elif O is not None and not src.size:
        pass
    items = [res.spec("raise")]
    if ret_arg:
        a = arg.astype(object)
        items.append(("ndi_m", a, "int64"))
    grad = None
    w = spec.get("grad_w")
    if w is not None and O is None:
        g = np.zeros(src.shape)
        tol = np.zeros(src.shape)
        care = np.ones(src.shape, bool)
        xf = src.astype(np.float64)
        u = _U.get(tdt, 2.0 ** -24) + 2.0 ** -24
        for key, poss in groups.items():
            wv = float(w[key])
            k = len(poss)
            if red == "sum":
                for p in poss:
                    g[p] += wv
            elif red == "mean":
                for p in poss:
                    g[p] += wv / k
                    tol[p] += 4 * u * abs(wv / k)
            elif red in ("min", "max"):
                a = int(arg[key])
                if a < E_:
                    g[key[:d] + (a,) + key[d + 1:]] += wv
            else:
                vals = [float(xf[p]) for p in poss]
                bad = any(not math.isfinite(v) for v in vals)
                lim = _FMAX.get(tdt, 1e300) / 8
                full = 1
                for v in vals:
                    if not bad and v != 0:
                        full *= abs(_exact(v))
                bad = bad or full * 8 > lim
                for j, p in enumerate(poss):
                    o = 1
                    for jj, v in enumerate(vals):
                        if jj != j and not bad:
                            o *= _exact(v)
                    if bad or abs(o) * 8 > lim:
                        care[p] = False
                        continue
                    g[p] += wv * float(o)
                    tol[p] += (k + 4) * u * abs(wv * float(o))
        grad = _grad_spec(g, tol + 1e-9, care, src.shape, tdt)
    return {"items": items, "tuple": ret_arg, "torch": True, "out": O is not None, "grad": grad,
            "req_grad": want_grad and O is None, "also": also, "out_is_ret": True}


def _ts_composite(red, src, tdt, full, d, n, kw, spec):
    """scatter_softmax / _log_softmax / _logsumexp / _std (torch_scatter 2.1.2's formulas), float64."""
    if src.size == 0:  # torch_scatter's own composites fail or not on empty inputs: not judged
        return ANY
    eps = kw.get("eps", 1e-12)
    tolr = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 2e-5, "float64": 1e-10}[tdt]
    xf = src.astype(np.float64)
    groups = _ts_groups(full, d) if src.size else {}
    if red in ("softmax", "log_softmax"):
        res = np.zeros(src.shape)
        for poss in groups.values():
            vals = [float(xf[p]) for p in poss]
            mx = max(vals)
            ex = [math.exp(v - mx) for v in vals]
            s = sum(ex)
            for p, v, e in zip(poss, vals, ex):
                res[p] = e / s if red == "softmax" else (v - mx) - math.log(s + eps)
        care = np.isfinite(xf) if src.size else np.ones(src.shape, bool)
        for poss in groups.values():
            if not all(math.isfinite(float(xf[p])) for p in poss):
                for p in poss:
                    care[p] = False
        tol = tolr * (1 + np.abs(res))
        return {"items": [("ndf", res, tdt, tol, care)], "tuple": False, "torch": True, "out": False,
                "grad": None, "req_grad": False, "also": []}
    oshape = src.shape[:d] + (n,) + src.shape[d + 1:]
    res = np.zeros(oshape)
    care = np.ones(oshape, bool)
    for key, poss in groups.items():
        vals = [float(xf[p]) for p in poss]
        if not all(math.isfinite(v) for v in vals):
            care[key] = False
            continue
        if red == "logsumexp":
            mx = max(vals)
            res[key] = mx + math.log(sum(math.exp(v - mx) for v in vals) + eps)
        else:
            c = max(len(vals), 1)
            mean = sum(vals) / c
            var = sum((v - mean) ** 2 for v in vals)
            div = (max(c - 1, 1) if kw.get("unbiased", True) else c) + 1e-6
            res[key] = math.sqrt(var / div)
    tol = tolr * (1 + np.abs(res)) * (10 if red == "std" else 1)
    return {"items": [("ndf", res, tdt, tol, care)], "tuple": False, "torch": True, "out": False, "grad": None,
            "req_grad": False, "also": []}


# ----------------------------------------------------------------------------- mmvref.dask

_DASK_DT = {"scan": ND_RES_NAMES, "segmented_scan": ND_RES_NAMES, "segmented_sum": ND_RES_NAMES,
            "segment_sum_csr": ND_RES_NAMES, "batched_scan": ["int32", "int64", "float32", "float64"]}


def r_dk(name, spec):
    """Expectation of ``mmvref.dask.<name>``: the single-machine op's semantics (1-D; batched_scan 2-D)."""
    args, kw = spec["args"], spec["kwargs"]
    E = NdErrs()
    X = _Arg(args[0])
    if name == "spmv":
        A = args[0]
        if isinstance(A, dict) and "__csr__" in A:
            A = A["__csr__"]
        XA = _Arg(args[1])
        try:
            if XA.arr is not None and XA.arr.ndim == 1 and XA.arr.shape[0] != int(A[3][1]):
                E.add(ValueError, "x")
        except Exception:
            pass
        rc = kw.get("row_chunks")
        try:
            m = int(A[3][0])
            if rc is not None:
                if isinstance(rc, (int, np.integer)) and not isinstance(rc, bool):
                    if rc < 1:
                        E.add(ValueError, "row_chunks")
                else:
                    a = np.asarray(rc)
                    if a.ndim != 1 or a.dtype.kind not in "iu" or (a < 0).any() or int(a.sum()) != m:
                        E.add((ValueError, TypeError), "row_chunks")
        except Exception:
            pass
        try:
            v = r_spmv(A, XA.arr if XA.arr is not None else XA.raw, kw.get("overflow", "raise"))
        except Expect as e:
            raise Expect(E.opts + e.options) from None
        E.raise_if()
        return {"items": [v if v == ANY else ("ndx", v)], "tuple": False, "torch": False, "out": False,
                "grad": None, "req_grad": False, "also": [], "dask": True}
    if X.torch:
        E.add(TypeError, "x")
    nd = 2 if name == "batched_scan" else 1
    x = X.arr
    if x is None or X.kind in ("other", "none", "scalar"):
        E.add((TypeError, ValueError), "x")
        E.raise_if()
    if x.ndim != nd:
        E.add(ValueError, "x")
    if x.dtype.name not in VAL_NAMES:
        E.add(TypeError, "x")
    overflow = kw.get("overflow", "raise")
    check_overflow(E, overflow)
    if "exclusive" in kw:
        _check_bool(E, kw["exclusive"], "exclusive")
    dtype = kw.get("dtype")
    if x.ndim != nd:
        E.raise_if()
    if name == "compress":
        F = _Arg(args[1], empty=np.uint8)
        f = _v_flags(E, F, x.shape[0], "mask")
        E.raise_if()
        sel = np.array([i for i in range(x.shape[0]) if f[i]], np.int64)
        return {"items": [("ndb", x[sel] if x.size else x[:0], x.dtype.name)], "tuple": False, "torch": False,
                "out": False, "grad": None, "req_grad": False, "also": [], "dask": True}
    allowed = _DASK_DT[name]
    if dtype is None:
        cdt = fin = RES.get(x.dtype.name)
    else:
        try:
            d = np.dtype(dtype).name if isinstance(dtype, (str, type, np.dtype)) else None
        except TypeError:
            d = None
        if d not in allowed or (x.dtype.kind == "f" and np.dtype(d).kind != "f"):
            E.add(TypeError, "dtype")
            cdt = fin = None
        else:
            fin = d
            cdt = ("float32" if d == "float16" else d) if np.dtype(d).kind == "f" else \
                ("int64" if x.dtype == np.int64 or d == "int64" else "int32")
    starts = None
    if name in ("segmented_scan", "segmented_sum"):
        starts = _v_flags(E, _Arg(args[1], empty=np.uint8), x.shape[0], "flags")
    q = None
    if name == "segment_sum_csr":
        IP = args[1]
        if isinstance(IP, dict) and "__d__" in IP:
            IP = IP["__d__"]
        A2 = _Arg(IP)
        if A2.kind == "list" and len(IP) == 0:
            E.add((TypeError, ValueError), "indptr")
        else:
            q = _v_indptr(E, A2, x.shape[0])
    E.raise_if()
    ex = bool(kw.get("exclusive", False))
    if name in ("scan", "segmented_scan"):
        vs = _scan_core(x.reshape(1, -1, 1), starts, ex, cdt, fin, overflow)
        vs = _reshape_spec(vs, x.shape)
    elif name == "batched_scan":
        vs = _scan_core(x.reshape(x.shape[0], x.shape[1], 1), None, ex, cdt, fin, overflow)
        vs = _reshape_spec(vs, x.shape)
    else:
        if name == "segmented_sum":
            cuts = [p for p in range(x.shape[0]) if p == 0 or starts[p]]
            segs = [list(range(cuts[i], cuts[i + 1] if i + 1 < len(cuts) else x.shape[0])) for i in range(len(cuts))]
        else:
            segs = [list(range(q[i], q[i + 1])) for i in range(len(q) - 1)]
        vs, _ = _reduce_core(x.reshape(1, -1, 1), segs, "sum", cdt, fin, overflow)
        vs = _reshape_spec(vs, (len(segs),))
    return {"items": [vs], "tuple": False, "torch": False, "out": False, "grad": None, "req_grad": False,
            "also": [], "dask": True}


def r_nd(case):
    spec = case["args"][0]
    ns, name = spec["fn"].split(".", 1)
    if ns == "mmvref":
        return r_mm(name, spec)
    if ns == "ts":
        return r_ts(name, spec)
    return r_dk(name, spec)


# ----------------------------------------------------------------------------- N-d case generation


def _nd_values(g, shape, dt, mode=None):
    """Values of ``shape``/``dt``: small integers; 'ext' integer extremes; 'nf' NaN/inf; 'tiny' in [-2, 2]
    (products that fit); 'negz' -0.0 among them."""
    dt = np.dtype(dt)
    n = int(np.prod(shape, dtype=np.int64))
    if mode is None:
        r = g.rng.random()
        mode = "ext" if r < 0.2 else "nf" if r < 0.3 else "tiny" if r < 0.5 else "negz" if r < 0.55 else "small"
    if mode == "tiny" and dt.kind in "iuf":
        a = g.rng.integers(-2 if dt.kind != "u" else 0, 3, n).astype(dt)
    else:
        a = g.values(n, dt, extreme=mode == "ext" and dt.kind in "iu", nonfinite=mode == "nf" and dt.kind == "f")
    if mode == "negz" and dt.kind == "f" and n:
        a = a.copy()
        a[g.rng.integers(0, n, max(1, n // 3))] = -0.0
    return a.reshape(shape), mode


def _np_layout(g, a, allow_list=True):
    w = g.choice(["c", "c", "c", "be", "be", "nc", "neg", "ro", "f"] + (["list"] if allow_list else []))
    if w == "f":
        return (np.asfortranarray(a) if a.ndim > 1 else a), "F"
    if w == "list" and a.dtype.kind not in "iufb":
        return a, "c"
    return layout(g, a, w), w


def _container(g, a, kinds=("np", "np", "np", "torch", "torch", "grad", "bf16")):
    """``a`` as a numpy layout, a torch tensor, one that requires grad (float dtypes) or a bfloat16 one."""
    k = g.choice(list(kinds))
    if k == "torch" and a.dtype.name in TORCH_NAMES:
        return TT(a, lay=g.choice(["c", "c", "nc", "t"])), f"torch {a.dtype}"
    if k == "grad" and a.dtype.kind == "f":
        return TT(a, grad=True, lay=g.choice(["c", "c", "nc", "t"])), f"torch {a.dtype} grad"
    if k == "bf16" and a.dtype.kind in "if":
        return TT(a.astype(np.float32), tdt="bfloat16", grad=g.p(0.3)), "torch bfloat16"
    if a.ndim == 2 and g.p(0.08):
        return {"__m__": a}, f"np.matrix {a.dtype}"
    v, lay = _np_layout(g, a)
    return v, f"np {a.dtype} {lay}"


def _gen_src(g, rank, E, grad_only=False):
    """(values array, shape, axis, dtype note): axis has length E, the other dims small."""
    shape = [int(g.choice([1, 2, 3, 4, 1, 2, 0])) if g.p(0.97) else 0 for _ in range(rank)]
    ax = int(g.rng.integers(rank)) if rank else 0
    if rank:
        shape[ax] = E
        for k in range(rank):
            if k != ax and int(np.prod(shape)) > 1500:
                shape[k] = 1
    if grad_only:
        dt = np.dtype(g.choice(["float16", "float32", "float64", "float32", "float64"]))
    else:
        dt = g.choice(ODD_ND) if g.p(0.08) else g.choice(VAL_DT)
    a, mode = _nd_values(g, tuple(shape), dt)
    return a, tuple(shape), ax, f"{np.dtype(dt)}/{mode}"


def _gen_axis(g, kw, ax, rank, default):
    """axis= / dim= spellings: positive, negative, dim= alias, both (equal or not), out of range, bad type."""
    r = g.rng.random()
    if default is None and r < 0.15:
        return "flat"
    if r < 0.4:
        if ax != default or g.p(0.5):
            kw["axis"] = ax
    elif r < 0.6:
        kw["axis"] = ax - rank
    elif r < 0.78:
        kw["dim"] = ax if g.p(0.5) else ax - rank
    elif r < 0.84:
        kw["axis"] = ax
        kw["dim"] = ax - rank if g.p(0.5) else ax
    elif r < 0.87:  # both, disagreeing (an axis equal to the default only now and then: it cannot be told apart)
        kw["axis"] = ax if ax != default or g.p(0.1) else ax - rank
        kw["dim"] = (ax + 1) % max(rank, 1) if rank > 1 else ax + 1
    elif r < 0.91:
        kw[g.choice(["axis", "dim"])] = g.choice([rank, -rank - 1, 7, 2 ** 63 - 1])
    elif r < 0.93:
        kw[g.choice(["axis", "dim"])] = g.choice([1.0, "0", True, None, np.int64(ax)])
    else:
        kw["axis"] = np.int32(ax)
    return ""


def _gen_indptr(g, E, N):
    if N == 0:
        return np.zeros(1, np.int64)
    cuts = np.sort(g.rng.integers(0, E + 1, N - 1))
    return np.concatenate([[0], cuts, [E]]).astype(np.int64)


def _bad_ptr(g, ip, E):
    """A malformed (or merely unusual but valid) indptr, with a note."""
    r = g.rng.random()
    ip = ip.copy()
    m = ip.size - 1
    if r < 0.1 and m >= 2:
        i = int(g.rng.integers(1, m))
        ip[i], ip[i + 1] = ip[i + 1] + 2, max(ip[i] - 2, 0)
        return ip, "ptr unsorted"
    if r < 0.2 and m >= 1:
        ip[int(g.rng.integers(0, m + 1))] = g.choice([-1, -7, E + 3])
        return ip, "ptr negative/out of range"
    if r < 0.32:
        k = int(g.rng.integers(0, ip.size))
        ip[k] = g.choice([2 ** 63 - 1, -2 ** 63 + 1, -2 ** 63, 2 ** 62])
        return ip, "ptr near int64 limits"
    if r < 0.38:
        return np.array([0, 2 ** 64 - 1] + [E] * (ip.size - 1), np.uint64) if g.p(0.5) else \
            ip.astype(np.uint64), "ptr uint64"
    if r < 0.48:
        return ip.astype(g.choice([np.float64, np.float32, np.bool_])), "ptr float/bool"
    if r < 0.56:
        return (ip[:-1] if ip.size > 1 else np.concatenate([ip, ip])), "ptr wrong length"
    if r < 0.62:
        return np.stack([ip, ip]), "ptr 2-d"
    if r < 0.68:
        return [], "ptr empty list"
    if r < 0.76:
        return ip.astype(g.choice([np.int32, np.int16, np.uint32, np.int8])) if ip.max(initial=0) < 120 else ip, \
            "ptr narrow dtype"
    if r < 0.86:
        return ip.astype(">i8"), "ptr big-endian"
    if r < 0.93:
        return ip.tolist(), "ptr list"
    return TT(ip), "ptr torch"


def _gen_index(g, E, n, sorted_):
    if n == 0:
        return np.zeros(E, np.int64) - (1 if E else 0)
    idx = g.rng.integers(0, n, E).astype(np.int64)
    return np.sort(idx) if sorted_ else idx


def _bad_index(g, idx, n, sorted_):
    r = g.rng.random()
    idx = idx.copy()
    E = idx.size
    if r < 0.1 and E >= 2 and sorted_:
        idx[0], idx[-1] = idx[-1] + 1, 0
        return idx, "index unsorted"
    if r < 0.2 and E:
        idx[int(g.rng.integers(E))] = g.choice([-1, -5, n, n + 4])
        return idx, "index negative/out of range"
    if r < 0.32 and E:
        idx[int(g.rng.integers(E))] = g.choice([2 ** 63 - 1, -2 ** 63 + 1, -2 ** 63])
        return idx, "index near int64 limits"
    if r < 0.37 and E:
        a = idx.astype(np.uint64)
        a[-1] = 2 ** 64 - 1
        return a, "index uint64 huge"
    if r < 0.47:
        return idx.astype(g.choice([np.float64, np.float32, np.bool_])), "index float/bool"
    if r < 0.55:
        return (idx[:-1] if E else np.zeros(2, np.int64)), "index wrong length"
    if r < 0.60:
        return np.stack([idx, idx]), "index 2-d"
    if r < 0.67:
        return [], "index empty list"
    if r < 0.75:
        return idx.astype(g.choice([np.int32, np.uint8, np.int16, np.uint64])), "index narrow dtype"
    if r < 0.85:
        return idx.astype(">i8"), "index big-endian"
    if r < 0.92:
        return idx.tolist(), "index list"
    return TT(idx), "index torch"


def _gen_flags(g, E):
    f = (g.rng.random(E) < g.choice([0.0, 0.2, 0.5, 1.0])).astype(g.choice([np.bool_, np.int8, np.uint8]))
    r = g.rng.random()
    if r < 0.06 and E:
        f = f.astype(np.uint8)
        f[int(g.rng.integers(E))] = g.choice([2, 255])
        return f, "flag value"
    if r < 0.1 and E:
        f = f.astype(np.int8)
        f[int(g.rng.integers(E))] = -1
        return f, "flag -1"
    if r < 0.16:
        return f.astype(g.choice([np.int16, np.int32, np.float32, np.int64])), "flag dtype"
    if r < 0.22:
        return (f[:-1] if E else np.zeros(1, np.uint8)), "flag length"
    if r < 0.25:
        return np.stack([f, f]), "flag 2-d"
    if r < 0.3:
        return f.astype(int).tolist(), "flag list"
    if r < 0.33:
        return [], "flag empty list"
    if r < 0.42:
        return TT(f), "flag torch"
    return f, ""


def _gen_dtype(g, src_is_torch=False, kind="i"):
    r = g.rng.random()
    if r < 0.55:
        return None
    if r < 0.8 and kind == "f":
        return g.choice([np.float16, np.float32, np.float64, "float16", "float64", np.dtype("float32")])
    if r < 0.91:
        return g.choice([np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64, "int8", "int16",
                         "float16", "float64", np.dtype("int32"), np.dtype("float32")])
    if r < 0.96 and src_is_torch:
        import torch
        return g.choice([torch.float64, torch.float32, torch.int64, torch.float16])
    return g.choice(["int33", "foo", np.uint8, np.complex64, "bool", 3, "float128", object, np.bool_, np.uint64])


def _gen_out(g, shape, dt, torch_src):
    """An out= argument for a result of ``shape``/``dt`` (names): every layout and byte order, a torch
    tensor, and wrong ones (dtype, shape, a list)."""
    if dt is None:
        dt = "float64"
    base_dt = "float32" if dt == "bfloat16" else dt
    a = np.full(shape, 77, dtype=base_dt) if base_dt != "bool" else np.ones(shape, bool)
    kinds = ["c", "f", "nc", "neg", "be", "be", "be_f", "be_nc", "ro", "torch", "torch_nc", "torch_t", "list",
             "dtype", "shape"]
    if torch_src:
        kinds += ["torch", "torch", "torch_nc"]
    k = g.choice(kinds)
    if dt == "bfloat16" and not k.startswith("torch"):
        k = "torch"
    be = np.dtype(base_dt).newbyteorder(">")
    if k == "c":
        return a, k
    if k == "f":
        return np.asfortranarray(a), k
    if k in ("nc", "neg", "ro", "list"):
        return layout(g, a, k), k
    if k == "be":
        return a.astype(be), k
    if k == "be_f":
        return np.asfortranarray(a).astype(be, order="K"), k
    if k == "be_nc":
        return layout(g, a.astype(be), "nc"), k
    if k.startswith("torch"):
        if base_dt not in TORCH_NAMES:
            return a, "c"
        return TT(a, tdt="bfloat16" if dt == "bfloat16" else None,
                  lay={"torch": "c", "torch_nc": "nc", "torch_t": "t"}[k]), k
    if k == "dtype":
        other = {"float64": "float32", "float32": "float64", "int32": "int64", "int64": "int32"}.get(base_dt, "int64")
        return np.full(shape, 77, other), k
    sh = tuple(shape) + (1,) if g.p(0.5) or not shape else tuple(shape[:-1]) + (shape[-1] + 1,)
    return np.full(sh, 77, base_dt), k


def _res_dt_guess(xdt, dtype, torch_bf16=False):
    if torch_bf16 and dtype is None:
        return "bfloat16"
    try:
        if dtype is None:
            return RES.get(xdt)
        if _is_tdtype(dtype):
            return _tname(dtype)
        return np.dtype(dtype).name
    except Exception:
        return None


def f_nd(g, ops=None, grad_only=False):
    """One case of mmvref's N-d ops."""
    name = g.choice(ops or ["segment_csr", "segment_coo", "scatter", "segmented_sum", "segment_sum_csr",
                            "gather_csr", "scan", "segmented_scan"])
    rank = int(g.choice([1, 1, 2, 2, 2, 3, 3, 4]) if g.p(0.95) else 0)
    big = not grad_only and g.p(0.01) and name in ("segment_csr", "segmented_sum", "segment_sum_csr", "scatter", "segment_coo")
    E = int(g.choice([0, 1, 2, 3, 5, 8, 17, 33, 64])) if not big else int(g.rng.integers(33000, 40000))
    if big:
        rank = 1
    a, shape, ax, note = _gen_src(g, rank, E, grad_only)
    if big:
        a, _ = _nd_values(g, shape, g.choice([np.int32, np.int64, np.int8, np.float32]), "tiny")
        note = f"big {a.dtype}"
    if grad_only:
        if g.p(0.2):
            src = TT(a.astype(np.float32), tdt="bfloat16", grad=True, lay=g.choice(["c", "nc"]))
            cnote = "torch bfloat16 grad"
        else:
            src, cnote = TT(a, grad=True, lay=g.choice(["c", "c", "nc", "t"])), f"torch {a.dtype} grad"
    elif big:
        src, cnote = a, "np"
    else:
        src, cnote = _container(g, a)
    kw = {}
    is_t = isinstance(src, dict) and "__t__" in src
    flat = _gen_axis(g, kw, ax, rank, None if name == "scan" else 0) == "flat"
    args = [src]
    notes = [name, note, cnote]
    N = None
    if name in ("segment_csr", "segment_sum_csr", "gather_csr"):
        N = int(g.choice([0, 1, 2, 3, 5, 8])) if name != "gather_csr" else E
        if name == "gather_csr":
            ip = _gen_indptr(g, int(g.choice([0, 1, 3, 7, 12])) if E else int(g.choice([0, 0, 3])), E)
            if E == 0:
                ip = np.zeros(1, np.int64)
        else:
            ip = _gen_indptr(g, E, N) if E or N else np.zeros(1, np.int64)
            if E == 0 and N:
                ip = np.zeros(N + 1, np.int64)
        if g.p(0.3):
            ip, inote = _bad_ptr(g, ip, E)
            notes.append(inote)
        args.append(ip)
    elif name in ("segment_coo", "scatter"):
        n = int(g.choice([1, 2, 3, 5, 8]))
        idx = _gen_index(g, E, n, name == "segment_coo")
        if g.p(0.3):
            idx, inote = _bad_index(g, idx, n, name == "segment_coo")
            notes.append(inote)
        args.append(idx)
        if g.p(0.35):
            kw["dim_size"] = g.choice([n, n, n + 2, max(n - 2, 0), 0, -1, 2.5, "3", True, np.int64(n),
                                       2 ** 63 - 1])
    elif name in ("segmented_scan", "segmented_sum"):
        f, fnote = _gen_flags(g, E)
        args.append(f)
        if fnote:
            notes.append(fnote)
    if name in ("segment_csr", "segment_coo", "scatter", "segmented_sum"):
        r = g.rng.random()
        kw_red = g.choice(["sum", "add", "mean", "min", "max", "prod", "mul"]) if r < 0.97 else \
            g.choice(["avg", None, 3, "SUM", ["sum"]])
        if kw_red != "sum" or g.p(0.3):
            kw["reduce"] = kw_red
        if g.p(0.3):
            kw["return_arg"] = True if kw_red in ("min", "max") or g.p(0.2) else False
        elif g.p(0.03):
            kw["return_arg"] = g.choice([1, "yes", None])
    if name in ("scan", "segmented_scan") and g.p(0.5):
        kw["exclusive"] = bool(g.p(0.5)) if g.p(0.93) else g.choice([1, "yes", None])
    if name != "gather_csr":
        dt = _gen_dtype(g, is_t, a.dtype.kind)
        if dt is not None:
            kw["dtype"] = dt
        if g.p(0.35):
            kw["overflow"] = g.choice(["raise", "wrap", "wrap"]) if g.p(0.9) else g.choice(["Raise", None, 1])
    # out=: a guess of the result's shape and dtype (the reference decides what is right)
    if g.p(0.3) and not big:
        if flat:
            rshape = (a.size,)
        else:
            rshape = list(shape)
            if rank:
                if name in ("segment_csr", "segment_sum_csr"):
                    rshape[ax] = N
                elif name in ("segment_coo", "scatter"):
                    rshape[ax] = kw.get("dim_size") if isinstance(kw.get("dim_size"), int) and \
                        not isinstance(kw.get("dim_size"), bool) and 0 <= kw["dim_size"] < 50 else n
                elif name == "segmented_sum":
                    fl = np.asarray(args[1]["__t__"] if isinstance(args[1], dict) else args[1]).reshape(-1)
                    rshape[ax] = (1 + int(np.count_nonzero(fl[1:]))) if E and fl.size else 0
                elif name == "gather_csr":
                    last = np.asarray(args[1]).reshape(-1) if not isinstance(args[1], dict) else args[1]["__t__"]
                    rshape[ax] = int(last[-1]) if len(last) and 0 <= int(last[-1]) < 100 else 0
            rshape = tuple(rshape)
        xdt = a.dtype.name
        rd = xdt if name == "gather_csr" else _res_dt_guess(xdt, kw.get("dtype"),
                                                             is_t and src["tdt"] == "bfloat16")
        if rd == "bfloat16" or (is_t and src["tdt"] == "bfloat16" and name == "gather_csr"):
            rd = "bfloat16"
        out, onote = _gen_out(g, rshape, rd if rd in TORCH_NAMES or rd in ND_RES_NAMES else "float64",
                              is_t)
        kw["out"] = out
        notes.append(f"out {onote}")
    spec = {"fn": f"mmvref.{name}", "args": args, "kwargs": kw}
    if is_t and src["grad"] and kw.get("out") is None:
        spec["grad_w"] = "auto"
    return _nd_case(g, spec, "nd", " ".join(notes))


def _nd_case(g, spec, fam, note):
    """The case, with the weights of the gradient check (the result's shape, from the reference)."""
    case = dict(target="fz.call", args=[spec], kwargs={}, ref=("nd", fam, spec["fn"]), note=note)
    if spec.get("grad_w") == "auto":
        spec["grad_w"] = None
        try:
            exp = r_nd(case)
            it = exp["items"][0]
            if exp["req_grad"] and it != ANY and it[0] != "ndx":
                spec["grad_w"] = g.rng.integers(-3, 4, it[1].shape).astype(np.float64)
        except Expect:
            pass
        except Exception:
            pass
    return case


def f_nd_reduce(g):
    return f_nd(g, ["segment_csr", "segment_coo", "scatter", "segmented_sum", "segment_sum_csr"])


def f_nd_gather(g):
    return f_nd(g, ["gather_csr"])


def f_nd_scan(g):
    return f_nd(g, ["scan", "segmented_scan"])


def f_nd_grad(g):
    return f_nd(g, None, grad_only=True)


# ----------------------------------------------------------------------------- torch_scatter cases

_TS_ALL = None


def _ts_names():
    global _TS_ALL
    if _TS_ALL is None:
        import mmvref.torch_scatter as ts
        _TS_ALL = [n for n in ts.__all__ if n in _TS_KIND] + [n for n in _TS_COMPOSITES if hasattr(ts, n)]
    return _TS_ALL


def f_ts(g):
    name = g.choice(_ts_names())
    kind, red = _TS_KIND[name]
    rank = int(g.choice([1, 1, 2, 2, 3]) if g.p(0.97) else g.choice([0, 4]))
    r = g.rng.random()
    if kind == "comp":
        tdt = g.choice(["float32", "float64", "float16", "bfloat16"]) if r < 0.95 else "int64"
    else:
        tdt = g.choice(list(TORCH_VAL)) if r < 0.94 else g.choice(["uint8", "bool", "complex64"])
    shape = [int(g.choice([1, 2, 3, 4, 5, 0])) if g.p(0.96) else 0 for _ in range(rank)]
    if rank and g.p(0.3):
        shape[int(g.rng.integers(rank))] = int(g.choice([8, 17]))
    npdt = "float32" if tdt == "bfloat16" else tdt
    mode = "small" if kind == "comp" else None
    a, mode = _nd_values(g, tuple(shape), npdt, mode)
    grad = tdt in ("float16", "float32", "float64", "bfloat16") and g.p(0.3) and kind != "comp"
    src = TT(a, tdt="bfloat16" if tdt == "bfloat16" else None, grad=grad, lay=g.choice(["c", "c", "nc", "t"]))
    notes = [name, f"{tdt}/{mode}{' grad' if grad else ''}", str(tuple(shape))]
    kw = {}
    if kind in ("scatter", "comp"):
        d = int(g.rng.integers(rank)) if rank else 0
        dd = g.choice([d, d - rank]) if rank else 0
        if dd != -1 or g.p(0.5):
            kw["dim"] = dd
        if g.p(0.03):
            kw["dim"] = g.choice([rank, -rank - 1])
        E = shape[d] if rank else 1
        n = int(g.choice([1, 2, 3, 5]))
        idx1 = g.rng.integers(0, n, E).astype(np.int64)
        s = g.rng.random()
        if s < 0.65 or rank == 0:
            idx = idx1
        elif s < 0.8:
            idx = np.broadcast_to(idx1.reshape([1] * d + [E] + [1] * (rank - d - 1)), shape).copy()
            if g.p(0.5) and idx.size:
                idx = g.rng.integers(0, n, shape).astype(np.int64)
                notes.append("index varies")
        elif s < 0.92:
            idx = g.rng.integers(0, n, shape[:d + 1]).astype(np.int64)
            notes.append("index partial rank")
        else:
            idx = g.rng.integers(0, n, [max(E - 1, 0) + 2]).astype(np.int64)
            notes.append("index mismatched")
        if g.p(0.12) and idx.size:
            idx = idx.copy()
            idx.reshape(-1)[int(g.rng.integers(idx.size))] = g.choice([-1, n + 3, 2 ** 63 - 1])
            notes.append("index out of range")
        index = TT(idx.astype(g.choice([np.int64, np.int32, np.int32, np.float32])) if g.p(0.15) else idx)
        if g.p(0.03):
            index = idx
            notes.append("index numpy")
        args = [src, index]
        if g.p(0.2):
            kw["dim_size"] = g.choice([n, n + 2, max(n - 1, 0), -1])
        if kind == "comp":
            if name == "scatter_std" and g.p(0.4):
                kw["unbiased"] = bool(g.p(0.5))
            if name in ("scatter_log_softmax", "scatter_logsumexp") and g.p(0.3):
                kw["eps"] = g.choice([1e-12, 1e-6, 0.0])
        oshape = list(shape)
        if rank:
            oshape[d] = kw.get("dim_size") if isinstance(kw.get("dim_size"), int) and kw.get("dim_size", -1) >= 0 \
                else (int(idx.max()) + 1 if idx.size and 0 <= int(idx.max()) < 50 else n)
    elif kind in ("coo", "gcoo"):
        m = int(g.rng.integers(1, rank + 1)) if rank else 1
        d = m - 1
        E = shape[d] if rank else 1
        lead = [s if g.p(0.6) else 1 for s in shape[:d]]
        if kind == "coo":
            n = int(g.choice([1, 2, 3, 5]))
            idx = np.sort(g.rng.integers(0, n, lead + [E]), axis=-1).astype(np.int64)
            if g.p(0.1) and idx.size > 1:
                idx = idx.copy()
                idx.reshape(-1)[0] = idx.max() + 1
                notes.append("index unsorted")
        else:
            n = shape[d] if rank else 1
            e_out = int(g.choice([0, 1, 3, 6]))
            idx = g.rng.integers(0, max(n, 1), lead + [e_out]).astype(np.int64)
            if n == 0 and idx.size:
                idx = idx * 0
        if g.p(0.1) and idx.size:
            idx = idx.copy()
            idx.reshape(-1)[-1] = g.choice([-1, n + 2, 2 ** 63 - 1])
            notes.append("index out of range")
        if g.p(0.05):
            idx = idx.astype(np.float32)
            notes.append("index float")
        args = [src, TT(idx)]
        if kind == "coo" and g.p(0.2):
            kw["dim_size"] = g.choice([n, n + 2, max(n - 1, 0)])
        oshape = list(shape)
        if rank:
            if kind == "coo":
                oshape[d] = kw.get("dim_size", int(idx.max()) + 1 if idx.size and 0 <= idx.max() < 50 else n)
            else:
                oshape[d] = idx.shape[-1]
    else:  # csr / gcsr
        m = int(g.rng.integers(1, rank + 1)) if rank else 1
        d = m - 1
        E = shape[d] if rank else 1
        lead = [s if g.p(0.5) else 1 for s in shape[:d]]
        if kind == "csr":
            N = int(g.choice([0, 1, 2, 3, 5]))
            lo = int(g.rng.integers(0, E + 1)) if g.p(0.2) else 0
            hi = int(g.rng.integers(lo, E + 1)) if g.p(0.2) else E
            row = np.concatenate([[lo], np.sort(g.rng.integers(lo, hi + 1, max(N - 1, 0))), [hi]])[:N + 1] if N \
                else np.array([lo])
            if N and row.size < N + 1:
                row = np.concatenate([row, [hi]])
        else:
            N = E
            row = np.concatenate([[0], np.cumsum(g.rng.integers(0, 3, N))]) if g.p(0.85) else \
                np.concatenate([[int(g.choice([1, 2]))], 2 + np.cumsum(g.rng.integers(0, 3, N))])
        ipt = np.broadcast_to(row.astype(np.int64), lead + [row.size]).copy()
        if g.p(0.12) and ipt.size:
            ipt.reshape(-1)[int(g.rng.integers(ipt.size))] = g.choice([-1, E + 3, 2 ** 63 - 1, -2 ** 63 + 1])
            notes.append("indptr bad value")
        if g.p(0.05):
            ipt = ipt.astype(np.float32)
            notes.append("indptr float")
        if g.p(0.03):
            ipt = np.zeros(lead + [0], np.int64)
            notes.append("indptr empty")
        args = [src, TT(ipt)]
        oshape = list(shape)
        if rank:
            oshape[d] = max(ipt.shape[-1] - 1, 0) if kind == "csr" else \
                (int(ipt.reshape(-1)[-1]) if ipt.size and 0 <= ipt.reshape(-1)[-1] < 100 else 0)
    if kind in ("scatter", "csr", "coo") and red is None:
        rr = g.choice(["sum", "add", "mean", "min", "max", "mul"]) if g.p(0.95) else g.choice(["prod", "avg", None])
        if rr != "sum" or g.p(0.3):
            kw["reduce"] = rr
    if kind != "comp" and g.p(0.2) and rank:
        o, onote = _gen_out(g, tuple(int(v) for v in oshape), tdt, True)
        if g.p(0.5) and isinstance(o, dict):
            o["__t__"] = _nd_values(g, o["__t__"].shape, o["__t__"].dtype, "tiny")[0]
        kw["out"] = o
        notes.append(f"out {onote}")
    spec = {"fn": f"ts.{name}", "args": args, "kwargs": kw}
    if grad and kw.get("out") is None:
        spec["grad_w"] = "auto"
    return _nd_case(g, spec, "ts", " ".join(notes))


# ----------------------------------------------------------------------------- dask cases


def _chunks(g, n):
    """A random chunking of n (empty chunks included now and then)."""
    k = int(g.choice([1, 1, 2, 3, 4]))
    cuts = np.sort(g.rng.integers(0, n + 1, k - 1))
    sizes = np.diff(np.concatenate([[0], cuts, [n]])).astype(int).tolist()
    if g.p(0.1):
        sizes.insert(int(g.rng.integers(len(sizes) + 1)), 0)
    return tuple(int(s) for s in sizes)


def f_dask(g):
    name = g.choice(["scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "compress", "spmv",
                     "batched_scan"])
    notes = [name]
    kw = {}
    if name == "spmv":
        m, ncol = int(g.choice([0, 1, 3, 7])), int(g.choice([0, 1, 4, 9]))
        dt, ext = _value_dt(g)
        ip, ind, data, cnote = _csr_mut(g, m, ncol, dt)
        if ext and isinstance(data, np.ndarray) and np.dtype(dt).kind == "i":
            data = g.values(len(data), dt, extreme=True)
        xdt = dt if g.p(0.6) else g.choice(VAL_DT)
        nx = ncol if g.p(0.9) else ncol + g.choice([-1, 1])
        x = g.values(max(nx, 0), xdt, extreme=ext and np.dtype(xdt).kind == "i")
        xs = DD(x, (_chunks(g, x.size),)) if g.p(0.7) else x
        if g.p(0.3):
            kw["row_chunks"] = g.choice([1, 2, 5, 0, -1, (m,), (m + 1,), 2.5])
        if g.p(0.3):
            kw["overflow"] = g.choice(["raise", "wrap", "wrap", "Raise"])
        spec = {"fn": "dask.spmv", "args": [(ip, ind, data, (m, ncol)), xs], "kwargs": kw, "dask": True}
        return _nd_case(g, spec, "dask", f"spmv {dt} {cnote} x:{xdt}/{nx}")
    if name == "batched_scan":
        r, c = int(g.choice([0, 1, 2, 3])), int(g.choice([0, 1, 3, 8, 17]))
        shape = (r, c)
    else:
        shape = (int(g.choice([0, 1, 2, 3, 5, 8, 17, 33, 64])),)
    dt = g.choice(ODD_ND[:6]) if g.p(0.06) else g.choice(VAL_DT)
    a, mode = _nd_values(g, shape, dt, "ext" if g.p(0.35) and np.dtype(dt).kind == "i" else None)
    notes.append(f"{np.dtype(dt)}/{mode}")
    r = g.rng.random()
    if r < 0.75:
        chunks = tuple(_chunks(g, s) for s in shape)
        x = DD(layout(g, a, "be") if g.p(0.15) else a, chunks)
        notes.append(f"chunks {chunks}")
    elif r < 0.85:
        x = a
    elif r < 0.9:
        x = a.tolist()
    elif r < 0.95:
        x = TT(a) if a.dtype.name in TORCH_NAMES else a
        notes.append("torch")
    else:
        x = DD(a.reshape(1, -1) if a.ndim == 1 else a.reshape(-1), ((1,), (a.size,)) if a.ndim == 1 else
               ((a.size,),))
        notes.append("wrong rank")
    args = [x]
    n = a.shape[0]
    if name in ("segmented_scan", "segmented_sum", "compress"):
        f, fnote = _gen_flags(g, n)
        if isinstance(f, dict):
            f = f["__t__"]
        if isinstance(f, np.ndarray) and f.ndim == 1 and g.p(0.5):
            f = DD(f, (_chunks(g, f.size),))
        args.append(f)
        notes.append(fnote)
    if name == "segment_sum_csr":
        ip = _gen_indptr(g, n, int(g.choice([0, 1, 2, 5]))) if n else np.zeros(1, np.int64)
        if g.p(0.3):
            ip, inote = _bad_ptr(g, ip, n)
            notes.append(inote)
            if isinstance(ip, dict):
                ip = ip["__t__"]
        if isinstance(ip, np.ndarray) and ip.ndim == 1 and ip.dtype.kind in "iu" and g.p(0.2):
            ip = DD(ip, (_chunks(g, ip.size),))
        args.append(ip)
    if name != "compress":
        if name in ("scan", "segmented_scan", "batched_scan") and g.p(0.4):
            kw["exclusive"] = bool(g.p(0.5))
        if g.p(0.4):
            kw["dtype"] = g.choice([np.int16, np.int8, np.int32, np.int64, np.float16, np.float32, np.float64,
                                    "int16", "float64", "int33"])
        if g.p(0.4):
            kw["overflow"] = g.choice(["raise", "wrap", "wrap", "Raise"])
    spec = {"fn": f"dask.{name}", "args": args, "kwargs": kw, "dask": True}
    return _nd_case(g, spec, "dask", " ".join(str(v) for v in notes if v))


ND_FAMILIES = [("nd_reduce", f_nd_reduce), ("nd_reduce2", f_nd_reduce), ("nd_gather", f_nd_gather),
               ("nd_scan", f_nd_scan), ("nd_grad", f_nd_grad), ("ts", f_ts), ("ts2", f_ts), ("dask", f_dask)]
#: --families names that stand for several families
FAMILY_GROUPS = {"nd": ["nd_reduce", "nd_reduce2", "nd_gather", "nd_scan", "nd_grad"], "torch_scatter": ["ts", "ts2"],
                 "ts": ["ts", "ts2"], "nd_reduce": ["nd_reduce", "nd_reduce2"],
                 "new": ["nd_reduce", "nd_reduce2", "nd_gather", "nd_scan", "nd_grad", "ts", "ts2", "dask"],
                 "legacy": [f for f, _ in FAMILIES]}
FAMILIES = FAMILIES + ND_FAMILIES


# ----------------------------------------------------------------------------- N-d harness (runs in the worker)


def _fz_tensor(v, grads):
    import torch
    a = v["__t__"]
    t = torch.from_numpy(np.array(a, dtype=a.dtype.newbyteorder("="), order="C", copy=True))
    if v["tdt"]:
        t = t.to(getattr(torch, v["tdt"]))
    if v["lay"] == "nc" and t.dim() >= 1:
        big = torch.zeros(list(t.shape[:-1]) + [2 * t.shape[-1]], dtype=t.dtype)
        big[..., ::2] = t
        t = big[..., ::2]
    elif v["lay"] == "t" and t.dim() >= 2:
        t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
    if v["grad"]:
        t = t.detach().requires_grad_(True)
        grads.append(t)
    return t


def _fz_build(v, grads):
    if isinstance(v, dict):
        if "__t__" in v:
            return _fz_tensor(v, grads)
        if "__d__" in v:
            import dask.array as da
            return da.from_array(v["__d__"], chunks=v["chunks"])
        if "__m__" in v:
            return np.matrix(v["__m__"])
        return {k: _fz_build(a, grads) for k, a in v.items()}
    if isinstance(v, list):
        return [_fz_build(a, grads) for a in v]
    if isinstance(v, tuple):
        return tuple(_fz_build(a, grads) for a in v)
    return v


def _fz_plain(v):
    """A result as plain data: ("t", torch dtype, values, requires_grad), ("n", dtype, values),
    ("tuple", [...]) or ("o", type name, repr)."""
    if isinstance(v, (tuple, list)):
        return ("tuple", [_fz_plain(a) for a in v])
    if is_torch(v) and hasattr(v, "detach"):
        import torch
        t = v.detach()
        dt = _tname(t.dtype)
        if t.dtype == torch.bfloat16:
            t = t.float()
        return ("t", dt, t.cpu().resolve_conj().numpy().copy(), bool(v.requires_grad))
    if isinstance(v, np.ndarray):
        return ("n", v.dtype.name, np.array(_natv(v), copy=True))
    return ("o", type(v).__name__, repr(v)[:200])


def _fz_fn(name):
    ns, n = name.split(".", 1)
    if ns == "mmvref":
        import mmvref
        return getattr(mmvref, n)
    if ns == "ts":
        import mmvref.torch_scatter as ts
        return getattr(ts, n)
    import mmvref.dask as mdask
    return getattr(mdask, n)


def _fz_call(spec):
    """Run one N-d case: the call, the out= argument after it, requires_grad and the gradient."""
    grads = []
    fn = _fz_fn(spec["fn"])
    args = [_fz_build(a, grads) for a in spec["args"]]
    kwargs = {k: _fz_build(v, grads) for k, v in spec["kwargs"].items()}
    if spec.get("dask"):
        import dask
        with dask.config.set(scheduler="synchronous"):
            r = fn(*args, **kwargs)
            decl = None
            if hasattr(r, "dask") and hasattr(r, "compute"):
                decl = (str(r.dtype), tuple(float(s) for s in r.shape))
                r = r.compute()
        return {"ret": _fz_plain(r), "decl": decl}
    out_obj = kwargs.get("out")
    r = fn(*args, **kwargs)
    res = {"ret": _fz_plain(r)}
    if out_obj is not None:
        first = r[0] if isinstance(r, tuple) and r else r
        res["ret_is_out"] = first is out_obj
        if isinstance(out_obj, np.ndarray) or is_torch(out_obj):
            res["out"] = _fz_plain(out_obj)
    w = spec.get("grad_w")
    if grads:
        v = r[0] if isinstance(r, tuple) else r
        res["req_grad"] = bool(getattr(v, "requires_grad", False))
        if w is not None and res["req_grad"]:
            import torch
            try:
                loss = (v.to(torch.float64) * torch.from_numpy(np.asarray(w, np.float64))).sum()
                loss.backward()
                gsrc = grads[0].grad
                res["grad"] = None if gsrc is None else _fz_plain(gsrc)
            except Exception as e:  # noqa: BLE001
                res["grad_err"] = f"{type(e).__name__}: {str(e)[:300]}"
    return res


# ----------------------------------------------------------------------------- N-d classification

_BAD_CLS = ("TypingError", "SystemError", "KeyError", "AttributeError", "ZeroDivisionError", "UnboundLocalError",
            "NameError", "AssertionError", "NumbaError", "LoweringError", "UnicodeDecodeError")
_RAW = ("negative dimensions", "cannot reshape", "index out of bounds", "too many indices", "could not be broadcast",
        "expanded size", "out of range in self", "array is too big", "Maximum allowed dimension",
        "not supported between instances", "object cannot be interpreted", "unhashable type",
        "Python int too large", "Cannot cast", "No implementation of function", "a Tensor with",
        "only integer tensors", "has no attribute", "given numpy array has byte order")


def _cmp_item(vs, item):
    """(ok, why) of one returned item against its spec."""
    if vs == ANY:
        return True, ""
    if item[0] == "o":
        return False, f"returned a {item[1]}: {item[2][:80]}"
    if item[0] == "tuple":
        return False, "returned a tuple where an array was expected"
    got_dt, got = item[1], item[2]
    if vs[0] == "ndx":  # a spec of the legacy references
        return _match_value(vs[1], got)
    if got.dtype.kind == "c" and vs[0] != "ndb":
        return False, f"returned complex values of dtype {got_dt}"
    want, dt = vs[1], vs[2]
    if tuple(got.shape) != tuple(want.shape):
        return False, f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    if got_dt != dt:
        return False, f"dtype {got_dt} != {dt}"
    if vs[0] in ("ndi", "ndi_m"):
        g = got.astype(object)
        ok_ = (g == want) | ((want == -1) if vs[0] == "ndi_m" else False)
        ok = bool(np.all(ok_)) if want.size else True
        if not ok:
            bad = np.argwhere(~np.asarray(ok_, bool))[0]
            return False, f"values differ at {tuple(int(i) for i in bad)}: {g[tuple(bad)]} vs {want[tuple(bad)]}"
        return True, ""
    if vs[0] == "ndb":
        if got.dtype.kind == "f" and want.dtype.kind == "f":
            gb = np.ascontiguousarray(got.astype(want.dtype) if dt == "bfloat16" else got)
            wb = np.ascontiguousarray(want)
            ok = gb.shape == wb.shape and np.array_equal(gb.view(f"u{gb.itemsize}"), wb.view(f"u{wb.itemsize}"))
            if dt == "bfloat16":
                ok = np.array_equal(got.astype(np.float64), want.astype(np.float64), equal_nan=True)
        else:
            ok = np.array_equal(got.astype(object), want.astype(object))
        if not ok:
            return False, f"values differ: {got.ravel()[:8]} vs {want.ravel()[:8]}"
        return True, ""
    tol, care = vs[3], vs[4]
    g = got.astype(np.float64)
    with np.errstate(invalid="ignore"):
        nanw = np.isnan(want)
        bad = care & ((nanw & ~np.isnan(g)) | (~nanw & np.isinf(want) & (g != want))
                      | (~nanw & np.isfinite(want) & ~(np.abs(g - want) <= tol)))
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        return False, f"values differ at {i}: {g[i]!r} vs {want[i]!r} (tol {tol[i]:.3g})"
    return True, ""


def _check_nd(spec, got):
    ret = got.get("ret")
    items = spec["items"]
    if spec.get("tuple"):
        if ret[0] != "tuple" or len(ret[1]) != len(items):
            return "wrong", f"expected a tuple of {len(items)}, got {ret[0]}"
        parts = ret[1]
    else:
        if ret[0] == "tuple":
            return "wrong", f"expected an array, got a tuple of {len(ret[1])}"
        parts = [ret]
    if spec.get("out") and "out" in got and got.get("ret_is_out", True):
        ok, why = _cmp_item(items[0], got["out"])
        if not ok:
            return "wrong", f"out= not written with the result: {why}"
    for k, (vs, it) in enumerate(zip(items, parts)):
        ok, why = _cmp_item(vs, it)
        if not ok:
            return "wrong", (f"item {k}: " if len(items) > 1 else "") + why
    if spec.get("dask"):
        decl = got.get("decl")
        if decl is None:
            return "wrong", "did not return a dask array"
        if parts[0][0] in ("n", "t") and items[0] != ANY:
            if decl[0] != parts[0][1]:
                return "wrong", f"declared dtype {decl[0]} but computes {parts[0][1]}"
            if tuple(decl[1]) != tuple(float(s) for s in parts[0][2].shape):
                return "wrong", f"declared shape {decl[1]} but computes {parts[0][2].shape}"
        return "ok", ""
    if spec.get("out"):
        if not got.get("ret_is_out"):
            return "wrong", "out= given but the returned object is not out"
        if "out" in got:
            ok, why = _cmp_item(items[0], got["out"])
            if not ok:
                return "wrong", f"out= not written with the result: {why}"
    else:
        want_t = "t" if spec.get("torch") else "n"
        for it in parts:
            if it[0] in ("t", "n") and it[0] != want_t:
                return "wrong", f"returned {'a torch tensor' if it[0] == 't' else 'a numpy array'} for " \
                                f"{'torch' if want_t == 't' else 'numpy'} input"
    if spec.get("req_grad"):
        if not got.get("req_grad"):
            return "wrong", "the result does not require grad (silently detached)"
        if got.get("grad_err"):
            return "unclear", f"backward raised {got['grad_err'][:200]}"
        if spec.get("grad") is not None:
            gi = got.get("grad")
            if gi is None:
                return "wrong", "backward left src.grad None"
            ok, why = _cmp_item(spec["grad"], gi)
            if not ok:
                return "wrong", f"gradient: {why}"
    return "ok", ""


def _exc_ok(opts, cls, mro, msg):
    for types, name in opts:
        names = [t.__name__ for t in types]
        if not any(t in mro for t in names):
            continue
        if cls in _BAD_CLS and cls not in names:
            continue
        if cls == "IndexError" and "IndexError" not in names:
            continue
        if name is None:
            return True
        if _names(msg, name) and not any(r in msg for r in _RAW):
            return True
    return False


def classify_nd(case, outcome):
    tag = outcome[0]
    if tag in ("crash", "hang"):
        return tag, outcome[1]
    try:
        spec = r_nd(case)
        expect = None
    except Expect as e:
        spec, expect = None, e.options
    if tag == "ret":
        got = outcome[1]
        if expect is not None:
            r = got.get("ret") if isinstance(got, dict) else None
            shown = f" (got {r[0]} {r[1]} {np.asarray(r[2]).ravel()[:6]})" if r and r[0] in ("n", "t") else ""
            return "wrong", f"returned a value for an input the reference rejects with {_fmt(expect)}{shown}"
        if spec == ANY:
            return "ok", ""
        return _check_nd(spec, got)
    _, cls, mro, msg, _tb = outcome
    if expect is None:
        if spec != ANY and _exc_ok(spec.get("also", []), cls, mro, msg):
            return "ok", ""
        if spec == ANY and cls in ("ValueError", "TypeError", "OverflowError", "RuntimeError"):
            return "ok", ""  # a case the reference does not judge: a clear error is as good as a value
        return ("wrong" if cls == "OverflowError" else "unclear"), f"{cls}: {msg[:200]} (expected a value)"
    if _exc_ok(expect, cls, mro, msg):
        return "ok", ""
    return "unclear", f"{cls}: {msg[:200]} (expected {_fmt(expect)})"


# ----------------------------------------------------------------------------- reproductions


def _code_arr(a):
    a = np.asarray(a)
    nat = _natv(a)
    vals = nat.tolist() if nat.size <= 256 else None
    dt = nat.dtype.name
    if vals is None:
        base = f"np.zeros({tuple(nat.shape)}, {dt!r})  # {nat.size} values, e.g. {nat.ravel()[:6].tolist()}"
    else:
        base = f"np.array({vals!r}, dtype={dt!r})"
        if nat.size == 0 and nat.ndim > 1:
            base = f"np.zeros({tuple(nat.shape)}, {dt!r})"
    if a.dtype.byteorder == ">":
        base = f"{base}.astype({a.dtype.str!r})"
    if a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous:
        base = f"np.asfortranarray({base})"
    elif a.ndim and a.size > 1 and not a.flags.c_contiguous and all(s >= 0 for s in a.strides):
        base = f"np.repeat({base}, 2, axis=-1)[..., ::2]"
    elif a.ndim and any(s < 0 for s in a.strides):
        base = f"{base}[..., ::-1].copy()[..., ::-1]"
    if not a.flags.writeable:
        base = f"ro({base})"
    return base


def _code(v):
    if isinstance(v, dict) and "__t__" in v:
        a = v["__t__"]
        dt = v["tdt"] or a.dtype.name
        s = f"torch.tensor({a.tolist()!r}, dtype=torch.{dt})" if a.size <= 256 else \
            f"torch.zeros({list(a.shape)}, dtype=torch.{dt})"
        if a.size == 0 and a.ndim > 1:
            s = f"torch.zeros({list(a.shape)}, dtype=torch.{dt})"
        if v["lay"] == "nc" and a.ndim:
            s = f"{s}.repeat_interleave(2, -1)[..., ::2]"
        elif v["lay"] == "t" and a.ndim >= 2:
            s = f"{s}.mT.contiguous().mT"
        if v["grad"]:
            s = f"{s}.requires_grad_()"
        return s
    if isinstance(v, dict) and "__d__" in v:
        return f"da.from_array({_code_arr(v['__d__'])}, chunks={v['chunks']!r})"
    if isinstance(v, dict) and "__m__" in v:
        return f"np.matrix({_code_arr(v['__m__'])})"
    if isinstance(v, np.ndarray):
        return _code_arr(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_code(a) for a in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return repr(v) if len(v) <= 64 else f"list(range({len(v)}))  # {len(v)} values"
    if _is_tdtype(v):
        return str(v)
    if isinstance(v, type):
        return f"np.{v.__name__}" if v.__module__ == "numpy" else v.__name__
    if isinstance(v, np.dtype):
        return f"np.dtype({v.name!r})"
    if isinstance(v, np.generic):
        return f"np.{type(v).__name__}({v.item()!r})"
    return repr(v)


def repro_nd(case):
    """A few lines of Python that make the call of an N-d case."""
    spec = case["args"][0]
    ns, name = spec["fn"].split(".", 1)
    mod = {"mmvref": "mmvref", "ts": "mmvref.torch_scatter", "dask": "mmvref.dask"}[ns]
    lines = []
    args = [_code(a) for a in spec["args"]]
    kws = [f"{k}={_code(v)}" for k, v in spec["kwargs"].items()]
    call = f"{mod}.{name}({', '.join(args + kws)})"
    if ns == "dask":
        lines.append("with dask.config.set(scheduler='synchronous'): print(" + call + ".compute())")
    else:
        lines.append(f"r = {call}")
        if spec.get("grad_w") is not None:
            lines.append(f"(r[0] if isinstance(r, tuple) else r).double().mul(torch.tensor("
                         f"{np.asarray(spec['grad_w']).tolist()!r}, dtype=torch.float64)).sum().backward()")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- worker

_TORCH_NP = None


def _init_torch_map():
    global _TORCH_NP
    import torch
    _TORCH_NP = {torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64}


def _resolve(target, cache):
    if target in cache:
        return cache[target]
    ns, name = target.split(".", 1)
    if ns == "mmvref":
        import mmvref
        fn = getattr(mmvref, name)
    elif ns == "golden":
        import mmvref.golden as golden
        fn = getattr(golden, name)
    elif ns == "emu":
        import npu
        fn = getattr(npu.TorchEmulationBackend(), name)
    elif ns == "mmvb":
        import npu
        fn = getattr(npu.MmvrefBackend(), name)
    elif ns == "tcu":
        from npu.testing import CpuTcuscanBackend
        fn = getattr(CpuTcuscanBackend(), name)
    elif ns == "torch":
        import torch

        import npu.torch_ops  # noqa: F401
        fn = getattr(torch.ops.mmv, name)
    elif ns == "fz":  # the N-d harness of this module (families nd_*, ts, dask)
        fn = globals()["_fz_" + name]
    else:
        raise AssertionError(target)
    cache[target] = fn
    return fn


def _plain(r):
    """A result as numpy (tuples kept; CSR results as dense arrays)."""
    if type(r).__module__.split(".")[0] == "torch":
        return r.detach().cpu().numpy()
    if isinstance(r, dict):  # the N-d harness' report
        return r
    if hasattr(r, "toarray"):
        return r.toarray()
    if isinstance(r, tuple) and len(r) == 4 and isinstance(r[3], tuple):  # (indptr, indices, data, shape)
        import scipy.sparse as sps
        return sps.csr_matrix((np.asarray(r[2]), np.asarray(r[1]), np.asarray(r[0])), shape=r[3]).toarray()
    if isinstance(r, (tuple, list)):
        return tuple(_plain(v) for v in r)
    return np.asarray(r)


class _Packed:
    """An ndarray with its layout spelled out: pickling would hand the worker a
    contiguous, writeable, native-byte-order copy (numpy's pickle drops all three)."""

    def __init__(self, a):
        self.values = np.array(a, dtype=a.dtype.newbyteorder("="), order="C", copy=True)
        self.big = a.dtype.byteorder == ">"
        self.strided = a.ndim > 0 and a.size > 1 and not a.flags.c_contiguous and all(s >= 0 for s in a.strides)
        self.reversed = a.ndim > 0 and any(s < 0 for s in a.strides)
        self.readonly = not a.flags.writeable
        self.forder = a.ndim > 1 and a.flags.f_contiguous and not a.flags.c_contiguous

    def unpack(self):
        a = self.values
        if getattr(self, "forder", False):
            a = np.asfortranarray(a)
        if self.big:
            a = a.astype(a.dtype.newbyteorder(">"), order="K")
        if self.strided:
            b = np.empty(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
            b[..., ::2] = a
            a = b[..., ::2]
        if self.reversed:
            a = a[..., ::-1].copy()[..., ::-1]
        if self.readonly:
            a.flags.writeable = False
        return a


def _pack(v):
    if isinstance(v, np.ndarray) and v.dtype.kind != "O":
        return _Packed(v)
    if isinstance(v, tuple):
        return tuple(_pack(a) for a in v)
    if isinstance(v, list):
        return [_pack(a) for a in v]
    if isinstance(v, dict):
        return {k: _pack(a) for k, a in v.items()}
    return v


def _unpack(v):
    if isinstance(v, _Packed):
        return v.unpack()
    if isinstance(v, tuple):
        return tuple(_unpack(a) for a in v)
    if isinstance(v, list):
        return [_unpack(a) for a in v]
    if isinstance(v, dict):
        return {k: _unpack(a) for k, a in v.items()}
    return v


def _worker(conn):
    os.environ.setdefault("NUMBA_NUM_THREADS", "2")
    cache = {}
    conn.send(("ready",))
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        if case is None:
            return
        try:
            fn = _resolve(case["target"], cache)
            r = fn(*_unpack(case["args"]), **_unpack(case["kwargs"]))
            msg = ("ret", _plain(r))
        except BaseException as e:  # noqa: BLE001 - classifying every exception is the point
            msg = ("exc", type(e).__name__, [c.__name__ for c in type(e).__mro__], str(e)[:600],
                   "".join(traceback.format_exception_only(type(e), e))[-300:])
        try:
            conn.send(msg)
        except Exception as e:  # unpicklable result
            conn.send(("exc", "PickleError", ["PickleError"], repr(e), ""))


class Worker:
    def __init__(self, ctx, env_path):
        self.ctx = ctx
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        if not self.parent.poll(300):
            raise RuntimeError("worker did not start")
        self.parent.recv()

    def run(self, case, timeout):
        try:
            self.parent.send({"target": case["target"], "args": _pack(case["args"]), "kwargs": _pack(case["kwargs"])})
        except Exception as e:
            return ("crash", repr(e))
        deadline = time.time() + timeout
        while True:
            if self.parent.poll(0.05):
                try:
                    return self.parent.recv()
                except (EOFError, ConnectionResetError):
                    self.proc.join(1)
                    return ("crash", f"worker died (exit code {self.proc.exitcode})")
            if not self.proc.is_alive():
                return ("crash", f"worker died (exit code {self.proc.exitcode})")
            if time.time() > deadline:
                self.proc.kill()
                self.proc.join(5)
                return ("hang", f"no answer in {timeout} s")

    def close(self):
        try:
            self.parent.send(None)
        except Exception:
            pass
        self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()


# ----------------------------------------------------------------------------- classification


def _names(msg, name):
    if name is None:
        return True
    def flat(v):
        return [w for u in v for w in flat(u)] if isinstance(v, tuple) else [v]
    return any(n in msg for n in flat(name))


def _match_value(spec, got):
    if spec == ANY:
        return True, ""
    kind = spec[0]
    if kind == "tuple":
        if not isinstance(got, tuple) or len(got) != len(spec[1]):
            return False, f"expected a tuple of {len(spec[1])}, got {type(got).__name__}"
        for s, v in zip(spec[1], got):
            ok, why = _match_value(s, v)
            if not ok:
                return ok, why
        return True, ""
    want, dt = spec[1], spec[2]
    if isinstance(got, tuple):
        return False, "expected an array, got a tuple"
    got = np.asarray(got)
    if got.shape != want.shape:
        return False, f"shape {got.shape} != {want.shape}"
    if got.dtype.name != dt:
        return False, f"dtype {got.dtype} != {dt}"
    if kind == "bits":
        if want.dtype.kind == "f":
            ok = np.array_equal(got.view(f"u{got.itemsize}"), np.ascontiguousarray(want).view(f"u{want.itemsize}"))
        else:
            ok = np.array_equal(got.astype(object), want.astype(object))
        return ok, "" if ok else f"values differ: {got.ravel()[:8]} vs {want.ravel()[:8]}"
    if kind == "exact":
        ok = np.array_equal(got.astype(object), want.astype(object))
        return ok, "" if ok else f"values differ: {got.ravel()[:8]} vs {want.ravel()[:8]}"
    w = want.astype(np.float64)
    tol = {"float32": 1e-5, "float64": 1e-12}.get(dt, 1e-3)
    ok = np.allclose(got.astype(np.float64), w, rtol=tol, atol=tol * (1 + np.abs(w).max(initial=0)), equal_nan=True)
    return ok, "" if ok else f"values differ: {got.ravel()[:8]} vs {w.ravel()[:8]}"


def classify(case, outcome):
    """(class, detail)."""
    if case["ref"][0] == "nd":
        return classify_nd(case, outcome)
    tag = outcome[0]
    if tag in ("crash", "hang"):
        return tag, outcome[1]
    try:
        spec = reference(case)
        expect = None
    except Expect as e:
        spec, expect = None, e.options
    tcu = case["target"].startswith("tcu.")
    if tag == "ret":
        got = outcome[1]
        if expect is not None:
            return "wrong", f"returned a value for an input the reference rejects with {_fmt(expect)}"
        if tcu:  # the kernels' own dtype rules and float32 accumulation: values only
            if spec == ANY:
                return "ok", ""
            if spec[0] == "tuple":  # topk/sort: the kernels' tie order is their own (topk_ties)
                spec, got = spec[1][0], got[0]
            spec = _loosen(spec)
        ok, why = _match_value(spec, got)
        return ("ok", "") if ok else ("wrong", why)
    _, cls, mro, msg, _tb = outcome
    if expect is None:
        if tcu and (("TypeError" in mro and "mishandles" in msg) or cls == "NotImplementedError"):
            return "ok", ""  # the stand-in kernels' documented refusals
        if spec == ANY and ("ValueError" in mro or "OverflowError" in mro or "TypeError" in mro):
            return "ok", ""  # NaN/inf: a clear error is as good as a value
        return "unclear" if cls not in ("OverflowError",) else "wrong", f"{cls}: {msg[:200]} (expected a value)"
    torch_op = case["target"].startswith("torch.")
    for types, name in expect:
        # torch's dispatcher checks the schema itself (a RuntimeError naming the argument)
        if (any(t.__name__ in mro for t in types) or (torch_op and cls == "RuntimeError")) and _names(msg, name):
            if cls in ("TypingError", "SystemError", "IndexError", "KeyError", "AttributeError", "ZeroDivisionError"):
                continue
            return "ok", ""
    if tcu and (("TypeError" in mro and "mishandles" in msg) or cls == "NotImplementedError"):
        return "ok", ""  # the stand-in kernels' documented refusals
    return "unclear", f"{cls}: {msg[:200]} (expected {_fmt(expect)})"


def _loosen(spec):
    if spec == ANY:
        return spec
    if spec[0] == "tuple":
        return ("tuple", [_loosen(s) for s in spec[1]])
    return ("loose", spec[1], None)


def _fmt(opts):
    return " or ".join(f"{'/'.join(t.__name__ for t in ts)}({n})" for ts, n in opts)


_orig_match = _match_value


def _match_value(spec, got):  # noqa: F811 - 'loose' specs ignore the dtype
    if spec != ANY and spec[0] == "loose":
        got = np.asarray(got)
        if got.shape != spec[1].shape:
            return False, f"shape {got.shape} != {spec[1].shape}"
        w = spec[1].astype(np.float64)
        ok = np.allclose(got.astype(np.float64), w, rtol=1e-2, atol=1e-2 * (1 + np.abs(w).max(initial=0)),
                         equal_nan=True)
        return ok, "" if ok else f"values differ: {got.ravel()[:8]} vs {w.ravel()[:8]}"
    return _orig_match(spec, got)


# ----------------------------------------------------------------------------- driver


def _describe(v, depth=0):
    if isinstance(v, np.ndarray):
        d = {"ndarray": v.dtype.str, "shape": list(v.shape), "strides": list(v.strides),
             "writeable": bool(v.flags.writeable)}
        if v.size <= 40 and v.dtype.kind in "iufb":
            d["values"] = v.tolist()
        return d
    if is_torch(v):
        return {"tensor": str(v.dtype), "shape": list(v.shape),
                "values": v.tolist() if v.numel() <= 40 else None}
    if isinstance(v, (tuple, list)) and depth < 2:
        return [_describe(a, depth + 1) for a in v][:50]
    if isinstance(v, (int, float, str, bool, type(None))):
        return v
    return repr(v)[:200]


def _fam_label(case):
    f = case.get("family", "?")
    return {"seg2": "seg", "nd_reduce2": "nd_reduce", "ts2": "ts"}.get(f, f)


def _dedup_key(f):
    import re
    d = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", f["detail"])
    d = re.sub(r"\[[^\]]*\]|\([^)]*\)", "(.)", d)[:90]
    return (f["class"], f["target"], d)


def _dedup(fails):
    """Failures grouped by (class, function, detail with numbers and bracketed values masked),
    each group's smallest case first."""
    groups = {}
    for f in fails:
        groups.setdefault(_dedup_key(f), []).append(f)
    out = []
    for k, fl in groups.items():
        fl.sort(key=lambda f: len(f.get("repro") or str(f["args"])))
        out.append((k, fl))
    out.sort(key=lambda kv: (kv[0][0], kv[0][1], -len(kv[1])))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="fuzz_failures.json")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=45.0, help="seconds per case (JIT compiles included)")
    ap.add_argument("--families", "--family", nargs="*", dest="families",
                    help="only these case families (" + ", ".join(f for f, _ in FAMILIES) + "; groups: "
                    + ", ".join(FAMILY_GROUPS) + ")")
    a = ap.parse_args(argv)
    if a.cases < 1:
        ap.error("--cases must be >= 1")
    fams = None
    if a.families:
        fams = []
        for f in a.families:
            for name in f.split(","):
                if name in FAMILY_GROUPS:
                    fams.extend(FAMILY_GROUPS[name])
                elif any(name == k for k, _ in FAMILIES):
                    fams.append(name)
                elif name:
                    ap.error(f"unknown family {name!r}; known: " + ", ".join(f for f, _ in FAMILIES)
                             + "; groups: " + ", ".join(FAMILY_GROUPS))
    _init_torch_map()
    rng = np.random.default_rng(a.seed)
    g = Gen(rng)
    cases = [gen_case(g, fams) for _ in range(a.cases)]
    ctx = mp.get_context("spawn")
    counts = {k: 0 for k in ("ok", "crash", "hang", "wrong", "unclear")}
    per_fam = {}
    fails = []
    t0 = time.time()
    import threading
    lock = threading.Lock()
    nxt = [0]

    def loop():
        w = Worker(ctx, None)
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(cases):
                break
            case = cases[i]
            out = w.run(case, a.timeout)
            if out[0] in ("crash", "hang"):
                w = Worker(ctx, None)
            if out[0] == "hang":  # once more in a fresh worker: the first try may have been JIT compiling
                out = w.run(case, a.timeout)
                if out[0] in ("crash", "hang"):
                    w = Worker(ctx, None)
            try:
                cls, why = classify(case, out)
            except Exception as e:  # a bug in the reference: report it, keep going
                cls, why = "unclear", f"harness: {e!r}"
            with lock:
                counts[cls] += 1
                fam = _fam_label(case)
                per_fam.setdefault(fam, {k: 0 for k in counts})[cls] += 1
                if cls != "ok":
                    nd = case["ref"][0] == "nd"
                    fails.append({"case": i, "class": cls, "family": fam,
                                  "target": case["args"][0]["fn"] if nd else case["target"], "note": case["note"],
                                  "args": _describe(case["args"]), "kwargs": _describe(case["kwargs"]),
                                  "detail": why, "repro": repro_nd(case) if nd else None})
                done = sum(counts.values())
                if done % 500 == 0:
                    print(f"  {done}/{len(cases)} cases, {time.time() - t0:.0f} s: {counts}", flush=True)
        w.close()

    threads = [threading.Thread(target=loop) for _ in range(max(1, a.workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    fails.sort(key=lambda f: f["case"])
    print(f"cases {a.cases} (seed {a.seed}, {time.time() - t0:.0f} s): " +
          ", ".join(f"{k} {v}" for k, v in counts.items()))
    by = {}
    for f in fails:
        by.setdefault((f["class"], f["target"]), 0)
        by[(f["class"], f["target"])] += 1
    for (c, t), v in sorted(by.items()):
        print(f"  {c:8s} {t:32s} {v}")
    print("per family:")
    print(f"  {'family':12s} " + " ".join(f"{k:>7s}" for k in counts))
    for fam, c in sorted(per_fam.items()):
        print(f"  {fam:12s} " + " ".join(f"{c[k]:7d}" for k in counts))
    groups = _dedup(fails)
    if groups:
        print(f"distinct failures ({len(groups)}):")
        for _key, fl in groups:
            f = fl[0]
            print(f"  [{f['class']}] {f['target']} x{len(fl)}: {f['detail'][:160]}")
            print(f"      case {f['case']}: {f['note']}")
            if f.get("repro"):
                print("      " + f["repro"].replace("\n", "\n      "))
    with open(a.out, "w") as fh:
        json.dump({"seed": a.seed, "cases": a.cases, "counts": counts, "per_family": per_fam,
                   "distinct": [{"count": len(fl), **fl[0]} for _, fl in groups], "failures": fails}, fh,
                  indent=1, default=str)
    print(f"failing cases written to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
