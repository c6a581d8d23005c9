"""Numba kernels of graph message passing without messages (``mmvref.pyg``'s fused path, issue 33).

A graph's edges e = (src_e -> dst_e) with an optional weight w[e, h] per edge and head aggregate
the source rows of x into the destination rows of out, the E x F messages never built:

    out[i, f] = reduce over edges e into i of  w[e, f // C] * x[src_e, f]     (C = F // H)

The graph arrives as CSR by destination (``indptr``, ``col`` = src per entry, ``perm`` = the
original edge id of each entry, so weights and weight gradients stay in the caller's edge order).
The transposed product (the features' gradient) is the same kernel over the CSR by source. The
unweighted sum and the sum with one weight per edge are SpMMs (values 1, or the weights in CSR
order) and run the prepared SpMM's kernel (``ops.spmm_into_any_k``: register accumulators, 1.6-3x
the loop over an output row in memory that was here before, the same bits); this module keeps the
sum with a weight per edge and head (GAT), max/min and the weights' gradient.

Rows in parallel, in tasks of about equal entries (``tasks``: row boundaries, so power-law rows
do not leave a thread idle); each row is accumulated in order into its own output row, a multiply
then an add: the sum of a row is the sequential sum in CSR order (stable by edge id), whatever
the thread count. Max/min keep the first extreme (the lowest CSR position) and its edge id for
the backward's routing; a row with no edge gives 0 and edge id -1 (PyG's and torch_scatter's
convention).

One kernel per job and dtype; the weight layout (one per edge, one per edge and head) and whether
a max/min gradient reaches the weights are runtime branches outside the feature loop, so a first
call compiles a few small kernels for its dtype, not one per combination. Max/min have a kernel
without weights and one with (forward and backward): a parallel kernel's compile time grows fast
with its code under LLVM's -O3, and a first SAGE-max step needs only the unweighted ones.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["csr_by_key", "row_tasks", "csr_values", "gspmm_sum_head_weights", "gspmm_extreme", "gspmm_extreme_weighted",
           "gspmm_extreme_backward", "gspmm_extreme_backward_weighted", "backward_columns", "sddmm"]

_U = np.uint64


def csr_by_key(key, other, n_rows, n_other):
    """Stable counting sort of edges by ``key`` (int64, E): (indptr int64[n_rows + 1], other's
    entries in that order as int32, edge ids int32, ok). ``ok`` is False, and nothing else is
    meaningful, when a key leaves [0, n_rows) or an ``other`` leaves [0, n_other). The arrays are
    allocated here and filled by ``_counting_sort``: allocating inside the kernel compiled numpy's
    ``empty`` and ``copy`` with it, 0.15-0.2 s of a first PyG step (AMD Zen 3)."""
    E = key.shape[0]
    indptr = np.zeros(n_rows + 1, np.int64)
    col = np.empty(E, np.int32)
    perm = np.empty(E, np.int32)
    fill = np.empty(n_rows, np.int64)
    ok = _counting_sort(key, other, n_rows, n_other, indptr, col, perm, fill)
    return indptr, col, perm, ok


@njit(cache=True)
def _counting_sort(key, other, n_rows, n_other, indptr, col, perm, fill):
    """``csr_by_key``'s sort into its arrays (``indptr`` zeroed, ``fill`` scratch of n_rows): False
    as soon as a key or an ``other`` is out of range."""
    E = key.shape[0]
    for e in range(E):
        k = key[e]
        o = other[e]
        if k < 0 or k >= n_rows or o < 0 or o >= n_other:
            return False
        indptr[k + 1] += 1
    for r in range(n_rows):
        indptr[r + 1] += indptr[r]
        fill[r] = indptr[r]
    for e in range(E):
        k = key[e]
        p = fill[k]
        fill[k] = p + 1
        col[p] = other[e]
        perm[p] = e
    return True


def row_tasks(indptr, n_tasks):
    """Row boundaries of ``n_tasks`` tasks of about equal entries (+ rows, so that runs of empty
    rows count too): int64[n_tasks + 1], first 0, last n_rows. Task t ends at the first row r
    whose entries and rows before it, indptr[r] + r (strictly increasing), reach t / n_tasks of
    the total. numpy, not a kernel: once per graph and thread count, and a Numba loop cost a first
    PyG step 0.2 s of compilation (AMD Zen 3)."""
    n = indptr.shape[0] - 1
    before = indptr + np.arange(n + 1, dtype=np.int64)  # (int64 for any integer indptr: a new array)
    bounds = np.empty(n_tasks + 1, np.int64)
    bounds[0] = 0
    bounds[1:n_tasks] = np.searchsorted(before, (before[n] * np.arange(1, n_tasks, dtype=np.int64)) // n_tasks)
    bounds[n_tasks] = n
    return bounds


@njit(parallel=True, cache=True)
def csr_values(tasks, indptr, values, perm, out):
    """out[p] = values[perm[p]] for every entry p of a CSR (one edge weight per entry in CSR
    order, for the SpMM kernel), in parallel over the row tasks. 0.3M edges, float32, 2 threads:
    0.07 ms, against 0.32-0.37 ms for numpy's ``take`` (one thread, and int32 ids widened first)."""
    for t in prange(tasks.shape[0] - 1):
        for p in range(_U(indptr[tasks[t]]), _U(indptr[tasks[t + 1]])):
            out[p] = values[_U(perm[p])]


