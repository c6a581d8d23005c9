"""Fast spmm / spgemm (mmvref.spmm, mmvref.spgemm) against plain-loop oracles.

Floats are compared bit for bit: the oracle adds each entry's products in
the documented order (index order for spmm, product order for spgemm) with a
multiply and an add rounded in the result dtype, which is what the kernels
promise. Integers against Python integers.
"""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

import mmvref
from mmvref._fast.sparse import _portable_spgemm as _spgemm_kernels, ops as sparse_products

# SpMM / SpGEMM: one portable path of plain loops and generic vector IR (no kernel chosen by the compile target)
pytestmark = pytest.mark.native_only

RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}
# k covering every register block (64, 32, 16, 8) and a scalar tail of 1..7 columns
KS = [1, 3, 7, 8, 9, 13, 16, 24, 31, 32, 40, 64, 65, 100, 129]


@st.composite
def csr_parts(draw, dtype, m_max=40, n_max=40, index_dtype=None):
    """(indptr, indices, data, shape): empty rows, unsorted and repeated columns, one long row."""
    m, n = draw(st.integers(0, m_max)), draw(st.integers(0, n_max))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lens = rng.integers(0, draw(st.sampled_from([1, 3, 8])) + 1, m) if n else np.zeros(m, np.int64)
    if m and n and draw(st.booleans()):
        lens[int(rng.integers(0, m))] = draw(st.sampled_from([n, 2 * n + 5, 150]))  # long, repeats
    indptr = np.concatenate([[0], np.cumsum(lens)])
    indices = rng.integers(0, max(n, 1), int(indptr[-1]))
    data = rng.integers(-20, 21, int(indptr[-1]))
    if dtype.startswith("float") and draw(st.booleans()):
        data = data * rng.random(data.size) * 1e3 + rng.standard_normal(data.size)
    it = index_dtype or draw(st.sampled_from([np.int32, np.int64]))
    return indptr.astype(it), indices.astype(it), data.astype(dtype), (m, n)


def _spmm_oracle(parts, D, rdt):
    indptr, indices, data, (m, _n) = parts
    k = D.shape[1]
    if rdt.kind == "f":
        out = np.zeros((m, k), rdt)
        Dc, dc = D.astype(rdt), data.astype(rdt)
        for r in range(m):
            acc = np.zeros(k, rdt)
            for q in range(indptr[r], indptr[r + 1]):
                acc = acc + dc[q] * Dc[indices[q]]  # numpy: product rounded, then the sum
            out[r] = acc
        return out
    out = np.zeros((m, k), object)
    Do = D.astype(object)
    for r in range(m):
        for q in range(indptr[r], indptr[r + 1]):
            out[r] = out[r] + int(data[q]) * Do[indices[q]]
    return out


@given(data=st.data(), dtype=st.sampled_from(list(RESULT)), k=st.sampled_from(KS))
def test_spmm_equals_oracle(data, dtype, k):
    parts = data.draw(csr_parts(dtype))
    n = parts[3][1]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    D = rng.integers(-20, 21, (n, k)).astype(dtype)
    if dtype.startswith("float"):
        D = (D * rng.standard_normal((n, k))).astype(dtype)
    got = mmvref.spmm(parts, D)
    rdt = np.dtype(RESULT[dtype])
    assert got.dtype == rdt and got.shape == (parts[3][0], k)
    ref = _spmm_oracle(parts, D, rdt)
    if rdt.kind == "f":
        np.testing.assert_array_equal(got, ref)  # bit for bit: same order, no fused multiply-add
    else:
        assert got.tolist() == ref.tolist()


