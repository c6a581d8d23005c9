"""PyG's own tests of its CPU aggregation, ported to run with ``mmvref.pyg`` enabled.

The cases come from PyTorch Geometric's test suite (pyg-team/pytorch_geometric at tag 2.8.0; these
files are unchanged on its main branch since; torch_geometric 2.8.1 is what runs): ``test/nn/aggr/test_basic.py`` and ``test_multi.py``, ``test/utils/
test_scatter.py``, ``test_segment.py``, ``test_softmax.py`` and ``test_spmm.py``, ``test/nn/conv/
test_{sage,gcn,gin,graph,gat}_conv.py`` and the explain case of ``test_message_passing.py``. They are re-expressed here, not copied; each test names the
upstream case it covers. Left out: CUDA/MPS devices, ``torch_sparse.SparseTensor`` (not installed),
``torch_scatter`` (not installed; its role as the reference is taken by stock PyG and a hand
computation), TorchScript (``torch.jit.script``) and ``torch.compile``.

Every test runs with ``mmvref.pyg`` enabled (the autouse fixture below). Where upstream compares two
code paths (``edge_index`` against a sparse adjacency, ``index`` against ``ptr``, the output against a
hand computation) the comparison is kept: under mmvref both sides go through mmvref's kernels by
different routes. On top of that each convolution (and each aggregation) is compared, output and
gradients (inputs, edge weights, parameters), with the same module run under ``mmvref.pyg.disable()``
(stock PyG) on the same inputs.
"""
from __future__ import annotations

import contextlib
import math
import warnings

import pytest

pytest.importorskip("torch_geometric")

import torch  # noqa: E402
import torch_geometric.utils as pyg_utils  # noqa: E402
from torch.nn import Linear, ReLU, Sequential  # noqa: E402
from torch_geometric import EdgeIndex  # noqa: E402
from torch_geometric.nn import (  # noqa: E402
    GATConv,
    GCNConv,
    GINConv,
    GINEConv,
    GraphConv,
    MaxAggregation,
    MeanAggregation,
    MinAggregation,
    MLPAggregation,
    MulAggregation,
    MultiAggregation,
    PowerMeanAggregation,
    SAGEConv,
    SoftmaxAggregation,
    StdAggregation,
    SumAggregation,
    VarAggregation,
)
from torch_geometric.nn.conv.gcn_conv import gcn_norm  # noqa: E402
from torch_geometric.utils import (  # noqa: E402
    group_argsort,
    group_cat,
    segment_logsumexp,
    to_torch_coo_tensor,
    to_torch_csc_tensor,
    to_torch_csr_tensor,
)
from torch_geometric.utils._scatter import scatter_argmax  # noqa: E402

import mmvref.pyg as mpyg  # noqa: E402

# the PyG layer routes torch tensors to the same kernels for every compile target (the kernels are
# checked per target by test_segment_reduce / test_fast_sparse*), like test_torch_scatter
pytestmark = [
    pytest.mark.native_only,
    # torch's and stock PyG's notes on the sparse inputs these tests give on purpose
    pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning"),
    pytest.mark.filterwarnings("ignore:Converting sparse tensor to CSR:UserWarning"),
]

# stock PyG's functions, as bound before anything is enabled (the wiring test compares against them)
STOCK = {name: getattr(pyg_utils, name) for name in ("scatter", "segment", "spmm")}

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-6), torch.float64: dict(rtol=1e-10, atol=1e-12)}


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """One torch intra-op thread (a 2-core machine shared with other work); restored after."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def _mmvref_pyg():
    """Every test runs with mmvref.pyg enabled; the handle restores the previous state at exit."""
    torch.manual_seed(12345)  # parameter initialisation of the modules
    before = mpyg.is_enabled()
    with mpyg.enable():
        assert mpyg.is_enabled()
        yield
    assert mpyg.is_enabled() == before


@contextlib.contextmanager
def _stock():
    """Stock PyG for the duration (mmvref.pyg disabled); mmvref.pyg enabled again afterwards."""
    was = mpyg.is_enabled()
    mpyg.disable()
    try:
        assert not mpyg.is_enabled()
        yield
    finally:
        if was:
            mpyg.enable()


# ----------------------------------------------------------------------------- helpers

def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=_gen(seed), dtype=dtype)


def _close(actual, expected, dtype=torch.float32, msg=None):
    torch.testing.assert_close(actual, expected, **TOL[dtype], msg=msg)


def _fwd_bwd(module, call, leaves, seed=99):
    """Run ``call(module, leaves)`` on fresh leaf copies and back-propagate a fixed random cotangent.

    Returns the output and the gradients of the leaves and of the module's parameters (None where
    one received none)."""
    leaves = {k: v.detach().clone().requires_grad_(v.is_floating_point()) for k, v in leaves.items()}
    module.zero_grad(set_to_none=True)
    out = call(module, leaves)
    if isinstance(out, tuple):
        out = out[0]
    cot = torch.randn(out.shape, generator=_gen(seed), dtype=out.dtype)
    if out.requires_grad:
        (out * cot).sum().backward()
    grads = {f"input {k}": v.grad for k, v in leaves.items()}
    grads.update({f"parameter {n}": p.grad for n, p in module.named_parameters()})
    grads = {k: (None if g is None else g.detach().clone()) for k, g in grads.items()}
    return out.detach(), grads


ROUTED = ("fused", "unfused")  # the counters of calls mmvref computed (the rest: "fallback" to PyG)


def _routed_count():
    stats = mpyg.stats()
    return sum(stats[k] for k in ROUTED)


@pytest.fixture(autouse=True)
def _every_width_on_mmvref(monkeypatch):
    """mmvref.pyg leaves narrow sums to PyG's scatter (a speed rule, SCATTER_SUM_MIN_WIDTH); these
    ports check mmvref's results, so every width runs on mmvref here."""
    from mmvref.pyg import _routes

    monkeypatch.setattr(_routes, "SCATTER_SUM_MIN_WIDTH", 1)


@contextlib.contextmanager
def _on_mmvref(expected=True):
    """Asserts that something inside the block ran on mmvref (``expected``), so that a check is
    not stock PyG compared with itself. mmvref.pyg routes scatter where a gradient is taken (PyG's
    own scatter is as fast without one), segment always, spmm for CSR/CSC."""
    before = _routed_count()
    yield
    if expected:
        assert _routed_count() > before, "nothing here ran on mmvref: stock PyG was checked"


GRAD = pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])


def _src(*shape, seed=0, dtype=torch.float32, grad=False):
    """A random leaf tensor, requiring a gradient if ``grad`` (mmvref's scatter route)."""
    return _randn(*shape, seed=seed, dtype=dtype).requires_grad_(grad)


def _assert_matches_stock(module, call, leaves, dtype=torch.float32, stock_call=None, expect_routed=False):
    """Output and gradients with mmvref.pyg enabled equal those of stock PyG on the same inputs
    (``stock_call``: an equivalent call for stock PyG where it cannot run ``call`` itself).
    ``expect_routed``: the enabled run must have computed something on mmvref (else the comparison
    would be stock against stock)."""
    before = _routed_count()
    out, grads = _fwd_bwd(module, call, leaves)
    if expect_routed:
        assert _routed_count() > before, "nothing was routed to mmvref"
    with _stock():
        out_stock, grads_stock = _fwd_bwd(module, stock_call or call, leaves)
    assert out.dtype == out_stock.dtype
    _close(out, out_stock, dtype, msg=lambda m: f"output differs from stock PyG: {m}")
    assert grads.keys() == grads_stock.keys()
    # a gradient that cancels to about 0 (GAT's att_dst: softmax is nearly shift-invariant) is rounding
    # noise of the size of the terms cancelled, which the largest gradient of the pass stands for
    scale = max([1.0] + [float(g.abs().max()) for g in grads_stock.values() if g is not None and g.numel()])
    for name, g_stock in grads_stock.items():
        g = grads[name]
        if g_stock is None:
            assert g is None, f"{name}: a gradient where stock PyG has none"
            continue
        assert g is not None, f"{name}: no gradient where stock PyG has one"
        torch.testing.assert_close(g, g_stock, rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"] * scale,
                                   msg=lambda m, name=name: f"gradient of {name} differs from stock PyG: {m}")
    return out


def _check_invariances(module, x, edge_index, *, expected_size, sparse_size=None, perm_seed=3, **kwargs):
    """Upstream's ``assert_module`` checks, CPU layouts only: output size, invariance under a
    permutation of the edges, and the same output from a CSC and a COO adjacency (transposed)."""
    if sparse_size is None:
        if "size" in kwargs:
            sparse_size = kwargs["size"]
        elif isinstance(x, torch.Tensor):
            sparse_size = (x.size(0), x.size(0))
        else:
            sparse_size = (x[0].size(0), x[1].size(0))
    out = module(x, edge_index, **kwargs)
    assert out.size() == expected_size

    perm = torch.randperm(edge_index.size(1), generator=_gen(perm_seed))
    _close(module(x, edge_index[:, perm], **kwargs), out, msg=lambda m: f"edge permutation: {m}")

    csc = to_torch_csc_tensor(edge_index, size=sparse_size)
    _close(module(x, csc.t(), **kwargs), out, msg=lambda m: f"CSC adjacency: {m}")
    coo = to_torch_coo_tensor(edge_index, size=sparse_size)
    _close(module(x, coo.t().coalesce(), **kwargs), out, msg=lambda m: f"COO adjacency: {m}")
    return out


def _groups(x, index, num_groups):
    """Rows of ``x`` (float64) per group of ``index``, by a Python loop."""
    x64 = x.double()
    return [x64[[e for e in range(index.numel()) if int(index[e]) == g]] for g in range(num_groups)]


