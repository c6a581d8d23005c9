"""Comparators: does a backend's result conform?

Integers (and every op that only moves values: compress(_ind), split, sorts, top-k,
gather_csr): the golden result, exact, dtype and shape included; moved floats
compare bit for bit.

Floats of the ops that add values up (``exact.SUMMING_OPS``, and the N-d
reductions segment_csr, segment_coo, scatter by "sum" or "mean"): dtype and shape
are the golden result's, the values are compared with the EXACT value of each
output (``conformance.exact``: double-double sums of the inputs converted to
the result dtype; its own error, at most (k_i + 2) 2^-104 A_i, is added to
every tolerance below). The golden model, which follows the papers'
speculative prefix differences in the result dtype, is never the judge of a
float value: it can be the less accurate side.

Policy ``"derived"`` (the default) holds a backend to the error model it
declares (``backend.error_model(op)``, one of ``ERROR_MODELS``; "prefix" when
it declares none):

  "sequential"  each output is a sum of its own terms only (its segment's or
                row's values or products), in any order, with at most CARRIES
                extra roundings (chunk carries, trees):
                |actual_i - exact_i| <= gamma_{k_i + CARRIES} A_i + (k_i + CARRIES) tiny,
                A_i = sum of |own terms|, gamma_k = k u / (1 - k u) (Higham Thm 4.3).
                mmvref's fast ops declare it.
  "prefix"      the golden model's algorithms and any implementation of them
                (differences of speculative prefix sums): the bound below, whose
                magnitude is the global prefix.
  "prefix_input_products"
                "prefix" for an SpMV / SpMM that stores each product a_k x_col(k)
                in the INPUT dtype before summing (the tcuscan kernels): fp16
                products are rounded to fp16 (relative error <= 2^-11; absolute
                <= 2^-25 in fp16's subnormal range), so each output may also be off by
                sum over its own products of (2^-11 |p_k| + 2^-25), and the prefix
                magnitude grows by (1 + 2^-11). Other input dtypes: "prefix". A
                product beyond fp16's range is not covered (the backend refuses it).

The "prefix" bound: every output is computed with at most ``depth``
roundings over a set of terms; for any summation order the error of a sum of
k terms is at most (k-1) u sum|terms| (Higham, Thm 4.3), so

    |actual_i - exact_i| <= c * depth * u * A_i + depth * tiny,   c = 2 (a factor 2 of margin)

with u the unit roundoff of the result dtype (fp16 inputs are exact in fp32
words, so fp32's u), ``tiny`` the smallest normal (underflow), depth = n + 2s
(the longest chain of additions of any of the golden algorithms with tile s,
and of any sequential or tiled backend), and A_i the magnitude the op's
stages actually combine for output i, which is where ops differ:

  scan, batched_scan     A_i = sum_{j<=i} |x_j| (the prefix; exclusive: j < i)
  segmented_scan         A_i = sum_{j<=i} |x_j| (the global prefix): the golden
                         App. Alg. 1 speculates across segments at every level
                         (REVSPEC subtracts tile-local prefixes; the recursion
                         over tile tails speculates across s^2-, s^3-... blocks),
                         so one huge value early on swamps later segments (found
                         by this suite: x[0] = 5e33 leaves 0.0 where -58.3 is exact)
  segmented_sum          A_k = sum_{j <= end_k} |x_j|: SCD (Alg. 2) takes
  segment_sum_csr        differences of GLOBAL prefix sums, so a segment's error
                         scales with everything before it, not with the segment
  spmv                   A_r = sum_{k <= end_r} |a_k x_col(k)| (App. Alg. 4: one
                         global scan of the products, then differences)
  spmm                   as spmv per column, plus every earlier column's total
                         (the golden model scans the k columns end to end)
  spgemm                 compared as dense matrices; A = the sum of all |products|
                         (coarse: the ESC golden sums runs by prefix differences)

A bound built on the row's own magnitude would flag a correct prefix-difference
kernel (float32 on a 1M-row matrix gives rows off by 48x relative); a loose
generic rtol would pass a wrong one. Named alternatives (``policy=``), applied
against the exact reference (e = exact_i) with thresholds by the OUTPUT dtype:

  "double_thousandths"  Ascend's rule: |a - e| <= 1e-3 + 1e-3 |e| for all but
                        at most 0.1% of the elements
  "mere_mare"           CANN: mean relative error <= T and max relative error
                        <= 10 T, T = 2^-10 (fp16 output), 2^-13 (fp32), 2^-20 (fp64)
  "torch_testing"       torch.testing.assert_close's defaults for the result
                        dtype (fp32: rtol 1.3e-6, atol 1e-5; fp64: 1e-7, 1e-7)

These are fixed thresholds. On arbitrary data they judge the summation
algorithm's rounding, not the backend: a correct float32 scan of [1, 1.06e37,
-1.06e37] returns 0 where 1 is exact, a float32 sum of 2,000 values of magnitude
100 is off by more than torch_testing's atol, and a correct prefix-difference
kernel loses a short segment after a long one. So a named policy has a domain:
under it the runner draws the float sums' values from ``strategies.
exactly_summable`` (integers of b bits times a power of two, b so small that
every partial sum, global prefixes included, and every product is exact in the
result and input dtypes). There every correct algorithm returns the exact value
and the policy's threshold measures what the backend loses beyond (rounded
results, dropped terms, lost carries). The derived policy is the one that holds
for every input, and the default.
"""
from __future__ import annotations

