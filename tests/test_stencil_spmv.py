"""The SpMV of stencil matrices (``ops.stencil_of``, ``_portable_stencil``): rows that hold one
pattern of offsets from the diagonal are computed without reading their column indices.

Checked against oracles written apart from the kernels:
- which rows hold the pattern: a plain loop over the rows (``_pattern_rows``);
- the result: every row summed in the documented order (``_ordered_rows``: numpy elementwise
  arithmetic in the result dtype, no fused multiply-add), so the bits are checked, not only a
  bound; and the per-row error bound of spmv against float64 plain loops (``_within_bound``);
- ``spmv`` and a prepared matrix give the same bits, for 1 and 2 threads and any row blocks.
The size threshold (STENCIL_MIN_NNZ) is lowered so that small matrices take the path; two
matrices above it (a 2-D and a 3-D Poisson) run as they are.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import pickle

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_prepared import _within_bound

import mmvref
import mmvref._fast.sparse.ops as sparse_ops
import mmvref._fast.sparse.prepared as prepared_module
from mmvref._fast import _target


@contextlib.contextmanager
def small_stencils(blocks_per_thread=None):
    """Matrices of any size are looked at as stencils; optionally ``blocks_per_thread`` row blocks."""
    old = sparse_ops.STENCIL_MIN_NNZ, sparse_ops.CHUNKS_PER_THREAD
    sparse_ops.STENCIL_MIN_NNZ = 1
    if blocks_per_thread is not None:
        sparse_ops.CHUNKS_PER_THREAD = blocks_per_thread
    try:
        yield
    finally:
        sparse_ops.STENCIL_MIN_NNZ, sparse_ops.CHUNKS_PER_THREAD = old


@contextlib.contextmanager
def threads_and_small_stencils(threads, blocks_per_thread=None):
    """``small_stencils`` with Numba's thread count set to ``threads`` (at most the pool's) meanwhile."""
    old = numba.get_num_threads()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    try:
        with small_stencils(blocks_per_thread):
            yield
    finally:
        numba.set_num_threads(old)


def _pattern_rows(indptr, indices, n, off):
    """Plain loop: rows whose entries are exactly columns i + off[0], i + off[1], ... in that order,
    each in [0, n)."""
    rows = []
    for i in range(len(indptr) - 1):
        cols = [int(c) for c in indices[int(indptr[i]):int(indptr[i + 1])]]
        want = [i + d for d in off]
        if cols == want and all(0 <= c < n for c in want):
            rows.append(i)
    return rows


def _sampled(m):
    """The rows ``stencil_sample`` looks at."""
    S = sparse_ops.STENCIL_SAMPLES
    return [(m - 1) * s // max(S - 1, 1) for s in range(S)]


def _sampled_pattern(indptr, indices, m):
    """Plain loops: the first pattern (offsets from the diagonal, in entry order) of 1 to
    STENCIL_MAX_TERMS entries among the first STENCIL_SAMPLES / 2 + 1 sampled rows that half of the
    sampled rows hold, or None."""
    S = sparse_ops.STENCIL_SAMPLES
    rows = _sampled(m)
    pattern = [[int(c) - i for c in indices[int(indptr[i]):int(indptr[i + 1])]] for i in rows]
    for cand in pattern[:S // 2 + 1]:
        if 1 <= len(cand) <= sparse_ops.STENCIL_MAX_TERMS and 2 * sum(1 for p in pattern if p == cand) >= S:
            return tuple(cand)
    return None


def _ordered_rows(indptr, indices, data, x):
    """Each row summed in the order documented in ``_portable_stencil`` (and ``_scalar_rows``):
    products k = 0..3 of each group of four into z0..z3 (from +0.0), the last < 4 into z0, then
    (z0 + z1) + (z2 + z3); numpy elementwise operations in the result dtype, rows grouped by length."""
    rdt = x.dtype
    indptr = np.asarray(indptr, np.int64)
    lens = np.diff(indptr)
    y = np.zeros(lens.size, rdt)
    for L in np.unique(lens):
        rows = np.flatnonzero(lens == L)
        z = [np.zeros(rows.size, rdt) for _ in range(4)]
        L4 = L - L % 4
        for k in range(L):
            pos = indptr[rows] + k
            prod = data[pos].astype(rdt) * x[indices[pos]]
            j = k % 4 if k < L4 else 0
            z[j] = z[j] + prod
        y[rows] = (z[0] + z[1]) + (z[2] + z[3])
    return y


def _poisson(N, dims=2, dtype=np.float64):
    T = sp.diags_array([-np.ones(N - 1), 2 * np.ones(N), -np.ones(N - 1)], offsets=[-1, 0, 1], dtype=dtype)
    I = sp.eye_array(N, dtype=dtype)
    if dims == 2:
        A = sp.kron(I, T) + sp.kron(T, I)
    else:
        A = sp.kron(sp.kron(I, I), T) + sp.kron(sp.kron(I, T), I) + sp.kron(sp.kron(T, I), I)
    A = sp.csr_array(A)
    A.sort_indices()
    return A


def _check(A, x, off=None):
    """spmv and prepare: equal to each other, within spmv's bound, and on a stencil matrix the
    ordered sums bit for bit. Returns ``stencil_of``'s finding."""
    indptr, indices, data = A.indptr, A.indices, A.data
    st_ = sparse_ops.stencil_of(indptr, indices, A.shape[0], A.shape[1], A.nnz)
    y = mmvref.spmv(A, x)
    P = mmvref.prepare(A)
    yp = P @ x
    yp2 = P @ x  # (the bound call)
    if st_ is not None:  # (else the CSR kernel's order: checked by the bound)
        np.testing.assert_array_equal(y, _ordered_rows(indptr, indices, data, x))
    np.testing.assert_array_equal(yp, y)
    np.testing.assert_array_equal(yp2, y)
    assert _within_bound(y, indptr, indices, data, x)
    return st_


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dims,N", [(2, 190), (3, 36)])
def test_poisson_above_the_threshold_takes_the_stencil_path(dims, N, dtype, monkeypatch):
    A = _poisson(N, dims, dtype)
    assert A.nnz >= sparse_ops.STENCIL_MIN_NNZ
    x = np.random.default_rng(1).standard_normal(A.shape[1]).astype(dtype)
    calls = []
    for name in ("stencil_rows", "prepared_stencil_rows"):
        kernel = getattr(sparse_ops.KS, name)
        monkeypatch.setattr(sparse_ops.KS, name, lambda *a, kernel=kernel, name=name: calls.append(name) or kernel(*a))
    s = _check(A, x)
    assert s is not None
    # spmv's kernel; the prepared matrix's first and bound products
    assert calls == ["stencil_rows", "prepared_stencil_rows", "prepared_stencil_rows"]
    want_off = {2: (-N, -1, 0, 1, N), 3: (-N * N, -N, -1, 0, 1, N, N * N)}[dims]
    assert s.off == want_off
    rows = _pattern_rows(A.indptr, A.indices, A.shape[1], want_off)
    got = [r for a, b in s.runs.reshape(-1, 2).tolist() for r in range(a, b)]
    assert got == rows


