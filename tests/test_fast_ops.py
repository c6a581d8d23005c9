"""The fast CPU ops against the plain-loop oracle: every dtype, edge lengths,
chunk boundaries (the chunk size is lowered so small inputs take the
multi-chunk paths), flag densities 0..1, exclusive, overflow raise and wrap,
non-contiguous and read-only inputs, torch in / torch out, bad input."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from oracle import (
    oracle_compress,
    oracle_scan,
    oracle_segment_sum_csr,
    oracle_segmented_scan,
    oracle_segmented_sum,
    wrap,
)

import mmvref
from mmvref._fast import _target
from mmvref._fast.segment import _column as segops

DTYPES = ["int8", "int16", "int32", "int64", "float16", "float32", "float64"]
RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}


@contextlib.contextmanager
def _simd(level):
    """Run with the kernels of ``level`` (avx512, avx2 or portable), skipping a level that the
    compile target or this CPU lacks (the portable twins run everywhere)."""
    if not (_target.supports(_target.target(), level) and _target.supports(_target.host_target(), level)):
        pytest.skip(f"the compile target {_target.target().cpu} or this CPU has no {level} path")
    old = segops._LEVEL
    segops._LEVEL = level
    try:
        yield
    finally:
        segops._LEVEL = old


@pytest.fixture(autouse=True, params=[1, 3, 1 << 14], ids=["chunk1", "chunk3", "chunk16k"])
def chunk_size(request, monkeypatch):
    monkeypatch.setattr(segops, "MIN_CHUNK", request.param)
    return request.param


@st.composite
def inputs(draw, big=False):
    """(x, flags, rng): x of a drawn dtype and length (at and around the 64-element blocks, or any
    up to 300) with values from a drawn seed, one draw for the whole array (a list of up to 300
    elements drawn one by one cost the suite two CPU-minutes): integers uniform in +-1000 clipped
    to the dtype, or (``big``) half of them over the dtype's whole range and half its extremes,
    0, -1 or 1; floats (of fp16 / fp32 precision) a mix of uniform values in +-100, whole numbers
    and signed zeros and +-100. flags mark starts at a drawn density, from the same seed."""
    dt = draw(st.sampled_from(DTYPES))
    n = draw(st.one_of(st.sampled_from([0, 1, 2, 7, 8, 9, 63, 64, 65]), st.integers(0, 300)))
    density = draw(st.sampled_from([0.0, 1.0, 0.02, 0.3, 0.005]))  # 0.005: long-segment kernels
    fdt = draw(st.sampled_from([np.uint8, np.int8, np.bool_]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dt.startswith("int"):
        info = np.iinfo(dt)
        if big:
            x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
            edges = np.array([info.min, info.max, 0, -1, 1], dtype=dt)
            x = np.where(rng.random(n) < 0.5, edges[rng.integers(0, edges.size, n)], x)
        else:
            lim = min(info.max, 1000)
            x = rng.integers(max(-lim, info.min), lim, n, endpoint=True).astype(dt)
    else:
        kind = rng.integers(0, 4, n)  # 0-1: uniform, 2: whole numbers, 3: signed zeros and the ends
        special = np.array([0.0, -0.0, 100.0, -100.0])[rng.integers(0, 4, n)]
        v = np.select([kind < 2, kind == 2], [rng.uniform(-100, 100, n), rng.integers(-100, 101, n)], special)
        x = v.astype(np.float16 if dt == "float16" else np.float32).astype(dt)
    f = (rng.random(n) < density).astype(fdt)
    return x, f, rng


def _check(actual, expected, x, overflow="raise"):
    rdt = np.dtype(RESULT[x.dtype.name])
    assert actual.dtype == rdt
    if rdt.kind == "i":
        bits = 8 * rdt.itemsize
        assert actual.tolist() == [wrap(v, bits) for v in expected]
    else:
        e = np.array(expected, dtype=np.float64)
        tol = (len(x) + 2) * np.finfo(rdt).eps * (np.abs(x.astype(np.float64)).sum() + 1)
        assert np.all(np.abs(actual.astype(np.float64) - e) <= tol)


def _fits(values, dt):
    rdt = np.dtype(RESULT[dt.name])
    if rdt.kind != "i":
        return True
    info = np.iinfo(rdt)
    return all(info.min <= v <= info.max for v in values)


def _run(fn, expected, x, overflow):
    if overflow == "raise" and not _fits(expected, x.dtype):
        with pytest.raises(OverflowError, match="overflow"):
            fn()
        return
    _check(fn(), expected, x, overflow)


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(inputs(), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_scan(simd, case, exclusive, overflow):
    x, _, _ = case
    with _simd(simd):
        _run(lambda: mmvref.scan(x, exclusive=exclusive, overflow=overflow), oracle_scan(x, exclusive), x,
             overflow)


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(inputs(big=True), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_scan_int_edges(simd, case, exclusive, overflow):
    x, _, _ = case
    with _simd(simd):
        _run(lambda: mmvref.scan(x, exclusive=exclusive, overflow=overflow), oracle_scan(x, exclusive), x,
             overflow)


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(inputs(), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_segmented_scan(simd, case, exclusive, overflow):
    x, f, _ = case
    with _simd(simd):
        _run(lambda: mmvref.segmented_scan(x, f, exclusive=exclusive, overflow=overflow),
             oracle_segmented_scan(x, f, exclusive), x, overflow)


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(inputs(big=True), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_segmented_scan_int_edges(simd, case, exclusive, overflow):
    x, f, _ = case
    with _simd(simd):
        _run(lambda: mmvref.segmented_scan(x, f, exclusive=exclusive, overflow=overflow),
             oracle_segmented_scan(x, f, exclusive), x, overflow)


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(inputs(), st.sampled_from(["raise", "wrap"]))
def test_segmented_sum(simd, case, overflow):
    x, f, _ = case
    with _simd(simd):
        _run(lambda: mmvref.segmented_sum(x, f, overflow=overflow), oracle_segmented_sum(x, f), x, overflow)


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(inputs(big=True), st.sampled_from(["raise", "wrap"]))
def test_segmented_sum_int_edges(simd, case, overflow):
    x, f, _ = case
    with _simd(simd):
        _run(lambda: mmvref.segmented_sum(x, f, overflow=overflow), oracle_segmented_sum(x, f), x, overflow)


@st.composite
def few_starts(draw):
    """Long inputs with a handful of segment starts anywhere (inside or at the edge of a
    64-flag group, in a masked tail): the flag densities below 1/64 for which the
    AVX-512 segmented_sum adds up start-free groups without scanning them."""
    dt = draw(st.sampled_from(["int8", "int16", "int32"]))
    n = draw(st.integers(0, 2500))
    info = np.iinfo(dt)
    lim = draw(st.sampled_from([100, info.max]))  # info.max: blocks that fail the overflow screen
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    x = rng.integers(max(-lim, info.min), lim, n, endpoint=True).astype(dt)
    f = np.zeros(n, np.uint8)
    if n:
        edges = [i for i in (0, 1, 63, 64, 65, 127, 128, 1023, 1024, 1025, n - 1) if i < n]
        pos = draw(st.lists(st.one_of(st.sampled_from(edges), st.integers(0, n - 1)), max_size=6))
        f[pos] = 1
    return x, f


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(few_starts(), st.sampled_from(["raise", "wrap"]))
def test_segmented_sum_few_starts(simd, case, overflow):
    x, f = case
    with _simd(simd):
        _run(lambda: mmvref.segmented_sum(x, f, overflow=overflow), oracle_segmented_sum(x, f), x, overflow)
        _run(lambda: mmvref.segmented_scan(x, f, overflow=overflow), oracle_segmented_scan(x, f, False),
             x, overflow)


@pytest.mark.parametrize("nocount", [0.0, 2.0], ids=["flag-pass", "provisional"])
@pytest.mark.parametrize("simd", _target.LEVELS)
@given(st.one_of(inputs(), inputs(big=True), few_starts().map(lambda c: (*c, None))),
       st.sampled_from(["raise", "wrap"]))
def test_segmented_sum_both_offset_schemes(simd, nocount, case, overflow):
    """segmented_sum with each chunk's output offset from a flag-counting pass and
    without one (AVX2: sums packed at a provisional offset per chunk, then gathered),
    whatever the flag density; chunk seams from the chunk_size fixture."""
    x, f, _ = case
    old = segops._NOCOUNT_BELOW
    segops._NOCOUNT_BELOW = nocount
    try:
        with _simd(simd):
            _run(lambda: mmvref.segmented_sum(x, f, overflow=overflow), oracle_segmented_sum(x, f), x,
                 overflow)
    finally:
        segops._NOCOUNT_BELOW = old


@pytest.mark.parametrize("nocount", [0.0, 2.0], ids=["flag-pass", "provisional"])
@pytest.mark.parametrize("simd", _target.LEVELS)
@pytest.mark.parametrize("where", [0, 1, 17, 999, 5000, 9999])
def test_segmented_sum_invalid_flag_in_any_chunk(simd, nocount, where):
    """A flag byte > 1 is an error wherever it is (position 0, inside a later chunk, the
    last element), also when the kernel counts the flags itself."""
    x = np.arange(10000, dtype=np.int32)
    f = np.zeros(10000, np.uint8)
    f[::97] = 1
    f[where] = 2
    old = segops._NOCOUNT_BELOW
    segops._NOCOUNT_BELOW = nocount
    try:
        with _simd(simd), pytest.raises(ValueError, match=rf"flags\[{where}\] = 2"):
            mmvref.segmented_sum(x, f)
    finally:
        segops._NOCOUNT_BELOW = old


@st.composite
def lane_patterns(draw):
    """Inputs shaped for the vector kernels: lengths at and around multiples of 8, 16 and
    64 (vector tails, 16-element steps, 64-flag groups, 1024-element blocks), flags set
    per 8-lane vector from patterns with starts at lanes 0 and 7 (and none, all, one),
    values small or at the int32 limits."""
    dt = draw(st.sampled_from(["int8", "int16", "int32"]))
    n = draw(st.one_of(st.sampled_from([7, 8, 9, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1023, 1024, 1025, 2049]),
                       st.integers(0, 2100)))
    info = np.iinfo(dt)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if draw(st.booleans()):
        x = rng.integers(-100, 100, n, endpoint=True).astype(dt)
    else:  # the limits: blocks that fail the overflow screen, sums that do and do not fit int32
        x = rng.choice(np.array([info.min, info.max, 0, -1, 1], dtype=dt), n)
    pats = draw(st.lists(st.sampled_from([0x00, 0x01, 0x80, 0x81, 0xFF, 0x7E, 0x10]), min_size=1, max_size=4))
    g = (n + 7) // 8
    masks = np.array(pats, np.uint8)[rng.integers(0, len(pats), g)]
    masks[rng.random(g) < draw(st.sampled_from([0.0, 0.9, 0.99]))] = 0  # sparse: start-free 64-flag groups
    f = np.unpackbits(masks, bitorder="little")[:n].astype(np.uint8)
    return x, f


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(lane_patterns(), st.booleans(), st.sampled_from(["raise", "wrap"]))
def test_vector_lane_patterns(simd, case, exclusive, overflow):
    x, f = case
    with _simd(simd):
        _run(lambda: mmvref.scan(x, exclusive=exclusive, overflow=overflow), oracle_scan(x, exclusive), x,
             overflow)
        _run(lambda: mmvref.segmented_scan(x, f, exclusive=exclusive, overflow=overflow),
             oracle_segmented_scan(x, f, exclusive), x, overflow)
        _run(lambda: mmvref.segmented_sum(x, f, overflow=overflow), oracle_segmented_sum(x, f), x, overflow)


@pytest.mark.parametrize("simd", _target.LEVELS)
@pytest.mark.parametrize("shift", [0, 1, 7, 8, 13])
def test_every_eight_lane_flag_mask(simd, shift):
    """Each of the 256 flag patterns of an eight-lane vector (the AVX2 left-pack table's
    rows), at several alignments, against the oracle."""
    f = np.concatenate([np.zeros(shift, np.uint8),
                        np.unpackbits(np.arange(256, dtype=np.uint8), bitorder="little")]).astype(np.uint8)
    x = (np.arange(f.size, dtype=np.int64) * 7919 % 2001 - 1000).astype(np.int32)
    with _simd(simd):
        _check(mmvref.segmented_sum(x, f), oracle_segmented_sum(x, f), x)
        for ex in (False, True):
            _check(mmvref.segmented_scan(x, f, exclusive=ex), oracle_segmented_scan(x, f, ex), x)


@pytest.mark.parametrize("simd", _target.LEVELS)
@given(inputs(big=True), st.booleans(), st.sampled_from(["raise", "wrap"]), st.sampled_from([1, 5, 64, 100]))
def test_scan_super_block_seams(simd, case, exclusive, overflow, super_block):
    """The integer scan reduces and scans super-blocks of _SCAN_SUPER elements in turn
    (the carry crosses the seams): small super-blocks, values at the limits."""
    x, _, _ = case
    old = segops._SCAN_SUPER
    segops._SCAN_SUPER = super_block
    try:
        with _simd(simd):
            _run(lambda: mmvref.scan(x, exclusive=exclusive, overflow=overflow), oracle_scan(x, exclusive), x,
                 overflow)
    finally:
        segops._SCAN_SUPER = old


@pytest.mark.parametrize("simd", _target.LEVELS)
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_large_outputs_streaming_stores(simd, offset, chunk_size):
    """Outputs of 2**23 elements and more are written with streaming stores from the first
    32-byte aligned element of each chunk (AVX2 kernels): every alignment of the output.
    Too long for the loop oracle: the reference is numpy's int64 cumsum."""
    if chunk_size != 1 << 14:
        pytest.skip("one chunking suffices")
    n = (1 << 23) + 13
    rng = np.random.default_rng(offset)
    x = rng.integers(-1000, 1000, n + offset, dtype=np.int32)[offset:]
    f = (rng.random(n) < 0.01).astype(np.uint8)
    f[:5] = [1, 0, 1, 1, 0]
    P = np.cumsum(x, dtype=np.int64)
    E = P - x
    starts = np.flatnonzero(np.r_[1, f[1:]])
    before = np.repeat(E[starts], np.diff(np.r_[starts, n]))
    with _simd(simd):
        for ex in (False, True):
            assert np.array_equal(mmvref.scan(x, exclusive=ex), E if ex else P)
            assert np.array_equal(mmvref.segmented_scan(x, f, exclusive=ex), (E if ex else P) - before)


