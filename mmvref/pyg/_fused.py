"""Fused message passing as one autograd function: neighbour features reduced into each destination
without the E x F messages (``mmvref._fast.sparse._portable_gspmm``'s kernels over a prepared
``Graph``).

    out[i] = reduce over edges e = (j -> i) of  w_e * x[j]     reduce: sum, mean, max, min

``w`` is absent (copy the source features: SAGE, GIN), one weight per edge (GCN, GraphConv, a
weighted sparse adjacency) or one per edge and head (GAT's attention, x of shape (N, heads, C)).
Backward: the features' gradient is the transposed product over the CSR by source (for an
unweighted mean, with 1 / the destination's degree as each entry's value; a weighted mean's
gradient is divided by the degree first); the weights' gradient is the per-edge dot product of the
output's gradient and the source features (``sddmm``); max/min route each output's gradient to the
edge that gave it (ties: the first in CSR order, as torch_scatter's arg routing; torch's own
``scatter_reduce`` splits a tie's gradient evenly).
"""
from __future__ import annotations

import numba
import numpy as np
import torch

from .. import _threading
from .._fast.sparse import _portable_gspmm as kernels
from .._fast.sparse.ops import spmm_into_any_k
from ._graph import Graph

__all__ = ["gspmm"]

_NO_W = {torch.float32: np.empty((0, 1), np.float32), torch.float64: np.empty((0, 1), np.float64)}


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _w2(w, E: int, heads: int, dtype) -> np.ndarray:
    return _NO_W[dtype] if w is None else _np(w).reshape(E, heads)


def _sum(csr, w, w2, heads, x, out) -> None:
    """out = the weighted sum over ``csr``'s rows. No weight (SAGE, GIN) or one per edge (``w`` 1-D:
    GCN, GraphConv, an adjacency's values): the SpMM of the CSR with values 1 or the weights in CSR
    order (``sparse.ops.spmm_into_any_k``, the prepared SpMM's kernel: each row's products in CSR
    order into register accumulators; a weight of 1 multiplies exactly). One weight per edge and
    head (``w`` 2-D: GAT's alpha, one head included): ``gspmm_sum_head_weights``."""
    if w is None or w.dim() == 1:
        tasks = csr.tasks()
        if w is None:
            values = csr.ones(x.dtype)
        else:
            values = np.empty(csr.col.shape[0], x.dtype)
            kernels.csr_values(tasks, csr.indptr, w2.reshape(-1), csr.perm, values)  # (w 1-D: one head)
        spmm_into_any_k(csr.indptr, csr.col, values, x, out, tasks)
    else:
        kernels.gspmm_sum_head_weights(csr.tasks(), csr.indptr, csr.col, csr.perm, w2, heads, x, out)


class _GSpmm(torch.autograd.Function):
    @staticmethod
    @_threading.guarded  # the public ops' rules: the fork gate, workqueue's lock, one thread in an omp child
    def forward(ctx, graph: Graph, x: torch.Tensor, w, reduce: str, heads: int):
        f = graph.forward
        x2 = x.contiguous().view(x.shape[0], -1)
        wc = None if w is None else w.contiguous()
        out = torch.empty((f.n_rows, x2.shape[1]), dtype=x.dtype)
        w_np = _w2(wc, f.col.shape[0], heads, x.dtype)
        arg = None
        if reduce in ("sum", "mean"):
            _sum(f, wc, w_np, heads, _np(x2), _np(out))
            if reduce == "mean":
                out.div_(graph.degree(x.dtype))
        else:
            arg = torch.empty((f.n_rows, x2.shape[1]), dtype=torch.int32)
            if w is None:
                kernels.gspmm_extreme(f.tasks(), f.indptr, f.col, f.perm, _np(x2), _np(out), arg.numpy(),
                                      reduce == "max")
            else:
                kernels.gspmm_extreme_weighted(f.tasks(), f.indptr, f.col, f.perm, w_np, heads, _np(x2), _np(out),
                                               arg.numpy(), reduce == "max")
        ctx.graph, ctx.reduce, ctx.heads = graph, reduce, heads
        ctx.x_shape = x.shape
        ctx.has_w = w is not None
        ctx.save_for_backward(x2, wc, arg)
        return out.view((f.n_rows,) + tuple(x.shape[1:]))

    @staticmethod
    @_threading.guarded  # the public ops' rules: the fork gate, workqueue's lock, one thread in an omp child
    def backward(ctx, grad):
        graph, reduce, heads = ctx.graph, ctx.reduce, ctx.heads
        x2, wc, arg = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        f = graph.forward
        E = f.col.shape[0]
        g = grad.contiguous().view(f.n_rows, -1)
        w_np = _w2(wc, E, heads, x2.dtype)
        grad_x = grad_w = None
        if reduce in ("sum", "mean"):
            mean_weights = reduce == "mean" and not ctx.has_w
            if reduce == "mean" and not mean_weights:
                g = g / graph.degree(g.dtype)
            if need_x:
                b = graph.backward
                grad_x = torch.empty_like(x2)
                if mean_weights:  # the product with 1 / degree per entry (``Graph.mean_backward_weights``)
                    spmm_into_any_k(b.indptr, b.col, graph.mean_backward_weights(_np(x2).dtype), _np(g),
                                    _np(grad_x), b.tasks())
                else:
                    _sum(b, wc, w_np, heads, _np(g), _np(grad_x))
            if need_w and ctx.has_w:
                grad_w = torch.empty((E, heads), dtype=x2.dtype)
                kernels.sddmm(f.tasks(), f.indptr, f.col, f.perm, heads, _np(g), _np(x2), _np(grad_w))
        elif need_x or (need_w and ctx.has_w):
            grad_x = torch.zeros_like(x2)
            step = kernels.backward_columns(g.shape[1], numba.get_num_threads())
            if not ctx.has_w:
                kernels.gspmm_extreme_backward(_np(arg), graph.src_of_edge, _np(g), _np(grad_x), step)
            else:
                gw = torch.zeros((E, heads) if need_w else (0, 1), dtype=x2.dtype)
                kernels.gspmm_extreme_backward_weighted(_np(arg), graph.src_of_edge, w_np, heads, _np(g), _np(x2),
                                                        _np(grad_x), _np(gw), step)
                if need_w:
                    grad_w = gw
            if not need_x:
                grad_x = None
        if grad_x is not None:
            grad_x = grad_x.view(ctx.x_shape)
        if grad_w is not None:
            grad_w = grad_w.view(wc.shape)
        return None, grad_x, grad_w, None, None


def gspmm(graph: Graph, x: torch.Tensor, w, reduce: str, heads: int = 1) -> torch.Tensor:
    """``reduce`` (sum, mean, max, min) over each destination's in-edges of ``w_e * x[src_e]``:
    (n_dst,) + x.shape[1:]. ``x`` (n_src, ...) float32/float64 on the CPU; ``w`` None, (E,) or
    (E, heads) of x's dtype. Differentiable in ``x`` and ``w``."""
    return _GSpmm.apply(graph, x, w, reduce, heads)