def _box(N, dims, dtype):
    """The 3^dims-point box stencil on an N^dims grid (9-point in 2-D, 27-point in 3-D), columns sorted."""
    import itertools

    m = N ** dims
    coords = np.array(np.unravel_index(np.arange(m), (N,) * dims)).T
    rows, cols = [], []
    for o in itertools.product((-1, 0, 1), repeat=dims):
        c = coords + np.array(o)
        ok = np.all((c >= 0) & (c < N), axis=1)
        rows.append(np.flatnonzero(ok))
        cols.append(np.ravel_multi_index(c[ok].T, (N,) * dims))
    r, c = np.concatenate(rows), np.concatenate(cols)
    A = sp.csr_array((np.random.default_rng(6).standard_normal(r.size).astype(dtype), (r, c)), shape=(m, m))
    A.sort_indices()
    return A


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dims,N", [(2, 140), (3, 22)])
def test_box_stencils_taken_by_their_length_and_the_target(dims, N, dtype):
    """9 terms a row: not where the compile target has AVX-512 (LLVM gathers the values there);
    27: everywhere. Either way the same bits from spmv and prepare, and on the stencil path the
    ordered sums."""
    A = _box(N, dims, dtype)
    assert A.nnz >= sparse_ops.STENCIL_MIN_NNZ
    x = np.random.default_rng(7).standard_normal(A.shape[1]).astype(dtype)
    s = _check(A, x)
    K = 3 ** dims
    if K in sparse_ops.STENCIL_GATHERED_TERMS and _target.target().has("avx512f"):
        assert s is None
    else:
        assert s is not None and len(s.off) == K
        want = tuple(sorted(a * N + b for a in (-1, 0, 1) for b in (-1, 0, 1))) if dims == 2 else \
            tuple(sorted(a * N * N + b * N + c for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)))
        assert s.off == want


