"""The composites of mmvref.torch_scatter: scatter_softmax, scatter_log_softmax, scatter_logsumexp and
scatter_std (torch_scatter 2.1.2's signatures and semantics).

Three kinds of checks:

- the cases of torch_scatter's own composite tests (same inputs, same expected values, which come from
  torch's dense softmax / log_softmax / logsumexp / std of each group), restated here;
- a Hypothesis property against a plain-Python-loop oracle: every output cell is computed from the
  list of its group's float64 values with ``math`` only (never with the code under test);
- gradcheck in float64 of each composite, and edge cases (empty segments, empty src, out=, NaN,
  integer src, bad arguments).
"""
from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

# the torch layer is the same for every compile target (see test_torch_scatter)
pytestmark = pytest.mark.native_only

import mmvref.torch_scatter as ts  # noqa: E402

NAN, INF = float("nan"), float("inf")


# ----------------------------------------------------------------------------- oracle

def _groups(src, idx, d, n):
    """{output cell: [float64 values of src in that cell, in position order]} for src reduced along d
    by ``idx`` (src's full shape) into n cells."""
    shape = list(src.shape)
    out_shape = shape[:d] + [n] + shape[d + 1:]
    groups = {c: [] for c in itertools.product(*[range(s) for s in out_shape])}
    sv, iv = src.double().tolist(), idx.long().tolist()
    for p in itertools.product(*[range(s) for s in shape]):
        v, i = sv, iv
        for k in p:
            v, i = v[k], i[k]
        c = list(p)
        c[d] = i
        groups[tuple(c)].append(v)
    return groups, out_shape


def _max_skipping_nan(vals):
    kept = [v for v in vals if not math.isnan(v)]
    return max(kept) if kept else -INF


def _exp_or_zero(x):
    """exp(x), with a NaN difference counting as exp(-inf) = 0 (torch_scatter's logsumexp rule)."""
    return 0.0 if math.isnan(x) else math.exp(x)


def _nan_to_num_neginf0(x, dtype):
    if math.isnan(x) or x == -INF:
        return 0.0
    if x == INF:
        return torch.finfo(dtype).max
    return x


def oracle_logsumexp(src, idx, d, n, eps=1e-12):
    groups, shape = _groups(src, idx, d, n)
    res = torch.zeros(shape, dtype=torch.float64)
    for c, vals in groups.items():
        m = _max_skipping_nan(vals)
        s = sum(_exp_or_zero(v - m) for v in vals)
        r = (math.log(s + eps) if s + eps > 0 else -INF) + m
        res[c] = _nan_to_num_neginf0(r, src.dtype)
    return res


def oracle_std(src, idx, d, n, unbiased=True):
    groups, shape = _groups(src, idx, d, n)
    res = torch.zeros(shape, dtype=torch.float64)
    for c, vals in groups.items():
        cnt = len(vals)
        mean = sum(vals) / max(cnt, 1)
        ss = sum((v - mean) ** 2 for v in vals)
        den = max(cnt - 1, 1) if unbiased else max(cnt, 1)
        res[c] = math.sqrt(ss / (den + 1e-6))
    return res


def oracle_softmax(src, idx, d, log=False, eps=1e-12):
    """Per element: its group's softmax (or log_softmax) at that element."""
    shape = list(src.shape)
    n = int(idx.max()) + 1 if idx.numel() else 0
    groups, _ = _groups(src, idx, d, n)
    stats = {}
    for c, vals in groups.items():
        m = _max_skipping_nan(vals)
        stats[c] = (m, sum(math.exp(v - m) if not math.isnan(v - m) else NAN for v in vals))
    res = torch.zeros(shape, dtype=torch.float64)
    sv, iv = src.double().tolist(), idx.long().tolist()
    for p in itertools.product(*[range(s) for s in shape]):
        v, i = sv, iv
        for k in p:
            v, i = v[k], i[k]
        c = list(p)
        c[d] = i
        m, s = stats[tuple(c)]
        res[p] = (v - m) - math.log(s + eps) if log else math.exp(v - m) / s
    return res


def _full(index1, shape, d):
    view = [1] * len(shape)
    view[d] = -1
    return index1.view(view).expand(shape)


# ----------------------------------------------------------------------------- torch_scatter's own cases

SOFTMAX_SRC = [0.2, 0, 0.2, -2.1, 3.2, 7, -1, -INF]
SOFTMAX_INDEX = [0, 1, 0, 1, 1, 2, 4, 4]


