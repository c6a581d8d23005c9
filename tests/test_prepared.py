"""``mmvref.prepare`` / ``PreparedMatrix`` (issue 32) against plain loops (tests/oracle.py) and scipy.

The products of a prepared matrix run ``spmv``'s and ``spmm``'s code with plans made once; these tests
check them at every kind of chunk border (a row cut once, twice, by every border; empty rows at
borders; one giant row; every row empty; fewer entries than chunks) for 1 to 16 chunks, integers
exactly and floats within spmv's per-row bound, and the operator's contract: update_values, rmatvec,
out=, torch in/out, scipy's solvers through aslinearoperator, pickling, calls from many threads,
a changed thread count, and bad input named.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import pickle

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from oracle import oracle_spmv

import mmvref
import mmvref._fast.sparse.ops as sparse_ops

U = {np.dtype("float32"): 2.0**-24, np.dtype("float64"): 2.0**-53}


@contextlib.contextmanager
def chunks(per_thread):
    """Cut even tiny matrices into ``threads x per_thread`` chunks (``spmv_plan``)."""
    old = sparse_ops.MIN_CHUNK_COST, sparse_ops.CHUNKS_PER_THREAD
    sparse_ops.MIN_CHUNK_COST, sparse_ops.CHUNKS_PER_THREAD = 1, per_thread
    try:
        yield
    finally:
        sparse_ops.MIN_CHUNK_COST, sparse_ops.CHUNKS_PER_THREAD = old


def _within_bound(got, indptr, indices, data, x):
    """|y_i - exact_i| <= gamma_k sum |a_ij x_j| per row (k entries), exact in float64 products of
    the float32/float64 inputs (the oracle's own error is far below that bound for these sizes)."""
    rdt = got.dtype
    u = U[rdt]
    exact = np.array(oracle_spmv(indptr, indices, data.astype(np.float64), x.astype(np.float64)))
    absum = np.array(oracle_spmv(indptr, indices, np.abs(data.astype(np.float64)), np.abs(x.astype(np.float64))))
    k = np.diff(np.asarray(indptr, np.int64))
    gamma = k * u / (1 - k * u)
    return np.all(np.abs(got.astype(np.float64) - exact) <= gamma * absum * (1 + 1e-6) + 1e-300)


# ----------------------------------------------------------------------------- structures at chunk borders

def _structure(kind, rng):
    """(indptr, indices, n) of a matrix whose rows meet the chunk borders in one way."""
    n = 37
    if kind == "giant":  # one row holding every entry, between empty rows
        lens = [0, 0, 300, 0, 0]
    elif kind == "empty":  # every row empty
        lens = [0] * 9
    elif kind == "few":  # fewer entries than chunks
        lens = [0, 1, 0, 0, 1, 0, 0, 0]
    elif kind == "empty-borders":  # runs of empty rows between short ones
        lens = [3, 0, 0, 0, 5, 0, 0, 1, 0, 0, 0, 0, 7, 0]
    elif kind == "mixed":  # long rows spanning one, two, several chunks, with short ones between
        lens = [1, 40, 2, 0, 90, 3, 3, 0, 0, 150, 1, 2, 60]
    else:  # "short": many rows of 0-3 entries
        lens = list(rng.integers(0, 4, 120))
    indptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=indptr[1:])
    indices = rng.integers(0, n, int(indptr[-1]))
    return indptr, indices, n


KINDS = ["giant", "empty", "few", "empty-borders", "mixed", "short"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("per_thread", [1, 2, 3, 5, 8])
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64"])
def test_matvec_at_every_kind_of_chunk_border(kind, per_thread, dtype):
    rng = np.random.default_rng(hash((kind, per_thread, dtype)) % 2**32)
    indptr, indices, n = _structure(kind, rng)
    m = indptr.size - 1
    data = rng.integers(-9, 10, indices.size).astype(dtype)
    if dtype.startswith("float"):
        data = (data * rng.random(indices.size)).astype(dtype)
    x = rng.integers(-9, 10, n).astype(dtype)
    with chunks(per_thread):
        P = mmvref.prepare((indptr, indices, data, (m, n)))
        R, E = P._spmv_plan()[1]
        assert R[0] == 0 and R[-1] == m and E[-1] == indices.size
        y = P @ x
        assert np.array_equal(y, mmvref.spmv((indptr, indices, data, (m, n)), x))  # one code path: the same bits
        assert np.array_equal(P @ x, y)  # the second call: the bound SpMV's short path (floats)
        ro = x.copy()
        ro.flags.writeable = False
        assert np.array_equal(P @ ro, y) and np.array_equal(P @ x[::-1][::-1], y)  # read-only, a view
    if dtype.startswith("int"):
        assert y.dtype == np.dtype(dtype) and y.tolist() == oracle_spmv(indptr, indices, data, x)
    else:
        assert y.dtype == np.dtype(dtype) and _within_bound(y, indptr, indices, data, x)


@pytest.mark.parametrize("per_thread", [1, 4])
@pytest.mark.parametrize("k", [1, 3, 16])
def test_matmat_and_rmatvec_equal_plain_loops(per_thread, k):
    rng = np.random.default_rng(k)
    A = sp.random(70, 50, 0.1, format="csr", random_state=k)
    A.data = rng.integers(-9, 10, A.nnz).astype(np.int64)
    A = A.astype(np.int64)
    X = rng.integers(-9, 10, (50, k))
    Y = rng.integers(-9, 10, (70, k))
    with chunks(per_thread):
        P = mmvref.prepare(A)
        got = P @ X
        assert got.dtype == np.int64
        for j in range(k):
            assert got[:, j].tolist() == oracle_spmv(A.indptr, A.indices, A.data, X[:, j])
        At = A.T.tocsr()
        for j in range(k):
            assert P.rmatvec(Y[:, j]).tolist() == oracle_spmv(At.indptr, At.indices, At.data, Y[:, j])
        assert np.array_equal(P.rmatmat(Y), At @ Y)
        assert np.array_equal(P.T @ Y[:, 0], At @ Y[:, 0])


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_update_values_keeps_the_pattern_and_the_transpose(data):
    seed = data.draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    A = sp.random(30, 20, 0.2, format="csr", random_state=seed)
    A.data = rng.integers(-5, 6, A.nnz).astype(np.float64)
    P = mmvref.prepare(A)
    P.rmatvec(np.ones(30))  # the transpose exists before the update
    new = rng.integers(-5, 6, A.nnz).astype(np.float64)
    B = A.copy()
    B.data = new
    assert P.update_values(new) is P
    x, y = rng.integers(-5, 6, 20).astype(np.float64), rng.integers(-5, 6, 30).astype(np.float64)
    assert (P @ x).tolist() == (B @ x).tolist()  # small integers in floats: every sum exact
    assert P.rmatvec(y).tolist() == (B.T @ y).tolist()


def test_out_torch_and_dtypes():
    torch = pytest.importorskip("torch")
    A = sp.random(200, 100, 0.05, format="csr", random_state=1, dtype=np.float32)
    P = mmvref.prepare(A)
    assert P.shape == (200, 100) and P.nnz == A.nnz and P.dtype == np.float32 and P.indices.dtype == np.int32
    x = np.random.default_rng(0).random(100).astype(np.float32)
    out = np.empty(200, np.float32)
    assert P.matvec(x, out=out) is out and np.array_equal(out, P @ x)
    X = np.random.default_rng(1).random((100, 4)).astype(np.float32)
    out2 = np.empty((200, 4), np.float32)
    assert P.matmat(X, out=out2) is out2 and np.array_equal(out2, P @ X)
    t = P @ torch.from_numpy(x)
    assert isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), P @ x)
    assert (P @ x.astype(np.float64)).dtype == np.float64  # numpy's promotion, as spmv
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                 torch.from_numpy(A.indices.astype(np.int64)), torch.from_numpy(A.data), size=A.shape,
                                 check_invariants=True)
    assert np.array_equal(mmvref.prepare(At) @ x, P @ x)
    assert np.array_equal(mmvref.prepare(A.tocoo()) @ x, P @ x)  # any scipy format: converted
    assert np.array_equal(mmvref.prepare(A.toarray()) @ x, P @ x)  # dense: converted
    col = P.matvec(x.reshape(-1, 1))  # scipy's LinearOperator passes (n, 1) columns
    assert col.shape == (200, 1) and np.array_equal(col[:, 0], P @ x)