#: the pattern lengths drawn: each is its own compiled kernel (the offsets are a tuple), and all
#: twelve took 51 s of a CI worker with a cold cache; these hold every remainder mod 4 of the
#: kernel's groups of four at 0, 1, 2 and 3 whole groups, and lengths on both sides of
#: STENCIL_GATHERED_TERMS' start (9: gathered on AVX-512)
_PATTERN_LENGTHS = (1, 2, 3, 4, 5, 7, 10, 12)


@st.composite
def _perturbed_stencils(draw):
    """A banded matrix of one pattern (any order of its offsets, repeats allowed) with a few rows
    changed: an entry dropped, added, or moved to another column, or the row emptied."""
    m = draw(st.integers(2, 400))
    n = draw(st.sampled_from([m, m + draw(st.integers(-5, 5))]))
    n = max(n, 1)
    K = draw(st.sampled_from(_PATTERN_LENGTHS))
    base = draw(st.lists(st.integers(-12, 12), min_size=K, max_size=K))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    changed = rng.random(m) < draw(st.sampled_from([0.0, 0.01, 0.05, 0.3]))
    rows = []
    for i in range(m):
        cols = [i + d for d in base if 0 <= i + d < n]
        if changed[i]:
            how = rng.integers(4)
            if how == 0 and cols:
                cols.pop(int(rng.integers(len(cols))))
            elif how == 1:
                cols.insert(int(rng.integers(len(cols) + 1)), int(rng.integers(n)))
            elif how == 2 and cols:
                cols[int(rng.integers(len(cols)))] = int(rng.integers(n))
            else:
                cols = []
        rows.append(cols)
    indptr = np.zeros(m + 1, np.int64)
    indptr[1:] = np.cumsum([len(c) for c in rows])
    indices = np.array([c for r in rows for c in r], np.int64)
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    data = rng.standard_normal(indices.size).astype(dtype)
    data[rng.random(indices.size) < 0.05] = 0.0
    x = rng.standard_normal(n).astype(dtype)
    x[rng.random(n) < 0.05] = -0.0
    return indptr, indices, data, (m, n), x, tuple(base)


@settings(max_examples=60, deadline=None)
@given(mat=_perturbed_stencils(), blocks=st.sampled_from([None, 1, 3, 7]), threads=st.sampled_from([1, 2]))
def test_perturbed_stencils_bit_for_bit(mat, blocks, threads):
    indptr, indices, data, shape, x, base = mat
    with threads_and_small_stencils(threads, blocks):
        A = sp.csr_array((data, indices, indptr), shape=shape)
        s = _check(A, x)
        event("stencil kernel" if s is not None else "CSR kernel")
        m, n = shape
        if s is not None:
            assert s.off == _sampled_pattern(indptr, indices, m)
            rows = _pattern_rows(indptr, indices, n, s.off)
            got = [r for a, b in s.runs.reshape(-1, 2).tolist() for r in range(a, b)]
            assert got == rows
            assert len(rows) * len(s.off) >= sparse_ops.STENCIL_SHARE * indices.size
        else:  # the rule's reasons, from plain loops: no pattern held by half the sampled rows,
            # or the first one the sample takes breaks a limit
            pattern = _sampled_pattern(indptr, indices, m)
            if pattern is not None:
                rows = _pattern_rows(indptr, indices, n, pattern)
                held = len(rows) * len(pattern)
                assert ((len(pattern) in sparse_ops.STENCIL_GATHERED_TERMS and _target.target().has("avx512f"))
                        or held < sparse_ops.STENCIL_SHARE * indices.size
                        or indices.size - held > sparse_ops.STENCIL_OTHER_ROW * (m - len(rows)))


def test_unchanged_band_is_found():
    """Every row of a band of one pattern (the rows at the ends cut short) is found as such."""
    m = 5000
    with small_stencils():
        A = sp.csr_array(sp.diags_array([1.0, -2.0, 1.0, 0.5], offsets=[-7, 0, 1, 40], shape=(m, m)))
        A.sort_indices()
        x = np.random.default_rng(3).standard_normal(m)
        s = _check(A, x)
    assert s is not None and s.off == (-7, 0, 1, 40)
    assert s.runs.tolist() == [7, m - 40]


