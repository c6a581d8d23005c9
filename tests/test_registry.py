"""Every registry op: its fast function agrees with its golden function
(integers bit-identical, dtype included), parametrised over the registry."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mmvref import REGISTRY
from mmvref._dtypes import VALUE_DTYPES, result_dtype

#: the N-d segment reductions' kernels are checked per compile target by test_segment_reduce; their
#: golden comparison here (compile-heavy, target-independent) runs in CI's native stage only
_ND = ("segment_csr", "segment_coo", "scatter", "gather_csr")
#: the scan family (sorts, top-k, split, sampling, batched_scan) has one portable kernel path and no
#: vector intrinsics (``_target.FAMILIES``), so, as test_fast_scanfamily, its golden comparison runs
#: in CI's native stage only; the x86-64 README job still checks each of its ops for that target
_SCANFAMILY = "mmvref._fast.scanfamily."


def _native_only(spec):
    return spec.name in _ND or spec.fast_ref.startswith(_SCANFAMILY)


FAST_SPECS = [pytest.param(spec, id=spec.name, marks=[pytest.mark.native_only] if _native_only(spec) else [])
              for spec in REGISTRY.values() if spec.fast_ref is not None]
INT_DTYPES = ["int8", "int16", "int32", "int64"]


def test_registry_entries_resolve():
    for spec in REGISTRY.values():
        assert callable(spec.golden), spec.name
        assert callable(spec.bound), spec.name
        assert spec.fast_ref is None or callable(spec.fast), spec.name
        if spec.dask_ref is not None and importlib.util.find_spec("dask") is not None:
            assert callable(spec.dask) and spec.fast_ref is not None, spec.name
        for d in VALUE_DTYPES:
            if d in spec.dtypes:
                assert spec.result_dtype(d) in (result_dtype(d), d, np.dtype(np.int64))


def test_registry_rejects_unknown_dtype():
    with pytest.raises(TypeError, match="scan"):
        REGISTRY["scan"].result_dtype(np.uint16)


@st.composite
def _case(draw, op):
    s = draw(st.sampled_from([2, 3, 4, 8]))
    n = draw(st.one_of(st.sampled_from([0, 1, s - 1, s, s + 1, s * s - 1, s * s, s * s + 1]),
                       st.integers(0, 3 * s * s)))
    dt = np.dtype(draw(st.sampled_from(INT_DTYPES)))
    info = np.iinfo(dt)
    lim = min(info.max, 2**20)
    x = np.array(draw(st.lists(st.integers(-lim, lim), min_size=n, max_size=n)), dtype=dt)
    density = draw(st.sampled_from([0.0, 1.0, 0.1, 0.5]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    f = (rng.random(n) < density).astype(np.uint8)
    if op == "spmv":
        n_rows = draw(st.integers(0, 2 * s))
        lens = rng.integers(0, 4, n_rows) * (rng.random(n_rows) < 0.7)
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        n_cols = max(1, n % (2 * s + 1))
        ind = rng.integers(0, n_cols, int(ptr[-1])).astype(np.int32)
        data = rng.integers(-100, 100, int(ptr[-1])).astype(dt)
        xv = rng.integers(-100, 100, n_cols).astype(dt)
        return s, ((ptr, ind, data, (n_rows, n_cols)), xv), (ptr, ind, data, xv)
    if op == "segment_sum_csr":
        cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, n + 3))))
        ptr = np.concatenate([[0], cuts, [n]]).astype(np.int64)
        return s, (x, ptr), (x, ptr)
    if op in ("spmm", "spgemm"):
        import scipy.sparse as sps

        m = draw(st.integers(0, 2 * s))
        dense = (rng.integers(-50, 51, (m, 6)) * (rng.random((m, 6)) < 0.4)).astype(dt)
        A = sps.csr_matrix(dense, shape=(m, 6))
        if op == "spmm":
            D = rng.integers(-50, 51, (6, int(rng.integers(1, 5)))).astype(dt)
            return s, (A, D), (A.indptr, A.indices, A.data, D)
        B = sps.csr_matrix((rng.integers(-50, 51, (6, 5)) * (rng.random((6, 5)) < 0.4)).astype(dt))
        return s, (A, B), (A, B)
    if op in ("segment_csr", "segment_coo", "scatter", "gather_csr"):  # 2-D: two feature columns
        x2 = np.stack([x, x[::-1]], axis=1)
        cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, n + 3))))
        ptr = np.concatenate([[0], cuts, [n]]).astype(np.int64)
        if op == "segment_csr":
            return s, (x2, ptr), (x2, ptr)
        if op == "gather_csr":
            g = x2[: len(ptr) - 1] if len(ptr) - 1 <= n else np.resize(x2, (len(ptr) - 1, 2))
            return s, (g, ptr), (g, ptr)
        ids = rng.integers(0, 5, n)
        ids = np.sort(ids) if op == "segment_coo" else ids
        return s, (x2, ids), (x2, ids)
    if op in ("scan", "radix_sort", "argsort"):
        return s, (x,), (x,)
    if op == "batched_scan":
        rows = draw(st.integers(0, 3))
        xb = np.resize(x, (rows, n)) if n else np.zeros((rows, 0), dt)
        return s, (xb,), (xb,)
    if op == "topk":
        k = draw(st.integers(0, n))
        return s, (x, k), (x, k)
    if op == "weighted_sample":
        w = np.minimum(np.abs(x[:max(n, 1)].astype(np.int64)), info.max - 1) if n else np.ones(1, np.int64)
        w[0] += 1
        u = draw(st.floats(0, 1, exclude_max=True))
        return s, (w.astype(dt), u), (w.astype(dt), u)
    if op == "top_p_sample":  # multiples of 2**-10: float64 sums exact in every order
        base = x.astype(np.int64) if n else np.zeros(1, np.int64)
        probs = ((np.abs(base) % 64 + 1) / 1024).reshape(1, -1)
        u = np.array([draw(st.floats(0, 1, exclude_max=True))])
        return s, (probs, 0.5, u), (probs, 0.5, u)
    return s, (x, f), (x, f)


@pytest.mark.parametrize("spec", FAST_SPECS)
@given(data=st.data())
def test_fast_bit_identical_to_golden_on_integers(spec, data):
    s, fast_args, golden_args = data.draw(_case(spec.name))
    expected = spec.golden(*golden_args) if spec.name == "spgemm" else spec.golden(*golden_args, s)
    actual = spec.fast(*fast_args)
    if spec.name == "spgemm":  # golden: (indptr, indices, data, shape); fast: scipy CSR
        actual = (actual.indptr.astype(np.int64), actual.indices.astype(np.int64), actual.data, actual.shape)
        assert actual[3] == expected[3]
        expected, actual = expected[:3], actual[:3]
    for e, a in zip(expected, actual) if isinstance(expected, tuple) else [(expected, actual)]:
        e, a = np.asarray(e), np.asarray(a)
        assert a.dtype == e.dtype, (spec.name, a.dtype, e.dtype)
        np.testing.assert_array_equal(a, e)