@given(st.lists(st.lists(st.sampled_from([2**31 - 1, -2**31, 1, -1, 0, 7]), max_size=4), min_size=8, max_size=40),
       st.sampled_from(["raise", "wrap"]))
def test_segment_sum_csr_short_rows_near_int32_limits(rows, overflow):
    """Many short rows (the eight-rows-per-step kernel, int32 words) with values at the int32
    limits: a row whose sum leaves int32 raises or wraps wherever it sits."""
    x = np.array([v for r in rows for v in r], dtype=np.int32)
    ip = np.cumsum([0] + [len(r) for r in rows])
    _run(lambda: mmvref.segment_sum_csr(x, ip, overflow=overflow), oracle_segment_sum_csr(x, ip), x, overflow)


@given(inputs(), st.sampled_from(["raise", "wrap"]))
@pytest.mark.native_only  # one portable path of plain loops and generic vector IR: no kernel chosen by the compile target
def test_segment_sum_csr(case, overflow):
    x, _, rng = case
    n = len(x)
    cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(0, n + 4))))
    ip = np.concatenate([[0], cuts, [n]]).astype(np.int64)  # empty segments anywhere
    _run(lambda: mmvref.segment_sum_csr(x, ip, overflow=overflow), oracle_segment_sum_csr(x, ip), x, overflow)


