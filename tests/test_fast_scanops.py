"""Fast scan-based operators (``mmvref.batched_scan``, ``split``, ``split_ind``,
``radix_sort``, ``argsort``, ``topk``, ``weighted_sample``, ``top_p_sample``)
against independent numpy/torch oracles written here. Semantics: DEVELOPERS.md,
"Scan-based operators"."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import mmvref
from mmvref._fast.scanfamily import ops as scanops

# the scan family has one portable path of plain loops (``_target.FAMILIES``): CI's haswell stage skips it
pytestmark = pytest.mark.native_only

INT_DTYPES = ["int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "float32", "float64"]
RESULT = {"int8": "int32", "int16": "int32", "int32": "int32", "int64": "int64",
          "float16": "float32", "float32": "float32", "float64": "float64"}
SPECIAL = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 6e-8, 1e-310, 2.0, -2.0]


@pytest.fixture(params=[False, True], ids=["one-chunk", "many-chunks"])
def chunks(request, monkeypatch):
    """Run each test also with tiny chunks, so the multi-chunk paths see small inputs."""
    if request.param:
        monkeypatch.setattr(scanops, "MIN_CHUNK", 3)


@st.composite
def arrays(draw, max_n=300, ndim=1):
    dt = draw(st.sampled_from(INT_DTYPES + FLOAT_DTYPES))
    n = draw(st.integers(0, max_n))
    rows = draw(st.integers(0, 4)) if ndim == 2 else 1
    if dt in FLOAT_DTYPES:
        el = st.one_of(st.sampled_from(SPECIAL), st.floats(-8, 8, width=16))
        x = np.array(draw(st.lists(el, min_size=n * rows, max_size=n * rows)), dtype=np.float64).astype(dt)
    else:
        info = np.iinfo(dt)
        lim = draw(st.sampled_from([3, int(info.max)]))
        x = np.array(draw(st.lists(st.integers(max(info.min, -lim), lim), min_size=n * rows, max_size=n * rows)),
                     dtype=dt)
    return x.reshape(rows, n) if ndim == 2 else x


def stable_desc_order(x):
    """Stable descending order in the documented order (NaN largest, -0.0 == 0.0):
    argsort of the NEGATED values, where -NaN ... numpy puts NaN last, so NaNs are
    handled apart: they come first, in input order."""
    nan = np.isnan(x) if x.dtype.kind == "f" else np.zeros(x.shape, bool)
    rest = np.flatnonzero(~nan)
    neg = -x[rest].astype(np.float64) if x.dtype.kind == "f" else -x[rest].astype(object)
    order = rest[np.argsort(neg, kind="stable")] if x.dtype.kind == "f" else \
        rest[sorted(range(len(rest)), key=lambda i: neg[i])]
    return np.concatenate([np.flatnonzero(nan), order]).astype(np.int64)


@pytest.mark.usefixtures("chunks")
@given(x=arrays())
def test_radix_sort_equals_numpy(x):
    v, i = mmvref.radix_sort(x)
    ref = np.argsort(x, kind="stable")
    assert i.dtype == np.int64 and np.array_equal(i, ref)
    assert v.dtype == x.dtype and np.array_equal(v.view(np.uint8), np.sort(x, kind="stable").view(np.uint8))
    assert np.array_equal(mmvref.argsort(x), ref)


@pytest.mark.usefixtures("chunks")
@given(x=arrays())
def test_radix_sort_descending(x):
    v, i = mmvref.radix_sort(x, descending=True)
    ref = stable_desc_order(x)
    assert np.array_equal(i, ref)
    assert np.array_equal(v.view(np.uint8), x[ref].view(np.uint8))


@given(x=arrays(max_n=60, ndim=2), descending=st.booleans())
def test_radix_sort_rows(x, descending):
    v, i = mmvref.radix_sort(x, descending=descending)
    assert v.shape == x.shape == i.shape
    for r in range(x.shape[0]):
        ref = stable_desc_order(x[r]) if descending else np.argsort(x[r], kind="stable")
        assert np.array_equal(i[r], ref)
        assert np.array_equal(v[r].view(np.uint8), x[r][ref].view(np.uint8))


@given(x=arrays(max_n=200), largest=st.booleans(), data=st.data())
def test_topk_values_equal_torch_and_ties_documented(x, largest, data):
    torch = pytest.importorskip("torch")
    k = data.draw(st.integers(0, len(x)))
    v, i = mmvref.topk(x, k, largest=largest)
    tx = torch.from_numpy(x.astype(np.float32) if x.dtype == np.float16 else x)
    tv = torch.topk(tx, k, largest=largest).values.numpy()
    assert v.dtype == x.dtype and v.shape == (k,)
    assert np.array_equal(v.astype(np.float64), tv.astype(np.float64), equal_nan=True)
    ref = (stable_desc_order(x) if largest else np.argsort(x, kind="stable"))[:k]
    assert np.array_equal(i, ref)


def test_topk_rows_torch_and_errors():
    torch = pytest.importorskip("torch")
    x = torch.tensor([[3.0, 1.0, 3.0, float("nan")], [0.0, -0.0, 2.0, 1.0]])
    v, i = mmvref.topk(x, 2)
    assert isinstance(v, torch.Tensor) and i.tolist() == [[3, 0], [2, 3]]
    with pytest.raises(ValueError, match="k must be"):
        mmvref.topk(np.arange(3), 4)


@pytest.mark.usefixtures("chunks")
@given(x=arrays(), seed=st.integers(0, 2**32 - 1), mdt=st.sampled_from([np.bool_, np.int8, np.uint8]))
def test_split(x, seed, mdt):
    m = (np.random.default_rng(seed).random(len(x)) < 0.4).astype(mdt)
    ref = np.concatenate([np.flatnonzero(m), np.flatnonzero(m == 0)]).astype(np.int64)
    v, i = mmvref.split_ind(x, m)
    assert np.array_equal(i, ref) and np.array_equal(v.view(np.uint8), x[ref].view(np.uint8))
    assert np.array_equal(mmvref.split(x, m).view(np.uint8), x[ref].view(np.uint8))


def test_split_errors():
    with pytest.raises(ValueError, match="mask"):
        mmvref.split(np.arange(3), np.array([0, 2, 1], np.uint8))
    with pytest.raises(ValueError, match="length"):
        mmvref.split(np.arange(3), np.array([0, 1], np.uint8))


# ----------------------------------------------------------------------------- batched scan

@given(data=st.data(), exclusive=st.booleans())
def test_batched_scan_integers(data, exclusive):
    dt = np.dtype(data.draw(st.sampled_from(INT_DTYPES)))
    rows, n = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 50))
    info = np.iinfo(dt)
    lim = data.draw(st.sampled_from([100, int(info.max)]))
    x = np.array(data.draw(st.lists(st.integers(max(info.min, -lim), lim), min_size=rows * n,
                                    max_size=rows * n)), dtype=dt).reshape(rows, n)
    exact = [[sum(int(v) for v in row[:i + (0 if exclusive else 1)]) for i in range(n)] for row in x]
    rdt = np.dtype(RESULT[str(dt)])
    fits = all(np.iinfo(rdt).min <= v <= np.iinfo(rdt).max for row in exact for v in row)
    if fits:
        z = mmvref.batched_scan(x, exclusive=exclusive)
        assert z.dtype == rdt and z.shape == x.shape and z.tolist() == exact
    else:
        with pytest.raises(OverflowError):
            mmvref.batched_scan(x, exclusive=exclusive)
    bits = 8 * rdt.itemsize
    z = mmvref.batched_scan(x, exclusive=exclusive, overflow="wrap")
    assert z.tolist() == [[(v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1)) for v in row] for row in exact]


@given(data=st.data())
def test_batched_scan_floats_sequential(data):
    """Floats accumulate in index order in the result dtype: equal to a plain loop."""
    dt = data.draw(st.sampled_from(FLOAT_DTYPES))
    rows, n = data.draw(st.integers(0, 4)), data.draw(st.integers(0, 40))
    x = (np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))).standard_normal((rows, n)) * 50).astype(dt)
    rdt = np.dtype(RESULT[dt])
    ref = np.zeros((rows, n), rdt)
    for r in range(rows):
        a = rdt.type(0)
        for i in range(n):
            a = rdt.type(a + rdt.type(x[r, i]))
            ref[r, i] = a
    z = mmvref.batched_scan(x)
    assert z.dtype == rdt and np.array_equal(z, ref)


@pytest.mark.parametrize("dt", ["int32", "int64"])
def test_batched_scan_exclusive_ignores_the_unwritten_row_total(dt):
    """An exclusive scan writes sum(x[:i]) for i < n, never the row total: a total that
    leaves the result dtype must not raise (the dev profile once found this for int64)."""
    big = np.iinfo(np.int64).max if dt == "int64" else np.iinfo(np.int32).max
    x = np.array([[-2, -big]], dtype=dt)
    assert mmvref.batched_scan(x, exclusive=True).tolist() == [[0, -2]]
    if dt == "int64":
        with pytest.raises(OverflowError):
            mmvref.batched_scan(x)


def test_batched_scan_few_long_rows_and_torch():
    torch = pytest.importorskip("torch")
    x = np.ones((1, 1 << 17), np.int8)
    assert mmvref.batched_scan(x)[0, -1] == 1 << 17
    t = mmvref.batched_scan(torch.ones(3, 4, dtype=torch.int16), exclusive=True)
    assert isinstance(t, torch.Tensor) and t.dtype == torch.int32 and t[:, -1].tolist() == [3, 3, 3]
    with pytest.raises(ValueError, match="2-D"):
        mmvref.batched_scan(np.ones(3))


# ----------------------------------------------------------------------------- sampling

def ref_weighted_sample(w, u):
    """Plain numpy reference (DEVELOPERS.md): float64 np.cumsum, t = u * c[-1], first c > t."""
    if w.dtype.kind == "f":
        c = np.cumsum(w.astype(np.float64))
        t = u * c[-1]
        i = int(np.argmax(c > t)) if (c > t).any() else -1
    else:
        c = [0]
        for v in w.tolist():
            c.append(c[-1] + v)
        c = c[1:]
        ft = int(np.floor(u * float(c[-1])))
        i = next((j for j, cj in enumerate(c) if cj > ft), -1)
    return i if i >= 0 else int(np.flatnonzero(w > 0)[-1])


@given(data=st.data())
def test_weighted_sample_equals_numpy_reference(data):
    dt = data.draw(st.sampled_from(INT_DTYPES + FLOAT_DTYPES))
    n = data.draw(st.integers(1, 80))
    if dt in FLOAT_DTYPES:
        el = st.one_of(st.just(0.0), st.floats(0, 1e4, width=16 if dt == "float16" else 32))
        w = np.array(data.draw(st.lists(el, min_size=n, max_size=n))).astype(dt)
    else:
        hi = int(min(np.iinfo(dt).max, 2**40))
        w = np.array(data.draw(st.lists(st.integers(0, hi), min_size=n, max_size=n)), dtype=dt)
    assume(w.astype(np.float64).sum() > 0 and np.isfinite(w.astype(np.float64)).all())
    us = data.draw(st.lists(st.one_of(st.sampled_from([0.0, 0.5, 1 - 2**-53]), st.floats(0, 1, exclude_max=True)),
                            min_size=1, max_size=8))
    for u in us:
        got = mmvref.weighted_sample(w, u)
        assert isinstance(got, np.int64) and got == ref_weighted_sample(w, u)
    got = mmvref.weighted_sample(w, np.array(us))
    assert got.dtype == np.int64 and got.tolist() == [ref_weighted_sample(w, u) for u in us]


def test_weighted_sample_large_support_and_errors():
    n = (1 << 24) + 7  # beyond torch.multinomial's 2**24
    w = np.zeros(n, np.float32)
    w[-2] = 1.0
    assert mmvref.weighted_sample(w, 0.3) == n - 2
    with pytest.raises(ValueError, match="non-negative"):
        mmvref.weighted_sample(np.array([1, -1]), 0.5)
    with pytest.raises(ValueError, match="positive total"):
        mmvref.weighted_sample(np.zeros(3), 0.5)
    with pytest.raises(ValueError, match="u must"):
        mmvref.weighted_sample(np.ones(3), -0.1)
    with pytest.raises(OverflowError):
        mmvref.weighted_sample(np.full(4, 2**62, np.int64), 0.5)


def ref_top_p(row, p, u):
    """Plain numpy reference of DEVELOPERS.md's top_p_sample."""
    order = np.argsort(-row.astype(np.float64), kind="stable")  # finite, non-negative: -0.0 == 0.0 ties stable
    q = row[order].astype(np.float64)
    e = np.concatenate([[0.0], np.cumsum(q)[:-1]])
    kept = np.where(e <= p, q, 0.0)
    return int(order[ref_weighted_sample(kept, u)])