import numpy as np

__all__ = ["POLICIES", "TOLERANCES", "ERROR_MODELS", "CARRIES", "MOVES_VALUES", "check", "float_bound",
           "model_bound", "dense_csr"]

POLICIES = ("derived", "double_thousandths", "mere_mare", "torch_testing")
#: extra roundings a "sequential" implementation may add to an output's own k_i terms
#: (carries between up to this many chunks, a final tree)
CARRIES = 1024
#: error models a backend may declare (``backend.error_model(op)``); see the module docstring
ERROR_MODELS = {
    "sequential": f"|a - exact| <= gamma_(k_i + {CARRIES}) sum|own terms| + (k_i + {CARRIES}) tiny "
                  "(each output from its own terms, any order; Higham Thm 4.3)",
    "prefix": "|a - exact| <= 2 (n + 2s) u A_i + (n + 2s) tiny, A_i the global prefix magnitude "
              "(speculative prefix differences, as the golden model)",
    "prefix_input_products": "prefix, plus sum over own products of (2^-11 |p_k| + 2^-25) when spmv / spmm "
                             "inputs are fp16 (products stored in fp16 before the sum)",
}
#: unit roundoff and half the smallest subnormal of fp16: one rounding of a product to fp16
_F16_U, _F16_HALF_SUB = 2.0**-11, 2.0**-25

_DOMAIN = ("; float sums on exactly summable inputs (b-bit integers times 2^e, every partial sum and product "
           "exact in the result dtype: conformance.strategies.exactly_summable)")
#: policy -> the float tolerance it applies, and its source (reports print these; integers and
#: value-moving ops are exact under every policy)
TOLERANCES = {
    "derived": "against the exact value (double-double; its own error (k+2) 2^-104 A_i added), the bound of "
               "the backend's declared error model: sequential: gamma_(k_i + 1024) sum|own terms|; prefix "
               "(default): 2 (n + 2s) u A_i, A_i the global prefix magnitude (Higham Thm 4.3; "
               "conformance/compare.py)",
    "double_thousandths": "|a - exact| <= 1e-3 + 1e-3 |exact| for all but 0.1% of the outputs (Ascend's rule)"
                          + _DOMAIN,
    "mere_mare": "relative to the exact value: mean <= T, max <= 10 T; T = 2^-10 fp16, 2^-13 fp32, 2^-20 fp64 "
                 "outputs (CANN)" + _DOMAIN,
    "torch_testing": "|a - exact| <= atol + rtol |exact|: fp32 1e-5 + 1.3e-6 |e|, fp64 1e-7 + 1e-7 |e| "
                     "(torch.testing.assert_close defaults for the output dtype)" + _DOMAIN,
}
MOVES_VALUES = ("compress", "compress_ind", "split", "split_ind", "radix_sort", "argsort", "topk", "gather_csr")


