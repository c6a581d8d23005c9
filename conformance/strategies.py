"""Hypothesis strategies for the registry's ops, usable from your own tests
(in the style of ``hypothesis.extra.numpy``: small, composable, precisely
documented).

Large arrays are not drawn element by element (Hypothesis could not build or
shrink a 300,000-element list): an array is a *shape* (length, fill pattern,
RNG seed) plus a few *pinned* edge values at drawn positions. Hypothesis
shrinks the length towards 0, the fill towards zeros and the pins away, so a
failure still shrinks to a small, readable counterexample.

Each strategy below returns numpy arrays; ``op_inputs(op, s)`` returns
``(args, kwargs)`` ready for ``getattr(backend, op)(*args, **kwargs)``.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

__all__ = [
    "INT_DTYPES", "FLOAT_DTYPES", "VALUE_DTYPES", "edge_values", "lengths", "values", "flags",
    "offsets", "csr_matrices", "op_inputs", "STRATEGIES",
]

INT_DTYPES = ("int8", "int16", "int32", "int64")
FLOAT_DTYPES = ("float16", "float32", "float64")
VALUE_DTYPES = INT_DTYPES + FLOAT_DTYPES


def edge_values(dtype, *, nonfinite=False):
    """The values kernels get wrong, for ``dtype``: 0, +-1, the extremes and
    their neighbours; for floats also -0.0, the smallest subnormal and normal,
    +-max, and (``nonfinite=True``) +-inf and NaN."""
    dt = np.dtype(dtype)
    if dt.kind == "i":
        info = np.iinfo(dt)
        return [0, 1, -1, int(info.max), int(info.min), int(info.max) - 1, int(info.min) + 1]
    info = np.finfo(dt)
    out = [0.0, -0.0, 1.0, -1.0, float(info.max), -float(info.max), float(info.tiny), -float(info.tiny),
           float(info.smallest_subnormal), 2.0 ** (info.nmant + 1)]
    if nonfinite:
        out += [float("inf"), float("-inf"), float("nan")]
    return out


def lengths(s: int, *, multi_core: bool = True):
    """Lengths concentrated where tiled kernels change regime: 0, 1, s-1, s,
    s+1, s^2-1, s^2, s^2+1 and (``multi_core``) 20*s^2 (the 20-core regime
    of MCScan), else anything up to 3*s^2. Shrinks towards 0."""
    pts = [0, 1, s - 1, s, s + 1, s * s - 1, s * s, s * s + 1]
    if multi_core:
        pts.append(20 * s * s)
    return st.one_of(st.sampled_from(sorted(set(pts))), st.integers(0, 3 * s * s))


_FILLS_INT = ("zeros", "small", "full", "max", "min", "alternating_extremes")
_FILLS_FLOAT = ("zeros", "small", "normal", "large", "tiny")


@st.composite
def values(draw, dtype, n, *, nonfinite=False, nonnegative=False, pins=5, finite_sums=False):
    """A 1-D array of ``n`` values of ``dtype``: a fill pattern (zeros, small
    values, full range, all +max / all min, alternating extremes; floats:
    small, normal, huge, subnormal-sized) from a drawn seed, then up to ``pins``
    positions set to ``edge_values`` (inf/NaN only with ``nonfinite``).
    ``nonnegative`` keeps every value >= 0 (sampling weights). ``finite_sums``
    scales floats so that any sum of them stays finite (|x| <= max / (4 (n+1))):
    the speculative golden algorithms subtract partial sums, so their float
    results are meaningful for finite sums only (mmvref.golden's docstring)."""
    dt = np.dtype(dtype)
    fills = _FILLS_INT if dt.kind == "i" else _FILLS_FLOAT
    fill = draw(st.sampled_from(fills))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dt.kind == "i":
        info = np.iinfo(dt)
        if fill == "zeros":
            x = np.zeros(n, dt)
        elif fill == "small":
            x = rng.integers(-3, 4, n).astype(dt)
        elif fill == "full":
            x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        elif fill == "max":
            x = np.full(n, info.max, dt)
        elif fill == "min":
            x = np.full(n, info.min, dt)
        else:
            x = np.where(np.arange(n) % 2 == 0, info.max, info.min).astype(dt)
    else:
        scale = {"zeros": 0.0, "small": 1.0, "normal": 100.0, "large": float(np.finfo(dt).max) / 4,
                 "tiny": float(np.finfo(dt).tiny) * 4}[fill]
        # normal draws cut at 4 sigma: "large" (max / 4) then stays within the dtype's range instead of
        # overflowing to inf (inf only where nonfinite asks for it)
        x = (np.clip(rng.standard_normal(n), -4.0, 4.0) * scale).astype(dt)
    edges = [v for v in edge_values(dt, nonfinite=nonfinite) if not (nonnegative and (v < 0 or str(v) == "-0.0"))]
    for _ in range(draw(st.integers(0, pins if n else 0))):
        x[draw(st.integers(0, n - 1))] = draw(st.sampled_from(edges))
    if nonnegative:
        x = np.abs(x) if dt.kind == "f" else np.where(x < 0, -(x + 1), x).astype(dt)
    if finite_sums and dt.kind == "f" and n:
        lim = float(np.finfo(dt).max) / (4 * (n + 1))
        x = np.clip(x.astype(np.float64), -lim, lim).astype(dt)
    return x


@st.composite
def flags(draw, n, s, *, dtype=None):
    """0/1 segment-start flags of length ``n`` (position 0 starts a segment
    whatever its flag): none set, all set, a single flag at a tile boundary
    k*s or k*s +- 1, runs of set flags, or a random density from 0.1% to 90%.
    dtype: bool, int8 or uint8 (drawn when None)."""
    dtype = dtype or draw(st.sampled_from(["bool", "int8", "uint8"]))
    kind = draw(st.sampled_from(["none", "all", "boundary", "runs", "density"]))
    f = np.zeros(n, np.uint8)
    if n and kind == "all":
        f[:] = 1
    elif n and kind == "boundary":
        k = draw(st.integers(0, max(0, (n - 1) // s)))
        pos = k * s + draw(st.sampled_from([-1, 0, 1]))
        f[min(max(pos, 0), n - 1)] = 1
    elif n and kind == "runs":
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        for start in rng.integers(0, n, 1 + n // (4 * s)):
            f[start:start + int(rng.integers(1, 2 * s))] = 1
    elif n and kind == "density":
        d = draw(st.sampled_from([0.001, 0.01, 0.1, 0.5, 0.9]))
        f[np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(n) < d] = 1
    return f.astype(dtype)


@st.composite
def offsets(draw, n, s):
    """CSR-style segment offsets over ``n`` values (indptr[0] = 0, indptr[-1]
    = n, non-decreasing) with empty segments: leading, trailing and interior
    runs of them, all empty (n = 0), or random cuts."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["random", "leading_empty", "trailing_empty", "interior_empty", "one"]))
    k = int(draw(st.integers(0, max(1, n // max(1, s // 2)) + 3)))
    cuts = np.sort(rng.integers(0, n + 1, k))
    if kind == "leading_empty":
        cuts = np.concatenate([[0, 0, 0], cuts])
    elif kind == "trailing_empty":
        cuts = np.concatenate([cuts, [n, n, n]])
    elif kind == "interior_empty" and len(cuts):
        cuts = np.sort(np.concatenate([cuts, np.repeat(cuts[len(cuts) // 2], 3)]))
    elif kind == "one":
        cuts = np.zeros(0, np.int64)
    return np.concatenate([[0], cuts, [n]]).astype(np.int64)


@st.composite
def csr_matrices(draw, dtype, s, *, unsorted=True, duplicates=True):
    """A CSR matrix (indptr int64, indices int32, data of ``dtype``, shape)
    with the row patterns kernels get wrong: all rows empty, nnz = 0, leading
    / trailing / interior runs of empty rows, one row longer than all the
    others together, or random; column indices sorted, or (where the op allows
    them) unsorted and with duplicates."""
    n_rows = draw(st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1]), st.integers(0, 4 * s)))
    n_cols = draw(st.one_of(st.sampled_from([1, s - 1, s + 1]), st.integers(1, 3 * s)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["random", "all_empty", "leading_empty", "trailing_empty", "interior_empty",
                                 "one_long_row"]))
    lens = rng.integers(0, 5, n_rows)
    if kind == "all_empty":
        lens[:] = 0
    elif kind == "leading_empty":
        lens[: n_rows // 2] = 0
    elif kind == "trailing_empty":
        lens[n_rows // 2:] = 0
    elif kind == "interior_empty":
        lens[n_rows // 3: 2 * n_rows // 3] = 0
    elif kind == "one_long_row" and n_rows:
        lens[int(rng.integers(0, n_rows))] = int(lens.sum()) + s + 1
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    nnz = int(indptr[-1])
    order = draw(st.sampled_from(["sorted"] + (["unsorted"] if unsorted else [])
                                 + (["duplicates"] if duplicates else [])))
    indices = rng.integers(0, n_cols, nnz).astype(np.int32)
    if order == "duplicates" and nnz:
        indices[:] = indices[0]
    if order == "sorted":
        for r in range(n_rows):
            indices[indptr[r]:indptr[r + 1]].sort()
    data = draw(values(dtype, nnz))
    return indptr, indices, data, (n_rows, n_cols)


# ----------------------------------------------------------------------------- per-op inputs

def _dtype(draw, allowed, default=VALUE_DTYPES):
    """A dtype from ``default`` that the backend accepts (``allowed`` None: all)."""
    return draw(st.sampled_from([d for d in default if allowed is None or d in allowed]))


@st.composite
def _scan(draw, s, dtypes=None):
    dt = _dtype(draw, dtypes)
    x = draw(values(dt, draw(lengths(s)), finite_sums=True))
    return (x,), {"exclusive": draw(st.booleans())}


@st.composite
def _segmented(draw, s, with_exclusive, dtypes=None):
    dt = _dtype(draw, dtypes)
    n = draw(lengths(s))
    x = draw(values(dt, n, finite_sums=True))
    kw = {"exclusive": draw(st.booleans())} if with_exclusive else {}
    return (x, draw(flags(n, s))), kw


@st.composite
def _csr_sum(draw, s, dtypes=None):
    dt = _dtype(draw, dtypes)
    n = draw(lengths(s))
    return (draw(values(dt, n, finite_sums=True)), draw(offsets(n, s))), {}


@st.composite
def _spmv(draw, s, dtypes=None):
    dt = _dtype(draw, dtypes, ("int8", "int16", "int32", "float16", "float32", "float64"))
    indptr, indices, data, shape = draw(csr_matrices(dt, s))
    x = draw(values(dt, shape[1]))
    if np.dtype(dt).kind == "f":  # products and their sums finite (see ``values``)
        lim = float(np.sqrt(np.finfo(dt).max / (4 * (len(data) + 1))))
        data = np.clip(data, -lim, lim).astype(dt)
        x = np.clip(x, -lim, lim).astype(dt)
    if np.dtype(dt).kind == "i":  # keep products inside int64 words; int32 edges come from the sums
        data = (data.astype(np.int64) % 1000).astype(dt)
        x = (x.astype(np.int64) % 1000).astype(dt)
    return ((indptr, indices, data, shape), x), {}


@st.composite
def _spmm(draw, s, dtypes=None):
    (A, _x), _ = draw(_spmv(s, dtypes))
    k = draw(st.sampled_from([1, 3, 8, 9]))
    dt = A[2].dtype
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    D = rng.integers(-50, 51, (A[3][1], k)).astype(dt)
    return (A, D), {}


@st.composite
def _spgemm(draw, s, dtypes=None):
    """Two CSR operands with matching inner size: empty, diagonal, sparse or random
    (small integers, or integer-valued floats: exact in every summation order)."""
    import scipy.sparse as sps

    dt = _dtype(draw, dtypes, ("int8", "int16", "int32", "float32", "float64"))
    m, n, p = (draw(st.integers(0, 2 * s)) for _ in range(3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def one(r, c):
        kind = draw(st.sampled_from(["random", "empty", "diagonal"]))
        d = np.zeros((r, c), np.int64)
        if kind == "random":
            d = rng.integers(-9, 10, (r, c)) * (rng.random((r, c)) < 0.3)
        elif kind == "diagonal":
            np.fill_diagonal(d, rng.integers(1, 9, min(r, c)))
        M = sps.csr_matrix(d.astype(dt), shape=(r, c))
        return (M.indptr.astype(np.int64), M.indices.astype(np.int32), M.data, (r, c))

    return (one(m, n), one(n, p)), {}


@st.composite
def _batched(draw, s, dtypes=None):
    dt = _dtype(draw, dtypes)
    rows = draw(st.integers(0, 4))
    n = draw(st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1]), st.integers(0, 2 * s * s)))
    x = np.stack([draw(values(dt, n, finite_sums=True)) for _ in range(rows)]) if rows else np.zeros((0, n), dt)
    return (x,), {"exclusive": draw(st.booleans())}


@st.composite
def _split(draw, s, dtypes=None):
    dt = _dtype(draw, dtypes)
    n = draw(st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1]), st.integers(0, 2 * s * s)))
    return (draw(values(dt, n, nonfinite=True)), draw(flags(n, s))), {}


@st.composite
def _sort(draw, s, dtypes=None):
    """Sort inputs; floats often carry every special value (NaN, +-inf, -0.0,
    +0.0, subnormals) at drawn positions, ints many ties (small values)."""
    dt = _dtype(draw, dtypes, FLOAT_DTYPES + INT_DTYPES)
    n = draw(st.one_of(st.sampled_from([0, 1, 2, s - 1, s, s + 1]), st.integers(0, 4 * s)))
    x = draw(values(dt, n, nonfinite=True, pins=8))
    if np.dtype(dt).kind == "f" and n and draw(st.booleans()):
        specials = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, np.finfo(dt).smallest_subnormal], dtype=dt)
        pos = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(0, n, len(specials))
        x[pos] = specials
    return (x,), {"descending": draw(st.booleans())}


@st.composite
def _topk(draw, s, dtypes=None):
    (x,), _ = draw(_sort(s, dtypes))
    return (x, draw(st.integers(0, len(x)))), {"largest": draw(st.booleans())}


@st.composite
def _weights(draw, s, dtypes=None):
    """Integer weights, or dyadic float weights (multiples of 1/64): every
    summation order gives the same cumulative sums, so a backend free to sum in
    any order must still return the golden index."""
    dt = _dtype(draw, dtypes)
    n = draw(st.one_of(st.sampled_from([1, s - 1, s, s + 1]), st.integers(1, 2 * s * s)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w = rng.integers(0, 65, n) * (rng.random(n) < 0.5)  # many zero weights (never to be drawn)
    w[int(rng.integers(0, n))] = 64
    w = w.astype(dt) if np.dtype(dt).kind == "i" else (w / 64).astype(dt)
    # u = 0 and dyadic u make t hit a cumulative sum exactly: the > versus >= edge
    u = draw(st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1 - 2**-53]), st.floats(0, 1, exclude_max=True)))
    return (w, u), {}


@st.composite
def _top_p(draw, s, dtypes=None):
    dt = _dtype(draw, dtypes, FLOAT_DTYPES)
    rows = draw(st.integers(1, 3))
    n = draw(st.one_of(st.sampled_from([1, s - 1, s, s + 1]), st.integers(1, 2 * s)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    probs = (rng.integers(0, 65, (rows, n)) / 1024).astype(dt)
    probs[:, 0] = 1 / 64
    p = draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]))
    u = np.array([draw(st.floats(0, 1, exclude_max=True)) for _ in range(rows)])
    return (probs, p, u), {}


#: op name -> ((s, dtypes=None) -> strategy of (args, kwargs)); conformance attaches these by
#: registry name; ``dtypes`` restricts the value dtypes to those a backend accepts
STRATEGIES = {
    "scan": _scan,
    "segmented_scan": lambda s, dtypes=None: _segmented(s, True, dtypes),
    "segmented_sum": lambda s, dtypes=None: _segmented(s, False, dtypes),
    "segment_sum_csr": _csr_sum,
    "compress": lambda s, dtypes=None: _segmented(s, False, dtypes),
    "spmv": _spmv,
    "spmm": _spmm,
    "spgemm": _spgemm,
    "batched_scan": _batched,
    "split": _split,
    "split_ind": _split,
    "radix_sort": _sort,
    "argsort": _sort,
    "topk": _topk,
    "weighted_sample": _weights,
    "top_p_sample": _top_p,
}


def _f(*v, dtype="float32"):
    return np.array(v, dtype=dtype)


#: op -> explicit (args, kwargs) cases run before the generated ones in every
#: profile: the documented edge cases no budget may skip
EXAMPLES = {
    "scan": [((np.full(300, 0.1, np.float16),), {"exclusive": False})],  # fp16 sums need fp32 accumulators
    "radix_sort": [((_f(np.nan, 1.0, -0.0, 0.0, -np.inf, np.inf, -np.nan),), {"descending": False}),
                   ((_f(np.nan, 1.0, -0.0, 0.0, -np.inf, dtype="float16"),), {"descending": True})],
    "argsort": [((_f(np.nan, 2.0, -0.0, 0.0, np.nan, -1.0),), {"descending": False})],
    "topk": [((_f(np.nan, 1.0, 1.0, -0.0, 0.0), 3), {"largest": True}),
             ((np.array([5, 1, 5, 1], np.int8), 1), {"largest": False})],
    "weighted_sample": [((np.array([0, 3, 0, 1], np.int32), 0.0), {}),
                        ((_f(0.0, 0.25, 0.0, 0.75), 0.25), {})],
    "split": [((np.arange(6, dtype=np.int16), np.array([1, 0, 1, 0, 0, 1], np.uint8)), {})],
    # C[0, 0] = 1*3 + 2*4: two products land in one workspace slot (accumulate, not overwrite)
    "spgemm": [(((np.array([0, 2]), np.array([0, 1], np.int32), np.array([1, 2], np.int32), (1, 2)),
                 (np.array([0, 1, 2]), np.array([0, 0], np.int32), np.array([3, 4], np.int32), (2, 1))), {})],
}


def op_inputs(op: str, s: int = 8, dtypes=None):
    """The strategy of ``(args, kwargs)`` for registry op ``op`` with tile size
    ``s``, values of ``dtypes`` only (names; None: every dtype the op takes)."""
    try:
        return STRATEGIES[op](s, dtypes)
    except KeyError:
        raise KeyError(f"no strategy for op {op!r}; known: {', '.join(STRATEGIES)}") from None