def test_integer_overflow_follows_spmv():
    A = (np.array([0, 2]), np.array([0, 1]), np.array([2**31 - 1, 1], np.int32), (1, 2))
    x = np.array([1, 1], np.int32)
    with pytest.raises(OverflowError):
        mmvref.prepare(A) @ x
    assert (mmvref.prepare(A, overflow="wrap") @ x).tolist() == [-(2**31)]


def test_scipy_solvers_use_the_operator():
    from scipy.sparse.linalg import cg, eigsh, gmres, lsqr, minres

    n = 30  # 2-D Poisson, 5-point stencil: symmetric positive definite
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    L = (sp.kron(sp.identity(n), T) + sp.kron(T, sp.identity(n))).tocsr()
    b = np.random.default_rng(0).random(n * n)
    op = mmvref.prepare(L).aslinearoperator()
    for solve in (cg, minres, gmres):  # converged as with scipy's own matrix (each solver's own criterion)
        x, info = solve(op, b, rtol=1e-10, maxiter=5000)
        x_ref, info_ref = solve(L, b, rtol=1e-10, maxiter=5000)
        assert info == info_ref == 0, solve.__name__
        assert np.linalg.norm(L @ x - b) <= 2 * np.linalg.norm(L @ x_ref - b) + 1e-12, solve.__name__
        np.testing.assert_allclose(x, x_ref, rtol=1e-6, atol=1e-9)
    x = lsqr(op, b, atol=1e-12, btol=1e-12, iter_lim=5000)[0]
    assert np.linalg.norm(L @ x - b) <= 1e-6 * np.linalg.norm(b)
    w = eigsh(op, k=3, which="LM", return_eigenvectors=False)
    want = np.sort(np.linalg.eigvalsh(L.toarray()))[-3:]
    np.testing.assert_allclose(np.sort(w), want, rtol=1e-8)


def test_pickle_and_a_changed_thread_count():
    A = sp.random(3000, 3000, 0.002, format="csr", random_state=2)
    x = np.random.default_rng(0).random(3000)
    with chunks(4):
        P = mmvref.prepare(A)
        y = P @ x
        Q = pickle.loads(pickle.dumps(P))
        assert Q._spmv is None and np.array_equal(Q @ x, y)
        T = numba.get_num_threads()
        if numba.config.NUMBA_NUM_THREADS > 1:
            numba.set_num_threads(1)
            try:
                y1 = P @ x  # re-partitioned for one thread
                assert P._spmv[0] == 1 and P._spmv[1][0].size - 1 == 4
                assert np.array_equal(y1, mmvref.spmv(A, x))
            finally:
                numba.set_num_threads(T)
            assert np.array_equal(P @ x, y) and P._spmv[0] == T


def test_concurrent_calls_from_threads():
    A = sp.random(20000, 20000, 0.0005, format="csr", random_state=np.random.default_rng(3))  # a Generator: RandomState would permute all 4e8 positions (30 s)
    P = mmvref.prepare(A)
    xs = [np.random.default_rng(i).random(20000) for i in range(16)]
    want = [A @ x for x in xs]

    def one(i):
        return (P @ xs[i]) if i % 2 else P.rmatvec(xs[i])

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        got = list(ex.map(one, range(16)))
    for i, g in enumerate(got):
        ref = want[i] if i % 2 else A.T @ xs[i]
        np.testing.assert_allclose(g, ref, rtol=1e-12, atol=1e-12)


def test_one_chunk_matrices_share_their_scratch_across_threads():
    """Small matrices (one chunk for every thread count) pass every thread the same boundary parts
    (``ops.FloatSpmv.one_tail``), and their bound calls skip the threading guard: products of several
    such matrices called from many threads each give the bits of the product alone, within the
    plain-loop bound. (The kernels hold the GIL today, so calls do not overlap; the kernel does not
    rely on it: it writes its first row to y and reads none of the shared parts back.)"""
    rng = np.random.default_rng(11)
    mats, xs = [], []
    for i, dt in enumerate([np.float32, np.float64] * 3):
        A = sp.random(400, 300, 0.03, format="csr", random_state=rng, dtype=np.float64).astype(dt)
        A = sp.csr_array(A + sp.csr_array((rng.standard_normal(4) * (i + 1), ([0, 0, 1, 1], [0, 1, 2, 3])),
                                           shape=A.shape).astype(dt))  # a first row that spans entries
        mats.append(A)
        xs.append(rng.standard_normal(300).astype(dt))
    assert all(sparse_ops.one_chunk_for_any_threads(A.shape[0], A.nnz) for A in mats)
    Ps = [mmvref.prepare(A) for A in mats]
    alone = [P @ x for P, x in zip(Ps, xs)]
    for A, x, y in zip(mats, xs, alone):
        assert _within_bound(y, A.indptr, A.indices, A.data, x)

    def many(t):
        bad = 0
        for r in range(300):
            i = (t + r) % len(Ps)
            bad += not np.array_equal(Ps[i] @ xs[i], alone[i])
        return bad

    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        assert sum(ex.map(many, range(16))) == 0


