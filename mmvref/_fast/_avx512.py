"""AVX-512 kernels for int8/int16/int32 values with int32 results: the scan
and the segment sums, with the speculate-then-correct structure of App. A.2
Alg. 1 inside one register.

Scan (``scan_int32``): sixteen values at a time, an in-register inclusive scan
(four shift-and-add steps: the U_16 product done by the vector unit) plus the
carry of everything before (broadcast from the last lane), stored whole; the
chunk-local pass of MCScan with the chunk offsets computed beforehand.

Segmented scan (``segscan_int32``): the same scan, and the prefix before each
lane's latest segment start found without a branch: a max-scan of the start
lanes' indices (four shift-and-max steps), a lane permutation of the
exclusive prefixes by those indices, the carried value where no start came yet.

Segment sums (``segsum_int32``):
the same in-register scan; at every segment start the exclusive prefix E = P - x is kept, packed
with a compress (``vpcompressd``) and stored with a masked store, so a chunk
writes one word per segment and never branches on a flag. A second pass
over the chunk's words turns consecutive prefixes into segment sums
(E_(j+1) - E_j; measured as fast as forming the differences in registers).

Words are int32 and wrap: a difference of wrapped prefixes is the exact
segment sum whenever that sum fits int32. The caller's screen (per block,
``|open segment| + len * max|x| <= 2**31 - 1``) says when it might not; such a
chunk is marked suspect and decided exactly (``_seg_kernels.exact_segsum_range``).

``AVAILABLE`` is False on CPUs without AVX-512F (the x86 compress intrinsic has
no portable lowering); ``segops`` then uses ``_seg_kernels.segsum_int``.
"""
from __future__ import annotations

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._seg_kernels import BLOCK, I32_MAX, _abs_sum, _first_flag
from ._vec import _call, _splat, load_lanes, strided_loop

__all__ = ["AVAILABLE", "scan_int32", "segscan_int32", "segsum_int32"]

AVAILABLE = "avx512f" in llvm.get_host_cpu_features().flatten()

_W = 16
_I1, _I8, _I16, _I32, _I64 = (ir.IntType(b) for b in (1, 8, 16, 32, 64))
_V = ir.VectorType(_I32, _W)
_OPAQUE = ir.PointerType()


def _scan16(builder, v):
    """Inclusive prefix sums of the 16 lanes: lane j += lane j - s for s = 1, 2, 4, 8."""
    zero = ir.Constant(_V, None)
    for s in (1, 2, 4, 8):
        idx = [(j - s) if j >= s else _W for j in range(_W)]  # lane 16 = the first lane of ``zero``
        v = builder.add(v, builder.shuffle_vector(v, zero, ir.Constant(ir.VectorType(_I32, _W), idx)))
    return v


def _codegen(context, builder, sig, args):
    x_t, f_t, out_t = sig.args[0], sig.args[1], sig.args[4]
    x = context.make_array(x_t)(context, builder, args[0]).data
    f = context.make_array(f_t)(context, builder, args[1]).data
    out = context.make_array(out_t)(context, builder, args[4]).data
    lo, hi, k0, p0 = args[2], args[3], args[5], args[6]
    xt = context.get_value_type(x_t.dtype)
    fvt = ir.VectorType(_I8, _W)
    iota = ir.Constant(_V, list(range(_W)))

    k_p = cgutils.alloca_once(builder, _I64)
    builder.store(k0, k_p)
    c_p = cgutils.alloca_once(builder, _V)
    builder.store(_splat(builder, builder.trunc(p0, _I32), _V), c_p)

    def step(i, lanes_mask):
        xv = load_lanes(builder, x, i, xt, _W, lanes_mask, _I32)
        fv = load_lanes(builder, f, i, _I8, _W, lanes_mask)
        m = builder.icmp_unsigned("!=", fv, ir.Constant(fvt, None))
        P = builder.add(_scan16(builder, xv), builder.load(c_p))
        E = builder.sub(P, xv)
        packed = _call(builder, "llvm.x86.avx512.mask.compress.v16i32", _V, [E, ir.Constant(_V, None), m])
        cnt = builder.zext(_call(builder, "llvm.ctpop.i16", _I16, [builder.bitcast(m, _I16)]), _I32)
        keep = builder.icmp_signed("<", iota, _splat(builder, cnt, _V))
        k = builder.load(k_p)
        dst = builder.bitcast(builder.gep(out, [builder.add(k, _I64(1))], inbounds=True), _OPAQUE)
        _call(builder, "llvm.masked.store.v16i32.p0", ir.VoidType(), [packed, dst, _I32(4), keep])
        builder.store(builder.add(k, builder.zext(cnt, _I64)), k_p)
        builder.store(builder.shuffle_vector(P, ir.Constant(_V, ir.Undefined),
                                             ir.Constant(ir.VectorType(_I32, _W), [_W - 1] * _W)), c_p)

    strided_loop(builder, lo, hi, _W, step, "seg")
    p = builder.sext(builder.extract_element(builder.load(c_p), _I32(0)), _I64)
    return context.make_tuple(builder, sig.return_type, [builder.load(k_p), p])