def _hand_reduce(x, index, num_groups, reduce):
    """The reduction of each group computed row by row (float64): empty groups give 0 (mul: 1)."""
    rows = []
    for r in _groups(x, index, num_groups):
        if r.size(0) == 0:
            rows.append(torch.full(x.shape[1:], 1.0 if reduce == "mul" else 0.0, dtype=torch.float64))
        elif reduce in ("sum", "add"):
            rows.append(r.sum(0))
        elif reduce == "mean":
            rows.append(r.sum(0) / r.size(0))
        elif reduce == "max":
            rows.append(r.max(0).values)
        elif reduce == "min":
            rows.append(r.min(0).values)
        elif reduce == "mul":
            rows.append(r.prod(0))
        elif reduce == "var":
            rows.append(((r - r.mean(0)) ** 2).mean(0))
        elif reduce == "std":
            var = ((r - r.mean(0)) ** 2).mean(0)
            std = var.clamp(min=1e-5).sqrt()
            rows.append(std.masked_fill(std <= math.sqrt(1e-5), 0.0))
        else:
            raise AssertionError(reduce)
    return torch.stack(rows) if rows else torch.zeros((0, *x.shape[1:]), dtype=torch.float64)


# the small graph of the upstream tests: 4 source nodes, targets 0 and 1 (valid as 4 x 4 and 4 x 2)
EDGE_INDEX = torch.tensor([[0, 1, 2, 3], [0, 0, 1, 1]])
INDEX = torch.tensor([0, 0, 1, 1, 1, 2])
PTR = torch.tensor([0, 2, 5, 6])


# ============================================================================= wiring

def test_enable_rebinds_and_disable_restores():
    """Not upstream: the tests below are only meaningful if enabling really routes PyG's functions
    to mmvref (scatter/segment/spmm rebound where PyG bound them by name; softmax through the
    scatter/segment of its module) and disabling restores stock PyG."""
    import torch_geometric.nn.aggr.base as aggr_base
    import torch_geometric.utils._softmax as softmax_mod

    bound = [(pyg_utils, "scatter"), (pyg_utils, "segment"), (pyg_utils, "spmm"),
             (aggr_base, "scatter"), (aggr_base, "segment"), (softmax_mod, "scatter"),
             (softmax_mod, "segment")]
    assert mpyg.is_enabled()
    for mod, name in bound:
        assert getattr(mod, name) is not STOCK[name], (mod.__name__, name)
    stats = mpyg.stats()
    assert {"fused", "unfused", "fallback"} <= set(stats)
    pyg_utils.softmax(_src(4, 3, grad=True), torch.tensor([0, 0, 1, 1]))
    assert mpyg.stats()["unfused"] > stats["unfused"]  # the sums of the exponentials (with a gradient)
    with _stock():
        for mod, name in bound:
            assert getattr(mod, name) is STOCK[name], (mod.__name__, name)
        stats = mpyg.stats()
        pyg_utils.softmax(_src(4, 3, grad=True), torch.tensor([0, 0, 1, 1]))
        GraphConv(3, 2)(_randn(4, 3), EDGE_INDEX)
        assert {k: mpyg.stats()[k] for k in ("fused", "unfused", "fallback")} == \
            {k: stats[k] for k in ("fused", "unfused", "fallback")}
    assert mpyg.is_enabled()


# ============================================================================= nn.aggr (test_basic.py)

BASIC_AGGRS = [MeanAggregation, SumAggregation, MaxAggregation, MinAggregation, MulAggregation,
               VarAggregation, StdAggregation]
HAND_NAME = {MeanAggregation: "mean", SumAggregation: "sum", MaxAggregation: "max",
             MinAggregation: "min", MulAggregation: "mul", VarAggregation: "var", StdAggregation: "std"}


@GRAD
def test_aggr_validate(grad):
    """test_basic.py::test_validate: a bad dim and dim_size not matching ptr / index are refused
    with PyG's errors (the last one is PyG's translation of the scatter's out-of-range error)."""
    x = _src(6, 16, grad=grad)
    aggr = MeanAggregation()
    with pytest.raises(ValueError, match="invalid dimension"):
        aggr(x, INDEX, dim=-3)
    with pytest.raises(ValueError, match="invalid 'dim_size'"):
        aggr(x, ptr=PTR, dim_size=2)
    with pytest.raises(ValueError, match="invalid 'dim_size'"):
        aggr(x, INDEX, dim_size=2)