@given(inputs(big=True), st.sampled_from(["raise", "wrap"]), st.booleans())
def test_int_edges_overflow_raise_and_wrap(case, overflow, exclusive):
    x, f, _ = case
    _run(lambda: mmvref.segmented_scan(x, f, exclusive=exclusive, overflow=overflow),
         oracle_segmented_scan(x, f, exclusive), x, overflow)
    _run(lambda: mmvref.segmented_sum(x, f, overflow=overflow), oracle_segmented_sum(x, f), x, overflow)
    _run(lambda: mmvref.scan(x, exclusive=exclusive, overflow=overflow), oracle_scan(x, exclusive), x, overflow)
    # segment_sum_csr's short-row kernel (rows of < 32 elements on average) sums in int32 words
    # unless a row's length times max |x| may exceed int32: both paths, and the overflow
    ip = np.flatnonzero(np.r_[True, f[1:] != 0, True]) if len(x) else np.zeros(1, np.int64)
    _run(lambda: mmvref.segment_sum_csr(x, ip, overflow=overflow), oracle_segment_sum_csr(x, ip), x, overflow)


@given(inputs())
@pytest.mark.native_only  # one portable path of plain loops and generic vector IR: no kernel chosen by the compile target
def test_compress(case):
    x, f, _ = case
    r = mmvref.compress(x, f)
    assert r.dtype == x.dtype
    np.testing.assert_array_equal(r, np.array(oracle_compress(x, f), dtype=x.dtype).reshape(-1))


