"""Fast scan-based operators of ``mmvref._fast.scanfamily.ops`` (batched_scan, split,
split_ind, radix_sort, argsort, topk, weighted_sample, top_p_sample) against
independent plain numpy / torch oracles written here from DEVELOPERS.md,
"Scan-based operators" (never against the code under test)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mmvref._fast.scanfamily import ops as sf

# The scan family's kernels are plain Numba loops with one (portable) path for every target and no
# vector intrinsics (``_target.FAMILIES``); CI's haswell stage skips these compile-heavy tests, the
# x86-64 README job still checks every op of the family against the golden model for that target.
pytestmark = pytest.mark.native_only

INT_DTYPES = ["int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}
# -0.0/+0.0, +-inf, NaNs of both signs, subnormals of every width, values that round in fp16
SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 6e-8, -6e-8, 1e-45, -1e-45, 1e-310,
           -1e-310, 2.0, -2.0, 65504.0, 3.4e38, -3.4e38]


def nan_payload(dt):
    """A NaN with a payload and the sign bit set (its bits must survive the sort)."""
    u = np.dtype(f"u{np.dtype(dt).itemsize}")
    bits = {2: 0xFE01, 4: 0xFFC00123, 8: 0xFFF8000000000123}[np.dtype(dt).itemsize]
    return np.array([bits], dtype=u).view(dt)[0]


@st.composite
def arrays(draw, max_n=300, ndim=1, dtypes=INT_DTYPES + FLOAT_DTYPES):
    dt = draw(st.sampled_from(dtypes))
    n = draw(st.integers(0, max_n))
    rows = draw(st.integers(0, 4)) if ndim == 2 else 1
    size = n * rows
    if dt in FLOAT_DTYPES:
        el = st.one_of(st.sampled_from(SPECIAL), st.floats(-8, 8, width=16), st.floats(allow_nan=True, width=64))
        with np.errstate(over="ignore"):
            x = np.array(draw(st.lists(el, min_size=size, max_size=size)), dtype=np.float64).astype(dt)
        if size and draw(st.booleans()):
            x[draw(st.integers(0, size - 1))] = nan_payload(dt)
    else:
        info = np.iinfo(dt)
        lim = draw(st.sampled_from([3, 300, int(info.max)]))
        lim = min(lim, int(info.max))
        lo = int(info.min) if lim == info.max else -lim
        x = np.array(draw(st.lists(st.integers(lo, lim), min_size=size, max_size=size)),
                     dtype=dt)
    return x.reshape(rows, n) if ndim == 2 else x


def bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def asc_order(x):
    """Oracle: numpy's stable argsort (NaNs last in input order, -0.0 == +0.0)."""
    return np.argsort(x, kind="stable").astype(np.int64)


def desc_order(x):
    """Oracle: stable descending order, NaNs first (in input order), -0.0 == +0.0,
    equal values in input order. np.lexsort sorts by its last key first."""
    idx = np.arange(x.size)
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        neg = np.where(nan, 0.0, -x.astype(np.float64))  # fp16/32 -> float64 is exact
        return np.lexsort((idx, neg, ~nan)).astype(np.int64)
    return np.lexsort((idx, ~x)).astype(np.int64)  # ~x = -x - 1: decreasing, no overflow


@pytest.fixture(params=[False, True], ids=["serial", "parallel-paths"])
def small_chunks(request, monkeypatch):
    """Also run with tiny thresholds, so the parallel 1-D paths see small inputs."""
    if request.param:
        monkeypatch.setattr(sf, "PAR_MIN", 8)
        monkeypatch.setattr(sf, "MIN_CHUNK", 3)


# ----------------------------------------------------------------------------- radix sort / argsort