def test_bad_input_is_named():
    A = sp.random(10, 8, 0.3, format="csr", random_state=4)
    P = mmvref.prepare(A)
    with pytest.raises(ValueError, match="x has length 7"):
        P @ np.ones(7)
    with pytest.raises(ValueError, match="X must have 8 rows"):
        P @ np.ones((7, 2))
    with pytest.raises(TypeError, match="x has unsupported dtype"):
        P @ np.ones(8, np.uint16)
    with pytest.raises(ValueError, match="update_values: data must be 1-D with"):
        P.update_values(np.ones(A.nnz + 1))
    with pytest.raises(TypeError, match="data has unsupported dtype"):
        P.update_values(np.ones(A.nnz, np.complex128))
    with pytest.raises(ValueError, match="out must be"):
        P.matvec(np.ones(8), out=np.empty(10, np.float32))
    with pytest.raises(ValueError, match="indices"):
        mmvref.prepare((np.array([0, 1]), np.array([9]), np.array([1.0]), (1, 8)))
    with pytest.raises(ValueError, match="indices"):  # an index that a narrowing to int32 would wrap into range
        mmvref.prepare((np.array([0, 1]), np.array([2**32 + 1]), np.array([1.0]), (1, 8)))
    with pytest.raises(ValueError, match="indptr"):
        mmvref.prepare((np.array([0, 2, 1, 3]), np.array([0, 1, 2]), np.ones(3), (3, 8)))
    with pytest.raises(ValueError, match="overflow"):
        mmvref.prepare(A, overflow="saturate")
    with pytest.raises(TypeError, match="CSR"):
        mmvref.prepare("not a matrix")


def test_conformance_checks_the_prepared_path():
    """The suite's spmv and spmm through ``mmvref.prepare`` (backend ``mmvref-prepared``): the same
    inputs, references and bounds as the one-shot ops; an injected fault in that backend is caught."""
    from conformance import backends, faults, runner

    b = backends.resolve("mmvref-prepared")
    assert type(b).__name__ == "MmvrefPreparedBackend"
    for op in ("spmv", "spmm"):
        rep = runner.run_op(b, "mmvref-prepared", op, max_examples=25, seed=0, db=None, tier=None)
        assert rep.status == "pass" and rep.examples == 25, (op, rep.message)
    broken = faults.FaultyBackend(b, "spmv_rows_of_1024_zero", 8)
    rep = runner.run_op(broken, "faulty", "spmv", max_examples=60, seed=0, db=None, tier="default")
    assert rep.status == "fail"


@pytest.mark.parametrize("serial_cost", [0, 1 << 40])
def test_structure_checked_by_numpy_and_by_the_kernel(serial_cost, monkeypatch):
    """prepare checks small matrices with numpy (no kernel to compile) and large ones with the
    structure kernel: both refuse the same matrices, naming the array."""
    monkeypatch.setattr(sparse_ops, "SERIAL_COST", serial_cost)
    for indptr, indices, what in [([0, 1, 3], [0, 8, 1], "indices"), ([0, 1, 3], [0, -1, 1], "indices"),
                                  ([0, 3, 2, 3], [0, 1, 2], "indptr")]:
        m = len(indptr) - 1
        A = (np.array(indptr), np.array(indices), np.ones(len(indices)), (m, 8))
        with pytest.raises(ValueError, match=what):
            mmvref.prepare(A)
    ok = mmvref.prepare((np.array([0, 1, 3]), np.array([0, 7, 1]), np.ones(3), (2, 8)))
    assert (ok @ np.arange(8.0)).tolist() == [0.0, 8.0]


def test_a_new_matrix_binds_its_kernel_without_typing_its_arguments(monkeypatch):
    """The first product of a prepared matrix binds the compiled kernel: by one lookup of its
    argument kinds once a matrix with the same kinds was bound in the process (Numba's typeof of
    every argument is not called again), and the bound kernel is the one for those kinds (a
    float32 matrix after a float64 one gets its own): every result is the plain-loop oracle's,
    within the per-row bound."""
    rng = np.random.default_rng(12)

    def matrix(dtype, index_dtype, seed):
        A = sp.random(300, 200, density=0.03, format="csr", random_state=np.random.default_rng(seed), dtype=dtype)
        return (A.indptr.astype(index_dtype), A.indices.astype(index_dtype), A.data, A.shape)

    x64 = rng.standard_normal(200)
    for dtype, index_dtype in (("float64", "int32"), ("float32", "int32"), ("float64", "int64")):  # int64: kept int32
        x = x64.astype(dtype)
        first = mmvref.prepare(matrix(dtype, index_dtype, 0))
        first @ x  # binds by typing its arguments
        typed = []
        monkeypatch.setattr(numba.core.dispatcher.Dispatcher, "typeof_pyval",
                            lambda self, v: typed.append(v) or numba.typeof(v))
        for seed in (1, 2):
            ip, ind, data, shape = matrix(dtype, index_dtype, seed)
            P = mmvref.prepare((ip, ind, data, shape))
            assert P.indices.dtype == np.int32  # kept as int32 where the matrix fits
            for _ in range(2):  # the first product (bound here) and a later one (the bound entry point)
                y = P @ x
                want = np.asarray(oracle_spmv(ip, ind, data.astype(np.float64), x.astype(np.float64)), np.float64)
                k = np.diff(ip).astype(np.float64)
                u = np.finfo(dtype).eps / 2
                mag = np.asarray(oracle_spmv(ip, ind, np.abs(data.astype(np.float64)), np.abs(x.astype(np.float64))))
                assert y.dtype == np.dtype(dtype)
                assert np.all(np.abs(y - want) <= k * u / (1 - k * u) * mag)
        assert typed == []
        monkeypatch.undo()