def _np_compress_ind(x, mask):
    """The obviously-correct oracle: numpy boolean indexing and np.flatnonzero."""
    mb = np.asarray(mask).astype(bool)
    return x[mb], np.flatnonzero(mb).astype(np.int64)


@given(inputs())
@pytest.mark.native_only  # one portable path of plain loops and generic vector IR: no kernel chosen by the compile target
def test_compress_ind(case):
    x, f, _ = case
    if x.dtype.kind == "f" and len(x):  # values are moved bit for bit: -0.0 and a NaN payload too
        x = x.copy()
        x[::5] = -0.0
        x[1::7] = np.nan
    v, i = mmvref.compress_ind(x, f)
    want_v, want_i = _np_compress_ind(x, f)
    assert v.dtype == x.dtype and i.dtype == np.int64 and v.shape == i.shape == want_i.shape
    assert v.tobytes() == want_v.tobytes() and i.tolist() == want_i.tolist()
    assert mmvref.compress(x, f).tobytes() == v.tobytes()


def test_compress_ind_chunk_seams():
    """Kept elements at every chunk's first and last position, whole chunks kept or dropped
    (the branch-free kernel's trailing store and its repair)."""
    n = 1000
    x = np.arange(n, dtype=np.int16) - 500
    starts = segops._chunks(n)
    rng = np.random.default_rng(5)
    for _ in range(40):
        m = np.zeros(n, np.uint8)
        for lo, hi in zip(starts[:-1], starts[1:]):
            how = rng.integers(0, 5)
            if how == 1:
                m[lo] = 1
            elif how == 2:
                m[hi - 1] = 1
            elif how == 3:
                m[lo:hi] = 1
            elif how == 4:
                m[lo:hi] = rng.random(hi - lo) < 0.3
        v, i = mmvref.compress_ind(x, m)
        want_v, want_i = _np_compress_ind(x, m)
        assert v.tolist() == want_v.tolist() and i.tolist() == want_i.tolist()