def test_bits_do_not_depend_on_the_thread_count_or_the_blocks():
    A = _poisson(120, 2, np.float32)
    x = np.random.default_rng(2).standard_normal(A.shape[1]).astype(np.float32)
    results = []
    old = numba.get_num_threads()
    try:
        for threads in range(1, numba.config.NUMBA_NUM_THREADS + 1):
            numba.set_num_threads(threads)
            for blocks in (1, 5, 64):
                with small_stencils(blocks):
                    results.append(mmvref.spmv(A, x))
                    results.append(mmvref.prepare(A) @ x)
    finally:
        numba.set_num_threads(old)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


def test_special_values_propagate_and_negative_zero_rows_give_zero():
    m = 3000
    with small_stencils():
        A = sp.csr_array(sp.diags_array([1.0, 2.0, 3.0], offsets=[-1, 0, 1], shape=(m, m)))
        x = np.ones(m)
        x[100] = np.inf
        x[200] = np.nan
        x[300:303] = 0.0
        A.data[A.indptr[301]:A.indptr[302]] = -1.0  # row 301: products -0.0
        y = mmvref.spmv(A, x)
        P = mmvref.prepare(A)
        np.testing.assert_array_equal(P @ x, y)
    assert np.isinf(y[99]) and np.isinf(y[100]) and np.isinf(y[101])
    assert np.isnan(y[199]) and np.isnan(y[200]) and np.isnan(y[201])
    assert y[301] == 0.0 and not np.signbit(y[301])
    np.testing.assert_array_equal(y, _ordered_rows(A.indptr, A.indices, A.data, x))


@pytest.mark.parametrize("where", ["stencil row", "other row"])
@pytest.mark.parametrize("fault", ["column too large", "negative column", "offsets out of order"])
def test_invalid_structure_is_named(where, fault):
    m = 2000
    A = sp.csr_array(sp.diags_array([1.0, 2.0, 3.0], offsets=[-1, 0, 1], shape=(m, m)))
    indptr, indices, data = A.indptr.copy(), A.indices.copy(), A.data.copy()
    r = 1000 if where == "stencil row" else 0
    if fault == "column too large":
        indices[indptr[r]] = m + 3
        name = "indices"
    elif fault == "negative column":
        indices[indptr[r]] = -1
        name = "indices"
    else:
        indptr[r + 1] = indptr[r + 2] + 1
        name = "indptr"
    x = np.ones(m)
    with small_stencils():
        with pytest.raises(ValueError, match=name):
            mmvref.spmv((indptr, indices, data, (m, m)), x)
        with pytest.raises(ValueError, match=name):
            mmvref.prepare((indptr, indices, data, (m, m)))


def test_prepared_operator_on_a_stencil_matrix():
    """update_values, rmatvec, out=, pickling, threads and cg through the LinearOperator."""
    A = _poisson(60, 2, np.float64)
    rng = np.random.default_rng(4)
    x = rng.standard_normal(A.shape[1])
    with small_stencils():
        P = mmvref.prepare(A)
        assert P._stencil is not None
        np.testing.assert_array_equal(P @ x, _ordered_rows(A.indptr, A.indices, A.data, x))
        new = rng.standard_normal(A.nnz)
        P.update_values(new)
        np.testing.assert_array_equal(P @ x, _ordered_rows(A.indptr, A.indices, new, x))
        B = sp.csr_array((new, A.indices, A.indptr), shape=A.shape)
        np.testing.assert_allclose(P.rmatvec(x), B.T @ x, rtol=1e-12, atol=1e-12)
        out = np.empty(A.shape[0])
        assert P.matvec(x, out=out) is out
        np.testing.assert_array_equal(out, P @ x)
        Q = pickle.loads(pickle.dumps(P))
        np.testing.assert_array_equal(Q @ x, P @ x)
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            for y in ex.map(lambda _: P @ x, range(16)):
                np.testing.assert_array_equal(y, out)
        P.update_values(A.data)
        b = np.ones(A.shape[0])
        from scipy.sparse.linalg import cg
        sol, info = cg(P.aslinearoperator(), b, rtol=1e-10, maxiter=2000)
        assert info == 0
        assert np.linalg.norm(A @ sol - b) <= 1e-8 * np.linalg.norm(b)