def test_spmm_scipy_csr_array_noncontiguous_readonly_and_torch():
    rng = np.random.default_rng(1)
    A = sp.random(50, 40, density=0.2, format="csr", random_state=2, dtype=np.float64)
    Dbig = rng.standard_normal((40, 20))
    D = Dbig[:, ::2]  # non-contiguous
    D.flags.writeable = False
    ref = A @ D
    np.testing.assert_array_equal(mmvref.spmm(A, D), ref)  # scipy adds in index order too
    if hasattr(sp, "csr_array"):
        np.testing.assert_array_equal(mmvref.spmm(sp.csr_array(A), D), ref)
    torch = pytest.importorskip("torch")
    out = mmvref.spmm(A, torch.from_numpy(np.ascontiguousarray(D)))
    assert isinstance(out, torch.Tensor)
    np.testing.assert_array_equal(out.numpy(), ref)
    At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr), torch.from_numpy(A.indices),
                                 torch.from_numpy(A.data), size=A.shape, check_invariants=True)
    np.testing.assert_array_equal(mmvref.spmm(At, D), ref)


def test_spmm_inf_nan_and_empty():
    A = sp.csr_matrix((np.array([1.0, 2.0]), np.array([0, 2]), np.array([0, 0, 2, 2])), shape=(3, 3))
    D = np.array([[1.0] * 9, [np.inf] * 9, [np.nan] * 9])
    out = mmvref.spmm(A, D)
    assert (out[0] == 0).all() and (out[2] == 0).all()  # empty rows: 0, not the inf/NaN of unused D rows
    assert np.isnan(out[1]).all()
    assert mmvref.spmm((np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), (0, 4)),
                       np.ones((4, 8))).shape == (0, 8)
    assert mmvref.spmm(sp.csr_matrix((5, 0)), np.ones((0, 3))).tolist() == [[0.0] * 3] * 5


@pytest.mark.parametrize("k", [1, 8, 16, 70])
def test_spmm_invalid_structure_raises(k):
    D = np.ones((3, k))
    ok = (np.array([0, 1, 2]), np.array([0, 2]), np.array([1.0, 2.0]), (2, 3))
    assert mmvref.spmm(ok, D).shape == (2, k)
    with pytest.raises(ValueError, match="indices out of range.*3"):
        mmvref.spmm((ok[0], np.array([0, 3]), ok[2], ok[3]), D)
    with pytest.raises(ValueError, match="indices out of range.*-1"):
        mmvref.spmm((ok[0], np.array([-1, 0]), ok[2], ok[3]), D)
    with pytest.raises(ValueError, match="non-decreasing"):
        mmvref.spmm((np.array([0, 2, 1, 2]), np.array([0, 1]), ok[2], (3, 3)), D)
    with pytest.raises(ValueError, match="rows"):
        mmvref.spmm(ok, np.ones((4, k)))
    with pytest.raises(ValueError, match="2-D"):
        mmvref.spmm(ok, np.ones(3))


def test_spmm_int_overflow_raise_and_wrap():
    A = sp.csr_matrix(np.full((1, 2), 2**30, np.int32))
    D = np.full((2, 8), 2, np.int32)
    with pytest.raises(OverflowError):
        mmvref.spmm(A, D)
    got = mmvref.spmm(A, D, overflow="wrap")
    assert got.dtype == np.int32 and got.tolist() == [[0] * 8]  # 2**32 wraps to 0
    # int64 words that wrap on the way but whose exact result fits: exact check by Python integers
    A64 = sp.csr_matrix(np.array([[2**62, 2**62, -(2**62), -(2**62)]], np.int64))
    assert mmvref.spmm(A64, np.full((4, 3), 3, np.int64)).tolist() == [[0, 0, 0]]
    with pytest.raises(OverflowError):
        mmvref.spmm(sp.csr_matrix(np.array([[2**62, 2**62]], np.int64)), np.full((2, 1), 3, np.int64))


# ----------------------------------------------------------------------------- spgemm

def _spgemm_oracle(A, B, rdt):
    """Row-wise in product order, Python integers or the result dtype's float rounding."""
    (ap, ai, ad, (m, _n)), (bp, bi, bd, (_n2, p)) = A, B
    f = rdt.kind == "f"
    rows = []
    for r in range(m):
        acc = {}
        for q in range(ap[r], ap[r + 1]):
            kk = ai[q]
            for pp in range(bp[kk], bp[kk + 1]):
                j = int(bi[pp])
                prod = rdt.type(ad[q]) * rdt.type(bd[pp]) if f else int(ad[q]) * int(bd[pp])
                acc[j] = prod if j not in acc else (acc[j] + prod)
        rows.append(sorted((j, v) for j, v in acc.items() if v != 0))
    indptr = np.cumsum([0] + [len(rw) for rw in rows])
    return indptr, [j for rw in rows for j, _ in rw], [v for rw in rows for _, v in rw], (m, p)


