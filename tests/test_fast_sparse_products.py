"""Fast spmm / spgemm (mmvref.spmm, mmvref.spgemm) against scipy."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

import mmvref

RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float32": "float32", "float64": "float64"}


@st.composite
def matrices(draw, dtype, m_max=40, n_max=40):
    m, n = draw(st.integers(0, m_max)), draw(st.integers(0, n_max))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 1.0]))
    dense = rng.integers(-20, 21, (m, n)) * (rng.random((m, n)) < density)
    if m and n and draw(st.booleans()):
        dense[int(rng.integers(0, m))] = rng.integers(1, 20, n)  # one full row
    return sp.csr_matrix(dense.astype(dtype), shape=(m, n)), rng


@given(data=st.data(), dtype=st.sampled_from(list(RESULT)))
def test_spmm_equals_scipy(data, dtype):
    A, rng = data.draw(matrices(dtype))
    k = data.draw(st.sampled_from([1, 3, 8, 13]))
    D = rng.integers(-20, 21, (A.shape[1], k)).astype(dtype)
    got = mmvref.spmm(A, D)
    assert got.dtype == np.dtype(RESULT[dtype]) and got.shape == (A.shape[0], k)
    ref = A.toarray().astype(object) @ D.astype(object) if A.shape[1] else np.zeros((A.shape[0], k), object)
    if dtype.startswith("float"):
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=1e-5, atol=1e-3)
    else:
        assert got.tolist() == ref.tolist()


@given(data=st.data(), dtype=st.sampled_from(["int16", "int32", "float64"]),
       workspace=st.sampled_from(["auto", "dense", "sparse"]))
def test_spgemm_equals_scipy(data, dtype, workspace):
    A, rng = data.draw(matrices(dtype, 30, 25))
    p = data.draw(st.integers(0, 30))
    dense_b = rng.integers(-20, 21, (A.shape[1], p)) * (rng.random((A.shape[1], p)) < 0.3)
    B = sp.csr_matrix(dense_b.astype(dtype), shape=(A.shape[1], p))
    C = mmvref.spgemm(A, B, workspace=workspace)
    R = (A.astype(np.int64 if dtype != "float64" else np.float64) @ B.astype(
        np.int64 if dtype != "float64" else np.float64)).tocsr()
    R.sum_duplicates()
    R.eliminate_zeros()
    R.sort_indices()
    assert C.shape == R.shape and C.dtype == np.dtype(RESULT[dtype])
    np.testing.assert_array_equal(C.indptr, R.indptr)
    np.testing.assert_array_equal(C.indices, R.indices)
    np.testing.assert_array_equal(C.data, R.data)  # small integers (integer-valued floats): exact


def test_errors_and_torch():
    torch = pytest.importorskip("torch")
    A = sp.csr_matrix(np.eye(3, dtype=np.float32))
    out = mmvref.spmm(A, torch.ones(3, 2))
    assert isinstance(out, torch.Tensor) and out.tolist() == [[1.0, 1.0]] * 3
    with pytest.raises(ValueError, match="rows"):
        mmvref.spmm(A, np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="do not multiply"):
        mmvref.spgemm(A, sp.csr_matrix(np.ones((2, 2))))
    with pytest.raises(ValueError, match="workspace"):
        mmvref.spgemm(A, A, workspace="tree")
    with pytest.raises(OverflowError):
        mmvref.spmm(sp.csr_matrix(np.full((1, 2), 2**30, np.int32)), np.full((2, 1), 2, np.int32))