@GRAD
@pytest.mark.parametrize("Aggregation", BASIC_AGGRS, ids=lambda a: a.__name__)
def test_basic_aggregation(Aggregation, grad):
    """test_basic.py::test_basic_aggregation: index and ptr give the same result (mul needs index);
    plus a per-group hand computation."""
    x = _src(6, 16, grad=grad)
    aggr = Aggregation()
    assert str(aggr) == f"{Aggregation.__name__}()"
    with _on_mmvref(grad):
        out = aggr(x, INDEX)
    assert out.size() == (3, 16)
    if Aggregation is MulAggregation:
        with pytest.raises(RuntimeError, match="requires 'index'"):
            aggr(x, ptr=PTR)
    else:
        _close(aggr(x, ptr=PTR), out)
    _close(out.double(), _hand_reduce(x, INDEX, 3, HAND_NAME[Aggregation]), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("Aggregation", BASIC_AGGRS, ids=lambda a: a.__name__)
def test_basic_aggregation_matches_stock(Aggregation, dtype):
    """Not upstream: output and gradient of each basic aggregation (unsorted index with an empty
    group and dim_size beyond the last group) equal stock PyG's."""
    x = _randn(9, 5, seed=1, dtype=dtype)
    index = torch.tensor([3, 0, 3, 1, 0, 3, 1, 1, 5])  # groups 2, 4 and 6 (< dim_size 7) empty
    aggr = Aggregation()
    out = _assert_matches_stock(aggr, lambda m, L: m(L["x"], index, dim_size=7), {"x": x}, dtype,
                                expect_routed=True)
    assert out.shape == (7, 5)
    _close(out.double(), _hand_reduce(x, index, 7, HAND_NAME[Aggregation]).to(dtype).double(), dtype)


@GRAD
def test_var_aggregation(grad):
    """test_basic.py::test_var_aggregation: variance is the mean squared deviation from the mean."""
    x = _src(6, 16, grad=grad)
    with _on_mmvref(grad):
        out = VarAggregation()(x, INDEX)
    mean = MeanAggregation()
    expected = mean((x - mean(x, INDEX)[INDEX]).pow(2), INDEX)
    _close(out, expected)


@GRAD
@pytest.mark.parametrize("Aggregation", BASIC_AGGRS, ids=lambda a: a.__name__)
def test_empty_aggregation(Aggregation, grad):
    """test_basic.py::test_empty_std_aggregation (std), extended to every basic aggregation: no rows
    and dim_size=5 give 5 rows of the empty value (0; mul: 1, as stock PyG)."""
    x = torch.empty(0, 6).requires_grad_(grad)
    index = torch.empty(0, dtype=torch.long)
    # an empty product stays on PyG's code (mmvref's torch_scatter gives 0 there, PyG 1)
    with _on_mmvref(grad and Aggregation is not MulAggregation):
        out = Aggregation()(x, index, dim_size=5)
    assert out.size() == (5, 6)
    fill = 1.0 if Aggregation is MulAggregation else 0.0
    assert torch.equal(out.detach(), torch.full((5, 6), fill))
    with _stock():
        assert torch.equal(Aggregation()(x, index, dim_size=5).detach(), out.detach())


@pytest.mark.parametrize("learn", [True, False])
@pytest.mark.parametrize("Aggregation", [SoftmaxAggregation, PowerMeanAggregation], ids=lambda a: a.__name__)
def test_learnable_aggregation(Aggregation, learn):
    """test_basic.py::test_learnable_aggregation: index and ptr agree; with learn=True the
    parameters get finite gradients; plus output and gradients equal stock PyG's."""
    x = _randn(6, 16).abs() if Aggregation is PowerMeanAggregation else _randn(6, 16)
    aggr = Aggregation(learn=learn)
    assert str(aggr) == f"{Aggregation.__name__}(learn={learn})"
    out = aggr(x, INDEX)
    assert out.size() == (3, 16)
    _close(aggr(x, ptr=PTR), out)
    if learn:
        out.mean().backward()
        for param in aggr.parameters():
            assert param.grad is not None and not torch.isnan(param.grad).any()
    _assert_matches_stock(aggr, lambda m, L: m(L["x"], INDEX), {"x": x}, expect_routed=True)
    _assert_matches_stock(aggr, lambda m, L: m(L["x"], ptr=PTR), {"x": x}, expect_routed=True)


def test_softmax_aggregation_by_hand():
    """Not upstream: SoftmaxAggregation(t) is sum_i x_i * softmax(t * x)_i per group and channel."""
    x = _randn(6, 4, seed=5)
    out = SoftmaxAggregation(t=0.7)(x, INDEX)
    expected = torch.stack([(r * torch.softmax(0.7 * r, dim=0)).sum(0) for r in _groups(x, INDEX, 3)])
    _close(out.double(), expected)


@pytest.mark.parametrize("Aggregation", [SoftmaxAggregation, PowerMeanAggregation], ids=lambda a: a.__name__)
def test_learnable_channels_aggregation(Aggregation):
    """test_basic.py::test_learnable_channels_aggregation: one learnable parameter per channel."""
    x = _randn(6, 16).abs() if Aggregation is PowerMeanAggregation else _randn(6, 16)
    aggr = Aggregation(learn=True, channels=16)
    assert str(aggr) == f"{Aggregation.__name__}(learn=True)"
    out = aggr(x, INDEX)
    assert out.size() == (3, 16)
    _close(aggr(x, ptr=PTR), out)
    out.mean().backward()
    for param in aggr.parameters():
        assert param.grad is not None and not torch.isnan(param.grad).any()
    _assert_matches_stock(aggr, lambda m, L: m(L["x"], INDEX), {"x": x})


# ============================================================================= nn.aggr (test_multi.py)

MULTI_MODES = [
    (dict(mode="cat"), 3),
    (dict(mode="proj", mode_kwargs=dict(in_channels=16, out_channels=16)), 1),
    (dict(mode="attn", mode_kwargs=dict(in_channels=16, out_channels=16, num_heads=4)), 1),
    (dict(mode="sum"), 1),
    (dict(mode="mean"), 1),
    (dict(mode="max"), 1),
    (dict(mode="min"), 1),
    (dict(mode="logsumexp"), 1),
    (dict(mode="std"), 1),
    (dict(mode="var"), 1),
]


@pytest.mark.parametrize("kwargs,expand", MULTI_MODES, ids=[m[0]["mode"] for m in MULTI_MODES])
def test_multi_aggr(kwargs, expand):
    """test_multi.py::test_multi_aggr (without TorchScript): 'cat' widens the output by the number
    of aggregations, the other modes keep it; index and ptr agree; plus gradients equal stock's."""
    x = _randn(7, 16)
    index = torch.tensor([0, 0, 1, 1, 1, 2, 3])
    ptr = torch.tensor([0, 2, 5, 6, 7])
    aggr = MultiAggregation(["mean", "sum", "max"], **kwargs)
    aggr.reset_parameters()
    assert str(aggr) == ("MultiAggregation([\n  MeanAggregation(),\n  SumAggregation(),\n"
                         f"  MaxAggregation(),\n], mode={kwargs['mode']})")
    out = aggr(x, index)
    assert out.size() == (4, expand * 16)
    _close(aggr(x, ptr=ptr), out)
    _assert_matches_stock(aggr, lambda m, L: m(L["x"], index), {"x": x}, expect_routed=True)


# ============================================================================= utils.scatter

def test_scatter_validate():
    """test_scatter.py::test_scatter_validate: PyG's errors for a 2-d index, a bad dim, a bad reduce."""
    src = _randn(100, 32)
    index = torch.randint(0, 10, (100,), generator=_gen(1))
    with pytest.raises(ValueError, match="must be one-dimensional"):
        pyg_utils.scatter(src, index.view(-1, 1))
    with pytest.raises(ValueError, match="must lay between 0 and 1"):
        pyg_utils.scatter(src, index, dim=2)
    with pytest.raises(ValueError, match="invalid `reduce` argument 'std'"):
        pyg_utils.scatter(src, index, reduce="std")


SCATTER_REDUCES = ["sum", "add", "mean", "min", "max", "mul"]


@GRAD
@pytest.mark.parametrize("reduce", SCATTER_REDUCES)
def test_scatter_index_out_of_range_raises_as_stock(reduce, grad):
    """Not upstream (what test_validate's dim_size case relies on): an index past dim_size raises
    IndexError or RuntimeError as in stock PyG (PyG's Aggregation turns exactly these into its
    "invalid 'dim_size'" error)."""
    src = _src(6, 4, grad=grad)
    with _stock():
        with pytest.raises((IndexError, RuntimeError)):
            pyg_utils.scatter(src, INDEX, 0, 2, reduce)
    with pytest.raises((IndexError, RuntimeError)):
        pyg_utils.scatter(src, INDEX, 0, 2, reduce)


@GRAD
@pytest.mark.parametrize("reduce", SCATTER_REDUCES)
def test_scatter(reduce, grad):
    """test_scatter.py::test_scatter (CPU; torch_scatter, the upstream reference, is replaced by a
    hand computation and by stock PyG): dim=0 of a 2-d and dim=1 of a 3-d source."""
    src = _src(100, 16, seed=2, grad=grad)
    index = torch.randint(0, 8, (100,), generator=_gen(3))
    with _on_mmvref(grad):
        out = pyg_utils.scatter(src, index, dim=0, reduce=reduce)
    assert out.shape == (int(index.max()) + 1, 16)
    _close(out.double(), _hand_reduce(src, index, out.size(0), reduce))
    with _stock():
        _close(out, pyg_utils.scatter(src, index, dim=0, reduce=reduce))

    src3 = _src(8, 100, 16, seed=4, grad=grad)
    with _on_mmvref(grad):
        out3 = pyg_utils.scatter(src3, index, dim=1, reduce=reduce)
    assert out3.shape == (8, out.size(0), 16)
    with _stock():
        _close(out3, pyg_utils.scatter(src3, index, dim=1, reduce=reduce))
    expected = torch.stack([_hand_reduce(src3[b], index, out.size(0), reduce) for b in range(8)])
    _close(out3.double(), expected)


@GRAD
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("reduce", SCATTER_REDUCES)
def test_scatter_empty_groups(reduce, dtype, grad):
    """Not upstream (the 'empty' cases): groups without elements and dim_size past the last index
    give 0 (mul: 1) as stock PyG; a source with no rows gives dim_size rows of that value."""
    src = _src(5, 3, seed=6, dtype=dtype, grad=grad)
    index = torch.tensor([4, 1, 4, 1, 6])
    with _on_mmvref(grad):
        out = pyg_utils.scatter(src, index, dim=0, dim_size=9, reduce=reduce)
    assert out.shape == (9, 3) and out.dtype == dtype
    _close(out.double(), _hand_reduce(src, index, 9, reduce).to(dtype).double(), dtype)
    empty = pyg_utils.scatter(src[:0], index[:0], dim=0, dim_size=4, reduce=reduce)
    assert torch.equal(empty.detach(), torch.full((4, 3), 1.0 if reduce == "mul" else 0.0, dtype=dtype))
    assert pyg_utils.scatter(src[:0], index[:0], dim=0, reduce=reduce).shape == (0, 3)
    with _stock():
        _close(pyg_utils.scatter(src, index, dim=0, dim_size=9, reduce=reduce), out, dtype)


@pytest.mark.parametrize("reduce", SCATTER_REDUCES)
def test_scatter_backward(reduce):
    """test_scatter.py::test_scatter_backward: the source gets a gradient; plus it equals stock's."""
    src = _randn(8, 100, 16, seed=7)
    index = torch.randint(0, 8, (100,), generator=_gen(8))
    leaf = src.clone().requires_grad_()
    out = pyg_utils.scatter(leaf, index, dim=1, reduce=reduce)
    assert leaf.grad is None
    out.mean().backward()
    assert leaf.grad is not None

    class Scatter(torch.nn.Module):
        def forward(self, s):
            return pyg_utils.scatter(s, index, dim=1, reduce=reduce)

    _assert_matches_stock(Scatter(), lambda m, L: m(L["src"]), {"src": src}, expect_routed=reduce != "any")


def test_scatter_any():
    """test_scatter.py::test_scatter_any: each output cell is one of its group's values."""
    src = _randn(6, 4, seed=9)
    index = torch.tensor([0, 0, 1, 1, 2, 2])
    out = pyg_utils.scatter(src, index, dim=0, reduce="any")
    for i in range(3):
        for j in range(4):
            assert float(out[i, j]) in src[2 * i:2 * i + 2, j].tolist()


@pytest.mark.parametrize("descending", [False, True])
def test_group_argsort(descending):
    """test_scatter.py::test_group_argsort: the rank of each element inside its group."""
    src = _randn(20, seed=10)
    index = torch.randint(0, 4, (20,), generator=_gen(11))
    out = group_argsort(src, index, 0, 4, descending=descending)
    expected = torch.empty_like(index)
    for g in range(4):
        mask = index == g
        order = src[mask].argsort(descending=descending)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel())
        expected[mask] = rank
    assert torch.equal(out, expected)
    assert group_argsort(torch.tensor([]), torch.tensor([])).numel() == 0


def test_scatter_argmax():
    """test_scatter.py::test_scatter_argmax (CPU): position of each group's maximum, src.numel()
    for empty groups."""
    src = torch.arange(5)
    index = torch.tensor([2, 2, 0, 0, 3])
    assert scatter_argmax(src, index, dim_size=6).tolist() == [3, 5, 1, 4, 5, 5]


def test_group_cat():
    """test_scatter.py::test_group_cat: concatenation keeping the groups together."""
    x1, x2 = _randn(4, 4, seed=12), _randn(2, 4, seed=13)
    out, index = group_cat([x1, x2], [torch.tensor([0, 0, 1, 2]), torch.tensor([0, 2])], dim=0,
                           return_index=True)
    assert torch.equal(out, torch.cat([x1[:2], x2[:1], x1[2:4], x2[1:]], dim=0))
    assert index.tolist() == [0, 0, 0, 1, 2, 2]


# ============================================================================= utils.segment

@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max"])
def test_segment(reduce):
    """test_segment.py::test_segment: a leading empty segment gives 0, the others equal torch's
    reduction of each block of 5 rows; plus output and gradient equal stock's."""
    src = _randn(20, 16, seed=14)
    ptr = torch.tensor([0, 0, 5, 10, 15, 20])
    with _on_mmvref():
        out = pyg_utils.segment(src, ptr, reduce=reduce)
    assert out.shape == (5, 16)
    expected = getattr(torch, reduce)(src.view(4, 5, 16), dim=1)
    expected = expected[0] if isinstance(expected, tuple) else expected
    assert torch.equal(out[:1], torch.zeros(1, 16))
    _close(out[1:], expected)

    class Segment(torch.nn.Module):
        def forward(self, s):
            return pyg_utils.segment(s, ptr, reduce=reduce)

    _assert_matches_stock(Segment(), lambda m, L: m(L["src"]), {"src": src}, expect_routed=True)


def test_segment_logsumexp():
    """test_segment.py::test_segment_logsumexp: along dim 0 and dim 1, empty segments give 0."""
    src = _randn(5, 4, seed=15)
    out = segment_logsumexp(src, torch.tensor([0, 0, 5, 5]), dim=0)
    assert out.size() == (3, 4)
    assert out[0].abs().sum() == 0.0 and out[2].abs().sum() == 0.0
    _close(out[1], src.logsumexp(dim=0))

    out = segment_logsumexp(src, torch.tensor([0, 0, 4, 4]), dim=1)
    assert out.size() == (5, 3)
    assert out[:, 0].abs().sum() == 0.0 and out[:, 2].abs().sum() == 0.0
    _close(out[:, 1], src.logsumexp(dim=1))