@pytest.mark.usefixtures("small_chunks")
@given(x=arrays())
def test_radix_sort_ascending_equals_numpy(x):
    v, i = sf.radix_sort(x)
    ref = asc_order(x)
    assert i.dtype == np.int64 and np.array_equal(i, ref)
    assert v.dtype == x.dtype and np.array_equal(bits(v), bits(np.sort(x, kind="stable")))
    assert np.array_equal(bits(v), bits(x[ref]))  # NaN payloads and -0.0 kept
    assert np.array_equal(sf.argsort(x), ref)


@pytest.mark.usefixtures("small_chunks")
@given(x=arrays())
def test_radix_sort_descending_stable(x):
    v, i = sf.radix_sort(x, descending=True)
    ref = desc_order(x)
    assert np.array_equal(i, ref)
    assert np.array_equal(bits(v), bits(x[ref]))
    assert np.array_equal(sf.argsort(x, descending=True), ref)


@given(x=arrays(max_n=60, ndim=2), descending=st.booleans())
def test_radix_sort_rows(x, descending):
    v, i = sf.radix_sort(x, descending=descending)
    assert v.shape == i.shape == x.shape and i.dtype == np.int64
    for r in range(x.shape[0]):
        ref = desc_order(x[r]) if descending else asc_order(x[r])
        assert np.array_equal(i[r], ref)
        assert np.array_equal(bits(v[r]), bits(x[r][ref]))
    assert np.array_equal(sf.argsort(x, descending=descending), i)


@pytest.mark.parametrize("dt", INT_DTYPES + FLOAT_DTYPES)
@pytest.mark.parametrize("n", [70_000, 200_003])
def test_radix_sort_large_parallel(dt, n):
    """Above PAR_MIN: the chunked parallel passes (full-range keys: every byte varies)."""
    rng = np.random.default_rng(n)
    if dt in FLOAT_DTYPES:
        x = rng.standard_normal(n).astype(dt)
        x[::97] = np.nan
        x[1::89] = -0.0
        x[2::83] = 0.0
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
    for desc in (False, True):
        ref = desc_order(x) if desc else asc_order(x)
        v, i = sf.radix_sort(x, descending=desc)
        assert np.array_equal(i, ref) and np.array_equal(bits(v), bits(x[ref]))


def test_radix_sort_skips_constant_bytes_small_ints():
    x = np.random.default_rng(1).integers(-3, 4, 100_000).astype(np.int64)  # 7 of 8 bytes constant
    v, i = sf.radix_sort(x)
    assert np.array_equal(i, asc_order(x)) and np.array_equal(v, np.sort(x, kind="stable"))
    c = np.full(100_000, 7, np.int32)  # every byte constant: no pass at all
    assert np.array_equal(sf.argsort(c), np.arange(100_000))


def test_sort_float_special_values_exact():
    x = np.array([np.nan, -0.0, 0.0, -np.inf, np.inf, -1e-45, 1e-45, -np.nan, 0.0, -0.0], np.float32)
    x[0] = nan_payload(np.float32)
    assert sf.argsort(x).tolist() == [3, 5, 1, 2, 8, 9, 6, 4, 0, 7]
    assert sf.argsort(x, descending=True).tolist() == [0, 7, 4, 6, 1, 2, 8, 9, 5, 3]
    v, _ = sf.radix_sort(x, descending=True)
    assert bits(v)[0] == bits(x)[0]  # payload kept


# ----------------------------------------------------------------------------- top-k

def _torch_values(x, k, largest):
    torch = pytest.importorskip("torch")
    tx = torch.from_numpy(x.astype(np.float32) if x.dtype == np.float16 else x)
    return torch.topk(tx, k, largest=largest).values.numpy()


@pytest.mark.usefixtures("small_chunks")
@given(x=arrays(max_n=200), largest=st.booleans(), data=st.data())
def test_topk_values_equal_torch_and_ties_documented(x, largest, data):
    k = data.draw(st.integers(0, len(x)))
    v, i = sf.topk(x, k, largest=largest)
    assert v.dtype == x.dtype and v.shape == (k,) and i.dtype == np.int64
    tv = _torch_values(x, k, largest)
    assert np.array_equal(v.astype(np.float64), tv.astype(np.float64), equal_nan=True)
    ref = (desc_order(x) if largest else asc_order(x))[:k]
    assert np.array_equal(i, ref)
    assert np.array_equal(bits(v), bits(x[ref]))


