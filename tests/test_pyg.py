"""mmvref.pyg (issue 33): routing on and off, the fused product against a plain-loop oracle, PyG's
layers and a training loop against stock PyG, the graph cache never stale, and the fallbacks."""
from __future__ import annotations

import contextlib
import threading
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import torch_geometric  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch_geometric import EdgeIndex  # noqa: E402
from torch_geometric.nn import GATConv, GCNConv, GINConv, GraphConv, SAGEConv  # noqa: E402
from torch_geometric.utils import to_torch_csc_tensor, to_torch_csr_tensor  # noqa: E402

import mmvref.pyg as mp  # noqa: E402
from mmvref.pyg import _routes  # noqa: E402
from mmvref.pyg._fused import gspmm  # noqa: E402
from mmvref.pyg._graph import Graph  # noqa: E402

# PyG's and torch's own warnings on the stock runs these tests compare with; native_only: the fused
# kernels have one portable path (no intrinsics), which CI's haswell stage skips by its rule
pytestmark = [pytest.mark.native_only,
              pytest.mark.filterwarnings("ignore:Sparse invariant checks:UserWarning"),
              pytest.mark.filterwarnings("ignore:Converting sparse tensor to CSR:UserWarning"),
              pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta:UserWarning")]

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-12)}


@pytest.fixture(autouse=True)
def _off_after():
    mp.clear_cache()
    yield
    mp.disable()


def _graph(seed, n_src, n_dst, E):
    g = torch.Generator().manual_seed(seed)
    return torch.stack([torch.randint(0, n_src, (E,), generator=g), torch.randint(0, n_dst, (E,), generator=g)])


# ----------------------------------------------------------------------------- the oracle

def _oracle(ei, x, w, reduce, n_dst):
    """Plain loops over the edges: out[i] = reduce over e into i of w_e * x[src_e] (torch ops on one
    row at a time, so that torch's autograd gives the oracle's gradients)."""
    heads = 1 if w is None or w.dim() == 1 else w.shape[1]
    rows = []
    for i in range(n_dst):
        msgs = []
        for e in range(ei.shape[1]):
            if int(ei[1, e]) == i:
                m = x[int(ei[0, e])]
                if w is not None:
                    m = (m.reshape(heads, -1) * w[e].reshape(heads, 1)).reshape(m.shape)
                msgs.append(m)
        if not msgs:
            rows.append(torch.zeros_like(x[0]) if x.shape[0] else torch.zeros(x.shape[1:], dtype=x.dtype))
            continue
        s = torch.stack(msgs)
        rows.append({"sum": s.sum(0), "mean": s.mean(0), "max": s.amax(0), "min": s.amin(0)}[reduce])
    return torch.stack(rows) if rows else torch.zeros((0,) + tuple(x.shape[1:]), dtype=x.dtype)


@settings(deadline=None)
@given(seed=st.integers(0, 2**16), n_src=st.integers(0, 9), n_dst=st.integers(0, 9), E=st.integers(0, 40),
       feats=st.sampled_from([(1,), (3,), (8,), (2, 3), (37,), (85,)]), weights=st.sampled_from(["none", "edge", "head"]),
       reduce=st.sampled_from(["sum", "mean", "max", "min"]), dtype=st.sampled_from([torch.float32, torch.float64]))