@njit(cache=True, fastmath={"reassoc", "contract"})
def _dot(a, b):
    """<a, b> (views of equal length >= 1), reassociated so that it vectorises (an in-order sum
    of products stays scalar: 1.6-2.5x slower). The order is fixed per compile target, so a
    weight's gradient is deterministic; it is the one result here not summed in CSR order."""
    s = a[0] * b[0]
    for c in range(1, a.shape[0]):
        s += a[c] * b[c]
    return s


@njit(parallel=True, cache=True)
def gspmm_sum_head_weights(tasks, indptr, col, perm, w, heads, x, out):
    """The sum with one weight per edge and head (``w`` (E, heads), heads | F: GAT's alpha):
    out[i, f] = sum of w[e, f // C] * x[src_e, f], each row in CSR order, ``out`` (n_rows, F)
    overwritten. (The unweighted sum and the sum with one weight per edge are the prepared
    SpMM's kernel: ``ops.spmm_into_any_k``.)"""
    F = x.shape[1]
    C = F // heads
    for t in prange(tasks.shape[0] - 1):
        for i in range(tasks[t], tasks[t + 1]):
            o = out[i]
            for f in range(F):
                o[f] = 0
            for p in range(indptr[i], indptr[i + 1]):
                xr = x[col[p]]
                e = perm[p]
                for h in range(heads):
                    wv = w[e, h]
                    b = h * C
                    for c in range(C):
                        o[b + c] += wv * xr[b + c]