@pytest.mark.parametrize("per_thread", [None, 4])
def test_out_that_overlaps_x_gets_the_product_of_the_x_it_held(per_thread):
    """``P.matvec(x, out=x)`` (or an ``out`` that overlaps x) on a square matrix: the kernel still reads x
    while it writes y, so the product goes to a new array first and is then copied into ``out``; the
    first product (which binds the kernel) and the later ones (the bound fast path) alike, for one
    chunk and for several."""
    rng = np.random.default_rng(21)
    A = sp.random(2000, 2000, 0.01, format="csr", random_state=rng)
    with chunks(per_thread) if per_thread else contextlib.nullcontext():
        P = mmvref.prepare(A)
        for _ in range(3):
            x = rng.standard_normal(2000)
            want = oracle_spmv(A.indptr, A.indices, A.data, x)
            xb = x.copy()
            assert P.matvec(xb, out=xb) is xb
            assert _within_bound(xb, A.indptr, A.indices, A.data, x)
            np.testing.assert_allclose(xb, want, rtol=1e-12, atol=1e-12)
            buf = np.concatenate([x, np.zeros(1)])  # out shifted by one element over x
            assert P.matvec(buf[:-1], out=buf[1:]) is not None
            np.testing.assert_allclose(buf[1:], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("per_thread", [None, 4])
def test_bound_products_follow_out_update_values_and_the_thread_count(per_thread):
    """After the first product binds the kernel, later products (the fast path: a new result or a
    plain ``out``) give the first product's bits; ``update_values`` and a changed thread count are
    seen by the next product (the plain-loop oracle's result within the per-row bound)."""
    rng = np.random.default_rng(22)
    A = sp.random(3000, 2500, 0.004, format="csr", random_state=rng, dtype=np.float32)
    x = rng.standard_normal(2500).astype(np.float32)
    with chunks(per_thread) if per_thread else contextlib.nullcontext():
        P = mmvref.prepare(A)
        first = P @ x
        assert _within_bound(first, A.indptr, A.indices, A.data, x)
        out = np.full(3000, np.nan, np.float32)
        assert P.matvec(x, out=out) is out and np.array_equal(out, first)
        assert np.array_equal(P @ x, first) and np.array_equal(P.matvec(x), first)
        new = rng.standard_normal(A.nnz).astype(np.float32)
        P.update_values(new)
        y = P @ x
        assert _within_bound(y, A.indptr, A.indices, new, x) and not np.array_equal(y, first)
        assert np.array_equal(P.matvec(x, out=out), y)
        if numba.config.NUMBA_NUM_THREADS > 1:
            T = numba.get_num_threads()
            numba.set_num_threads(1)
            try:
                y1 = P @ x
                assert P._spmv[0] == 1 or P._spmv[3]  # re-partitioned, or one chunk whatever the count
                assert _within_bound(y1, A.indptr, A.indices, new, x)
            finally:
                numba.set_num_threads(T)


def test_matmat_out_that_overlaps_x():
    """``P.matmat(X, out=X)`` on a square matrix gives A X of the X it was given (the product is made
    in a new array, then copied), as a plain ``out`` does."""
    rng = np.random.default_rng(23)
    A = sp.random(2000, 2000, 0.01, format="csr", random_state=rng)
    P = mmvref.prepare(A)
    for _ in range(2):
        X = rng.standard_normal((2000, 3))
        want = np.stack([oracle_spmv(A.indptr, A.indices, A.data, X[:, j]) for j in range(3)], axis=1)
        Xb = X.copy()
        assert P.matmat(Xb, out=Xb) is Xb
        np.testing.assert_allclose(Xb, want, rtol=1e-12, atol=1e-12)


@pytest.mark.native_only  # SpMM: one portable path (no kernel chosen by the compile target)
@pytest.mark.parametrize("per_thread", [None, 4])
@pytest.mark.parametrize("k", [1, 16, 24])
def test_bound_matmat_follows_out_update_values_and_the_thread_count(per_thread, k):
    """After a first ``P @ X`` with k columns binds the SpMM kernel, later products (a new result, a
    plain ``out``) give ``spmm``'s bits for the same thread count; ``update_values`` and a changed thread
    count are seen by the next product; X of another dtype or layout takes the full path (oracle columns
    within the per-row bound)."""
    rng = np.random.default_rng(24)
    A = sp.random(1500, 1200, 0.01, format="csr", random_state=rng, dtype=np.float32)
    X = rng.standard_normal((1200, k)).astype(np.float32)

    def ok(Y, data, X):
        return all(_within_bound(Y[:, j], A.indptr, A.indices, data, X[:, j]) for j in range(X.shape[1]))

    with chunks(per_thread) if per_thread else contextlib.nullcontext():
        old_cost = sparse_ops.SERIAL_COST
        if per_thread:
            sparse_ops.SERIAL_COST = 1  # row tasks even for this small product
        try:
            P = mmvref.prepare(A)
            first = P @ X
            assert ok(first, A.data, X) and np.array_equal(first, mmvref.spmm(A, X))
            out = np.full((1500, k), np.nan, np.float32)
            assert P.matmat(X, out=out) is out and np.array_equal(out, first)
            assert np.array_equal(P @ X, first)
            assert np.array_equal(P @ np.asfortranarray(X), first)  # another layout: the full path
            assert np.array_equal(P @ X.astype(np.float64), mmvref.spmm(A, X.astype(np.float64)))
            new = rng.standard_normal(A.nnz).astype(np.float32)
            P.update_values(new)
            Y = P @ X
            assert ok(Y, new, X) and not np.array_equal(Y, first)
            assert np.array_equal(P.matmat(X, out=out), Y)
            if numba.config.NUMBA_NUM_THREADS > 1:
                T = numba.get_num_threads()
                numba.set_num_threads(1)
                try:
                    assert ok(P @ X, new, X)
                finally:
                    numba.set_num_threads(T)
        finally:
            sparse_ops.SERIAL_COST = old_cost


def test_a_new_matrix_binds_its_spmm_kernel_without_typing_its_arguments(monkeypatch):
    """``P @ X``'s first product binds the SpMM kernel (``ops.BoundSpmm``) by one lookup of its
    arguments' kinds once a matrix with the same kinds was bound in the process (Numba's typeof of
    the ten arguments is not called again); later products are the plain-loop oracle's within the
    per-row bound."""
    rng = np.random.default_rng(25)
    X = rng.standard_normal((200, 16)).astype(np.float32)

    def matrix(seed):
        return sp.random(300, 200, density=0.03, format="csr", random_state=np.random.default_rng(seed),
                         dtype=np.float32)

    mmvref.prepare(matrix(0)) @ X  # binds by typing its arguments
    typed = []
    monkeypatch.setattr(numba.core.dispatcher.Dispatcher, "typeof_pyval",
                        lambda self, v: typed.append(v) or numba.typeof(v))
    for seed in (1, 2):
        A = matrix(seed)
        P = mmvref.prepare(A)
        for _ in range(2):
            Y = P @ X
            assert all(_within_bound(Y[:, j], A.indptr, A.indices, A.data, X[:, j]) for j in range(16))
    assert typed == []


# ----------------------------------------------------------------------------- the short-row batches' plan

def _batches_of_chunks(indptr, R, long_row):
    """Per chunk, the short-row batches the float kernel walks (plain Python): (end row q, ...) of
    each batch of its whole rows R[c]+1 .. R[c+1]-1 holding at most BATCH entries (one row longer
    than BATCH a batch of its own); [] for a chunk whose whole rows are long."""
    from mmvref._fast.sparse import _portable_spmv as K

    out = []
    for c in range(R.size - 1):
        ra, rb = int(R[c]) + 1, int(R[c + 1])
        qs = []
        if ra < rb and int(indptr[rb]) - int(indptr[ra]) < long_row * (rb - ra):
            t = ra
            while t < rb:
                lo = int(indptr[t])
                q = max(r for r in range(t, rb + 1) if int(indptr[r]) - lo <= K.BATCH)
                qs.append(q if q > t else t)
                t = q if q > t else t + 1
        out.append(qs)
    return out


@st.composite
def _banded_and_scattered_rows(draw):
    """(indptr, indices, n): runs of rows of one kind: regular short rows in a band (the scalar
    batches), short rows of scattered columns and varying length (the two-phase batches), empty
    rows, and rows of BATCH / 2 + 1 entries (one a batch: the most batches per entry) or of more
    than BATCH (a batch of their own); enough entries for several batches per chunk."""
    from mmvref._fast.sparse import _portable_spmv as K

    n = 5000
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lens, cols = [], []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["band", "scattered", "empty", "half", "giant"]))
        rows = {"band": 3000, "scattered": 2000, "empty": 50, "half": 3, "giant": 1}[kind]
        rows = draw(st.integers(1, rows))
        for r in range(rows):
            if kind == "band":
                k = int(rng.integers(3, 6))
                c0 = (len(lens) * 3) % (n - 8)
                cols.append(np.arange(c0, c0 + k))
            elif kind == "scattered":
                k = int(rng.integers(0, 12))
                cols.append(rng.integers(0, n, k))
            elif kind == "empty":
                k = 0
                cols.append(np.zeros(0, np.int64))
            else:
                k = K.BATCH // 2 + 1 if kind == "half" else K.BATCH + int(rng.integers(1, 50))
                cols.append(rng.integers(0, n, k))
            lens.append(k)
    indptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
    indices = np.concatenate(cols).astype(np.int32) if cols else np.zeros(0, np.int32)
    return indptr, indices, n


