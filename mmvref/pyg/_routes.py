"""What ``mmvref.pyg.enable()`` puts in place of PyG's code, and the conditions under which each
replacement takes a call (otherwise it calls PyG's own function with the same arguments).

- ``scatter`` / ``segment`` (``torch_geometric.utils``): mmvref's differentiable reductions
  (``mmvref.torch_scatter``) for CPU float32/float64 values with an int64 index (``scatter``: where
  it pays, see ``_scatter_pays``; ``segment``: from ``SEGMENT_MIN_WIDTH`` values per position). This also routes
  everything PyG builds on them: ``Aggregation.reduce`` (sum, mean, min, max, mul) and the
  aggregations composed of it (var, std, powermean, ...), and ``softmax``, whose maxima and sums
  are scatter/segment calls. A max/min without a gradient over row 1 of an edge index (GAT's
  softmax) runs over that graph's prepared CSR with torch's ``segment_reduce`` (no kernel to
  compile in a first step).
- ``spmm`` (``torch_geometric.utils``): a CPU torch sparse CSR or CSC adjacency times float32/64
  features runs the fused product (``gspmm``), its graph prepared once per adjacency.
- ``propagate`` of SAGEConv, GINConv, GCNConv, GraphConv and GATConv: with a plain or ``EdgeIndex``
  edge index, the message (copy the source features, scale them by ``edge_weight``, or by GAT's
  ``alpha`` per head) and its aggregation (sum, mean, max, min) run as one fused product over the
  graph's CSR, prepared once per edge index (``GraphCache``).

A fused call needs what the fused kernels compute exactly what PyG would: the layer's own
``message`` and PyG's ``aggregate``/``update``, flow ``source_to_target``, features on the node
dimension 0, no hooks, no explainer, no decomposed layers, no torch.compile tracing, CPU float32 or
float64 features with weights of the same dtype. A graph seen for the first time is prepared only
when it pays within the call: the fused product saves about E x F elements moved, the preparation
costs a counting sort of E edges, so a new graph is prepared when the features have at least
``PREPARE_MIN_FEATURES`` columns (below that, PyG's unfused path runs, with mmvref's scatter).
"""
from __future__ import annotations

import threading

import torch
from torch import Tensor

from .. import torch_scatter as ts
from ._fused import gspmm
from ._graph import Graph, GraphCache, fits_int32

#: feature columns from which a graph not in the cache is prepared for a fused call (measured: see
#: docs/graph-learning.md)
PREPARE_MIN_FEATURES = 2

_FLOATS = (torch.float32, torch.float64)
_SCATTER_REDUCES = {"sum": "sum", "add": "sum", "mean": "mean", "min": "min", "max": "max",
                    "amin": "min", "amax": "max", "mul": "mul"}
_FUSED_REDUCES = {"add": "sum", "sum": "sum", "mean": "mean", "max": "max", "min": "min"}

cache = GraphCache()

_counts_lock = threading.Lock()
counts = {"fused": 0, "unfused": 0, "fallback": 0}


def _count(key: str) -> None:
    with _counts_lock:
        counts[key] += 1


def _tracing() -> bool:
    return torch.compiler.is_compiling() or torch.jit.is_scripting() or torch.jit.is_tracing()


def _cpu_float(t) -> bool:
    return isinstance(t, Tensor) and t.device.type == "cpu" and t.dtype in _FLOATS and not t.is_sparse \
        and t.layout == torch.strided


# ----------------------------------------------------------------------------- scatter / segment

#: the width (elements per index entry) from which a sum, mean or product under a gradient (a sum or
#: mean without one) runs on mmvref's scatter
SCATTER_SUM_MIN_WIDTH = 8
#: the positions along the reduced dimension from which a scatter without a gradient runs on mmvref's
SCATTER_FORWARD_MIN_ROWS = 100_000


