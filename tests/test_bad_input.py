"""Every input: no crash, no silent wrong answer (issue 14, section 5).

Hypothesis generates the inputs the API fuzzer (tools/fuzz_api.py) found
trouble with: byte orders x dtypes x layouts, integer extremes at the int32 /
int64 edges for every value dtype / result dtype pair (decided against exact
Python-int sums from tests/oracle.py), malformed CSR offsets and indices, and
keyword arguments of the wrong type. Each case must give the oracle's exact
result or the documented exception (TypeError for a kind or dtype, ValueError
for a value or shape, OverflowError for an integer overflow under
overflow="raise") with the argument's name in the message.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import mmvref
from mmvref import golden
from mmvref._fast.sparse import ops as spmv_mod
from tests.oracle import (
    oracle_compress,
    oracle_scan,
    oracle_segment_sum_csr,
    oracle_segmented_scan,
    oracle_segmented_sum,
    oracle_spmv,
    wrap,
)

# boundary validation is Python code, the same for every compile target (CI's haswell stage skips it)
pytestmark = pytest.mark.native_only

INT_DTYPES = ["int8", "int16", "int32", "int64"]
VALUE_DTYPES = INT_DTYPES + ["float16", "float32", "float64"]
RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}
LAYOUTS = ["native", "big", "strided", "reversed", "readonly"]


def relayout(a, how):
    """The same values in another byte order / memory layout."""
    a = np.asarray(a)
    if how == "big":
        return a.astype(a.dtype.newbyteorder(">"))
    if how == "strided":
        b = np.zeros(2 * a.size, a.dtype)
        b[::2] = a
        return b[::2]
    if how == "reversed":
        return a[::-1].copy()[::-1]
    if how == "readonly":
        b = a.copy()
        b.flags.writeable = False
        return b
    return a


def edge_values(dtype):
    """Values of ``dtype`` near its own extremes and the int32 / int64 edges."""
    info = np.iinfo(dtype)
    picks = [info.min, info.max, info.max - 1, info.min + 1, 0, 1, -1]
    for v in (2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**30, 2**62, -(2**62)):
        if info.min <= v <= info.max:
            picks.append(v)
    return st.sampled_from(picks) | st.integers(int(info.min), int(info.max))


@st.composite
def int_arrays(draw, max_size=40):
    dt = draw(st.sampled_from(INT_DTYPES))
    n = draw(st.integers(0, max_size))
    vals = draw(st.lists(edge_values(dt), min_size=n, max_size=n))
    return np.array(vals, dtype=dt)


@st.composite
def small_arrays(draw, max_size=40):
    dt = draw(st.sampled_from(VALUE_DTYPES))
    n = draw(st.integers(0, max_size))
    vals = draw(st.lists(st.integers(-60, 60), min_size=n, max_size=n))
    return np.array(vals, dtype=dt)


def flags_for(draw, n):
    dt = draw(st.sampled_from(["bool", "int8", "uint8"]))
    return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=dt)


def expect_int(exact, rdt, overflow):
    """Oracle results -> the expected array, or None when OverflowError is due."""
    bits = 8 * np.dtype(rdt).itemsize
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if overflow == "raise" and any(v < lo or v > hi for v in exact):
        return None
    return np.array([wrap(v, bits) for v in exact], dtype=rdt)


def check_int_result(call, exact, rdt, overflow):
    want = expect_int(exact, rdt, overflow)
    if want is None:
        with pytest.raises(OverflowError):
            call()
        return
    got = call()
    assert got.dtype == np.dtype(rdt)
    assert got.tolist() == want.tolist()


# ----------------------------------------------------------------------------- overflow at the edges

@settings(max_examples=40)
@given(x=int_arrays(max_size=24), data=st.data())
def test_scan_family_overflow_is_decided_on_exact_sums(x, data):
    """Every value dtype x result dtype pair (int32, int64 and the default), raise and wrap."""
    dtype = data.draw(st.sampled_from([None, "int32", "int64"]))
    overflow = data.draw(st.sampled_from(["raise", "wrap"]))
    exclusive = data.draw(st.booleans())
    rdt = RESULT[x.dtype.name] if dtype is None else dtype
    f = flags_for(data.draw, x.size)
    cuts = sorted(data.draw(st.lists(st.integers(0, x.size), max_size=4)))
    indptr = np.array([0] + cuts + [x.size], dtype=np.int64)
    x_in = relayout(x, data.draw(st.sampled_from(LAYOUTS)))
    kw = dict(dtype=dtype, overflow=overflow)
    check_int_result(lambda: mmvref.scan(x_in, exclusive=exclusive, **kw), oracle_scan(x, exclusive), rdt, overflow)
    check_int_result(lambda: mmvref.segmented_scan(x_in, f, exclusive=exclusive, **kw),
                     oracle_segmented_scan(x, f, exclusive), rdt, overflow)
    check_int_result(lambda: mmvref.segmented_sum(x_in, f, **kw), oracle_segmented_sum(x, f), rdt, overflow)
    check_int_result(lambda: mmvref.segment_sum_csr(x_in, indptr, **kw),
                     oracle_segment_sum_csr(x, indptr.tolist()), rdt, overflow)
    X = np.stack([x, x[::-1]])
    exact = oracle_scan(x, exclusive) + oracle_scan(x[::-1], exclusive)
    check_int_result(lambda: mmvref.batched_scan(X, exclusive=exclusive, **kw).reshape(-1), exact, rdt, overflow)


@settings(max_examples=40)
@given(data=st.data())
def test_sparse_products_overflow_is_decided_on_exact_sums(data):
    dt = data.draw(st.sampled_from(INT_DTYPES))
    m, n, p = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 3))
    nnz = data.draw(st.integers(0, 8))
    cuts = sorted(data.draw(st.lists(st.integers(0, nnz), min_size=m - 1, max_size=m - 1)))
    indptr = np.array([0] + cuts + [nnz], np.int64)
    indices = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=nnz, max_size=nnz)), np.int64)
    vals = np.array(data.draw(st.lists(edge_values(dt), min_size=nnz, max_size=nnz)), dt)
    x = np.array(data.draw(st.lists(edge_values(dt), min_size=n, max_size=n)), dt)
    overflow = data.draw(st.sampled_from(["raise", "wrap"]))
    rdt = RESULT[dt]
    A = (relayout(indptr, data.draw(st.sampled_from(LAYOUTS))), relayout(indices, "big"), vals, (m, n))
    check_int_result(lambda: mmvref.spmv(A, x, overflow=overflow), oracle_spmv(indptr, indices, vals, x),
                     rdt, overflow)
    D = np.stack([x, x[::-1]], axis=1)
    exact = [v for r in zip(oracle_spmv(indptr, indices, vals, D[:, 0]), oracle_spmv(indptr, indices, vals, D[:, 1]))
             for v in r]
    check_int_result(lambda: mmvref.spmm(A, D, overflow=overflow).reshape(-1), exact, rdt, overflow)
    # C = A B with B = diag-like (n x p) from x: exact entries by Python ints
    bptr = np.arange(n + 1, dtype=np.int64)
    bind = np.array([j % p for j in range(n)], np.int64)
    B = (bptr, bind, x, (n, p))
    dense = [[0] * p for _ in range(m)]
    for r in range(m):
        for q in range(indptr[r], indptr[r + 1]):
            k = int(indices[q])
            dense[r][int(bind[k])] += int(vals[q]) * int(x[k])
    exact = [v for row in dense for v in row]
    check_int_result(lambda: mmvref.spgemm(A, B, overflow=overflow).toarray().reshape(-1), exact, rdt, overflow)
    for op in (golden.spgemm_esc, golden.spgemm_gustavson, lambda a, b: golden.spgemm_ism(a, b, "hash", capacity=2)):
        # the golden SpGEMMs have no overflow keyword: they always raise
        check_int_result(lambda op=op: _golden_dense(op(A, B)).reshape(-1), exact, rdt, "raise")


def _golden_dense(C):
    indptr, indices, data, (m, n) = C
    out = np.zeros((m, n), data.dtype)
    for r in range(m):
        out[r, indices[indptr[r]:indptr[r + 1]]] = data[indptr[r]:indptr[r + 1]]
    return out


def test_int64_input_int32_result_examples():
    """The fuzzer's cases: int64 values with dtype=int32 used to wrap silently."""
    x = np.array([2**40, -(2**40) + 5, 3], np.int64)
    f = np.array([1, 0, 0], np.uint8)
    for call in (lambda **k: mmvref.scan(x, **k), lambda **k: mmvref.segmented_scan(x, f, **k),
                 lambda **k: mmvref.segment_sum_csr(x, [0, 1, 3], **k),
                 lambda **k: mmvref.batched_scan(x[None, :], **k)):
        with pytest.raises(OverflowError, match="int32"):
            call(dtype=np.int32)
        assert call(dtype=np.int32, overflow="wrap").ravel()[-1] == 8
    assert mmvref.segmented_sum(x, f, dtype=np.int32).tolist() == [8]  # the exact sum fits