def _extreme_vec_codegen(context, builder, sig, args, weighted=False):
    if weighted:  # (col, perm, w, heads, h, x, ...): the weight of entry p is w[perm[p] * heads + h]
        w_t = sig.args[2]
        w = context.make_array(w_t)(context, builder, args[2]).data
        heads, h = args[3], args[4]
        sig_args, args = (sig.args[0], sig.args[1]) + sig.args[5:], (args[0], args[1]) + tuple(args[5:])
    else:
        sig_args = sig.args
    col_t, perm_t, x_t, out_t, arg_t = sig_args[0], sig_args[1], sig_args[2], sig_args[6], sig_args[7]
    col = context.make_array(col_t)(context, builder, args[0]).data
    perm = context.make_array(perm_t)(context, builder, args[1]).data
    x = context.make_array(x_t)(context, builder, args[2]).data
    out = context.make_array(out_t)(context, builder, args[6]).data
    arg = context.make_array(arg_t)(context, builder, args[7]).data
    p0, p1, F, j0, o, is_max = args[3], args[4], args[5], args[8], args[9], args[10]
    W = sig_args[11].literal_value
    et = context.get_value_type(x_t.dtype)
    vt = ir.VectorType(et, W)
    at = ir.VectorType(ir.IntType(32), W)
    eb = x_t.dtype.bitwidth // 8
    i64 = ir.IntType(64)

    def splat(val, t):
        v = builder.insert_element(ir.Constant(t, ir.Undefined), val, ir.IntType(32)(0))
        return builder.shuffle_vector(v, ir.Constant(t, ir.Undefined), ir.Constant(at, [0] * W))

    def row_block(p):  # x[col[p], j0 : j0 + W] (times the entry's weight) as one vector, and perm[p] splat
        c = builder.sext(builder.load(builder.gep(col, [p], inbounds=True)), i64)
        ptr = builder.gep(x, [builder.add(builder.mul(c, F), j0)], inbounds=True)
        v = builder.load(builder.bitcast(ptr, vt.as_pointer()), align=eb)
        e = builder.load(builder.gep(perm, [p], inbounds=True))
        if weighted:  # w[e, h] * x, one rounding: the product the messages would hold
            wp = builder.gep(w, [builder.add(builder.mul(builder.sext(e, i64), heads), h)], inbounds=True)
            v = builder.fmul(splat(builder.load(wp), vt), v)
        return v, splat(e, at)

    v0, e0 = row_block(p0)
    o_p = cgutils.alloca_once(builder, vt)
    a_p = cgutils.alloca_once(builder, at)
    builder.store(v0, o_p)
    builder.store(e0, a_p)
    q_p = cgutils.alloca_once(builder, i64)
    builder.store(builder.add(p0, i64(1)), q_p)
    fn = builder.function
    bcond = fn.append_basic_block("extreme.cond")
    bbody = fn.append_basic_block("extreme.body")
    bend = fn.append_basic_block("extreme.end")
    builder.branch(bcond)
    builder.position_at_end(bcond)
    q = builder.load(q_p)
    builder.cbranch(builder.icmp_signed("<", q, p1), bbody, bend)
    builder.position_at_end(bbody)
    v, es = row_block(q)
    o_v = builder.load(o_p)
    # take = (v > o or either is NaN) & (o == o) for a max (v < o ... for a min): the first
    # extreme of the row in CSR order, the first NaN taking the place and keeping it (its edge id,
    # as ``mmvref.scatter``'s positions: the unfused route of the same aggregation). Unordered
    # compares: as many instructions as a last NaN's rule (a separate test of v took F = 16
    # float64 1.2 -> 2.4 ms)
    better = builder.select(is_max, builder.fcmp_unordered(">", v, o_v), builder.fcmp_unordered("<", v, o_v))
    take = builder.and_(better, builder.fcmp_ordered("ord", o_v, o_v))
    builder.store(builder.select(take, v, o_v), o_p)
    builder.store(builder.select(take, es, builder.load(a_p)), a_p)
    builder.store(builder.add(q, i64(1)), q_p)
    builder.branch(bcond)
    builder.position_at_end(bend)
    dst = builder.gep(out, [o], inbounds=True)
    builder.store(builder.load(o_p), builder.bitcast(dst, vt.as_pointer()), align=eb)
    dsta = builder.gep(arg, [o], inbounds=True)
    builder.store(builder.load(a_p), builder.bitcast(dsta, at.as_pointer()), align=4)
    return context.get_dummy_value()


@intrinsic
def extreme_vec(typingctx, col, perm, x, p0, p1, F, out, arg, j0, o, is_max, width):
    """For one row's entries p in [p0, p1) (p1 > p0): out[o : o + width] = the max (``is_max``) or
    min over p of x[col[p] * F + j0 : ... + width] and arg[o : ...] = the perm[p] that gave it,
    the first in CSR order, the first NaN taking the place and keeping it; one register of
    values and one of edge ids, each x row block loaded once. x, out flat, of one float dtype;
    col and perm int32; arg int32, flat; width a literal."""
    if not isinstance(width, types.IntegerLiteral):
        return None
    sig = types.void(col, perm, x, types.int64, types.int64, types.int64, out, arg, types.int64, types.int64,
                     types.boolean, width)
    return sig, _extreme_vec_codegen


@intrinsic
def extreme_vec_weighted(typingctx, col, perm, w, heads, h, x, p0, p1, F, out, arg, j0, o, is_max, width):
    """``extreme_vec`` of the entries' rows times their weights w[perm[p], h] (``w`` flat (E,
    heads), x's dtype): the block lies in head h's columns."""
    if not isinstance(width, types.IntegerLiteral) or w.dtype != x.dtype:
        return None
    sig = types.void(col, perm, w, types.int64, types.int64, x, types.int64, types.int64, types.int64, out, arg,
                     types.int64, types.int64, types.boolean, width)
    return sig, lambda c, b, s, a: _extreme_vec_codegen(c, b, s, a, weighted=True)