def _dense_expected(fn):
    """Group g of torch_scatter's softmax test, by torch's dense function, back at its positions."""
    g0 = fn(torch.tensor([0.2, 0.2]), dim=-1)
    g1 = fn(torch.tensor([0.0, -2.1, 3.2]), dim=-1)
    g2 = fn(torch.tensor([7.0]), dim=-1)
    g4 = fn(torch.tensor([-1.0, -INF]), dim=-1)
    return torch.stack([g0[0], g1[0], g0[1], g1[1], g1[2], g2[0], g4[0], g4[1]])


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_upstream_softmax_case(log):
    src = torch.tensor(SOFTMAX_SRC, requires_grad=True)
    index = torch.tensor(SOFTMAX_INDEX)
    out = (ts.scatter_log_softmax if log else ts.scatter_softmax)(src, index)
    assert out.dtype == torch.float32 and out.shape == src.shape
    torch.testing.assert_close(out, _dense_expected(torch.log_softmax if log else torch.softmax))
    out.backward(torch.randn_like(out))
    assert src.grad is not None and src.grad.shape == src.shape


def test_upstream_logsumexp_case():
    src = torch.tensor([0.5, 0.5, 0.0, -2.1, 3.2, 7.0, -1.0, -100.0], requires_grad=True)
    index = torch.tensor([0, 0, 1, 1, 1, 2, 4, 4])
    out = ts.scatter_logsumexp(src, index)
    sizes = [2, 3, 1, 0, 2]  # group 3 is empty
    assert out.shape == (5,)
    for group, value in zip(src.detach().split(sizes), out.detach().unbind()):
        want = torch.logsumexp(group, dim=0).item() if group.numel() else 0.0
        assert value.item() == want  # torch_scatter checks these for equality, not closeness
    out.backward(torch.randn_like(out))
    assert src.grad.shape == src.shape


def test_upstream_logsumexp_out_case():
    """torch_scatter's test after 2.1.2: out's value takes part, and an empty segment keeps it."""
    out = torch.tensor([-10.0, -10.0])
    res = ts.scatter_logsumexp(src=torch.tensor([-1.0, -50.0]), index=torch.tensor([0, 0]), out=out)
    assert res is out
    want0 = math.log(math.exp(-10.0) + math.exp(-1.0) + math.exp(-50.0))
    torch.testing.assert_close(out, torch.tensor([want0, -10.0]), atol=1e-4, rtol=0)


def test_upstream_std_case():
    src = torch.tensor([[2.0, 0, 1, 4, 3], [0, 2, 1, 3, 4]], requires_grad=True)
    index = torch.tensor([[0, 0, 0, 0, 0], [1, 1, 1, 1, 1]])
    out = ts.scatter_std(src, index, dim=-1, unbiased=True)
    s = src.detach()[0].std(unbiased=True).item()  # both rows hold 0..4: the same std
    torch.testing.assert_close(out.detach(), torch.tensor([[s, 0.0], [0.0, s]]))
    out.backward(torch.randn_like(out))
    assert src.grad.shape == src.shape


# ----------------------------------------------------------------------------- property vs the oracle

@st.composite
def _cases(draw, allow_inf=False):
    rank = draw(st.integers(1, 3))
    shape = [draw(st.integers(1, 3)) for _ in range(rank)]
    d = draw(st.integers(0, rank - 1))
    shape[d] = draw(st.integers(0, 7))
    n_ids = draw(st.integers(1, 4))
    numel = math.prod(shape)
    elems = st.floats(-30, 30, allow_nan=False, width=64)
    if allow_inf:
        elems = st.one_of(elems, st.just(-INF))
    values = draw(st.lists(elems, min_size=numel, max_size=numel))
    src = torch.tensor(values, dtype=torch.float64).reshape(shape)
    varying = rank > 1 and draw(st.booleans())
    ids = st.integers(0, n_ids - 1)
    if varying:  # a full-shape index that differs across the other dimensions
        index = torch.tensor(draw(st.lists(ids, min_size=numel, max_size=numel)), dtype=torch.int64).reshape(shape)
    else:
        index = torch.tensor(draw(st.lists(ids, min_size=shape[d], max_size=shape[d])), dtype=torch.int64)
    extra = draw(st.integers(0, 2))
    return src, index, d, varying, extra