def test_fused_product_and_gradients_match_the_loop_oracle(seed, n_src, n_dst, E, feats, weights, reduce, dtype):
    if n_src == 0 or n_dst == 0:
        E = 0
    n_src, n_dst = max(n_src, 1), max(n_dst, 1)
    ei = _graph(seed, n_src, n_dst, E)
    gen = torch.Generator().manual_seed(seed + 1)
    if weights == "head" and len(feats) == 1:
        feats = (2,) + feats
    x = torch.randn((n_src,) + feats, generator=gen, dtype=dtype).requires_grad_()
    heads = feats[0] if weights == "head" else 1
    w = None
    if weights == "edge":
        w = torch.rand(E, generator=gen, dtype=dtype).add_(0.5).requires_grad_()
    elif weights == "head":
        w = torch.rand(E, heads, generator=gen, dtype=dtype).add_(0.5).requires_grad_()
    if weights != "head" and len(feats) == 2:
        x = x.detach().reshape(n_src, -1).requires_grad_()
    graph = Graph.from_edges(ei[1].numpy(), ei[0].numpy(), n_dst, n_src)
    out = gspmm(graph, x, w, reduce, heads)
    ref = _oracle(ei, x, w, reduce, n_dst)
    torch.testing.assert_close(out, ref, **TOL[dtype])
    g = torch.randn(out.shape, generator=gen, dtype=dtype)
    params = [x] + ([w] if w is not None else [])
    got = torch.autograd.grad(out, params, g, allow_unused=True)
    if ref.requires_grad:
        want = torch.autograd.grad(ref, params, g, allow_unused=True)
    else:  # no edge: the oracle's zeros depend on nothing
        want = [None] * len(params)
    for a, b, p in zip(got, want, params):
        a = torch.zeros_like(p) if a is None else a
        b = torch.zeros_like(p) if b is None else b
        torch.testing.assert_close(a, b, **TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("F", [1, 5, 37])
def test_fused_mean_gradient_divides_by_each_destination_degree(F, dtype):
    """The unweighted mean's backward (a transposed product with 1 / degree per entry:
    ``Graph.mean_backward_weights``) against the loop oracle's gradient, on a graph whose
    destinations have in-degrees 0 to 5 (a repeated edge counted twice), sources of several
    out-degrees, and more sources than destinations."""
    src = [0, 1, 2, 3, 4, 5, 6, 0, 0, 3, 6, 2, 2, 5, 1, 1]
    dst = [1, 1, 1, 1, 1, 3, 3, 3, 4, 4, 0, 5, 5, 5, 5, 5]  # degrees: 1, 5, 0, 3, 2, 5
    ei = torch.tensor([src, dst])
    gen = torch.Generator().manual_seed(F)
    x = torch.randn(8, F, generator=gen, dtype=dtype).requires_grad_()
    graph = Graph.from_edges(ei[1].numpy(), ei[0].numpy(), 6, 8)
    out = gspmm(graph, x, None, "mean")
    ref = _oracle(ei, x, None, "mean", 6)
    torch.testing.assert_close(out, ref, **TOL[dtype])
    g = torch.randn(out.shape, generator=gen, dtype=dtype)
    (got,) = torch.autograd.grad(out, x, g)
    (want,) = torch.autograd.grad(ref, x, g)
    torch.testing.assert_close(got, want, **TOL[dtype])
    assert float(got[7].abs().max()) == 0.0  # a source with no edge gets no gradient


def test_bad_indices_are_not_prepared():
    ei = torch.tensor([[0, 5], [0, 1]])
    assert Graph.from_edges(ei[1].numpy(), ei[0].numpy(), 2, 3) is None
    assert Graph.from_csr(np.array([0, 2, 1]), np.array([0, 1]), 2) is None


# ----------------------------------------------------------------------------- routing on and off

def test_enable_rebinds_every_module_and_disable_restores_them():
    import torch_geometric.nn.aggr.base as base
    import torch_geometric.nn.conv.sage_conv as sage_mod
    import torch_geometric.utils as U
    from torch_geometric.utils import _scatter, _segment, _softmax, _spmm

    originals = (_scatter.scatter, _segment.segment, _spmm.spmm)
    for _, _, build in _routes.fused_kinds().values():
        build()  # PyG compiles each class's propagate template with its first layer (enable() too)
    prop = {c: c.__dict__.get("propagate") for c in (SAGEConv, GCNConv, GINConv, GraphConv, GATConv)}
    assert all(p is not None for p in prop.values())
    assert not mp.is_enabled()
    mp.enable()
    assert mp.is_enabled()
    for mod in (U, base, _softmax, _scatter):  # the defining module too: its own callers are routed
        assert mod.scatter is not originals[0] and mod.scatter.__wrapped__ is originals[0]
    assert base.segment.__wrapped__ is originals[1]
    assert sage_mod.spmm.__wrapped__ is originals[2]
    for c in prop:
        assert c.__dict__["propagate"].__wrapped__ is not None
    mp.disable()
    assert not mp.is_enabled()
    assert (U.scatter, U.segment, U.spmm) == originals
    assert (base.scatter, base.segment, _softmax.scatter, sage_mod.spmm) == (originals[0], originals[1],
                                                                             originals[0], originals[2])
    assert {c: c.__dict__.get("propagate") for c in prop} == prop


def test_context_manager_restores_the_previous_state():
    with mp.enable():
        assert mp.is_enabled()
        with mp.enable():
            assert mp.is_enabled()
        assert mp.is_enabled()  # the inner block found it on and leaves it on
    assert not mp.is_enabled()


def test_a_layer_built_while_enabled_works_after_disable():
    with mp.enable():
        conv = GCNConv(4, 3)
    ei = _graph(0, 6, 6, 20)
    x = torch.randn(6, 4)
    out = conv(x, ei)
    assert conv.__class__.propagate.__module__ != _routes.__name__
    with mp.enable():
        torch.testing.assert_close(conv(x, ei), out, **TOL[torch.float32])


def test_an_untested_pyg_version_warns_once_and_does_nothing(monkeypatch):
    monkeypatch.setattr(torch_geometric, "__version__", "2.5.3")
    monkeypatch.setattr(mp, "_warned", False)
    with pytest.warns(RuntimeWarning, match="2.5.3"):
        mp.enable()
    assert not mp.is_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mp.enable()  # no second warning
    assert not mp.is_enabled()


def test_cache_bytes_is_checked():
    with pytest.raises(ValueError, match="cache_bytes"):
        mp.enable(cache_bytes=-1)


# ----------------------------------------------------------------------------- PyG's layers against stock

def _run(conv, args, x, params):
    out = conv(*args)
    g = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(out.shape)
    grads = torch.autograd.grad((out * g).sum(), params, allow_unused=True)
    return out.detach(), grads


def _compare(conv, args, params, dtype, expect_fused=True):
    ref = _run(conv, args, None, params)
    with mp.enable():
        before = mp.stats()["fused"]
        got = _run(conv, args, None, params)
        fused = mp.stats()["fused"] - before
    assert (fused > 0) == expect_fused
    torch.testing.assert_close(got[0], ref[0], **TOL[dtype])
    for a, b in zip(got[1], ref[1]):
        if b is None:
            assert a is None
        else:
            torch.testing.assert_close(a, b, **TOL[dtype])


LAYERS = [
    ("sage-mean", lambda F: SAGEConv(F, 5), False),
    ("sage-sum", lambda F: SAGEConv(F, 5, aggr="sum"), False),
    ("sage-max", lambda F: SAGEConv(F, 5, aggr="max"), False),
    ("sage-min", lambda F: SAGEConv(F, 5, aggr="min"), False),
    ("gin", lambda F: GINConv(torch.nn.Linear(F, 5)), False),
    ("gcn", lambda F: GCNConv(F, 5), True),
    ("graphconv", lambda F: GraphConv(F, 5), True),
    ("graphconv-max", lambda F: GraphConv(F, 5, aggr="max"), True),
    ("gat", lambda F: GATConv(F, 3, heads=2), False),
]


@pytest.mark.parametrize("name,make,weighted", LAYERS, ids=[c[0] for c in LAYERS])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rep", ["edge_index", "EdgeIndex", "csr", "csc"])
def test_layers_equal_stock(name, make, weighted, dtype, rep):
    torch.manual_seed(1)
    N, F = 30, 6
    ei = _graph(3, N, N, 150)
    x = torch.randn(N, F, dtype=dtype, requires_grad=True)
    conv = make(F).to(dtype)
    w = torch.rand(ei.shape[1], dtype=dtype).requires_grad_() if weighted else None
    params = [x] + list(conv.parameters()) + ([w] if w is not None else [])
    if rep == "edge_index":
        graph = ei
    elif rep == "EdgeIndex":
        graph = EdgeIndex(ei, sparse_size=(N, N)).sort_by("col")[0]
        if w is not None:
            w = w.detach()[EdgeIndex(ei, sparse_size=(N, N)).sort_by("col")[1]].requires_grad_()
            params[-1] = w
    else:
        if name == "gat" and rep == "csc":
            pytest.skip("PyG's message passing collects edges from COO or CSR adjacencies only")
        if name == "gcn" and rep == "csc":
            pytest.skip("PyG's gcn_norm does not take a CSC adjacency")
        to = to_torch_csr_tensor if rep == "csr" else to_torch_csc_tensor
        # the adjacency's values are the edge weights (ones without): the features' dtype
        values = torch.ones(ei.shape[1], dtype=dtype) if w is None else w.detach()
        graph = to(ei.flip(0), values, size=(N, N))
        if w is not None:
            params = params[:-1]
            w = None
    args = (x, graph) + ((w,) if w is not None else ())
    _compare(conv, args, params, dtype)


def test_bipartite_inputs_and_size():
    torch.manual_seed(2)
    n_src, n_dst, F = 12, 7, 4
    ei = _graph(4, n_src, n_dst, 40)
    xs = torch.randn(n_src, F, requires_grad=True)
    xd = torch.randn(n_dst, F, requires_grad=True)
    conv = SAGEConv((F, F), 3, aggr="max")
    _compare(conv, ((xs, xd), ei, (n_src, n_dst)), [xs, xd] + list(conv.parameters()), torch.float32)
    gat = GATConv((F, F), 2, heads=2, add_self_loops=False)
    _compare(gat, ((xs, xd), ei, (n_src, n_dst)), [xs, xd] + list(gat.parameters()), torch.float32)


def test_isolated_destinations_and_an_empty_graph():
    x = torch.randn(5, 3, requires_grad=True)
    conv = SAGEConv(3, 2, aggr="max")
    ei = torch.tensor([[0, 1], [2, 2]])
    _compare(conv, (x, ei), [x] + list(conv.parameters()), torch.float32)
    _compare(conv, (x, torch.empty((2, 0), dtype=torch.long)), [x] + list(conv.parameters()), torch.float32)


def test_a_training_loop_equals_stock():
    torch.manual_seed(5)
    N, F, C = 60, 8, 3
    ei = _graph(6, N, N, 400)
    x, y = torch.randn(N, F), torch.randint(0, C, (N,))

    def losses(enabled):
        torch.manual_seed(7)
        m = torch.nn.ModuleList([SAGEConv(F, 16), GCNConv(16, 16), GATConv(16, C, heads=1)])
        opt = torch.optim.Adam(m.parameters(), lr=0.01)
        out = []
        with mp.enable() if enabled else contextlib.nullcontext():
            for _ in range(5):
                opt.zero_grad()
                h = torch.relu(m[0](x, ei))
                h = torch.relu(m[1](h, ei))
                loss = torch.nn.functional.cross_entropy(m[2](h, ei), y)
                loss.backward()
                opt.step()
                out.append(loss.item())
        return out

    assert np.allclose(losses(True), losses(False), rtol=1e-5, atol=1e-6)


# ----------------------------------------------------------------------------- the cache

def test_an_edge_index_changed_in_place_is_not_served_stale():
    N, F = 20, 4
    ei = _graph(8, N, N, 60)
    x = torch.randn(N, F)
    conv = SAGEConv(F, 3, aggr="sum")
    with mp.enable():
        first = conv(x, ei)
        ei[0, :10] = (ei[0, :10] + 1) % N  # in place: version bumped
        second = conv(x, ei)
        st = mp.stats()
    mp.disable()
    torch.testing.assert_close(second, conv(x, ei))
    assert not torch.allclose(first, second)
    assert st["cache_misses"] >= 2


def test_a_new_tensor_with_the_same_content_hits_and_other_content_misses():
    N, F = 20, 4
    ei = _graph(9, N, N, 60)
    x = torch.randn(N, F)
    conv = SAGEConv(F, 3, aggr="mean")
    with mp.enable():
        conv(x, ei)
        s0 = mp.stats()
        conv(x, ei.clone())
        s1 = mp.stats()
        other = ei.clone()
        other[1, 0] = (other[1, 0] + 1) % N
        got = conv(x, other)
        s2 = mp.stats()
    assert s1["cache_content_hits"] == s0["cache_content_hits"] + 1
    assert s2["cache_misses"] == s1["cache_misses"] + 1
    torch.testing.assert_close(got, conv(x, other))


def test_minibatches_that_change_every_step_get_right_answers():
    torch.manual_seed(10)
    F = 5
    conv = GraphConv(F, 2, aggr="max")
    with mp.enable(cache_bytes=4096):
        for step in range(6):
            N = 10 + step
            ei = _graph(100 + step, N, N, 3 * N)
            x = torch.randn(N, F)
            got = conv(x, ei)
            with _disabled():
                want = conv(x, ei)
            torch.testing.assert_close(got, want, **TOL[torch.float32])
        assert mp.stats()["cache_bytes"] <= 4096


class _disabled:
    def __enter__(self):
        mp.disable()

    def __exit__(self, *a):
        mp.enable()
        return False


def test_a_zero_byte_cache_keeps_nothing_and_stays_right():
    ei = _graph(11, 15, 15, 50)
    x = torch.randn(15, 4)
    conv = SAGEConv(4, 3)
    want = conv(x, ei)
    with mp.enable(cache_bytes=0):
        for _ in range(2):
            torch.testing.assert_close(conv(x, ei), want, **TOL[torch.float32])
        assert mp.stats()["cache_graphs"] == 0
    _routes.cache.max_bytes = 1 << 30


def test_a_narrow_new_graph_takes_the_unfused_path():
    ei = _graph(12, 15, 15, 50)
    x = torch.randn(15, 1, requires_grad=True)
    conv = SAGEConv(1, 3, aggr="sum")
    conv.lin_l.weight.data.fill_(1.0)
    ref = _run(conv, (x, ei), None, [x])
    with mp.enable():
        s0 = mp.stats()
        got = _run(conv, (x, ei), None, [x])
        s1 = mp.stats()
    assert s1["fused"] == s0["fused"] and s1["fallback"] > s0["fallback"]
    torch.testing.assert_close(got[0], ref[0])
    torch.testing.assert_close(got[1][0], ref[1][0])


# ----------------------------------------------------------------------------- what stays on PyG's code

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_runs_pyg_code(dtype):
    ei = _graph(13, 10, 10, 30)
    x = torch.randn(10, 4).to(dtype)
    conv = SAGEConv(4, 3).to(dtype)
    want = conv(x, ei)
    with mp.enable():
        s0 = mp.stats()
        got = conv(x, ei)
        s1 = mp.stats()
    assert s1["fused"] == s0["fused"] and s1["fallback"] > s0["fallback"]
    assert torch.equal(got, want)


def test_hooks_and_integer_scatter_run_pyg_code():
    ei = _graph(14, 10, 10, 30)
    x = torch.randn(10, 4)
    conv = SAGEConv(4, 3)
    seen = []
    conv.register_message_forward_hook(lambda m, i, o: seen.append(o.shape))
    want = conv(x, ei)
    with mp.enable():
        s0 = mp.stats()
        got = conv(x, ei)
        assert mp.stats()["fused"] == s0["fused"]
        from torch_geometric.utils import scatter

        ints = scatter(torch.arange(6), torch.tensor([0, 0, 1, 1, 2, 2]), reduce="sum")
    assert len(seen) == 2
    torch.testing.assert_close(got, want)
    assert ints.tolist() == [1, 5, 9]


def test_scatter_routing_rule():
    """Under a gradient: max/min at every width, sums from SCATTER_SUM_MIN_WIDTH values per index
    entry; without one, the same from SCATTER_FORWARD_MIN_ROWS positions (sums: not 1-D, not mul),
    else PyG's scatter."""
    import torch_geometric.utils as U

    big = _routes.SCATTER_FORWARD_MIN_ROWS
    cases = [((4, 3), "max", True, True), ((4,), "min", True, True), ((4, 3), "sum", True, False),
             ((4, 8), "sum", True, True), ((4, 2, 4), "mean", True, True), ((4, 8), "max", False, False),
             ((4, 8), "sum", False, False), ((big - 1, 8), "sum", False, False), ((big, 8), "sum", False, True),
             ((big, 2, 4), "mean", False, True), ((big,), "max", False, True), ((big,), "sum", False, False),
             ((big, 8), "mul", False, False), ((big, 3), "min", False, True)]
    g = torch.Generator().manual_seed(0)
    with mp.enable():
        for shape, reduce, grad, routed in cases:
            index = torch.tensor([0, 1, 1, 3]) if shape[0] == 4 else torch.randint(0, 5, (shape[0],), generator=g)
            # float64: sums of 20,000 terms in another order agree to ~1e-12 (float32: ~1e-5)
            src = torch.randn(shape, generator=g, dtype=torch.float64).requires_grad_(grad)
            before = mp.stats()["unfused"]
            with torch.no_grad() if not grad else contextlib.nullcontext():
                got = U.scatter(src, index, 0, 5, reduce)
            assert (mp.stats()["unfused"] > before) == routed, (shape, reduce, grad)
            with _disabled():
                torch.testing.assert_close(got, U.scatter(src, index, 0, 5, reduce))


def test_scatter_segment_softmax_routed_and_equal(monkeypatch):
    from torch_geometric.utils import scatter, segment, softmax

    monkeypatch.setattr(_routes, "SCATTER_SUM_MIN_WIDTH", 1)  # every width on mmvref's scatter

    g = torch.Generator().manual_seed(15)
    src = torch.randn(50, 3, generator=g, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 8, (50,), generator=g)
    ptr = torch.tensor([0, 10, 10, 30, 50])
    ref = {r: scatter(src, index, 0, 9, r) for r in ("sum", "mean", "min", "max", "mul")}
    ref_seg = {r: segment(src, ptr, r) for r in ("sum", "mean", "min", "max")}
    ref_soft = softmax(src, index, num_nodes=9)
    with mp.enable():
        from torch_geometric.utils import scatter as s2
        from torch_geometric.utils import segment as seg2
        from torch_geometric.utils import softmax as soft2

        s0 = mp.stats()["unfused"]
        for r, want in ref.items():
            torch.testing.assert_close(s2(src, index, 0, 9, r), want)
        for r, want in ref_seg.items():
            torch.testing.assert_close(seg2(src, ptr, r), want)
        got_soft = soft2(src, index, num_nodes=9)
        torch.testing.assert_close(got_soft, ref_soft)
        gs = torch.autograd.grad(got_soft.sum() + s2(src, index, 0, 9, "mean").pow(2).sum(), src)[0]
        assert mp.stats()["unfused"] >= s0 + len(ref) + len(ref_seg) + 2
    gw = torch.autograd.grad(ref_soft.sum() + ref["mean"].pow(2).sum(), src)[0]
    torch.testing.assert_close(gs, gw)


@pytest.mark.parametrize("shape", [(50,), (50, 1), (50, 2), (50, 3, 1)])
def test_segment_routed_from_two_values_per_position(shape):
    """``segment`` runs on mmvref from SEGMENT_MIN_WIDTH values per position; one value per position
    (1-D, or one column) runs PyG's own code. Both equal stock, values and gradients."""
    from torch_geometric.utils import segment

    g = torch.Generator().manual_seed(16)
    src = torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True)
    ptr = torch.tensor([0, 10, 10, 30, 50])
    routed = src.numel() // src.size(0) >= _routes.SEGMENT_MIN_WIDTH
    for r in ("sum", "mean", "min", "max"):
        want = segment(src, ptr, r)
        gw = torch.autograd.grad(want.pow(2).sum(), src)[0]
        with mp.enable():
            from torch_geometric.utils import segment as seg2

            before = mp.stats()["unfused"]
            got = seg2(src, ptr, r)
            assert (mp.stats()["unfused"] > before) == routed, (shape, r)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(torch.autograd.grad(got.pow(2).sum(), src)[0], gw)


