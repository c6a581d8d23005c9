"""Output delivery (``out=``) and boundary normalisation of the fast ops, against plain-loop oracles.

Each test here failed on the code before it (issue: nothing silently wrong): a big-endian or strided
``out`` left unwritten, ``np.matrix`` scanned as a matrix, an integer product holding a zero refused as
an overflow when its segment was split among threads, offsets near -2**63 slipping past the order check,
the sums of one set of segments differing in their last bits between ``segment_sum_csr``,
``segment_csr(reduce="sum")`` and ``segmented_sum``, and ``out=`` computed into a temporary and copied.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mmvref

pytestmark = pytest.mark.native_only  # boundary code, the same for every compile target


# ----------------------------------------------------------------------------- oracles (plain loops)

def _oracle_scan(x, exclusive=False):
    out, acc = [], 0
    for v in x:
        if exclusive:
            out.append(acc)
            acc += int(v) if x.dtype.kind in "iu" else float(v)
        else:
            acc += int(v) if x.dtype.kind in "iu" else float(v)
            out.append(acc)
    return out


def _oracle_segscan(x, flags):
    out, acc = [], 0
    for i, v in enumerate(x):
        acc = int(v) if (i == 0 or flags[i]) else acc + int(v)
        out.append(acc)
    return out


def _oracle_csr(x, ip, op="sum"):
    res = []
    for r in range(len(ip) - 1):
        seg = [int(v) for v in x[ip[r]:ip[r + 1]]]
        if op == "sum":
            res.append(sum(seg))
        elif op == "prod":
            p = 1
            for v in seg:
                p *= v
            res.append(p)
    return res


def _oracle_segsum(x, flags):
    res = []
    for i, v in enumerate(x):
        if i == 0 or flags[i]:
            res.append(0)
        res[-1] += int(v)
    return res


def _oracle_scatter(x, index, n):
    res = [0] * n
    for v, i in zip(x, index):
        res[i] += int(v)
    return res


# ----------------------------------------------------------------------------- 1. out= of every layout

def _cases():
    """(name, call(out) -> result, expected list, result dtype) for every op that takes out=."""
    rng = np.random.default_rng(7)
    x = rng.integers(-50, 50, 40).astype(np.int32)
    flags = (rng.random(40) < 0.2).astype(np.uint8)
    flags[0] = 1
    ip = np.array([0, 3, 3, 17, 40])
    idx = rng.integers(0, 5, 40)
    sidx = np.sort(idx)
    nseg = int(flags[1:].sum()) + 1
    return [
        ("scan", lambda o: mmvref.scan(x, out=o), _oracle_scan(x), np.int32),
        ("scan exclusive", lambda o: mmvref.scan(x, exclusive=True, out=o), _oracle_scan(x, True), np.int32),
        ("segmented_scan", lambda o: mmvref.segmented_scan(x, flags, out=o), _oracle_segscan(x, flags), np.int32),
        ("segmented_sum", lambda o: mmvref.segmented_sum(x, flags, out=o), _oracle_segsum(x, flags), np.int32),
        ("segment_sum_csr", lambda o: mmvref.segment_sum_csr(x, ip, out=o), _oracle_csr(x, ip), np.int32),
        ("segment_csr", lambda o: mmvref.segment_csr(x, ip, out=o), _oracle_csr(x, ip), np.int32),
        ("segment_coo", lambda o: mmvref.segment_coo(x, sidx, dim_size=5, out=o), _oracle_scatter(x, sidx, 5),
         np.int32),
        ("scatter", lambda o: mmvref.scatter(x, idx, dim_size=5, out=o), _oracle_scatter(x, idx, 5), np.int32),
        ("gather_csr", lambda o: mmvref.gather_csr(np.arange(4, dtype=np.int32), ip, out=o),
         [r for r in range(4) for _ in range(ip[r + 1] - ip[r])], np.int32),
        ("segmented_sum float", lambda o: mmvref.segmented_sum(x.astype(np.float64), flags, out=o),
         [float(v) for v in _oracle_segsum(x, flags)], np.float64),
        ("scan float", lambda o: mmvref.scan(x.astype(np.float32), out=o), [float(v) for v in _oracle_scan(x)],
         np.float32),
    ], nseg


_LAYOUTS = ("native", "big-endian", "strided", "torch")


@pytest.mark.parametrize("layout", _LAYOUTS)
def test_out_is_written_whatever_its_layout(layout):
    cases, _ = _cases()
    for name, call, expected, dt in cases:
        n = len(expected)
        if layout == "native":
            o = np.full(n, 99, dt)
        elif layout == "big-endian":
            o = np.full(n, 99, np.dtype(dt).newbyteorder(">"))
        elif layout == "strided":
            o = np.full(2 * n, 99, dt)[::2]
        else:
            torch = pytest.importorskip("torch")
            o = torch.full((n,), 99, dtype=getattr(torch, np.dtype(dt).name))
        r = call(o)
        assert r is o, name
        got = o.tolist() if layout != "torch" else o.tolist()
        assert got == expected, (name, layout)


def test_out_of_two_dimensions_in_fortran_order():
    x = np.arange(24, dtype=np.int64).reshape(4, 6)
    ip = np.array([0, 1, 6])
    o = np.asfortranarray(np.zeros((4, 2), np.int64))
    mmvref.segment_csr(x, ip, axis=1, out=o)
    assert o.tolist() == [[row[0], sum(row[1:6])] for row in x.tolist()]
    o2 = np.asfortranarray(np.zeros((4, 6), np.int64))
    mmvref.scan(x, axis=0, out=o2)
    assert o2.tolist() == np.cumsum(x, axis=0).tolist()


def test_out_overlapping_the_input_gives_numpy_in_place_results():
    x = np.arange(1, 20, dtype=np.int64)
    expected = _oracle_scan(x, exclusive=True)
    mmvref.scan(x, exclusive=True, out=x)
    assert x.tolist() == expected
    y = np.arange(1, 20, dtype=np.float64)
    expected = [float(v) for v in _oracle_scan(y)]
    mmvref.scan(y, out=y)
    assert y.tolist() == expected


def test_out_with_another_dtype_is_refused_naming_out():
    with pytest.raises(TypeError, match="out has dtype"):
        mmvref.scan(np.arange(4, dtype=np.int32), out=np.zeros(4, ">i8"))
    with pytest.raises(ValueError, match="out is read-only"):
        o = np.zeros(4, np.int32)
        o.flags.writeable = False
        mmvref.scan(np.arange(4, dtype=np.int32), out=o)


# ----------------------------------------------------------------------------- 11. out= writes in place

def _peak_python_bytes(fn):
    """The peak of the memory numpy allocated (numpy reports to tracemalloc) during fn()."""
    fn()  # compiled and warm: the measured call allocates only what the op itself needs
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dt", [np.int32, np.int64, np.float32, np.float64])
def test_out_takes_no_result_sized_temporary(dt):
    """A caller passes out= to avoid a result-sized allocation and copy: the kernels write into it."""
    n = 1 << 20
    rng = np.random.default_rng(1)
    x = rng.integers(-100, 100, n).astype(dt)
    flags = (rng.random(n) < 0.01).astype(np.uint8)
    rdt = np.dtype(np.float32 if dt == np.float32 else (np.int32 if dt == np.int32 else dt))
    o = np.empty(n, rdt)
    half = o.nbytes // 2  # a temporary of the result would take all of it
    assert _peak_python_bytes(lambda: mmvref.scan(x, out=o)) < half
    assert _peak_python_bytes(lambda: mmvref.segmented_scan(x, flags, out=o)) < half
    x2 = x.reshape(1024, 1024)
    o2 = np.empty((1024, 1024), rdt)
    assert _peak_python_bytes(lambda: mmvref.scan(x2, axis=1, out=o2)) < half
    assert _peak_python_bytes(lambda: mmvref.scan(x2, axis=0, out=o2)) < half
    ip = np.arange(0, n + 1, 2, dtype=np.int64)  # n/2 rows of two: the result is half of x
    r = np.empty(n // 2, rdt)
    assert _peak_python_bytes(lambda: mmvref.segment_csr(x, ip, out=r)) < r.nbytes // 2
    assert _peak_python_bytes(lambda: mmvref.segment_sum_csr(x, ip, out=r)) < r.nbytes // 2
    g = np.empty(n, x.dtype)
    assert _peak_python_bytes(lambda: mmvref.gather_csr(x[:n // 2], ip, out=g)) < g.nbytes // 2


# ----------------------------------------------------------------------------- 2. ndarray subclasses

@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")
def test_matrix_input_is_its_data_not_a_matrix():
    m = np.matrix([[1, 2, 3]], dtype=np.int32)
    assert mmvref.scan(m).tolist() == [1, 3, 6]
    assert mmvref.scan(m, axis=1).tolist() == [[1, 3, 6]]
    assert mmvref.segment_csr(m, [0, 1, 3], axis=1).tolist() == [[1, 5]]
    assert mmvref.segment_sum_csr(np.matrix([[1], [2], [3]], dtype=np.int32), np.matrix([[0, 2, 3]]).A1).tolist() \
        == [[3], [3]]


def test_masked_array_is_refused_naming_the_argument():
    x = np.ma.masked_array([1, 2, 3], mask=[0, 1, 0])
    with pytest.raises(TypeError, match="x is a numpy masked array"):
        mmvref.scan(x)
    with pytest.raises(TypeError, match="src is a numpy masked array"):
        mmvref.segment_csr(x, [0, 3])


# ----------------------------------------------------------------------------- 3. exact integer products

@pytest.mark.parametrize("n", [40000, 70001])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_integer_product_of_a_long_segment_holding_a_zero_is_zero(n, where):
    x = np.full(n, 3, np.int64)
    x[{"first": 5, "middle": n // 2, "last": n - 1}[where]] = 0
    ip = np.array([0, 5, n])
    expected = _oracle_csr(x, ip, "prod")
    assert expected == [243, 0]
    assert mmvref.segment_csr(x, ip, reduce="prod").tolist() == [243, 0]
    x2 = np.stack([x, np.where(x == 0, 1, x)[::-1] * 0 + 1], axis=1)  # a second column of ones: product 1
    assert mmvref.segment_csr(x2, ip, reduce="prod").tolist() == [[243, 1], [0, 1]]
    assert mmvref.segment_coo(x, np.repeat([0, 1], [5, n - 5]), reduce="prod").tolist() == [243, 0]


def test_integer_product_of_a_long_segment_without_a_zero_still_overflows():
    x = np.full(40001, 3, np.int32)
    with pytest.raises(OverflowError, match="segment_csr"):
        mmvref.segment_csr(x, [0, 40001], reduce="prod")
    wrapped = mmvref.segment_csr(x, [0, 40001], reduce="prod", overflow="wrap")
    assert int(wrapped[0]) == (pow(3, 40001, 2**32) + 2**31) % 2**32 - 2**31


# ----------------------------------------------------------------------------- 6. offsets near the int64 limits

@pytest.mark.parametrize("ip", [[0, 3, -2**63 + 2], [0, -2**63 + 2, 3], [0, 2**63 - 1, 3], [0, 3, 2, 3]])
def test_offsets_near_the_int64_limits_are_refused_naming_indptr(ip):
    ip = np.array(ip, np.int64)
    with pytest.raises(ValueError, match="indptr"):
        mmvref.gather_csr(np.arange(2.0), ip)
    if ip[-1] == 3:
        for fn in (mmvref.segment_csr, mmvref.segment_sum_csr):
            with pytest.raises(ValueError, match="indptr"):
                fn(np.arange(3.0), ip)
            with pytest.raises(ValueError, match="indptr"):
                fn(np.arange(3), ip)


# ----------------------------------------------------------------------------- 8. one result, one code path

@settings(deadline=None, max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), dt=st.sampled_from([np.float32, np.float64]),
       avg=st.sampled_from([1, 3, 40, 5000, 50000]), n=st.sampled_from([1, 1000, 100_001]))
def test_one_set_of_segments_one_float_result(seed, dt, avg, n):
    """segment_sum_csr, segment_csr(reduce="sum") and segmented_sum over the same non-empty segments
    give the same bits (long segments, split among threads, included)."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)).astype(dt)
    k = max(1, n // avg)
    starts = np.unique(np.concatenate([[0], rng.integers(1, max(n, 2), k - 1)]))[None][0]
    starts = starts[starts < n]
    ip = np.concatenate([starts, [n]]).astype(np.int64)
    flags = np.zeros(n, np.uint8)
    flags[starts] = 1
    a = mmvref.segment_sum_csr(x, ip)
    b = mmvref.segment_csr(x, ip, reduce="sum")
    c = mmvref.segmented_sum(x, flags)
    assert a.tobytes() == b.tobytes() == c.tobytes()
    # and each is a sum of its own segment, within the documented bound
    exact = np.array([np.sum(x[ip[r]:ip[r + 1]].astype(np.float64)) for r in range(ip.size - 1)])
    mag = np.array([np.sum(np.abs(x[ip[r]:ip[r + 1]].astype(np.float64))) for r in range(ip.size - 1)])
    u = np.finfo(dt).eps / 2
    lens = np.diff(ip)
    assert np.all(np.abs(a.astype(np.float64) - exact) <= (lens + 64) * u * mag + np.finfo(dt).tiny)


# ----------------------------------------------------------------------------- ids and sizes near 2**63

def test_ids_near_the_int64_limit_never_crash():
    """An index ending in 2**63 - 1 once crashed the process (an id + 1 wrapped inside the bounds
    kernel, and LLVM then dropped the clamps): run in a child so a regression fails, not kills, the run."""
    import subprocess
    import sys

    code = (
        "import numpy as np, mmvref\n"
        "for fn in (mmvref.scatter, mmvref.segment_coo):\n"
        "    for idx in ([0, 1, 2, 2**63 - 1], [2**63 - 1] * 3, [-2**63, 0, 1]):\n"
        "        try:\n"
        "            fn(np.ones(len(idx)), np.array(idx), dim_size=4)\n"
        "            raise SystemExit('no error')\n"
        "        except ValueError as e:\n"
        "            assert 'index[' in str(e), e\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout, r.stderr[-2000:])


@pytest.mark.parametrize("call, name", [
    (lambda: mmvref.scatter(np.ones(4), np.array([0, 1, 2, 2**63 - 1])), "index"),
    (lambda: mmvref.scatter(np.ones(3), np.array([0, 1, 2]), dim_size=2**63 - 1), "dim_size"),
    (lambda: mmvref.segment_coo(np.ones(3), np.array([0, 1, 2]), dim_size=2**62), "dim_size"),
    (lambda: mmvref.gather_csr(np.ones(1), np.array([0, 2**63 - 1])), "indptr"),
])
def test_sizes_no_array_can_address_are_refused_naming_the_argument(call, name):
    with pytest.raises(ValueError, match=rf"^{name}\b.*more than an array can address"):
        call()


# ----------------------------------------------------------------------------- the torch route checks as the plain one

def test_torch_route_takes_and_refuses_what_the_plain_path_does():
    torch = pytest.importorskip("torch")
    for t in (torch.tensor(1.0, requires_grad=True), torch.tensor(1.0, dtype=torch.bfloat16), np.float64(1.0)):
        with pytest.raises(ValueError, match="src must be at least 1-D"):
            mmvref.segment_csr(t, [0, 1])
        with pytest.raises(ValueError, match="x must be at least 1-D"):
            mmvref.scan(t if not isinstance(t, np.floating) else np.asarray(t))
    for t in (torch.ones(3, requires_grad=True), torch.ones(3, dtype=torch.bfloat16), torch.ones(3)):
        for bad in ("yes", None, 1):
            with pytest.raises(TypeError, match="exclusive must be a bool"):
                mmvref.scan(t, exclusive=bad)
            with pytest.raises(TypeError, match="exclusive must be a bool"):
                mmvref.segmented_scan(t, [1, 0, 0], exclusive=bad)
    x = torch.arange(6, dtype=torch.float32)
    plain = mmvref.segment_csr(x, [0, 2, 6], dtype=torch.float64)
    routed = mmvref.segment_csr(x.clone().requires_grad_(), [0, 2, 6], dtype=torch.float64)
    assert plain.dtype == routed.dtype == torch.float64
    assert plain.tolist() == routed.tolist() == [1.0, 14.0]
    assert mmvref.scan(np.arange(4, dtype=np.int32), dtype=torch.int16).tolist() == [0, 1, 3, 6]


def test_torch_route_checks_offsets_and_sizes_as_the_plain_path():
    torch = pytest.importorskip("torch")
    for src in (torch.zeros([4, 0, 1], dtype=torch.bfloat16), np.zeros([4, 0, 1]),
                torch.zeros([4, 0, 1], requires_grad=True)):
        with pytest.raises(ValueError, match=r"^indptr\b.*more than an array can address"):
            mmvref.gather_csr(src, np.array([0, 2**62]), axis=-1)
    for src in (torch.tensor([1.0], requires_grad=True), np.array([1.0])):  # a uint64 offset keeps its value
        with pytest.raises(ValueError, match=r"^indptr has an offset of 18446744073709551615, more than an array"):
            mmvref.gather_csr(src, np.array([0, 2**64 - 1], np.uint64))
    with pytest.raises(ValueError, match="x must be at least 1-D"):
        mmvref.segment_sum_csr(torch.tensor(2.0, dtype=torch.bfloat16), [0, 0])