def test_spgemm_int64_overflow_raises():
    A = (np.array([0, 1]), np.array([0]), np.array([2**62], np.int64), (1, 1))
    for b in (4, -(2**63)):  # the product wraps to exactly 0 / np.abs(int64 min) is negative
        B = (np.array([0, 1]), np.array([0]), np.array([b], np.int64), (1, 1))
        for fn in (mmvref.spgemm, golden.spgemm_esc, golden.spgemm_gustavson, golden.spgemm_ism):
            with pytest.raises(OverflowError):
                fn(A, B)
    assert mmvref.spgemm(A, (np.array([0, 1]), np.array([0]), np.array([4], np.int64), (1, 1)),
                         overflow="wrap").nnz == 0  # 2**64 wraps to 0, dropped as scipy drops zeros


# ----------------------------------------------------------------------------- byte order x dtype x layout

@settings(max_examples=60)
@given(x=small_arrays(), data=st.data())
def test_every_layout_gives_the_oracle_result(x, data):
    how = data.draw(st.sampled_from(LAYOUTS))
    fhow = data.draw(st.sampled_from(LAYOUTS))
    f = flags_for(data.draw, x.size)
    xl, fl = relayout(x, how), relayout(f, fhow)
    rdt = np.dtype(RESULT[x.dtype.name])
    exact = x.dtype.kind != "f"

    def same(got, want):
        assert got.dtype == rdt
        if exact:
            assert got.tolist() == want
        else:  # small integers in floats: every sum is exact
            assert got.astype(np.float64).tolist() == [float(v) for v in want]

    same(mmvref.scan(xl), oracle_scan(x))
    same(mmvref.segmented_scan(xl, fl), oracle_segmented_scan(x, f))
    same(mmvref.segmented_sum(xl, fl), oracle_segmented_sum(x, f))
    assert mmvref.compress(xl, fl).tolist() == oracle_compress(x, f)
    kept = [j for j in range(x.size) if f[j]]
    for v, i in (mmvref.compress_ind(xl, fl), golden.compress_ind(xl, fl, 4)):
        assert v.dtype == x.dtype and v.tolist() == oracle_compress(x, f)
        assert i.dtype == np.int64 and i.tolist() == kept
    same(golden.scan(xl, 4), oracle_scan(x))
    same(golden.seg_scan(xl, fl, 4), oracle_segmented_scan(x, f))
    v, i = mmvref.radix_sort(xl)
    assert i.tolist() == sorted(range(x.size), key=lambda j: float(x[j]))
    k = data.draw(st.integers(0, x.size))
    v, i = mmvref.topk(xl, k)
    assert i.tolist() == sorted(range(x.size), key=lambda j: (-float(x[j]), j))[:k]


