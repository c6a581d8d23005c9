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
    "offsets", "csr_matrices", "op_inputs", "STRATEGIES", "DOMAINS", "exactly_summable",
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


def lengths(s: int, *, multi_core: bool = True, regimes=None, cap=None):
    """Lengths concentrated where tiled kernels change regime: 0, 1, s-1, s,
    s+1, s^2-1, s^2, s^2+1 and (``multi_core``) 20*s^2 (the 20-core regime
    of MCScan), else anything up to 3*s^2. Shrinks towards 0.

    With ``regimes`` (``conformance.regimes.Regimes``: a backend's tiles, lanes,
    cores, row buckets and a tier), these small lengths are one tier; the others
    are the regimes' seam lengths up to 2^16 (medium) and above, up to the tier's
    max_n (large), drawn with the tier's weights (``regimes.TIERS``); ``cap``
    bounds them (ops whose golden model is quadratic or sorts)."""
    pts = [0, 1, s - 1, s, s + 1, s * s - 1, s * s, s * s + 1]
    if multi_core:
        pts.append(20 * s * s)
    small = st.one_of(st.sampled_from(sorted(set(pts))), st.integers(0, 3 * s * s))
    if regimes is None:
        return small
    from .regimes import MEDIUM_MAX

    top = min(regimes.max_n, cap) if cap else regimes.max_n
    if cap:  # the small tier too: at a backend's s = 128, 3 s^2 and 20 s^2 are far above a sort's cap
        small = small.map(lambda n: min(n, cap))
    seams = [p for p in regimes.seam_lengths() if p <= top]
    medium = [p for p in seams if 20 * s * s < p <= MEDIUM_MAX]
    large = [p for p in seams if p > MEDIUM_MAX]
    w_small, w_medium, w_large = regimes.weights
    tiers = [(w, strat) for w, strat in [(w_small, small)] + [(w, st.sampled_from(t)) for w, t in
                                                               ((w_medium, medium), (w_large, large)) if t] if w]
    if not tiers:  # no seam of the classes drawn fits under the cap: small lengths
        return small

    def pick(r):  # r in [0, total): the tier whose cumulative weight covers r (shrinks to small)
        for w, strat in tiers:
            if r < w:
                return strat
            r -= w
        return tiers[-1][1]

    return st.integers(0, sum(w for w, _ in tiers) - 1).flatmap(pick)


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
    results are meaningful for finite sums only (mmvref.golden's docstring); for
    integers it clips half the inputs (a drawn flag) so that every sum fits the
    result dtype (|x| <= max / (n+1)), the other half may overflow."""
    dt = np.dtype(dtype)
    fills = _FILLS_INT if dt.kind == "i" else _FILLS_FLOAT
    fill = draw(st.sampled_from(fills))
    # integer sums: half the inputs keep every sum inside the dtype (|x| <= max / (n + 1)); at kernel
    # scale nearly every other int32 input overflows, and an input on which golden and backend both
    # raise OverflowError cannot show a wrong element
    fit = finite_sums and dt.kind == "i" and n > 1 and draw(st.booleans())
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
    if fit:
        from mmvref.registry import VALUE_RULE  # the sums' result dtype (int8..int32 -> int32)

        lim = int(np.iinfo(VALUE_RULE[dt]).max) // (n + 1)
        x = np.clip(x.astype(np.int64), -lim, lim).astype(dt)
    return x


@st.composite
def flags(draw, n, s, *, dtype=None, regimes=None):
    """0/1 segment-start flags of length ``n`` (position 0 starts a segment
    whatever its flag): none set, all set, a single flag at a tile boundary
    k*s or k*s +- 1, runs of set flags, or a random density from 0.1% to 90%;
    with ``regimes`` also ("seams") a flag at every seam position of the regimes
    below n (k S^j +- 1, 2^k +- 1, ...: starts exactly on chunk and tile borders).
    dtype: bool, int8 or uint8 (drawn when None)."""
    dtype = dtype or draw(st.sampled_from(["bool", "int8", "uint8"]))
    kind = draw(st.sampled_from(["none", "all", "boundary", "runs", "density"]
                                + (["seams", "seams"] if regimes is not None else [])))
    f = np.zeros(n, np.uint8)
    if n and kind == "seams":
        pos = np.array([p for p in regimes.seam_lengths() if p < n], np.int64)
        f[pos[draw(st.integers(0, 2)):: draw(st.sampled_from([1, 3]))]] = 1  # all of them, or a drawn third
    if n and kind == "all":
        f[:] = 1
    elif n and kind == "boundary":
        k = draw(st.integers(0, max(0, (n - 1) // s)))
        pos = k * s + draw(st.sampled_from([-1, 0, 1]))
        f[min(max(pos, 0), n - 1)] = 1
    elif n and kind == "runs":  # runs of 1 .. 2s-1 set flags (vectorized: kernel-scale n)
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        starts = rng.integers(0, n, 1 + n // (4 * s))
        edge = np.zeros(n + 1, np.int64)
        np.add.at(edge, starts, 1)
        np.add.at(edge, np.minimum(starts + rng.integers(1, 2 * s, starts.size), n), -1)
        f[np.cumsum(edge[:n]) > 0] = 1
    elif n and kind == "density":
        d = draw(st.sampled_from([0.001, 0.01, 0.1, 0.5, 0.9]))
        f[np.random.default_rng(draw(st.integers(0, 2**32 - 1))).random(n) < d] = 1
    return f.astype(dtype)


@st.composite
def offsets(draw, n, s, regimes=None):
    """CSR-style segment offsets over ``n`` values (indptr[0] = 0, indptr[-1]
    = n, non-decreasing) with empty segments: leading, trailing and interior
    runs of them, all empty (n = 0), or random cuts. With ``regimes``, also
    ("seam_rows", as likely as the others together) rows whose lengths are the
    regimes' seam lengths and row seams (up to n), in a drawn order."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kinds = ["random", "leading_empty", "trailing_empty", "interior_empty", "one"]
    kind = draw(st.sampled_from(kinds + (["seam_rows"] * 5 if regimes is not None else [])))
    if kind == "seam_rows":
        pool = np.array(sorted({p for p in regimes.seam_lengths() + regimes.row_lengths() if p <= n}))
        lens = []
        left = n
        while left > 0:  # long seams first, so a kernel-scale row is there whenever n allows one
            big = pool[pool <= left]
            k = int(big[-1] if not lens and big.size else rng.choice(big))
            lens.append(k)
            left -= k
        lens = rng.permutation(np.array(lens + [0, 0], np.int64))
        return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
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
def csr_matrices(draw, dtype, s, *, unsorted=True, duplicates=True, regimes=None):
    """A CSR matrix (indptr int64, indices int32, data of ``dtype``, shape)
    with the row patterns kernels get wrong: all rows empty, nnz = 0, leading
    / trailing / interior runs of empty rows, one row longer than all the
    others together, or random; column indices sorted, or (where the op allows
    them) unsorted and with duplicates. With ``regimes``: also rows whose
    lengths are the regimes' row seams (0, 1, S-1, S, S+1, every bucket edge and
    its neighbours; "row_seams": each row one of them, "one_row_length": every
    row the same one), and row counts (a length of ``lengths`` / 8) and column
    counts at kernel scale."""
    small_rows = st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1]), st.integers(0, 4 * s))
    n_rows = draw(small_rows if regimes is None else lengths(s, regimes=regimes).map(lambda n: n // 8))
    small_cols = st.one_of(st.sampled_from([1, s - 1, s + 1]), st.integers(1, 3 * s))
    n_cols = draw(small_cols if regimes is None else
                  st.one_of(small_cols, st.sampled_from([p for p in regimes.seam_lengths() if 1 <= p <= 1 << 16])))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kinds = ["random", "all_empty", "leading_empty", "trailing_empty", "interior_empty", "one_long_row"]
    # with regimes, the row-seam patterns weigh half as much as all the others together
    kind = draw(st.sampled_from(kinds + (["row_seams"] * 2 + ["one_row_length"] if regimes is not None else [])))
    lens = rng.integers(0, 5, n_rows)
    if kind == "row_seams":  # every row seam at least once (in a drawn order; empty rows lead), the rest
        seams = np.array(regimes.row_lengths())  # drawn among them
        n_rows = max(n_rows, seams.size + 1)
        lens = np.concatenate([[0], rng.permutation(np.concatenate([seams, rng.choice(seams, n_rows - seams.size - 1)]))])
    elif kind == "one_row_length":
        lens[:] = draw(st.sampled_from(regimes.row_lengths()))
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
    if regimes is not None and lens.sum() > regimes.max_n:  # at most max_n entries: the rows that fit
        keep = int(np.searchsorted(np.cumsum(lens), regimes.max_n, side="right"))
        lens, n_rows = lens[:keep], keep
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
def _scan(draw, s, dtypes=None, regimes=None):
    dt = _dtype(draw, dtypes)
    x = draw(values(dt, draw(lengths(s, regimes=regimes)), finite_sums=True))
    return (x,), {"exclusive": draw(st.booleans())}


@st.composite
def _segmented(draw, s, with_exclusive, dtypes=None, regimes=None):
    dt = _dtype(draw, dtypes)
    n = draw(lengths(s, regimes=regimes))
    x = draw(values(dt, n, finite_sums=True))
    kw = {"exclusive": draw(st.booleans())} if with_exclusive else {}
    return (x, draw(flags(n, s, regimes=regimes))), kw


@st.composite
def _compress(draw, s, dtypes=None, regimes=None):
    """Values and a 0/1 mask: segment-flag patterns, or (as likely) dense masks (all kept, 90%, 99%,
    all but one), so that kernel-scale inputs also keep kernel-scale counts."""
    (x, f), _ = draw(_segmented(s, False, dtypes, regimes))
    dense = draw(st.sampled_from(["flags", "all", "0.9", "0.99", "all_but_one"]))
    if dense != "flags" and len(x):
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        m = np.ones(len(x), np.uint8) if dense in ("all", "all_but_one") else \
            (rng.random(len(x)) < float(dense)).astype(np.uint8)
        if dense == "all_but_one":
            m[int(rng.integers(0, len(x)))] = 0
        f = m.astype(f.dtype)
    return (x, f), {}


@st.composite
def _csr_sum(draw, s, dtypes=None, regimes=None):
    dt = _dtype(draw, dtypes)
    n = draw(lengths(s, regimes=regimes))
    return (draw(values(dt, n, finite_sums=True)), draw(offsets(n, s, regimes))), {}


#: feature widths of the N-d segment ops: one column (its own kernel), a scalar tail, a vector block
_FEATURES = (1, 3, 16)


@st.composite
def _segment_nd(draw, s, dtypes=None, regimes=None, *, kind="csr"):
    """(src [E, F], indptr), or (src, sorted index) with ``kind="coo"``, or the same edges in a
    drawn order (``kind="scatter"``), reduced by sum or mean: the reductions the golden model has
    an MMV-RAM algorithm for (min/max/prod are checked against a plain-loop oracle in tests/)."""
    dt = _dtype(draw, dtypes)
    # scatter's golden model radix-sorts the ids (slow beyond a few thousand); the others: E x F
    # values kept near the 1-D ops' sizes
    E = draw(lengths(s, regimes=regimes, cap=1 << 12 if kind == "scatter" else 1 << 16))
    F = draw(st.sampled_from(_FEATURES))
    x = np.ascontiguousarray(draw(values(dt, E * F, finite_sums=True)).reshape(E, F))
    indptr = draw(offsets(E, s, regimes))
    kw = {"reduce": draw(st.sampled_from(["sum", "mean"]))}
    if kind == "csr":
        return (x, indptr), kw
    n = len(indptr) - 1
    index = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    kw["dim_size"] = n
    if kind == "scatter":
        perm = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(E)
        x, index = np.ascontiguousarray(x[perm]), index[perm]
    return (x, index), kw


@st.composite
def _gather_csr(draw, s, dtypes=None, regimes=None):
    """(src [n, F], indptr): row r of src repeated indptr[r+1] - indptr[r] times."""
    dt = _dtype(draw, dtypes)
    E = draw(lengths(s, regimes=regimes))
    indptr = draw(offsets(E, s, regimes))
    F = draw(st.sampled_from(_FEATURES))
    n = len(indptr) - 1
    return (np.ascontiguousarray(draw(values(dt, n * F)).reshape(n, F)), indptr), {}


@st.composite
def _spmv(draw, s, dtypes=None, regimes=None):
    dt = _dtype(draw, dtypes, ("int8", "int16", "int32", "float16", "float32", "float64"))
    indptr, indices, data, shape = draw(csr_matrices(dt, s, regimes=regimes))
    x = draw(values(dt, shape[1]))
    if np.dtype(dt).kind == "f":  # products and their sums finite (see ``values``)
        lim = float(np.sqrt(float(np.finfo(dt).max) / (4 * (len(data) + 1))))
        data = np.clip(data, -lim, lim).astype(dt)
        x = np.clip(x, -lim, lim).astype(dt)
    if np.dtype(dt).kind == "i":  # keep products inside int64 words; int32 edges come from the sums
        data = (data.astype(np.int64) % 1000).astype(dt)
        x = (x.astype(np.int64) % 1000).astype(dt)
    return ((indptr, indices, data, shape), x), {}


@st.composite
def _spmm(draw, s, dtypes=None, regimes=None):
    (A, _x), _ = draw(_spmv(s, dtypes, regimes))
    k = draw(st.sampled_from([1, 3, 8, 9]))
    dt = A[2].dtype
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    D = rng.integers(-50, 51, (A[3][1], k)).astype(dt)
    return (A, D), {}


@st.composite
def _spgemm(draw, s, dtypes=None, regimes=None):  # the dense oracle keeps these small
    """Two CSR operands with matching inner size: empty, diagonal, sparse or random
    (small integers, or integer-valued floats: exact in every summation order)."""
    import scipy.sparse as sps

    dt = _dtype(draw, dtypes, ("int8", "int16", "int32", "float32", "float64"))
    m, n, p = (draw(st.integers(0, 2 * s)) for _ in range(3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    # dimensions reach 2s (the tile seams), but the density falls so that about 2^15 products at most
    # are expected: the golden ESC sorts every product with the golden radix sort (MMV-RAM vector adds,
    # row by row), which took minutes per example at s = 128 with 30% density
    density = min(0.3, float(np.sqrt(2.0**15 / max(m * n * p, 1))))

    def one(r, c):
        kind = draw(st.sampled_from(["random", "empty", "diagonal"]))
        d = np.zeros((r, c), np.int64)
        if kind == "random":
            d = rng.integers(-9, 10, (r, c)) * (rng.random((r, c)) < density)
        elif kind == "diagonal":
            np.fill_diagonal(d, rng.integers(1, 9, min(r, c)))
        M = sps.csr_matrix(d.astype(dt), shape=(r, c))
        return (M.indptr.astype(np.int64), M.indices.astype(np.int32), M.data, (r, c))

    return (one(m, n), one(n, p)), {}


@st.composite
def _batched(draw, s, dtypes=None, regimes=None):
    dt = _dtype(draw, dtypes)
    rows = draw(st.integers(0, 4))
    n = draw(st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1]), st.integers(0, 2 * s * s)) if regimes is None
             else lengths(s, regimes=regimes, cap=1 << 16))  # up to 4 rows; the golden ScanU is slow beyond
    x = np.stack([draw(values(dt, n, finite_sums=True)) for _ in range(rows)]) if rows else np.zeros((0, n), dt)
    return (x,), {"exclusive": draw(st.booleans())}


@st.composite
def _split(draw, s, dtypes=None, regimes=None):
    dt = _dtype(draw, dtypes)
    n = draw(st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1]), st.integers(0, 2 * s * s)) if regimes is None
             else lengths(s, regimes=regimes))
    return (draw(values(dt, n, nonfinite=True)), draw(flags(n, s))), {}