def _scatter_pays(src: Tensor, dim: int, reduce: str) -> bool:
    """Whether mmvref's scatter beats PyG's (torch's ``scatter_add_``/``scatter_reduce_``) here,
    measured on 2 threads. Under a gradient (forward + backward at E = 4e5): max/min at every width
    (torch's amax/amin backward is slow: 1.5x at F = 1, 3-6x at F = 2-128) and sums from
    ``SCATTER_SUM_MIN_WIDTH`` (1.3-3.7x at F = 8-128; at F = 1-4 a tie or a loss, 0.5-0.7x).
    Without one (forward only), from ``SCATTER_FORWARD_MIN_ROWS`` positions: max/min at every width
    (F = 1: 2.1-4.4x, F = 8-128: 1.3-13x at E = 1e5-4e5) and sums from ``SCATTER_SUM_MIN_WIDTH``
    (1.4-5.2x); below, torch's forward kernels are as fast or faster (E = 2e4: 0.6-0.9x at
    F = 16-128), and a 1-D sum or mean loses at every size (0.1-0.8x), so PyG's code runs."""
    n = src.size(dim)
    wide = n == 0 or src.numel() // n >= SCATTER_SUM_MIN_WIDTH
    if torch.is_grad_enabled() and src.requires_grad:
        return reduce in ("min", "max") or wide
    if n < SCATTER_FORWARD_MIN_ROWS:
        return False
    return reduce in ("min", "max") or (reduce in ("sum", "mean") and wide)


def _destination_row_graph(index: Tensor, n_dst, width: int):
    """The prepared graph whose destinations are ``index``, where ``index`` is row 1 of a plain
    contiguous edge index (PyG's ``collect`` hands ``edge_index[1]`` to edge updates: GAT's
    attention softmax), with ``n_dst`` destinations and as many sources; else None."""
    base = index._base
    if (type(index) is not Tensor or type(base) is not Tensor or not isinstance(n_dst, int) or base.dim() != 2
            or base.size(0) != 2 or base.dtype != torch.int64 or base.device.type != "cpu"
            or not base.is_contiguous() or index.dim() != 1 or index.numel() != base.size(1)
            or index.stride(0) != 1 or index.data_ptr() != base.data_ptr() + base.stride(0) * base.element_size()):
        return None
    return _edge_index_graph(base, n_dst, n_dst, width)


def _segment_extreme(graph, src: Tensor, r: str) -> Tensor:
    """``scatter(src, dst, reduce=r)`` for r in max, min, without a gradient, over a prepared graph:
    src's rows gathered into the graph's CSR order, then torch's ``segment_reduce`` (no kernel of
    mmvref's to compile: GAT's first step skips the index check's and the scatter's, 1.6 s, for
    1.3 + 0.6 ms a step on 20k nodes with 4 and 1 heads). Empty rows give 0, as PyG's scatter."""
    f = graph.forward
    perm, offsets, empty = f.torch_order()
    out = torch.segment_reduce(src.index_select(0, perm), r, offsets=offsets, axis=0, unsafe=True)
    if empty is not None:
        out[empty] = 0
    return out