def test_compress_ind_empty_all_and_none():
    for dt in DTYPES:
        x = np.arange(1, 11).astype(dt)
        for mdt in (np.bool_, np.int8, np.uint8):
            v, i = mmvref.compress_ind(x, np.ones(10, mdt))
            assert v.tobytes() == x.tobytes() and i.tolist() == list(range(10)) and i.dtype == np.int64
            v, i = mmvref.compress_ind(x, np.zeros(10, mdt))
            assert v.shape == i.shape == (0,) and v.dtype == x.dtype and i.dtype == np.int64
            v, i = mmvref.compress_ind(x[:0], np.zeros(0, mdt))
            assert v.shape == i.shape == (0,) and v.dtype == x.dtype and i.dtype == np.int64
    v, i = mmvref.compress_ind(np.zeros(0, np.float32), [])
    assert v.shape == i.shape == (0,)


def test_compress_ind_bad_input_errors_name_the_argument():
    x = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match=r"mask must hold only 0 and 1.*mask\[1\] = 3"):
        mmvref.compress_ind(x, np.array([0, 3, 0, 0], np.uint8))
    with pytest.raises(ValueError, match=r"mask must hold only 0 and 1.*mask\[2\]"):
        mmvref.compress_ind(x, np.array([1, 0, -1, 0], np.int8))
    with pytest.raises(ValueError, match="mask has length"):
        mmvref.compress_ind(x, np.zeros(3, np.uint8))
    with pytest.raises(TypeError, match="mask"):
        mmvref.compress_ind(x, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="mask must be 1-D"):
        mmvref.compress_ind(x, np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match="x must be 1-D"):
        mmvref.compress_ind(x.reshape(2, 2), np.zeros(4, np.uint8))
    with pytest.raises(TypeError, match="x has unsupported dtype"):
        mmvref.compress_ind(x.astype(np.uint16), np.zeros(4, np.uint8))