@settings(max_examples=12, deadline=None)
@given(mat=_banded_and_scattered_rows(), n_chunks=st.integers(1, 9), dtype=st.sampled_from(["float32", "float64"]))
def test_batch_plan_is_recorded_in_each_chunks_slots_and_replayed_bit_for_bit(mat, n_chunks, dtype):
    """The float kernel's three batch modes on the same chunks: planning each batch (mode 0, as
    ``spmv``), recording the plan (1) and replaying it (2, a prepared matrix's later products) give
    the same bits; the recorded plan holds each chunk's batches (end rows from a plain walk) in that
    chunk's own slots, so no chunk writes another's."""
    from mmvref._fast.sparse import _portable_spmv as K

    indptr, indices, n = mat
    m, nnz = indptr.size - 1, int(indptr[-1])
    rng = np.random.default_rng(1)
    data = rng.standard_normal(nnz).astype(dtype)
    x = rng.standard_normal(n).astype(dtype)
    if n_chunks == 1:
        R, E = np.array([0, m], np.int64), np.array([0, nnz], np.int64)
    else:
        R, E = K.partition(indptr, n_chunks, K.ROW_COST)
    P = sparse_ops._path()
    C = R.size - 1
    kernel = K.float_rows if C > 1 else K.float_rows_serial
    size = K.batch_plan_size(nnz, C)
    plan = np.full(size, -1, np.int64)
    got = []
    for mode in (0, 1, 2):
        y = np.full(m, np.nan, dtype)
        first, last = np.zeros(C, dtype), np.zeros(C, dtype)
        umax, bad = np.zeros(C, np.uint64), np.zeros(C, np.bool_)
        kernel(indptr, indices, data, x, y, R, E, first, last, umax, bad, P.GATHER, P.LONG_ROW, P.SCALAR_SHORT,
               plan if mode else np.zeros(0, np.int64), mode)
        assert not bad.any()
        got.append((y, first, last))
        if mode == 1:
            recorded = plan.copy()
    for a, b in zip(got[0], got[1]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got[0], got[2]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(plan, recorded)  # replaying writes nothing
    walked = _batches_of_chunks(indptr, R, P.LONG_ROW)
    for c in range(C):
        lo = (2 * int(E[c])) // K.BATCH + 3 * c
        hi = (2 * int(E[c + 1])) // K.BATCH + 3 * (c + 1) if c + 1 < C else size
        qs = walked[c]
        assert len(qs) <= hi - lo
        assert list(recorded[lo:lo + len(qs)] >> 1) == qs
        assert (recorded[lo + len(qs):hi] == -1).all()


def test_prepared_products_replay_the_plan_and_equal_spmv():
    """A prepared matrix's first product records the plan (mode 1), the later ones replay it
    (mode 2), bound or through the dispatcher (a strided x), and every one equals ``spmv``."""
    rng = np.random.default_rng(5)
    side = 150
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(side, side))
    A = (sp.kron(sp.identity(side), T) + sp.kron(T, sp.identity(side))).tocsr()  # banded: scalar batches
    B = sp.random(side * side, side * side, density=4 / (side * side), format="csr",
                  random_state=np.random.default_rng(3))  # a Generator: RandomState permutes all 5e8 cells (24 s)
    for M in (A, sp.vstack([A, B]).tocsr()):
        x = rng.standard_normal(M.shape[1])
        with chunks(3):
            want = mmvref.spmv(M, x)
            P = mmvref.prepare(M)
            run_modes = []
            for xi in (x, x, np.repeat(x, 2)[::2], x):
                np.testing.assert_array_equal(P @ xi, want)
                run_modes.append(P._spmv[2][(sparse_ops._LEVEL, want.dtype)][1].batch_mode)
        assert run_modes == [2, 2, 2, 2]
        assert (P._spmv[2][(sparse_ops._LEVEL, want.dtype)][1].batches > 0).any()


@pytest.mark.parametrize("per_thread", [1, 3])
@pytest.mark.parametrize("values, x_dtype", [(np.float32, np.float64), (np.int32, np.float32), (np.int8, np.float64),
                                             (np.float16, np.float16), (np.float16, np.float32)])