def make_scatter(original):
    def scatter(src: Tensor, index: Tensor, dim: int = 0, dim_size=None, reduce: str = "sum") -> Tensor:
        r = _SCATTER_REDUCES.get(reduce) if isinstance(reduce, str) else None
        if (r in ("max", "min") and isinstance(index, Tensor) and _cpu_float(src) and src.dim() >= 1
                and not (torch.is_grad_enabled() and src.requires_grad) and dim in (0, -src.dim())
                and src.size(0) == index.numel() and not _tracing()):
            graph = _destination_row_graph(index, dim_size, src.numel() // max(src.size(0), 1))
            if graph is not None:
                _count("unfused")
                return _segment_extreme(graph, src, r)
        if (r is None or _tracing() or not _cpu_float(src) or not isinstance(index, Tensor)
                or index.dim() != 1 or index.dtype != torch.int64 or index.device.type != "cpu"
                or not isinstance(dim, int) or not -src.dim() <= dim < src.dim()
                or src.size(dim) != index.numel() or not _scatter_pays(src, dim, r)
                or (r == "mul" and index.numel() == 0)):  # PyG: an empty product is 1 (torch_scatter: 0)
            _count("fallback")
            return original(src, index, dim, dim_size, reduce)
        try:
            out = ts.scatter(src, index, dim, None, dim_size, r)
        except ValueError:
            # an index out of range: PyG's own error (its callers turn it into theirs)
            _count("fallback")
            return original(src, index, dim, dim_size, reduce)
        _count("unfused")
        return out

    scatter.__doc__ = original.__doc__
    scatter.__wrapped__ = original
    return scatter


#: the width (elements per position) from which ``segment`` runs on mmvref's ``segment_csr``: below it,
#: torch's ``segment_reduce`` (PyG's own code) is faster. Measured on 2 threads, 20k / 140k segments
#: of 0.3M / 2.1M positions, width 1 against 4: max forward 0.47-0.79x against 2.7-3.8x, sum forward
#: and backward 0.54-0.70x against 0.92-1.65x (GAT's attention softmax over one head is the width-1
#: case; it also saved that model's first step two compilations, 1.2 s)
SEGMENT_MIN_WIDTH = 2


def make_segment(original):
    def segment(src: Tensor, ptr: Tensor, reduce: str = "sum") -> Tensor:
        if (reduce not in ("sum", "add", "mean", "min", "max") or _tracing() or not _cpu_float(src)
                or not isinstance(ptr, Tensor) or ptr.dtype != torch.int64 or ptr.device.type != "cpu"
                or ptr.dim() != 1 or src.dim() < 1
                or (src.size(0) and src.numel() // src.size(0) < SEGMENT_MIN_WIDTH)):
            _count("fallback")
            return original(src, ptr, reduce)
        try:
            out = ts.segment_csr(src, ptr, reduce="sum" if reduce == "add" else reduce)
        except ValueError:  # a bad ptr: PyG's own error
            _count("fallback")
            return original(src, ptr, reduce)
        _count("unfused")
        return out

    segment.__doc__ = original.__doc__
    segment.__wrapped__ = original
    return segment


# ----------------------------------------------------------------------------- spmm on an adjacency

def _adjacency_graph(adj: Tensor):
    """The prepared graph of a CPU torch sparse CSR/CSC adjacency (rows: destinations), or None."""
    n_dst, n_src = adj.shape
    if adj.layout == torch.sparse_csr:
        ptr, idx = adj.crow_indices(), adj.col_indices()
    else:
        ptr, idx = adj.ccol_indices(), adj.row_indices()
    E = idx.numel()
    if ptr.dtype != torch.int64 or idx.dtype != torch.int64 or not fits_int32(E, n_dst, n_src):
        return None

    def build():
        p, c = ptr.numpy(), idx.numpy()
        if adj.layout == torch.sparse_csr:
            return Graph.from_csr(p, c, n_src)
        import numpy as np

        if p[0] != 0 or p[-1] != E or (n_src and np.any(np.diff(p) < 0)):
            return None
        src = np.repeat(np.arange(n_src, dtype=np.int64), np.diff(p))
        return Graph.from_edges(c, src, n_dst, n_src)

    return cache.get((ptr, idx), (adj.layout, n_dst, n_src), build, key=adj)


def _weights(values: Tensor):
    """An adjacency's values as the product's weights; None (the copy kernels: no weight read, no
    weight gradient) when they are all 1 and need no gradient, as in an unweighted graph's
    adjacency (``to_torch_csr_tensor`` fills ones): measured 1.6x faster forward and backward."""
    if not values.requires_grad and values.numel() and bool((values == 1).all()):
        return None
    return values


def make_spmm(original):
    def spmm(src, other: Tensor, reduce: str = "sum") -> Tensor:
        r = _FUSED_REDUCES.get(reduce) if isinstance(reduce, str) else None
        if (r is not None and not _tracing() and isinstance(src, Tensor) and src.device.type == "cpu"
                and src.layout in (torch.sparse_csr, torch.sparse_csc) and src.dim() == 2
                and _cpu_float(other) and other.dim() == 2 and src.dtype == other.dtype
                and src.size(1) == other.size(0)):
            g = _adjacency_graph(src)
            if g is not None:
                _count("fused")
                return gspmm(g, other, _weights(src.values()), r)
        _count("fallback")
        return original(src, other, reduce)

    spmm.__doc__ = original.__doc__
    spmm.__wrapped__ = original
    return spmm


# ----------------------------------------------------------------------------- graph preprocessing

class _Result:
    """A memoised result and the bytes of the tensors in it (the cache's bound counts them)."""

    __slots__ = ("value", "nbytes")

    def __init__(self, value):
        self.value = value
        ts = value if isinstance(value, tuple) else (value,)
        self.nbytes = sum(t.numel() * t.element_size() for t in ts if isinstance(t, Tensor) and t.layout == torch.strided)


def _index_key(t):
    """The tensors that determine a graph argument (None: not memoisable): a plain CPU int64 edge
    index, or a CPU sparse CSR adjacency whose values need no gradient."""
    if type(t) is Tensor and t.layout == torch.strided and t.device.type == "cpu" and t.dtype == torch.int64:
        return (t,)
    if (isinstance(t, Tensor) and t.layout == torch.sparse_csr and t.device.type == "cpu"
            and not t.values().requires_grad):
        return (t.crow_indices(), t.col_indices(), t.values())
    return None


def make_memo(original, name, graph_arg, none_args):
    """``original`` (a pure function of a graph, e.g. PyG's ``gcn_norm`` or ``add_self_loops``, which
    the layers call on every forward) with its result kept in the graph cache: the same graph (the
    same tensors unchanged, or equal content) and the same other arguments return the result
    computed before. Only when the arguments named in ``none_args`` are None (no edge attributes or
    weights, which may carry gradients)."""
    import inspect

    sig = inspect.signature(original)

    def memoised(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        key = None if _tracing() or any(a.get(n) is not None for n in none_args) else _index_key(a[graph_arg])
        if key is None:
            return original(*args, **kwargs)
        rest = tuple((k, v if isinstance(v, (int, float, str, bool, type(None), torch.dtype)) else id(v))
                     for k, v in a.items() if k != graph_arg)
        res = cache.get(key, (name,) + rest, lambda: _Result(original(*args, **kwargs)), key=a[graph_arg])
        return res.value

    memoised.__doc__ = original.__doc__
    memoised.__wrapped__ = original
    return memoised


# ----------------------------------------------------------------------------- fused propagate

_HOOKS = ("_propagate_forward_pre_hooks", "_propagate_forward_hooks", "_message_forward_pre_hooks",
          "_message_forward_hooks", "_aggregate_forward_pre_hooks", "_aggregate_forward_hooks",
          "_message_and_aggregate_forward_pre_hooks", "_message_and_aggregate_forward_hooks")


def _edge_index_graph(edge_index: Tensor, n_dst: int, n_src: int, features: int):
    """The prepared graph of an edge index (row 0 sources, row 1 destinations), or None: an index
    that leaves its range (PyG's own path raises the error), or a new graph too narrow to pay."""
    E = edge_index.size(1)
    if not fits_int32(E, n_dst, n_src):
        return None
    plain = edge_index.as_subclass(Tensor) if type(edge_index) is not Tensor else edge_index

    def build():
        if features < PREPARE_MIN_FEATURES:
            return None
        ei = plain.numpy()
        return Graph.from_edges(ei[1], ei[0], n_dst, n_src)

    return cache.get((edge_index,), ("edge_index", n_dst, n_src), build)


def fused_kinds():
    """{conv class: (its message function, the name of its weight argument or None, a function
    that builds a small instance)}: the layers whose ``propagate`` gets the fused path."""
    from torch_geometric.nn.conv import GATConv, GCNConv, GINConv, GraphConv, SAGEConv

    return {SAGEConv: (SAGEConv.message, None, lambda: SAGEConv(1, 1)),
            GINConv: (GINConv.message, None, lambda: GINConv(torch.nn.Identity())),
            GCNConv: (GCNConv.message, "edge_weight", lambda: GCNConv(1, 1)),
            GraphConv: (GraphConv.message, "edge_weight", lambda: GraphConv(1, 1)),
            GATConv: (GATConv.message, "alpha", lambda: GATConv(1, 1))}


def ensure_template(cls, build) -> None:
    """Make PyG compile ``cls``'s ``propagate`` template now (building a layer does it once per
    class), so that the fused path's fallback is the template PyG runs, and PyG's own switches
    (``_orig_propagate`` for explain and decomposed layers, ``_jinja_propagate``) point at its code."""
    if "_jinja_propagate" not in cls.__dict__:
        build()


def _try_fused(self, message, weight_name, edge_index, size, kwargs):
    """The fused result of ``self.propagate(edge_index, size, **kwargs)``, or None where PyG's path
    must run."""
    from torch_geometric.nn.aggr import MaxAggregation, MeanAggregation, MinAggregation, SumAggregation
    from torch_geometric.nn.conv import MessagePassing

    aggr = self.aggr
    r = _FUSED_REDUCES.get(aggr) if isinstance(aggr, str) else None
    if (r is None or type(self.aggr_module) not in (SumAggregation, MeanAggregation, MaxAggregation, MinAggregation)
            or type(self).message is not message or type(self).update is not MessagePassing.update
            or type(self).aggregate is not MessagePassing.aggregate or self.flow != "source_to_target"
            or self.explain or self.decomposed_layers != 1 or any(getattr(self, h) for h in _HOOKS)
            or _tracing()):
        return None
    adjacency = (isinstance(edge_index, Tensor) and edge_index.layout == torch.sparse_csr and not self.fuse
                 and edge_index.device.type == "cpu" and edge_index.dim() == 2)
    # a sparse adjacency of a layer PyG fuses goes to its message_and_aggregate (``spmm`` above),
    # which reads the adjacency's values; a layer it does not fuse (GAT) indexes its edges in CSR order
    if not adjacency and (not isinstance(edge_index, Tensor) or edge_index.layout != torch.strided
                          or edge_index.dim() != 2 or edge_index.size(0) != 2 or edge_index.dtype != torch.int64
                          or edge_index.device.type != "cpu" or not edge_index.is_contiguous()):
        return None
    extra = set(kwargs) - {"x", weight_name}
    if extra:
        return None
    x = kwargs.get("x")
    w = kwargs.get(weight_name) if weight_name else None
    x_src = x[0] if isinstance(x, (tuple, list)) else x
    if not _cpu_float(x_src) or x_src.dim() < 2 or self.node_dim % x_src.dim() != 0:
        return None
    E = edge_index._nnz() if adjacency else edge_index.size(1)
    heads = 1
    if w is not None:
        if not _cpu_float(w) or w.dtype != x_src.dtype or w.size(0) != E:
            return None
        if weight_name == "alpha":
            if w.dim() != 2 or x_src.dim() != 3 or x_src.size(1) != w.size(1):
                return None
            heads = w.size(1)
        elif w.dim() != 1 or x_src.dim() != 2:
            return None
    elif weight_name == "alpha":
        return None
    if adjacency:
        n_dst, n_src = edge_index.shape
        if x_src.size(0) != n_src or (isinstance(x, (tuple, list)) and isinstance(x[1], Tensor)
                                      and x[1].size(0) != n_dst):
            return None  # PyG's path raises its error
        graph = _adjacency_graph(edge_index)
        return None if graph is None else gspmm(graph, x_src, w, r, heads)
    # sizes exactly as PyG's collect sets them (its checks raise its errors)
    sizes = self._check_input(edge_index, size)
    if isinstance(x, (tuple, list)):
        if len(x) != 2:
            return None
        for k in (0, 1):
            if isinstance(x[k], Tensor):
                self._set_size(sizes, k, x[k])
    else:
        self._set_size(sizes, 0, x)
    n_src = x_src.size(0)
    n_dst = sizes[1] if sizes[1] is not None else sizes[0]
    features = x_src.numel() // max(n_src, 1)
    graph = _edge_index_graph(edge_index, n_dst, n_src, features)
    if graph is None:
        return None
    return gspmm(graph, x_src, w, r, heads)


def make_propagate(cls, original, message, weight_name):
    """``cls.propagate`` with the fused path in front of ``original`` (PyG's, called unchanged
    whenever the fused path does not apply)."""
    def propagate(self, edge_index, size=None, **kwargs):
        out = _try_fused(self, message, weight_name, edge_index, size, kwargs)
        if out is None:  # PyG's propagate: its aggregation's calls count themselves
            return original(self, edge_index, size=size, **kwargs)
        _count("fused")
        return out

    propagate.__doc__ = original.__doc__
    propagate.__wrapped__ = original
    propagate.__qualname__ = f"{cls.__name__}.propagate"
    # PyG compiles a class's template for each new layer unless ``propagate``'s module is the
    # template's; naming it so keeps a layer built while enabled on PyG's own switches
    propagate.__module__ = original.__module__
    return propagate