@given(data=st.data(), largest=st.booleans())
def test_topk_sampled_threshold_path(data, largest):
    """n above PAR_MIN and small k: the sampled-threshold count/collect path,
    including inputs with many ties at the threshold (it then falls back)."""
    n = 5000
    dt = data.draw(st.sampled_from(["int16", "int32", "float32", "float64"]))
    spread = data.draw(st.sampled_from([5, 1000, 10**6]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.integers(-spread, spread, n).astype(dt)
    if dt.startswith("float"):
        x = x / 7
        x[rng.integers(0, n, 5)] = np.nan
    k = data.draw(st.integers(1, 150))
    old = sf.PAR_MIN
    try:
        sf.PAR_MIN = 1024
        v, i = sf.topk(x, k, largest=largest)
    finally:
        sf.PAR_MIN = old
    ref = (desc_order(x) if largest else asc_order(x))[:k]
    assert np.array_equal(i, ref) and np.array_equal(bits(v), bits(x[ref]))


@pytest.mark.parametrize("k", [0, 1, 10, 1000, 70_000, 199_999, 200_000])
def test_topk_large_parallel(k):
    rng = np.random.default_rng(k)
    x = rng.standard_normal(200_000).astype(np.float32)
    x[::1001] = np.nan
    for largest in (True, False):
        v, i = sf.topk(x, k, largest=largest)
        ref = (desc_order(x) if largest else asc_order(x))[:k]
        assert np.array_equal(i, ref) and np.array_equal(bits(v), bits(x[ref]))
    x = rng.integers(0, 3, 200_000).astype(np.int32)  # ties everywhere: the cut keeps the lower indices
    v, i = sf.topk(x, k)
    assert np.array_equal(i, desc_order(x)[:k])


@given(x=arrays(max_n=50, ndim=2), largest=st.booleans(), data=st.data())
def test_topk_rows(x, largest, data):
    k = data.draw(st.integers(0, x.shape[1]))
    v, i = sf.topk(x, k, largest=largest)
    assert v.shape == i.shape == (x.shape[0], k)
    for r in range(x.shape[0]):
        ref = (desc_order(x[r]) if largest else asc_order(x[r]))[:k]
        assert np.array_equal(i[r], ref) and np.array_equal(bits(v[r]), bits(x[r][ref]))


def test_topk_errors_and_torch():
    torch = pytest.importorskip("torch")
    x = torch.tensor([[3.0, 1.0, 3.0, float("nan")], [0.0, -0.0, 2.0, 1.0]])
    v, i = sf.topk(x, 2)
    assert isinstance(v, torch.Tensor) and isinstance(i, torch.Tensor) and i.tolist() == [[3, 0], [2, 3]]
    v, i = sf.topk(x, 2, largest=False)
    assert i.tolist() == [[1, 0], [0, 1]]
    with pytest.raises(ValueError, match="k must be"):
        sf.topk(np.arange(3), 4)
    with pytest.raises(ValueError, match="k must be"):
        sf.topk(np.arange(3), -1)
    with pytest.raises(TypeError, match="k must be an integer"):
        sf.topk(np.arange(3), 1.5)
    with pytest.raises(ValueError, match="x must be 1-D or 2-D"):
        sf.topk(np.zeros((2, 2, 2)), 1)
    assert sf.topk(np.zeros((0, 5), np.float32), 3)[0].shape == (0, 3)


# ----------------------------------------------------------------------------- split

@pytest.mark.usefixtures("small_chunks")
@given(x=arrays(), seed=st.integers(0, 2**32 - 1), mdt=st.sampled_from([np.bool_, np.int8, np.uint8]),
       p=st.sampled_from([0.0, 0.4, 1.0]))
def test_split_equals_concatenate(x, seed, mdt, p):
    m = (np.random.default_rng(seed).random(len(x)) < p).astype(mdt)
    mb = m.astype(bool)
    ref_v = np.concatenate([x[mb], x[~mb]])
    ref_i = np.concatenate([np.flatnonzero(mb), np.flatnonzero(~mb)]).astype(np.int64)
    v, i = sf.split_ind(x, m)
    assert v.dtype == x.dtype and i.dtype == np.int64
    assert np.array_equal(i, ref_i) and np.array_equal(bits(v), bits(ref_v))
    assert np.array_equal(bits(sf.split(x, m)), bits(ref_v))


def test_split_errors_and_torch():
    torch = pytest.importorskip("torch")
    with pytest.raises(ValueError, match=r"mask.*0 and 1.*mask\[1\]"):
        sf.split(np.arange(3), np.array([0, 2, 1], np.uint8))
    with pytest.raises(ValueError, match="mask"):
        sf.split(np.arange(3), np.array([0, -1, 1], np.int8))
    with pytest.raises(ValueError, match="length"):
        sf.split(np.arange(3), np.array([0, 1], np.uint8))
    with pytest.raises(TypeError, match="mask"):
        sf.split(np.arange(3), np.array([0, 1, 1], np.int32))
    with pytest.raises(ValueError, match="x must be 1-D"):
        sf.split(np.zeros((2, 2)), np.zeros(2, bool))
    with pytest.raises(TypeError, match="x has unsupported dtype"):
        sf.split(np.zeros(2, np.uint16), np.zeros(2, bool))
    v, i = sf.split_ind(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([False, True, False]))
    assert isinstance(v, torch.Tensor) and v.tolist() == [2.0, 1.0, 3.0] and i.tolist() == [1, 0, 2]


# ----------------------------------------------------------------------------- batched scan

def _exact_rows(x, exclusive):
    out = []
    for row in x.tolist():
        acc, r = 0, []
        for v in row:
            if exclusive:
                r.append(acc)
            acc += v
            if not exclusive:
                r.append(acc)
        out.append(r)
    return out


def _wrap(v, bits_):
    return (v + (1 << (bits_ - 1))) % (1 << bits_) - (1 << (bits_ - 1))


@given(data=st.data(), exclusive=st.booleans())
def test_batched_scan_integers_raise_and_wrap(data, exclusive):
    dt = np.dtype(data.draw(st.sampled_from(INT_DTYPES)))
    rows, n = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 50))
    info = np.iinfo(dt)
    lim = data.draw(st.sampled_from([100, int(info.max)]))
    x = np.array(data.draw(st.lists(st.integers(max(info.min, -lim), lim), min_size=rows * n,
                                    max_size=rows * n)), dtype=dt).reshape(rows, n)
    exact = _exact_rows(x, exclusive)
    rdt = np.dtype(RESULT[str(dt)])
    ri = np.iinfo(rdt)
    fits = all(ri.min <= v <= ri.max for row in exact for v in row)
    if fits:
        z = sf.batched_scan(x, exclusive=exclusive)
        assert z.dtype == rdt and z.shape == x.shape and z.tolist() == exact
        if dt != np.int64 and n:  # numpy oracle too (int64 words cannot overflow here)
            ref = np.cumsum(x, axis=1, dtype=np.int64)
            if exclusive:
                ref = np.concatenate([np.zeros((rows, 1), np.int64), ref[:, :-1]], axis=1)
            assert np.array_equal(z, ref)
    else:
        with pytest.raises(OverflowError, match="batched_scan"):
            sf.batched_scan(x, exclusive=exclusive)
    z = sf.batched_scan(x, exclusive=exclusive, overflow="wrap")
    assert z.dtype == rdt and z.tolist() == [[_wrap(v, 8 * rdt.itemsize) for v in row] for row in exact]