# ============================================================================= utils.softmax

@GRAD
def test_softmax(grad):
    """test_softmax.py::test_softmax (without TorchScript): exact values for 1-d and 2-d sources,
    from index and from ptr."""
    src = torch.tensor([1.0, 1.0, 1.0, 1.0], requires_grad=grad)
    index = torch.tensor([0, 0, 1, 2])
    ptr = torch.tensor([0, 2, 3, 4])
    out = pyg_utils.softmax(src, index)
    assert out.tolist() == [0.5, 0.5, 1, 1]
    assert pyg_utils.softmax(src, ptr=ptr).tolist() == out.tolist()

    src = src.view(-1, 1)
    out = pyg_utils.softmax(src, index)
    assert out.tolist() == [[0.5], [0.5], [1], [1]]
    assert pyg_utils.softmax(src, ptr=ptr).tolist() == out.tolist()


def test_softmax_backward():
    """test_softmax.py::test_softmax_backward: values and gradients equal a dense softmax over
    groups of two rows."""
    src_sparse = torch.rand(4, 8, generator=_gen(16))
    index = torch.tensor([0, 0, 1, 1])
    src_dense = src_sparse.clone().view(2, 2, 8)
    src_sparse.requires_grad_(True)
    src_dense.requires_grad_(True)
    out_sparse = pyg_utils.softmax(src_sparse, index)
    out_sparse.mean().backward()
    out_dense = src_dense.softmax(dim=1)
    out_dense.mean().backward()
    _close(out_sparse, out_dense.view_as(out_sparse))
    _close(src_sparse.grad, src_dense.grad.view_as(src_sparse))


def _ptr_softmax_or_import_error(src, ptr, dim):
    """``softmax(src, ptr=ptr, dim=dim)`` for a dim other than the first: stock PyG without
    torch_scatter/pyg_lib raises ImportError; an implementation that supports it must be right."""
    try:
        out = pyg_utils.softmax(src, ptr=ptr, dim=dim)
    except ImportError as exc:
        assert "torch-scatter" in str(exc)
        return
    _close(out, src.softmax(dim=dim))


@GRAD
def test_softmax_dim(grad):
    """test_softmax.py::test_softmax_dim: one group covering everything equals torch's softmax in
    that dimension, from index and from ptr."""
    index = torch.tensor([0, 0, 0, 0])
    ptr = torch.tensor([0, 4])
    for shape in [(4,), (4, 16)]:
        src = _src(*shape, seed=17, grad=grad)
        _close(pyg_utils.softmax(src, index, dim=0), src.softmax(dim=0))
        _close(pyg_utils.softmax(src, ptr=ptr, dim=0), src.softmax(dim=0))

    src = _src(4, 4, seed=18, grad=grad)
    _close(pyg_utils.softmax(src, index, dim=-1), src.softmax(dim=-1))
    _ptr_softmax_or_import_error(src, ptr, -1)

    src = _src(4, 4, 16, seed=19, grad=grad)
    with _on_mmvref(grad):
        out = pyg_utils.softmax(src, index, dim=1)
    _close(out, src.softmax(dim=1))
    _ptr_softmax_or_import_error(src, ptr, 1)


def test_softmax_matches_stock():
    """Not upstream: grouped softmax (unsorted index, num_nodes past the last group) with its
    gradient equals stock PyG's; each group sums to 1."""
    src = _randn(11, 3, seed=20)
    index = torch.tensor([2, 0, 2, 4, 0, 0, 4, 2, 2, 0, 4])

    class Softmax(torch.nn.Module):
        def forward(self, s):
            return pyg_utils.softmax(s, index, num_nodes=6)

    out = _assert_matches_stock(Softmax(), lambda m, L: m(L["src"]), {"src": src}, expect_routed=True)
    sums = torch.zeros(6, 3).index_add_(0, index, out)
    _close(sums[[0, 2, 4]], torch.ones(3, 3))


# ============================================================================= utils.spmm

@pytest.mark.parametrize("reduce", ["sum", "mean"])
def test_spmm_basic(reduce):
    """test_spmm.py::test_spmm_basic: CSR times dense equals the dense product (mean: divided by
    the row's number of entries), also with an empty row."""
    src = _randn(5, 4, seed=21)
    other = _randn(4, 8, seed=22)
    out = pyg_utils.spmm(src.to_sparse_csr(), other, reduce=reduce)
    assert out.size() == (5, 8)
    _close(out, (src @ other) / (4 if reduce == "mean" else 1))

    src[0] = 0.0
    out = pyg_utils.spmm(src.to_sparse_csr(), other, reduce=reduce)
    _close(out, (src @ other) / (4 if reduce == "mean" else 1))


@pytest.mark.parametrize("reduce", ["min", "max"])
def test_spmm_reduce(reduce):
    """test_spmm.py::test_spmm_reduce (CPU): min/max over each row's products; upstream checks the
    size (and torch_sparse), here against a dense computation (every entry of src is nonzero)."""
    src = _randn(5, 4, seed=23)
    other = _randn(4, 8, seed=24)
    out = pyg_utils.spmm(src.to_sparse_csr(), other, reduce)
    assert out.size() == (5, 8)
    products = src[:, :, None] * other[None, :, :]
    _close(out, products.amax(1) if reduce == "max" else products.amin(1))


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max"])
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc], ids=str)
def test_spmm_layout(layout, reduce):
    """test_spmm.py::test_spmm_layout: every sparse layout is accepted (upstream asserts stock's
    'Converting sparse tensor' warning for COO/CSC, a stock implementation detail); here the
    result must equal the CSR one."""
    dense = _randn(5, 4, seed=25)
    other = _randn(4, 8, seed=26)
    expected = pyg_utils.spmm(dense.to_sparse_csr(), other, reduce=reduce)
    src = dense.to_sparse(layout=layout)
    assert src.layout == layout
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Converting sparse tensor", UserWarning)
        out = pyg_utils.spmm(src, other, reduce=reduce)
    _close(out, expected)


def _spmm_fwd_bwd(dense, other, layout, reduce):
    src = dense.to_sparse(layout=layout).requires_grad_(layout == torch.sparse_csr)
    x = other.clone().requires_grad_()
    out = pyg_utils.spmm(src, x, reduce=reduce)
    (out * torch.randn(out.shape, generator=_gen(30), dtype=out.dtype)).sum().backward()
    grad_src = None if src.grad is None else src.grad.to_dense()
    return out.detach(), grad_src, x.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max"])
def test_spmm_gradients_match_stock(reduce, dtype):
    """Not upstream: spmm with a weighted CSR adjacency (an empty row, a zero entry dropped), output
    and gradients of the dense operand and of the adjacency's values equal stock PyG's; a CSC
    adjacency gives the same output and dense gradient (torch cannot back-propagate into a CSC
    tensor's values: the CSC adjacency takes no gradient)."""
    dense = _randn(6, 5, seed=28, dtype=dtype)
    dense[1, 2] = 0.0
    dense[4] = 0.0
    other = _randn(5, 7, seed=29, dtype=dtype)
    out, grad_src, grad_x = _spmm_fwd_bwd(dense, other, torch.sparse_csr, reduce)
    with _stock():
        out_s, grad_src_s, grad_x_s = _spmm_fwd_bwd(dense, other, torch.sparse_csr, reduce)
    _close(out, out_s, dtype)
    _close(grad_x, grad_x_s, dtype)
    assert grad_src is not None and grad_src_s is not None
    _close(grad_src * (dense != 0), grad_src_s * (dense != 0), dtype)  # only stored entries have one
    out_csc, _, grad_x_csc = _spmm_fwd_bwd(dense, other, torch.sparse_csc, reduce)
    _close(out_csc, out_s, dtype)
    _close(grad_x_csc, grad_x_s, dtype)


@pytest.mark.parametrize("reduce", ["sum", "mean", "min", "max"])
def test_spmm_edge_index(reduce):
    """test_spmm.py::test_spmm_edge_index: a row-sorted EdgeIndex equals its CSR form."""
    src = EdgeIndex([[0, 1, 1, 2], [1, 0, 2, 1]], sparse_size=(4, 3), sort_order="row")
    other = torch.rand(3, 4, generator=_gen(27))
    out = pyg_utils.spmm(src, other, reduce=reduce)
    assert out.size() == (4, 4)
    _close(out, pyg_utils.spmm(src.to_sparse_csr(), other, reduce=reduce))


# ============================================================================= convolutions: upstream cases

@pytest.mark.parametrize("aggr", ["mean", "sum"])
@pytest.mark.parametrize("project", [False, True])
def test_sage_conv(project, aggr):
    """test_sage_conv.py::test_sage_conv (without TorchScript/SparseTensor): edge permutation and
    CSC/COO adjacency give the same output; bipartite (x1, x2) and (x1, None) with size."""
    x = _randn(4, 8)
    conv = SAGEConv(8, 32, project=project, aggr=aggr)
    assert str(conv) == f"SAGEConv(8, 32, aggr={aggr})"
    out = _check_invariances(conv, x, EDGE_INDEX, expected_size=(4, 32))
    _close(conv(x, EDGE_INDEX, size=(4, 4)), out)

    x1, x2 = _randn(4, 8, seed=1), _randn(2, 16, seed=2)
    conv = SAGEConv((8, 16), 32, project=project, aggr=aggr)
    assert str(conv) == f"SAGEConv((8, 16), 32, aggr={aggr})"
    out1 = _check_invariances(conv, (x1, x2), EDGE_INDEX, expected_size=(2, 32))
    _close(conv((x1, x2), EDGE_INDEX, size=(4, 2)), out1)
    _check_invariances(conv, (x1, None), EDGE_INDEX, size=(4, 2), expected_size=(2, 32))


