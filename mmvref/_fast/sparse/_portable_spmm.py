"""Numba kernels of the fast SpMM (``mmvref._fast.sparse.ops.spmm``).

Rows in parallel (tasks of about equal nonzeros), each row's products added
in index order into a private accumulator: every lane j of row r does
out[r, j] = (((0 + a_1 D[c_1, j]) + a_2 D[c_2, j]) + ...), a multiply then an
add (never fused), so results equal scipy's bit for bit.

Columns go by blocks of 64, 32, 16 and 8 whose accumulator is one LLVM
vector held in registers: each entry costs one contiguous load of the D row
block, one multiply by the broadcast value and one add (``row_vec``, emitted
through ``numba.extending.intrinsic``: Numba does not run LLVM's SLP
vectoriser, and its loop vectoriser leaves 8 columns scalar). The last k mod 8
columns use a scalar accumulator. Measured on this machine (float32, vs a
k-wide accumulator array with the column loop vectorised): sparse-attention
b=64 k=8 17 vs 69 ms, k=64 72 vs 118 ms; power-law k=8 1.8 vs 3.3 ms.

Structure checks are fused: a row whose offsets are out of order or past nnz,
or whose column indices leave [0, n) (a min and a max over the row before its
products), sets ``bad[t]`` and ends the task before anything is read out of
range; the caller raises the error. D and out are flat (k per row); offsets
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

__all__ = ["rows_kernel"]

_U = np.uint64
_I64 = ir.IntType(64)


def _row_vec_codegen(context, builder, sig, args):
    ind_t, data_t, D_t = sig.args[0], sig.args[1], sig.args[2]
    out_t = sig.args[7]
    ind = context.make_array(ind_t)(context, builder, args[0]).data
    data = context.make_array(data_t)(context, builder, args[1]).data
    D = context.make_array(D_t)(context, builder, args[2]).data
    out = context.make_array(out_t)(context, builder, args[7])
    q0, q1, k, j0, o = args[3], args[4], args[5], args[6], args[8]
    et = context.get_value_type(D_t.dtype)
    W = sig.args[9].literal_value
    vt = ir.VectorType(et, W)
    eb = D_t.dtype.bitwidth // 8
    is_float = isinstance(D_t.dtype, types.Float)
    signed = ind_t.dtype.signed

    acc_p = cgutils.alloca_once(builder, vt)
    builder.store(ir.Constant(vt, None), acc_p)
    q_p = cgutils.alloca_once(builder, _I64)
    builder.store(q0, q_p)
    fn = builder.function
    bcond = fn.append_basic_block("row.cond")
    bbody = fn.append_basic_block("row.body")
    bend = fn.append_basic_block("row.end")
    builder.branch(bcond)
    builder.position_at_end(bcond)
    q = builder.load(q_p)
    builder.cbranch(builder.icmp_signed("<", q, q1), bbody, bend)
    builder.position_at_end(bbody)
    c = builder.load(builder.gep(ind, [q], inbounds=True))
    if c.type.width < 64:
        c = builder.sext(c, _I64) if signed else builder.zext(c, _I64)
    v = builder.load(builder.gep(data, [q], inbounds=True))
    row = builder.gep(D, [builder.add(builder.mul(c, k), j0)], inbounds=True)
    d = builder.load(builder.bitcast(row, vt.as_pointer()), align=eb)
    vs = builder.insert_element(ir.Constant(vt, ir.Undefined), v, ir.IntType(32)(0))
    vs = builder.shuffle_vector(vs, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), W),
                                                                               [0] * W))
    acc = builder.load(acc_p)
    if is_float:  # separate multiply and add: no contraction, the scalar rounding of every lane
        acc = builder.fadd(acc, builder.fmul(vs, d))
    else:
        acc = builder.add(acc, builder.mul(vs, d))
    builder.store(acc, acc_p)
    builder.store(builder.add(q, _I64(1)), q_p)
    builder.branch(bcond)
    builder.position_at_end(bend)
    dst = builder.gep(out.data, [o], inbounds=True)
    builder.store(builder.load(acc_p), builder.bitcast(dst, vt.as_pointer()), align=eb)
    return context.get_dummy_value()


@intrinsic
def row_vec(typingctx, ind, data, D, q0, q1, k, j0, out, o, width):
    """out[o : o + width] = sum_{q0 <= q < q1} data[q] * D[ind[q] * k + j0 : ind[q] * k + j0 + width]
    with a width-lane register accumulator (entries in index order). The caller
    guarantees 0 <= q0 <= q1 <= len(ind) and every ind[q] in [0, n); data, D and
    out share one dtype (float32, float64 or int64); width is a literal."""
    if not isinstance(width, types.IntegerLiteral):
        return None
    sig = types.void(ind, data, D, types.int64, types.int64, types.int64, types.int64, out, types.int64, width)
    return sig, _row_vec_codegen


def rows_kernel(k, parallel):
    """The kernel for k columns: ``rows(indptr, indices, data, Df, k, n, out, tasks, zero, bad)``,
    out[r, :] = sum over the row's entries q of data[q] * D[indices[q], :], columns by register
    blocks of 64 (as many as k holds), then 32, 16 and 8, the last k mod 8 by a scalar
    accumulator. Only the blocks k needs are compiled (one kernel per such set of blocks and
    flavour, ``parallel`` or serial: at most 32; a first call compiles one), and those blocks
    are compiled unconditionally: no test of k per row."""
    key = (k >= 64, k % 64 >= 32, k % 32 >= 16, k % 16 >= 8, k % 8 > 0, bool(parallel))
    return variant(_make_rows, *key, name=flag_name("rows_", _BLOCK_NAMES, key))


_BLOCK_NAMES = ("b64", "b32", "b16", "b8", "tail", "parallel")


def _make_rows(b64, b32, b16, b8, tail, parallel):
    # the flags are closure cells: Numba keys its cache on their values and prunes the blocks
    # they turn off before typing; the row check is spelled out (Numba's inlining of a helper
    # costs more compile time than its code)
    def rows(indptr, indices, data, Df, k, n, out, tasks, zero, bad):
        if parallel:  # referenced, so that it is a cell: part of the cache key
            pass
        nnz = indices.size
        uk = _U(k)
        k64 = np.int64(k)
        for t in prange(tasks.size - 1):
            if tail:
                acc = np.empty(8, out.dtype)
            for r in range(tasks[t], tasks[t + 1]):
                # a row whose offsets are out of order or past nnz, or whose column indices
                # leave [0, n) (a min and a max in the index dtype, vectorised, no branch per
                # entry), ends the task before anything is read out of range
                p0 = indptr[r]
                p1 = indptr[r + 1]
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
                        row_vec(indices, data, Df, q0, q1, k64, j0, out, o + j0, 64)
                        j0 += 64
                if b32:
                    row_vec(indices, data, Df, q0, q1, k64, j0, out, o + j0, 32)
                    j0 += 32
                if b16:
                    row_vec(indices, data, Df, q0, q1, k64, j0, out, o + j0, 16)
                    j0 += 16
                if b8:
                    row_vec(indices, data, Df, q0, q1, k64, j0, out, o + j0, 8)
                    j0 += 8
                if tail:
                    nt = k64 - j0
                    for j in range(nt):
                        acc[j] = zero
                    for q in range(_U(q0), _U(q1)):
                        v = data[q]
                        base = _U(indices[q]) * uk + _U(j0)
                        for j in range(nt):
                            acc[j] += v * Df[base + _U(j)]
                    for j in range(nt):
                        out[_U(o + j0 + j)] = acc[j]

    return njit(cache=True, parallel=parallel)(rows)