def test_batched_scan_overflow_cases():
    x = np.array([[2**31 - 1, 1, -5], [1, 2, 3]], np.int32)
    with pytest.raises(OverflowError, match="int32"):
        sf.batched_scan(x)
    assert sf.batched_scan(x, overflow="wrap")[0].tolist() == [2**31 - 1, -(2**31), -(2**31) - 5 + 2**32]
    assert sf.batched_scan(x, dtype=np.int64)[0].tolist() == [2**31 - 1, 2**31, 2**31 - 5]
    with pytest.raises(OverflowError):
        sf.batched_scan(x, exclusive=True)  # [0, 2**31 - 1, 2**31]
    y = np.array([[2**62, 2**62, -(2**62)]], np.int64)  # leaves int64 at position 1, back at 2
    with pytest.raises(OverflowError):
        sf.batched_scan(y)
    assert sf.batched_scan(y, overflow="wrap").tolist() == [[2**62, -(2**63), 2**62]]
    assert sf.batched_scan(y, exclusive=True, overflow="wrap").tolist() == [[0, 2**62, -(2**63)]]
    with pytest.raises(OverflowError):
        sf.batched_scan(y, exclusive=True)
    # the exclusive scan never shows the total: no overflow when only the total leaves int32
    z = np.array([[2**31 - 1, 1]], np.int32)
    assert sf.batched_scan(z, exclusive=True).tolist() == [[0, 2**31 - 1]]