@pytest.mark.parametrize("project", [False, True])
def test_lazy_sage_conv(project):
    """test_sage_conv.py::test_lazy_sage_conv: lazy input size works unless projecting."""
    if project:
        with pytest.raises(ValueError, match="does not support lazy"):
            SAGEConv(-1, 32, project=project)
        return
    conv = SAGEConv(-1, 32, project=project)
    assert str(conv) == "SAGEConv(-1, 32, aggr=mean)"
    assert conv(_randn(4, 8), EDGE_INDEX).size() == (4, 32)


def test_lstm_aggr_sage_conv():
    """test_sage_conv.py::test_lstm_aggr_sage_conv: LSTM aggregation needs destination-sorted edges."""
    x = _randn(4, 8)
    conv = SAGEConv(8, 32, aggr="lstm")
    assert str(conv) == "SAGEConv(8, 32, aggr=lstm)"
    out = conv(x, EDGE_INDEX)
    assert out.size() == (4, 32)
    _close(conv(x, to_torch_csc_tensor(EDGE_INDEX, size=(4, 4)).t()), out)
    with pytest.raises(ValueError, match="'index' tensor is not sorted"):
        conv(x, torch.tensor([[0, 1, 2, 3], [1, 0, 1, 0]]))
    _assert_matches_stock(conv, lambda m, L: m(L["x"], EDGE_INDEX), {"x": x})


def test_mlp_sage_conv():
    """test_sage_conv.py::test_mlp_sage_conv: MLP aggregation inside SAGEConv."""
    x = _randn(4, 8)
    conv = SAGEConv(8, 32, aggr=MLPAggregation(in_channels=8, out_channels=8, max_num_elements=2,
                                               num_layers=1))
    assert conv(x, EDGE_INDEX).size() == (4, 32)
    _assert_matches_stock(conv, lambda m, L: m(L["x"], EDGE_INDEX), {"x": x})


SAGE_MULTI = [
    dict(mode="cat"),
    dict(mode="proj", mode_kwargs=dict(in_channels=8, out_channels=16)),
    dict(mode="attn", mode_kwargs=dict(in_channels=8, out_channels=16, num_heads=4)),
    dict(mode="sum"),
]


@pytest.mark.parametrize("aggr_kwargs", SAGE_MULTI, ids=[k["mode"] for k in SAGE_MULTI])
def test_multi_aggr_sage_conv(aggr_kwargs):
    """test_sage_conv.py::test_multi_aggr_sage_conv: mean/max/sum/learnable softmax combined."""
    x = _randn(4, 8)
    aggr_kwargs = dict(aggr_kwargs, aggrs_kwargs=[{}, {}, {}, dict(learn=True, t=1)])
    conv = SAGEConv(8, 32, aggr=["mean", "max", "sum", "softmax"], aggr_kwargs=aggr_kwargs)
    _check_invariances(conv, x, EDGE_INDEX, expected_size=(4, 32))
    _assert_matches_stock(conv, lambda m, L: m(L["x"], EDGE_INDEX), {"x": x})


def test_multi_aggr_list_sage_conv():
    """test_sage_conv.py::test_compile_multi_aggr_sage_conv without torch.compile: a list of five
    aggregations, compared with stock PyG (output and gradients)."""
    x = _randn(4, 8)
    conv = SAGEConv(8, 32, aggr=["mean", "sum", "min", "max", "std"])
    out = _assert_matches_stock(conv, lambda m, L: m(L["x"], EDGE_INDEX), {"x": x})
    assert out.size() == (4, 32)


def test_gcn_conv():
    """test_gcn_conv.py::test_gcn_conv (without TorchScript/SparseTensor): edge_index and the CSC
    adjacency agree, with and without edge weights; the cached normalisation reproduces the output."""
    x = _randn(4, 16)
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    value = torch.rand(edge_index.size(1), generator=_gen(1))
    adj1 = to_torch_csc_tensor(edge_index, size=(4, 4))
    adj2 = to_torch_csc_tensor(edge_index, value, size=(4, 4))

    conv = GCNConv(16, 32)
    assert str(conv) == "GCNConv(16, 32)"
    out1 = conv(x, edge_index)
    assert out1.size() == (4, 32)
    _close(conv(x, adj1.t()), out1)
    out2 = conv(x, edge_index, value)
    assert out2.size() == (4, 32)
    _close(conv(x, adj2.t()), out2)
    assert not torch.allclose(out1, out2)

    conv.cached = True
    conv(x, edge_index)
    assert conv._cached_edge_index is not None
    _close(conv(x, edge_index), out1)
    _close(conv(x, adj1.t()), out1)


def test_gcn_conv_with_decomposed_layers():
    """test_gcn_conv.py::test_gcn_conv_with_decomposed_layers: a message pre-hook sees the messages,
    split along the features when decomposed_layers=2; the output is unchanged. Upstream checks the
    split by propagate's module (PyG's generic implementation, not the compiled template); here the
    hook records what it sees, which must be the split messages whatever propagate is.

    The layer is built while enabled after a GCNConv was built with stock PyG (its propagate
    template compiled before enable(): a model built, then mmvref.pyg enabled, then another layer);
    the other order is checked in a fresh process by test_fresh_process_enable_then_build."""
    x = _randn(4, 16)
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    with _stock():
        GCNConv(16, 32)
    seen = []

    def hook(module, inputs):
        seen.append(tuple(inputs[0]["x_j"].size()))

    conv = GCNConv(16, 32)
    conv.register_message_forward_pre_hook(hook)
    out1 = conv(x, edge_index)
    assert seen == [(10, 32)]

    conv.decomposed_layers = 2
    out2 = conv(x, edge_index)
    assert seen == [(10, 32), (10, 16), (10, 16)], "decomposed_layers=2 did not split the messages"
    _close(out1, out2)

    conv.decomposed_layers = 1
    _close(conv(x, edge_index), out1)
    assert seen[3:] == [(10, 32)]


def test_disable_restores_layer_after_decomposed_layers():
    """Not upstream: a layer whose decomposed_layers was changed while enabled (PyG then binds
    propagate on the instance) runs stock PyG after disable(): no mmvref counter moves."""
    x = _randn(4, 16)
    conv = GCNConv(16, 32)
    conv.decomposed_layers = 2
    conv.decomposed_layers = 1
    out = conv(x, EDGE_INDEX)
    keys = ("fused", "unfused", "fallback")
    with _stock():
        before = mpyg.stats()
        out_stock = conv(x, EDGE_INDEX)
        after = mpyg.stats()
    assert {k: after[k] - before[k] for k in keys} == dict.fromkeys(keys, 0), "mmvref ran while disabled"
    _close(out, out_stock)


def test_gcn_conv_with_sparse_input_feature():
    """test_gcn_conv.py::test_gcn_conv_with_sparse_input_feature: a sparse COO x; plus the output
    equals the one from the dense x."""
    x = torch.sparse_coo_tensor(torch.tensor([[0, 0], [0, 1]]), torch.tensor([1.0, 1.0]), (4, 16))
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    conv = GCNConv(16, 32)
    out = conv(x, edge_index)
    assert out.size() == (4, 32)
    _close(out, conv(x.to_dense(), edge_index))


def test_static_gcn_conv():
    """test_gcn_conv.py::test_static_gcn_conv: a batch of node-feature matrices on one graph; plus
    each batch entry equals the single-graph output, and the whole equals stock's."""
    x = _randn(3, 4, 16)
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    conv = GCNConv(16, 32)
    out = conv(x, edge_index)
    assert out.size() == (3, 4, 32)
    for b in range(3):
        _close(out[b], conv(x[b], edge_index))
    _assert_matches_stock(conv, lambda m, L: m(L["x"], edge_index), {"x": x})


def test_gcn_conv_error():
    """test_gcn_conv.py::test_gcn_conv_error."""
    with pytest.raises(ValueError, match="does not support adding self-loops"):
        GCNConv(16, 32, normalize=False, add_self_loops=True)


def test_gcn_conv_flow():
    """test_gcn_conv.py::test_gcn_conv_flow: target_to_source on flipped edges is the same."""
    x = _randn(4, 16)
    edge_index = torch.tensor([[0, 0, 0], [1, 2, 3]])
    conv = GCNConv(16, 32, flow="source_to_target")
    out1 = conv(x, edge_index)
    conv.flow = "target_to_source"
    _close(conv(x, edge_index.flip(0)), out1)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=str)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_gcn_norm_gradient(requires_grad, layout):
    """test_gcn_conv.py::test_gcn_norm_gradient: gcn_norm keeps requires_grad of the adjacency;
    plus its values equal those of gcn_norm on edge_index (self-loops added in both)."""
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    edge_weight = torch.ones(edge_index.size(1), requires_grad=requires_grad)
    adj = to_torch_coo_tensor(edge_index, edge_weight)
    if layout == torch.sparse_csr:
        adj = adj.to_sparse_csr()
    norm_adj = gcn_norm(adj)[0]
    assert norm_adj.requires_grad == adj.requires_grad
    ei, ew = gcn_norm(edge_index, edge_weight.detach(), num_nodes=4)
    dense = torch.zeros(4, 4).index_put_((ei[0], ei[1]), ew, accumulate=True)
    _close(norm_adj.detach().to_dense(), dense)


def _gin_mlp(cin=16):
    return Sequential(Linear(cin, 32), ReLU(), Linear(32, 32))


