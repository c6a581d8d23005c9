"""AVX-512 kernels for int8/int16/int32 values with int32 results: the scan
and the segment sums, with the speculate-then-correct structure of App. A.2
Alg. 1 inside one register.

Scan (``scan_int32``): sixteen values at a time, an in-register inclusive scan
(four shift-and-add steps: the U_16 product done by the vector unit) plus the
carry of everything before (broadcast from the last lane), stored whole; the
chunk-local pass of MCScan with the chunk offsets computed beforehand.

Segmented scan (``segscan_int32``): the same scan, and the prefix before each
lane's latest segment start found without a branch per flag: a max-scan of the
start lanes' indices (four shift-and-max steps), a lane permutation of the
exclusive prefixes by those indices, the carried value where no start came yet.
A vector without a start skips that search (one branch per 16 elements;
measured 1.7x faster below 1% flag density and no slower at any density).

Segment sums (``segsum_int32``):
the same in-register scan; at every segment start the exclusive prefix E = P - x is kept, packed
with a compress (``vpcompressd``) and stored whole (the lanes past the starts
are zeros that the next starts overwrite; a masked store only within 16 slots
of the chunk's end), so a chunk writes one word per segment and never branches
on a flag. After each block the words it wrote become segment sums while they
are in L1 (E_(j+1) - E_j, sixteen at a time: ``_vec.adjacent_diff``); a pass
afterwards re-read them from memory (8% of the time at 10% density, half of
it at 50%).
Below one start per 64 elements the flags are tested 64 at a time and a
group without a start is only added up (four vector adds): 3x fewer
instructions at 0.1% density, 1.5x at 1%.

The scan itself (``_vec.scan16``), its carry and the max |x| of the overflow
screen are portable vector IR shared with ``_vec.scan_range``; the carry from
one vector to the next is a single add (``_vec.carry16``), which measured
15-20% faster than broadcasting the last lane of each result.

Words are int32 and wrap: a difference of wrapped prefixes is the exact
segment sum whenever that sum fits int32. The caller's screen (per block,
``|open segment| + len * max|x| <= 2**31 - 1``) says when it might not; such a
chunk is marked suspect and decided exactly (``_seg_kernels.exact_segsum_range``).

x86-only (the compress and permute intrinsics have no lowering without AVX-512F):
this module is imported only when ``_target`` chooses the avx512 path, i.e. when
Numba compiles for a target with avx512f; other targets use ``_seg_kernels``.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._variants import variant
from ._portable import BLOCK, I32_MAX, _first_flag
from ._portable_vec import (
    _call,
    _splat,
    absmax16,
    adjacent_diff,
    carry16,
    load_lanes,
    reduce_umax16,
    scan16,
    scan_range,
    strided_loop,
    sum_i64,
)

__all__ = ["scan_int32", "segscan_int32", "segsum_int32", "scan_int32_serial", "segscan_int32_serial",
           "segsum_int32_serial"]

_W = 16
_I1, _I8, _I16, _I32, _I64 = (ir.IntType(b) for b in (1, 8, 16, 32, 64))
_V = ir.VectorType(_I32, _W)
_OPAQUE = ir.PointerType()


def _codegen(context, builder, sig, args):
    x_t, f_t, out_t = sig.args[0], sig.args[1], sig.args[4]
    x = context.make_array(x_t)(context, builder, args[0]).data
    f = context.make_array(f_t)(context, builder, args[1]).data
    out = context.make_array(out_t)(context, builder, args[4]).data
    lo, hi, k0, p0, sparse, kend = args[2], args[3], args[5], args[6], args[7], args[8]
    xt = context.get_value_type(x_t.dtype)
    fvt = ir.VectorType(_I8, _W)
    iota = ir.Constant(_V, list(range(_W)))
    zero = ir.Constant(_V, None)

    k_p = cgutils.alloca_once(builder, _I64)
    builder.store(k0, k_p)
    c_p = cgutils.alloca_once(builder, _V)  # the running prefix P before the next vector, all lanes
    builder.store(_splat(builder, builder.trunc(p0, _I32), _V), c_p)
    a_p = cgutils.alloca_once(builder, _V)  # lane sums not yet added to c_p (flag-free groups)
    builder.store(zero, a_p)
    mx_p = cgutils.alloca_once(builder, _V)  # max |x| per lane, unsigned (|INT32_MIN| = 2**31)
    builder.store(zero, mx_p)

    def step(i, lanes_mask):
        """Sixteen elements: scan, pack the prefixes before the starts."""
        xv = load_lanes(builder, x, i, xt, _W, lanes_mask, _I32)
        fv = load_lanes(builder, f, i, _I8, _W, lanes_mask)
        absmax16(builder, xv, mx_p)
        m = builder.icmp_unsigned("!=", fv, ir.Constant(fvt, None))
        S = scan16(builder, xv)
        c = builder.load(c_p)
        P = builder.add(S, c)
        E = builder.sub(P, xv)
        packed = _call(builder, "llvm.x86.avx512.mask.compress.v16i32", _V, [E, zero, m])
        cnt = builder.zext(_call(builder, "llvm.ctpop.i16", _I16, [builder.bitcast(m, _I16)]), _I32)
        keep = builder.icmp_signed("<", iota, _splat(builder, cnt, _V))
        k = builder.load(k_p)
        dst = builder.bitcast(builder.gep(out, [builder.add(k, _I64(1))], inbounds=True), _OPAQUE)
        # a whole-vector store where 16 slots from k + 1 are this chunk's (the lanes past the
        # starts hold zeros that later starts overwrite); a masked store near the chunk's end
        room = builder.icmp_signed("<=", builder.add(k, _I64(1 + _W)), kend)
        with builder.if_else(room, likely=True) as (whole, masked):
            with whole:
                builder.store(packed, builder.bitcast(dst, _V.as_pointer()), align=4)
            with masked:
                _call(builder, "llvm.masked.store.v16i32.p0", ir.VoidType(), [packed, dst, _I32(4), keep])
        builder.store(builder.add(k, builder.zext(cnt, _I64)), k_p)
        builder.store(carry16(builder, c, S), c_p)

    def group(i, lanes_mask):
        """Sixty-four elements: when none starts a segment (most groups at low flag
        density), four vector adds into a_p; otherwise a_p is folded into the
        carry and the four vectors take ``step``."""
        subs = [None] * 4
        if lanes_mask is not None:
            subs = [builder.shuffle_vector(lanes_mask, lanes_mask,
                                           ir.Constant(ir.VectorType(_I32, _W), list(range(16 * j, 16 * j + 16))))
                    for j in range(4)]
        fv = load_lanes(builder, f, i, _I8, 4 * _W, lanes_mask)
        m = builder.bitcast(builder.icmp_unsigned("!=", fv, ir.Constant(ir.VectorType(_I8, 4 * _W), None)), _I64)
        with builder.if_else(builder.icmp_unsigned("==", m, _I64(0)), likely=True) as (none, some):
            with none:
                acc = builder.load(a_p)
                for j in range(4):
                    xv = load_lanes(builder, x, builder.add(i, _I64(16 * j)), xt, _W, subs[j], _I32)
                    absmax16(builder, xv, mx_p)
                    acc = builder.add(acc, xv)
                builder.store(acc, a_p)
            with some:
                tot = _call(builder, "llvm.vector.reduce.add.v16i32", _I32, [builder.load(a_p)])
                builder.store(builder.add(builder.load(c_p), _splat(builder, tot, _V)), c_p)
                builder.store(zero, a_p)
                for j in range(4):
                    step(builder.add(i, _I64(16 * j)), subs[j])

    with builder.if_else(sparse) as (branchy, branchless):
        with branchy:
            strided_loop(builder, lo, hi, 4 * _W, group, "grp")
        with branchless:
            strided_loop(builder, lo, hi, _W, step, "seg")
    tot = _call(builder, "llvm.vector.reduce.add.v16i32", _I32, [builder.load(a_p)])
    p = builder.sext(builder.add(builder.extract_element(builder.load(c_p), _I32(0)), tot), _I64)
    return context.make_tuple(builder, sig.return_type, [builder.load(k_p), p, reduce_umax16(builder, mx_p)])


def _make_scan_int32(parallel):
    @njit(cache=True, parallel=parallel)
    def scan_int32(x, out, starts, offs, exclusive, check, suspect):
        """``_seg_kernels.scan_int``'s contract (chunk c from offs[c]; suspect[c] when
        a block's screen |p| + len * max|x| <= 2**31 - 1 fails) with ``scan_range``
        per block of BLOCK elements (max|x| returned by ``scan_range``: no second read)."""
        parallel  # noqa: B018 (a closure cell: one cache entry per variant)
        for c in prange(starts.size - 1):
            lo, hi = starts[c], starts[c + 1]
            p = offs[c]
            sus = check and (p > I32_MAX or p < -I32_MAX - 1)  # the offset itself left int32
            for b0 in range(lo, hi, BLOCK):
                b1 = min(b0 + BLOCK, hi)
                v = np.int64(np.int32(p))
                p, mx = scan_range(x, b0, b1, out, p, exclusive)
                if check and (v if v >= 0 else -v) + (b1 - b0) * mx > I32_MAX:
                    sus = True
            suspect[c] = sus
    return scan_int32


# chunks on threads, and the serial twin for one chunk (its first call compiles no parfor)
scan_int32 = variant(_make_scan_int32, True, name="scan_int32")
scan_int32_serial = variant(_make_scan_int32, False, name="scan_int32_serial")


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
    mx_p = cgutils.alloca_once(builder, _V)  # max |x| per lane, unsigned (|INT32_MIN| = 2**31)
    builder.store(ir.Constant(_V, None), mx_p)

    def store(res, i, lanes_mask):
        op = builder.bitcast(builder.gep(out, [i], inbounds=True), _OPAQUE)
        if lanes_mask is None:
            builder.store(res, builder.bitcast(op, _V.as_pointer()), align=4)
        else:
            _call(builder, "llvm.masked.store.v16i32.p0", ir.VoidType(), [res, op, _I32(4), lanes_mask])

    def with_starts(i, lanes_mask, m, E, P):
        idx = builder.select(m, iota, minus1)  # the latest start at or before each lane: a max-scan
        for sh in (1, 2, 4, 8):
            t = builder.shuffle_vector(idx, minus1, ir.Constant(ir.VectorType(_I32, _W),
                                                                 [(j - sh) if j >= sh else _W for j in range(_W)]))
            idx = _call(builder, "llvm.smax.v16i32", _V, [idx, t])
        at = _call(builder, "llvm.x86.avx512.permvar.si.512", _V, [E, idx])
        bv = builder.select(builder.icmp_signed(">=", idx, ir.Constant(_V, None)), at, builder.load(b_p))
        store(builder.sub(builder.select(excl, E, P), bv), i, lanes_mask)
        # the next b: the last start's prefix if this vector has one, else unchanged (kept off
        # the permutation's latency, which would otherwise chain from vector to vector)
        any_start = builder.icmp_unsigned("!=", builder.bitcast(m, _I16), _I16(0))
        builder.store(builder.select(any_start, builder.shuffle_vector(at, ir.Constant(_V, ir.Undefined), last),
                                     builder.load(b_p)), b_p)

    def step(i, lanes_mask):
        xv = load_lanes(builder, x, i, xt, _W, lanes_mask, _I32)
        fv = load_lanes(builder, f, i, _I8, _W, lanes_mask)
        builder.store(builder.or_(builder.load(o_p), fv), o_p)
        absmax16(builder, xv, mx_p)
        m = builder.icmp_unsigned("!=", fv, ir.Constant(fvt, None))
        S = scan16(builder, xv)
        c = builder.load(c_p)
        P = builder.add(S, c)
        E = builder.sub(P, xv)
        builder.store(carry16(builder, c, S), c_p)
        # a vector without a start (most of them at low flag density) skips the search for each
        # lane's latest start; measured no slower at any density, 1.7x faster below 1%
        none = builder.icmp_unsigned("==", builder.bitcast(m, _I16), _I16(0))
        with builder.if_else(none, likely=True) as (no_start, some):
            with no_start:
                store(builder.sub(builder.select(excl, E, P), builder.load(b_p)), i, lanes_mask)
            with some:
                with_starts(i, lanes_mask, m, E, P)

    strided_loop(builder, lo, hi, _W, step, "sscan")
    p = builder.sext(builder.extract_element(builder.load(c_p), _I32(0)), _I64)
    b = builder.sext(builder.extract_element(builder.load(b_p), _I32(0)), _I64)
    o = builder.zext(_call(builder, "llvm.vector.reduce.or.v16i8", _I8, [builder.load(o_p)]), _I64)
    return context.make_tuple(builder, sig.return_type, [p, b, o, reduce_umax16(builder, mx_p)])


@intrinsic
def segscan_range(typingctx, x, f, lo, hi, out, p, b, exclusive):
    """Segmented scan of x[lo:hi] into out[lo:hi] as P - b (inclusive) or
    P - x - b (exclusive), int32 words that wrap: P the running prefix from p,
    b the prefix before the latest start (from b; a set flag f[i] makes it
    P - x[i]). Returns (P, b, OR of the flag bytes, max |x[i]|). x (int8/16/32),
    f (bytes) and out (int32) contiguous, 0 <= lo <= hi <= len."""
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
            and x.layout == "C" and isinstance(f, types.Array) and f.layout == "C" and f.dtype.bitwidth == 8
            and isinstance(out, types.Array) and out.layout == "C" and out.dtype == types.int32):
        return None
    sig = types.UniTuple(types.int64, 4)(x, f, types.int64, types.int64, out, types.int64, types.int64,
                                         types.boolean)
    return sig, _segscan_codegen


def _make_segscan_int32(parallel):
    @njit(cache=True, parallel=parallel)
    def segscan_int32(x, f, out, starts, exclusive, check, suspect, tails, has_flag, bad):
        """``_seg_kernels.segscan_int``'s contract (chunk-local, a chunk's start acts
        as a segment start; tails, has_flag, bad, suspect) with ``segscan_range``
        per block of BLOCK elements; the overflow screen uses the block's max |x| that ``segscan_range`` returns."""
        parallel  # noqa: B018 (a closure cell: one cache entry per variant)
        for c in prange(starts.size - 1):
            lo, hi = starts[c], starts[c + 1]
            p = np.int64(0)
            b = np.int64(0)
            o = np.int64(0)
            sus = False
            for b0 in range(lo, hi, BLOCK):
                b1 = min(b0 + BLOCK, hi)
                v = np.int64(np.int32(p - b))  # the open segment so far (exact while screened)
                p, b, ob, mx = segscan_range(x, f, b0, b1, out, p, b, exclusive)
                if check and (v if v >= 0 else -v) + (b1 - b0) * mx > I32_MAX:
                    sus = True
                o |= ob
            tails[c] = np.int64(np.int32(p - b))
            has_flag[c] = o != 0
            suspect[c] = sus
            bad[c] = o
    return segscan_int32