def dense_csr(c):
    """A CSR result (scipy, or (indptr, indices, data, shape)) as a dense array of its dtype: how an
    spgemm result is compared (both backends' forms)."""
    if hasattr(c, "toarray"):
        return c.toarray()
    indptr, indices, data, (m, n) = c
    out = np.zeros((m, n), np.asarray(data).dtype)
    for r in range(m):
        out[r, indices[indptr[r]:indptr[r + 1]]] += data[indptr[r]:indptr[r + 1]]
    return out


def _abs_prefix(v):
    return np.cumsum(np.abs(np.asarray(v, dtype=np.float64)))


def _starts(f, n):
    f = np.asarray(f).astype(bool).copy()
    if n:
        f[0] = True
    return f


def _csr(a):
    from mmvref._validate import as_csr_matrix

    return as_csr_matrix(a)


def _magnitudes(op, args, kwargs, s, n_out):
    """A_i of the derived bound (see the module docstring), one per output."""
    if op in ("scan", "batched_scan"):
        x = np.atleast_2d(np.asarray(args[0], dtype=np.float64))
        p = np.cumsum(np.abs(x), axis=1)
        if kwargs.get("exclusive"):
            p = np.concatenate([np.zeros((p.shape[0], 1)), p], axis=1)[:, : x.shape[1]]
        return p.reshape(-1), x.shape[1]
    if op == "segmented_scan":  # the global prefix: see the module docstring
        return _abs_prefix(args[0]), len(args[0])
    if op == "segmented_sum":
        x, f = np.asarray(args[0], dtype=np.float64), args[1]
        n = len(x)
        st = _starts(f, n)
        ends = np.append(np.flatnonzero(st)[1:] - 1, n - 1) if n else np.zeros(0, np.int64)
        return _abs_prefix(x)[ends] if n else np.zeros(0), n
    if op == "segment_sum_csr":
        x, ptr = np.asarray(args[0], dtype=np.float64), np.asarray(args[1], dtype=np.int64)
        p = np.concatenate([[0.0], _abs_prefix(x)])
        return p[ptr[1:]], len(x)
    if op == "spmm":  # the k columns end to end, one global prefix: column j also carries columns < j
        (ptr, ind, data, shape), D = args
        t = np.abs(np.asarray(data, np.float64)[:, None] * np.asarray(D, np.float64)[np.asarray(ind, np.int64)])
        col_tot = t.sum(axis=0)
        before = np.concatenate([[0.0], np.cumsum(col_tot)[:-1]])
        p = np.concatenate([np.zeros((1, t.shape[1])), np.cumsum(t, axis=0)])
        return (p[np.asarray(ptr, np.int64)[1:]] + before[None, :]).reshape(-1), len(data) * max(t.shape[1], 1)
    if op == "spgemm":  # a coarse bound: every entry within the sum of all |products|
        (ap, ai, ad, _), (bp, bi, bd, _) = (_csr(a) for a in args)
        total = sum(float(np.abs(ad[q]) * np.abs(bd[bp[ai[q]]:bp[ai[q] + 1]]).sum()) for q in range(len(ad)))
        return np.full(n_out, total), max(len(ad) * 8, 1)
    if op == "spmv":
        (ptr, ind, data, shape), xv = args
        t = np.abs(np.asarray(data, np.float64) * np.asarray(xv, np.float64)[np.asarray(ind, np.int64)])
        p = np.concatenate([[0.0], np.cumsum(t)])
        return p[np.asarray(ptr, np.int64)[1:]], len(data)
    x = np.asarray(args[0], dtype=np.float64)
    return np.full(n_out, np.abs(x).sum()), x.size