@njit(parallel=True, cache=True)
def gspmm_extreme(tasks, indptr, col, perm, x, out, arg, is_max):
    """Max (``is_max``) or min of the source rows and the edge id that gave it (the first in CSR
    order among equals; NaN wins and stays, as in torch's amax/amin); rows without entries give 0
    and -1. Columns by register blocks of 32, 8, 4, 2 and 1 (``extreme_vec``: the running extreme
    and its edge ids in registers, a compare and two selects an entry). Blocks of 64 and 16 as
    well, before session 22, spilled registers on AVX2 and compiled 0.3-0.4 s longer; without them,
    20k nodes / 0.3M edges, float32, AMD Zen 3, 2 threads: F = 16 1.07 -> 0.59 ms, F = 64 8.4 ->
    3.3, F = 128 16.5 -> 7.2 (float64 F = 128 34.6 -> 19.6), F = 1-7 the same or faster. Before session 18
    the running row was kept in memory; float32 max, 2 threads, 20k nodes /
    0.3M edges: F = 16 1.27 -> 0.49 ms, F = 32 1.85 -> 0.81, F = 64 2.49 -> 1.50, F = 128 4.4 ->
    4.3 (x no longer fits the L2: memory-bound either way); 140k / 2.1M F = 64 70.8 -> 37.8 ms. Weighted rows:
    ``gspmm_extreme_weighted`` (a kernel of its own, so that a first unweighted step compiles no
    weighted code). x, out, arg C-contiguous."""
    n, F = x.shape
    F64 = np.int64(F)
    xf = x.reshape(-1)
    of = out.reshape(-1)
    af = arg.reshape(-1)
    for t in prange(tasks.shape[0] - 1):
        for i in range(tasks[t], tasks[t + 1]):
            p0 = np.int64(indptr[i])
            p1 = np.int64(indptr[i + 1])
            o = np.int64(i) * F64
            if p0 == p1:
                for f in range(F):
                    of[o + f] = 0
                    af[o + f] = -1
                continue
            j0 = np.int64(0)
            while F64 - j0 >= 32:
                extreme_vec(col, perm, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 32)
                j0 += 32
            while F64 - j0 >= 8:
                extreme_vec(col, perm, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 8)
                j0 += 8
            if F64 - j0 >= 4:
                extreme_vec(col, perm, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 4)
                j0 += 4
            if F64 - j0 >= 2:
                extreme_vec(col, perm, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 2)
                j0 += 2
            if F64 - j0 >= 1:
                extreme_vec(col, perm, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 1)


@njit(parallel=True, cache=True)
def gspmm_extreme_weighted(tasks, indptr, col, perm, w, heads, x, out, arg, is_max):
    """``gspmm_extreme`` of the weighted source rows: w[e, f // C] * x[src_e, f] (``w`` (E, heads),
    heads | F), head by head, each head's C columns by register blocks as there
    (``extreme_vec_weighted``). Before, the running row was kept in memory and its select-then-store
    became a masked store on AVX2 (vmaskmovps, slow on AMD Zen)."""
    n, F = x.shape
    F64 = np.int64(F)
    C = F64 // heads
    H = np.int64(heads)
    xf = x.reshape(-1)
    of = out.reshape(-1)
    af = arg.reshape(-1)
    wf = w.reshape(-1)
    for t in prange(tasks.shape[0] - 1):
        for i in range(tasks[t], tasks[t + 1]):
            p0 = np.int64(indptr[i])
            p1 = np.int64(indptr[i + 1])
            o = np.int64(i) * F64
            if p0 == p1:
                for f in range(F):
                    of[o + f] = 0
                    af[o + f] = -1
                continue
            for h in range(H):
                j0 = h * C
                j1 = j0 + C
                while j1 - j0 >= 32:
                    extreme_vec_weighted(col, perm, wf, H, h, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 32)
                    j0 += 32
                while j1 - j0 >= 8:
                    extreme_vec_weighted(col, perm, wf, H, h, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 8)
                    j0 += 8
                if j1 - j0 >= 4:
                    extreme_vec_weighted(col, perm, wf, H, h, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 4)
                    j0 += 4
                if j1 - j0 >= 2:
                    extreme_vec_weighted(col, perm, wf, H, h, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 2)
                    j0 += 2
                if j1 - j0 >= 1:
                    extreme_vec_weighted(col, perm, wf, H, h, xf, p0, p1, F64, of, af, j0, o + j0, is_max, 1)