# chunks on threads, and the serial twin for one chunk (its first call compiles no parfor)
segscan_int32 = variant(_make_segscan_int32, True, name="segscan_int32")
segscan_int32_serial = variant(_make_segscan_int32, False, name="segscan_int32_serial")


@intrinsic
def starts_prefix(typingctx, x, f, lo, hi, out, k, p, sparse, kend):
    """For lo <= i < hi in order: P += x[i] (int32, wrapping, from p); at every
    set flag f[i] store P - x[i] (the prefix before that segment start) at
    out[k + 1], out[k + 2], ... Returns (the last slot written, P, max |x[i]|).
    ``sparse``: test the flags 64 at a time and only add up groups without a
    start (fewer instructions when most groups have none, a mispredicted branch
    per group when many have one); otherwise every 16 elements take the
    branch-free scan-and-pack. Slots k + 1 .. kend - 1 belong to the caller,
    who guarantees one per set flag (kend <= len(out)) and 0 <= lo <= hi <= len;
    slots past the last start may be overwritten with zeros. x and f
    contiguous, f of bytes."""
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
            and x.layout == "C" and isinstance(f, types.Array) and f.layout == "C" and f.dtype.bitwidth == 8):
        return None
    sig = types.UniTuple(types.int64, 3)(x, f, types.int64, types.int64, out, types.int64, types.int64,
                                         types.boolean, types.int64)
    return sig, _codegen