def _scan_codegen(context, builder, sig, args):
    x_t, out_t = sig.args[0], sig.args[3]
    x = context.make_array(x_t)(context, builder, args[0]).data
    out = context.make_array(out_t)(context, builder, args[3]).data
    lo, hi, p0, excl = args[1], args[2], args[4], args[5]
    xt = context.get_value_type(x_t.dtype)
    c_p = cgutils.alloca_once(builder, _V)
    builder.store(_splat(builder, builder.trunc(p0, _I32), _V), c_p)

    def step(i, lanes_mask):
        op = builder.bitcast(builder.gep(out, [i], inbounds=True), _OPAQUE)
        xv = load_lanes(builder, x, i, xt, _W, lanes_mask, _I32)
        P = builder.add(_scan16(builder, xv), builder.load(c_p))
        res = builder.select(excl, builder.sub(P, xv), P)
        if lanes_mask is None:
            builder.store(res, builder.bitcast(op, _V.as_pointer()), align=4)
        else:
            _call(builder, "llvm.masked.store.v16i32.p0", ir.VoidType(), [res, op, _I32(4), lanes_mask])
        builder.store(builder.shuffle_vector(P, ir.Constant(_V, ir.Undefined),
                                             ir.Constant(ir.VectorType(_I32, _W), [_W - 1] * _W)), c_p)

    strided_loop(builder, lo, hi, _W, step, "scan")
    return builder.sext(builder.extract_element(builder.load(c_p), _I32(0)), _I64)


@intrinsic
def scan_range(typingctx, x, lo, hi, out, p, exclusive):
    """out[i] = p + x[lo] + ... + x[i] (inclusive) or that less x[i] (exclusive)
    for lo <= i < hi, int32 words that wrap; returns p + sum(x[lo:hi]). x (int8/16/32)
    and out (int32) contiguous, 0 <= lo <= hi <= len."""
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
            and x.layout == "C" and isinstance(out, types.Array) and out.layout == "C"
            and out.dtype == types.int32):
        return None
    sig = types.int64(x, types.int64, types.int64, out, types.int64, types.boolean)
    return sig, _scan_codegen


@njit(cache=True, parallel=True)
def scan_int32(x, out, starts, offs, exclusive, check, suspect):
    """``_seg_kernels.scan_int``'s contract (chunk c from offs[c]; suspect[c] when
    a block's screen |p| + len * max|x| <= 2**31 - 1 fails) with ``scan_range``
    per block of BLOCK elements."""
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        p = offs[c]
        sus = check and (p > I32_MAX or p < -I32_MAX - 1)  # the offset itself left int32
        for b0 in range(lo, hi, BLOCK):
            b1 = min(b0 + BLOCK, hi)
            if check:
                v = np.int64(np.int32(p))
                pa = v if v >= 0 else -v
                if pa + _abs_sum(x[b0:b1]) > I32_MAX:
                    sus = True
            p = scan_range(x, b0, b1, out, p, exclusive)
        suspect[c] = sus