def test_all_flags_and_no_flags():
    x = np.arange(1, 11, dtype=np.int32)
    np.testing.assert_array_equal(mmvref.segmented_scan(x, np.ones(10, np.uint8)), x)
    np.testing.assert_array_equal(mmvref.segmented_sum(x, np.ones(10, np.uint8)), x)
    np.testing.assert_array_equal(mmvref.segmented_scan(x, np.zeros(10, np.uint8)), np.cumsum(x))
    np.testing.assert_array_equal(mmvref.segmented_sum(x, np.zeros(10, np.uint8)), [55])


def test_empty_segments_csr_and_empty_input():
    x = np.arange(6, dtype=np.int16)
    np.testing.assert_array_equal(mmvref.segment_sum_csr(x, [0, 0, 0, 3, 3, 6, 6]), [0, 0, 3, 0, 12, 0])
    assert mmvref.segment_sum_csr(np.zeros(0, np.int32), [0]).shape == (0,)
    np.testing.assert_array_equal(mmvref.segment_sum_csr(np.zeros(0, np.int32), [0, 0, 0]), [0, 0])
    for op in (mmvref.segmented_scan, mmvref.segmented_sum):
        r = op(np.zeros(0, np.int8), np.zeros(0, np.uint8))
        assert r.shape == (0,) and r.dtype == np.int32
    assert mmvref.scan(np.zeros(0, np.float16)).dtype == np.float32


def test_non_contiguous_and_read_only():
    base = np.arange(40, dtype=np.int32)
    x = base[::2]
    f = np.zeros(40, np.uint8)[::2]
    f[[0, 5, 11]] = 1
    x.setflags(write=False)
    np.testing.assert_array_equal(mmvref.segmented_scan(x, f), oracle_segmented_scan(x, f))
    np.testing.assert_array_equal(mmvref.segmented_sum(x, f), oracle_segmented_sum(x, f))
    np.testing.assert_array_equal(mmvref.scan(x), oracle_scan(x))
    np.testing.assert_array_equal(mmvref.compress(x, f), oracle_compress(x, f))
    v, i = mmvref.compress_ind(x, f)
    assert v.tolist() == oracle_compress(x, f) and i.tolist() == [0, 5, 11]