def float_bound(op, args, kwargs, s, expected):
    """The derived per-output bound of ``op`` (see the module docstring)."""
    a, depth = _magnitudes(op, args, kwargs, s, expected.size)
    fi = np.finfo(expected.dtype)
    u = float(fi.eps) / 2
    d = depth + 2 * s
    return 2 * d * u * a + d * float(fi.tiny)


def model_bound(model, op, args, kwargs, s, expected, ref):
    """Per-output bound of the error model ``model`` against the exact reference ``ref``
    (``exact.Reference``), the reference's own error included."""
    fi = np.finfo(expected.dtype)
    u, tiny = float(fi.eps) / 2, float(fi.tiny)
    if model == "sequential":
        k = ref.terms + CARRIES
        gamma = np.where(k * u < 0.5, k * u / (1 - k * u), np.inf)
        return gamma * ref.mag + k * tiny + ref.error()
    if model not in ("prefix", "prefix_input_products"):
        raise ValueError(f"error model must be one of {sorted(ERROR_MODELS)}, got {model!r}")
    bound = float_bound(op, args, kwargs, s, expected).reshape(-1)
    if model == "prefix_input_products" and op in ("spmv", "spmm") and _fp16_inputs(args):
        own, count = _own_products(op, args)
        bound = bound * (1 + _F16_U) + _F16_U * own + count * _F16_HALF_SUB
    return bound + ref.error()


def _fp16_inputs(args):
    (_, _, data, _), x = args
    return np.asarray(data).dtype == np.float16 or np.asarray(x).dtype == np.float16


def _own_products(op, args):
    """Per output of spmv / spmm: sum of |own products| and how many there are."""
    (ptr, ind, data, _), x = args
    ptr, ind = np.asarray(ptr, np.int64), np.asarray(ind, np.int64)
    x = np.asarray(x, np.float64)
    x2 = x if x.ndim == 2 else x[:, None]
    t = np.abs(np.asarray(data, np.float64)[:, None] * x2[ind])
    p = np.concatenate([np.zeros((1, t.shape[1])), np.cumsum(t, axis=0)])
    own = p[ptr[1:]] - p[ptr[:-1]]
    count = np.broadcast_to((ptr[1:] - ptr[:-1])[:, None], own.shape)
    return own.reshape(-1), count.reshape(-1).astype(np.float64)


def _show(v):
    v = np.asarray(v)
    if v.ndim == 0:
        return repr(v.item())
    body = np.array2string(v.ravel()[:12], threshold=12, max_line_width=200)
    return body + (f" ... ({v.size} elements)" if v.size > 12 else "")


def _input_summary(args):
    return ", ".join(_show(a) if isinstance(a, np.ndarray) else
                     ("(" + ", ".join(_show(b) for b in a) + ")" if isinstance(a, tuple) else repr(a))
                     for a in args)