def test_gin_conv():
    """test_gin_conv.py::test_gin_conv (without TorchScript/SparseTensor): size= and the CSC
    adjacency agree with edge_index, homogeneous and bipartite, (x1, x2) and (x1, None)."""
    x1, x2 = _randn(4, 16, seed=1), _randn(2, 16, seed=2)
    conv = GINConv(_gin_mlp(), train_eps=True)
    assert str(conv) == (
        "GINConv(nn=Sequential(\n"
        "  (0): Linear(in_features=16, out_features=32, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Linear(in_features=32, out_features=32, bias=True)\n"
        "))")
    out = conv(x1, EDGE_INDEX)
    assert out.size() == (4, 32)
    _close(conv(x1, EDGE_INDEX, size=(4, 4)), out)
    _close(conv(x1, to_torch_csc_tensor(EDGE_INDEX, size=(4, 4)).t()), out)

    adj = to_torch_csc_tensor(EDGE_INDEX, size=(4, 2))
    out1 = conv((x1, x2), EDGE_INDEX)
    assert out1.size() == (2, 32)
    _close(conv((x1, x2), EDGE_INDEX, (4, 2)), out1)
    _close(conv((x1, x2), adj.t()), out1)
    out2 = conv((x1, None), EDGE_INDEX, (4, 2))
    assert out2.size() == (2, 32)
    _close(conv((x1, None), adj.t()), out2)


def test_gine_conv():
    """test_gin_conv.py::test_gine_conv (without TorchScript/SparseTensor): edge features, size=,
    bipartite (x1, x2) and (x1, None); plus output and gradients equal stock's."""
    x1, x2 = _randn(4, 16, seed=1), _randn(2, 16, seed=2)
    value = _randn(EDGE_INDEX.size(1), 16, seed=3)
    conv = GINEConv(_gin_mlp(), train_eps=True)
    assert str(conv).startswith("GINEConv(nn=Sequential(\n")
    out = conv(x1, EDGE_INDEX, value)
    assert out.size() == (4, 32)
    _close(conv(x1, EDGE_INDEX, value, size=(4, 4)), out)
    out1 = conv((x1, x2), EDGE_INDEX, value)
    assert out1.size() == (2, 32)
    _close(conv((x1, x2), EDGE_INDEX, value, (4, 2)), out1)
    assert conv((x1, None), EDGE_INDEX, value, (4, 2)).size() == (2, 32)
    _assert_matches_stock(conv, lambda m, L: m(L["x"], EDGE_INDEX, L["e"]), {"x": x1, "e": value})
    _assert_matches_stock(conv, lambda m, L: m((L["x1"], L["x2"]), EDGE_INDEX, L["e"]),
                          {"x1": x1, "x2": x2, "e": value})


def test_gine_conv_edge_dim():
    """test_gin_conv.py::test_gine_conv_edge_dim: edge features of another width are projected."""
    x = _randn(4, 16)
    edge_attr = _randn(EDGE_INDEX.size(1), 8, seed=4)
    conv = GINEConv(_gin_mlp(), train_eps=True, edge_dim=8)
    assert conv(x, EDGE_INDEX, edge_attr).size() == (4, 32)
    conv = GINEConv(Linear(16, 32), train_eps=True, edge_dim=8)
    assert conv(x, EDGE_INDEX, edge_attr).size() == (4, 32)
    _assert_matches_stock(conv, lambda m, L: m(L["x"], EDGE_INDEX, L["e"]), {"x": x, "e": edge_attr})


def test_static_gin_conv():
    """test_gin_conv.py::test_static_gin_conv: batched node features; plus per-entry equality and
    equality with stock."""
    x = _randn(3, 4, 16)
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    conv = GINConv(_gin_mlp(), train_eps=True)
    out = conv(x, edge_index)
    assert out.size() == (3, 4, 32)
    for b in range(3):
        _close(out[b], conv(x[b], edge_index))
    _assert_matches_stock(conv, lambda m, L: m(L["x"], edge_index), {"x": x})


def test_static_gine_conv():
    """test_gin_conv.py::test_static_gine_conv: batched node features with edge features."""
    x = _randn(3, 4, 16)
    edge_index = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])
    edge_attr = _randn(edge_index.size(1), 16, seed=5)
    conv = GINEConv(_gin_mlp(), train_eps=True)
    assert conv(x, edge_index, edge_attr).size() == (3, 4, 32)
    _assert_matches_stock(conv, lambda m, L: m(L["x"], edge_index, L["e"]), {"x": x, "e": edge_attr})


def _sorted_col(edge_index, size):
    return EdgeIndex(edge_index, sort_order="col", sparse_size=size)


def test_graph_conv():
    """test_graph_conv.py::test_graph_conv (without TorchScript/SparseTensor): edge_index, size=,
    CSC adjacency and column-sorted EdgeIndex all agree, unweighted and weighted, homogeneous and
    bipartite (x1, x2) / (x1, None)."""
    x1, x2 = _randn(4, 8, seed=1), _randn(2, 16, seed=2)
    value = _randn(EDGE_INDEX.size(1), seed=3)
    conv = GraphConv(8, 32)
    assert str(conv) == "GraphConv(8, 32)"
    for w in (None, value):
        out = conv(x1, EDGE_INDEX, w)
        assert out.size() == (4, 32)
        _close(conv(x1, EDGE_INDEX, w, size=(4, 4)), out)
        _close(conv(x1, to_torch_csc_tensor(EDGE_INDEX, w, size=(4, 4)).t()), out)
        _close(conv(x1, _sorted_col(EDGE_INDEX, (4, 4)), w), out)

    conv = GraphConv((8, 16), 32)
    assert str(conv) == "GraphConv((8, 16), 32)"
    for w in (None, value):
        adj = to_torch_csc_tensor(EDGE_INDEX, w, size=(4, 2))
        out1 = conv((x1, x2), EDGE_INDEX, w)
        assert out1.size() == (2, 32)
        _close(conv((x1, x2), EDGE_INDEX, w, size=(4, 2)), out1)
        _close(conv((x1, x2), adj.t()), out1)
        _close(conv((x1, x2), _sorted_col(EDGE_INDEX, (4, 2)), w), out1)
        out2 = conv((x1, None), EDGE_INDEX, w, size=(4, 2))
        assert out2.size() == (2, 32)
        _close(conv((x1, None), adj.t()), out2)
        _close(conv((x1, None), _sorted_col(EDGE_INDEX, (4, 2)), w), out2)


class EdgeGraphConv(GraphConv):
    """Upstream's subclass: message written out (same as GraphConv's)."""

    def message(self, x_j, edge_weight):
        return edge_weight.view(-1, 1) * x_j


class CubedWeightGraphConv(GraphConv):
    """Not upstream: a message GraphConv does not have; a fused path must not skip it."""

    def message(self, x_j, edge_weight):
        return edge_weight.pow(3).view(-1, 1) * x_j


def test_inheritance():
    """test_graph_conv.py::test_inheritance: a subclass overriding message(); plus its output
    equals stock's, and an overridden message that differs from GraphConv's is honoured."""
    x = _randn(4, 8)
    edge_weight = torch.rand(4, generator=_gen(1)) + 0.5
    conv = EdgeGraphConv(8, 16)
    assert conv(x, EDGE_INDEX, edge_weight).size() == (4, 16)
    _assert_matches_stock(conv, lambda m, L: m(L["x"], EDGE_INDEX, L["w"]), {"x": x, "w": edge_weight})

    cubed = CubedWeightGraphConv(8, 16)
    plain = GraphConv(8, 16)
    plain.load_state_dict(cubed.state_dict())
    out = cubed(x, EDGE_INDEX, edge_weight)
    _close(out, plain(x, EDGE_INDEX, edge_weight.pow(3)))
    assert not torch.allclose(out, plain(x, EDGE_INDEX, edge_weight))
    # with a column-sorted EdgeIndex stock PyG takes GraphConv's message_and_aggregate (the
    # subclass's message is not called): whatever it does, mmvref.pyg must do the same
    for ei in (EDGE_INDEX, _sorted_col(EDGE_INDEX, (4, 4))):
        _assert_matches_stock(cubed, lambda m, L, ei=ei: m(L["x"], ei, L["w"]), {"x": x, "w": edge_weight})


@pytest.mark.parametrize("residual", [False, True])
def test_gat_conv(residual):
    """test_gat_conv.py::test_gat_conv (without TorchScript/SparseTensor): size= and the CSC
    adjacency agree with edge_index; attention weights returned for edge_index (7 edges with the
    self-loops, each in [0, 1]) and for the adjacency (sparse, 7 entries); bipartite (x1, x2) and
    (x1, None). Plus: the attention weights into each node sum to 1 and equal stock's."""
    x1, x2 = _randn(4, 8, seed=1), _randn(2, 16, seed=2)
    adj = to_torch_csc_tensor(EDGE_INDEX, size=(4, 4))
    conv = GATConv(8, 32, heads=2, residual=residual)
    assert str(conv) == "GATConv(8, 32, heads=2)"
    out = conv(x1, EDGE_INDEX)
    assert out.size() == (4, 64)
    _close(conv(x1, EDGE_INDEX, size=(4, 4)), out)
    _close(conv(x1, adj.t()), out)

    res, (ei, alpha) = conv(x1, EDGE_INDEX, return_attention_weights=True)
    _close(res, out)
    assert ei.size() == (2, 7) and alpha.size() == (7, 2)
    assert alpha.min() >= 0 and alpha.max() <= 1
    _close(torch.zeros(4, 2).index_add_(0, ei[1], alpha), torch.ones(4, 2))
    with _stock():
        _, (ei_stock, alpha_stock) = conv(x1, EDGE_INDEX, return_attention_weights=True)
    assert torch.equal(ei, ei_stock)
    _close(alpha, alpha_stock)

    res, (sparse_alpha, _) = conv(x1, adj.t(), return_attention_weights=True)
    _close(res, out)
    assert sparse_alpha.size() == torch.Size([4, 4, 2])
    assert sparse_alpha._nnz() == 7

    adj = to_torch_csc_tensor(EDGE_INDEX, size=(4, 2))
    conv = GATConv((8, 16), 32, heads=2, residual=residual)
    assert str(conv) == "GATConv((8, 16), 32, heads=2)"
    out1 = conv((x1, x2), EDGE_INDEX)
    assert out1.size() == (2, 64)
    _close(conv((x1, x2), EDGE_INDEX, size=(4, 2)), out1)
    _close(conv((x1, x2), adj.t()), out1)
    out2 = conv((x1, None), EDGE_INDEX, size=(4, 2))
    assert out2.size() == (2, 64)
    _close(conv((x1, None), adj.t()), out2)