def _idx_full(src, index, d, varying):
    return index if varying else _full(index, src.shape, d)


@given(_cases(allow_inf=True))
def test_logsumexp_matches_oracle(case):
    src, index, d, varying, extra = case
    full = _idx_full(src, index, d, varying)
    n = (int(full.max()) + 1 if full.numel() else 0) + extra
    res = ts.scatter_logsumexp(src, index, dim=d - src.dim(), dim_size=n)
    torch.testing.assert_close(res, oracle_logsumexp(src, full, d, n), rtol=1e-12, atol=1e-12)


@given(_cases(allow_inf=True), st.booleans())
def test_softmax_matches_oracle(case, log):
    src, index, d, varying, _ = case
    full = _idx_full(src, index, d, varying)
    res = (ts.scatter_log_softmax if log else ts.scatter_softmax)(src, index, dim=d)
    torch.testing.assert_close(res, oracle_softmax(src, full, d, log=log), rtol=1e-12, atol=1e-12,
                               equal_nan=True)


@given(_cases(), st.booleans())
def test_std_matches_oracle(case, unbiased):
    src, index, d, varying, extra = case
    full = _idx_full(src, index, d, varying)
    n = (int(full.max()) + 1 if full.numel() else 0) + extra
    res = ts.scatter_std(src, index, dim=d, dim_size=n, unbiased=unbiased)
    torch.testing.assert_close(res, oracle_std(src, full, d, n, unbiased), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_lower_precision_dtypes(dtype):
    """The result keeps src's dtype and is the float64 oracle's value within the dtype's rounding."""
    g = torch.Generator().manual_seed(2)
    src = (torch.randn(3, 9, 2, generator=g) * 3).to(dtype)
    index = torch.tensor([2, 0, 2, 1, 0, 0, 2, 1, 4])
    full = _full(index, src.shape, 1)
    tol = {torch.float16: 1e-2, torch.bfloat16: 5e-2, torch.float32: 1e-5}[dtype]
    cases = [(ts.scatter_softmax(src, index, 1), oracle_softmax(src, full, 1)),
             (ts.scatter_log_softmax(src, index, 1), oracle_softmax(src, full, 1, log=True)),
             (ts.scatter_logsumexp(src, index, 1), oracle_logsumexp(src, full, 1, 5)),
             (ts.scatter_std(src, index, 1), oracle_std(src, full, 1, 5))]
    for res, want in cases:
        assert res.dtype == dtype
        torch.testing.assert_close(res.double(), want, rtol=tol, atol=tol)


# ----------------------------------------------------------------------------- gradients

def _distinct(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    v = torch.randperm(math.prod(shape), generator=g).double() / 5 - 1.3  # distinct: no ties, no zero variance
    return v.reshape(shape).requires_grad_()


INDEX = torch.tensor([3, 0, 3, 1, 0, 3, 1, 0, 1])  # groups of 3; cell 2 empty
VARYING = torch.tensor([[[0, 1], [1, 0], [0, 1], [1, 0], [0, 0], [1, 1], [0, 1], [1, 0], [0, 1]],
                        [[1, 1], [0, 0], [1, 0], [0, 1], [1, 0], [0, 1], [1, 1], [0, 0], [1, 0]]])


@pytest.mark.parametrize("index", [INDEX, VARYING], ids=["1-D", "varying"])
@pytest.mark.parametrize("fn", [
    lambda t, i: ts.scatter_softmax(t, i, 1),
    lambda t, i: ts.scatter_log_softmax(t, i, 1),
    lambda t, i: ts.scatter_logsumexp(t, i, 1, dim_size=5),
    lambda t, i: ts.scatter_std(t, i, 1, dim_size=5),
    lambda t, i: ts.scatter_std(t, i, -2, unbiased=False),
], ids=["softmax", "log_softmax", "logsumexp", "std", "std_biased"])
def test_gradcheck(fn, index):
    x = _distinct((2, 9, 2))
    assert torch.autograd.gradcheck(lambda t: fn(t, index), (x,))


def test_std_gradient_is_zero_where_values_are_equal():
    """A one-element or constant segment: std 0 and gradient 0 (torch.std's subgradient), not NaN."""
    x = torch.tensor([2.0, 5.0, 5.0, 1.0, 4.0], dtype=torch.float64, requires_grad=True)
    y = ts.scatter_std(x, torch.tensor([0, 1, 1, 2, 2]))
    assert y[:2].tolist() == [0.0, 0.0]
    (g,) = torch.autograd.grad(y.sum(), x)
    d = 1.5 / math.sqrt(4.5 / (1 + 1e-6)) / (1 + 1e-6)  # d sqrt(ss / c) / dx = (x - mean) / (c * std)
    torch.testing.assert_close(g, torch.tensor([0.0, 0.0, 0.0, -d, d], dtype=torch.float64))
    assert torch.autograd.gradcheck(lambda t: ts.scatter_std(t, torch.tensor([0, 1, 1, 2, 2])), (x,))


def test_gradient_of_softmax_by_hand():
    """d softmax_i / d x_j = s_i (delta_ij - s_j) within a group, 0 across groups."""
    x = torch.tensor([0.5, -1.0, 2.0, 0.25], dtype=torch.float64, requires_grad=True)
    index = torch.tensor([0, 1, 0, 1])
    y = ts.scatter_softmax(x, index)
    (g,) = torch.autograd.grad(y[0], x)
    e0, e2 = math.exp(0.5), math.exp(2.0)
    s0, s2 = e0 / (e0 + e2), e2 / (e0 + e2)
    torch.testing.assert_close(g, torch.tensor([s0 * (1 - s0), 0.0, -s0 * s2, 0.0], dtype=torch.float64))


# ----------------------------------------------------------------------------- edges and arguments

@pytest.mark.parametrize("fn", [ts.scatter_softmax, ts.scatter_log_softmax, ts.scatter_logsumexp])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_float_only(fn, dtype):
    with pytest.raises(ValueError, match="floating point"):
        fn(torch.tensor([1, 2, 3], dtype=dtype), torch.tensor([0, 0, 1]))


def test_std_of_integers_is_float():
    src = torch.tensor([1, 3, 10, 20, 30], dtype=torch.int64)
    res = ts.scatter_std(src, torch.tensor([0, 0, 1, 1, 1]))
    assert res.dtype == torch.get_default_dtype()
    torch.testing.assert_close(res.double(), torch.tensor([math.sqrt(2 / (1 + 1e-6)), math.sqrt(200 / (2 + 1e-6))],
                                                          dtype=torch.float64), rtol=1e-6, atol=0)


def test_empty_segments():
    src = torch.tensor([1.0, 2.0, 4.0])
    index = torch.tensor([0, 0, 3])
    assert ts.scatter_logsumexp(src, index, dim_size=5)[[1, 2, 4]].tolist() == [0.0, 0.0, 0.0]
    assert ts.scatter_std(src, index, dim_size=5)[[1, 2, 3, 4]].tolist() == [0.0, 0.0, 0.0, 0.0]
    sm = ts.scatter_softmax(src, index, dim_size=5)
    torch.testing.assert_close(sm, torch.tensor([1 / (1 + math.e), math.e / (1 + math.e), 1.0]))


@pytest.mark.parametrize("fn", [
    lambda t, i: ts.scatter_softmax(t, i, 0),
    lambda t, i: ts.scatter_log_softmax(t, i, 0),
    lambda t, i: ts.scatter_logsumexp(t, i, 0, dim_size=2),
    lambda t, i: ts.scatter_std(t, i, 0, dim_size=2),
], ids=["softmax", "log_softmax", "logsumexp", "std"])
def test_empty_src_keeps_the_graph(fn):
    x = torch.zeros(0, 3, requires_grad=True)
    y = fn(x, torch.zeros(0, dtype=torch.int64))
    assert y.requires_grad and y.grad_fn is not None
    assert not y.detach().any()
    y.sum().backward()
    assert x.grad.shape == (0, 3)


def test_nan_is_skipped_by_the_maximum():
    """torch_scatter's max never picks NaN, so logsumexp leaves NaN out of the sum; softmax of a group
    holding NaN is NaN throughout (its sum is NaN), in torch_scatter as here."""
    src = torch.tensor([1.0, NAN, 2.0, 0.5, 0.5])
    index = torch.tensor([0, 0, 0, 1, 1])
    lse = ts.scatter_logsumexp(src, index)
    torch.testing.assert_close(lse, torch.tensor([math.log(math.e + math.e ** 2), 0.5 + math.log(2)]))
    sm = ts.scatter_softmax(src, index)
    assert torch.isnan(sm[:3]).all() and sm[3:].tolist() == [0.5, 0.5]


def test_logsumexp_inf_and_out():
    # a segment of -inf only gives 0; one holding +inf the largest float (torch_scatter's nan_to_num)
    src = torch.tensor([-INF, -INF, 1.0, INF])
    res = ts.scatter_logsumexp(src, torch.tensor([0, 0, 1, 1]))
    assert res.tolist() == [0.0, torch.finfo(torch.float32).max]
    # with out=, its value takes part: log(exp(out) + sum exp(src)); out is written and returned
    out = torch.tensor([0.0, 3.0, 7.0], dtype=torch.float64)
    src = torch.tensor([1.0, 2.0, 0.5], dtype=torch.float64)
    res = ts.scatter_logsumexp(src, torch.tensor([0, 0, 1]), out=out)
    want = [math.log(1 + math.e + math.e ** 2), math.log(math.e ** 3 + math.e ** 0.5), 7.0]
    assert res is out
    torch.testing.assert_close(out, torch.tensor(want, dtype=torch.float64))


def test_std_out_accumulates_like_torch_scatter():
    """torch_scatter's scatter_std sums the squared deviations INTO out and returns a new tensor."""
    src = torch.tensor([1.0, 3.0, 5.0])
    out = torch.tensor([1.0, 2.0])
    res = ts.scatter_std(src, torch.tensor([0, 0, 0]), out=out)
    assert res is not out
    assert out.tolist() == [1.0 + 8.0, 2.0]  # deviations from the mean 3: 4 + 0 + 4
    torch.testing.assert_close(res, torch.tensor([math.sqrt(9 / (2 + 1e-6)), math.sqrt(2 / (1 + 1e-6))]))


def test_bad_arguments_are_named():
    src, index = torch.ones(4), torch.tensor([0, 1, 0, 1])
    for fn in (ts.scatter_softmax, ts.scatter_log_softmax, ts.scatter_logsumexp, ts.scatter_std):
        with pytest.raises(TypeError, match="src"):
            fn([1.0, 2.0], index)
        with pytest.raises(TypeError, match="index"):
            fn(src, [0, 1, 0, 1])
        with pytest.raises(TypeError, match="index"):
            fn(src, index.double())
        with pytest.raises(IndexError, match="dim"):
            fn(src, index, 1)
        with pytest.raises(ValueError, match="index"):
            fn(src, torch.tensor([0, 1]))
        with pytest.raises(ValueError, match="index"):
            fn(src, torch.tensor([0, 1, 5, 1]), dim_size=3)
    with pytest.raises(TypeError, match="out"):
        ts.scatter_logsumexp(src, index, out=torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="out"):
        ts.scatter_std(src, index, out=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="out"):
        ts.scatter_logsumexp(src, index, out=torch.zeros(2, 2))
    with pytest.raises(TypeError, match="out"):
        ts.scatter_std(src, index, out=torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"index.*outside \[0, 1\)"):
        ts.scatter_std(src, index, out=torch.zeros(1))  # index holds 1: out.size(dim) = 1 is too small
    with pytest.raises(TypeError, match="out"):
        ts.scatter_std(src, index, out=[0.0, 0.0])


def test_exported():
    for name in ("scatter_softmax", "scatter_log_softmax", "scatter_logsumexp", "scatter_std"):
        assert name in ts.__all__ and name in ts.__doc__
    import inspect
    sig = {n: list(inspect.signature(getattr(ts, n)).parameters.items()) for n in ts.__all__}
    assert [(k, p.default) for k, p in sig["scatter_softmax"]] == [
        ("src", inspect.Parameter.empty), ("index", inspect.Parameter.empty), ("dim", -1), ("dim_size", None)]
    assert [(k, p.default) for k, p in sig["scatter_log_softmax"]] == [
        ("src", inspect.Parameter.empty), ("index", inspect.Parameter.empty), ("dim", -1), ("eps", 1e-12),
        ("dim_size", None)]
    assert [(k, p.default) for k, p in sig["scatter_logsumexp"]] == [
        ("src", inspect.Parameter.empty), ("index", inspect.Parameter.empty), ("dim", -1), ("out", None),
        ("dim_size", None), ("eps", 1e-12)]
    assert [(k, p.default) for k, p in sig["scatter_std"]] == [
        ("src", inspect.Parameter.empty), ("index", inspect.Parameter.empty), ("dim", -1), ("out", None),
        ("dim_size", None), ("unbiased", True)]
