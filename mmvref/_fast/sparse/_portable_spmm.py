"""Numba kernels of the fast SpMM (``mmvref._fast.sparse.ops.spmm``).

Rows in parallel (tasks of about equal nonzeros), each row's products added
in index order into a private accumulator: every lane j of row r does
out[r, j] = (((0 + a_1 D[c_1, j]) + a_2 D[c_2, j]) + ...), a multiply then an
add (never fused), so results equal scipy's bit for bit.

Columns go by blocks of 64, 32, 16 and 8, then one block of the last k mod 8,
whose accumulator is one LLVM vector held in registers: each entry costs one
contiguous load of the D row block, one multiply by the broadcast value and
one add (``group_vec``, emitted through ``numba.extending.intrinsic``: Numba
does not run LLVM's SLP vectoriser, and its loop vectoriser leaves 8 columns
scalar). Measured on this machine (float32, vs a k-wide accumulator array
with the column loop vectorised): sparse-attention b=64 k=8 17 vs 69 ms, k=64
72 vs 118 ms; power-law k=8 1.8 vs 3.3 ms. The last k mod 8 columns took a
scalar accumulator in memory until session 18, a loop of k mod 8 per entry:
power-law 1M float32 k = 7 70 -> 28 ms (``torch.sparse.mm`` 26-28), k = 3 15
-> 13 ms, uniform 1M float64 k = 3 39 -> 18 ms; attention b-16 r-8 float32
k = 4 23 -> 4.6 ms (torch 4.2), k = 1 23 -> 4.4 ms (torch 4.9).

Structure checks are fused: a row whose offsets are out of order or past nnz,
or whose column indices leave [0, n) (a min and a max over the row before its
products), sets ``bad[t]`` and ends the task before anything is read out of
range; the caller raises the error. (Not in the kernel for any k, whose callers build
their structures valid: ``rows_kernel``.) D and out are flat (k per row); offsets
are unsigned so that no index needs a wrap-around select.

Cold start (a user's first call compiles the kernel; issue 31): the kernel
is built for the register blocks the call's k takes (``rows_kernel``: k = 8
compiles one 8-lane block and no tail, k = 64 one 64-lane block in a loop),
which are compile-time constants (closure cells: the blocks k does not take
are pruned before typing, and Numba's cache keeps one entry per set of
blocks), in a serial flavour for small products (no parallel launch, a
fraction of the compile time); the row check is spelled out in the kernel
rather than inlined by Numba.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._variants import flag_name, variant

__all__ = ["rows_kernel", "shared_rows_kernel"]

_U = np.uint64
_I64 = ir.IntType(64)


def _group_vec_codegen(context, builder, sig, args):
    cols_t, data_t, D_t, out_t = sig.args[0], sig.args[1], sig.args[2], sig.args[8]
    cols = context.make_array(cols_t)(context, builder, args[0]).data
    data = context.make_array(data_t)(context, builder, args[1]).data
    D = context.make_array(D_t)(context, builder, args[2]).data
    out = context.make_array(out_t)(context, builder, args[8]).data
    c0, L, p0, k, j0, o = args[3], args[4], args[5], args[6], args[7], args[9]
    et = context.get_value_type(D_t.dtype)
    W = sig.args[10].literal_value
    G = sig.args[11].literal_value
    vt = ir.VectorType(et, W)
    eb = D_t.dtype.bitwidth // 8
    signed = cols_t.dtype.signed
    is_float = isinstance(D_t.dtype, types.Float)
    accs = []
    for _ in range(G):
        p = cgutils.alloca_once(builder, vt)
        builder.store(ir.Constant(vt, None), p)
        accs.append(p)
    q_p = cgutils.alloca_once(builder, _I64)
    builder.store(_I64(0), q_p)
    fn = builder.function
    bcond = fn.append_basic_block("group.cond")
    bbody = fn.append_basic_block("group.body")
    bend = fn.append_basic_block("group.end")
    builder.branch(bcond)
    builder.position_at_end(bcond)
    q = builder.load(q_p)
    builder.cbranch(builder.icmp_signed("<", q, L), bbody, bend)
    builder.position_at_end(bbody)
    c = builder.load(builder.gep(cols, [builder.add(c0, q)], inbounds=True))
    if c.type.width < 64:
        c = builder.sext(c, _I64) if signed else builder.zext(c, _I64)
    row = builder.gep(D, [builder.add(builder.mul(c, k), j0)], inbounds=True)
    d = builder.load(builder.bitcast(row, vt.as_pointer()), align=eb)
    splat = ir.Constant(ir.VectorType(ir.IntType(32), W), [0] * W)
    for i, acc_p in enumerate(accs):
        # row i of the group: its entry q at p0 + i L + q (the rows of a run hold L entries each)
        v = builder.load(builder.gep(data, [builder.add(builder.add(p0, builder.mul(L, _I64(i))), q)],
                                     inbounds=True))
        vs = builder.insert_element(ir.Constant(vt, ir.Undefined), v, ir.IntType(32)(0))
        vs = builder.shuffle_vector(vs, ir.Constant(vt, ir.Undefined), splat)
        if is_float:  # separate multiply and add: no contraction, the scalar rounding of every lane
            acc = builder.fadd(builder.load(acc_p), builder.fmul(vs, d))
        else:
            acc = builder.add(builder.load(acc_p), builder.mul(vs, d))
        builder.store(acc, acc_p)
    builder.store(builder.add(q, _I64(1)), q_p)
    builder.branch(bcond)
    builder.position_at_end(bend)
    for i, acc_p in enumerate(accs):
        dst = builder.gep(out, [builder.add(o, builder.mul(k, _I64(i)))], inbounds=True)
        builder.store(builder.load(acc_p), builder.bitcast(dst, vt.as_pointer()), align=eb)
    return context.get_dummy_value()


@intrinsic
def group_vec(typingctx, cols, data, D, c0, L, p0, k, j0, out, o, width, group):
    """For the ``group`` consecutive rows i of one run, whose L entries each start at p0 + i L and
    whose columns are cols[c0 : c0 + L]: out[o + i k : o + i k + width] = sum over q of
    data[p0 + i L + q] * D[cols[c0 + q] * k + j0 : ... + width], one width-lane register
    accumulator a row, entries in index order, a multiply then an add; each D row block is loaded
    once for the group. A group of 1 with c0 = p0 is one CSR row (``rows_kernel``). Data, D and out
    of one dtype (float32, float64 or int64); the caller guarantees every position and column in
    range; width and group are literals."""
    if not (isinstance(width, types.IntegerLiteral) and isinstance(group, types.IntegerLiteral)):
        return None
    sig = types.void(cols, data, D, types.int64, types.int64, types.int64, types.int64, types.int64, out,
                     types.int64, width, group)
    return sig, _group_vec_codegen


def rows_kernel(k, parallel):
    """The kernel for k columns: ``rows(indptr, indices, data, Df, k, n, out, tasks, bad)``,
    out[r, :] = sum over the row's entries q of data[q] * D[indices[q], :], columns by register
    blocks of 64 (as many as k holds), then 32, 16 and 8, then one block of the last k mod 8
    (a literal width: LLVM splits a 3-, 5-, 6- or 7-lane vector into the machine's pieces). Only
    the blocks k needs are compiled (one kernel per such set of blocks and flavour, ``parallel``
    or serial; a first call compiles one), and those blocks are compiled unconditionally: no
    test of k per row. ``k=None``: one kernel for every k (the fused message passing of
    ``mmvref.pyg``, whose feature widths a precompile cannot know), every block compiled and
    taken by a test of the columns left, the last k mod 8 by blocks of 4, 2 and 1: the same
    bits (a column's sum does not depend on the block that holds it); its caller guarantees a
    valid structure (the rows are not checked, ``bad`` is not written)."""
    if k is None:
        key = (True, True, True, True, 0, bool(parallel), True)
    else:
        key = (k >= 64, k % 64 >= 32, k % 32 >= 16, k % 16 >= 8, k % 8, bool(parallel), False)
    return variant(_make_rows, *key, name=flag_name("rows_", _BLOCK_NAMES + ("any_k",), key))


_BLOCK_NAMES = ("b64", "b32", "b16", "b8", "tail", "parallel")


def _make_rows(b64, b32, b16, b8, tail, parallel, any_k):
    # the flags are closure cells: Numba keys its cache on their values and prunes the blocks
    # they turn off before typing; the row check is spelled out (Numba's inlining of a helper
    # costs more compile time than its code)
    def rows(indptr, indices, data, Df, k, n, out, tasks, bad):
        if parallel:  # referenced, so that it is a cell: part of the cache key
            pass
        nnz = indices.size
        k64 = np.int64(k)
        for t in prange(tasks.size - 1):
            for r in range(tasks[t], tasks[t + 1]):
                p0 = indptr[r]
                p1 = indptr[r + 1]
                if not any_k:
                    # a row whose offsets are out of order or past nnz, or whose column indices
                    # leave [0, n) (a min and a max in the index dtype, vectorised, no branch per
                    # entry), ends the task before anything is read out of range. (The kernel for
                    # any k serves graphs whose CSR its builder made, valid by construction: no
                    # check, which was 0.45 s of its 2.1 s compile on an AMD Zen 3, a first PyG step's
                    # largest kernel, and no faster product without it.)
                    invalid = p0 < 0 or p1 < p0 or p1 > nnz
                    if not invalid and p1 > p0:
                        lo = indices[_U(p0)]
                        hi = lo
                        for q in range(_U(p0) + _U(1), _U(p1)):  # unsigned positions: no wrap-around select
                            v = indices[q]
                            lo = v if v < lo else lo
                            hi = v if v > hi else hi
                        invalid = lo < 0 or hi >= n
                    if invalid:
                        bad[t] = True
                        break
                q0 = np.int64(p0)
                q1 = np.int64(p1)
                o = np.int64(r) * k64
                j0 = np.int64(0)
                if b64:
                    while k64 - j0 >= 64:
                        group_vec(indices, data, Df, q0, q1 - q0, q0, k64, j0, out, o + j0, 64, 1)
                        j0 += 64
                if b32 and (not any_k or k64 - j0 >= 32):
                    group_vec(indices, data, Df, q0, q1 - q0, q0, k64, j0, out, o + j0, 32, 1)
                    j0 += 32
                if b16 and (not any_k or k64 - j0 >= 16):
                    group_vec(indices, data, Df, q0, q1 - q0, q0, k64, j0, out, o + j0, 16, 1)
                    j0 += 16
                if b8 and (not any_k or k64 - j0 >= 8):
                    group_vec(indices, data, Df, q0, q1 - q0, q0, k64, j0, out, o + j0, 8, 1)
                    j0 += 8
                if tail:
                    group_vec(indices, data, Df, q0, q1 - q0, q0, k64, j0, out, o + j0, tail, 1)
                if any_k:
                    if k64 - j0 >= 4:
                        group_vec(indices, data, Df, q0, q1 - q0, q0, k64, j0, out, o + j0, 4, 1)
                        j0 += 4
                    if k64 - j0 >= 2:
                        group_vec(indices, data, Df, q0, q1 - q0, q0, k64, j0, out, o + j0, 2, 1)
                        j0 += 2
                    if k64 - j0 >= 1:
                        group_vec(indices, data, Df, q0, q1 - q0, q0, k64, j0, out, o + j0, 1, 1)

    return njit(cache=True, parallel=parallel)(rows)


# ----------------------------------------------------------------------------- shared columns

#: rows of one run (``ops.shared_columns``: consecutive rows holding the same columns) taken together
#: by ``shared_rows_kernel``: each D row block is loaded once for them. Prepared P @ X, 2 threads,
#: medians of 7 (ms; two alternating runs; native AVX-512 Zen 5 / haswell build), group of 4 -> 8:
#: attention b-16 r-4 k = 16 float32 2.07-2.36 -> 1.54-1.80 / 4.41-4.69 -> 2.69-2.91 (the one-row
#: kernel: 3.5-4.3 / 3.7-4.3); b-64 r-2 k = 256 float64 321-331 -> 259-262 / 834-857 -> 661 (753-776 /
#: 908-932); b-64 r-2 k = 16 float64 12.8 / 20.9 against 13.2 / 19.4 (34-39 / 34)
GROUP = 8


def shared_rows_kernel(k, parallel):
    """The float kernel for k columns of a prepared matrix whose runs of consecutive rows share
    their columns (``ops.shared_columns``: ``cols`` holds each run's once, ``starts[r]`` where row
    r's are): ``rows(indptr, cols, starts, data, Df, k, out, tasks)``. Rows go by GROUP within a run
    (else one at a time), so each block of a D row is loaded once for the group; every row's
    products are added in index order, a multiply then an add, as ``rows_kernel`` adds them: the
    same bits. The structure was checked when the matrix was prepared: no check here. The column
    blocks as ``rows_kernel`` (the same flags, one kernel per set of blocks and flavour)."""
    key = (k >= 64, k % 64 >= 32, k % 32 >= 16, k % 16 >= 8, k % 8, bool(parallel))
    return variant(_make_shared_rows, *key, name=flag_name("shared_rows_", _BLOCK_NAMES, key))


def _make_shared_rows(b64, b32, b16, b8, tail, parallel):
    def rows(indptr, cols, starts, data, Df, k, out, tasks):
        if parallel:  # referenced, so that it is a cell: part of the cache key
            pass
        k64 = np.int64(k)
        for t in prange(tasks.size - 1):
            r = np.int64(tasks[t])
            r1 = np.int64(tasks[t + 1])
            while r < r1:
                p0 = np.int64(indptr[r])
                L = np.int64(indptr[r + 1]) - p0
                c0 = np.int64(starts[r])
                g = 1
                if r + GROUP <= r1 and np.int64(starts[r + GROUP - 1]) == c0:
                    g = GROUP  # (the run's rows between share c0 too: starts are ascending)
                o = r * k64
                j0 = np.int64(0)
                if b64:
                    while k64 - j0 >= 64:
                        if g == GROUP:
                            group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, 64, GROUP)
                        else:
                            group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, 64, 1)
                        j0 += 64
                if b32:
                    if g == GROUP:
                        group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, 32, GROUP)
                    else:
                        group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, 32, 1)
                    j0 += 32
                if b16:
                    if g == GROUP:
                        group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, 16, GROUP)
                    else:
                        group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, 16, 1)
                    j0 += 16
                if b8:
                    if g == GROUP:
                        group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, 8, GROUP)
                    else:
                        group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, 8, 1)
                    j0 += 8
                if tail:
                    if g == GROUP:
                        group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, tail, GROUP)
                    else:
                        group_vec(cols, data, Df, c0, L, p0, k64, j0, out, o + j0, tail, 1)
                r += g

    return njit(cache=True, parallel=parallel)(rows)