GAT_EDGE_ATTR = [(1, 0.5), (1, "mean"), (4, 0.5), (4, "mean")]


@pytest.mark.parametrize("edge_dim,fill_value", GAT_EDGE_ATTR, ids=[f"{d}-{f}" for d, f in GAT_EDGE_ATTR])
def test_gat_conv_with_edge_attr(edge_dim, fill_value):
    """test_gat_conv.py::test_gat_conv_with_edge_attr (the SparseTensor part dropped): 1-d edge
    weights and 4-wide edge features with a constant or mean fill for the self-loops; plus
    output and gradients (edge attributes included) equal stock's."""
    x = _randn(4, 8)
    edge_index = torch.tensor([[0, 1, 2, 3], [1, 0, 1, 1]])
    attr = _randn(4, seed=4) if edge_dim == 1 else _randn(4, 4, seed=5)
    conv = GATConv(8, 32, heads=2, edge_dim=edge_dim, fill_value=fill_value)
    out = conv(x, edge_index, attr)
    assert out.size() == (4, 64)
    _assert_matches_stock(conv, lambda m, L: m(L["x"], edge_index, L["e"]), {"x": x, "e": attr})


def test_gat_conv_empty_edge_index():
    """test_gat_conv.py::test_gat_conv_empty_edge_index (CPU): no nodes and no edges."""
    conv = GATConv(8, 32, heads=2)
    out = conv(torch.randn(0, 8), torch.empty(2, 0, dtype=torch.long))
    assert out.size() == (0, 64)


# ============================================================================= convolutions vs stock PyG

def _random_graph(n=10, e=30, seed=40):
    g = _gen(seed)
    ei = torch.stack([torch.randint(0, n, (e,), generator=g), torch.randint(0, n, (e,), generator=g)])
    ei = torch.cat([ei, ei[:, :3], torch.tensor([[5, 7], [5, 7]])], dim=1)  # duplicates, self-loops
    return ei, n


def _inputs(kind, c_src, c_dst, dtype):
    """(leaves, call) for one kind of input: ``call(conv, leaves)`` runs the module.

    Homogeneous kinds use x (4 nodes, or the random graph's 10) with c_src channels; bipartite
    ones x1 (4 x c_src) and x2 (2 x c_dst); weighted ones an edge weight w."""
    x = _randn(4, c_src, seed=1, dtype=dtype)
    x1, x2 = x, _randn(2, c_dst, seed=2, dtype=dtype)
    w = torch.rand(EDGE_INDEX.size(1), generator=_gen(3), dtype=dtype) + 0.25
    ei = EDGE_INDEX
    rei, rn = _random_graph()
    rx = _randn(rn, c_src, seed=4, dtype=dtype)
    rw = torch.rand(rei.size(1), generator=_gen(5), dtype=dtype) + 0.25
    perm = torch.randperm(ei.size(1), generator=_gen(6))
    empty = torch.empty(2, 0, dtype=torch.long)
    one, rone = torch.ones(ei.size(1), dtype=dtype), torch.ones(rei.size(1), dtype=dtype)
    rsorted = rei[:, rei[1].argsort(stable=True)]
    table = {
        "edge_index": ({"x": x}, lambda m, L: m(L["x"], ei)),
        "size": ({"x": x}, lambda m, L: m(L["x"], ei, size=(4, 4))),
        "permuted": ({"x": x}, lambda m, L: m(L["x"], ei[:, perm])),
        "random": ({"x": rx}, lambda m, L: m(L["x"], rei)),
        "no_edges": ({"x": x}, lambda m, L: m(L["x"], empty)),
        "no_nodes": ({"x": x[:0]}, lambda m, L: m(L["x"], empty)),
        "csc_t": ({"x": x}, lambda m, L: m(L["x"], to_torch_csc_tensor(ei, one, size=(4, 4)).t())),
        "csr": ({"x": x}, lambda m, L: m(L["x"], to_torch_csr_tensor(ei.flip(0), one, size=(4, 4)))),
        "coo_t": ({"x": x}, lambda m, L: m(L["x"], to_torch_coo_tensor(ei, one, size=(4, 4)).t().coalesce())),
        "random_csr": ({"x": rx}, lambda m, L: m(L["x"], to_torch_csr_tensor(rei.flip(0), rone, size=(rn, rn)))),
        "sorted": ({"x": x}, lambda m, L: m(L["x"], _sorted_col(ei, (4, 4)))),
        "random_sorted": ({"x": rx}, lambda m, L: m(L["x"], _sorted_col(rsorted, (rn, rn)))),
        "weighted": ({"x": x, "w": w}, lambda m, L: m(L["x"], ei, L["w"])),
        "weighted_size": ({"x": x, "w": w}, lambda m, L: m(L["x"], ei, L["w"], size=(4, 4))),
        "weighted_random": ({"x": rx, "w": rw}, lambda m, L: m(L["x"], rei, L["w"])),
        "weighted_no_edges": ({"x": x, "w": w[:0]}, lambda m, L: m(L["x"], empty, L["w"])),
        "weighted_csr": ({"x": x}, lambda m, L: m(L["x"], to_torch_csr_tensor(ei.flip(0), w, size=(4, 4)))),
        "weighted_csc_t": ({"x": x}, lambda m, L: m(L["x"], to_torch_csc_tensor(ei, w, size=(4, 4)).t())),
        "weighted_sorted": ({"x": x, "w": w}, lambda m, L: m(L["x"], _sorted_col(ei, (4, 4)), L["w"])),
        "bipartite": ({"x1": x1, "x2": x2}, lambda m, L: m((L["x1"], L["x2"]), ei)),
        "bipartite_size": ({"x1": x1, "x2": x2}, lambda m, L: m((L["x1"], L["x2"]), ei, size=(4, 2))),
        "bipartite_none": ({"x1": x1}, lambda m, L: m((L["x1"], None), ei, size=(4, 2))),
        "bipartite_no_edges": ({"x1": x1, "x2": x2}, lambda m, L: m((L["x1"], L["x2"]), empty)),
        "bipartite_csc_t": ({"x1": x1, "x2": x2},
                            lambda m, L: m((L["x1"], L["x2"]), to_torch_csc_tensor(ei, one, size=(4, 2)).t())),
        "bipartite_none_csc_t": ({"x1": x1},
                                 lambda m, L: m((L["x1"], None), to_torch_csc_tensor(ei, one, size=(4, 2)).t())),
        # stock PyG's backward through an unweighted bipartite EdgeIndex product fails (a shape
        # error in EdgeIndex.matmul's gradient): stock runs the plain edge index instead
        "bipartite_sorted": ({"x1": x1, "x2": x2},
                             lambda m, L: m((L["x1"], L["x2"]), _sorted_col(ei, (4, 2))),
                             lambda m, L: m((L["x1"], L["x2"]), ei)),
        "bipartite_weighted": ({"x1": x1, "x2": x2, "w": w},
                               lambda m, L: m((L["x1"], L["x2"]), ei, L["w"])),
        "bipartite_none_weighted": ({"x1": x1, "w": w},
                                    lambda m, L: m((L["x1"], None), ei, L["w"], size=(4, 2))),
        "bipartite_sorted_weighted": ({"x1": x1, "x2": x2, "w": w},
                                      lambda m, L: m((L["x1"], L["x2"]), _sorted_col(ei, (4, 2)), L["w"])),
    }
    entry = table[kind]
    return entry if len(entry) == 3 else (*entry, None)


HOMO = ["edge_index", "size", "permuted", "random", "no_edges", "no_nodes", "csc_t", "csr", "coo_t",
        "random_csr", "sorted", "random_sorted"]
WEIGHTED = ["weighted", "weighted_size", "weighted_random", "weighted_no_edges", "weighted_csr",
            "weighted_csc_t", "weighted_sorted"]
BIPARTITE = ["bipartite", "bipartite_size", "bipartite_none", "bipartite_no_edges", "bipartite_csc_t",
             "bipartite_none_csc_t", "bipartite_sorted"]
BIPARTITE_WEIGHTED = ["bipartite_weighted", "bipartite_none_weighted", "bipartite_sorted_weighted"]
# float64 for a few representative kinds (every kind runs in float32)
# (float64 with an unweighted EdgeIndex fails in stock PyG: its product uses float32 ones)
F64_KINDS = {"edge_index", "random", "csr", "random_csr", "weighted", "weighted_random",
             "weighted_csr", "bipartite", "bipartite_none", "bipartite_weighted"}


def _params(configs, kinds):
    out = []
    for cid, cfg in configs.items():
        for kind in kinds:
            for dtype in (torch.float32, torch.float64):
                if dtype == torch.float64 and kind not in F64_KINDS:
                    continue
                out.append(pytest.param(cfg, kind, dtype, id=f"{cid}-{kind}-{str(dtype)[6:]}"))
    return out


# a COO adjacency goes to PyG's own spmm (which converts it to CSR): nothing of it runs on mmvref
NOT_ROUTED = {"coo_t"}


def _check_conv(make, kind, c_src, c_dst, dtype):
    """Build the layer (``make(in_channels)``) in ``dtype`` and compare it with stock PyG on one
    kind of input (see ``_inputs``)."""
    bipartite = kind.startswith("bipartite")
    conv = make((c_src, c_dst) if bipartite else c_src).to(dtype)
    leaves, call, stock_call = _inputs(kind, c_src, c_dst, dtype)
    out = _assert_matches_stock(conv, call, leaves, dtype, stock_call, expect_routed=kind not in NOT_ROUTED)
    assert out.dtype == dtype
    assert torch.isfinite(out).all()