@given(data=st.data(), exclusive=st.booleans())
def test_batched_scan_floats_equal_numpy_cumsum(data, exclusive):
    """Floats accumulate in the result dtype in index order: bit-equal to
    np.cumsum(axis=1, dtype=result dtype), which also adds in index order."""
    dt = data.draw(st.sampled_from(FLOAT_DTYPES))
    rows, n = data.draw(st.integers(0, 6)), data.draw(st.integers(0, 60))
    x = (np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal((rows, n)) * 50).astype(dt)
    rdt = np.dtype(RESULT[dt])
    ref = np.cumsum(x.astype(rdt), axis=1, dtype=rdt)
    if exclusive and n:
        ref = np.concatenate([np.zeros((rows, 1), rdt), ref[:, :-1]], axis=1)
    z = sf.batched_scan(x, exclusive=exclusive)
    assert z.dtype == rdt and z.shape == x.shape and np.array_equal(z, ref)


def test_batched_scan_few_long_rows_dtypes_and_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.integers(-100, 101, (1, 1 << 17)).astype(np.float32)  # small integers: every sum exact
    assert np.array_equal(sf.batched_scan(x), np.cumsum(x, axis=1, dtype=np.float64).astype(np.float32))
    xi = rng.integers(-100, 101, (1, 1 << 17)).astype(np.int8)
    assert np.array_equal(sf.batched_scan(xi, exclusive=True)[0, 1:], np.cumsum(xi[0, :-1], dtype=np.int64))
    big = np.full((1, 1 << 17), 2**20, np.int32)
    with pytest.raises(OverflowError, match="batched_scan"):
        sf.batched_scan(big)
    f = rng.standard_normal((3, 1000)).astype(np.float32)  # general floats: np.cumsum within 2 n u sum|x|
    z = sf.batched_scan(f, dtype=np.float64)
    assert z.dtype == np.float64
    assert np.allclose(z, np.cumsum(f.astype(np.float64), axis=1), rtol=0, atol=2 * 1000 * 2**-53 * 1000)
    assert sf.batched_scan(np.ones((2, 3), np.int8), dtype=np.float32).dtype == np.float32
    t = sf.batched_scan(torch.ones(3, 4, dtype=torch.int16), exclusive=True)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.int32 and t[:, -1].tolist() == [3, 3, 3]
    with pytest.raises(ValueError, match="x must be 2-D"):
        sf.batched_scan(np.ones(3))
    with pytest.raises(TypeError, match="dtype"):
        sf.batched_scan(np.ones((2, 2)), dtype=np.int32)
    with pytest.raises(ValueError, match="overflow"):
        sf.batched_scan(np.ones((2, 2), np.int32), overflow="saturate")
    assert sf.batched_scan(np.zeros((0, 4), np.int16)).shape == (0, 4)
    assert sf.batched_scan(np.zeros((4, 0), np.float16)).dtype == np.float32


