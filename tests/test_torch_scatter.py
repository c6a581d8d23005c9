"""mmvref.torch_scatter (torch_scatter's API) and the torch custom ops of mmvref._fast.segment._torch.

Expected values come from torch_scatter's documented behaviour, computed by an independent
plain-Python-loop oracle over every element (never by the code under test): the output cell of
src[..., e, ...] is the same position with index[..., e, ...] in place of e (index broadcast as
torch_scatter documents); empty segments give 0 (scatter_mul: 1) and arg = src.size(dim); integer
mean floors for scatter_mean and truncates toward zero for segment_*_csr/_coo; min/max return the
first position of the extreme value.

Inputs are small integers or halves, so every sum and product is exact in every dtype (float16 and
bfloat16 included) and only mean rounds: float results are compared within a few units of the
result dtype's rounding.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

# the torch layer (custom ops, autograd, the drop-in) is the same for every compile target; the
# kernels under it are checked for each target by test_segment_reduce
pytestmark = pytest.mark.native_only

import mmvref  # noqa: E402
import mmvref.torch_scatter as ts  # noqa: E402
from mmvref._fast.segment import _torch as T  # noqa: E402

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32, torch.int64]
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
TOL = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1e-2, 1e-2), torch.float32: (1e-5, 1e-5),
       torch.float64: (1e-12, 1e-12)}


# ----------------------------------------------------------------------------- oracle

def _py(t):
    """Elements of ``t`` as Python numbers (float64 values for floats, ints for integers)."""
    return t.double().tolist() if t.is_floating_point() else t.long().tolist()


def _at(nested, p):
    for i in p:
        nested = nested[i]
    return nested


def _reduce_group(items, reduce, int_mean, E):
    """items: [(position along dim, value)] in position order -> (value, arg)."""
    if not items:
        return (1 if reduce == "mul" else 0), E
    vals = [v for _, v in items]
    if reduce in ("sum", "add"):
        return sum(vals), None
    if reduce == "mul":
        return math.prod(vals), None
    if reduce == "mean":
        s, n = sum(vals), len(vals)
        if isinstance(s, float):
            return s / n, None
        if int_mean == "floor":
            return s // n, None
        return (abs(s) // n) * (1 if s >= 0 else -1), None
    key = (lambda pv: (pv[1], pv[0])) if reduce == "min" else (lambda pv: (-pv[1], pv[0]))
    pos, v = min(items, key=key)
    return v, pos


def oracle_index(src, idx, d, n, reduce, int_mean="floor"):
    """Reduce src along d into n cells by ``idx`` (src's full shape). Returns (values, arg) as float64 /
    int64 tensors of the output shape."""
    shape = list(src.shape)
    out_shape = shape[:d] + [n] + shape[d + 1:]
    groups = {c: [] for c in itertools.product(*[range(s) for s in out_shape])}
    sv, iv = _py(src), idx.long().tolist()
    for p in itertools.product(*[range(s) for s in shape]):
        c = list(p)
        c[d] = _at(iv, p)
        groups[tuple(c)].append((p[d], _at(sv, p)))
    flt = src.is_floating_point()
    vals = torch.zeros(out_shape, dtype=torch.float64 if flt else torch.int64)
    arg = torch.full(out_shape, shape[d], dtype=torch.int64)
    for c, items in groups.items():
        v, a = _reduce_group(items, reduce, int_mean, shape[d])
        vals[c] = v
        if a is not None:
            arg[c] = a
    return vals, arg


def oracle_csr(src, indptr_rows, d, reduce, int_mean="trunc"):
    """segment_csr by per-batch offsets: ``indptr_rows(b)`` gives the 1-D offsets for batch multi-index
    b (the dimensions before d). Positions outside indptr[0]:indptr[-1] are ignored."""
    shape = list(src.shape)
    n = len(indptr_rows(tuple(0 for _ in range(d)))) - 1
    idx = torch.full(shape, -1, dtype=torch.int64)
    for p in itertools.product(*[range(s) for s in shape]):
        ptr = indptr_rows(p[:d])
        for k in range(n):
            if ptr[k] <= p[d] < ptr[k + 1]:
                idx[p] = k
    keep = idx >= 0
    # positions outside every segment go to an extra cell n, dropped afterwards
    vals, arg = oracle_index(src, torch.where(keep, idx, n), d, n + 1, reduce, int_mean)
    return vals.narrow(d, 0, n), arg.narrow(d, 0, n)


def check(res, expected, dtype):
    assert res.dtype == dtype, (res.dtype, dtype)
    assert tuple(res.shape) == tuple(expected.shape)
    if dtype in FLOATS:
        rtol, atol = TOL[dtype]
        torch.testing.assert_close(res.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(res.long(), expected.long()), (res, expected)


# ----------------------------------------------------------------------------- inputs

def make_src(shape, dtype, reduce, seed=0):
    g = torch.Generator().manual_seed(seed)
    numel = math.prod(shape)
    if reduce in ("min", "max"):  # distinct values: the arg is unambiguous
        v = (torch.randperm(numel, generator=g) - numel // 2).double()
    elif reduce == "mul":
        v = torch.randint(-2, 3, (numel,), generator=g).double()
        v[v == 0] = 1.0
    else:
        v = torch.randint(-8, 9, (numel,), generator=g).double()
    if dtype in FLOATS and reduce not in ("min", "max", "mul"):
        v = v / 2
    return v.reshape(shape).to(dtype)


RANKS = {  # rank -> (src shape, dim)
    1: ((11,), 0),
    2: ((11, 3), 0),
    3: ((2, 11, 3), 1),
}
INDEX = torch.tensor([4, 0, 4, 1, 0, 6, 1, 4, 0, 6, 1])  # cells 2, 3, 5 (and 7.. with dim_size) empty
INDPTR = torch.tensor([0, 2, 2, 5, 5, 9, 11])              # segments 1 and 3 empty
SORTED = torch.tensor([0, 0, 2, 2, 2, 3, 5, 5, 5, 5, 6])   # cells 1 and 4 empty


def full_index(index1, shape, d):
    view = [1] * len(shape)
    view[d] = -1
    return index1.view(view).expand(shape)


# ----------------------------------------------------------------------------- forward: scatter

@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduce", ["sum", "add", "mul", "mean", "min", "max"])
def test_scatter(reduce, dtype, rank):
    shape, d = RANKS[rank]
    src = make_src(shape, dtype, reduce)
    dim_size = 9
    ev, ea = oracle_index(src, full_index(INDEX, shape, d), d, dim_size, reduce, "floor")
    res = ts.scatter(src, INDEX, dim=d, dim_size=dim_size, reduce=reduce)
    check(res, ev, dtype)
    # negative dim and the default dim_size (index.max() + 1)
    res = ts.scatter(src, INDEX, dim=d - len(shape), reduce=reduce)
    check(res, ev.narrow(d, 0, 7), dtype)
    fn = {"sum": ts.scatter_sum, "add": ts.scatter_add, "mul": ts.scatter_mul, "mean": ts.scatter_mean,
          "min": ts.scatter_min, "max": ts.scatter_max}[reduce]
    res = fn(src, INDEX, d, None, dim_size)
    if reduce in ("min", "max"):
        check(res[0], ev, dtype)
        assert res[1].dtype == torch.int64 and torch.equal(res[1], ea)
    else:
        check(res, ev, dtype)


@pytest.mark.parametrize("reduce", ["min", "max"])
def test_scatter_values_only_equal_scatter_minmax_values(reduce):
    """scatter(reduce="min"/"max") skips the positions where no autograd needs them: the same values
    as scatter_min/max, bit for bit, on an input large enough for per-thread copies (NaNs, ties,
    empty ids), against numpy's ufunc.at; and with a gradient, the positions' routing."""
    E, n, F = 20_000, 500, 3
    g = torch.Generator().manual_seed(3)
    src = torch.randint(-20, 20, (E, F), generator=g).to(torch.float32)
    index = torch.randint(0, n - 2, (E,), generator=g)   # ids n-2, n-1 empty
    src[E - 5, 1] = src[17, 1] = float("nan")
    want = np.full((n, F), np.inf if reduce == "min" else -np.inf)
    (np.minimum if reduce == "min" else np.maximum).at(want, index.numpy(), src.numpy().astype(np.float64))
    want[n - 2:] = 0
    got = ts.scatter(src, index, 0, None, n, reduce)
    np.testing.assert_array_equal(got.numpy(), want.astype(np.float32))
    pair = (ts.scatter_min if reduce == "min" else ts.scatter_max)(src, index, 0, None, n)
    assert torch.equal(got.nan_to_num(7.5), pair[0].nan_to_num(7.5))
    coo_index, order = index.sort(stable=True)
    coo = ts.segment_coo(src[order].T.contiguous(), coo_index.expand(F, E).contiguous(), dim_size=n, reduce=reduce)
    assert torch.equal(coo.T.nan_to_num(7.5), got.nan_to_num(7.5))
    x = src.clone().requires_grad_()
    ts.scatter(x, index, 0, None, n, reduce).sum().backward()
    assert x.grad.sum().item() == (n - 2) * F  # one position per non-empty output cell gets its gradient


def test_scatter_default_dim_is_last():
    src = make_src((3, 11), torch.float32, "sum")
    ev, _ = oracle_index(src, full_index(INDEX, (3, 11), 1), 1, 7, "sum")
    check(ts.scatter(src, INDEX), ev, torch.float32)
    check(ts.scatter_sum(src, INDEX), ev, torch.float32)


def test_scatter_empty_segments_and_empty_src():
    src = torch.tensor([5.0, -3.0])
    v, a = ts.scatter_max(src, torch.tensor([2, 2]), dim_size=4)
    assert v.tolist() == [0.0, 0.0, 5.0, 0.0] and a.tolist() == [2, 2, 0, 2]
    assert ts.scatter_mul(src, torch.tensor([0, 0]), dim_size=2).tolist() == [-15.0, 1.0]
    e = torch.zeros(0, 3)
    assert ts.scatter_sum(e, torch.zeros(0, dtype=torch.int64), dim=0).shape == (0, 3)
    v, a = ts.scatter_min(e, torch.zeros(0, dtype=torch.int64), dim=0, dim_size=2)
    assert v.shape == (2, 3) and torch.equal(v, torch.zeros(2, 3)) and torch.equal(a, torch.zeros(2, 3).long())


def test_scatter_mean_integer_floors():
    src = torch.tensor([-3, -4, 5, 2], dtype=torch.int32)
    res = ts.scatter_mean(src, torch.tensor([0, 0, 1, 1]))
    assert res.dtype == torch.int32 and res.tolist() == [-4, 3]  # -7 // 2 = -4, 7 // 2 = 3


# ----------------------------------------------------------------------------- forward: segment_csr / coo

@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduce", ["sum", "add", "mean", "min", "max"])
def test_segment_csr(reduce, dtype, rank):
    shape, d = RANKS[rank]
    src = make_src(shape, dtype, reduce)
    indptr = INDPTR.view([1] * d + [-1])  # torch_scatter: the reduced dim is indptr.dim() - 1
    ev, ea = oracle_csr(src, lambda b: INDPTR.tolist(), d, reduce, "trunc")
    check(ts.segment_csr(src, indptr, reduce=reduce), ev, dtype)
    fn = {"sum": ts.segment_sum_csr, "add": ts.segment_add_csr, "mean": ts.segment_mean_csr,
          "min": ts.segment_min_csr, "max": ts.segment_max_csr}[reduce]
    res = fn(src, indptr)
    if reduce in ("min", "max"):
        check(res[0], ev, dtype)
        assert torch.equal(res[1], ea)
    else:
        check(res, ev, dtype)


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduce", ["sum", "add", "mean", "min", "max"])
def test_segment_coo(reduce, dtype, rank):
    shape, d = RANKS[rank]
    src = make_src(shape, dtype, reduce)
    index = SORTED.view([1] * d + [-1])
    ev, ea = oracle_index(src, full_index(SORTED, shape, d), d, 9, reduce, "trunc")
    check(ts.segment_coo(src, index, dim_size=9, reduce=reduce), ev, dtype)
    check(ts.segment_coo(src, index, reduce=reduce), ev.narrow(d, 0, 7), dtype)
    fn = {"sum": ts.segment_sum_coo, "add": ts.segment_add_coo, "mean": ts.segment_mean_coo,
          "min": ts.segment_min_coo, "max": ts.segment_max_coo}[reduce]
    res = fn(src, index, None, 9)
    if reduce in ("min", "max"):
        check(res[0], ev, dtype)
        assert torch.equal(res[1], ea)
    else:
        check(res, ev, dtype)


def test_segment_mean_integer_truncates():
    src = torch.tensor([-3, -4, 5, 2], dtype=torch.int64)
    assert ts.segment_mean_csr(src, torch.tensor([0, 2, 4])).tolist() == [-3, 3]  # trunc(-3.5) = -3
    assert ts.segment_mean_coo(src, torch.tensor([0, 0, 1, 1])).tolist() == [-3, 3]


def test_segment_csr_partial_indptr():
    """torch_scatter ignores the elements before indptr[0] and after indptr[-1]."""
    src = make_src((9, 2), torch.float64, "max")
    indptr = torch.tensor([2, 4, 4, 7])
    for reduce in ("sum", "mean", "min", "max"):
        ev, ea = oracle_csr(src, lambda b: indptr.tolist(), 0, reduce)
        res = ts.segment_csr(src, indptr, reduce=reduce)
        check(res, ev, torch.float64)
        if reduce in ("min", "max"):
            assert torch.equal(getattr(ts, f"segment_{reduce}_csr")(src, indptr)[1], ea)


def test_segment_csr_batched_indptr():
    """A 2-D indptr whose rows differ: each batch row uses its own offsets."""
    src = make_src((3, 8, 2), torch.float32, "min")
    rows = [[0, 3, 3, 8], [1, 2, 6, 6], [0, 0, 4, 7]]
    indptr = torch.tensor(rows)
    for reduce in ("sum", "mean", "min", "max"):
        ev, ea = oracle_csr(src, lambda b: rows[b[0]], 1, reduce)
        check(ts.segment_csr(src, indptr, reduce=reduce), ev, torch.float32)
        if reduce in ("min", "max"):
            assert torch.equal(getattr(ts, f"segment_{reduce}_csr")(src, indptr)[1], ea)
    # a size-1 leading dimension broadcasts
    ev, _ = oracle_csr(src, lambda b: rows[0], 1, "sum")
    check(ts.segment_csr(src, indptr[:1]), ev, torch.float32)


def test_segment_coo_batched_index():
    src = make_src((2, 7, 3), torch.float64, "max")
    index = torch.tensor([[0, 0, 1, 3, 3, 3, 4], [1, 1, 1, 2, 4, 4, 4]])
    idx_full = index.unsqueeze(-1).expand(2, 7, 3)
    for reduce in ("sum", "mean", "min", "max"):
        ev, ea = oracle_index(src, idx_full, 1, 6, reduce, "trunc")
        res = getattr(ts, f"segment_{reduce}_coo")(src, index, None, 6)
        if reduce in ("min", "max"):
            check(res[0], ev, torch.float64)
            assert torch.equal(res[1], ea)
        else:
            check(res, ev, torch.float64)


# ----------------------------------------------------------------------------- broadcast index

@pytest.mark.parametrize("reduce", ["sum", "mul", "mean", "min", "max"])
def test_scatter_index_varying_across_dims(reduce):
    """An index that really differs across the other dimensions (torch_scatter's general case)."""
    g = torch.Generator().manual_seed(3)
    src = make_src((2, 6, 3), torch.float64, reduce)
    index = torch.randint(0, 4, (2, 6, 3), generator=g)
    ev, ea = oracle_index(src, index, 1, 5, reduce)
    if reduce in ("min", "max"):
        v, a = getattr(ts, f"scatter_{reduce}")(src, index, 1, None, 5)
        check(v, ev, torch.float64)
        assert torch.equal(a, ea)
    else:
        check(ts.scatter(src, index, dim=1, dim_size=5, reduce=reduce), ev, torch.float64)
    # a 2-D index [B, E] broadcast over the trailing dim (varies over the batch only)
    index2 = torch.randint(0, 4, (2, 6), generator=g)
    ev, _ = oracle_index(src, index2.unsqueeze(-1).expand(2, 6, 3), 1, 4, reduce)
    check(ts.scatter(src, index2, dim=1, dim_size=4, reduce=reduce), ev, torch.float64)


def test_scatter_index_broadcast_forms_give_the_1d_result():
    src = make_src((11, 4), torch.float32, "sum")
    ev, _ = oracle_index(src, full_index(INDEX, (11, 4), 0), 0, 7, "sum")
    for index in (INDEX, INDEX.view(-1, 1), INDEX.view(-1, 1).expand(11, 4),
                  INDEX.view(-1, 1).expand(11, 4).contiguous()):
        check(ts.scatter(src, index, dim=0), ev, torch.float32)


@given(st.integers(1, 3), st.integers(0, 9), st.integers(1, 3), st.integers(1, 5), st.integers(0, 2**31 - 1),
       st.sampled_from(["sum", "mean", "min", "max", "mul"]))
def test_scatter_generated(b, e, f, n, seed, reduce):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(-3, 4, (b, e, f), generator=g).double()
    index = torch.randint(0, n, (e,), generator=g)
    ev, ea = oracle_index(src, full_index(index, (b, e, f), 1), 1, n, reduce)
    if e == 0 and reduce == "mul":
        ev = torch.zeros_like(ev)  # documented: scatter_mul of an empty src is 0, as torch_scatter's
    res = ts.scatter(src, index, dim=1, dim_size=n, reduce=reduce)
    check(res, ev, torch.float64)
    if reduce in ("min", "max"):
        # ties are possible here: the arg must hold the extreme value, the first one
        assert torch.equal(getattr(ts, f"scatter_{reduce}")(src, index, 1, None, n)[1], ea)


# ----------------------------------------------------------------------------- gather

@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_csr_and_coo(dtype, rank):
    shape, d = RANKS[rank]
    nseg = INDPTR.numel() - 1
    src = make_src(shape[:d] + (nseg,) + shape[d + 1:], dtype, "sum")
    counts = (INDPTR[1:] - INDPTR[:-1]).tolist()
    expected = torch.repeat_interleave(src.double(), torch.tensor(counts), dim=d)  # plain torch
    res = ts.gather_csr(src, INDPTR.view([1] * d + [-1]))
    check(res, expected, dtype)
    index = torch.repeat_interleave(torch.arange(nseg), torch.tensor(counts))
    check(ts.gather_coo(src, index.view([1] * d + [-1])), expected, dtype)


def test_gather_csr_partial_and_batched():
    src = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    res = ts.gather_csr(src, torch.tensor([[1, 2, 2, 4], [0, 1, 3, 4]]))
    assert res.tolist() == [[0.0, 1.0, 3.0, 3.0], [4.0, 5.0, 5.0, 6.0]]
    assert ts.gather_csr(src[0], torch.tensor([1, 2, 2, 4])).tolist() == [0.0, 1.0, 3.0, 3.0]
    res = ts.gather_coo(src, torch.tensor([[0, 0, 2], [1, 2, 2]]))
    assert res.tolist() == [[1.0, 1.0, 3.0], [5.0, 6.0, 6.0]]


# ----------------------------------------------------------------------------- out=

def test_out_semantics():
    src = torch.tensor([1.0, 2.0, 3.0, 4.0])
    index = torch.tensor([0, 1, 0, 1])
    out = torch.tensor([10.0, 20.0, 30.0])
    res = ts.scatter_sum(src, index, out=out)
    assert res is out and out.tolist() == [14.0, 26.0, 30.0]  # reduced into out, as torch_scatter
    out = torch.tensor([2.0, 5.0, 7.0])
    v, a = ts.scatter_max(src, index, out=out)
    assert v is out and out.tolist() == [3.0, 5.0, 7.0] and a.tolist() == [2, 4, 4]
    out = torch.tensor([2.0, 6.0])
    assert ts.scatter_mean(src, index, out=out).tolist() == [3.0, 6.0]  # (2 + 1 + 3) / 2, (6 + 2 + 4) / 2
    out = torch.tensor([2.0, 3.0])
    assert ts.scatter_mul(src, index, out=out).tolist() == [6.0, 24.0]
    out = torch.full((3,), 9.0)
    assert ts.segment_coo(src, torch.tensor([0, 0, 2, 2]), out=out).tolist() == [12.0, 9.0, 16.0]
    out = torch.full((2,), 9.0)
    res = ts.segment_csr(src, torch.tensor([0, 1, 4]), out=out)  # overwritten, as torch_scatter
    assert res is out and out.tolist() == [1.0, 9.0]
    v, a = ts.segment_min_csr(src, torch.tensor([0, 1, 4]), out=out)
    assert v is out and out.tolist() == [1.0, 2.0] and a.tolist() == [0, 1]
    out = torch.empty(4)
    assert ts.gather_csr(torch.tensor([7.0, 8.0]), torch.tensor([0, 3, 4]), out=out) is out
    assert out.tolist() == [7.0, 7.0, 7.0, 8.0]
    out = torch.empty(3)
    assert ts.gather_coo(torch.tensor([7.0, 8.0]), torch.tensor([0, 1, 1]), out=out).tolist() == [7.0, 8.0, 8.0]


def test_out_is_checked():
    src, index = torch.ones(4), torch.tensor([0, 1, 0, 1])
    with pytest.raises(TypeError, match="out"):
        ts.scatter_sum(src, index, out=torch.zeros(2, dtype=torch.float64))
    with pytest.raises(ValueError, match="out"):
        ts.segment_csr(src, torch.tensor([0, 1, 4]), out=torch.zeros(3))
    with pytest.raises(ValueError, match="out"):
        ts.scatter_sum(src, index, out=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="reduce"):
        ts.scatter(src, index, reduce="median")


def test_bad_index_raises():
    src = torch.ones(4)
    with pytest.raises(ValueError):
        ts.segment_coo(src, torch.tensor([1, 0, 0, 1]))  # not sorted
    with pytest.raises(ValueError):
        ts.scatter(src, torch.tensor([0, 1, 5, 1]), dim_size=3)
    with pytest.raises(ValueError):
        ts.segment_csr(src, torch.tensor([0, 3, 2]))


def test_result_never_aliases_input():
    x = torch.arange(4.0)
    for r in (ts.gather_csr(x, torch.tensor([0, 1, 2, 3, 4])), ts.segment_csr(x, torch.tensor([0, 1, 2, 3, 4])),
              ts.scatter(x, torch.arange(4))):
        r += 1
        assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


# ----------------------------------------------------------------------------- autograd

def _x(shape, seed=0, zeros=()):
    g = torch.Generator().manual_seed(seed)
    v = torch.randperm(math.prod(shape), generator=g).double() / 7 + 0.25  # distinct, away from 0
    v = v.reshape(shape)
    for z in zeros:
        v[z] = 0.0
    return v.requires_grad_()


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max", "mul"])
def test_gradcheck_scatter(reduce):
    x = _x((2, 11, 3))
    assert torch.autograd.gradcheck(lambda t: ts.scatter(t, INDEX, 1, None, 9, reduce), (x,))
    index = torch.randint(0, 4, (2, 11, 3), generator=torch.Generator().manual_seed(1))
    assert torch.autograd.gradcheck(lambda t: ts.scatter(t, index, 1, None, 5, reduce), (x,))


@pytest.mark.parametrize("zeros", [[(0,)], [(0,), (2,)], [(0,), (2,), (3,)]], ids=["one", "two", "three"])
def test_gradcheck_prod_with_zeros(zeros):
    x = _x((11, 2), zeros=[z + (0,) for z in zeros])  # column 0: zeros in segment 4 (positions 0, 2)
    for f in (lambda t: ts.scatter_mul(t, INDEX, 0, None, 7),
              lambda t: T.OPS["segment_csr"](t, INDPTR, 0, "prod")[0],
              lambda t: T.OPS["segment_coo"](t, SORTED, 0, 7, "prod")[0]):
        assert torch.autograd.gradcheck(f, (x,))
    # the documented formula, by hand: segment 4 of INDEX holds positions 0, 2, 7
    y = ts.scatter_mul(x, INDEX, 0, None, 7)
    (gx,) = torch.autograd.grad(y[4, 0], x)
    v = x.detach()[:, 0]
    want = {0: v[2] * v[7], 2: v[0] * v[7], 7: v[0] * v[2]}
    for p, w in want.items():
        assert gx[p, 0].item() == pytest.approx(w.item())


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max"])
def test_gradcheck_segment(reduce):
    x = _x((2, 11, 3))
    assert torch.autograd.gradcheck(lambda t: ts.segment_csr(t, INDPTR.view(1, -1), reduce=reduce), (x,))
    assert torch.autograd.gradcheck(lambda t: ts.segment_coo(t, SORTED.view(1, -1), None, 8, reduce), (x,))
    batched = torch.tensor([[0, 3, 3, 8], [1, 2, 6, 11]])
    assert torch.autograd.gradcheck(lambda t: ts.segment_csr(t, batched, reduce=reduce), (x,))
    partial = torch.tensor([2, 4, 4, 9])  # elements 0-1 and 9-10 take no part
    assert torch.autograd.gradcheck(lambda t: ts.segment_csr(t, partial.view(1, -1), reduce=reduce), (x,))


def test_gradcheck_gather_and_gradgradcheck_sum():
    x = _x((6, 2))
    assert torch.autograd.gradcheck(lambda t: ts.gather_csr(t, INDPTR), (x,))
    assert torch.autograd.gradcheck(lambda t: ts.gather_csr(t, INDPTR + 2), (x,))  # starts above 0
    assert torch.autograd.gradcheck(lambda t: ts.gather_csr(t, torch.stack([INDPTR, INDPTR + 1])),
                                    (_x((2, 6, 2)),))
    assert torch.autograd.gradcheck(lambda t: ts.gather_coo(t, SORTED[:-1] % 6), (x,))
    y = _x((11, 2))
    assert torch.autograd.gradgradcheck(lambda t: ts.segment_csr(t, INDPTR), (y,))
    assert torch.autograd.gradgradcheck(lambda t: ts.scatter_sum(t, INDEX, 0, None, 7), (y,))
    assert torch.autograd.gradgradcheck(lambda t: ts.gather_csr(t, INDPTR), (x,))


def test_min_max_gradient_goes_to_arg():
    x = torch.tensor([3.0, 1.0, 2.0, 5.0], requires_grad=True)
    v, a = ts.scatter_min(x, torch.tensor([0, 0, 2, 2]), dim_size=4)
    v.sum().backward()
    assert a.tolist() == [1, 4, 2, 4] and x.grad.tolist() == [0.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max", "prod"])
def test_gradcheck_public_api(reduce):
    """mmvref's own functions keep the graph for tensors that require grad (routed through the ops)."""
    x = _x((2, 11, 3))
    ra = reduce in ("min", "max")
    assert torch.autograd.gradcheck(lambda t: mmvref.segment_csr(t, INDPTR, axis=1, reduce=reduce), (x,))
    assert torch.autograd.gradcheck(lambda t: mmvref.scatter(t, INDEX, axis=-2, dim_size=9, reduce=reduce), (x,))
    assert torch.autograd.gradcheck(lambda t: mmvref.segment_coo(t, SORTED, axis=1, reduce=reduce), (x,))
    flags = torch.tensor([1, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0], dtype=torch.uint8)
    f = (lambda t: mmvref.segmented_sum(t, flags, axis=1, reduce=reduce, return_arg=True)[0]) if ra else \
        (lambda t: mmvref.segmented_sum(t, flags, axis=1, reduce=reduce))
    assert torch.autograd.gradcheck(f, (x,))


@pytest.mark.parametrize("exclusive", [False, True])
def test_gradcheck_scans(exclusive):
    x = _x((2, 11, 3))
    flags = torch.tensor([1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1], dtype=torch.bool)
    assert torch.autograd.gradcheck(lambda t: mmvref.scan(t, axis=1, exclusive=exclusive), (x,))
    assert torch.autograd.gradcheck(lambda t: mmvref.scan(t, exclusive=exclusive), (x,))
    assert torch.autograd.gradcheck(lambda t: mmvref.segmented_scan(t, flags, axis=1, exclusive=exclusive), (x,))
    assert torch.autograd.gradcheck(lambda t: mmvref.gather_csr(t, INDPTR[:4], axis=1), (_x((2, 3, 2)),))
    assert torch.autograd.gradgradcheck(lambda t: mmvref.scan(t, axis=1, exclusive=exclusive), (x,))


def test_public_api_dtype_rule_and_out_under_autograd():
    x = torch.ones(4, 2, dtype=torch.float16, requires_grad=True)
    y = mmvref.segment_csr(x, torch.tensor([0, 1, 4]))
    assert y.dtype == torch.float32 and y.requires_grad and y.tolist() == [[1.0, 1.0], [3.0, 3.0]]
    y.sum().backward()
    assert x.grad.dtype == torch.float16 and torch.equal(x.grad, torch.ones(4, 2, dtype=torch.float16))
    xb = torch.ones(4, 2, dtype=torch.bfloat16, requires_grad=True)
    yb = mmvref.scatter(xb, torch.tensor([1, 0, 1, 1]), reduce="mean")
    assert yb.dtype == torch.bfloat16 and yb.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(RuntimeError, match="out="):
        mmvref.segment_csr(x, torch.tensor([0, 1, 4]), out=torch.empty(2, 2))
    with torch.no_grad():
        out = torch.empty(2, 2)
        assert mmvref.segment_csr(x.float(), torch.tensor([0, 1, 4]), out=out) is out


def test_torch_dtype_results():
    """The custom ops return src.dtype with dtype=None; integer results that do not fit raise."""
    x = torch.tensor([100, 100, 1], dtype=torch.int8)
    assert ts.segment_sum_csr(x[1:], torch.tensor([0, 2])).dtype == torch.int8
    with pytest.raises(OverflowError):
        T.OPS["segment_csr"](x, torch.tensor([0, 3]), 0, "sum")
    h = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float16)
    assert ts.scatter_mean(h, torch.tensor([0, 0, 1])).dtype == torch.float16


# ----------------------------------------------------------------------------- empty shapes under autograd

#: (src shape, axis, indptr): the reduced axis empty (E = 0), no batch (B = 0), no features (F = 0), all
#: empty, 1-D; indptr gives 2 segments (0 for the last two), index maps every position to segment 0
EMPTY_CASES = [((3, 0, 2), 1, [0, 0, 0]), ((0, 4, 2), 1, [0, 2, 4]), ((3, 4, 0), 1, [0, 2, 4]),
               ((0, 0, 0), 1, [0]), ((0,), 0, [0])]


def _empty_ops(shape, axis, indptr):
    E = shape[axis]
    index = [0] * E
    return {
        "mmvref.segment_csr": lambda t, r: mmvref.segment_csr(t, indptr, axis=axis, reduce=r),
        "mmvref.segment_coo": lambda t, r: mmvref.segment_coo(t, index, axis=axis, dim_size=2, reduce=r),
        "mmvref.scatter": lambda t, r: mmvref.scatter(t, index, axis=axis, dim_size=2, reduce=r),
        "op.segment_csr": lambda t, r: T.OPS["segment_csr"](t, torch.tensor(indptr), axis, r)[0],
        "op.scatter": lambda t, r: T.OPS["scatter"](t, torch.tensor(index, dtype=torch.int64), axis, 2, r)[0],
        "ts.segment_csr": lambda t, r: ts.segment_csr(
            t, torch.tensor(indptr).view([1] * axis + [-1]), reduce=r.replace("prod", "sum")),
        "ts.scatter": lambda t, r: ts.scatter(t, torch.tensor(index, dtype=torch.int64), axis, None, 2,
                                              r.replace("prod", "mul")),
    }


@pytest.mark.parametrize("create_graph", [False, True], ids=["kernel", "differentiable"])
@pytest.mark.parametrize("reduce", ["min", "max", "sum", "mean", "prod"])
@pytest.mark.parametrize("case", range(len(EMPTY_CASES)), ids=["E=0", "B=0", "F=0", "all", "1-D"])
def test_backward_over_empty_shapes(case, reduce, create_graph):
    """min/max (and every other reduction) backward over empty shapes gives a zero gradient of src's
    shape (it failed inside the min/max op: "cannot reshape array of size 0")."""
    shape, axis, indptr = EMPTY_CASES[case]
    for name, f in _empty_ops(shape, axis, indptr).items():
        t = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
        y = f(t, reduce)
        assert y.requires_grad, name
        (g,) = torch.autograd.grad(y.sum(), t, create_graph=create_graph, allow_unused=False)
        assert g.shape == t.shape and not g.any(), name


def test_backward_over_empty_axis_as_reported():
    t = torch.zeros(3, 0, 2, requires_grad=True)
    mmvref.segment_csr(t, [0, 0, 0], axis=1, reduce="max").sum().backward()
    assert t.grad.shape == (3, 0, 2) and not t.grad.any()
    t = torch.zeros(3, 0, 2, requires_grad=True)
    mmvref.scatter(t, [], axis=1, dim_size=3, reduce="min").sum().backward()
    assert t.grad.shape == (3, 0, 2) and not t.grad.any()


# ----------------------------------------------------------------------------- indptr / index forms

PTR_FORMS = {
    "list": [0, 2, 2, 6], "tuple": (0, 2, 2, 6), "range": range(0, 8, 2), "<i8": np.array([0, 2, 2, 6]),
    ">i8": np.array([0, 2, 2, 6], ">i8"), ">i4": np.array([0, 2, 2, 6], ">i4"), ">u4": np.array([0, 2, 2, 6], ">u4"),
    "u2": np.array([0, 2, 2, 6], np.uint16), "strided": np.array([0, 9, 2, 9, 2, 9, 6])[::2],
    "readonly": np.array([0, 2, 2, 6]), "int32 tensor": torch.tensor([0, 2, 2, 6], dtype=torch.int32),
    "uint8 tensor": torch.tensor([0, 2, 2, 6], dtype=torch.uint8),
}
PTR_FORMS["readonly"].flags.writeable = False
IDX_FORMS = {
    "list": [0, 0, 1, 1, 1, 3], "tuple": (0, 0, 1, 1, 1, 3), ">i8": np.array([0, 0, 1, 1, 1, 3], ">i8"),
    ">i2": np.array([0, 0, 1, 1, 1, 3], ">i2"), ">u8": np.array([0, 0, 1, 1, 1, 3], ">u8"),
    "uint64": np.array([0, 0, 1, 1, 1, 3], np.uint64), "strided": np.array([0, 7, 0, 7, 1, 7, 1, 7, 1, 7, 3])[::2],
    "int32 tensor": torch.tensor([0, 0, 1, 1, 1, 3], dtype=torch.int32),
}
#: the public ops, their argument forms, and src's length along axis 0
FORM_OPS = {"segment_csr": (PTR_FORMS, 6), "segment_coo": (IDX_FORMS, 6), "scatter": (IDX_FORMS, 6),
            "gather_csr": (PTR_FORMS, 3)}


def _three_ways(op, arg, length, **kw):
    """op on src as a plain tensor, as a tensor that requires grad, and as bfloat16 (the last two run
    the torch custom op)."""
    src = torch.arange(length * 2, dtype=torch.float32).reshape(length, 2) - 3  # exact in bfloat16
    f = getattr(mmvref, op)
    return (f(src, arg, **kw), f(src.clone().requires_grad_(), arg, **kw), f(src.to(torch.bfloat16), arg, **kw))


@pytest.mark.parametrize("op", list(FORM_OPS))
def test_index_forms_same_on_every_path(op):
    """Every indptr/index form the plain path takes, the autograd and bfloat16 paths take, with the same
    values (big-endian arrays and an empty list were refused there)."""
    forms, length = FORM_OPS[op]
    reduces = ("sum", "max") if op != "gather_csr" else (None,)
    for (name, arg), r in itertools.product(forms.items(), reduces):
        plain, grad, bf16 = _three_ways(op, arg, length, **({} if r is None else {"reduce": r}))
        assert grad.requires_grad, name
        assert torch.equal(plain, grad.detach()), (name, plain, grad)
        assert torch.equal(plain, bf16.float()), (name, plain, bf16)


@pytest.mark.parametrize("op", list(FORM_OPS))
def test_empty_index_list_on_every_path(op):
    arg = [0] if op in ("segment_csr", "gather_csr") else []
    plain, grad, bf16 = _three_ways(op, arg, 0)
    assert plain.shape == grad.shape == bf16.shape
    grad.sum().backward()  # the graph is there (and empty)
    if op in ("segment_coo", "scatter"):
        src = torch.zeros(0, 2, requires_grad=True)
        y = getattr(mmvref, op)(src, [], dim_size=3, reduce="max")
        assert y.shape == (3, 2) and not y.detach().any()
        y.sum().backward()
        assert src.grad.shape == (0, 2)


BAD_FORMS = {
    "float list": [0.0, 1.0, 2.0], "2-D list": [[0, 1], [1, 2]], "ragged": [[0], [1, 2]], "scalar": 3,
    "numpy scalar": np.int64(2), "None": None, "str": "abc", "dict": {1: 2}, "str array": np.array(["0", "1", "2"]),
    "object array": np.array([0, None, 1], dtype=object), "big-endian float": np.array([0, 1, 2], ">f8"),
    "complex": np.array([0, 1, 2], np.complex64), "datetime": np.array(["2020-01-01"] * 3, "M8[D]"),
    "empty float array": np.zeros(0), "bfloat16 tensor": torch.tensor([0, 1, 2], dtype=torch.bfloat16),
    "bool tensor": torch.tensor([True, False, True]), "float tensor": torch.tensor([0.0, 1.0, 2.0]),
    "negative": [0, -1, 2],
}
#: forms that are good for an op (flags may be bool)
GOOD_FOR = {"segmented_sum": ("bool tensor",)}


def _error(f, *args):
    try:
        f(*args)
    except Exception as e:  # noqa: BLE001  (the error itself is what is compared)
        return type(e), str(e)
    return None


@pytest.mark.parametrize("op", list(FORM_OPS) + ["segmented_sum"])
def test_bad_index_forms_same_error_on_every_path(op):
    f = getattr(mmvref, op)
    src = torch.arange(3.0) if op != "gather_csr" else torch.arange(2.0)
    for name, arg in BAD_FORMS.items():
        if name in GOOD_FOR.get(op, ()):
            continue
        plain = _error(f, src, arg)
        grad = _error(f, src.clone().requires_grad_(), arg)
        bf16 = _error(f, src.to(torch.bfloat16), arg)
        assert plain is not None and plain[0] in (TypeError, ValueError), (name, plain)
        assert plain == grad == bf16, (name, plain, grad, bf16)


def test_flags_forms_same_on_every_path():
    for flags in ([1, 0, 1], (1, 0, 1), np.array([1, 0, 1], np.uint8), np.array([True, False, True])):
        plain, grad, bf16 = (mmvref.segmented_sum(s, flags) for s in (
            torch.arange(3.0), torch.arange(3.0).requires_grad_(), torch.arange(3.0).to(torch.bfloat16)))
        assert torch.equal(plain, grad.detach()) and torch.equal(plain, bf16.float())
    assert mmvref.segmented_sum(torch.zeros(0, requires_grad=True), []).shape == (0,)


# ----------------------------------------------------------------------------- empty src in the drop-in

def _zero_dropins():
    idx, ptr = torch.zeros(0, dtype=torch.int64), torch.tensor([0, 0, 0])
    fs = {}
    for r in ("sum", "add", "mul", "mean", "min", "max"):
        fs[f"scatter:{r}"] = lambda x, r=r: ts.scatter(x, idx, 1, None, 2, r)
        fs[f"scatter_{r}"] = lambda x, r=r: getattr(ts, f"scatter_{r}")(x, idx, 1, None, 2)
    for r in ("sum", "add", "mean", "min", "max"):
        fs[f"segment_coo:{r}"] = lambda x, r=r: ts.segment_coo(x, idx.view(1, -1), None, 2, r)
        fs[f"segment_{r}_coo"] = lambda x, r=r: getattr(ts, f"segment_{r}_coo")(x, idx.view(1, -1), None, 2)
        fs[f"segment_csr:{r}"] = lambda x, r=r: ts.segment_csr(x, ptr.view(1, -1), None, r)
        fs[f"segment_{r}_csr"] = lambda x, r=r: getattr(ts, f"segment_{r}_csr")(x, ptr.view(1, -1))
    fs["gather_csr"] = lambda x: ts.gather_csr(x[:, :0], torch.tensor([[0]]))
    fs["gather_csr:uncovered"] = lambda x: ts.gather_csr(x[:, :0], torch.tensor([[3]]))  # 3 zeros out
    fs["gather_coo"] = lambda x: ts.gather_coo(x, idx.view(1, -1))
    return fs


@pytest.mark.parametrize("shape", [(3, 0, 4), (0, 0, 16), (0, 5, 2)], ids=str)
def test_dropin_empty_src_stays_on_the_graph(shape):
    """An empty src that requires grad gives a result on its graph (it came back detached): the result
    requires grad and src's gradient is zero of src's shape (torch_scatter's test_zero_tensors)."""
    for name, f in _zero_dropins().items():
        if shape[1] and ("segment" in name or "scatter" in name):
            continue  # the 1-D index / indptr above describe an empty reduced dim
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        y = f(x)
        v = y[0] if isinstance(y, tuple) else y
        assert v.requires_grad and v.grad_fn is not None, name
        assert not v.detach().any(), name
        v.backward(torch.randn_like(v))
        assert x.grad is not None and x.grad.shape == x.shape and not x.grad.any(), name
        if name.endswith(("min", "max")) and isinstance(y, tuple):
            assert torch.equal(y[1], torch.full(v.shape, shape[1], dtype=torch.int64)), name


def test_dropin_empty_src_without_grad_is_plain_zeros():
    y = ts.scatter_max(torch.zeros(2, 0), torch.zeros(0, dtype=torch.int64), dim_size=3)[0]
    assert not y.requires_grad and torch.equal(y, torch.zeros(2, 3))
    y = ts.segment_csr(torch.zeros(0, 2, dtype=torch.int32), torch.tensor([0, 0, 0]))
    assert y.dtype == torch.int32 and torch.equal(y, torch.zeros(2, 2, dtype=torch.int32))


# ----------------------------------------------------------------------------- opcheck

def _opcheck_cases():
    cases = []
    for dt in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64):
        x = make_src((2, 11, 3), dt, "sum")
        xg = x.clone().requires_grad_(dt in FLOATS)
        flags = torch.tensor([1, 0, 1, 0, 0, 1, 0, 0, 0, 1, 0], dtype=torch.uint8)
        for r in ("sum", "mean", "min", "max", "prod"):
            cases.append(("segment_csr", (xg, INDPTR, 1, r), None))
            cases.append(("scatter", (xg, INDEX, 1, 9, r), None))
            cases.append(("segment_coo", (xg, SORTED, -2, 8, r), None))
        cases.append(("segment_csr", (xg, INDPTR, 1, "sum"), {"dtype": torch.float64 if dt in FLOATS else torch.int64}))
        cases.append(("gather_csr", (make_src((2, 6, 3), dt, "sum").requires_grad_(dt in FLOATS), INDPTR, 1, 11),
                      None))
        cases.append(("segmented_sum", (xg, flags, 1, "max"), None))
        cases.append(("scan", (xg, 1, True), None))
        cases.append(("segmented_scan", (xg, flags, 1, False), None))
    return cases


@pytest.mark.parametrize("case", range(len(_opcheck_cases())))
def test_opcheck(case):
    name, args, kwargs = _opcheck_cases()[case]
    torch.library.opcheck(T.OPS[name], args, kwargs)


def test_ops_registered_under_torch_ops():
    assert torch.ops.mmvref.segment_csr.default is not None
    v, a = torch.ops.mmvref.scatter(torch.tensor([1.0, 2.0]), torch.tensor([1, 1]), 0, 3, "max")
    assert v.tolist() == [0.0, 2.0, 0.0] and a.tolist() == [2, 1, 2]
    assert torch.ops.mmvref.segment_csr(torch.ones(3), torch.tensor([0, 3]), 0, "sum")[1].shape == (0,)


# ----------------------------------------------------------------------------- torch.compile

class _Sage(torch.nn.Module):
    """Two GraphSAGE-style layers: h' = relu(W_self h + W_neigh mean_{j -> i} h_j)."""

    def __init__(self, f_in, f_hidden, f_out, aggregate):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.l1s, self.l1n = torch.nn.Linear(f_in, f_hidden), torch.nn.Linear(f_in, f_hidden, bias=False)
        self.l2s, self.l2n = torch.nn.Linear(f_hidden, f_out), torch.nn.Linear(f_hidden, f_out, bias=False)
        for p in self.parameters():
            p.data = torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3
        self.aggregate = aggregate

    def forward(self, x, src, dst, indptr):
        n = x.shape[0]
        h = torch.relu(self.l1s(x) + self.l1n(self.aggregate(x, src, dst, indptr, n)))
        return self.l2s(h) + self.l2n(self.aggregate(h, src, dst, indptr, n))


def _agg_scatter(h, src, dst, indptr, n):
    return ts.scatter(h[src], dst, dim=0, dim_size=n, reduce="mean")


def _agg_csr(h, src, dst, indptr, n):
    return ts.segment_csr(h.index_select(0, src), indptr, reduce="mean")


def _graph():
    g = torch.Generator().manual_seed(5)
    n, m = 12, 40
    dst = torch.sort(torch.randint(0, n, (m,), generator=g)).values
    dst[dst == 3] = 4  # node 3 has no in-edges
    src = torch.randint(0, n, (m,), generator=g)
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    x = torch.randn(n, 5, generator=g)
    return x, src, dst, indptr


def _agg_public(h, src, dst, indptr, n):
    return mmvref.scatter(h[src], dst, axis=0, dim_size=n, reduce="mean")


@pytest.mark.parametrize("aggregate", [_agg_scatter, _agg_csr, _agg_public],
                         ids=["scatter", "segment_csr", "mmvref.scatter"])
def test_compile_graphsage_fullgraph(aggregate):
    torch._dynamo.reset()
    model = _Sage(5, 8, 3, aggregate)
    x, src, dst, indptr = _graph()

    def run(fn):
        model.zero_grad()
        xr = x.clone().requires_grad_()
        y = fn(xr, src, dst, indptr)
        (y * torch.arange(y.numel()).view(y.shape)).sum().backward()
        return y.detach(), xr.grad, [p.grad.clone() for p in model.parameters()]

    eager = run(model)
    compiled = run(torch.compile(model, fullgraph=True, backend="inductor"))
    torch.testing.assert_close(compiled[0], eager[0])
    torch.testing.assert_close(compiled[1], eager[1])
    for a, b in zip(compiled[2], eager[2]):
        torch.testing.assert_close(a, b)
    # and the eager aggregation is the mean over in-edges (plain torch oracle)
    ref = torch.zeros(12, 5).index_add(0, dst, x[src])
    cnt = torch.bincount(dst, minlength=12).clamp(min=1).unsqueeze(1)
    torch.testing.assert_close(aggregate(x, src, dst, indptr, 12), ref / cnt)


# ----------------------------------------------------------------------------- API fuzzer defects

def _loop_segments(vals, ptr):
    """Python ints of each segment ptr[k]:ptr[k+1] of the list ``vals`` (elements outside are ignored)."""
    return [vals[ptr[k]:ptr[k + 1]] for k in range(len(ptr) - 1)]


def _trunc_div(s, n):
    return (abs(s) // n) * (1 if s >= 0 else -1)


_DIM_SIZE_FNS = [
    (ts.scatter, {}), (ts.scatter_sum, {}), (ts.scatter_add, {}), (ts.scatter_mul, {}), (ts.scatter_mean, {}),
    (ts.scatter_min, {}), (ts.scatter_max, {}), (ts.segment_coo, {}), (ts.segment_sum_coo, {}),
    (ts.segment_add_coo, {}), (ts.segment_mean_coo, {}), (ts.segment_min_coo, {}), (ts.segment_max_coo, {}),
    (ts.scatter_softmax, {}), (ts.scatter_log_softmax, {}), (ts.scatter_logsumexp, {}), (ts.scatter_std, {}),
]


@pytest.mark.parametrize("fn", [f for f, _ in _DIM_SIZE_FNS], ids=lambda f: f.__name__)
def test_negative_dim_size_raises(fn):
    """Item 3: a negative dim_size is refused (ValueError naming dim_size), never inferred."""
    with pytest.raises(ValueError, match="dim_size"):
        fn(torch.ones(3), torch.tensor([0, 1, 1]), dim_size=-1)
    with pytest.raises(TypeError, match="dim_size"):
        fn(torch.ones(3), torch.tensor([0, 1, 1]), dim_size=2.0)


def test_segment_csr_uncovered_elements_take_no_part():
    """Item 4: only indptr[0]:indptr[-1] is reduced (and decides overflow)."""
    i8 = torch.int8
    assert ts.segment_csr(torch.tensor([100, 100, 1], dtype=i8), torch.tensor([2, 3])).tolist() == [1]
    r = ts.segment_sum_csr(torch.tensor([-91, -18, -42], dtype=i8), torch.tensor([0]))
    assert r.dtype == i8 and r.shape == (0,)
    assert ts.segment_sum_csr(torch.tensor([100, 100], dtype=i8), torch.tensor([], dtype=torch.long)).shape == (0,)
    # batched offsets, every reduction: compare with a plain loop over the covered elements
    src = torch.tensor([[100, 100, 3, 4, 100], [5, 6, 100, 100, 100]], dtype=i8)
    ptrs = [[2, 3, 4], [0, 1, 2]]
    for reduce in ("sum", "mean", "mul", "min", "max"):
        res = ts.segment_csr(src, torch.tensor(ptrs), reduce=reduce)
        exp = []
        for row, ptr in zip(src.tolist(), ptrs):
            segs = _loop_segments(row, ptr)
            f = {"sum": sum, "mul": math.prod, "min": min, "max": max,
                 "mean": lambda s: _trunc_div(sum(s), len(s))}[reduce]
            exp.append([f(s) for s in segs])
        assert res.tolist() == exp, reduce
    with pytest.raises(OverflowError):  # a covered overflow still raises
        ts.segment_csr(torch.tensor([1, 100, 100], dtype=i8), torch.tensor([1, 3]))


@pytest.mark.parametrize("call, name", [
    (lambda: ts.segment_csr(torch.tensor([1., 2, 3, 4]), torch.tensor([0., 2.5, 4.])), "indptr"),
    (lambda: ts.segment_mean_csr(torch.tensor([1., 2, 3, 4]), torch.tensor([0., 2.5, 4.])), "indptr"),
    (lambda: ts.gather_csr(torch.tensor([1., 2]), torch.tensor([0., 2.5, 4.])), "indptr"),
    (lambda: ts.gather_coo(torch.tensor([1., 2, 3]), torch.tensor([0.7, 2.2])), "index"),
    (lambda: ts.scatter_sum(torch.tensor([1., 2, 3]), torch.tensor([0.7, 2.2, 1.])), "index"),
    (lambda: ts.segment_sum_coo(torch.tensor([1., 2, 3]), torch.tensor([0., 1., 1.])), "index"),
    (lambda: ts.scatter_softmax(torch.tensor([1., 2, 3]), torch.tensor([0., 1., 1.])), "index"),
], ids=["segment_csr", "segment_mean_csr", "gather_csr", "gather_coo", "scatter_sum", "segment_sum_coo",
        "scatter_softmax"])
def test_float_index_or_indptr_raises_type_error(call, name):
    """Item 5: a float index/indptr is refused (TypeError naming it), never truncated."""
    with pytest.raises(TypeError, match=name):
        call()


def test_gather_coo_index_out_of_range_raises_value_error():
    """Item 6."""
    with pytest.raises(ValueError, match="index"):
        ts.gather_coo(torch.tensor([1., 2, 3]), torch.tensor([0, 7]))
    with pytest.raises(ValueError, match="index"):
        ts.gather_coo(torch.tensor([1., 2, 3]), torch.tensor([-1, 0]))
    with pytest.raises(ValueError, match="index"):
        ts.gather_coo(torch.tensor([], dtype=torch.int16), torch.tensor([0]))
    assert ts.gather_coo(torch.tensor([1., 2, 3]), torch.tensor([0, 2, 2])).tolist() == [1., 3., 3.]


@pytest.mark.parametrize("fn, reduce", [(ts.scatter_sum, "sum"), (ts.scatter_mul, "mul"),
                                        (ts.segment_sum_coo, "sum"), (ts.segment_coo, "mul")],
                         ids=["scatter_sum", "scatter_mul", "segment_sum_coo", "segment_coo_mul"])
def test_out_integer_overflow_decided_on_exact_result(fn, reduce):
    """Item 7: with out= (reduced INTO out) overflow raises, decided on out combined with the reduction."""
    i8 = torch.int8
    kw = {"reduce": reduce} if fn is ts.segment_coo else {}
    with pytest.raises(OverflowError):
        fn(torch.tensor([100, 100], dtype=i8), torch.tensor([0, 1]), out=torch.tensor([100, 100], dtype=i8), **kw)
    # exact: the reduction alone would overflow, the combination fits (or is 0)
    src, index = [100, 100, 3, -2, 5], [0, 0, 1, 1, 2]
    out0 = [-100, 0, 7] if reduce == "sum" else [0, 4, -3]
    out = torch.tensor(out0, dtype=i8)
    res = fn(torch.tensor(src, dtype=i8), torch.tensor(index), out=out, **kw)
    exp = list(out0)
    for v, i in zip(src, index):
        exp[i] = exp[i] + v if reduce == "sum" else exp[i] * v
    assert res is out and res.tolist() == exp


@pytest.mark.parametrize("fn", [ts.segment_mean_coo, ts.segment_mean_csr, ts.scatter_mean])
def test_int64_mean_is_exact(fn):
    """Item 8: an integer mean always fits; computed exactly (segment_*: truncated toward zero)."""
    big, small = 2**63 - 1, -2**63
    src = [big, big, small, small + 1, -7, 2, 5]
    segs = [[0, 2], [2, 4], [4, 6], [6, 7]]
    if fn is ts.segment_mean_csr:
        res = fn(torch.tensor(src), torch.tensor([0, 2, 4, 6, 7]))
    else:
        res = fn(torch.tensor(src), torch.tensor([0, 0, 1, 1, 2, 2, 3]))
    exp = []
    for a, b in segs:
        s, n = sum(src[a:b]), b - a
        exp.append(s // n if fn is ts.scatter_mean else _trunc_div(s, n))
    assert res.tolist() == exp


def test_messages_name_the_argument():
    """Item 9: an unsupported src dtype names src; an indptr with no offsets gives a clear (empty) result."""
    for call in (lambda: ts.scatter_sum(torch.ones(2, dtype=torch.complex64), torch.tensor([0, 1])),
                 lambda: ts.segment_csr(torch.ones(2, dtype=torch.complex64), torch.tensor([0, 2])),
                 lambda: ts.gather_csr(torch.ones(1, dtype=torch.complex64), torch.tensor([0, 2])),
                 lambda: ts.scatter_softmax(torch.ones(2, dtype=torch.complex64), torch.tensor([0, 1]))):
        with pytest.raises((TypeError, ValueError), match="src"):
            call()
    r = ts.gather_csr(torch.zeros(0, 5, 0), torch.zeros(0, 1, 0, dtype=torch.long))
    assert r.shape == (0, 5, 0)
    r = ts.segment_csr(torch.zeros(0, 5, 0), torch.zeros(0, 1, 0, dtype=torch.long))
    assert r.shape == (0, 5, 0)


def test_gather_csr_negative_indptr_raises():
    """Item 10."""
    with pytest.raises(ValueError, match="indptr"):
        ts.gather_csr(torch.tensor([], dtype=torch.float64), torch.tensor([-1]))
    with pytest.raises(ValueError, match="indptr"):
        ts.gather_csr(torch.tensor([1.0]), torch.tensor([-1, 2]))
    with pytest.raises(ValueError, match="indptr"):
        ts.segment_csr(torch.tensor([], dtype=torch.float64), torch.tensor([0, 2]))


@pytest.mark.parametrize("fn", [ts.scatter_sum, ts.scatter_max, ts.segment_sum_coo, ts.scatter_softmax,
                                ts.scatter_std, ts.scatter_logsumexp])
def test_huge_index_raises_value_error(fn):
    """An index of 2**63 - 1 implies 2**63 output entries: ValueError naming index (torch_scatter would
    fail allocating it)."""
    with pytest.raises(ValueError, match="index"):
        fn(torch.ones(2), torch.tensor([0, 2**63 - 1]))


@pytest.mark.parametrize("fn", [ts.scatter_mean, ts.segment_mean_coo])
def test_integer_mean_with_out_overflow_raises(fn):
    """out is not counted, so (out + sum) / count can leave src.dtype: OverflowError, never wrapped."""
    i8 = torch.int8
    with pytest.raises(OverflowError):
        fn(torch.tensor([64, 127, 127], dtype=i8), torch.tensor([0, 0, 0]), out=torch.tensor([77], dtype=i8))
    src, index, out0 = [100, 100, -7, 2], [0, 0, 1, 1], [-50, 3]
    res = fn(torch.tensor(src, dtype=i8), torch.tensor(index), out=torch.tensor(out0, dtype=i8))
    exp = []
    for k in range(2):
        s = out0[k] + sum(v for v, i in zip(src, index) if i == k)
        n = sum(1 for i in index if i == k)
        exp.append(s // n if fn is ts.scatter_mean else _trunc_div(s, n))
    assert res.tolist() == exp