def _segscan_codegen(context, builder, sig, args):
    x_t, f_t, out_t = sig.args[0], sig.args[1], sig.args[4]
    x = context.make_array(x_t)(context, builder, args[0]).data
    f = context.make_array(f_t)(context, builder, args[1]).data
    out = context.make_array(out_t)(context, builder, args[4]).data
    lo, hi, p0, b0, excl = args[2], args[3], args[5], args[6], args[7]
    xt = context.get_value_type(x_t.dtype)
    fvt = ir.VectorType(_I8, _W)
    iota = ir.Constant(_V, list(range(_W)))
    minus1 = ir.Constant(_V, [-1] * _W)
    last = ir.Constant(ir.VectorType(_I32, _W), [_W - 1] * _W)
    c_p = cgutils.alloca_once(builder, _V)  # P carried, all lanes
    builder.store(_splat(builder, builder.trunc(p0, _I32), _V), c_p)
    b_p = cgutils.alloca_once(builder, _V)  # the prefix before the open segment's start, all lanes
    builder.store(_splat(builder, builder.trunc(b0, _I32), _V), b_p)
    o_p = cgutils.alloca_once(builder, fvt)  # OR of the flag bytes (a byte > 1 is an invalid flag)
    builder.store(ir.Constant(fvt, None), o_p)

    def step(i, lanes_mask):
        op = builder.bitcast(builder.gep(out, [i], inbounds=True), _OPAQUE)
        xv = load_lanes(builder, x, i, xt, _W, lanes_mask, _I32)
        fv = load_lanes(builder, f, i, _I8, _W, lanes_mask)
        builder.store(builder.or_(builder.load(o_p), fv), o_p)
        m = builder.icmp_unsigned("!=", fv, ir.Constant(fvt, None))
        P = builder.add(_scan16(builder, xv), builder.load(c_p))
        E = builder.sub(P, xv)
        idx = builder.select(m, iota, minus1)  # the latest start at or before each lane: a max-scan
        for sh in (1, 2, 4, 8):
            t = builder.shuffle_vector(idx, minus1, ir.Constant(ir.VectorType(_I32, _W),
                                                                 [(j - sh) if j >= sh else _W for j in range(_W)]))
            idx = _call(builder, "llvm.smax.v16i32", _V, [idx, t])
        at = _call(builder, "llvm.x86.avx512.permvar.si.512", _V, [E, idx])
        bv = builder.select(builder.icmp_signed(">=", idx, ir.Constant(_V, None)), at, builder.load(b_p))
        res = builder.sub(builder.select(excl, E, P), bv)
        if lanes_mask is None:
            builder.store(res, builder.bitcast(op, _V.as_pointer()), align=4)
        else:
            _call(builder, "llvm.masked.store.v16i32.p0", ir.VoidType(), [res, op, _I32(4), lanes_mask])
        builder.store(builder.shuffle_vector(P, ir.Constant(_V, ir.Undefined), last), c_p)
        builder.store(builder.shuffle_vector(bv, ir.Constant(_V, ir.Undefined), last), b_p)

    strided_loop(builder, lo, hi, _W, step, "sscan")
    p = builder.sext(builder.extract_element(builder.load(c_p), _I32(0)), _I64)
    b = builder.sext(builder.extract_element(builder.load(b_p), _I32(0)), _I64)
    o = builder.zext(_call(builder, "llvm.vector.reduce.or.v16i8", _I8, [builder.load(o_p)]), _I64)
    return context.make_tuple(builder, sig.return_type, [p, b, o])