def test_no_stencil_below_the_share_and_for_integer_values():
    m = 4000
    rng = np.random.default_rng(5)
    A = sp.random_array((m, m), density=0.002, format="csr", rng=rng)
    with small_stencils():
        assert sparse_ops.stencil_of(A.indptr, A.indices, m, m, A.nnz) is None
        B = sp.csr_array(sp.diags_array([1, 2, 3], offsets=[-1, 0, 1], shape=(m, m), dtype=np.int64))
        P = mmvref.prepare(B)
        xi = rng.integers(-5, 5, m)
        np.testing.assert_array_equal(P @ xi, B @ xi)
        # integer products keep the integer kernel (exact, overflow checked) and never look
        assert P._stencil is prepared_module._UNKNOWN
        xf = rng.standard_normal(m)  # a float result: the stencil kernel, as spmv takes it
        np.testing.assert_array_equal(P @ xf, mmvref.spmv(B, xf))
        assert isinstance(P._stencil, sparse_ops.Stencil)


# ----------------------------------------------------------------------------- constant coefficients

def _prepared_coefficients(P, dtype):
    """The values a prepared stencil matrix's products take for every stencil row (``StencilSpmv.coef``:
    empty where they read each row's values)."""
    runs = [run for _, run in P._spmv[2].values() if run.rdt == np.dtype(dtype)]
    assert len(runs) == 1 and isinstance(runs[0], sparse_ops.StencilSpmv)
    return runs[0].coef


def _bits(values):
    values = np.asarray(values)
    return values.view(np.uint32 if values.dtype.itemsize == 4 else np.uint64)


def _constant_rows_oracle(indptr, indices, data, n, off):
    """Plain loops: the K values every row of the pattern holds, bit for bit, or None."""
    held = None
    for i in _pattern_rows(indptr, indices, n, off):
        row = tuple(_bits(data[int(indptr[i]):int(indptr[i + 1])]).tolist())
        if held is None:
            held = row
        elif row != held:
            return None
    return held


def _other_nan(dtype):
    """A quiet NaN whose bits differ from np.nan's."""
    return np.array([0x7FC00001 if dtype == np.float32 else 0x7FF8000000000001],
                    np.uint32 if dtype == np.float32 else np.uint64).view(dtype)[0]