def test_values_of_another_dtype_are_converted_once_and_give_spmvs_bits(per_thread, values, x_dtype):
    """A product whose float result dtype is not the values' (float32 values and a float64 x,
    integer values and a float x, float16): spmv's bits (it converts the values on every call),
    the values converted once and kept per result dtype, new values after update_values; a
    stencil matrix too (its kernel)."""
    rng = np.random.default_rng(7)
    n = 3000
    band = sp.diags([rng.integers(-4, 5, n - 1), rng.integers(-4, 5, n), rng.integers(-4, 5, n - 1)], [-1, 0, 1],
                    format="csr", dtype=np.float64)
    rand = sp.random(n, n, 0.002, format="csr", random_state=3)
    rand.data = rng.integers(-4, 5, rand.nnz).astype(np.float64)
    x = rng.integers(-3, 4, n).astype(x_dtype)
    with chunks(per_thread):
        for M, stencil_min in ((rand, None), (band, 1)):
            # (parts, not a scipy matrix: scipy.sparse takes no float16)
            A = (M.indptr, M.indices, M.data.astype(values), M.shape)
            old = sparse_ops.STENCIL_MIN_NNZ
            if stencil_min is not None:  # take the banded matrix as a stencil matrix
                sparse_ops.STENCIL_MIN_NNZ = stencil_min
            try:
                P = mmvref.prepare(A)
                want = mmvref.spmv(A, x)
                got = P @ x
                assert got.dtype == want.dtype and np.array_equal(got, want)
                kept = P._spmv[2][(sparse_ops._LEVEL, got.dtype)]
                assert kept[0] is P.data and (kept[1].data.dtype == got.dtype)
                assert np.array_equal(P @ x, want) and P._spmv[2][(sparse_ops._LEVEL, got.dtype)] is kept  # reused
                assert (P._stencil is not None) == (stencil_min is not None)
                new = (M.data * 2).astype(values)
                P.update_values(new)
                assert np.array_equal(P @ x, mmvref.spmv((M.indptr, M.indices, new, M.shape), x))
            finally:
                sparse_ops.STENCIL_MIN_NNZ = old


def _wide_columns_matrix(rng, n=1 << 16):
    """(indptr, indices, n) of 2**17 entries over n columns: short rows of random columns, empty
    rows, long rows of consecutive columns that end at the last column (the contiguous loads at
    x's end) and long random rows; columns past 2**15 throughout (the uint16 lanes are unsigned)."""
    lens, cols = [], []
    while sum(lens) < sparse_ops.COMPACT_MIN_NNZ:
        kind = rng.integers(0, 4)
        if kind == 0:
            k = int(rng.integers(0, 6))
            c = rng.integers(0, n, k)
        elif kind == 1:
            k, c = 0, np.zeros(0, np.int64)
        elif kind == 2:
            k = int(rng.integers(60, 300))
            c = np.arange(n - k, n)
        else:
            k = int(rng.integers(60, 300))
            c = rng.integers(n // 2, n, k)
        lens.append(k)
        cols.append(c)
    indptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=indptr[1:])
    return indptr, np.concatenate(cols).astype(np.int32), n


def _values_and_x(rng, indptr, indices, n, values, x_dtype):
    """Random values of dtype ``values`` for a matrix's entries and an x of ``x_dtype``: (A as the
    (indptr, indices, data, shape) tuple, data, x, m)."""
    m = indptr.size - 1
    data = rng.standard_normal(indices.size).astype(values)
    x = rng.standard_normal(n).astype(x_dtype)
    return (indptr, indices, data, (m, n)), data, x, m


@pytest.mark.parametrize("per_thread", [1, 3])
@pytest.mark.parametrize("values, x_dtype", [(np.float32, np.float32), (np.float64, np.float64),
                                             (np.float32, np.float64), (np.float16, np.float32)])
def test_compact_columns_are_read_by_the_spmv_and_give_spmvs_bits(per_thread, values, x_dtype):
    """A float matrix of at most 2**16 columns and COMPACT_MIN_NNZ entries keeps a uint16 copy of
    its columns, written by prepare's structure check; its SpMV reads that copy (columns up to
    65535: widened as unsigned) and gives spmv's bits (which reads the int32 indices), within the
    per-row bound of the plain-loop oracle; pickling carries the copy, update_values keeps it."""
    rng = np.random.default_rng(11)
    indptr, indices, n = _wide_columns_matrix(rng)
    A, data, x, m = _values_and_x(rng, indptr, indices, n, values, x_dtype)
    with chunks(per_thread):
        P = mmvref.prepare(A)
        assert P._columns.dtype == np.uint16 and np.array_equal(P._columns, indices)
        assert P.indices.dtype == np.int32 and "uint16" in repr(P)
        want = mmvref.spmv(A, x)
        for _ in range(2):  # the first product (binds), then the bound one
            assert np.array_equal(P @ x, want)
        assert P._spmv[2][(sparse_ops._LEVEL, want.dtype)][1].indices is P._columns  # what the kernel read
        if want.dtype != np.float16:
            assert _within_bound(want, indptr, indices, data.astype(want.dtype), x.astype(want.dtype))
        Q = pickle.loads(pickle.dumps(P))
        assert np.array_equal(Q._columns, indices) and np.array_equal(Q @ x, want)
        new = (data * 3).astype(values)
        P.update_values(new)
        assert P._columns is not None and np.array_equal(P @ x, mmvref.spmv((indptr, indices, new, (m, n)), x))