@intrinsic
def segscan_range(typingctx, x, f, lo, hi, out, p, b, exclusive):
    """Segmented scan of x[lo:hi] into out[lo:hi] as P - b (inclusive) or
    P - x - b (exclusive), int32 words that wrap: P the running prefix from p,
    b the prefix before the latest start (from b; a set flag f[i] makes it
    P - x[i]). Returns (P, b, OR of the flag bytes). x (int8/16/32), f (bytes)
    and out (int32) contiguous, 0 <= lo <= hi <= len."""
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
            and x.layout == "C" and isinstance(f, types.Array) and f.layout == "C" and f.dtype.bitwidth == 8
            and isinstance(out, types.Array) and out.layout == "C" and out.dtype == types.int32):
        return None
    sig = types.UniTuple(types.int64, 3)(x, f, types.int64, types.int64, out, types.int64, types.int64,
                                         types.boolean)
    return sig, _segscan_codegen


@njit(cache=True, parallel=True)
def segscan_int32(x, f, out, starts, exclusive, check, suspect, tails, has_flag, bad):
    """``_seg_kernels.segscan_int``'s contract (chunk-local, a chunk's start acts
    as a segment start; tails, has_flag, bad, suspect) with ``segscan_range``
    per block of BLOCK elements."""
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        p = np.int64(0)
        b = np.int64(0)
        o = np.int64(0)
        sus = False
        for b0 in range(lo, hi, BLOCK):
            b1 = min(b0 + BLOCK, hi)
            if check:
                v = np.int64(np.int32(p - b))  # the open segment so far (exact while screened)
                va = v if v >= 0 else -v
                if va + _abs_sum(x[b0:b1]) > I32_MAX:
                    sus = True
            p, b, ob = segscan_range(x, f, b0, b1, out, p, b, exclusive)
            o |= ob
        tails[c] = np.int64(np.int32(p - b))
        has_flag[c] = _first_flag(f[lo:hi]) < hi - lo
        suspect[c] = sus
        bad[c] = o


@intrinsic
def starts_prefix(typingctx, x, f, lo, hi, out, k, p):
    """For lo <= i < hi in order: P += x[i] (int32, wrapping, from p); at every
    set flag f[i] store P - x[i] (the prefix before that segment start) at
    out[k + 1], out[k + 2], ... Returns (the last slot written, P). The caller
    guarantees the slots exist (one per set flag) and 0 <= lo <= hi <= len;
    x and f contiguous, f of bytes."""
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
            and x.layout == "C" and isinstance(f, types.Array) and f.layout == "C" and f.dtype.bitwidth == 8):
        return None
    sig = types.UniTuple(types.int64, 2)(x, f, types.int64, types.int64, out, types.int64, types.int64)
    return sig, _codegen


@njit(cache=True, parallel=True)
def segsum_int32(x, f, starts, bases, out, heads, tails, check, suspect):
    """``_seg_kernels.segsum_int``'s contract (heads, tails, suspect; chunk c
    writes its segments bases[c]+1 .. bases[c]+counts[c]) for int8/16/32 values
    and an int32 ``out``, with ``starts_prefix`` per block of BLOCK elements."""
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        fs = f[lo:hi]
        m = 0 if lo == 0 else _first_flag(fs)
        if lo == 0 and fs.size > 0:
            m = _first_flag(fs[1:]) + 1
        h = np.int64(0)
        for i in range(lo, lo + m):
            h += x[i]
        heads[c] = h
        k = np.int64(bases[c])
        p = np.int64(0)
        b = np.int64(0)  # the prefix before the open segment's start
        sus = False
        for b0 in range(lo + m, hi, BLOCK):
            b1 = min(b0 + BLOCK, hi)
            if check:
                v = np.int64(np.int32(p - b))  # the open segment so far (exact while screened)
                va = v if v >= 0 else -v
                if va + _abs_sum(x[b0:b1]) > I32_MAX:
                    sus = True
            k1, p = starts_prefix(x, f, b0, b1, out, k, p)
            if k1 != k:
                b = np.int64(out[k1])
                k = k1
        # prefixes before each start -> segment sums; the chunk's last segment runs to its end
        first = bases[c] + 1
        for j in range(first, k):
            out[j] = out[j + 1] - out[j]
        if k >= first:
            tail = np.int32(np.int32(p) - out[k])
            out[k] = tail
            tails[c] = np.int64(tail)
        else:
            tails[c] = 0
        suspect[c] = sus