@settings(max_examples=50)
@given(data=st.data())
def test_csr_index_byte_orders_and_dtypes(data):
    """Big-endian (and every integer dtype of) indptr / indices: the oracle's result, never a crash."""
    m, n = data.draw(st.integers(0, 5)), data.draw(st.integers(1, 5))
    nnz = data.draw(st.integers(0, 10)) if m else 0
    cuts = sorted(data.draw(st.lists(st.integers(0, nnz), min_size=max(m - 1, 0), max_size=max(m - 1, 0))))
    indptr = np.array(([0] + cuts + [nnz]) if m else [0], np.int64)
    indices = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=nnz, max_size=nnz)), np.int64)
    it = data.draw(st.sampled_from(["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]))
    dt = data.draw(st.sampled_from(VALUE_DTYPES))
    vals = np.array(data.draw(st.lists(st.integers(-20, 20), min_size=nnz, max_size=nnz)), dt)
    x = np.array(data.draw(st.lists(st.integers(-20, 20), min_size=n, max_size=n)), dt)
    ip = relayout(indptr.astype(it), data.draw(st.sampled_from(LAYOUTS)))
    ind = relayout(indices.astype(it), data.draw(st.sampled_from(LAYOUTS)))
    want = oracle_spmv(indptr, indices, vals, x)
    got = mmvref.spmv((ip, ind, relayout(vals, "big"), (m, n)), relayout(x, "big"))
    assert got.astype(np.float64).tolist() == [float(v) for v in want]
    got = golden.spmv(ip, ind, vals, x, 4)
    assert got.astype(np.float64).tolist() == [float(v) for v in want]
    got = mmvref.segment_sum_csr(relayout(vals, "big"), ip)
    assert got.astype(np.float64).tolist() == [float(v) for v in oracle_segment_sum_csr(vals, indptr.tolist())]


# ----------------------------------------------------------------------------- malformed CSR

@st.composite
def bad_indptr(draw):
    """(indptr, nnz) with indptr[0] == 0 and indptr[-1] == nnz but out of order somewhere."""
    m = draw(st.integers(2, 8))
    nnz = draw(st.integers(0, 12))
    inner = draw(st.lists(st.integers(-10, nnz + 10), min_size=m - 1, max_size=m - 1))
    ip = np.array([0] + inner + [nnz], np.int64)
    assume((np.diff(ip) < 0).any())
    return ip, nnz


@settings(max_examples=50)
@given(bad=bad_indptr(), data=st.data())
def test_out_of_order_indptr_is_refused_everywhere(bad, data):
    ip, nnz = bad
    m, n = ip.size - 1, 3
    dt = data.draw(st.sampled_from(["int32", "int64", "float32", "float64"]))
    vals = np.arange(nnz).astype(dt)
    ind = np.zeros(nnz, np.int64)
    ipl = relayout(ip, data.draw(st.sampled_from(LAYOUTS)))
    A = (ipl, ind, vals, (m, n))
    B = (np.arange(n + 1), np.zeros(n, np.int64), np.ones(n, dt), (n, 1))
    calls = [lambda: mmvref.spmv(A, np.ones(n, dt)), lambda: mmvref.spmm(A, np.ones((n, 2), dt)),
             lambda: mmvref.spgemm(A, B), lambda: mmvref.segment_sum_csr(vals, ipl),
             lambda: golden.spmv(ipl, ind, vals, np.ones(n, dt), 4), lambda: golden.segment_sum_csr(vals, ipl, 4),
             lambda: golden.spgemm_esc(A, B)]
    saved = spmv_mod.MIN_CHUNK_COST
    spmv_mod.MIN_CHUNK_COST = data.draw(st.sampled_from([1, saved]))  # several chunks on tiny matrices
    try:
        for call in calls:
            with pytest.raises(ValueError, match="indptr"):
                call()
    finally:
        spmv_mod.MIN_CHUNK_COST = saved


def test_spmv_reported_indptr():
    A = (np.array([0, -8, 5, 10]), np.zeros(10, np.int64), np.arange(10.0), (3, 4))
    with pytest.raises(ValueError, match="indptr"):
        mmvref.spmv(A, np.ones(4))
    with pytest.raises(ValueError, match="indptr"):
        mmvref.spmm(A, np.ones((4, 2)))


@pytest.mark.parametrize("bad", ["neg", "big", "indices_len", "indices_float"])
def test_malformed_indices(bad):
    ip, ind, vals = np.array([0, 2, 3]), np.array([0, 2, 1]), np.ones(3)
    if bad == "neg":
        ind = np.array([0, -1, 1])
    elif bad == "big":
        ind = np.array([0, 3, 1])
    elif bad == "indices_len":
        ind = np.array([0, 2])
    else:
        ind = ind.astype(np.float64)
    exc = TypeError if bad == "indices_float" else ValueError
    for call in (lambda: mmvref.spmv((ip, ind, vals, (2, 3)), np.ones(3)),
                 lambda: mmvref.spmm((ip, ind, vals, (2, 3)), np.ones((3, 2))),
                 lambda: mmvref.spgemm((ip, ind, vals, (2, 3)), (np.arange(4), np.zeros(3, int), np.ones(3), (3, 1))),
                 lambda: golden.spmv(ip, ind, vals, np.ones(3), 4)):
        with pytest.raises(exc, match="indices"):
            call()


# ----------------------------------------------------------------------------- wrong kinds of arguments

BAD_BOOLS = [1, 0, "yes", None, 2.5, np.int64(1), [True]]
BAD_DTYPES = ["int33", "foo", 3, np.uint8, np.complex64, "bool", object]


def test_dtype_float16_result():
    """The segment ops take every value dtype as a result dtype (float16: rounded from float32
    sums, int8/int16: checked like int32); batched_scan keeps its four result dtypes."""
    x = np.arange(5, dtype=np.int32)
    r = mmvref.scan(x, dtype=np.float16)
    assert r.dtype == np.float16 and r.tolist() == [0, 1, 3, 6, 10]
    assert mmvref.segment_sum_csr(x, [0, 5], dtype=np.int8).tolist() == [10]
    with pytest.raises(OverflowError):
        mmvref.segment_sum_csr(np.full(300, 100, np.int32), [0, 300], dtype=np.int8)
    with pytest.raises(TypeError, match="dtype"):
        mmvref.batched_scan(x[None], dtype=np.float16)


@pytest.mark.parametrize("v", BAD_BOOLS, ids=repr)
def test_bool_keywords_must_be_bools(v):
    x, f = np.arange(5, dtype=np.int32), np.array([1, 0, 1, 0, 0], np.uint8)
    calls = {"exclusive": [lambda: mmvref.scan(x, exclusive=v), lambda: mmvref.segmented_scan(x, f, exclusive=v),
                           lambda: mmvref.batched_scan(x[None], exclusive=v), lambda: golden.scan(x, 4, exclusive=v),
                           lambda: golden.seg_scan(x, f, 4, exclusive=v), lambda: golden.sscr(x, f, 4, exclusive=v),
                           lambda: golden.mc_scan(x, 4, 3, exclusive=v), lambda: golden.scan_u(x, 4, exclusive=v)],
             "descending": [lambda: mmvref.radix_sort(x, descending=v), lambda: mmvref.argsort(x, descending=v),
                            lambda: golden.radix_sort(x, 4, descending=v)],
             "largest": [lambda: mmvref.topk(x, 2, largest=v), lambda: golden.topk(x, 2, 4, largest=v)]}
    for name, cs in calls.items():
        for call in cs:
            with pytest.raises(TypeError, match=name):
                call()


@pytest.mark.parametrize("v", BAD_DTYPES, ids=repr)
def test_dtype_keyword_names_dtype(v):
    x = np.arange(5, dtype=np.int32)
    for call in (lambda: mmvref.scan(x, dtype=v), lambda: mmvref.segmented_sum(x, [1, 0, 0, 1, 0], dtype=v),
                 lambda: mmvref.segment_sum_csr(x, [0, 5], dtype=v), lambda: mmvref.batched_scan(x[None], dtype=v)):
        with pytest.raises(TypeError, match="dtype"):
            call()


@pytest.mark.parametrize("k", [2.0, 2.5, "2", None, -1, 6])
def test_topk_k(k):
    x = np.arange(5, dtype=np.int16)
    import npu
    from npu.testing import CpuTcuscanBackend

    exc = ValueError if isinstance(k, int) else TypeError
    for b in (mmvref, golden, npu.TorchEmulationBackend(), npu.MmvrefBackend(), CpuTcuscanBackend()):
        with pytest.raises(exc, match="k"):
            b.topk(x, k)


def test_cores_and_s_bounds_do_not_hang():
    x = np.arange(10)
    for cores in (10**9, 10**18):
        with pytest.raises(ValueError, match="cores"):
            golden.mc_scan(x, 4, cores)
        with pytest.raises(ValueError, match="cores"):
            golden.radix_sort(x, 4, cores)
    with pytest.raises(ValueError, match="s must"):
        golden.scan(x, 10**30)
    with pytest.raises(TypeError, match="cores"):
        golden.mc_scan(x, 4, 2.5)
    with pytest.raises(TypeError, match="capacity"):
        golden.spgemm_ism((np.array([0]), [], np.zeros(0), (0, 0)), (np.array([0]), [], np.zeros(0), (0, 0)),
                          capacity=2.5)


@pytest.mark.parametrize("op", ["emu", "mmvb", "tcu"])
def test_npu_backends_check_lengths_against_the_shape(op):
    import npu
    from npu.testing import CpuTcuscanBackend

    b = {"emu": npu.TorchEmulationBackend, "mmvb": npu.MmvrefBackend, "tcu": CpuTcuscanBackend}[op]()
    A = (np.array([0, 1, 2]), np.array([0, 1]), np.ones(2, np.float16), (2, 3))
    for x in (np.ones(2, np.float16), np.ones(4, np.float16)):
        with pytest.raises(ValueError, match="x"):
            b.spmv(A, x)
    for D in (np.ones((2, 2), np.float16), np.ones((4, 2), np.float16)):
        with pytest.raises(ValueError, match="D"):
            b.spmm(A, D)


def test_torch_boundary():
    torch = pytest.importorskip("torch")
    from torch._subclasses.fake_tensor import FakeTensorMode

    import npu.torch_ops  # noqa: F401

    bf = torch.ones(3, dtype=torch.bfloat16)
    # the segment ops take bfloat16 (through their torch ops: float32 accumulation, bfloat16 out)
    assert mmvref.scan(bf).dtype == torch.bfloat16 and mmvref.scan(bf).tolist() == [1, 2, 3]
    assert mmvref.segmented_sum(bf, torch.tensor([1, 0, 0], dtype=torch.bool)).tolist() == [3]
    for call in (lambda: mmvref.radix_sort(bf), lambda: torch.ops.mmv.scan(bf)):
        with pytest.raises(TypeError, match="x.*bfloat16"):
            call()
    with pytest.raises(TypeError, match="flags"):
        mmvref.segmented_sum(torch.ones(3), bf)
    ip, ind = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    for dd, xd in ((torch.int32, torch.float32), (torch.int8, torch.int16), (torch.int64, torch.float16)):
        d, x = torch.ones(2, dtype=dd), torch.ones(2, dtype=xd)
        real = torch.ops.mmv.spmv(ip, ind, d, x).dtype
        with FakeTensorMode() as mode:
            fake = torch.ops.mmv.spmv(*(mode.from_tensor(t) for t in (ip, ind, d, x))).dtype
        assert real == fake
    with pytest.raises(ValueError, match="indptr"):
        torch.ops.mmv.spmv(torch.zeros(0, dtype=torch.int64), ind[:0], d[:0], x)


def test_empty_lists_are_empty_flags_and_indices():
    assert mmvref.segmented_sum(np.zeros(0, np.int32), []).tolist() == []
    assert golden.split(np.zeros(0, np.int32), [], 4).tolist() == []
    e = np.zeros(0, np.int32)
    for v, i in (mmvref.compress_ind(e, []), golden.compress_ind(e, [], 4)):
        assert v.tolist() == i.tolist() == [] and i.dtype == np.int64
    assert mmvref.spmv(([0, 0], [], np.zeros(0), (1, 2)), np.ones(2)).tolist() == [0.0]


def test_dense_workspace_too_large_is_a_clear_error():
    A = (np.array([0, 1]), np.array([0]), np.ones(1), (1, 1))
    B = (np.array([0, 1]), np.array([5]), np.ones(1), (1, 2**40))
    with pytest.raises(MemoryError, match="workspace"):
        mmvref.spgemm(A, B, workspace="dense")
    assert mmvref.spgemm(A, B).indices.tolist() == [5]  # auto: the sparse workspace


def test_conformance_refuses_zero_examples():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "conformance", "--max-examples", "0"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "--max-examples" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- read-only inputs

def _read_only(a):
    if isinstance(a, np.ndarray):
        b = a.copy()
        b.flags.writeable = False
        return b
    if hasattr(a, "indptr"):  # a scipy CSR matrix: its three arrays read-only
        import scipy.sparse as sp

        m = sp.csr_matrix((_read_only(a.data), _read_only(a.indices), _read_only(a.indptr)), shape=a.shape)
        assert not m.data.flags.writeable and not m.indices.flags.writeable
        return m
    return a


def _read_only_calls():
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    n = 1000
    x = rng.integers(-5, 6, n).astype(np.float32)
    x2 = rng.integers(-5, 6, (n, 8)).astype(np.float32)
    xi = rng.integers(-5, 6, n).astype(np.int32)
    flags = np.zeros(n, np.uint8)
    flags[::7] = 1
    indptr = np.arange(0, n + 1, 10, dtype=np.int64)
    index = np.sort(rng.integers(0, 100, n))
    mask = x > 0
    A = sp.random(n, n, 0.01, format="csr", random_state=0, dtype=np.float32)
    xs = rng.random(n).astype(np.float32)
    return {
        "scan": (mmvref.scan, (xi,)),
        "segmented_scan": (mmvref.segmented_scan, (x, flags)),
        "segmented_sum": (mmvref.segmented_sum, (xi, flags)),
        "segment_sum_csr": (mmvref.segment_sum_csr, (x, indptr)),
        "segment_csr": (lambda a, p: mmvref.segment_csr(a, p, reduce="max"), (x2, indptr)),
        "segment_coo": (mmvref.segment_coo, (x2, index)),
        "scatter": (lambda a, i: mmvref.scatter(a, i, reduce="mean"), (x2, index)),
        "gather_csr": (mmvref.gather_csr, (x2[:100], indptr)),
        "compress": (mmvref.compress, (x, mask)),
        "compress_ind": (mmvref.compress_ind, (x, mask)),
        "spmv": (mmvref.spmv, (A, xs)),
        "spmm": (mmvref.spmm, (A, x2)),
        "prepare": (lambda M, v: mmvref.prepare(M) @ v, (A, xs)),
        "radix_sort": (mmvref.radix_sort, (xi,)),
        "topk": (lambda a: mmvref.topk(a, 10), (x,)),
        "split": (mmvref.split, (x, mask)),
    }


@pytest.mark.parametrize("op", list(_read_only_calls()))
def test_read_only_inputs_compile_nothing_more_and_are_never_returned(op, monkeypatch):
    """Read-only inputs take the kernels the writeable ones compiled (Numba's array type carries
    the flag: without the boundary's writeable view each read-only input compiled every kernel
    again); the inputs keep their values, and no result is a view of one (the writeable view
    must not escape). A dispatcher that finds no compiled specialization for its arguments calls
    ``_compile_for_args`` (to compile, or to load from Numba's cache): none may be called."""
    from numba.core import dispatcher

    fn, args = _read_only_calls()[op]
    want = fn(*args)
    ro = tuple(_read_only(a) for a in args)
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in ro]
    missed = []
    original = dispatcher.Dispatcher._compile_for_args

    def recording(self, *a, **kw):
        missed.append(self.py_func.__qualname__)
        return original(self, *a, **kw)

    monkeypatch.setattr(dispatcher.Dispatcher, "_compile_for_args", recording)
    fn(*args)  # the check itself sees the writeable call's kernels as found
    assert missed == []
    got = fn(*ro)
    assert missed == []
    results = got if isinstance(got, tuple) else (got,)
    for w, g in zip(want if isinstance(want, tuple) else (want,), results):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    arrays = [a for a in ro if isinstance(a, np.ndarray)] + [
        b for a in ro if hasattr(a, "indptr") for b in (a.data, a.indices, a.indptr)]
    for r in results:
        for a in arrays:
            assert not np.shares_memory(np.asarray(r), a)
    for a, b in zip(ro, before):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
            assert not a.flags.writeable


@pytest.mark.parametrize("vals,x", [
    ([2**63 - 1, 2**63 - 1, -2**63], [1]),  # a partial sum leaves int64, the row's sum does not
    ([2**62, -2**62], [-2**63]),  # products leave int64, their sum (0) does not
])
def test_golden_ism_words_wrap_to_the_exact_sum(vals, x):
    """The golden Insert-Sort-Merge SpGEMM adds in int64 words that wrap (exact modulo 2**64, as its
    siblings): a row whose exact result fits gives it, without numpy's overflow warning (found by
    test_sparse_products_overflow_is_decided_on_exact_sums)."""
    nnz = len(vals)
    A = (np.array([0, nnz], np.int64), np.zeros(nnz, np.int64), np.array(vals, np.int64), (1, 1))
    B = (np.array([0, 1], np.int64), np.zeros(1, np.int64), np.array(x, np.int64), (1, 1))
    exact = sum(int(v) * int(x[0]) for v in vals)
    for op in (golden.spgemm_esc, golden.spgemm_gustavson, lambda a, b: golden.spgemm_ism(a, b, "hash", capacity=2),
               lambda a, b: golden.spgemm_ism(a, b, "coord", capacity=1)):
        assert _golden_dense(op(A, B)).reshape(-1).tolist() == [exact]