def test_compact_columns_only_where_they_fit_and_pay():
    """No copy over more than 2**16 columns, for fewer entries than COMPACT_MIN_NNZ, for integer
    values, or for a stencil matrix (its own kernel); a column index of n (65536 in a matrix of
    65536 columns, 0 as a uint16) or a negative one is refused, not wrapped into range."""
    rng = np.random.default_rng(12)
    indptr, indices, n = _wide_columns_matrix(rng)
    m = indptr.size - 1
    data = rng.standard_normal(indices.size)
    assert mmvref.prepare((indptr, indices, data, (m, n)))._columns is not None
    assert mmvref.prepare((indptr, indices, data, (m, n + 1)))._columns is None  # 65537 columns
    short = int(indptr[m // 2])
    half = (indptr[:m // 2 + 1], indices[:short], data[:short], (m // 2, n))
    assert short < sparse_ops.COMPACT_MIN_NNZ and mmvref.prepare(half)._columns is None
    assert mmvref.prepare((indptr, indices, data.astype(np.int32), (m, n)))._columns is None
    band = sp.diags([np.ones(n - 1), np.ones(n), np.ones(n - 1)], [-1, 0, 1], format="csr")
    Pb = mmvref.prepare(band)
    assert Pb._stencil is not None and Pb._columns is None
    for bad in (n, -1):
        wrong = indices.copy()
        wrong[-1] = bad
        with pytest.raises(ValueError, match="indices"):
            mmvref.prepare((indptr, wrong, data, (m, n)))


def _shared_rows_matrix(rng, n, short_stretch=False, longest_run=6):
    """(indptr, indices, n) of at least COMPACT_MIN_NNZ entries in runs of 1-``longest_run`` consecutive rows that
    hold the same columns (a run's rows: 64-300 random columns, or a stretch ending at the last
    column); ``short_stretch``: a stretch of 1,000 rows of 0-2 entries in the middle, in runs of 4
    (its chunks take the short-row path; runs, so that the sample still finds them)."""
    lens, cols = [], []
    half = False
    while sum(lens) < sparse_ops.COMPACT_MIN_NNZ:
        if short_stretch and not half and sum(lens) > sparse_ops.COMPACT_MIN_NNZ // 2:
            half = True
            for _ in range(250):
                k = int(rng.integers(0, 3))
                c = rng.choice(n, k, replace=False)
                lens += [k] * 4
                cols += [c] * 4
        k = int(rng.integers(64, 300))
        c = np.arange(n - k, n) if rng.random() < 0.2 else np.sort(rng.choice(n, k, replace=False))
        for _ in range(int(rng.integers(1, longest_run + 1))):
            lens.append(k)
            cols.append(c)
    indptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=indptr[1:])
    return indptr, np.concatenate(cols).astype(np.int32), n


@pytest.mark.parametrize("per_thread", [1, 3, 8])
@pytest.mark.parametrize("n", [1 << 16, 70_000])  # uint16 shared columns, int32 ones
@pytest.mark.parametrize("values, x_dtype", [(np.float32, np.float32), (np.float64, np.float64),
                                             (np.float32, np.float64)])
def test_shared_columns_are_read_by_the_spmv_and_give_spmvs_bits(per_thread, n, values, x_dtype):
    """Runs of rows that hold the same columns keep them once: the kernel reads each row's columns at
    its run's place (rows cut by chunk borders too), with spmv's bits and within the plain-loop bound;
    pickling carries them, update_values keeps them."""
    rng = np.random.default_rng(n + per_thread)
    indptr, indices, n = _shared_rows_matrix(rng, n)
    m = indptr.size - 1
    data = rng.standard_normal(indices.size).astype(values)
    x = rng.standard_normal(n).astype(x_dtype)
    A = (indptr, indices, data, (m, n))
    with chunks(per_thread):
        P = mmvref.prepare(A)
        columns, starts = P._shared
        assert P._columns is None and columns.dtype == (np.uint16 if n <= 1 << 16 else np.int32)
        assert columns.size < indices.size // 2
        lens = np.diff(indptr)
        for r in range(m):  # every row's columns where its starts say (a plain loop)
            assert np.array_equal(columns[starts[r]:starts[r] + lens[r]], indices[indptr[r]:indptr[r + 1]])
        want = mmvref.spmv(A, x)
        for _ in range(2):
            assert np.array_equal(P @ x, want)
        run = P._spmv[2][(sparse_ops._LEVEL, want.dtype)][1]
        assert run.indices is columns and run.batches is starts  # what the kernel read
        assert _within_bound(want, indptr, indices, data.astype(want.dtype), x.astype(want.dtype))
        Q = pickle.loads(pickle.dumps(P))
        assert np.array_equal(Q._shared[0], columns) and np.array_equal(Q @ x, want)
        new = (data * 3).astype(values)
        P.update_values(new)
        assert P._shared is not None and np.array_equal(P @ x, mmvref.spmv((indptr, indices, new, (m, n)), x))
        if numba.config.NUMBA_NUM_THREADS > 1:  # a new thread count: new chunks, the shared columns kept
            T = numba.get_num_threads()
            numba.set_num_threads(1)
            try:
                assert np.array_equal(P @ x, mmvref.spmv((indptr, indices, new, (m, n)), x))
                assert P._spmv[0] == 1 and P._spmv[2][(sparse_ops._LEVEL, want.dtype)][1].indices is columns
            finally:
                numba.set_num_threads(T)


@pytest.mark.parametrize("k", [1, 5, 8, 24, 79])  # a tail block alone (1, 5 columns); 8; 16 + 8; 64 + 8 + 7
@pytest.mark.parametrize("values, X_dtype", [(np.float32, np.float32), (np.float64, np.float64),
                                             (np.float32, np.float64)])
def test_shared_columns_are_read_by_the_spmm_and_give_spmms_bits(k, values, X_dtype):
    """The SpMM of a matrix whose runs of rows share their columns reads them once per run and takes
    a run's rows GROUP at a time (``_portable_spmm.shared_rows_kernel``; runs of 1-20 rows, so whole
    groups, their remainders and runs cut by task borders): spmm's bits (each row's products in
    index order, as the one-row kernel adds them), within the plain-loop bound of every column, on
    the first product and the bound one, and after update_values."""
    from mmvref._fast.sparse._portable_spmm import GROUP

    rng = np.random.default_rng(k)
    indptr, indices, n = _shared_rows_matrix(rng, 1 << 16, longest_run=20)
    assert 2 * GROUP < 20
    m = indptr.size - 1
    data = rng.standard_normal(indices.size).astype(values)
    X = rng.standard_normal((n, k)).astype(X_dtype)
    A = (indptr, indices, data, (m, n))
    P = mmvref.prepare(A)
    assert P._shared is not None
    want = mmvref.spmm(A, X)
    for _ in range(2):
        assert np.array_equal(P @ X, want)
    if values == X_dtype:
        assert P._spmm_bound[k].shared is P._shared  # (what the bound product read)
    for j in {0, k // 2, k - 1}:
        assert _within_bound(want[:, j], indptr, indices, data.astype(want.dtype), X[:, j].astype(want.dtype))
    new = (data * 3).astype(values)
    P.update_values(new)
    assert np.array_equal(P @ X, mmvref.spmm((indptr, indices, new, (m, n)), X))


@pytest.mark.parametrize("per_thread", [16, 32])
def test_shared_columns_fall_back_where_a_chunk_has_short_rows(per_thread):
    """A chunk of short rows (batches read a row's columns at its entries' places) makes the SpMV read
    the full int32 indices instead: the same bits. (Chunks small enough that one lies within the
    stretch of short rows.)"""
    rng = np.random.default_rng(21)
    indptr, indices, n = _shared_rows_matrix(rng, 1 << 16, short_stretch=True)
    m = indptr.size - 1
    data = rng.standard_normal(indices.size)
    x = rng.standard_normal(n)
    A = (indptr, indices, data, (m, n))
    with chunks(per_thread):
        P = mmvref.prepare(A)
        assert P._shared is not None
        assert P._spmv_plan() and sparse_ops._row_kinds(indptr, P._spmv[1][0], 64)[1]  # a chunk of short rows
        want = mmvref.spmv(A, x)
        assert np.array_equal(P @ x, want) and np.array_equal(P @ x, want)
        assert P._spmv[2][(sparse_ops._LEVEL, want.dtype)][1].indices is P.indices
        assert _within_bound(want, indptr, indices, data, x)


def _paired_rows_matrix(rng, n, regular=False):
    """(indptr, indices, n) of at least COMPACT_MIN_NNZ entries in short rows (3-40 entries; 20-22
    with ``regular``) in groups of 1-5 consecutive rows (mostly 3-4) that hold the same columns, the way a block-
    sparse attention matrix's block rows do; some groups have one row of the same length with a
    column changed (no pair there) or an empty row."""
    lens, cols = [], []
    while sum(lens) < sparse_ops.COMPACT_MIN_NNZ:
        k = int(rng.integers(20, 23) if regular else rng.integers(3, 41))
        c = np.sort(rng.choice(n, k, replace=False))
        for j in range(int(rng.choice([1, 2, 3, 4, 5], p=[0.05, 0.15, 0.3, 0.3, 0.2]))):
            cj = c
            if j and rng.random() < 0.05:
                cj = c.copy()
                cj[rng.integers(k)] = (cj[0] + 1 + rng.integers(n - 1)) % n
            lens.append(k)
            cols.append(cj)
        if rng.random() < 0.02:
            lens.append(0)
            cols.append(np.zeros(0, np.int64))
    indptr = np.zeros(len(lens) + 1, np.int64)
    np.cumsum(lens, out=indptr[1:])
    return indptr, np.concatenate(cols).astype(np.int32), n


@pytest.mark.parametrize("per_thread", [1, 3, 8])
# rows the batches take by scalar loads (``_batch_shape``): regular ones over at most SCALAR_WINDOW
# columns (uint16 copy), and any rows with an x within SCALAR_X_BYTES
@pytest.mark.parametrize("n, regular", [(1 << 16, True), (4000, False)])
@pytest.mark.parametrize("values, x_dtype", [(np.float32, np.float32), (np.float64, np.float64),
                                             (np.float32, np.float64)])
def test_short_rows_that_share_columns_are_summed_in_pairs_with_spmvs_bits(per_thread, n, regular, values, x_dtype):
    """A prepared matrix of short rows in groups that hold the same columns flags them
    (``ops.PAIR_SHARE``): its replayed scalar batches sum a flagged row with the row before in one
    loop (``_scalar_row_pairs``), pairs cut by chunk and batch borders included, with spmv's bits
    and within the plain-loop bound; the flags never claim a row whose columns differ (a plain
    loop); pickling carries them, update_values and a new thread count keep them."""
    rng = np.random.default_rng(n + per_thread)
    indptr, indices, n = _paired_rows_matrix(rng, n, regular)
    A, data, x, m = _values_and_x(rng, indptr, indices, n, values, x_dtype)
    with chunks(per_thread):
        P = mmvref.prepare(A)
        assert P._pairs is not None and P._shared is None
        like_before = [r > 0 and np.array_equal(indices[indptr[r - 1]:indptr[r]], indices[indptr[r]:indptr[r + 1]])
                       for r in range(m)]
        assert not (P._pairs & ~np.array(like_before)).any()
        assert P._pairs.sum() > 0.5 * sum(like_before)
        want = mmvref.spmv(A, x)
        for _ in range(3):  # the first records the batch plan, the later ones replay it in pairs
            assert np.array_equal(P @ x, want)
        run = P._spmv[2][(sparse_ops._LEVEL, want.dtype)][1]
        assert run.batch_mode == 2 and run.batches.size > sparse_ops.K.batch_plan_size(indices.size, run.C)
        assert _within_bound(want, indptr, indices, data.astype(want.dtype), x.astype(want.dtype))
        Q = pickle.loads(pickle.dumps(P))
        assert np.array_equal(Q._pairs, P._pairs) and np.array_equal(Q @ x, want) and np.array_equal(Q @ x, want)
        new = (data * 3).astype(values)
        P.update_values(new)
        want = mmvref.spmv((indptr, indices, new, (m, n)), x)
        assert P._pairs is not None and np.array_equal(P @ x, want) and np.array_equal(P @ x, want)
        if numba.config.NUMBA_NUM_THREADS > 1:  # a new thread count: new chunks and plan, the flags kept
            T = numba.get_num_threads()
            numba.set_num_threads(1)
            try:
                want = mmvref.spmv((indptr, indices, new, (m, n)), x)  # (rows cut by other chunk borders)
                assert np.array_equal(P @ x, want) and np.array_equal(P @ x, want)
            finally:
                numba.set_num_threads(T)


def test_shared_columns_only_where_runs_hold_half_the_entries():
    """No shared columns where the sample finds no runs, where the runs hold under SHARED_SHARE of the
    entries (then the uint16 copy), for rows under SHARED_MIN_ROW on average, or for integer values;
    a bad index in a run's row is refused."""
    rng = np.random.default_rng(22)
    indptr, indices, n = _shared_rows_matrix(rng, 1 << 16)
    m = indptr.size - 1
    data = rng.standard_normal(indices.size)
    assert mmvref.prepare((indptr, indices, data, (m, n)))._shared is not None
    lens = np.diff(indptr)
    # every row after the first of each run gets a different last column: no run, same row lengths
    broken = indices.copy()
    ends = indptr[1:] - 1
    broken[ends] = (broken[ends] + np.arange(m) % 7 + 1) % n
    P = mmvref.prepare((indptr, broken, data, (m, n)))
    assert P._shared is None and P._columns is not None
    # runs where the sample sees them, but holding under half the entries: the uint16 copy
    x = rng.standard_normal(n)
    if (lens >= 64).all():
        few = indices.copy()
        few[ends[1::2]] = (few[ends[1::2]] + 1) % n  # (breaks about half the runs' rows)
        Pf = mmvref.prepare((indptr, few, data, (m, n)))
        assert (Pf._shared is None) == (sparse_ops.SHARED_SHARE * indices.size > _held(indptr, few))
        assert np.array_equal(Pf @ x, mmvref.spmv((indptr, few, data, (m, n)), x))
    assert mmvref.prepare((indptr, indices, data.astype(np.int64), (m, n)))._shared is None
    wrong = indices.copy()
    wrong[-1] = n
    with pytest.raises(ValueError, match="indices"):
        mmvref.prepare((indptr, wrong, data, (m, n)))


def _held(indptr, indices):
    """Entries of the rows that hold the row before's columns (a plain loop)."""
    held = 0
    for r in range(1, indptr.size - 1):
        a, b = indices[indptr[r - 1]:indptr[r]], indices[indptr[r]:indptr[r + 1]]
        if a.size == b.size and (a == b).all():
            held += b.size
    return held


@pytest.mark.parametrize("run, m", [(2, 65_536), (2, 65_537), (4, 65_536), (16, 65_536), (1, 4_000)])
def test_the_sample_of_rows_like_the_row_before_sees_runs_of_every_length(run, m):
    """Rows in runs of ``run`` (a share of (run - 1) / run of rows like the row before): the sample
    says more than half only for runs longer than 2, whatever the runs' length divides (evenly
    spaced single rows at a stride of 2,114 saw only the second rows of runs of 2: 100%)."""
    rng = np.random.default_rng(run)
    k = 3
    pats = rng.integers(0, 1000, ((m + run - 1) // run, k))
    indices = np.repeat(pats, run, axis=0)[:m].ravel().astype(np.int32)
    indptr = np.arange(0, m * k + 1, k, dtype=np.int32)
    assert sparse_ops.shares_columns(indptr, indices, m) == (run > 2)