# ----------------------------------------------------------------------------- sampling

def ref_weighted_sample(w, u):
    """DEVELOPERS.md, literally: c = inclusive scan (int64 exact / float64 np.cumsum),
    t = u * c[-1] in float64, the smallest i with c[i] > t (integers: > floor(t)),
    else the last i with w[i] > 0."""
    if w.dtype.kind == "f":
        c = np.cumsum(w, dtype=np.float64)
        hit = c > u * c[-1]
    else:
        c = np.cumsum(w.astype(object))  # Python ints: exact
        total = int(c[-1])
        hit = np.array([int(ci) > math.floor(u * float(total)) for ci in c])
    return int(np.argmax(hit)) if hit.any() else int(np.flatnonzero(w > 0)[-1])


@st.composite
def weights(draw, max_n=80):
    dt = draw(st.sampled_from(INT_DTYPES + FLOAT_DTYPES))
    n = draw(st.integers(1, max_n))
    if dt in FLOAT_DTYPES:
        el = st.one_of(st.just(0.0), st.floats(0, 1e4, width=16), st.floats(1e-30, 1e30))
        with np.errstate(over="ignore"):
            w = np.array(draw(st.lists(el, min_size=n, max_size=n))).astype(dt)
        w[~np.isfinite(w)] = 1
    else:
        hi = draw(st.sampled_from([3, int(np.iinfo(dt).max)]))
        w = np.array(draw(st.lists(st.integers(0, hi), min_size=n, max_size=n)), dtype=dt)
        if dt == "int64" and hi > 3:
            w //= n  # keep the total inside int64
    if not w.astype(np.float64).sum() > 0:
        w[-1] = 1
    return w


U_EDGE = [0.0, 0.5, 1 - 2**-53, 1 - 2**-24, 2**-1074, 0.999999]


@given(w=weights(), u=st.one_of(st.sampled_from(U_EDGE), st.floats(0, 1, exclude_max=True)))
def test_weighted_sample_equals_reference(w, u):
    got = sf.weighted_sample(w, u)
    assert isinstance(got, np.int64) and int(got) == ref_weighted_sample(w, u)


@given(w=weights(), seed=st.integers(0, 2**32 - 1))
def test_weighted_sample_many_u(w, seed):
    rng = np.random.default_rng(seed)
    u = np.concatenate([rng.random(17), U_EDGE]).reshape(-1, 1)
    got = sf.weighted_sample(w, u)
    assert got.dtype == np.int64 and got.shape == u.shape
    assert got.ravel().tolist() == [ref_weighted_sample(w, float(v)) for v in u.ravel()]


def test_weighted_sample_fallback_errors_and_torch():
    torch = pytest.importorskip("torch")
    w = np.array([0.0, 1.0, 0.0, 2.0, 0.0])
    assert sf.weighted_sample(w, np.nextafter(1.0, 0)) == 3  # last positive weight
    assert sf.weighted_sample(np.array([2**62, 2**62 - 1, 0], np.int64), 1 - 2**-53) == 1
    with pytest.raises(OverflowError, match="int64"):
        sf.weighted_sample(np.array([2**62, 2**62, 2**62], np.int64), 0.5)
    for bad, msg in [([1.0, -1.0], "non-negative"), ([1.0, np.nan], "finite"), ([np.inf], "finite"),
                     ([0.0, 0.0], "positive total"), ([], "positive total")]:
        with pytest.raises(ValueError, match=msg):
            sf.weighted_sample(np.array(bad, np.float64), 0.5)
    for u in (1.0, -0.1, np.nan):
        with pytest.raises(ValueError, match="u must lie in"):
            sf.weighted_sample(np.ones(3), u)
    with pytest.raises(ValueError, match="w must be 1-D"):
        sf.weighted_sample(np.ones((2, 2)), 0.5)
    r = sf.weighted_sample(torch.tensor([1.0, 1.0]), torch.tensor([0.1, 0.9]))
    assert isinstance(r, torch.Tensor) and r.tolist() == [0, 1]
    assert sf.weighted_sample(np.ones(4, np.float16), np.zeros(0)).shape == (0,)


