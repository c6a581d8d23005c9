"""mmvref.dask (issue 18): the ops over random chunkings, against the plain-loop oracles (exact for
integers, including whether an overflow is raised; floats within the sequential bound) and against the
single-machine ops (bit-identical for integers). Chunk borders are where the bugs live, so the
chunkings include empty chunks, chunks of one element and borders at segment starts; segments span many
chunks, and chunks hold no start. On the synchronous scheduler here; on a 2-process LocalCluster in
test_dask_cluster.py."""
from __future__ import annotations

import numpy as np
import pytest

dask = pytest.importorskip("dask")
import dask.array as da  # noqa: E402
from hypothesis import assume, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import mmvref  # noqa: E402
import mmvref.dask as md  # noqa: E402
from tests.oracle import (  # noqa: E402
    oracle_compress,
    oracle_scan,
    oracle_segment_sum_csr,
    oracle_segmented_scan,
    oracle_segmented_sum,
    oracle_spmv,
    wrap,
)

pytestmark = pytest.mark.native_only  # orchestration of the single-machine kernels; no kernel of its own


@pytest.fixture(autouse=True)
def _sync_scheduler():
    with dask.config.set(scheduler="sync"):
        yield


INT_DTYPES = ("int8", "int16", "int32", "int64")
FLOAT_DTYPES = ("float16", "float32", "float64")
RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}

# ----------------------------------------------------------------------------- strategies


@st.composite
def chunkings(draw, n):
    """Chunk sizes summing to n: cut points anywhere (repeats give empty chunks), sometimes a run of
    chunks of one element, sometimes one chunk."""
    kind = draw(st.sampled_from(["cuts", "ones", "one"]))
    if kind == "one" or n == 0:
        return (n,) if draw(st.booleans()) or n == 0 else (0, n, 0)
    if kind == "ones":
        k = draw(st.integers(1, min(n, 40)))
        return (1,) * k + ((n - k,) if n > k else ())
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=12)))
    b = [0, *cuts, n]
    return tuple(b[i + 1] - b[i] for i in range(len(b) - 1))


def _borders(chunks):
    return np.cumsum(chunks)[:-1]


@st.composite
def values(draw, dtype, n):
    dt = np.dtype(dtype)
    if dt.kind == "i":
        info = np.iinfo(dt)
        scale = draw(st.sampled_from(["small", "full", "near"]))
        if scale == "small":
            lo, hi = -9, 9
        elif scale == "full":
            lo, hi = int(info.min), int(info.max)
        else:  # half the result dtype's limit: sums that cross it after a few terms
            half = 1 << (62 if dt == np.int64 else 30)
            lo, hi = max(int(info.min), -half), min(int(info.max), half)
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        v = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64)
        if scale == "near" and n and draw(st.booleans()):
            v[:] = hi if draw(st.booleans()) else lo  # a monotone run: overflows after a few elements
        return v.astype(dt)
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) * draw(st.sampled_from([1.0, 1e3]))).astype(dt)