def check(op, args, kwargs, expected, actual, *, s=8, policy="derived", model="prefix", stats=None):
    """None when ``actual`` conforms, else a message naming the index, the input, the
    expected (exact, for float sums) and actual values, the error and the bound.
    ``expected`` is the golden result (dtype, shape, integers, moved values); ``model``
    the backend's declared error model (``ERROR_MODELS``). Tuples (values, indices) are
    compared part by part. ``stats`` (a dict), when given, receives "margin": the largest
    error / tolerance over the outputs (0 for an exact match; below 1 when conforming)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, got {policy!r}")
    if model not in ERROR_MODELS:
        raise ValueError(f"error model must be one of {sorted(ERROR_MODELS)}, got {model!r}")
    if isinstance(expected, tuple):
        if not isinstance(actual, tuple) or len(actual) != len(expected):
            return f"expected a tuple of {len(expected)} arrays, got {type(actual).__name__}"
        for k, (e, a) in enumerate(zip(expected, actual)):
            msg = check(op, args, kwargs, e, a, s=s, policy=policy, model=model, stats=stats)
            if msg:
                return f"part {k}: {msg}"
        return None
    expected, actual = np.asarray(expected), np.asarray(actual)
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype}, expected {expected.dtype}"
    if actual.shape != expected.shape:
        return f"shape {actual.shape}, expected {expected.shape} (input: {_input_summary(args)})"
    e, a = expected.ravel(), actual.ravel()
    if stats is not None:
        stats.setdefault("margin", 0.0)
    if op in MOVES_VALUES or expected.dtype.kind != "f":
        if a.dtype.itemsize in (1, 2, 4, 8) and np.array_equal(a.view(f"u{a.dtype.itemsize}"),
                                                                e.view(f"u{e.dtype.itemsize}")):
            return None  # bit for bit (one pass; the per-element view below only to name an index)
        same = a.view(np.uint8).reshape(a.size, -1) == e.view(np.uint8).reshape(e.size, -1) if a.size else \
            np.zeros((0, 1), bool)
        bad = np.flatnonzero(~same.all(axis=1))
        if bad.size:
            i = int(bad[0])
            return (f"index {i}: expected {e[i]!r}, actual {a[i]!r} (exact); input: {_input_summary(args)}")
        return None
    from .exact import reference

    ref = reference(op, args, kwargs, expected.dtype)
    what = "expected"
    if ref is not None:
        if ref.value.size != e.size:
            raise ValueError(f"the exact reference of {op} has {ref.value.size} outputs, the golden {e.size}")
        e, what = ref.value, "exact"
    ef, af = e.astype(np.float64), a.astype(np.float64)
    same = (np.isnan(ef) & np.isnan(af)) | (ef == af)  # equal infinities included
    with np.errstate(invalid="ignore"):
        err = np.where(same, 0.0, np.abs(af - ef))
    err = np.where(np.isnan(err), np.inf, err)
    if policy == "derived":
        bound = (model_bound(model, op, args, kwargs, s, expected, ref) if ref is not None
                 else float_bound(op, args, kwargs, s, expected).reshape(-1))
        bad = np.flatnonzero(~(err <= bound))
    elif policy == "double_thousandths":
        bound = 1e-3 + 1e-3 * np.abs(ef)
        beyond = np.flatnonzero(~(err <= bound))
        bad = beyond if beyond.size > 0.001 * e.size else np.zeros(0, np.int64)
    elif policy == "mere_mare":  # CANN's thresholds by the output dtype
        thr = {np.dtype(np.float16): 2.0**-10, np.dtype(np.float32): 2.0**-13}.get(expected.dtype, 2.0**-20)
        rel = err / (np.abs(ef) + 1e-7)
        bound = np.full(e.size, 10 * thr)
        bad = np.flatnonzero(~(rel <= bound))
        if not bad.size and rel.size and rel.mean() > thr:
            return f"mean relative error {rel.mean():.3g} > {thr:.3g} (MERE); input: {_input_summary(args)}"
        err = rel
        if stats is not None and rel.size:
            stats["margin"] = max(stats["margin"], float(rel.mean()) / thr)
    else:
        rtol, atol = {np.dtype(np.float32): (1.3e-6, 1e-5), np.dtype(np.float64): (1e-7, 1e-7)}.get(
            expected.dtype, (1e-3, 1e-5))
        bound = atol + rtol * np.abs(ef)
        bad = np.flatnonzero(~(err <= bound))
    if stats is not None and err.size:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ratio = np.where(err == 0, 0.0, err / bound)
        stats["margin"] = max(stats["margin"], float(np.nanmax(np.where(np.isnan(ratio), np.inf, ratio))))
    if bad.size:
        i = int(bad[np.argmax(err[bad] - bound[bad])])
        how = f"{policy}, error model {model}" if policy == "derived" and ref is not None else policy
        return (f"index {i}: {what} {e[i]!r}, actual {a[i]!r}, error {err[i]:.3g} > bound {bound[i]:.3g} "
                f"({how}; {bad.size} of {e.size} outputs beyond); input: {_input_summary(args)}")
    return None