def test_concurrent_calls_from_threads():
    N, F = 40, 8
    graphs = [_graph(20 + k, N, N, 200) for k in range(4)]
    x = torch.randn(N, F)
    conv = SAGEConv(F, 4, aggr="max")
    want = [conv(x, ei) for ei in graphs]
    errors = []
    with mp.enable():
        def work(k):
            try:
                for _ in range(5):
                    torch.testing.assert_close(conv(x, graphs[k]), want[k], **TOL[torch.float32])
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[0]


# ----------------------------------------------------------------------------- cold start

_STEP_AFTER_PRECOMPILE = """
import json, torch
from tests.compile_events import listener_source
exec(listener_source("mmvref", "d.py_func.__module__ + '.' + d.py_func.__qualname__"))
import mmvref.pyg
from torch_geometric.nn import GATConv, GCNConv, SAGEConv
mmvref.pyg.enable()
g = torch.Generator().manual_seed(0)
ei = torch.randint(0, 3000, (2, 60000), generator=g)
x = torch.randn(3000, 16, generator=g)
from torch_geometric.utils import to_torch_csr_tensor
adj_t = to_torch_csr_tensor(ei.flip(0), size=(3000, 3000))
for layer in (SAGEConv(16, 16), SAGEConv(16, 16, aggr="max"), GCNConv(16, 16), GATConv(16, 4, heads=4)):
    layer(x, ei).sum().backward()
    layer(x, adj_t).sum().backward()
print(json.dumps({"compiled": compiled, "fused": mmvref.pyg.stats()["fused"]}))
"""