@st.composite
def segmented_case(draw, dtypes=INT_DTYPES + FLOAT_DTYPES, max_n=300):
    dtype = draw(st.sampled_from(dtypes + tuple(d for d in ("int32", "int64") if d in dtypes)))  # overflows
    n = draw(st.integers(0, max_n))
    chunks = draw(chunkings(n))
    x = draw(values(dtype, n))
    density = draw(st.sampled_from([0.0, 0.02, 0.2, 1.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    f = (rng.random(n) < density).astype(draw(st.sampled_from(["bool", "int8", "uint8"])))
    if n and draw(st.booleans()):  # segments starting exactly at chunk borders
        f[_borders(chunks)[_borders(chunks) < n]] = 1
    return x, f, chunks


def _d(a, chunks):
    return da.from_array(a, chunks=(chunks,))


# ----------------------------------------------------------------------------- checking


def _expect_int(exact, rdt, overflow):
    """(values, raises): the oracle's exact values, wrapped or judged as the contract says."""
    info = np.iinfo(rdt)
    bits = 8 * np.dtype(rdt).itemsize
    bad = any(v < info.min or v > info.max for v in exact)
    if overflow == "raise" and bad:
        return None, True
    return np.array([wrap(v, bits) for v in exact], dtype=rdt), False


def _run(thunk):
    try:
        return thunk(), None
    except OverflowError as exc:
        return None, exc


def check_int(op_dask, op_single, exact, rdt, overflow):
    want, raises = _expect_int(exact, rdt, overflow)
    got, err = _run(lambda: op_dask().compute())
    single, serr = _run(op_single)
    if raises:
        assert err is not None and serr is not None, f"expected OverflowError, got {got}"
        assert "overflows" in str(err)
        return
    assert err is None, f"raised {err} but every exact result fits"
    assert got.dtype == rdt
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, single)  # bit-identical to the single-machine op


def check_float(got, exact, abs_terms, counts, rdt):
    """|got - exact| <= gamma_(k+2) * sum|terms| per output (each output a sum of its own k terms)."""
    got = np.asarray(got)
    assert got.dtype == rdt
    u = np.finfo(rdt).eps / 2
    k = np.asarray(counts, np.float64) + 2
    bound = k * u / (1 - k * u) * np.asarray(abs_terms, np.float64)
    err = np.abs(got.astype(np.float64) - np.asarray(exact, np.float64))
    assert got.shape == np.shape(exact)
    assert (err <= bound).all(), f"error {err.max()} above the bound at {np.argmax(err - bound)}"


def _counts_scan(f, exclusive):
    return oracle_segmented_scan(np.ones(len(f), np.int64), f, exclusive)


# ----------------------------------------------------------------------------- the ops


@given(segmented_case(), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_scan(case, exclusive, overflow):
    x, _, chunks = case
    rdt = np.dtype(RESULT[x.dtype.name])
    dx = _d(x, chunks)
    if rdt.kind == "i":
        check_int(lambda: md.scan(dx, exclusive=exclusive, overflow=overflow),
                  lambda: mmvref.scan(x, exclusive=exclusive, overflow=overflow),
                  oracle_scan(x, exclusive), rdt, overflow)
    else:
        x64 = x.astype(np.float64)
        check_float(md.scan(dx, exclusive=exclusive).compute(), oracle_scan(x64, exclusive),
                    oracle_scan(np.abs(x64), exclusive), oracle_scan(np.ones(x.size, np.int64), exclusive), rdt)


@given(segmented_case(), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_segmented_scan(case, exclusive, overflow):
    x, f, chunks = case
    rdt = np.dtype(RESULT[x.dtype.name])
    dx, df = _d(x, chunks), _d(f, chunks)
    if rdt.kind == "i":
        check_int(lambda: md.segmented_scan(dx, df, exclusive=exclusive, overflow=overflow),
                  lambda: mmvref.segmented_scan(x, f, exclusive=exclusive, overflow=overflow),
                  oracle_segmented_scan(x, f, exclusive), rdt, overflow)
    else:
        x64 = x.astype(np.float64)
        check_float(md.segmented_scan(dx, df, exclusive=exclusive).compute(),
                    oracle_segmented_scan(x64, f, exclusive), oracle_segmented_scan(np.abs(x64), f, exclusive),
                    _counts_scan(f, exclusive), rdt)


@given(segmented_case(), st.sampled_from(["raise", "wrap"]))
def test_segmented_sum(case, overflow):
    x, f, chunks = case
    rdt = np.dtype(RESULT[x.dtype.name])
    dx, df = _d(x, chunks), _d(f, chunks)
    r = md.segmented_sum(dx, df, overflow=overflow)
    assert not any(np.isnan(c) for c in r.chunks[0]), "the counting pass leaves known chunks"
    assert r.shape == (len(oracle_segmented_sum(x, f)),)
    if rdt.kind == "i":
        check_int(lambda: r, lambda: mmvref.segmented_sum(x, f, overflow=overflow),
                  oracle_segmented_sum(x, f), rdt, overflow)
    else:
        x64 = x.astype(np.float64)
        check_float(r.compute(), oracle_segmented_sum(x64, f), oracle_segmented_sum(np.abs(x64), f),
                    oracle_segmented_sum(np.ones(x.size, np.int64), f), rdt)


@st.composite
def csr_case(draw, dtypes=INT_DTYPES + FLOAT_DTYPES):
    x, _, chunks = draw(segmented_case(dtypes))
    n = x.size
    m = draw(st.integers(0, 30))
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=max(m - 1, 0), max_size=max(m - 1, 0))))
    if m == 0 and n:
        assume(False)  # indptr must end at len(x): no rows cannot cover a non-empty x
    indptr = np.array([0, *cuts, n] if m else [0], np.int64)
    if draw(st.booleans()) and len(chunks) > 1:  # rows starting and ending at chunk borders
        b = _borders(chunks)
        indptr = np.unique(np.concatenate([indptr, b])).astype(np.int64)
    return x, indptr, chunks


@given(csr_case(), st.sampled_from(["raise", "wrap"]))
def test_segment_sum_csr(case, overflow):
    x, indptr, chunks = case
    rdt = np.dtype(RESULT[x.dtype.name])
    dx = _d(x, chunks)
    if rdt.kind == "i":
        check_int(lambda: md.segment_sum_csr(dx, indptr, overflow=overflow),
                  lambda: mmvref.segment_sum_csr(x, indptr, overflow=overflow),
                  oracle_segment_sum_csr(x, indptr), rdt, overflow)
    else:
        x64 = x.astype(np.float64)
        check_float(md.segment_sum_csr(dx, indptr).compute(), oracle_segment_sum_csr(x64, indptr),
                    oracle_segment_sum_csr(np.abs(x64), indptr), np.diff(indptr), rdt)


@given(segmented_case())
def test_compress(case):
    x, f, chunks = case
    r = md.compress(_d(x, chunks), _d(f, chunks))
    assert r.shape == (int(np.count_nonzero(f)),) and r.dtype == x.dtype
    got = r.compute()
    want = np.array(oracle_compress(x, f), dtype=x.dtype)
    np.testing.assert_array_equal(got.view(f"u{x.dtype.itemsize}"), want.view(f"u{x.dtype.itemsize}"))


@st.composite
def batched_case(draw):
    dtype = draw(st.sampled_from(INT_DTYPES + FLOAT_DTYPES))
    rows, cols = draw(st.integers(0, 6)), draw(st.integers(0, 60))
    x = draw(values(dtype, rows * cols)).reshape(rows, cols)
    return x, (draw(chunkings(rows)), draw(chunkings(cols)))


@given(batched_case(), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_batched_scan(case, exclusive, overflow):
    x, chunks = case
    rdt = np.dtype(RESULT[x.dtype.name])
    dx = da.from_array(x, chunks=chunks)
    if rdt.kind == "i":
        exact = [v for row in x for v in oracle_scan(row, exclusive)]
        want, raises = _expect_int(exact, rdt, overflow)
        got, err = _run(lambda: md.batched_scan(dx, exclusive=exclusive, overflow=overflow).compute())
        if raises:
            assert err is not None
            with pytest.raises(OverflowError):
                mmvref.batched_scan(x, exclusive=exclusive, overflow=overflow)
            return
        assert err is None, err
        np.testing.assert_array_equal(got.reshape(-1), want)
        np.testing.assert_array_equal(got, mmvref.batched_scan(x, exclusive=exclusive, overflow=overflow))
    else:
        got = md.batched_scan(dx, exclusive=exclusive).compute()
        x64 = x.astype(np.float64)
        for r in range(x.shape[0]):
            check_float(got[r], oracle_scan(x64[r], exclusive), oracle_scan(np.abs(x64[r]), exclusive),
                        oracle_scan(np.ones(x.shape[1], np.int64), exclusive), rdt)


@st.composite
def spmv_case(draw):
    dtype = draw(st.sampled_from(("int8", "int32", "int64", "float32", "float64")))
    m, n = draw(st.integers(0, 40)), draw(st.integers(1, 30))
    lengths = draw(st.lists(st.integers(0, 12), min_size=m, max_size=m))
    indptr = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
    nnz = int(indptr[-1])
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    indices = rng.integers(0, n, nnz).astype(np.int64)
    data = draw(values(dtype, nnz))
    x = draw(values(dtype, n))
    row_chunks = draw(st.one_of(st.none(), st.integers(1, 8), chunkings(m)))
    return (indptr, indices, data, (m, n)), x, row_chunks


@given(spmv_case(), st.sampled_from(["raise", "wrap"]))
def test_spmv(case, overflow):
    A, x, row_chunks = case
    indptr, indices, data, (m, n) = A
    rdt = np.dtype(RESULT[x.dtype.name])
    dx = da.from_array(x, chunks=max(1, n // 3))  # several chunks: the op broadcasts one copy
    r = md.spmv(A, dx, row_chunks=row_chunks, overflow=overflow)
    assert r.shape == (m,)
    if rdt.kind == "i":
        check_int(lambda: r, lambda: mmvref.spmv(A, x, overflow=overflow),
                  oracle_spmv(indptr, indices, data, x), rdt, overflow)
    else:
        d64, x64 = data.astype(np.float64), x.astype(np.float64)
        check_float(r.compute(), oracle_spmv(indptr, indices, d64, x64),
                    oracle_spmv(indptr, indices, np.abs(d64), np.abs(x64)), np.diff(indptr), rdt)


# ----------------------------------------------------------------------------- fixed cases


def test_segment_across_many_chunks_and_exact_carry():
    """One segment over 1000 chunks of one element, int32 values whose running sum leaves int32 and
    comes back: the carry is exact, so nothing overflows, and the verdict is the whole array's."""
    x = np.array([2**31 - 1] * 3 + [-(2**31 - 1)] * 3 + [1] * 994, np.int32)
    dx = da.from_array(x, chunks=1)
    with pytest.raises(OverflowError, match="scan: a result overflows int32"):
        md.scan(dx).compute()
    got = md.scan(dx, overflow="wrap").compute()
    np.testing.assert_array_equal(got, mmvref.scan(x, overflow="wrap"))
    # the sum of the single segment fits although its prefixes do not
    assert md.segmented_sum(dx, np.zeros(1000, np.uint8)).compute().tolist() == [994]
    assert md.segment_sum_csr(dx, [0, 1000]).compute().tolist() == [994]


def test_carry_tree_depth():
    """1,025 and 4,096 chunks: the carries are combined by a tree of fan-in 32 (3 levels up, 3 down),
    so no task reads more than 32 of them and the graph has O(chunks) tasks. (The scan computed over
    1,025 chunks, the fewest that take three levels: 4,096 took 14-27 s of a CI worker, the local
    scheduler's cost per task.)"""
    x = da.ones(1025, dtype=np.int32, chunks=1)
    r = md.scan(x)
    graph = dict(r.__dask_graph__())
    assert len(graph) < 8 * 1025
    got = r.compute()
    assert got.tolist() == list(range(1, 1026))
    from mmvref.dask import _graph

    for n in (1025, 4096):
        tree, keys = _graph.carry_tree("t", [("leaf", i) for i in range(n)], lambda a, b: a, None)
        ups = [k for k in tree if k[0] == "t-up"]
        assert max(k[1] for k in ups) == 3  # 32**3 >= n > 32**2
        assert all(len(task[2]) <= 32 for k, task in tree.items() if k[0] == "t-up")
        assert all(len(task[3]) <= 32 for k, task in tree.items() if k[0] == "t-down")


def test_empty_and_single_element():
    for n, chunks in ((0, (0,)), (1, (1,)), (1, (0, 1, 0)), (3, (0, 0, 3))):
        x = np.arange(1, n + 1, dtype=np.int32)
        f = np.zeros(n, np.uint8)
        dx, df = da.from_array(x, chunks=(chunks,)), da.from_array(f, chunks=(chunks,))
        assert md.scan(dx).compute().tolist() == oracle_scan(x)
        assert md.segmented_sum(dx, df).compute().tolist() == oracle_segmented_sum(x, f)
        assert md.compress(dx, df).compute().tolist() == []


def test_bad_input_names_the_argument():
    x = da.arange(10, dtype=np.int32, chunks=3)
    with pytest.raises(TypeError, match="x has dtype uint32"):
        md.scan(x.astype(np.uint32))
    with pytest.raises(ValueError, match="x must be 1-D"):
        md.scan(da.ones((2, 2), chunks=1))
    with pytest.raises(ValueError, match="flags must be 1-D with len"):
        md.segmented_scan(x, da.zeros(9, np.uint8, chunks=3))
    with pytest.raises(ValueError, match="flags has length 9"):  # numpy: the single-machine boundary
        md.segmented_scan(x, np.zeros(9, np.uint8))
    with pytest.raises(TypeError, match="flags must be bool, int8 or uint8"):
        md.segmented_scan(x, np.zeros(10, np.float32))
    with pytest.raises(ValueError, match="flags must hold 0 or 1"):
        md.segmented_sum(x, np.full(10, 2, np.uint8))  # the counting pass checks them at the call
    with pytest.raises(ValueError, match="flags"):
        md.segmented_scan(x, np.full(10, 2, np.uint8)).compute()  # lazily, by the chunk's op
    with pytest.raises(ValueError, match="mask must hold 0 or 1"):
        md.compress(x, np.full(10, 3, np.uint8))
    with pytest.raises(ValueError, match="indptr"):
        md.segment_sum_csr(x, [0, 5, 4, 10])
    with pytest.raises(ValueError, match="indptr"):
        md.segment_sum_csr(x, [0, 5, 9])
    with pytest.raises(ValueError, match="overflow must be one of"):
        md.scan(x, overflow="saturate")
    with pytest.raises(TypeError, match="dtype"):
        md.scan(x.astype(np.float32), dtype=np.int32)
    with pytest.raises(ValueError, match="unknown size"):
        md.scan(x[x > 3])
    with pytest.raises(ValueError, match="x must be 1-D of length 3"):
        md.spmv(([0, 1], [0], np.ones(1), (1, 3)), np.ones(4))
    with pytest.raises(ValueError, match="indices"):
        md.spmv(([0, 1], [7], np.ones(1), (1, 3)), np.ones(3)).compute()
    with pytest.raises(ValueError, match="row_chunks"):
        md.spmv(([0, 1], [0], np.ones(1), (1, 3)), np.ones(3), row_chunks=(2,))


def test_big_endian_values_are_normalised_at_the_boundary():
    x = np.arange(-50, 50, dtype=">i4")
    f = np.zeros(100, np.uint8)
    f[[0, 30, 31, 77]] = 1
    dx, df = da.from_array(x, chunks=13), da.from_array(f, chunks=13)
    want = oracle_segmented_scan(x, f)
    assert md.segmented_scan(dx, df).compute().tolist() == want
    assert md.scan(dx).compute().tolist() == oracle_scan(x)
    assert md.segmented_sum(dx, df).compute().tolist() == oracle_segmented_sum(x, f)
    assert md.batched_scan(dx.reshape(4, 25).rechunk((2, 7))).compute().tolist() == \
        [oracle_scan(r) for r in x.reshape(4, 25)]


def test_numpy_inputs_and_misaligned_flags():
    """numpy in -> one chunk; flags chunked differently are rechunked to x's chunks."""
    x = np.arange(20, dtype=np.int16)
    f = np.zeros(20, bool)
    f[[0, 5, 13]] = True
    np.testing.assert_array_equal(md.segmented_scan(x, f).compute(), mmvref.segmented_scan(x, f))
    dx, df = da.from_array(x, chunks=3), da.from_array(f, chunks=7)
    np.testing.assert_array_equal(md.segmented_sum(dx, df).compute(), mmvref.segmented_sum(x, f))
    # lazy: nothing runs until compute (a bad value in x is found then, not at the call)
    r = md.scan(dx)
    assert isinstance(r, da.Array) and r.chunks == dx.chunks


def test_threaded_scheduler_runs_chunks_concurrently():
    """dask's default scheduler runs chunk tasks in threads at once: the chunk functions pass the
    ops' thread gate (``_threading.guarded``), so every threading layer takes them."""
    rng = np.random.default_rng(3)
    x = rng.integers(-100, 100, 200_000).astype(np.int32)
    f = (rng.random(x.size) < 0.01).astype(np.uint8)
    dx, df = da.from_array(x, chunks=7_000), da.from_array(f, chunks=7_000)
    with dask.config.set(scheduler="threads", num_workers=4):
        for _ in range(3):
            np.testing.assert_array_equal(md.scan(dx).compute(), mmvref.scan(x))
            np.testing.assert_array_equal(md.segmented_scan(dx, df).compute(), mmvref.segmented_scan(x, f))
            np.testing.assert_array_equal(md.segmented_sum(dx, df).compute(), mmvref.segmented_sum(x, f))


def test_conformance_suite_passes_the_dask_backend():
    """The suite's own strategies and comparators through npu.DaskBackend (its irregular chunkings), for
    every op that has a Dask form, at the ci profile (``python -m conformance --backend dask`` runs the
    default profile)."""
    from conformance.suite import run
    from mmvref.registry import REGISTRY

    ops = [n for n, spec in REGISTRY.items() if spec.dask_ref is not None]
    reports = run("dask", ops, s=8, max_examples=25, seed=18, derandomize=True, policy="derived", db=None,
                  report_dir=None, progress=False, log=lambda *a, **k: None)
    assert [(r.op, r.status) for r in reports] == [(op, "pass") for op in ops], [r.message for r in reports]
    assert all(r.examples > 0 for r in reports)


@pytest.mark.parametrize("dt", ["int8", "int16", "float16"])
@pytest.mark.parametrize("overflow", ["raise", "wrap"])
def test_narrow_result_dtypes_as_the_single_machine_op(dt, overflow):
    """dtype=int8 / int16 / float16: taken, as by the single-machine ops (one dtype rule): integers
    exact and then narrowed (OverflowError where a result leaves the dtype, else wrapped), floats rounded."""
    rng = np.random.default_rng(5)
    x = rng.integers(-40, 40, 300).astype(np.int16)
    if dt == "float16":
        x = x.astype(np.float32)
    f = (rng.random(300) < 0.1).astype(np.uint8)
    ip = np.array([0, 0, 7, 150, 151, 300])
    dx = da.from_array(x, chunks=(1, 40, 0, 100, 159))
    cases = [
        ("scan", (), oracle_scan(x)),
        ("segmented_scan", (f,), oracle_segmented_scan(x, f)),
        ("segmented_sum", (f,), oracle_segmented_sum(x, f)),
        ("segment_sum_csr", (ip,), oracle_segment_sum_csr(x, ip)),
    ]
    for op, args, exact in cases:
        exact = [float(v) if dt == "float16" else int(v) for v in exact]
        lim = np.iinfo(dt) if dt != "float16" else None
        fits = lim is None or all(lim.min <= v <= lim.max for v in exact)
        if overflow == "raise" and not fits:
            with pytest.raises(OverflowError, match=dt):
                getattr(md, op)(dx, *args, dtype=dt, overflow=overflow).compute()
            continue
        got = getattr(md, op)(dx, *args, dtype=dt, overflow=overflow).compute()
        assert got.dtype == np.dtype(dt)
        if lim is None:
            assert got.tolist() == np.asarray(exact, np.float32).astype(np.float16).tolist(), op
        else:
            bits = 8 * np.dtype(dt).itemsize
            assert got.tolist() == [(v + 2 ** (bits - 1)) % 2 ** bits - 2 ** (bits - 1) for v in exact], op
        assert got.tobytes() == getattr(mmvref, op)(x, *args, dtype=dt, overflow=overflow).tobytes(), op


# ----------------------------------------------------------------------------- API fuzzer findings 15-18


def _same_as_single_machine(got, want):
    got = got.compute()
    want = want.numpy() if hasattr(want, "numpy") else want
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize("dt", ["int8", "int64", "float32"])
def test_empty_arrays_with_differently_chunked_empty_flags(dt):
    """Fuzzer 15: dask does not rechunk an empty array, so empty flags / mask keep their own (empty)
    chunks; the ops must still give the single-machine result, empty arrays of the result dtype."""
    x = np.zeros(0, dt)
    for xc in ((0,), (0, 0), (0, 0, 0)):
        for fc in ((0,), (0, 0)):
            dx = da.from_array(x, chunks=(xc,))
            for fdt in (bool, np.int8, np.uint8):
                df = da.from_array(np.zeros(0, fdt), chunks=(fc,))
                _same_as_single_machine(md.compress(dx, df), mmvref.compress(x, np.zeros(0, fdt)))
                _same_as_single_machine(md.segmented_sum(dx, df), mmvref.segmented_sum(x, np.zeros(0, fdt)))
                _same_as_single_machine(md.segmented_scan(dx, df), mmvref.segmented_scan(x, np.zeros(0, fdt)))
                _same_as_single_machine(md.segmented_scan(dx, df, exclusive=True),
                                        mmvref.segmented_scan(x, np.zeros(0, fdt), exclusive=True))
            _same_as_single_machine(md.scan(dx), mmvref.scan(x))


def test_flags_and_masks_accept_what_the_single_machine_ops_accept():
    """Fuzzer 16: flags / mask that are not dask arrays pass the single-machine boundary
    (``_validate.as_flags``): lists and tuples of 0/1 (uint8), bool lists, [] for no flags, torch CPU
    tensors; bad ones give the single-machine op's error type, naming the argument."""
    torch = pytest.importorskip("torch")
    x = np.arange(-4, 6, dtype=np.int32)
    f = [1, 0, 0, 1, 1, 0, 0, 0, 1, 0]
    dx = da.from_array(x, chunks=((3, 0, 4, 3),))
    good = [f, tuple(f), [bool(v) for v in f], np.array(f, np.uint8), np.array(f, np.int8).astype(">i1"),
            torch.tensor(f, dtype=torch.uint8), torch.tensor(f, dtype=torch.bool), torch.tensor(f, dtype=torch.int8)]
    for flags in good:
        want_scan = oracle_segmented_scan(x, np.array(f))
        want_sum = oracle_segmented_sum(x, np.array(f))
        want_cmp = oracle_compress(x, np.array(f))
        for xx in (x, dx):
            _same_as_single_machine(md.segmented_sum(xx, flags), mmvref.segmented_sum(x, flags))
            _same_as_single_machine(md.segmented_scan(xx, flags), mmvref.segmented_scan(x, flags))
            _same_as_single_machine(md.compress(xx, flags), mmvref.compress(x, flags))
            assert md.segmented_sum(xx, flags).compute().tolist() == want_sum
            assert md.segmented_scan(xx, flags).compute().tolist() == want_scan
            assert md.compress(xx, flags).compute().tolist() == want_cmp
    e = np.zeros(0, np.int16)
    for empty in ([], ()):
        _same_as_single_machine(md.segmented_sum(e, empty), mmvref.segmented_sum(e, empty))
        _same_as_single_machine(md.segmented_scan(e, empty), mmvref.segmented_scan(e, empty))
        _same_as_single_machine(md.compress(e, empty), mmvref.compress(e, empty))
    bad = [[1, 0, 2, 0, 0, 0, 0, 0, 0, 0], [1.0] * 10, f[:-1], [f, f], np.array(f, ">i2"),
           torch.tensor(f), torch.tensor(f, dtype=torch.float32), [], "1010101010", None, 3]
    for flags in bad:
        for op, name in (("segmented_sum", "flags"), ("segmented_scan", "flags"), ("compress", "mask")):
            with pytest.raises((TypeError, ValueError)) as single:
                getattr(mmvref, op)(x, flags)
            with pytest.raises(single.type, match=name):
                getattr(md, op)(dx, flags).compute()


def test_spmv_takes_the_single_machine_csr_and_torch_boundary():
    """Fuzzer 17 / 18: an empty list of column indices is no (int64) indices, as for mmvref.spmv; torch
    data / x / sparse CSR tensors of a dtype numpy lacks (bfloat16) give the single-machine TypeError
    naming the argument, not torch's own message."""
    torch = pytest.importorskip("torch")
    for ind in ([], ()):
        A = ([0, 0, 0, 0], ind, np.array([], np.float16), (3, 4))
        _same_as_single_machine(md.spmv(A, np.ones(4, np.float16)), mmvref.spmv(A, np.ones(4, np.float16)))
    A = ([0, 1, 1, 3], [2, 0, 3], np.array([1, -2, 3], np.int16), (3, 4))
    x = np.array([5, 6, 7, 8], np.int16)
    assert md.spmv(A, x).compute().tolist() == oracle_spmv(np.array(A[0]), np.array(A[1]), A[2], x)
    At = (torch.tensor(A[0]), torch.tensor(A[1]), torch.from_numpy(A[2]), A[3])
    _same_as_single_machine(md.spmv(At, torch.from_numpy(x)), mmvref.spmv(At, torch.from_numpy(x)))
    bf = torch.bfloat16
    A32 = ([0, 1, 1, 3], [2, 0, 3], np.array([1, -2, 3], np.float32), (3, 4))
    At16 = ([0, 1, 1, 3], [2, 0, 3], torch.tensor([1.0, -2.0, 3.0], dtype=bf), (3, 4))
    Asp = torch.sparse_csr_tensor(torch.tensor([0, 1, 1, 3]), torch.tensor([2, 0, 3]),
                                  torch.tensor([1.0, -2.0, 3.0], dtype=bf), (3, 4), check_invariants=True)
    for A_, x_, name in ((At16, np.ones(4, np.float32), "data"), (A32, torch.ones(4, dtype=bf), "x"),
                         (Asp, np.ones(4, np.float32), "values"), (A32, [1.0, 2.0, "a", 3.0], "x"),
                         (([0, 1, 1, 3], [2.0, 0.0, 3.0], A32[2], (3, 4)), np.ones(4, np.float32), "indices"),
                         (([0, 1, 1, 3], [2, 0], A32[2], (3, 4)), np.ones(4, np.float32), "indices")):
        with pytest.raises((TypeError, ValueError)) as single:
            mmvref.spmv(A_, x_)
        with pytest.raises(single.type, match=name):
            md.spmv(A_, x_).compute()


@pytest.mark.parametrize("bad", [2, 255])
def test_segmented_scan_reports_a_bad_flag_before_an_overflow_elsewhere(bad):
    """Fuzzer (seed 22, case 770): a flag of 2 in one chunk and an overflowing segment in a later one;
    the single-machine op reports the flags (ValueError), so must the dask op, whatever order the
    chunks' tasks run in: the flags are checked by the summary pass every output depends on."""
    big = np.iinfo(np.int64).max
    x = np.array([big, -big, 0, big - 1, big - 1, -1, 2 ** 62, 1], np.int64)
    f = np.zeros(8, np.uint8)
    f[0] = bad
    with pytest.raises(ValueError, match="flags"):
        mmvref.segmented_scan(x, f)
    dx = da.from_array(x, chunks=((2, 0, 4, 0, 2),))
    for flags in (f, da.from_array(f, chunks=((2, 0, 4, 0, 2),)), da.from_array(f, chunks=3)):
        for kw in ({}, {"exclusive": True}, {"dtype": np.int16}):
            with pytest.raises(ValueError, match="flags"):
                md.segmented_scan(dx, flags, **kw).compute()