@st.composite
def _sort(draw, s, dtypes=None, regimes=None):
    """Sort inputs; floats often carry every special value (NaN, +-inf, -0.0,
    +0.0, subnormals) at drawn positions, ints many ties (small values)."""
    dt = _dtype(draw, dtypes, FLOAT_DTYPES + INT_DTYPES)
    n = draw(st.one_of(st.sampled_from([0, 1, 2, s - 1, s, s + 1]), st.integers(0, 4 * s)) if regimes is None
             else lengths(s, regimes=regimes, cap=1 << 10))  # golden and emulated radix sorts are slow beyond
    x = draw(values(dt, n, nonfinite=True, pins=8))
    if np.dtype(dt).kind == "f" and n and draw(st.booleans()):
        specials = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, np.finfo(dt).smallest_subnormal], dtype=dt)
        pos = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).integers(0, n, len(specials))
        x[pos] = specials
    return (x,), {"descending": draw(st.booleans())}


@st.composite
def _topk(draw, s, dtypes=None, regimes=None):
    (x,), _ = draw(_sort(s, dtypes, regimes))
    return (x, draw(st.integers(0, len(x)))), {"largest": draw(st.booleans())}


@st.composite
def _weights(draw, s, dtypes=None, regimes=None):
    """Integer weights, or dyadic float weights (multiples of 1/64): every
    summation order gives the same cumulative sums, so a backend free to sum in
    any order must still return the golden index."""
    dt = _dtype(draw, dtypes)
    n = draw(st.one_of(st.sampled_from([1, s - 1, s, s + 1]), st.integers(1, 2 * s * s)) if regimes is None
             else lengths(s, regimes=regimes).map(lambda k: max(k, 1)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    w = rng.integers(0, 65, n) * (rng.random(n) < 0.5)  # many zero weights (never to be drawn)
    w[int(rng.integers(0, n))] = 64
    w = w.astype(dt) if np.dtype(dt).kind == "i" else (w / 64).astype(dt)
    # u = 0 and dyadic u make t hit a cumulative sum exactly: the > versus >= edge
    u = draw(st.one_of(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1 - 2**-53]), st.floats(0, 1, exclude_max=True)))
    return (w, u), {}