def test_torch_in_torch_out():
    torch = pytest.importorskip("torch")
    x = torch.tensor([2, 2, 3, 3, 1, 3, 1, 2], dtype=torch.int32)
    f = torch.tensor([1, 0, 1, 0, 0, 1, 0, 0], dtype=torch.bool)
    r = mmvref.segmented_scan(x, f)
    assert isinstance(r, torch.Tensor) and r.dtype == torch.int32
    assert r.tolist() == [2, 4, 3, 6, 7, 3, 4, 6]
    assert mmvref.segmented_sum(x, f).tolist() == [4, 7, 6]
    assert mmvref.compress(x, f).tolist() == [2, 3, 3]
    v, i = mmvref.compress_ind(x, f)
    assert isinstance(v, torch.Tensor) and isinstance(i, torch.Tensor) and i.dtype == torch.int64
    assert v.dtype == torch.int32 and v.tolist() == [2, 3, 3] and i.tolist() == [0, 2, 5]
    assert mmvref.segment_sum_csr(x, torch.tensor([0, 2, 5, 8])).tolist() == [4, 7, 6]
    assert mmvref.scan(x.to(torch.float16)).dtype == torch.float32


def test_dtype_override():
    x = np.full(10, 2**30, dtype=np.int32)
    with pytest.raises(OverflowError, match="dtype=np.int64"):
        mmvref.scan(x)
    assert mmvref.scan(x, dtype=np.int64)[-1] == 10 * 2**30
    assert mmvref.segmented_sum(x, np.zeros(10, np.uint8), dtype=np.float64)[0] == 10 * 2**30
    with pytest.raises(TypeError, match="dtype"):
        mmvref.scan(np.ones(3, np.float32), dtype=np.int32)
    with pytest.raises(TypeError, match="dtype"):
        mmvref.scan(x, dtype=np.uint16)
    with pytest.raises(OverflowError, match="int16"):  # a narrower result dtype is checked, not refused
        mmvref.scan(x, dtype=np.int16)


@pytest.mark.parametrize("op", ["segmented_scan", "segmented_sum"])
def test_bad_input_errors_name_the_argument(op):
    fn = getattr(mmvref, op)
    x = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match="flags"):
        fn(x, np.array([1, 2, 0, 0], np.uint8))
    with pytest.raises(ValueError, match="flags"):
        fn(x, np.array([1, 0, -1, 0], np.int8))
    with pytest.raises(ValueError, match="flags has length"):
        fn(x, np.zeros(3, np.uint8))
    with pytest.raises(TypeError, match="flags"):
        fn(x, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="flags has length 4 but the values have length 2"):
        fn(x.reshape(2, 2), np.zeros(4, np.uint8))  # N-d: flags run along axis (default 0)
    with pytest.raises(ValueError, match="axis=2 is out of range"):
        fn(x.reshape(2, 2), np.zeros(2, np.uint8), axis=2)
    with pytest.raises(TypeError, match="x has unsupported dtype"):
        fn(x.astype(np.uint16), np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="overflow"):
        fn(x, np.zeros(4, np.uint8), overflow="saturate")


def test_bad_indptr_errors():
    x = np.arange(4, dtype=np.int32)
    with pytest.raises(ValueError, match=r"indptr\[0\] must be 0"):
        mmvref.segment_sum_csr(x, [1, 4])
    with pytest.raises(ValueError, match="non-decreasing"):
        mmvref.segment_sum_csr(x, [0, 3, 2, 4])
    with pytest.raises(ValueError, match=r"indptr\[-1\] must equal"):
        mmvref.segment_sum_csr(x, [0, 3])
    with pytest.raises(TypeError, match="indptr"):
        mmvref.segment_sum_csr(x, np.array([0.0, 4.0]))
    with pytest.raises(ValueError, match="mask"):
        mmvref.compress(x, np.array([0, 3, 0, 0], np.uint8))


@pytest.mark.parametrize("where", [1, 5000, 19_999])
def test_segment_sum_csr_rejects_unsorted_offsets_in_the_short_row_kernel(where):
    """The short-row kernel checks the offsets itself (no separate pass): a single
    decreasing offset anywhere is reported, with its position."""
    x = np.arange(200_000, dtype=np.int32)
    ptr = np.arange(0, 200_001, 10)
    ptr[where] = ptr[where + 1] + 3
    with pytest.raises(ValueError, match=rf"indptr\[{where}\] = .* > indptr\[{where + 1}\]"):
        mmvref.segment_sum_csr(x, ptr)