def ref_top_p(row, p, u):
    """Llama 3's sample_top_p with a given u, from DEVELOPERS.md."""
    order = desc_order(row)
    q = row[order].astype(np.float64)
    e = np.concatenate([[0.0], np.cumsum(q)[:-1]])
    kept = np.where(e <= p, q, 0.0)
    return int(order[ref_weighted_sample(kept, u)])


@st.composite
def prob_rows(draw):
    dt = draw(st.sampled_from(FLOAT_DTYPES))
    rows, n = draw(st.integers(1, 4)), draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["softmax", "ties", "zeros"]))
    if kind == "softmax":
        z = rng.standard_normal((rows, n)) * 3
        x = np.exp(z - z.max(axis=1, keepdims=True))
        x /= x.sum(axis=1, keepdims=True)
    elif kind == "ties":
        x = rng.integers(0, 3, (rows, n)) / 8.0
    else:
        x = (rng.random((rows, n)) < 0.3) * rng.random((rows, n))
    x = x.astype(dt)
    x[:, 0] += np.dtype(dt).type(0.25)  # a positive total per row
    return x


@given(probs=prob_rows(), p=st.one_of(st.sampled_from([0.0, 0.5, 0.9, 1.0]), st.floats(0, 1)),
       seed=st.integers(0, 2**32 - 1))
def test_top_p_sample_equals_reference(probs, p, seed):
    rng = np.random.default_rng(seed)
    u = rng.random(probs.shape[0])
    u[0] = [0.0, 1 - 2**-53, u[0]][seed % 3]
    got = sf.top_p_sample(probs, p, u)
    assert got.dtype == np.int64 and got.shape == (probs.shape[0],)
    assert got.tolist() == [ref_top_p(probs[r], p, float(u[r])) for r in range(probs.shape[0])]
    one = sf.top_p_sample(probs[0], p, float(u[0]))
    assert isinstance(one, np.int64) and int(one) == got[0]


def test_top_p_sample_errors_and_torch():
    torch = pytest.importorskip("torch")
    probs = np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]])
    assert sf.top_p_sample(probs, 0.0, np.array([0.99, 0.99])).tolist() == [1, 0]  # only the top token
    assert sf.top_p_sample(probs, 0.6, np.array([0.99, 0.99])).tolist() == [2, 1]
    r = sf.top_p_sample(torch.tensor(probs, dtype=torch.float32), 0.9, torch.tensor([0.0, 0.5]))
    assert isinstance(r, torch.Tensor) and r.dtype == torch.int64
    with pytest.raises(ValueError, match="p must lie in"):
        sf.top_p_sample(probs, 1.5, np.zeros(2))
    with pytest.raises(ValueError, match="p must lie in"):
        sf.top_p_sample(probs, float("nan"), np.zeros(2))
    with pytest.raises(ValueError, match="u must have shape"):
        sf.top_p_sample(probs, 0.5, 0.5)
    with pytest.raises(ValueError, match="u must be a scalar"):
        sf.top_p_sample(probs[0], 0.5, np.zeros(2))
    with pytest.raises(ValueError, match="u must lie in"):
        sf.top_p_sample(probs, 0.5, np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="probs must be non-negative"):
        sf.top_p_sample(np.array([0.5, -0.1]), 0.5, 0.5)
    with pytest.raises(ValueError, match="probs must be finite"):
        sf.top_p_sample(np.array([0.5, np.nan]), 0.5, 0.5)
    with pytest.raises(ValueError, match="row 1 must have a positive total"):
        sf.top_p_sample(np.array([[1.0, 0.0], [0.0, 0.0]]), 0.5, np.zeros(2))
    with pytest.raises(TypeError, match="probs must be float"):
        sf.top_p_sample(np.array([1, 2]), 0.5, 0.5)
    with pytest.raises(ValueError, match="probs must be 1-D or 2-D"):
        sf.top_p_sample(np.ones((1, 1, 1)), 0.5, 0.5)
    assert sf.top_p_sample(np.zeros((0, 3)), 0.5, np.zeros(0)).shape == (0,)