def _make_segsum_int32(parallel):
    @njit(cache=True, parallel=parallel)
    def segsum_int32(x, f, starts, bases, out, heads, tails, check, suspect, sparse):
        """``_seg_kernels.segsum_int``'s contract (heads, tails, suspect; chunk c
        writes its segments bases[c]+1 .. bases[c]+counts[c]) for int8/16/32 values
        and an int32 ``out``, with ``starts_prefix`` per block of BLOCK elements
        (``sparse``: its flag-group mode). The overflow screen uses the block's
        max |x| that ``starts_prefix`` returns (no second read of the block)."""
        parallel  # noqa: B018 (a closure cell: one cache entry per variant)
        for c in prange(starts.size - 1):
            lo, hi = starts[c], starts[c + 1]
            fs = f[lo:hi]
            m = 0 if lo == 0 else _first_flag(fs)
            if lo == 0 and fs.size > 0:
                m = _first_flag(fs[1:]) + 1
            heads[c] = sum_i64(x, lo, lo + m)
            k = np.int64(bases[c])
            p = np.int64(0)
            b = np.int64(0)  # the prefix before the open segment's start
            sus = False
            first = bases[c] + 1
            kend = bases[c + 1] + 1 if c + 1 < bases.size else out.size  # this chunk's slots end
            for b0 in range(lo + m, hi, BLOCK):
                b1 = min(b0 + BLOCK, hi)
                v = np.int64(np.int32(p - b))  # the open segment so far (exact while screened)
                k1, p, mx = starts_prefix(x, f, b0, b1, out, k, p, sparse, kend)
                if check and (v if v >= 0 else -v) + (b1 - b0) * mx > I32_MAX:
                    sus = True
                if k1 != k:
                    b = np.int64(out[k1])
                    # prefixes before consecutive starts -> the sums of the segments that ended,
                    # while the block's words are in L1 (a pass afterwards re-reads them from memory)
                    adjacent_diff(out, max(k, first), k1)
                    k = k1
            # the chunk's last segment runs to its end
            if k >= first:
                tail = np.int32(np.int32(p) - out[k])
                out[k] = tail
                tails[c] = np.int64(tail)
            else:
                tails[c] = 0
            suspect[c] = sus
    return segsum_int32


# chunks on threads, and the serial twin for one chunk (its first call compiles no parfor)
segsum_int32 = variant(_make_segsum_int32, True, name="segsum_int32")
segsum_int32_serial = variant(_make_segsum_int32, False, name="segsum_int32_serial")