@given(data=st.data())
def test_top_p_sample_equals_numpy_reference(data):
    dt = data.draw(st.sampled_from(FLOAT_DTYPES))
    rows, n = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 40))
    el = st.one_of(st.just(0.0), st.sampled_from([0.5, 0.25, 0.125]), st.floats(0, 1, width=16))
    probs = np.array(data.draw(st.lists(el, min_size=rows * n, max_size=rows * n))).astype(dt).reshape(rows, n)
    assume(np.all(probs.astype(np.float64).sum(axis=1) > 0))
    p = data.draw(st.one_of(st.sampled_from([0.0, 0.5, 0.9, 1.0]), st.floats(0, 1)))
    u = np.array(data.draw(st.lists(st.floats(0, 1, exclude_max=True), min_size=rows, max_size=rows)))
    got = mmvref.top_p_sample(probs, p, u)
    assert got.dtype == np.int64 and got.tolist() == [ref_top_p(probs[r], p, u[r]) for r in range(rows)]
    assert mmvref.top_p_sample(probs[0], p, u[0]) == got[0]


def test_top_p_sample_errors():
    with pytest.raises(TypeError, match="float"):
        mmvref.top_p_sample(np.array([1, 2]), 0.5, 0.5)
    with pytest.raises(ValueError, match="p must"):
        mmvref.top_p_sample(np.array([0.5, 0.5]), -0.1, 0.5)
    with pytest.raises(ValueError, match="positive total"):
        mmvref.top_p_sample(np.zeros((2, 3)), 0.5, np.array([0.1, 0.2]))
    with pytest.raises(ValueError, match="finite"):
        mmvref.top_p_sample(np.array([np.nan, 1.0]), 0.5, 0.5)