#: the fewest columns per task of the max/min backward (several outputs may route to one source
#: row, so the threads split the features, not the rows): ``backward_columns``
_BACKWARD_COLUMNS = 16


def backward_columns(F: int, threads: int) -> int:
    """Columns per task of the max/min backward: one block per thread (a multiple of
    _BACKWARD_COLUMNS, a cache line of float32), as each block is one pass over the output rows.
    20k nodes x 128 features, 2 threads, float32: blocks of 16 columns 3.2 ms, of 64 1.8 ms."""
    per_thread = -(-F // max(threads, 1))
    return max(_BACKWARD_COLUMNS, -(-per_thread // _BACKWARD_COLUMNS) * _BACKWARD_COLUMNS)


@njit(parallel=True, cache=True)
def gspmm_extreme_backward(arg, src, g, grad_x, step):
    """The max/min backward of unweighted rows: each output entry's gradient to the source row of
    the edge that gave it. Blocks of ``step`` columns (``backward_columns``), each thread's writes
    to its own columns; within a block the outputs in row order, so the sums' order (and bits) do
    not depend on ``step``. Unsigned positions: a signed one's wraparound test per access made this
    loop 1.7x slower. ``grad_x`` must be zeroed by the caller. (A kernel of its own: the weighted
    one's code compiled 0.99 s in a first SAGE-max step, this one about half.)"""
    n, F = g.shape
    for b in prange((F + step - 1) // step):
        lo = _U(b * step)
        hi = _U(min(F, b * step + step))
        for i in range(_U(n)):
            for f in range(lo, hi):
                e = arg[i, f]
                if e >= 0:
                    grad_x[_U(src[_U(e)]), f] += g[i, f]


@njit(parallel=True, cache=True)
def gspmm_extreme_backward_weighted(arg, src, w, heads, g, x, grad_x, grad_w, step):
    """The max/min backward of weighted rows: each output entry's gradient to the source row times
    the weight and, when ``grad_w`` has rows, to the weight of the edge that gave it. Blocks of
    ``step`` columns as ``gspmm_extreme_backward``; a weight's gradient sums its head's columns, so
    then a thread owns whole heads. ``grad_x`` and ``grad_w`` must be zeroed by the caller."""
    n, F = g.shape
    C = F // heads if heads else F
    need_w = grad_w.shape[0] > 0
    if need_w:  # a weight's gradient: one thread per head
        step = C
    blocks = (F + step - 1) // step if step else 0
    for b in prange(blocks):
        lo = _U(b * step)
        hi = _U(min(F, b * step + step))
        for i in range(_U(n)):
            for f in range(lo, hi):
                e = arg[i, f]
                if e < 0:
                    continue
                j = _U(src[_U(e)])
                gv = g[i, f]
                h = f // _U(C)
                grad_x[j, f] += w[_U(e), h] * gv
                if need_w:
                    grad_w[_U(e), h] += gv * x[j, f]


@njit(parallel=True, cache=True)
def sddmm(tasks, indptr, col, perm, heads, a, b, grad_w):
    """The edge weights' gradient of a sum: grad_w[e, h] = <a[dst_e, head h], b[src_e, head h]>,
    over the CSR by destination (a: the output's gradient, b: the source features)."""
    F = a.shape[1]
    C = F // heads
    for t in prange(tasks.shape[0] - 1):
        for i in range(tasks[t], tasks[t + 1]):
            ar = a[i]
            for p in range(indptr[i], indptr[i + 1]):
                br = b[col[p]]
                e = perm[p]
                for h in range(heads):
                    grad_w[e, h] = _dot(ar[h * C:h * C + C], br[h * C:h * C + C]) if C else 0