# ----------------------------------------------------------------------------- inputs

def test_non_contiguous_read_only_and_torch_inputs():
    torch = pytest.importorskip("torch")
    base = np.random.default_rng(5).standard_normal(400).astype(np.float32)
    x = base[::2]
    x.flags.writeable = False
    ref = asc_order(x)
    assert np.array_equal(sf.radix_sort(x)[1], ref)
    assert np.array_equal(sf.topk(x, 5)[1], desc_order(x)[:5])
    m = np.zeros(200, bool)
    m[::3] = True
    assert np.array_equal(sf.split(x, m), np.concatenate([x[m], x[~m]]))
    ro = base.copy()
    ro.flags.writeable = False  # contiguous and read-only: reaches the kernels as it is
    assert np.array_equal(sf.argsort(ro), asc_order(ro))
    assert np.array_equal(sf.topk(ro, 3, largest=False)[1], asc_order(ro)[:3])
    assert np.array_equal(sf.batched_scan(ro.reshape(4, 100)), np.cumsum(ro.reshape(4, 100), axis=1))
    mro = np.zeros(400, np.uint8)
    mro.flags.writeable = False
    assert np.array_equal(sf.split(ro, mro), ro)
    w = np.abs(ro)
    w.flags.writeable = False
    assert sf.weighted_sample(w, 0.5) == ref_weighted_sample(w, 0.5)
    pr = np.abs(ro).reshape(4, 100)
    pr.flags.writeable = False
    assert sf.top_p_sample(pr, 0.9, np.full(4, 0.5)).tolist() == [ref_top_p(r, 0.9, 0.5) for r in pr]
    x2 = base.reshape(20, 20).T  # Fortran order
    assert np.array_equal(sf.argsort(x2), np.argsort(x2, axis=1, kind="stable"))
    assert np.array_equal(sf.batched_scan(x2), np.cumsum(x2, axis=1, dtype=np.float32))
    t = torch.from_numpy(base.copy()).reshape(20, 20).t()
    v, i = sf.radix_sort(t, descending=True)
    assert isinstance(v, torch.Tensor) and isinstance(i, torch.Tensor)
    assert np.array_equal(v.numpy(), torch.sort(t, dim=1, descending=True, stable=True).values.numpy())
    assert isinstance(sf.argsort(t), torch.Tensor)
    assert isinstance(sf.split(torch.arange(4), torch.tensor([1, 0, 1, 0], dtype=torch.uint8)), torch.Tensor)
    for fn in (lambda: sf.radix_sort(np.zeros(0, np.int8)), lambda: sf.topk(np.zeros(0), 0),
               lambda: sf.split_ind(np.zeros(0, np.float16), np.zeros(0, bool))):
        out = fn()
        assert all(len(o) == 0 for o in out)
    with pytest.raises(TypeError, match="x has unsupported dtype"):
        sf.radix_sort(np.zeros(3, np.uint32))
    with pytest.raises(ValueError, match="x must be 1-D or 2-D"):
        sf.argsort(np.float32(1.0))
