"""mmvref._fast.sparse.ops against the plain-loop oracle (tests/oracle.py).

Integers must be bit-identical to the exact result (or raise / wrap on
overflow); floats must lie within the documented bound
|y_i - exact_i| <= gamma_k * sum_j |a_ij x_j| (k = entries in row i), widened
by the float64 oracle's own bound.
"""
from __future__ import annotations

import contextlib

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import oracle_spmv, wrap

import mmvref._fast.sparse.ops as spmv_mod
from mmvref._fast.sparse import _portable_spmv as K
from mmvref._fast import _target
from mmvref._fast.sparse.ops import spmv

INT_DTYPES = ["int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
U = {np.dtype("float32"): 2.0**-24, np.dtype("float64"): 2.0**-53}


# ----------------------------------------------------------------------------- helpers

@contextlib.contextmanager
def many_chunks(min_cost=1):
    """Cut even tiny matrices into many chunks, so rows are split across chunks."""
    old = spmv_mod.MIN_CHUNK_COST, spmv_mod.CHUNKS_PER_THREAD
    spmv_mod.MIN_CHUNK_COST, spmv_mod.CHUNKS_PER_THREAD = min_cost, 16
    try:
        yield
    finally:
        spmv_mod.MIN_CHUNK_COST, spmv_mod.CHUNKS_PER_THREAD = old


@pytest.fixture(params=_target.LEVELS)
def level(request):
    """Run with the float kernels of a kernel level (avx512, avx2 or portable: the gather
    each reads x with), skipping one that the compile target or this CPU lacks. Yields
    the path's module (its GATHER and LONG_ROW)."""
    lvl = request.param
    if not (_target.supports(_target.target(), lvl) and _target.supports(_target.host_target(), lvl)):
        pytest.skip(f"the compile target {_target.target().cpu} or this CPU has no {lvl} path")
    old = spmv_mod._LEVEL
    spmv_mod._LEVEL = lvl
    try:
        yield spmv_mod._path()
    finally:
        spmv_mod._LEVEL = old


def gamma(k, u):
    return k * u / (1 - k * u)


def expected_dtype(data_dtype, x_dtype):
    dt = np.result_type(np.dtype(data_dtype), np.dtype(x_dtype))
    return {"int8": "int32", "int16": "int32", "float16": "float32"}.get(dt.name, dt.name)


def assert_spmv_float(y, indptr, indices, data, x):
    """y within the documented bound of the exact product (oracle in float64: each row's products,
    exact for float32 and rounded once for float64, summed in order by np.bincount, whose
    rounding the bound's gamma(k, 2^-53) term covers)."""
    __tracebackhide__ = True
    lens = np.diff(np.asarray(indptr, dtype=np.int64))
    rows = np.repeat(np.arange(lens.size), lens)
    products = data.astype(np.float64) * x.astype(np.float64)[np.asarray(indices, dtype=np.int64)]
    ref = np.bincount(rows, weights=products, minlength=lens.size)
    mag = np.bincount(rows, weights=np.abs(products), minlength=lens.size)
    u = U[y.dtype]
    k = lens.astype(np.float64)  # gamma of every row at once
    bound = (gamma(k, u) + gamma(k, 2.0**-53)) * mag
    err = np.abs(y.astype(np.float64) - ref)
    bad = ~(err <= bound)
    if bad.any():
        i = int(np.argmax(bad))
        raise AssertionError(f"row {i}: y={y[i]!r}, exact~{ref[i]!r}, |err|={err[i]:.3g} > bound {bound[i]:.3g} "
                             f"(row length {lens[i]})")


def csr_tuple(lens, n_cols, rng, dtype, *, values=(-100, 100), sorted_cols=False):
    lens = np.asarray(lens, dtype=np.int64)
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    nnz = int(indptr[-1])
    indices = rng.integers(0, max(n_cols, 1), nnz).astype(np.int32)
    if sorted_cols:
        for r in range(lens.size):
            indices[indptr[r]:indptr[r + 1]].sort()
    dt = np.dtype(dtype)
    if dt.kind == "f":
        data = rng.uniform(values[0], values[1], nnz).astype(dt)
    else:
        data = rng.integers(values[0], values[1], nnz, endpoint=True).astype(dt)
    return indptr, indices, data, (lens.size, n_cols)


# ----------------------------------------------------------------------------- tables

# (indptr, indices, data, n_cols, x, expected): a worked example per edge case
TABLE = [
    pytest.param([0, 2, 5, 5, 6], [0, 1, 0, 1, 2, 2], [1, 2, 3, 4, 5, 6], 3, [1, 10, 100],
                 [21, 543, 0, 600], id="interior-empty"),
    pytest.param([0, 0, 0, 2, 3], [1, 0, 2], [1, 2, 3], 3, [1, 10, 100], [0, 0, 12, 300], id="leading-empty"),
    pytest.param([0, 1, 2, 2, 2], [0, 2], [7, 8], 3, [1, 10, 100], [7, 800, 0, 0], id="trailing-empty"),
    pytest.param([0, 0, 0, 0], [], [], 3, [1, 10, 100], [0, 0, 0], id="all-empty"),
    pytest.param([0, 3], [2, 0, 2], [1, 1, 1], 3, [1, 10, 100], [201], id="unsorted-duplicates"),
    pytest.param([0], [], [], 4, [1, 2, 3, 4], [], id="no-rows"),
    pytest.param([0, 0, 0], [], [], 0, [], [0, 0], id="no-columns"),
]


@pytest.mark.parametrize("indptr, indices, data, n_cols, x, expected", TABLE)
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_table(indptr, indices, data, n_cols, x, expected, dtype):
    m = len(indptr) - 1
    A = (np.array(indptr), np.array(indices, dtype=np.int32), np.array(data, dtype=dtype), (m, n_cols))
    y = spmv(A, np.array(x, dtype=dtype))
    assert y.dtype == np.dtype(dtype)
    assert y.shape == (m,)
    np.testing.assert_array_equal(y, np.array(expected, dtype=dtype))


@pytest.mark.parametrize("fmt", ["csr_matrix", "csr_array"])
def test_scipy_inputs(fmt):
    rng = np.random.default_rng(0)
    A = sp.random(40, 30, density=0.2, format="csr", random_state=1, dtype=np.float64)
    if fmt == "csr_array":
        A = sp.csr_array(A)
    x = rng.standard_normal(30)
    y = spmv(A, x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float64
    assert_spmv_float(y, A.indptr, A.indices, A.data, x)


def test_scipy_indices_are_not_copied_or_modified():
    A = sp.random(200, 100, density=0.1, format="csr", random_state=2, dtype=np.float32)
    before = (A.indptr.copy(), A.indices.copy(), A.data.copy())
    spmv(A, np.ones(100, np.float32))
    for a, b in zip((A.indptr, A.indices, A.data), before):
        np.testing.assert_array_equal(a, b)


def test_torch_x_gives_torch():
    torch = pytest.importorskip("torch")
    A = sp.random(30, 20, density=0.3, format="csr", random_state=3, dtype=np.float32)
    xt = torch.arange(20, dtype=torch.float32)
    y = spmv(A, xt)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32
    assert_spmv_float(y.numpy(), A.indptr, A.indices, A.data, xt.numpy())
    yi = spmv(A.astype(np.int32), torch.arange(20, dtype=torch.int32))
    assert isinstance(yi, torch.Tensor) and yi.dtype == torch.int32


@pytest.mark.filterwarnings("ignore:Sparse")
def test_torch_sparse_csr_matrix():
    torch = pytest.importorskip("torch")
    A = sp.random(30, 20, density=0.3, format="csr", random_state=4, dtype=np.float64)
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                 torch.from_numpy(A.data), size=A.shape)
    x = np.linspace(-1, 1, 20)
    np.testing.assert_allclose(spmv(At, x), spmv(A, x), rtol=0, atol=0)


def test_index_dtypes():
    rng = np.random.default_rng(5)
    indptr, indices, data, shape = csr_tuple(rng.integers(0, 30, 50), 70, rng, "float64")
    x = rng.standard_normal(70)
    ref = spmv((indptr, indices, data, shape), x)
    for pt in ("int16", "int32", "uint32", "int64"):
        for it in ("int16", "uint16", "int32", "uint32", "int64", "uint64"):
            y = spmv((indptr.astype(pt), indices.astype(it), data, shape), x)
            np.testing.assert_array_equal(y, ref)


_INDEX_PROBE = """
import json, sys
import numpy as np
import mmvref
from mmvref._fast import _variants
indptr, indices = np.array([0, 2, 2, 5]), np.array([0, 3, 1, 2, 3])
for it in ("int8", "uint8", "int16", "uint16", "uint32", "uint64"):
    for vals in (np.arange(5.0), np.arange(5, dtype=np.int32)):
        A = (indptr.astype(it), indices.astype(it), vals, (3, 4))
        mmvref.spmv(A, np.arange(4)), mmvref.spmm(A, np.arange(8).reshape(4, 2))
print(json.dumps([(f.__module__ + "." + f.__name__, str(sig[0].dtype), str(sig[1].dtype))
                  for (f, _), k in list(_variants._MADE.items()) for sig in k.signatures]))
"""


def test_kernels_see_only_int32_and_int64_indices():
    """Every integer index dtype reaches the kernels as int32 or int64 (a kernel compiled per index
    dtype pair would cost a user seconds of compile for each): in a process that ran spmv and spmm
    on every other index dtype, no signature of the float or integer SpMV kernels or of the SpMM
    rows takes indptr or indices of another dtype. (The results are checked by test_index_dtypes
    and test_bad_input.)"""
    import json
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env.pop("NUMBA_DISABLE_JIT", None)
    r = subprocess.run([sys.executable, "-c", _INDEX_PROBE], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    sigs = [s for s in json.loads(r.stdout.strip().splitlines()[-1])
            if s[0].startswith("mmvref._fast.sparse") and s[0].rsplit(".", 1)[1] in ("_make_float", "_make_int",
                                                                                      "_make_rows")]
    kinds = {s[0].rsplit(".", 1)[1] for s in sigs}
    assert kinds == {"_make_float", "_make_int", "_make_rows"}, sigs  # each kernel was reached
    for name, ptr_dtype, ind_dtype in sigs:
        assert {ptr_dtype, ind_dtype} <= {"int32", "int64"}, (name, ptr_dtype, ind_dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_32_and_64_bit_indices_at_every_level(level, dtype):
    """The gathers of each level with 32- and 64-bit indices (separate instructions on AVX2)."""
    rng = np.random.default_rng(5)
    indptr, indices, data, shape = csr_tuple(rng.integers(0, 30, 50), 70, rng, dtype)
    x = rng.standard_normal(70).astype(dtype)
    ref = spmv((indptr, indices, data, shape), x)
    assert_spmv_float(ref, indptr, indices, data, x)
    np.testing.assert_array_equal(spmv((indptr, indices.astype(np.int64), data, shape), x), ref)


def test_non_contiguous_arrays():
    rng = np.random.default_rng(6)
    indptr, indices, data, shape = csr_tuple(rng.integers(0, 20, 30), 50, rng, "float32")
    x2 = np.repeat(rng.standard_normal(50).astype(np.float32), 2)
    y = spmv((indptr, np.repeat(indices, 2)[::2], np.repeat(data, 2)[::2], shape), x2[::2])
    np.testing.assert_array_equal(y, spmv((indptr, indices, data, shape), np.ascontiguousarray(x2[::2])))


# ----------------------------------------------------------------------------- floats

@st.composite
def csr_cases(draw, dtypes):
    """Row lengths biased to 0, 1, runs of short rows and a few long rows
    (longer than one SIMD batch sometimes); columns unsorted with repeats, or
    consecutive runs (the contiguous-load path)."""
    n_rows = draw(st.integers(0, 60))
    n_cols = draw(st.integers(1, 300))
    kind = draw(st.sampled_from(["short", "mixed", "long", "empty-heavy"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "short":
        lens = rng.integers(0, 20, n_rows)
    elif kind == "mixed":
        lens = rng.integers(0, 8, n_rows)
        if n_rows:
            lens[rng.integers(0, n_rows, 2)] = rng.integers(50, 3000, 2)
    elif kind == "long":
        lens = rng.integers(40, 400, n_rows)
    else:
        lens = rng.integers(0, 3, n_rows) * (rng.random(n_rows) < 0.2)
    dtype = draw(st.sampled_from(dtypes))
    A = csr_tuple(lens, n_cols, rng, dtype, values=(-8, 8) if np.dtype(dtype).kind == "f" else (-100, 100))
    indptr, indices, data, shape = A
    if draw(st.booleans()) and indices.size:  # consecutive columns in every row
        for r in range(n_rows):
            lo, hi = indptr[r], indptr[r + 1]
            start = rng.integers(0, n_cols)
            indices[lo:hi] = (start + np.arange(hi - lo)) % n_cols
    return indptr, indices, data, shape


@settings(deadline=None)
@given(A=csr_cases(FLOAT_DTYPES + INT_DTYPES), x_dtype=st.sampled_from(FLOAT_DTYPES),
       split=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_float_within_bound(A, x_dtype, split, seed):
    indptr, indices, data, (m, n) = A
    x = np.random.default_rng(seed).uniform(-8, 8, n).astype(x_dtype)
    with many_chunks() if split else contextlib.nullcontext():
        y = spmv(A, x)
    assert y.dtype == np.dtype(expected_dtype(data.dtype, x_dtype))
    assert y.shape == (m,)
    assert_spmv_float(y, indptr, indices, data, x)


def test_split_long_row_float32(level):
    """One very long row shared by many chunks, plus short rows around it."""
    rng = np.random.default_rng(7)
    lens = np.r_[rng.integers(0, 5, 100), 50_000, rng.integers(0, 5, 100)]
    indptr, indices, data, shape = csr_tuple(lens, 10_000, rng, "float32", values=(0, 1))
    x = rng.uniform(0, 1, 10_000).astype(np.float32)
    for ctx in (contextlib.nullcontext(), many_chunks(), many_chunks(5000)):
        with ctx:
            y = spmv((indptr, indices, data, shape), x)
        assert_spmv_float(y, indptr, indices, data, x)


def test_row_longer_than_a_batch_among_short_rows(level):
    """A chunk of short rows (two-phase batches) holding one row longer than a batch."""
    rng = np.random.default_rng(10)
    lens = np.r_[rng.integers(0, 4, 3000), K.BATCH + 77, rng.integers(0, 4, 3000)]
    indptr, indices, data, shape = csr_tuple(lens, 20_000, rng, "float32", values=(-1, 1))
    x = rng.uniform(-1, 1, 20_000).astype(np.float32)
    for ctx in (contextlib.nullcontext(), many_chunks(4 * K.BATCH)):
        with ctx:
            y = spmv((indptr, indices, data, shape), x)
        assert_spmv_float(y, indptr, indices, data, x)


def test_long_rows_contiguous_and_gathered(level):
    """Chunks of long rows (the per-row SIMD path) with consecutive and scattered columns."""
    rng = np.random.default_rng(8)
    lens = rng.integers(level.LONG_ROW, 4 * max(level.LONG_ROW, 2 * K.lanes(np.float32)), 300)
    indptr, indices, data, shape = csr_tuple(lens, 5000, rng, "float64", values=(-1, 1))
    for r in range(0, 300, 2):
        lo, hi = indptr[r], indptr[r + 1]
        indices[lo:hi] = rng.integers(0, 5000 - (hi - lo)) + np.arange(hi - lo)
    x = rng.standard_normal(5000)
    for ctx in (contextlib.nullcontext(), many_chunks()):
        with ctx:
            y = spmv((indptr, indices, data, shape), x)
        assert_spmv_float(y, indptr, indices, data, x)
    xs = x.astype(np.float32)
    assert_spmv_float(spmv((indptr, indices, data.astype(np.float32), shape), xs), indptr, indices,
                      data.astype(np.float32), xs)


def test_vector_width_follows_compile_target():
    """512-bit vectors only when Numba compiles for AVX-512F, 256-bit otherwise (AVX2, SSE2)."""
    from mmvref._fast import _target

    t = _target.target()
    wide = t.is_x86 and t.has("avx512f")
    assert K.lanes(np.float32) == (16 if wide else 8)
    assert K.lanes(np.float64) == (8 if wide else 4)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("pattern", ["scattered", "consecutive"])
def test_every_row_length_around_the_lane_counts(level, dtype, pattern):
    """Rows of every length 0..3W+1 (W = lanes), in both orders of lengths, as two-phase
    batches, as per-row SIMD (long chunks) and split across chunks; x holds inf/nan in
    columns no row uses, so a lane beyond a row's end that read x would show."""
    W = K.lanes(np.dtype(dtype))
    rng = np.random.default_rng(W)
    lens = np.arange(3 * W + 2)
    lens = np.r_[lens, lens[::-1], [level.LONG_ROW + 3] * 3]
    n = 4 * W + 16
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    cols = []
    for k in lens:
        if pattern == "consecutive":
            s = int(rng.integers(0, 3 * W + 1 - min(k, 3 * W + 1) + 1))
            c = np.arange(s, s + k) % (3 * W + 1)
        else:
            c = rng.integers(0, 3 * W + 1, k)
        cols.append(c)
    indices = np.concatenate(cols).astype(np.int32)
    data = rng.uniform(-1, 1, indices.size).astype(dtype)
    x = rng.uniform(-1, 1, n).astype(dtype)
    x[3 * W + 1:] = np.where(np.arange(n - 3 * W - 1) % 2, np.inf, np.nan)
    for ctx in (contextlib.nullcontext(), many_chunks(), many_chunks(2 * W)):
        with ctx:
            y = spmv((indptr, indices, data, (lens.size, n)), x)
        assert np.isfinite(y).all()
        assert_spmv_float(y, indptr, indices, data, x)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("span", ["window", "wide"])
def test_regular_short_rows(level, dtype, index_dtype, span):
    """Batches of rows of one length, or lengths within REGULAR_SPREAD, for every length below
    the path's LONG_ROW, one chunk and split; x holds nan/inf in columns no row uses. Columns
    within SCALAR_WINDOW (scalar batches on every path) or spread over four times as many (scalar
    batches where the path sets SCALAR_SHORT, else two-phase)."""
    rng = np.random.default_rng(11)
    n = 300 if span == "window" else 4 * K.SCALAR_WINDOW
    # beyond the window the oracle's x is long: lengths at the batch's edges only (the choice of
    # loads does not depend on the length)
    ks = range(max(level.LONG_ROW, 2)) if span == "window" else sorted({1, 2, 3, 5, 8, level.LONG_ROW - 1})
    for k in ks:
        for lens in (np.full(2000, k), k + rng.integers(0, K.REGULAR_SPREAD + 1, 2000)):
            indptr, indices, data, shape = csr_tuple(lens, n - 20, rng, dtype, values=(-1, 1))
            indices = indices.astype(index_dtype)
            x = rng.uniform(-1, 1, n).astype(dtype)
            x[n - 20:] = np.where(np.arange(20) % 2, np.inf, np.nan)
            for ctx in (contextlib.nullcontext(), many_chunks(2 * K.BATCH)):
                with ctx:
                    y = spmv((indptr, indices, data, (lens.size, n)), x)
                assert np.isfinite(y).all(), k
                assert_spmv_float(y, indptr, indices, data, x)


@pytest.mark.parametrize("bad_index", [300, -1, 2**31 - 1])
def test_regular_short_rows_invalid_index(level, bad_index):
    """An invalid column index inside a batch of regular short rows raises (the batch is
    skipped before x is read), wherever in the matrix it is."""
    rng = np.random.default_rng(12)
    indptr, indices, data, shape = csr_tuple(np.full(20_000, 6), 300, rng, "float32")
    x = np.ones(300, np.float32)
    for pos in (0, 12_345, indices.size - 1):
        ind = indices.copy()
        ind[pos] = bad_index
        for ctx in (contextlib.nullcontext(), many_chunks(2 * K.BATCH)):
            with ctx, pytest.raises(ValueError, match="indices out of range"):
                spmv((indptr, ind, data, shape), x)


def test_regular_short_rows_non_monotone_offsets(level):
    rng = np.random.default_rng(13)
    indptr, indices, data, shape = csr_tuple(np.full(20_000, 6), 300, rng, "float32")
    bad = indptr.copy()
    bad[7000] = bad[7001] + 1  # row 6999 one longer, row 7000 of length -1
    for ctx in (contextlib.nullcontext(), many_chunks(2 * K.BATCH)):
        with ctx, pytest.raises(ValueError, match="indptr must be non-decreasing"):
            spmv((bad, indices, data, shape), np.ones(300, np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_inf_nan_propagate_only_where_used(level, dtype):
    # x holds inf/nan in columns that only some rows use; the masked SIMD lanes must not touch them
    n = 40
    x = np.ones(n, dtype)
    x[5], x[17] = np.inf, np.nan
    rows = [[0, 1, 2], [5], [17, 3], [6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16], [], list(range(18, 40))]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    indices = np.array([c for r in rows for c in r], dtype=np.int32)
    data = np.ones(indices.size, dtype)
    y = spmv((indptr, indices, data, (len(rows), n)), x)
    assert y[1] == np.inf and np.isnan(y[2])
    np.testing.assert_array_equal(y[[0, 3, 4, 5]], np.array([3, 11, 0, 22], dtype))


# ----------------------------------------------------------------------------- integers

@settings(deadline=None)
@given(A=csr_cases(INT_DTYPES), x_dtype=st.sampled_from(INT_DTYPES), split=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_int_exact(A, x_dtype, split, seed):
    indptr, indices, data, (m, n) = A
    info = np.iinfo(x_dtype)
    x = np.random.default_rng(seed).integers(max(info.min, -1000), min(info.max, 1000), n,
                                             endpoint=True).astype(x_dtype)
    with many_chunks() if split else contextlib.nullcontext():
        y = spmv(A, x)
    assert y.dtype == np.dtype(expected_dtype(data.dtype, x_dtype))
    assert y.tolist() == oracle_spmv(indptr, indices, data, x)


@st.composite
def overflow_cases(draw):
    """Integer rows of large values: some results overflow the result dtype, some
    only overflow int64 on the way (partial sums) and fit at the end."""
    dtype = draw(st.sampled_from(["int32", "int64"]))
    info = np.iinfo(dtype)
    n_rows = draw(st.integers(1, 12))
    n_cols = draw(st.integers(1, 10))
    rows = []
    for _ in range(n_rows):
        k = draw(st.integers(0, 6))
        rows.append([(draw(st.integers(0, n_cols - 1)),
                      draw(st.sampled_from([info.min, info.max, -1, 1, 0]) | st.integers(info.min, info.max)))
                     for _ in range(k)])
    x = np.array([draw(st.sampled_from([info.min, info.max, -1, 1, 2, 0]) | st.integers(info.min, info.max))
                  for _ in range(n_cols)], dtype=dtype)
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.array([c for r in rows for c, _ in r], dtype=np.int32)
    data = np.array([v for r in rows for _, v in r], dtype=dtype)
    return indptr, indices, data, (n_rows, n_cols), x


@settings(deadline=None)
@given(case=overflow_cases(), split=st.booleans())
def test_int_overflow_raise_and_wrap(case, split):
    indptr, indices, data, shape, x = case
    exact = oracle_spmv(indptr, indices, data, x)
    info = np.iinfo(data.dtype)
    bits = 8 * data.dtype.itemsize
    fits = all(info.min <= v <= info.max for v in exact)
    with many_chunks() if split else contextlib.nullcontext():
        yw = spmv((indptr, indices, data, shape), x, overflow="wrap")
        assert yw.tolist() == [wrap(v, bits) for v in exact]
        if fits:
            assert spmv((indptr, indices, data, shape), x).tolist() == exact
        else:
            with pytest.raises(OverflowError, match="overflow='wrap'"):
                spmv((indptr, indices, data, shape), x)


def test_int64_partial_sums_overflow_but_result_fits():
    big = 2**62
    A = (np.array([0, 3]), np.array([0, 1, 2], np.int32), np.array([big, big, -big], np.int64), (1, 3))
    y = spmv(A, np.ones(3, np.int64))
    assert y.tolist() == [big]
    with pytest.raises(OverflowError):
        spmv(A, np.array([2, 2, 1], np.int64))  # 2**63 + 2**63 - 2**62


def test_int32_result_overflow():
    A = (np.array([0, 2, 3]), np.array([0, 1, 0], np.int32), np.array([2**30, 2**30, 5], np.int32), (2, 2))
    x = np.array([2, 1], np.int32)
    with pytest.raises(OverflowError, match="row 0"):
        spmv(A, x)
    assert spmv(A, x, overflow="wrap").tolist() == [wrap(3 * 2**30, 32), 10]
    assert spmv((A[0], A[1], A[2].astype(np.int64), A[3]), x).tolist() == [3 * 2**30, 10]


# ----------------------------------------------------------------------------- errors

def _A():
    return np.array([0, 2, 3]), np.array([0, 2, 1], np.int32), np.array([1.0, 2.0, 3.0]), (2, 3)


@pytest.mark.parametrize("split", [False, True])
def test_errors_structure(level, split):
    indptr, indices, data, shape = _A()
    x = np.ones(3)
    with many_chunks() if split else contextlib.nullcontext():
        with pytest.raises(ValueError, match="x has length 4"):
            spmv(_A(), np.ones(4))
        with pytest.raises(ValueError, match="indices out of range.*3"):
            spmv((indptr, np.array([0, 3, 1], np.int32), data, shape), x)
        with pytest.raises(ValueError, match="indices out of range.*-1"):
            spmv((indptr, np.array([0, -1, 1], np.int32), data, shape), x)
        with pytest.raises(ValueError, match="indices out of range"):
            spmv((indptr, np.array([0, 2**40, 1], np.int64), data, shape), x)
        with pytest.raises(ValueError, match="indptr must be non-decreasing"):
            spmv((np.array([0, 4, 3]), np.array([0, 1, 2], np.int32), np.ones(3), shape), x)
        with pytest.raises(ValueError, match=r"indptr\[0\] must be 0"):
            spmv((np.array([1, 2, 3]), indices, data, shape), x)
        with pytest.raises(ValueError, match=r"indptr\[-1\]"):
            spmv((np.array([0, 2, 2]), indices, data, shape), x)
        with pytest.raises(ValueError, match="indptr has length 3 but A has 3 rows"):
            spmv((indptr, indices, data, (3, 3)), x)
        with pytest.raises(ValueError, match="indices has length 2"):
            spmv((indptr, indices[:2], data, shape), x)
        with pytest.raises(ValueError, match="indices out of range"):
            spmv((np.array([0, 1, 1]), np.array([0], np.int32), np.ones(1), (2, 0)), np.ones(0))


def test_errors_non_monotone_inside_large_matrix():
    # invalid offsets deep inside a matrix big enough for several chunks: found by the fused checks
    rng = np.random.default_rng(9)
    indptr, indices, data, shape = csr_tuple(rng.integers(0, 10, 5000), 100, rng, "float32")
    bad = indptr.copy()
    bad[2500] = bad[2502] + 3
    for ctx in (contextlib.nullcontext(), many_chunks()):
        with ctx, pytest.raises(ValueError, match="indptr must be non-decreasing"):
            spmv((bad, indices, data, shape), np.ones(100, np.float32))
    ind = indices.copy()
    ind[12345 % ind.size] = 100
    with pytest.raises(ValueError, match="column index 100 not in"):
        spmv((indptr, ind, data, shape), np.ones(100, np.float32))


def test_errors_types():
    indptr, indices, data, shape = _A()
    x = np.ones(3)
    with pytest.raises(TypeError, match="data has unsupported dtype uint8"):
        spmv((indptr, indices, data.astype(np.uint8), shape), x)
    with pytest.raises(TypeError, match="x has unsupported dtype complex128"):
        spmv(_A(), x.astype(complex))
    with pytest.raises(TypeError, match="x has unsupported dtype bool"):
        spmv(_A(), x.astype(bool))
    with pytest.raises(TypeError, match="indices must have an integer dtype"):
        spmv((indptr, indices.astype(float), data, shape), x)
    with pytest.raises(TypeError, match="indptr must have an integer dtype"):
        spmv((indptr.astype(float), indices, data, shape), x)
    with pytest.raises(TypeError, match="shape must be a pair"):
        spmv((indptr, indices, data, 3), x)
    with pytest.raises(TypeError, match=r"\(indptr, indices, data, shape\)"):
        spmv((indptr, indices, data), x)
    with pytest.raises(TypeError, match="got ndarray"):
        spmv(np.eye(3), x)
    with pytest.raises(ValueError, match="overflow must be one of"):
        spmv(_A(), x, overflow="saturate")
    with pytest.raises(ValueError, match="x must be 1-D"):
        spmv(_A(), np.ones((3, 1)))


@pytest.mark.parametrize("fmt", ["coo", "csc", "bsr", "lil", "dok", "dia"])
def test_errors_non_csr_scipy(fmt):
    A = sp.random(4, 3, density=0.5, format=fmt, random_state=0)
    with pytest.raises(TypeError, match=r"tocsr\(\)"):
        spmv(A, np.ones(3))


@pytest.mark.parametrize("index_dtype, dtype, mnemonic", [
    ("int32", "float32", "vgatherdps"), ("int32", "float64", "vgatherdpd"),
    ("int64", "float32", "vgatherqps"), ("int64", "float64", "vgatherqpd")])
def test_avx2_path_reads_x_with_gather_instructions(index_dtype, dtype, mnemonic):
    """The avx2 path's reason to exist: AVX2 gathers even where LLVM's tuning would
    scalarize its generic gather (AMD Zen). Checked in the machine code of the kernel."""
    if not _target.supports(_target.target(), "avx2"):
        pytest.skip(f"the compile target {_target.target().cpu} has no avx2 path")
    from numba import typeof

    from mmvref._fast.sparse import _avx2 as _spmv_avx2

    a = lambda dt: np.zeros(1, dt)  # noqa: E731 - argument types only
    args = (a(np.int64), a(index_dtype), a(dtype), a(dtype), a(dtype), a(np.int64), a(np.int64), a(dtype),
            a(dtype), a(np.uint64), a(np.bool_), _spmv_avx2.GATHER, 8, True, a(np.int64), 0)
    sig = tuple(typeof(v) for v in args)
    fresh = numba.njit(K.float_rows_serial.py_func)  # uncached: a cached library keeps no assembly
    fresh.compile(sig)
    assert mnemonic in fresh.inspect_asm(sig)


# ----------------------------------------------------------------------------- runs of consecutive columns

def share_of_consecutive_stretches(indices, lanes):
    """Plain loops: of the stretches of ``lanes`` neighbouring entries (every start), the share whose
    columns go up by one at each step."""
    total = hits = 0
    for s in range(len(indices) - lanes + 1):
        total += 1
        hits += all(int(indices[s + j + 1]) - int(indices[s + j]) == 1 for j in range(lanes - 1))
    return hits / total


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("run", [1, 2, 3, 4, 8, 16, 40])
def test_short_runs_counts_stretches_of_consecutive_columns(lanes, run):
    """``_short_runs`` on matrices of rows made of runs of ``run`` consecutive columns, against a
    plain count of the stretches: all entries below the sample size; for a larger one, whose
    windows all look alike, the sample gives the same answer."""
    rng = np.random.default_rng(run * 100 + lanes)
    starts = rng.choice(np.arange(0, 1_000_000, 64), 3000 // run, replace=False)
    indices = (starts[:, None] + np.arange(run)).reshape(-1).astype(np.int32)
    share = share_of_consecutive_stretches(indices, lanes)
    assert spmv_mod._short_runs(indices, lanes) == (share < spmv_mod.RUN_SHARE)
    big = np.tile(indices[: (len(indices) // run) * run], 40)
    assert big.size > spmv_mod.RUN_SAMPLES * spmv_mod.RUN_WINDOW
    assert spmv_mod._short_runs(big, lanes) == (share < spmv_mod.RUN_SHARE)
    assert spmv_mod._short_runs(indices[: lanes - 1], lanes)  # shorter than one stretch: no run


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("run", [2, 16])
def test_avx2_rows_in_short_runs_take_the_batches(dtype, run):
    """On the AVX2 path, rows of 30 entries (above its LONG_ROW) take simd_dot per row when their
    columns come in runs of 16, the scalar batches (LONG_ROW_SHORT_RUNS) when in runs of 2; spmv and a
    prepared matrix decide alike (same bits), and both are within the bound."""
    if not (_target.supports(_target.target(), "avx2") and _target.supports(_target.host_target(), "avx2")):
        pytest.skip("no avx2 path for this compile target or CPU")
    import mmvref

    rng = np.random.default_rng(run)
    m, n = 3000, 100_000
    rows = [np.sort(rng.choice(np.arange(0, n - run, run), 30 // run, replace=False))[:, None] + np.arange(run)
            for _ in range(m)]
    indices = np.concatenate([r.reshape(-1) for r in rows]).astype(np.int32)
    indptr = np.arange(0, indices.size + 1, indices.size // m).astype(np.int32)
    data = rng.uniform(-1, 1, indices.size).astype(dtype)
    x = rng.uniform(-1, 1, n).astype(dtype)
    old = spmv_mod._LEVEL
    spmv_mod._LEVEL = "avx2"
    try:
        P = spmv_mod._path()
        R, E = spmv_mod.spmv_plan(indptr, m, indices.size)
        run_ = spmv_mod.FloatSpmv(indptr, indices, data, R, E)
        assert run_.long_row == (P.LONG_ROW_SHORT_RUNS if run == 2 else P.LONG_ROW)
        y = spmv((indptr, indices, data, (m, n)), x)
        yp = mmvref.prepare((indptr, indices, data, (m, n))) @ x
    finally:
        spmv_mod._LEVEL = old
    assert_spmv_float(y, indptr, indices, data, x)
    np.testing.assert_array_equal(yp, y)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rows_of_negative_zero_products_give_positive_zero(level, dtype):
    """Every row's sum starts from +0.0, as a plain loop's does: rows whose products are all -0.0
    (row 0, the one chunk's first part, included) give +0.0; on one chunk, split, and prepared."""
    import mmvref

    m = 50
    lens = np.arange(m) % 7 + 1
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    indices = np.arange(indptr[-1], dtype=np.int32) % 9
    data = np.full(indptr[-1], -1.0, dtype)
    x = np.zeros(9, dtype)
    want = np.zeros(m, dtype)
    for r in range(m):  # plain loop: s = +0.0, then s += a * x
        s = np.dtype(dtype).type(0.0)
        for j in range(indptr[r], indptr[r + 1]):
            s = s + data[j] * x[indices[j]]
        want[r] = s
    assert not np.signbit(want).any() and (data[:1] * x[:1] == 0).all() and np.signbit(data[:1] * x[:1]).all()
    A = (indptr, indices, data, (m, 9))
    for ctx in (contextlib.nullcontext(), many_chunks()):
        with ctx:
            P = mmvref.prepare(A)
            for y in (spmv(A, x), P @ x, P @ x):  # (the second product: the bound kernel)
                np.testing.assert_array_equal(y, want)
                assert not np.signbit(y).any()


@pytest.mark.native_only  # the marker's typing: not target-dependent
def test_the_gather_marker_is_typed_without_the_interpreter_and_pickles():
    """Numba's dispatcher types a ``Gather`` argument from its ``_numba_type_`` (in C, no call of
    ``typeof``): that type must be the one ``typeof`` gives, so a call finds the kernel compiled
    for it, and each kind keeps its own type; the marker pickles to an equal kind."""
    import pickle

    from mmvref._fast.sparse import _avx2
    from mmvref._fast.sparse._gather import Gather, GatherKind

    for g in (K.GATHER, _avx2.GATHER):
        assert g._numba_type_ == numba.typeof(g) == GatherKind(g.isa)
        back = pickle.loads(pickle.dumps(g))
        assert type(back) is Gather and back.isa == g.isa and back._numba_type_ == g._numba_type_
    assert K.GATHER._numba_type_ != _avx2.GATHER._numba_type_

    @numba.njit
    def kind_of(g, v):
        return v + 1

    for g in (K.GATHER, _avx2.GATHER):
        assert kind_of(g, 1) == 2
    assert len(kind_of.signatures) == 2  # one per kind, and each later call dispatched to it
    for g in (K.GATHER, _avx2.GATHER):
        assert kind_of(g, 2) == 3
    assert len(kind_of.signatures) == 2