def _check_spgemm(C, ref, rdt):
    indptr, indices, vals, shape = ref
    assert C.shape == shape and C.dtype == rdt and C.has_sorted_indices
    assert C.indptr.tolist() == indptr.tolist() and C.indices.tolist() == indices
    if rdt.kind == "f":
        np.testing.assert_array_equal(C.data, np.array(vals, rdt))
    else:
        assert C.data.tolist() == vals


SHAPES = st.sampled_from([None, (1, 200, 1), (200, 1, 200), (2, 150, 3), (150, 2, 1), (0, 5, 7), (4, 0, 3),
                          (3, 4, 0), (60, 60, 60)])


@st.composite
def spgemm_operands(draw, dtype):
    shape = draw(SHAPES)
    if shape is None:
        A = draw(csr_parts(dtype, 30, 25))
        p = draw(st.integers(0, 300))
    else:
        m, n, p = shape
        A = _fixed(draw, dtype, m, n)
    B = _fixed(draw, dtype, A[3][1], p)
    return A, B


def _fixed(draw, dtype, m, n):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["random", "diagonal", "fewer_than_rows", "long_rows"]))
    if kind == "diagonal" or n == 0 or m == 0:
        d = min(m, n)
        indptr = np.concatenate([np.arange(d + 1), np.full(m - d, d)])
        return indptr.astype(np.int64), np.arange(d, dtype=np.int64), rng.integers(1, 9, d).astype(dtype), (m, n)
    if kind == "fewer_than_rows":
        lens = np.zeros(m, np.int64)
        lens[rng.integers(0, m, max(1, m // 3))] = 1
    elif kind == "long_rows":  # rows of more than RANK_MAX products (dense bitmap or sort paths)
        lens = rng.integers(0, min(n, 200) + 1, m)
    else:
        lens = rng.integers(0, 6, m)
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    indices = rng.integers(0, n, int(indptr[-1]))
    data = rng.integers(-9, 10, int(indptr[-1]))
    return indptr, indices.astype(draw(st.sampled_from([np.int32, np.int64]))), data.astype(dtype), (m, n)


@pytest.mark.native_only  # SpGEMM kernels: one portable path, plain loops (no target-specific code)
@given(data=st.data(), dtype=st.sampled_from(["int8", "int32", "int64", "float32", "float64"]),
       workspace=st.sampled_from(["auto", "dense", "sparse"]), staging=st.booleans())
def test_spgemm_equals_oracle(data, dtype, workspace, staging):
    """staging=False forces the counting path (STAGING_MAX_BYTES = 0)."""
    A, B = data.draw(spgemm_operands(dtype))
    rdt = np.dtype(RESULT[dtype])
    with _staging(1 << 30 if staging else 0):
        C = mmvref.spgemm(A, B, workspace=workspace)
    _check_spgemm(C, _spgemm_oracle(A, B, rdt), rdt)


@contextlib.contextmanager
def _staging(limit):
    old = sparse_products.STAGING_MAX_BYTES
    sparse_products.STAGING_MAX_BYTES = limit
    try:
        yield
    finally:
        sparse_products.STAGING_MAX_BYTES = old


@pytest.mark.native_only  # SpGEMM kernels: one portable path, plain loops (no target-specific code)
def test_spgemm_row_paths_all_taken_and_equal():
    """A row of > RANK_MAX products whose columns are spread over 2**20 (sorted
    in place), one dense enough for the bitmap scan, and short rows, through
    all three workspaces and both staging modes: identical results."""
    rng = np.random.default_rng(7)
    p = 1 << 20
    n = 40
    rows_b = [np.sort(rng.choice(p, 8, replace=False)) for _ in range(n)]
    B = sp.csr_matrix((rng.standard_normal(8 * n), np.concatenate(rows_b), np.arange(0, 8 * n + 1, 8)), shape=(n, p))
    dense_b = sp.random(n, 300, density=0.9, format="csr", random_state=3)
    B2 = sp.hstack([B, dense_b]).tocsr()
    A = sp.random(30, n, density=0.6, format="csr", random_state=4).tolil()
    A[0] = 1.0  # 8 * 40 = 320 products > RANK_MAX
    A = A.tocsr()
    assert (np.diff(A.indptr) * 8).max() > _spgemm_kernels.RANK_MAX
    ref = _spgemm_oracle((A.indptr, A.indices, A.data, A.shape), (B2.indptr, B2.indices, B2.data, B2.shape),
                         np.dtype(np.float64))
    for ws in ("auto", "dense", "sparse"):
        for staging in (1 << 30, 0):
            with _staging(staging):
                _check_spgemm(mmvref.spgemm(A, B2, workspace=ws), ref, np.dtype(np.float64))


def test_spgemm_cancellation_zeros_dropped_inf_nan_kept():
    A = sp.csr_matrix(np.array([[1.0, 1.0], [1.0, 0.0]]))
    B = sp.csr_matrix(np.array([[1.0, np.inf], [-1.0, 2.0]]))
    for ws in ("auto", "dense", "sparse"):
        C = mmvref.spgemm(A, B, workspace=ws)
        assert C.indptr.tolist() == [0, 1, 3] and C.indices.tolist() == [1, 0, 1]  # (0, 0) cancelled: dropped
        assert C.data.tolist() == [np.inf, 1.0, np.inf]
    nan = mmvref.spgemm(sp.csr_matrix(np.array([[1.0, 1.0]])), sp.csr_matrix(np.array([[np.inf], [-np.inf]])))
    assert nan.nnz == 1 and np.isnan(nan.data[0])  # NaN is not zero: kept


def test_spgemm_types_errors_overflow():
    A = sp.csr_matrix(np.eye(3, dtype=np.float32))
    assert isinstance(mmvref.spgemm(A, A), sp.csr_matrix)
    if hasattr(sp, "csr_array"):
        assert isinstance(mmvref.spgemm(sp.csr_array(A), A), sp.csr_array)
    with pytest.raises(ValueError, match="do not multiply"):
        mmvref.spgemm(A, sp.csr_matrix(np.ones((2, 2))))
    with pytest.raises(ValueError, match="workspace"):
        mmvref.spgemm(A, A, workspace="tree")
    with pytest.raises(TypeError, match="CSR"):
        mmvref.spgemm(A.tocoo(), A)
    with pytest.raises(ValueError, match="B: .*indices out of range"):
        mmvref.spgemm(A, (np.array([0, 1, 1, 1]), np.array([5]), np.array([1.0]), (3, 3)))
    with pytest.raises(ValueError, match="A: .*non-decreasing"):
        mmvref.spgemm((np.array([0, 1, 0, 1]), np.array([0]), np.array([1.0]), (3, 3)), A)
    big = sp.csr_matrix(np.full((1, 2), 2**16, np.int32))
    col = sp.csr_matrix(np.full((2, 1), 2**15, np.int32))
    with pytest.raises(OverflowError):
        mmvref.spgemm(big, col)  # 2 * 2**31 does not fit int32
    assert mmvref.spgemm(big, col, overflow="wrap").toarray().tolist() == [[0]]
    w = np.array([[2**62, 2**62, -(2**62), -(2**62)]], np.int64)
    exact_zero = mmvref.spgemm(sp.csr_matrix(w), sp.csr_matrix(np.full((4, 1), 3, np.int64)))
    assert exact_zero.nnz == 0  # int64 words wrapped on the way; the exact sum is 0
    with pytest.raises(OverflowError):
        mmvref.spgemm(sp.csr_matrix(np.array([[2**62, 2**62]], np.int64)),
                      sp.csr_matrix(np.full((2, 1), 3, np.int64)))