@st.composite
def _constant_stencils(draw):
    """A banded matrix of one pattern whose rows all hold the same values (0.0, -0.0, NaN and inf
    among them), with, maybe, one value of one row changed to one that compares equal but has other
    bits (0.0 <-> -0.0), to a NaN of other bits, to a value one ulp away, or to another value; and
    maybe a few rows of another pattern (another length, other values)."""
    m = draw(st.integers(2, 300))
    n = m
    K = draw(st.sampled_from((1, 3, 5, 7)))
    base = sorted(draw(st.lists(st.integers(-10, 10), min_size=K, max_size=K, unique=True)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    pool = [0.0, -0.0, 1.0, -4.0, np.inf, np.nan, 0.1]
    coef = np.array([draw(st.sampled_from(pool)) for _ in range(K)], dtype)
    other = rng.random(m) < draw(st.sampled_from([0.0, 0.05]))
    rows, vals = [], []
    for i in range(m):
        cols = [i + d for d in base if 0 <= i + d < n]
        full = len(cols) == K and not other[i]
        if other[i] and cols:
            cols = cols[:-1]
        rows.append(cols)
        vals.append(coef.copy() if full else rng.standard_normal(len(cols)).astype(dtype))
    indptr = np.zeros(m + 1, np.int64)
    indptr[1:] = np.cumsum([len(c) for c in rows])
    indices = np.array([c for r in rows for c in r], np.int64)
    data = np.concatenate(vals).astype(dtype) if indices.size else np.zeros(0, dtype)
    change = draw(st.sampled_from(["none", "signed zero", "nan bits", "ulp", "other"]))
    if change != "none" and data.size:
        q = int(rng.integers(data.size))
        v = data[q]
        if change == "signed zero":
            data[q] = -v if v == 0 else v
        elif change == "nan bits":
            data[q] = _other_nan(dtype) if np.isnan(v) else v
        elif change == "ulp":
            data[q] = np.nextafter(v, dtype(np.inf)) if np.isfinite(v) else v
        else:
            data[q] = dtype(2.5)
    x = rng.standard_normal(n).astype(dtype)
    x[rng.random(n) < 0.1] = -0.0
    return indptr, indices, data, (m, n), x


@settings(max_examples=60, deadline=None)
@given(mat=_constant_stencils(), blocks=st.sampled_from([None, 1, 3]), threads=st.sampled_from([1, 2]))
def test_constant_coefficients_bit_for_bit(mat, blocks, threads):
    """A prepared stencil matrix whose stencil rows all hold the same values (bit for bit) reads
    them once: the same bits as spmv and the documented order; any row that differs, even by a
    zero's sign or a NaN's payload, keeps the per-row values."""
    indptr, indices, data, shape, x = mat
    with threads_and_small_stencils(threads, blocks):
        A = sp.csr_array((data, indices, indptr), shape=shape)
        s = sparse_ops.stencil_of(indptr, indices, shape[0], shape[1], indices.size)
        if s is None:
            event("CSR kernel")
            return
        with np.errstate(invalid="ignore", over="ignore"):  # (inf * 0 and inf - inf: NaN, as the kernels give)
            want = _ordered_rows(indptr, indices, data, x)  # (inf and NaN values: bits, not _check's bound)
        P = mmvref.prepare(A)
        np.testing.assert_array_equal(mmvref.spmv(A, x), want)
        np.testing.assert_array_equal(P @ x, want)
        np.testing.assert_array_equal(P @ x, want)  # (the bound call)
        held = _constant_rows_oracle(indptr, indices, data, shape[1], s.off)
        coef = _prepared_coefficients(P, data.dtype)
        event("constant" if held is not None else "per-row values")
        if held is None:
            assert coef.size == 0
        else:
            assert tuple(_bits(coef).tolist()) == held


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_constant_poisson_reads_its_values_once_until_update_values(dtype):
    """The 2-D Poisson matrix (constant coefficients): the products take them once, give spmv's
    bits, and update_values looks again (non-constant values, then constant ones again)."""
    A = _poisson(190, 2, dtype)
    rng = np.random.default_rng(8)
    x = rng.standard_normal(A.shape[1]).astype(dtype)
    P = mmvref.prepare(A)
    y = P @ x
    np.testing.assert_array_equal(y, mmvref.spmv(A, x))
    np.testing.assert_array_equal(y, _ordered_rows(A.indptr, A.indices, A.data, x))
    off = P._stencil.off
    assert _bits(_prepared_coefficients(P, dtype)).tolist() == list(_constant_rows_oracle(
        A.indptr, A.indices, A.data, A.shape[1], off))
    assert sorted(_prepared_coefficients(P, dtype).tolist()) == [-1, -1, -1, -1, 4]
    varied = A.data * (1 + rng.random(A.nnz)).astype(dtype)
    P.update_values(varied)
    assert not P._spmv[2]  # (the bound products dropped: the values are looked at on the next product)
    np.testing.assert_array_equal(P @ x, _ordered_rows(A.indptr, A.indices, varied, x))
    assert _prepared_coefficients(P, dtype).size == 0
    P.update_values(3 * A.data)
    np.testing.assert_array_equal(P @ x, _ordered_rows(A.indptr, A.indices, 3 * A.data, x))
    assert sorted(_prepared_coefficients(P, dtype).tolist()) == [-3, -3, -3, -3, 12]
    np.testing.assert_array_equal(P.rmatvec(x), mmvref.spmv(sp.csr_array(3 * A.T), x))
    # the values written into the array the matrix holds, then given to update_values: looked at again
    held = P.data
    held[P.indptr[500] + 1] = dtype(7)
    P.update_values(held)
    np.testing.assert_array_equal(P @ x, _ordered_rows(A.indptr, A.indices, held, x))
    assert _prepared_coefficients(P, dtype).size == 0


def test_constant_stencil_first_products_from_threads_at_once():
    """Several threads making a new prepared matrix's first products at once (each may look for
    constant values) all get the ordered sums, and the later products too."""
    A = _poisson(190, 2, np.float64)
    x = np.random.default_rng(9).standard_normal(A.shape[1])
    want = _ordered_rows(A.indptr, A.indices, A.data, x)
    for _ in range(3):
        P = mmvref.prepare(A)
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            for y in ex.map(lambda _: P @ x, range(12)):
                np.testing.assert_array_equal(y, want)
        assert _prepared_coefficients(P, np.float64).size == 5
        np.testing.assert_array_equal(P @ x, want)