SAGE_CONFIGS = {
    "mean": dict(aggr="mean"),
    "sum_project": dict(aggr="sum", project=True),
    "max": dict(aggr="max"),
    "mean_normalize_noroot": dict(aggr="mean", normalize=True, root_weight=False),
}


@pytest.mark.parametrize("cfg,kind,dtype", _params(SAGE_CONFIGS, HOMO + BIPARTITE))
def test_sage_conv_matches_stock(cfg, kind, dtype):
    """SAGEConv with mmvref.pyg equals stock PyG: output and gradients of x and parameters."""
    _check_conv(lambda cin: SAGEConv(cin, 12, **cfg), kind, 8, 16, dtype)


GCN_CONFIGS = {
    "default": dict(),
    "improved": dict(improved=True),
    "no_self_loops": dict(add_self_loops=False),
    "no_normalize": dict(normalize=False),
}
# GCNConv takes no size= and (in stock PyG) no EdgeIndex through gcn_norm's self-loops
GCN_KINDS = [k for k in HOMO + WEIGHTED if k not in ("size", "weighted_size", "sorted", "random_sorted",
                                                     "weighted_sorted")]


@pytest.mark.parametrize("cfg,kind,dtype", _params(GCN_CONFIGS, GCN_KINDS))
def test_gcn_conv_matches_stock(cfg, kind, dtype):
    """GCNConv with mmvref.pyg equals stock PyG: output and gradients of x, edge weights, parameters."""
    _check_conv(lambda cin: GCNConv(cin, 12, **cfg), kind, 8, 8, dtype)


GIN_CONFIGS = {"train_eps": dict(train_eps=True), "eps": dict(eps=0.5)}


@pytest.mark.parametrize("cfg,kind,dtype", _params(GIN_CONFIGS, HOMO + BIPARTITE))
def test_gin_conv_matches_stock(cfg, kind, dtype):
    """GINConv with mmvref.pyg equals stock PyG: output and gradients of x and parameters."""
    _check_conv(lambda cin: GINConv(_gin_mlp(8), **cfg), kind, 8, 8, dtype)


GRAPH_CONFIGS = {"add": dict(aggr="add"), "mean": dict(aggr="mean"), "max": dict(aggr="max")}


@pytest.mark.parametrize("cfg,kind,dtype",
                         _params(GRAPH_CONFIGS, HOMO + WEIGHTED + BIPARTITE + BIPARTITE_WEIGHTED))
def test_graph_conv_matches_stock(cfg, kind, dtype):
    """GraphConv with mmvref.pyg equals stock PyG: output and gradients of x, edge weights, parameters."""
    _check_conv(lambda cin: GraphConv(cin, 12, **cfg), kind, 8, 16, dtype)


GAT_CONFIGS = {
    "heads2": dict(heads=2),
    "residual": dict(heads=2, residual=True),
    "mean_heads": dict(heads=3, concat=False),
    "no_self_loops": dict(heads=1, add_self_loops=False),
}
GAT_EDGE_CONFIGS = {
    "edge_fill_const": dict(heads=2, edge_dim=1, fill_value=0.5),
    "edge_fill_mean": dict(heads=2, edge_dim=1, fill_value="mean"),
}


@pytest.mark.parametrize("cfg,kind,dtype",
                         _params(GAT_CONFIGS, HOMO + BIPARTITE)
                         + _params(GAT_EDGE_CONFIGS, ["weighted", "weighted_random", "bipartite_weighted"]))
def test_gat_conv_matches_stock(cfg, kind, dtype):
    """GATConv with mmvref.pyg equals stock PyG: output and gradients of x, edge attributes (as
    1-d edge weights) and parameters."""
    _check_conv(lambda cin: GATConv(cin, 12, **cfg), kind, 8, 16, dtype)


def _all_convs():
    return [SAGEConv(8, 12), GCNConv(8, 12), GINConv(_gin_mlp(8)), GraphConv(8, 12), GATConv(8, 12, heads=2)]


ADJACENCIES = {
    "edge_index": lambda: EDGE_INDEX,
    "csr": lambda: to_torch_csc_tensor(EDGE_INDEX, size=(4, 4)).t(),
    "coo": lambda: to_torch_coo_tensor(EDGE_INDEX, size=(4, 4)).t().coalesce(),
}


@pytest.mark.parametrize("adj", list(ADJACENCIES))
def test_conv_built_while_disabled(adj):
    """Not upstream: convolutions built with stock PyG (their templates compiled) before mmvref.pyg
    is enabled give stock's outputs and gradients once it is (the wrapping must not depend on when
    the module was made; the stock comparisons above build their modules while enabled)."""
    with _stock():
        convs = _all_convs()
    x = _randn(4, 8)
    for conv in convs:
        _assert_matches_stock(conv, lambda m, L: m(L["x"], ADJACENCIES[adj]()), {"x": x})


def test_edge_index_changed_in_place():
    """Not upstream: an edge index changed in place between calls (or a new one with other
    content) is never served the graph prepared for the old content."""
    x = _randn(6, 8)
    conv = GraphConv(8, 12)
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 5], [1, 1, 2, 0, 5, 5]])
    for step in range(4):
        _assert_matches_stock(conv, lambda m, L: m(L["x"], edge_index), {"x": x})
        edge_index[1, step] = (int(edge_index[1, step]) + 2) % 6  # in place: same tensor, new graph
    for seed in range(4):  # new tensors of the same shape, the old ones freed
        fresh = torch.randint(0, 6, (2, 6), generator=_gen(seed))
        _assert_matches_stock(conv, lambda m, L, fresh=fresh: m(L["x"], fresh), {"x": x})


def test_explain_edge_mask():
    """test_message_passing.py::test_explain_message, on GraphConv (a wrapped layer): with
    explain=True a missing edge mask is an error, an all-zero mask silences every message, and a
    mask scales each message (here: equal to the same masks given as edge weights, and to stock).
    Built as in test_gcn_conv_with_decomposed_layers (GraphConv's template compiled by stock PyG
    first, this layer built while enabled)."""
    from torch_geometric.explain.algorithm.utils import clear_masks, set_masks

    with _stock():
        GraphConv(8, 12)
    x = _randn(4, 8)
    conv = GraphConv(8, 12)
    conv.explain = True
    with pytest.raises(ValueError, match="pre-defined 'edge_mask'"):
        conv(x, EDGE_INDEX)
    clear_masks(conv)
    for mask in (torch.zeros(4), torch.ones(4), torch.tensor([1.0, 0.0, 0.5, 2.0])):
        set_masks(conv, mask, EDGE_INDEX, apply_sigmoid=False)
        out = conv(x, EDGE_INDEX)
        with _stock():
            out_stock = conv(x, EDGE_INDEX)
        clear_masks(conv)
        _close(out, out_stock)
        _close(out, conv(x, EDGE_INDEX, mask))


FRESH_PROCESS = r"""
import torch
import mmvref.pyg
from torch_geometric.nn import GATConv, GCNConv, GraphConv
from torch_geometric.utils import to_torch_coo_tensor, to_torch_csc_tensor
from torch_geometric.explain.algorithm.utils import set_masks

mmvref.pyg.enable()  # before any layer exists: no propagate template compiled yet
torch.manual_seed(0)
x = torch.randn(4, 8)
ei = torch.tensor([[0, 0, 0, 1, 2, 3], [1, 2, 3, 0, 0, 0]])  # no self-loop: GCN's are added alike
coo = to_torch_coo_tensor(ei, size=(4, 4)).t().coalesce()
csr = to_torch_csc_tensor(ei, size=(4, 4)).t()
for conv in (GATConv(8, 12, heads=2), GCNConv(8, 12), GraphConv(8, 12)):
    grads = []
    for adj in (ei, csr, coo):
        xl = x.clone().requires_grad_()
        conv.zero_grad()
        out = conv(xl, adj)
        (out * torch.arange(out.numel()).view_as(out).sin()).sum().backward()
        grads.append((out.detach(), xl.grad))
    for out, g in grads[1:]:
        torch.testing.assert_close(out, grads[0][0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(g, grads[0][1], rtol=1e-5, atol=1e-6)

conv = GCNConv(8, 12)
seen = []
conv.register_message_forward_pre_hook(lambda m, inp: seen.append(tuple(inp[0]["x_j"].shape)))
conv.decomposed_layers = 2
conv(x, ei)
assert seen == [(10, 6), (10, 6)], seen

conv = GraphConv(8, 12)
conv.explain = True
mask = torch.tensor([1.0, 0.0, 0.5, 2.0, 0.0, 3.0])
set_masks(conv, mask, ei, apply_sigmoid=False)
out = conv(x, ei)
conv.explain = False
torch.testing.assert_close(out, conv(x, ei, mask), rtol=1e-5, atol=1e-6)
print("fresh process ok")
"""


def test_fresh_process_enable_then_build():
    """Not upstream: the usual order of a script (import, enable(), then build the model) in a
    fresh interpreter, where no convolution's propagate template is compiled yet: GATConv, GCNConv
    and GraphConv train (forward and backward) with an edge index, a CSR and a COO adjacency alike;
    decomposed_layers and explain masks work as in PyG."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", FRESH_PROCESS], capture_output=True,
                       text=True, cwd=root, timeout=600)
    assert r.returncode == 0 and "fresh process ok" in r.stdout, r.stderr[-4000:]


@pytest.mark.parametrize("bad", ["too_large", "negative"])
def test_invalid_edge_index_raises_as_stock(bad):
    """Not upstream: an edge index out of the nodes' range raises stock PyG's error."""
    x = _randn(4, 8)
    edge_index = torch.tensor([[0, 1, 7 if bad == "too_large" else -1], [1, 0, 1]])
    for conv in (GraphConv(8, 12), SAGEConv(8, 12), GINConv(_gin_mlp(8))):
        with _stock():
            with pytest.raises(IndexError) as stock_err:
                conv(x, edge_index)
        with pytest.raises(IndexError) as err:
            conv(x, edge_index)
        assert str(err.value) == str(stock_err.value)