@st.composite
def _top_p(draw, s, dtypes=None, regimes=None):  # vocabulary-sized rows: kept small
    dt = _dtype(draw, dtypes, FLOAT_DTYPES)
    rows = draw(st.integers(1, 3))
    n = draw(st.one_of(st.sampled_from([1, s - 1, s, s + 1]), st.integers(1, 2 * s)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    probs = (rng.integers(0, 65, (rows, n)) / 1024).astype(dt)
    probs[:, 0] = 1 / 64
    p = draw(st.sampled_from([0.0, 0.1, 0.5, 0.9, 1.0]))
    u = np.array([draw(st.floats(0, 1, exclude_max=True)) for _ in range(rows)])
    return (probs, p, u), {}


#: op name -> ((s, dtypes=None, regimes=None) -> strategy of (args, kwargs)); conformance attaches
#: these by registry name; ``dtypes`` restricts the value dtypes to those a backend accepts,
#: ``regimes`` (``conformance.regimes``) adds the backend's kernel-scale seams and a tier
STRATEGIES = {
    "scan": _scan,
    "segmented_scan": lambda s, dtypes=None, regimes=None: _segmented(s, True, dtypes, regimes),
    "segmented_sum": lambda s, dtypes=None, regimes=None: _segmented(s, False, dtypes, regimes),
    "segment_sum_csr": _csr_sum,
    "segment_csr": _segment_nd,
    "segment_coo": lambda s, dtypes=None, regimes=None: _segment_nd(s, dtypes, regimes, kind="coo"),
    "scatter": lambda s, dtypes=None, regimes=None: _segment_nd(s, dtypes, regimes, kind="scatter"),
    "gather_csr": _gather_csr,
    "compress": lambda s, dtypes=None, regimes=None: _compress(s, dtypes, regimes),
    "compress_ind": lambda s, dtypes=None, regimes=None: _compress(s, dtypes, regimes),
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
    # an int64 mean whose sum leaves int64 while the mean (between the values) fits: exact, no OverflowError
    "scatter": [((np.array([[-6564096555250607923], [-3471097047484108119], [8276121530152021970],
                            [6045045880496483620], [-1414377373025406904], [218070485381080319],
                            [8309588520621746278]], np.int64), np.zeros(7, np.int64)),
                 {"reduce": "mean", "dim_size": 1})],
    "split": [((np.arange(6, dtype=np.int16), np.array([1, 0, 1, 0, 0, 1], np.uint8)), {})],
    "compress_ind": [((np.arange(6, dtype=np.int16), np.array([0, 1, 1, 0, 0, 1], np.uint8)), {}),
                     ((_f(1.0, -0.0, np.nan, dtype="float16"), np.zeros(3, np.uint8)), {})],  # none kept
    # C[0, 0] = 1*3 + 2*4: two products land in one workspace slot (accumulate, not overwrite)
    "spgemm": [(((np.array([0, 2]), np.array([0, 1], np.int32), np.array([1, 2], np.int32), (1, 2)),
                 (np.array([0, 1, 2]), np.array([0, 0], np.int32), np.array([3, 4], np.int32), (2, 1))), {})],
}


# ----------------------------------------------------------------------------- value domains

#: value domains of the float sums: "any" (the strategies above: cancellation, huge and tiny values,
#: long sums) or "exact" (``exactly_summable``: the named policies' domain, see conformance.compare)
DOMAINS = ("any", "exact")
#: ops whose float results are sums, and where their summed arrays sit in ``(args, kwargs)``
_SUMMED = {"scan": "x", "batched_scan": "x", "segmented_scan": "x", "segmented_sum": "x",
           "segment_sum_csr": "x", "spmv": "products", "spmm": "products"}


def _quantize(x, b):
    """``x`` as integers of at most ``b`` bits keeping its pattern: zeros stay zero, signs stay,
    magnitudes map monotonically onto 1 .. 2^b - 1 (the largest |x| to 2^b - 1)."""
    x = np.asarray(x, np.float64)
    top = float(np.max(np.abs(x))) if x.size else 0.0
    if top == 0.0:
        return np.zeros(x.shape)
    return np.sign(x) * np.maximum(1.0, np.ceil(np.abs(x) / top * (2**b - 1))) * (x != 0)


def _bits(terms, out_digits, in_digits, products):
    """The largest b (at least 1) with terms * (2^b - 1)^(1 or 2) <= 2^out_digits, and b-bit values (their
    products too) exact in the input dtype."""
    b = 1
    while True:
        m = (2 ** (b + 1) - 1) ** (2 if products else 1)
        if terms * m > 2**out_digits or m > 2**in_digits or b + 1 > in_digits:
            return b
        b += 1


def exactly_summable(op, case, e):
    """``case`` = (args, kwargs) of ``op`` with its summed float values replaced by integers times
    2^``e`` so small that every partial sum (any order, any grouping, global prefixes included) and
    every product is exact in the result dtype and the input dtype: then every correct algorithm
    returns the exact value, and a fixed-threshold policy judges the backend, not its rounding.
    b-bit integers with n * (2^b - 1) <= 2^p (p the result's significand digits; products: squared),
    from the drawn values by ``_quantize`` (zeros, signs and the fill pattern kept, so shrinking still
    ends at small inputs). Other ops and integer dtypes: ``case`` unchanged."""
    from mmvref import registry

    result_dtype = registry.get(op).result_dtype
    where = _SUMMED.get(op)
    args, kwargs = case
    if where is None:
        return case
    if where == "x":
        x = args[0]
        if x.dtype.kind != "f":
            return case
        p = np.finfo(result_dtype(x.dtype)).nmant + 1
        b = _bits(max(x.size, 1), p, np.finfo(x.dtype).nmant + 1, False)
        return (np.ldexp(_quantize(x, b), e).astype(x.dtype),) + tuple(args[1:]), kwargs
    (indptr, indices, data, shape), other = args
    if data.dtype.kind != "f":
        return case
    k = other.shape[1] if other.ndim == 2 else 1
    p = np.finfo(result_dtype(data.dtype)).nmant + 1
    b = _bits(max(data.size * k, 1), p, np.finfo(data.dtype).nmant + 1, True)
    # the two factors' scales add: 2^e split between them keeps both in range
    data = np.ldexp(_quantize(data, b), e // 2).astype(data.dtype)
    other = np.ldexp(_quantize(other, b), e - e // 2).astype(other.dtype)
    return ((indptr, indices, data, shape), other), kwargs


def op_inputs(op: str, s: int = 8, dtypes=None, regimes=None, domain="any"):
    """The strategy of ``(args, kwargs)`` for registry op ``op`` with tile size
    ``s``, values of ``dtypes`` only (names; None: every dtype the op takes),
    with ``regimes`` (``conformance.regimes.Regimes``) the backend's
    kernel-scale seams at its tier's weights (None: small inputs only), and
    float sums from ``domain`` (``DOMAINS``)."""
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {DOMAINS}, got {domain!r}")
    try:
        strategy = STRATEGIES[op](s, dtypes, regimes)
    except KeyError:
        raise KeyError(f"no strategy for op {op!r}; known: {', '.join(STRATEGIES)}") from None
    if domain == "exact" and op in _SUMMED:  # scale 2^e: values from 2^-8 to 2^(b+4)
        strategy = st.tuples(strategy, st.integers(-8, 4)).map(lambda t: exactly_summable(op, *t))
    return strategy
