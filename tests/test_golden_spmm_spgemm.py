"""Golden SpMM (segmented-sum and TCA paths) and SpGEMM (ESC, Gustavson,
Insert-Sort-Merge) against scipy, the independent reference here."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from mmvref import golden

pytestmark = pytest.mark.native_only  # the golden model / stand-in: no kernel chosen by the compile target


@st.composite
def csr(draw, dtype, max_rows=12, max_cols=12, long_row=False):
    m = draw(st.integers(0, max_rows))
    n = draw(st.integers(0 if not long_row else 1, max_cols))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["random", "empty", "diagonal", "sparse", "long_row"] if long_row else
                                ["random", "empty", "diagonal", "sparse"]))
    dense = np.zeros((m, n), np.int64)
    if n and m:
        if kind == "random":
            dense = rng.integers(-4, 5, (m, n)) * (rng.random((m, n)) < 0.35)
        elif kind == "diagonal":
            np.fill_diagonal(dense, rng.integers(1, 5, min(m, n)))
        elif kind == "sparse":  # fewer nonzeros than rows
            for _ in range(max(0, m // 2)):
                dense[rng.integers(0, m), rng.integers(0, n)] = rng.integers(1, 5)
        elif kind == "long_row":
            dense[rng.integers(0, m)] = rng.integers(1, 5, n)
    A = sp.csr_matrix(dense.astype(dtype), shape=(m, n))
    A.eliminate_zeros()
    return A


def _dense_D(draw, n, k, dtype):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return rng.integers(-6, 7, (n, k)).astype(dtype)


@given(data=st.data(), dtype=st.sampled_from(["int8", "int32", "int64", "float32", "float64"]),
       s=st.sampled_from([2, 4, 8]))
def test_spmm_paths_equal_scipy(data, dtype, s):
    A = data.draw(csr(dtype, max_cols=150, long_row=True))
    k = data.draw(st.sampled_from([1, 3, 8, 9]))
    D = _dense_D(data.draw, A.shape[1], k, dtype)
    ref = A.astype(np.float64) @ D.astype(np.float64) if dtype.startswith("float") else \
        A.toarray().astype(object) @ D.astype(object)
    frag = data.draw(st.sampled_from([16, 64]))
    counter = {}
    for got in (golden.spmm(A.indptr, A.indices, A.data, D, s),
                golden.spmm_tca(A.indptr, A.indices, A.data, D, frag, counter=counter)):
        assert got.shape == (A.shape[0], k)
        if dtype.startswith("float"):
            terms = np.abs(A.astype(np.float64)).toarray() @ np.abs(D.astype(np.float64))
            tol = 4 * (A.nnz + 2 * s + 1) * np.finfo(got.dtype).eps * (terms.sum(axis=0) + 1)
            assert np.all(np.abs(got.astype(np.float64) - ref) <= tol)
        else:
            assert got.dtype == (np.int64 if dtype == "int64" else np.int32)
            assert got.astype(object).tolist() == np.asarray(ref).tolist()
    lens = np.diff(A.indptr)
    assert counter["fragment_products"] == int(sum(-(-int(L) // frag) for L in lens)) * k


def test_spmm_tca_padding_cannot_leak_inf_or_nan():
    """A short row next to rows of D holding inf / NaN: padded slots gather 0, not D."""
    A = sp.csr_matrix(np.array([[2.0, 0, 0, 0], [0, 0, 0, 0], [0, 1.0, 0, 3.0]]))
    D = np.array([[1.0, 2.0], [np.inf, np.nan], [np.inf, np.inf], [0.5, 1.0]])
    D[1] = [1.0, 1.0]  # referenced rows finite...
    D[2] = [np.inf, np.nan]  # ...row 2 of D is never referenced: it sits where padding could read
    got = golden.spmm_tca(A.indptr, A.indices, A.data, D, 16)
    np.testing.assert_array_equal(got, A @ D)
    assert np.isfinite(got).all()
    np.testing.assert_array_equal(golden.spmm(A.indptr, A.indices, A.data, D, 2), A @ D)


def test_tca_warps_invariants():
    lens = np.arange(0, 300)
    indptr = np.concatenate([[0], np.cumsum(lens)])
    w = golden.tca_warps(indptr)
    assert set(np.unique(w)) <= {0, 1, 2, 4, 8}
    assert np.all((w == 0) == (lens == 0))  # rows with 0 nnz get no work, all others some
    assert np.all(np.diff(w) >= 0)  # more nonzeros never get fewer warps
    assert np.all(w * 8 >= np.minimum(lens, 64))  # 8 nonzeros per warp cover a fragment
    assert golden.tca_warps(np.array([0, 8, 24, 56, 120]) ).tolist() == [1, 2, 4, 8]


@given(data=st.data(), dtype=st.sampled_from(["int16", "int32", "float64"]))
def test_three_spgemms_equal_each_other_and_scipy(data, dtype):
    A = data.draw(csr(dtype, max_rows=10, max_cols=8))
    n2 = data.draw(st.integers(0, 12))
    B = data.draw(csr(dtype, max_rows=A.shape[1], max_cols=n2)) if A.shape[1] else sp.csr_matrix((0, n2))
    if B.shape[0] != A.shape[1]:
        B = sp.csr_matrix(np.zeros((A.shape[1], n2), dtype))
    C = (A.astype(np.float64 if dtype == "float64" else np.int64) @ B.astype(
        np.float64 if dtype == "float64" else np.int64)).tocsr()
    C.sum_duplicates()
    C.eliminate_zeros()
    C.sort_indices()
    cap = data.draw(st.integers(1, 20))
    results = [golden.spgemm_esc(A, B), golden.spgemm_gustavson(A, B)] + \
        [golden.spgemm_ism(A, B, p, cap) for p in golden.ISM_POLICIES]
    for ip, ind, dat, shape in results:
        assert shape == C.shape
        np.testing.assert_array_equal(ip, C.indptr)
        np.testing.assert_array_equal(ind, C.indices)
        np.testing.assert_array_equal(dat, C.data)  # small integers (or integer-valued floats): exact


@given(data=st.data(), shape=st.sampled_from([(1, 120, 1), (120, 1, 120), (2, 90, 3), (90, 2, 1), (1, 1, 150),
                                                (150, 1, 1), (0, 40, 3), (3, 40, 0)]),
       dtype=st.sampled_from(["int32", "float64"]))
def test_three_spgemms_very_rectangular(data, shape, dtype):
    """Outer products (n = 1), long inner dimensions with one or two rows, and
    0-size results: every SpGEMM and ISM policy (capacities from 1) equals scipy."""
    m, n, p = shape
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    density = data.draw(st.sampled_from([0.05, 0.5, 1.0]))
    A = sp.csr_matrix((rng.integers(-4, 5, (m, n)) * (rng.random((m, n)) < density)).astype(dtype), shape=(m, n))
    B = sp.csr_matrix((rng.integers(-4, 5, (n, p)) * (rng.random((n, p)) < density)).astype(dtype), shape=(n, p))
    C = (A.astype(np.float64 if dtype == "float64" else np.int64) @ B.astype(
        np.float64 if dtype == "float64" else np.int64)).tocsr()
    C.sum_duplicates()
    C.eliminate_zeros()
    C.sort_indices()
    cap = data.draw(st.integers(1, 8))
    for ip, ind, dat, shp in [golden.spgemm_esc(A, B), golden.spgemm_gustavson(A, B)] + \
            [golden.spgemm_ism(A, B, pol, cap) for pol in golden.ISM_POLICIES]:
        assert shp == (m, p)
        np.testing.assert_array_equal(ip, C.indptr)
        np.testing.assert_array_equal(ind, C.indices)
        np.testing.assert_array_equal(dat, C.data)


def test_spgemm_edges_and_errors():
    Z = sp.csr_matrix((0, 5))
    for ip, ind, _dat, shape in (golden.spgemm_esc(Z, sp.csr_matrix((5, 3))),
                                 golden.spgemm_ism(Z, sp.csr_matrix((5, 3)), "coord", 1)):
        assert shape == (0, 3) and ip.tolist() == [0] and ind.size == 0
    A = sp.csr_matrix(np.array([[1, 1]]))
    B = sp.csr_matrix(np.array([[1], [-1]]))
    for res in (golden.spgemm_esc(A, B), golden.spgemm_gustavson(A, B), golden.spgemm_ism(A, B, "bucket", 1)):
        assert res[0].tolist() == [0, 0] and res[1].size == 0  # cancellation to zero: dropped everywhere
    with pytest.raises(ValueError, match="do not multiply"):
        golden.spgemm_esc(A, A)
    with pytest.raises(ValueError, match="policy"):
        golden.spgemm_ism(A, B, "tree", 4)
    with pytest.raises(ValueError, match="capacity"):
        golden.spgemm_ism(A, B, "hash", 0)


def test_explicit_zero_times_inf_is_nan_like_scipy():
    """A stored 0 meeting inf gives NaN (IEEE, scipy); only padding is guaranteed not to."""
    A = sp.csr_matrix((np.array([0.0, 1.0]), np.array([0, 1]), np.array([0, 2])), shape=(1, 2))
    D = np.array([[np.inf], [1.0]])
    ref = A @ D
    assert np.isnan(ref[0, 0])
    assert np.isnan(golden.spmm(A.indptr, A.indices, A.data, D, 2)[0, 0])
    assert np.isnan(golden.spmm_tca(A.indptr, A.indices, A.data, D, 16)[0, 0])


def test_mmu_zero_times_inf_propagates():
    from mmvref import mmv

    a = np.eye(2)
    a[1, 0] = np.inf
    z = mmv.matmul(np.array([1.0, 0.0]), a)
    assert np.isnan(z[0])  # 1*1 + 0*inf