def test_precompile_pyg_leaves_nothing_for_a_first_step(tmp_path):
    """``python -m mmvref precompile --ops pyg`` compiles what a first training step needs: a fresh
    process's step of the fused layers then compiles no kernel of mmvref's."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(root)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    r = subprocess.run([sys.executable, "-m", "mmvref", "precompile", "--ops", "pyg", "--dtypes", "float32,int32",
                        "--jobs", "1"], capture_output=True, text=True, env=env, timeout=600, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipping pyg int32" in r.stdout
    r = subprocess.run([sys.executable, "-c", _STEP_AFTER_PRECOMPILE], capture_output=True, text=True, env=env,
                       timeout=600, cwd=root)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["fused"] == 8
    assert res["compiled"] == [], res["compiled"]


def test_graph_preprocessing_is_memoised_per_graph_and_never_stale():
    """GCN's normalisation and GAT's self-loops, recomputed by PyG on every forward, are kept per
    graph: the same result object for the same graph, a fresh one after an in-place edit."""
    from torch_geometric.nn.conv import gcn_conv

    N = 12
    ei = _graph(30, N, N, 40)
    with mp.enable():
        a = gcn_conv.gcn_norm(ei, None, N)
        b = gcn_conv.gcn_norm(ei.clone(), None, N)
        assert a[0] is b[0] and a[1] is b[1]
        c = gcn_conv.gcn_norm(ei, None, N, improved=True)  # other arguments: computed again
        assert c[1] is not a[1]
        w = torch.rand(ei.shape[1], requires_grad=True)
        d = gcn_conv.gcn_norm(ei, w, N)  # a weight (it may carry a gradient): PyG's code each time
        assert d[1].requires_grad
        ei[0, 0] = (ei[0, 0] + 1) % N
        e = gcn_conv.gcn_norm(ei, None, N)
    mp.disable()
    want = gcn_conv.gcn_norm(ei, None, N)
    assert torch.equal(e[0], want[0]) and torch.allclose(e[1], want[1])
    assert not torch.equal(a[0], e[0])


def test_an_adjacency_changed_in_place_is_not_served_stale():
    N, F = 20, 4
    ei = _graph(31, N, N, 60)
    adj = to_torch_csr_tensor(ei.flip(0), torch.ones(60), size=(N, N))
    x = torch.randn(N, F)
    conv = SAGEConv(F, 3, aggr="max")
    with mp.enable():
        first = conv(x, adj)
        s0 = mp.stats()
        conv(x, adj)
        assert mp.stats()["cache_hits"] > s0["cache_hits"]  # the same adjacency: no content compared
        adj.col_indices()[:5] = (adj.col_indices()[:5] + 1) % N  # in place, through a view
        second = conv(x, adj)
    torch.testing.assert_close(second, conv(x, adj))
    assert not torch.allclose(first, second)


@pytest.mark.parametrize("weights", ["none", "edge", "head"])
def test_wide_max_backward_matches_the_oracle(weights):
    """Features wider than one thread's block of columns (the max/min backward splits columns among
    threads): gradients of x and of the weights equal the loop oracle's."""
    n, E, F = 30, 200, 48
    ei = _graph(40, n, n, E)
    g = torch.Generator().manual_seed(41)
    heads = 3 if weights == "head" else 1
    x = torch.randn(n, F, generator=g, dtype=torch.float64, requires_grad=True)
    w = None
    if weights == "edge":
        w = torch.rand(E, generator=g, dtype=torch.float64).add_(0.5).requires_grad_()
    elif weights == "head":
        w = torch.rand(E, heads, generator=g, dtype=torch.float64).add_(0.5).requires_grad_()
    graph = Graph.from_edges(ei[1].numpy(), ei[0].numpy(), n, n)
    xin = x.view(n, heads, F // heads) if weights == "head" else x
    out = gspmm(graph, xin, w, "max", heads).reshape(n, F)
    ref = _oracle(ei, xin, w, "max", n).reshape(n, F)
    torch.testing.assert_close(out, ref, **TOL[torch.float64])
    up = torch.randn(n, F, generator=g, dtype=torch.float64)
    params = [x] + ([w] if w is not None else [])
    for a, b in zip(torch.autograd.grad(out, params, up), torch.autograd.grad(ref, params, up)):
        torch.testing.assert_close(a, b, **TOL[torch.float64])


@pytest.mark.parametrize("reduce", ["max", "min"])
@pytest.mark.parametrize("weighted", [False, True])
def test_fused_extreme_routes_a_nan_gradient_as_the_unfused_scatter(reduce, weighted):
    """A destination whose messages hold several NaNs in one column: the fused max/min (value and
    gradient) equals the unfused route, ``mmvref.torch_scatter`` over the messages x[src] (times the
    edge weight), whose position is the first NaN's in edge order: one code path's result whichever
    route the graph takes."""
    from mmvref import torch_scatter

    n, E, F = 6, 60, 13
    g = torch.Generator().manual_seed(5)
    ei = torch.stack([torch.randint(0, n, (E,), generator=g), torch.randint(0, n, (E,), generator=g)])
    x = torch.randn(n, F, generator=g, dtype=torch.float64)
    x[torch.rand(n, F, generator=g) < 0.3] = float("nan")
    x.requires_grad_()
    w = torch.rand(E, generator=g, dtype=torch.float64).add_(0.5).requires_grad_() if weighted else None
    graph = Graph.from_edges(ei[1].numpy(), ei[0].numpy(), n, n)
    out = gspmm(graph, x, w, reduce, 1)
    msgs = x[ei[0]] if w is None else x[ei[0]] * w.view(-1, 1)
    fn = torch_scatter.scatter_max if reduce == "max" else torch_scatter.scatter_min
    want, pos = fn(msgs, ei[1], dim=0, dim_size=n)
    assert torch.isnan(want).sum() > 0
    torch.testing.assert_close(out, want, rtol=0, atol=0, equal_nan=True)
    up = torch.randn(n, F, generator=g, dtype=torch.float64)
    params = [x] + ([w] if w is not None else [])
    got = torch.autograd.grad(out, params, up)
    # the unfused route's gradient, by hand: each output's gradient to the message at its position
    gx = torch.zeros(n, F, dtype=torch.float64)
    gw = torch.zeros(E, dtype=torch.float64)
    for d in range(n):
        for f in range(F):
            e = int(pos[d, f])
            if e < E:
                gx[ei[0, e], f] += up[d, f] * (1.0 if w is None else w[e].item())
                gw[e] += up[d, f] * x[ei[0, e], f].item()
    torch.testing.assert_close(got[0], gx, rtol=1e-12, atol=0)
    if w is not None:
        torch.testing.assert_close(got[1], gw, rtol=1e-12, atol=0, equal_nan=True)


_THREADS_SCRIPT = """
import sys, warnings, numpy as np
if sys.argv[1] == "torch-first":
    import torch, mmvref.pyg
import mmvref
mmvref.scan(np.arange(1 << 20, dtype=np.int64))   # launches mmvref's threading layer
import torch, mmvref.pyg
from mmvref import _threading
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    for _ in range(2):
        mmvref.pyg.enable(); mmvref.pyg.disable()
print("RESULT", _threading.describe()["policy"], sum("compete for the cores" in str(x.message) for x in w))
"""


@pytest.mark.native_only
def test_enable_warns_once_when_mmvrefs_threads_compete_with_torchs():
    """mmvref.pyg imported first: the layer runs on torch's OpenMP threads, no warning; mmvref's
    layer launched before it was imported: one RuntimeWarning naming the fix."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING_LAYER")}
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    got = {}
    for order in ("torch-first", "mmvref-first"):
        r = subprocess.run([sys.executable, "-c", _THREADS_SCRIPT, order], capture_output=True, text=True, env=env,
                           timeout=300, cwd=root)
        assert r.returncode == 0, r.stderr
        got[order] = r.stdout.split("RESULT ")[1].split()
    assert got["torch-first"] == ["omp-on-torch-threads+fork-one-thread", "0"]
    assert got["mmvref-first"][0] in ("tbb", "workqueue+lock") and got["mmvref-first"][1] == "1"


def _loop_extreme(src, dst, n, reduce):
    """Plain-loop oracle of PyG's scatter max/min: per destination the extreme of its rows (NaN
    wins, as torch's maximum); 0 where a destination has no row."""
    out = torch.zeros((n,) + tuple(src.shape[1:]), dtype=src.dtype)
    flat, seen = src.reshape(src.size(0), -1), [False] * n
    o = out.view(n, -1)
    for e in range(src.size(0)):
        i = int(dst[e])
        for k in range(flat.size(1)):
            v = flat[e, k]
            if not seen[i] or torch.isnan(v) or (v > o[i, k] if reduce in ("max", "amax") else v < o[i, k]):
                if not (seen[i] and torch.isnan(o[i, k])):
                    o[i, k] = v
        seen[i] = True
    return out


@pytest.mark.parametrize("shape", [(), (1,), (4,), (2, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_extreme_scatter_over_an_edge_index_row_runs_on_the_prepared_graph(shape, dtype):
    """scatter max/min without a gradient whose index is row 1 of an edge index (GAT's softmax):
    the graph's CSR order and torch's segment_reduce, equal to a plain loop bit for bit (empty
    destinations 0, NaN kept); the graph is prepared once and shared with propagate's cache; other
    indices, a gradient, or a changed edge index take the other paths and stay right."""
    from torch_geometric.utils import scatter

    g = torch.Generator().manual_seed(33)
    n, E = 12, 40
    ei = torch.stack([torch.randint(0, n, (E,), generator=g), torch.randint(0, n - 3, (E,), generator=g)])
    src = torch.randn((E,) + shape, generator=g, dtype=dtype)
    src.view(E, -1)[::7, 0] = float("nan")
    mp.clear_cache()
    width = src.numel() // E
    with mp.enable():
        from torch_geometric.utils import scatter as s2

        if width < _routes.PREPARE_MIN_FEATURES:  # too narrow to prepare a new graph: the unfused path
            st = mp.stats()
            torch.testing.assert_close(s2(src, ei[1], 0, n, "max"), _loop_extreme(src, ei[1], n, "max"), rtol=0,
                                       atol=0, equal_nan=True)
            assert mp.stats()["cache_graphs"] == 0
            s2(torch.zeros(E, 2, dtype=dtype), ei[1], 0, n, "max")  # a wide call prepares it (as GAT's first layer)
        st0 = mp.stats()
        for r in ("max", "min", "amax", "amin"):
            st = mp.stats()
            got = s2(src, ei[1], 0, n, r)
            after = mp.stats()
            assert after["unfused"] == st["unfused"] + 1 and after["fallback"] == st["fallback"]
            assert after["cache_graphs"] == 1
            want = _loop_extreme(src, ei[1], n, r)
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
            assert got.dtype == dtype and got.shape == want.shape
        assert mp.stats()["cache_misses"] - st0["cache_misses"] == (0 if width < 2 else 1)  # prepared once
        # not a row of an edge index, a source row, a gradient: the other paths, the same values
        for idx, s in ((ei[1].clone(), src), (ei[0], src), (ei[1], src.clone().requires_grad_())):
            before = mp.stats()["cache_hits"]
            got = s2(s, idx, 0, n, "max")
            assert mp.stats()["cache_hits"] == before
            torch.testing.assert_close(got.detach(), _loop_extreme(src, idx, n, "max"), rtol=0, atol=0,
                                       equal_nan=True)
        ei[1, :5] = n - 1  # changed in place: never the stale graph
        torch.testing.assert_close(s2(src, ei[1], 0, n, "max"), _loop_extreme(src, ei[1], n, "max"), rtol=0, atol=0,
                                   equal_nan=True)
    with _disabled():
        torch.testing.assert_close(scatter(src, ei[1], 0, n, "max"), _loop_extreme(src, ei[1], n, "max"), rtol=0,
                                   atol=0, equal_nan=True)
