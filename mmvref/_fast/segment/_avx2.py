"""AVX2 kernels for int8/int16/int32 values with int32 results: the scan, the
segmented scan and the segment sums of ``_avx512`` (same names, signatures and
contracts) for x86 CPUs with AVX2 but no AVX-512, eight int32 lanes per vector.

Scan (``scan8``): lane j += lane j - s within each 128-bit half (s = 1, 2: one
byte shift each), then the upper half += lane 3 (one cross-half broadcast), so
three shuffles and three adds per eight values; the carry into the next vector
is a single add (the broadcast of the vector's total is off the chain).

Segmented scan (``segscan_int32``): the same scan; the prefix before each
lane's latest segment start by a max-scan of the start lanes' indices (the
same three-step pattern, with max) and a ``vpermd`` of the exclusive prefixes.
Sixteen values per step; a step without a start skips the search (one branch
per 16 elements, as in ``_avx512``; the max-scan counts lanes from 1 so that its
identity is 0 and its in-lane steps are byte shifts, half the shuffles of a -1 fill).

Both scans write outputs of ``NT_MIN`` elements and more with streaming
(non-temporal) stores from the first 32-byte aligned element of each chunk: the
output's cache lines are not read before they are written (a third of a copy's
memory traffic), and an output that large would not stay in the cache anyway.

Segment sums (``segsum_int32``): the exclusive prefix E = P - x at every start,
left-packed without a compress instruction: the eight flag bits index a
256-entry table of lane indices (eight bytes each, widened by ``vpmovzxbd``),
and ``vpermd`` packs (two vectors per step, one flag compare); the whole vector is
stored at the next slot (lanes past the starts hold values the next starts
overwrite; masked stores within sixteen slots of the chunk's end). Below one start per 64 elements the flags are tested
64 at a time and a group without a start is only added up (eight vector adds); in a
group with one, each vector without a start is only added up too (a branch per
vector, predictable at such densities).
After each block the prefixes become segment sums while in L1
(``_vec.adjacent_diff``). ``segsum_int32_nocount`` runs the same kernel without a
flag-counting pass before it (segops uses it at low flag density): chunk c packs its
sums from the provisional slot starts[c] + 1 of a len(x) + 1 scratch (it has at most
its length of starts), counts and ORs its flags as it goes, and ``gather_slots`` then
copies each chunk's slots to their true places in parallel.

Words are int32 and wrap; the overflow screen and the exact recheck are those
of ``_avx512`` (per block, ``|open segment| + len * max|x| <= 2**31 - 1``,
max |x| gathered in registers).

x86-only (``llvm.x86.avx2.permd`` has no lowering elsewhere): imported only when
``_target`` chooses the avx2 path, i.e. Numba compiles for a target with avx2.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._variants import variant
from ._portable import BLOCK, I32_MAX, _first_flag
from ._portable_vec import _call, _splat, adjacent_diff, load_lanes, strided_loop, sum_i64

__all__ = ["scan_int32", "segscan_int32", "segsum_int32", "segsum_int32_nocount", "scan_int32_serial",
           "segscan_int32_serial", "segsum_int32_serial", "segsum_int32_nocount_serial", "gather_slots", "scan8"]

_W = 8
_I1, _I8, _I32, _I64 = (ir.IntType(b) for b in (1, 8, 32, 64))
_V = ir.VectorType(_I32, _W)
_MV = ir.VectorType(_I32, _W)  # shuffle masks
_OPAQUE = ir.PointerType()


def _shuf(builder, v, fill, idx):
    return builder.shuffle_vector(v, fill, ir.Constant(_MV, idx))


def _scan_steps(builder, v, fill, op):
    """Inclusive ``op``-scan of 8 lanes (``fill``: the identity, a constant vector):
    in-lane shifts by one and two lanes, then the upper half combined with lane 3."""
    for idx in ([8, 0, 1, 2, 8, 4, 5, 6], [8, 8, 0, 1, 8, 8, 4, 5], [8, 8, 8, 8, 3, 3, 3, 3]):
        v = op(v, _shuf(builder, v, fill, idx))
    return v


def scan8(builder, v):
    """Inclusive prefix sums of 8 int32 lanes."""
    return _scan_steps(builder, v, ir.Constant(_V, None), builder.add)


def _bcast_last(builder, v):
    return _shuf(builder, v, ir.Constant(_V, ir.Undefined), [_W - 1] * _W)


def _absmax(builder, xv, mx_p):
    a = _call(builder, "llvm.abs.v8i32", _V, [xv, ir.Constant(_I1, 0)])
    builder.store(_call(builder, "llvm.umax.v8i32", _V, [builder.load(mx_p), a]), mx_p)


def _reduce_umax(builder, mx_p):
    return builder.zext(_call(builder, "llvm.vector.reduce.umax.v8i32", _I32, [builder.load(mx_p)]), _I64)


def _sub_mask(builder, lanes_mask, j, width):
    """Lanes j*8 .. j*8+7 of a ``width``-lane mask (None stays None)."""
    if lanes_mask is None:
        return None
    return builder.shuffle_vector(lanes_mask, lanes_mask,
                                  ir.Constant(_MV, list(range(_W * j, _W * j + _W))))


def _store(builder, out, i, res, lanes_mask, nt=False):
    """out[i:i + 8] = res (the lanes of ``lanes_mask`` only, when given). ``nt``: a
    non-temporal (streaming) store, for 32-byte aligned whole vectors: the line is not read
    before it is written, which saves a third of the memory traffic of a large output."""
    op = builder.bitcast(builder.gep(out, [i], inbounds=True), _OPAQUE)
    if lanes_mask is None:
        st = builder.store(res, builder.bitcast(op, _V.as_pointer()), align=32 if nt else 4)
        if nt:
            st.set_metadata("nontemporal", builder.module.add_metadata([_I32(1)]))
    else:
        _call(builder, "llvm.masked.store.v8i32.p0", ir.VoidType(), [res, op, _I32(4), lanes_mask])


def _flag_mask(builder, fv):
    """(lanes with a set flag as <N x i1>, the same as an N-bit integer)."""
    m = builder.icmp_unsigned("!=", fv, ir.Constant(fv.type, None))
    return m, builder.bitcast(m, ir.IntType(fv.type.count))


# ----------------------------------------------------------------------------- scan

def _scan_codegen(context, builder, sig, args, nt=False):
    x = context.make_array(sig.args[0])(context, builder, args[0]).data
    out = context.make_array(sig.args[3])(context, builder, args[3]).data
    lo, hi, p0, excl = args[1], args[2], args[4], args[5]
    xt = context.get_value_type(sig.args[0].dtype)
    c_p = cgutils.alloca_once(builder, _V)
    builder.store(_splat(builder, builder.trunc(p0, _I32), _V), c_p)
    mx_p = cgutils.alloca_once(builder, _V)
    builder.store(ir.Constant(_V, None), mx_p)

    def step(i, lanes_mask):
        c = builder.load(c_p)
        for j in range(2):  # sixteen values: two independent in-register scans, one carry chain
            ij = builder.add(i, _I64(_W * j))
            mj = _sub_mask(builder, lanes_mask, j, 2 * _W)
            xv = load_lanes(builder, x, ij, xt, _W, mj, _I32)
            _absmax(builder, xv, mx_p)
            S = scan8(builder, xv)
            P = builder.add(S, c)
            _store(builder, out, ij, builder.select(excl, builder.sub(P, xv), P), mj, nt)
            c = builder.add(c, _bcast_last(builder, S))
        builder.store(c, c_p)

    strided_loop(builder, lo, hi, 2 * _W, step, "scan8")
    p = builder.sext(builder.extract_element(builder.load(c_p), _I32(0)), _I64)
    return context.make_tuple(builder, sig.return_type, [p, _reduce_umax(builder, mx_p)])


def _narrow(x):
    return (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
            and x.layout == "C")


def _i32_out(a):
    return isinstance(a, types.Array) and a.layout == "C" and a.dtype == types.int32


@intrinsic
def scan_range8(typingctx, x, lo, hi, out, p, exclusive, nt):
    """``_vec.scan_range`` (out[i] = p + x[lo] + ... + x[i], or that less x[i];
    returns (p + sum, max |x|)) with eight-lane AVX2 scans. ``nt`` (a literal bool):
    streaming stores, for &out[lo] 32-byte aligned."""
    if not (_narrow(x) and _i32_out(out) and isinstance(nt, types.BooleanLiteral)):
        return None
    use_nt = nt.literal_value
    return types.UniTuple(types.int64, 2)(x, types.int64, types.int64, out, types.int64, types.boolean, nt), \
        lambda c, b, sig, args: _scan_codegen(c, b, sig, args, use_nt)


@intrinsic
def sfence(typingctx):
    """Order the streaming stores before what follows (they are weakly ordered)."""
    def codegen(context, builder, sig, args):
        _call(builder, "llvm.x86.sse.sfence", ir.VoidType(), [])
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def address(typingctx, a):
    """The address of a[0] (an int64)."""
    if not isinstance(a, types.Array):
        return None

    def codegen(context, builder, sig, args):
        return builder.ptrtoint(context.make_array(sig.args[0])(context, builder, args[0]).data, _I64)
    return types.int64(a), codegen


#: outputs of at least this many elements are written with streaming stores (they would
#: not stay in the cache anyway); smaller ones stay in the cache for what reads them next
NT_MIN = 1 << 23


@njit(cache=True)
def _aligned_head(out, lo, hi):
    """The first index >= lo where &out[i] is 32-byte aligned (at most hi)."""
    a = (address(out) + 4 * lo) & 31
    return min(hi, lo + ((32 - a) & 31) // 4) if a % 4 == 0 else hi


def _make_scan_int32(parallel):
    @njit(cache=True, parallel=parallel)
    def scan_int32(x, out, starts, offs, exclusive, check, suspect):
        """``_avx512.scan_int32``'s contract with ``scan_range8`` per block."""
        parallel  # noqa: B018 (a closure cell: one cache entry per variant)
        for c in prange(starts.size - 1):
            lo, hi = starts[c], starts[c + 1]
            p = offs[c]
            sus = check and (p > I32_MAX or p < -I32_MAX - 1)  # the offset itself left int32
            nt = out.size >= NT_MIN
            a = _aligned_head(out, lo, hi) if nt else lo
            if a > lo:  # the head before the first 32-byte aligned element
                v = np.int64(np.int32(p))
                p, mx = scan_range8(x, lo, a, out, p, exclusive, False)
                if check and (v if v >= 0 else -v) + (a - lo) * mx > I32_MAX:
                    sus = True
            for b0 in range(a, hi, BLOCK):
                b1 = min(b0 + BLOCK, hi)
                v = np.int64(np.int32(p))
                if nt:
                    p, mx = scan_range8(x, b0, b1, out, p, exclusive, True)
                else:
                    p, mx = scan_range8(x, b0, b1, out, p, exclusive, False)
                if check and (v if v >= 0 else -v) + (b1 - b0) * mx > I32_MAX:
                    sus = True
            if nt:
                sfence()
            suspect[c] = sus
    return scan_int32


# chunks on threads, and the serial twin for one chunk (its first call compiles no parfor)
scan_int32 = variant(_make_scan_int32, True, name="scan_int32")
scan_int32_serial = variant(_make_scan_int32, False, name="scan_int32_serial")


# ----------------------------------------------------------------------------- segmented scan

def _segscan_codegen(context, builder, sig, args, nt=False):
    x_t, f_t, out_t = sig.args[0], sig.args[1], sig.args[4]
    x = context.make_array(x_t)(context, builder, args[0]).data
    f = context.make_array(f_t)(context, builder, args[1]).data
    out = context.make_array(out_t)(context, builder, args[4]).data
    lo, hi, p0, b0, excl = args[2], args[3], args[5], args[6], args[7]
    xt = context.get_value_type(x_t.dtype)
    G = 2 * _W
    fvt = ir.VectorType(_I8, G)
    iota1 = ir.Constant(_V, list(range(1, _W + 1)))
    minus1 = ir.Constant(_V, [-1] * _W)
    zero = ir.Constant(_V, None)
    c_p = cgutils.alloca_once(builder, _V)  # P carried, all lanes
    builder.store(_splat(builder, builder.trunc(p0, _I32), _V), c_p)
    b_p = cgutils.alloca_once(builder, _V)  # the prefix before the open segment's start, all lanes
    builder.store(_splat(builder, builder.trunc(b0, _I32), _V), b_p)
    o_p = cgutils.alloca_once(builder, fvt)  # OR of the flag bytes (a byte > 1 is an invalid flag)
    builder.store(ir.Constant(fvt, None), o_p)
    mx_p = cgutils.alloca_once(builder, _V)
    builder.store(ir.Constant(_V, None), mx_p)

    def step(i, lanes_mask):
        fv = load_lanes(builder, f, i, _I8, G, lanes_mask)
        builder.store(builder.or_(builder.load(o_p), fv), o_p)
        m, mbits = _flag_mask(builder, fv)
        c = builder.load(c_p)
        parts = []
        for j in range(2):
            ij = builder.add(i, _I64(_W * j))
            mj = _sub_mask(builder, lanes_mask, j, G)
            xv = load_lanes(builder, x, ij, xt, _W, mj, _I32)
            _absmax(builder, xv, mx_p)
            S = scan8(builder, xv)
            P = builder.add(S, c)
            E = builder.sub(P, xv)
            c = builder.add(c, _bcast_last(builder, S))
            parts.append((ij, mj, E, builder.select(excl, E, P)))
        builder.store(c, c_p)
        none = builder.icmp_unsigned("==", mbits, ir.IntType(G)(0))
        with builder.if_else(none, likely=True) as (no_start, some):
            with no_start:
                b = builder.load(b_p)
                for ij, mj, _E, R in parts:
                    _store(builder, out, ij, builder.sub(R, b), mj, nt)
            with some:
                b = builder.load(b_p)
                for j, (ij, mj, E, R) in enumerate(parts):
                    # 1 + the latest start lane at or before each lane (0: none yet): a max-scan
                    # whose identity 0 lets the in-lane steps be byte shifts
                    fh = builder.zext(builder.shuffle_vector(fv, fv, ir.Constant(
                        _MV, list(range(_W * j, _W * j + _W)))), _V)
                    idx = builder.select(builder.icmp_unsigned("!=", fh, zero), iota1, zero)
                    idx = _scan_steps(builder, idx, zero,
                                      lambda a, t: _call(builder, "llvm.smax.v8i32", _V, [a, t]))
                    at = _call(builder, "llvm.x86.avx2.permd", _V, [E, builder.add(idx, minus1)])
                    has = builder.icmp_unsigned("!=", idx, zero)
                    _store(builder, out, ij, builder.sub(R, builder.select(has, at, b)), mj, nt)
                    b = _bcast_last(builder, builder.select(has, at, b))
                builder.store(b, b_p)

    strided_loop(builder, lo, hi, G, step, "sscan8")
    p = builder.sext(builder.extract_element(builder.load(c_p), _I32(0)), _I64)
    b = builder.sext(builder.extract_element(builder.load(b_p), _I32(0)), _I64)
    o = builder.zext(_call(builder, f"llvm.vector.reduce.or.v{G}i8", _I8, [builder.load(o_p)]), _I64)
    return context.make_tuple(builder, sig.return_type, [p, b, o, _reduce_umax(builder, mx_p)])


@intrinsic
def segscan_range(typingctx, x, f, lo, hi, out, p, b, exclusive, nt):
    """``_avx512.segscan_range``'s contract (P - b, or P - x - b, int32 words that
    wrap; returns (P, b, OR of the flag bytes, max |x|)), eight lanes per vector.
    ``nt`` (a literal bool): streaming stores, for &out[lo] 32-byte aligned."""
    if not (_narrow(x) and isinstance(f, types.Array) and f.layout == "C" and f.dtype.bitwidth == 8
            and _i32_out(out) and isinstance(nt, types.BooleanLiteral)):
        return None
    use_nt = nt.literal_value
    sig = types.UniTuple(types.int64, 4)(x, f, types.int64, types.int64, out, types.int64, types.int64,
                                         types.boolean, nt)
    return sig, lambda c, bld, sg, args: _segscan_codegen(c, bld, sg, args, use_nt)


def _make_segscan_int32(parallel):
    @njit(cache=True, parallel=parallel)
    def segscan_int32(x, f, out, starts, exclusive, check, suspect, tails, has_flag, bad):
        """``_avx512.segscan_int32``'s contract with ``segscan_range`` per block."""
        parallel  # noqa: B018 (a closure cell: one cache entry per variant)
        for c in prange(starts.size - 1):
            lo, hi = starts[c], starts[c + 1]
            p = np.int64(0)
            b = np.int64(0)
            o = np.int64(0)
            sus = False
            nt = out.size >= NT_MIN
            a = _aligned_head(out, lo, hi) if nt else lo
            if a > lo:  # the head before the first 32-byte aligned element
                p, b, o, mx = segscan_range(x, f, lo, a, out, p, b, exclusive, False)
                sus = check and (a - lo) * mx > I32_MAX
            for b0 in range(a, hi, BLOCK):
                b1 = min(b0 + BLOCK, hi)
                v = np.int64(np.int32(p - b))  # the open segment so far (exact while screened)
                if nt:
                    p, b, ob, mx = segscan_range(x, f, b0, b1, out, p, b, exclusive, True)
                else:
                    p, b, ob, mx = segscan_range(x, f, b0, b1, out, p, b, exclusive, False)
                if check and (v if v >= 0 else -v) + (b1 - b0) * mx > I32_MAX:
                    sus = True
                o |= ob
            if nt:
                sfence()
            tails[c] = np.int64(np.int32(p - b))
            has_flag[c] = o != 0
            suspect[c] = sus
            bad[c] = o
    return segscan_int32


# chunks on threads, and the serial twin for one chunk (its first call compiles no parfor)
segscan_int32 = variant(_make_segscan_int32, True, name="segscan_int32")
segscan_int32_serial = variant(_make_segscan_int32, False, name="segscan_int32_serial")


# ----------------------------------------------------------------------------- segment sums

def _lpack_table(module):
    """[256 x i64]: for an 8-bit mask, the indices of its set bits in order, one byte
    each (the unused bytes 0): the vpermd indices that left-pack those lanes."""
    name = "mmvref_avx2_lpack"
    g = module.globals.get(name)
    if g is not None:
        return g
    vals = []
    for m in range(256):
        idx = [j for j in range(8) if m >> j & 1]
        vals.append(sum(v << (8 * k) for k, v in enumerate(idx)))
    at = ir.ArrayType(_I64, 256)
    g = ir.GlobalVariable(module, at, name=name)
    g.initializer = ir.Constant(at, vals)
    g.global_constant = True
    g.linkage = "internal"
    g.align = 64
    return g


def _segsum_codegen(context, builder, sig, args):
    x_t, f_t, out_t = sig.args[0], sig.args[1], sig.args[4]
    x = context.make_array(x_t)(context, builder, args[0]).data
    f = context.make_array(f_t)(context, builder, args[1]).data
    out = context.make_array(out_t)(context, builder, args[4]).data
    lo, hi, k0, p0, sparse, kend = args[2], args[3], args[5], args[6], args[7], args[8]
    xt = context.get_value_type(x_t.dtype)
    fvt = ir.VectorType(_I8, _W)
    iota = ir.Constant(_V, list(range(_W)))
    zero = ir.Constant(_V, None)
    table = _lpack_table(builder.module)

    k_p = cgutils.alloca_once(builder, _I64)
    builder.store(k0, k_p)
    c_p = cgutils.alloca_once(builder, _V)  # the running prefix P before the next vector, all lanes
    builder.store(_splat(builder, builder.trunc(p0, _I32), _V), c_p)
    a_p = cgutils.alloca_once(builder, _V)  # lane sums not yet added to c_p (flag-free groups)
    builder.store(zero, a_p)
    mx_p = cgutils.alloca_once(builder, _V)
    builder.store(zero, mx_p)
    o16t, o64t = ir.VectorType(_I8, 2 * _W), ir.VectorType(_I8, 8 * _W)
    o16_p = cgutils.alloca_once(builder, o16t)  # OR of the flag bytes (a byte > 1 is an invalid flag)
    builder.store(ir.Constant(o16t, None), o16_p)
    o64_p = cgutils.alloca_once(builder, o64t)
    builder.store(ir.Constant(o64t, None), o64_p)

    def step(i, lanes_mask):
        """Eight elements: scan, pack the prefixes before the starts."""
        xv = load_lanes(builder, x, i, xt, _W, lanes_mask, _I32)
        fv = load_lanes(builder, f, i, _I8, _W, lanes_mask)
        _absmax(builder, xv, mx_p)
        _, mbits = _flag_mask(builder, fv)
        S = scan8(builder, xv)
        c = builder.load(c_p)
        E = builder.sub(builder.add(S, c), xv)
        mi = builder.zext(mbits, _I64)
        word = builder.load(builder.gep(table, [_I64(0), mi], inbounds=True), align=8)
        idx = builder.zext(builder.bitcast(word, fvt), _V)
        packed = _call(builder, "llvm.x86.avx2.permd", _V, [E, idx])
        cnt = builder.zext(_call(builder, "llvm.ctpop.i8", _I8, [mbits]), _I64)
        k = builder.load(k_p)
        dst = builder.bitcast(builder.gep(out, [builder.add(k, _I64(1))], inbounds=True), _OPAQUE)
        room = builder.icmp_signed("<=", builder.add(k, _I64(1 + _W)), kend)
        with builder.if_else(room, likely=True) as (whole, masked):
            with whole:
                builder.store(packed, builder.bitcast(dst, _V.as_pointer()), align=4)
            with masked:
                keep = builder.icmp_signed("<", iota, _splat(builder, builder.trunc(cnt, _I32), _V))
                _call(builder, "llvm.masked.store.v8i32.p0", ir.VoidType(), [packed, dst, _I32(4), keep])
        builder.store(builder.add(k, cnt), k_p)
        builder.store(builder.add(c, _bcast_last(builder, S)), c_p)

    def step16(i, lanes_mask):
        """``step`` for sixteen elements: one flag compare and one room check for both
        vectors (measured 8-10% faster than two ``step``s at 10% flag density)."""
        fv = load_lanes(builder, f, i, _I8, 2 * _W, lanes_mask)
        builder.store(builder.or_(builder.load(o16_p), fv), o16_p)
        _, mb = _flag_mask(builder, fv)
        c = builder.load(c_p)
        packs, cnts = [], []
        for j in range(2):
            mj = _sub_mask(builder, lanes_mask, j, 2 * _W)
            xv = load_lanes(builder, x, builder.add(i, _I64(_W * j)), xt, _W, mj, _I32)
            _absmax(builder, xv, mx_p)
            S = scan8(builder, xv)
            E = builder.sub(builder.add(S, c), xv)
            c = builder.add(c, _bcast_last(builder, S))
            mbits = builder.trunc(builder.lshr(mb, ir.IntType(16)(8 * j)), _I8)
            word = builder.load(builder.gep(table, [_I64(0), builder.zext(mbits, _I64)], inbounds=True), align=8)
            packs.append(_call(builder, "llvm.x86.avx2.permd", _V, [E, builder.zext(builder.bitcast(word, fvt), _V)]))
            cnts.append(builder.zext(_call(builder, "llvm.ctpop.i8", _I8, [mbits]), _I64))
        builder.store(c, c_p)
        k = builder.load(k_p)
        k1 = builder.add(k, cnts[0])
        room = builder.icmp_signed("<=", builder.add(k, _I64(1 + 2 * _W)), kend)
        with builder.if_else(room, likely=True) as (whole, masked):
            with whole:
                for kk, pk in ((k, packs[0]), (k1, packs[1])):
                    dst = builder.gep(out, [builder.add(kk, _I64(1))], inbounds=True)
                    builder.store(pk, builder.bitcast(dst, _V.as_pointer()), align=4)
            with masked:
                for kk, pk, cn in ((k, packs[0], cnts[0]), (k1, packs[1], cnts[1])):
                    dst = builder.bitcast(builder.gep(out, [builder.add(kk, _I64(1))], inbounds=True), _OPAQUE)
                    keep = builder.icmp_signed("<", iota, _splat(builder, builder.trunc(cn, _I32), _V))
                    _call(builder, "llvm.masked.store.v8i32.p0", ir.VoidType(), [pk, dst, _I32(4), keep])
        builder.store(builder.add(k1, cnts[1]), k_p)

    GN = 8  # vectors per flag group
    G = GN * _W

    def group(i, lanes_mask):
        fv = load_lanes(builder, f, i, _I8, G, lanes_mask)
        builder.store(builder.or_(builder.load(o64_p), fv), o64_p)
        _, m = _flag_mask(builder, fv)
        with builder.if_else(builder.icmp_unsigned("==", m, _I64(0)), likely=True) as (none, some):
            with none:
                acc = builder.load(a_p)
                for j in range(GN):
                    xv = load_lanes(builder, x, builder.add(i, _I64(_W * j)), xt, _W,
                                    _sub_mask(builder, lanes_mask, j, G), _I32)
                    _absmax(builder, xv, mx_p)
                    acc = builder.add(acc, xv)
                builder.store(acc, a_p)
            with some:
                # a group with a start (half of them at 1% density): the vectors without one
                # are only added up too; a branch per vector, predictable at low density
                for j in range(GN):
                    ij = builder.add(i, _I64(_W * j))
                    mj = _sub_mask(builder, lanes_mask, j, G)
                    mv = builder.lshr(m, _I64(_W * j))
                    if j < GN - 1:
                        mv = builder.and_(mv, _I64(0xFF))
                    with builder.if_else(builder.icmp_unsigned("==", mv, _I64(0)), likely=True) as (no, yes):
                        with no:
                            xv = load_lanes(builder, x, ij, xt, _W, mj, _I32)
                            _absmax(builder, xv, mx_p)
                            builder.store(builder.add(builder.load(a_p), xv), a_p)
                        with yes:
                            tot = _call(builder, "llvm.vector.reduce.add.v8i32", _I32, [builder.load(a_p)])
                            builder.store(builder.add(builder.load(c_p), _splat(builder, tot, _V)), c_p)
                            builder.store(zero, a_p)
                            step(ij, mj)

    with builder.if_else(sparse) as (branchy, branchless):
        with branchy:
            strided_loop(builder, lo, hi, G, group, "grp8")
        with branchless:
            strided_loop(builder, lo, hi, 2 * _W, step16, "ssum16")
    tot = _call(builder, "llvm.vector.reduce.add.v8i32", _I32, [builder.load(a_p)])
    p = builder.sext(builder.add(builder.extract_element(builder.load(c_p), _I32(0)), tot), _I64)
    o = builder.or_(_call(builder, "llvm.vector.reduce.or.v16i8", _I8, [builder.load(o16_p)]),
                    _call(builder, "llvm.vector.reduce.or.v64i8", _I8, [builder.load(o64_p)]))
    vals = [builder.load(k_p), p, _reduce_umax(builder, mx_p)]
    if len(sig.return_type) == 4:
        vals.append(builder.zext(o, _I64))
    return context.make_tuple(builder, sig.return_type, vals)


@intrinsic
def starts_prefix(typingctx, x, f, lo, hi, out, k, p, sparse, kend):
    """``_avx512.starts_prefix``'s contract (at every set flag f[i], P - x[i] stored
    at out[k + 1], out[k + 2], ...; returns (the last slot written, P, max |x|);
    slots past the last start, below kend, may be overwritten), packing by a
    table of lane indices and vpermd; ``sparse``: flags tested 64 at a time."""
    if not (_narrow(x) and isinstance(f, types.Array) and f.layout == "C" and f.dtype.bitwidth == 8
            and _i32_out(out)):
        return None
    sig = types.UniTuple(types.int64, 3)(x, f, types.int64, types.int64, out, types.int64, types.int64,
                                         types.boolean, types.int64)
    return sig, _segsum_codegen


@intrinsic
def starts_prefix_or(typingctx, x, f, lo, hi, out, k, p, sparse, kend):
    """``starts_prefix`` that also returns the OR of the flag bytes it read (4th)."""
    if not (_narrow(x) and isinstance(f, types.Array) and f.layout == "C" and f.dtype.bitwidth == 8
            and _i32_out(out)):
        return None
    sig = types.UniTuple(types.int64, 4)(x, f, types.int64, types.int64, out, types.int64, types.int64,
                                         types.boolean, types.int64)
    return sig, _segsum_codegen


def _make_segsum_int32(parallel):
    @njit(cache=True, parallel=parallel)
    def segsum_int32(x, f, starts, bases, out, heads, tails, check, suspect, sparse):
        """``_avx512.segsum_int32``'s contract with this module's ``starts_prefix``."""
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
                    adjacent_diff(out, max(k, first), k1)
                    k = k1
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


def _make_segsum_int32_nocount(parallel):
    @njit(cache=True, parallel=parallel)
    def segsum_int32_nocount(x, f, starts, out, heads, tails, counts, bad, check, suspect, sparse_starts):
        """``segsum_int32`` without the flag-counting pass before it: chunk c writes its
        slots at the provisional base starts[c] (it has at most starts[c + 1] - starts[c]
        starts), so ``out`` has len(x) + 1 slots; the caller moves each chunk's
        counts[c] slots out[starts[c] + 1 ...] down to the true base (``compact_slots``).
        bad[c] = OR of the chunk's flag bytes (> 1: an invalid flag; for chunk 0 with f[0]);
        counts[c] = set flags in the chunk, position 0 excluded. The flags are tested 64 at a
        time in a block when the block before it had under one start per ``sparse_starts``
        elements (the first block of a chunk: tested that way)."""
        parallel  # noqa: B018 (a closure cell: one cache entry per variant)
        for c in prange(starts.size - 1):
            lo, hi = starts[c], starts[c + 1]
            fs = f[lo:hi]
            m = 0 if lo == 0 else _first_flag(fs)
            o = np.int64(0)
            if lo == 0 and fs.size > 0:
                m = _first_flag(fs[1:]) + 1
                o = np.int64(fs[0])
            heads[c] = sum_i64(x, lo, lo + m)
            base = lo
            k = np.int64(base)
            p = np.int64(0)
            b = np.int64(0)  # the prefix before the open segment's start
            sus = False
            first = base + 1
            kend = hi + 1  # this chunk's provisional slots end
            sp = True
            for b0 in range(lo + m, hi, BLOCK):
                b1 = min(b0 + BLOCK, hi)
                v = np.int64(np.int32(p - b))  # the open segment so far (exact while screened)
                k1, p, mx, ob = starts_prefix_or(x, f, b0, b1, out, k, p, sp, kend)
                o |= ob
                sp = (k1 - k) * sparse_starts < b1 - b0
                if check and (v if v >= 0 else -v) + (b1 - b0) * mx > I32_MAX:
                    sus = True
                if k1 != k:
                    b = np.int64(out[k1])
                    adjacent_diff(out, max(k, first), k1)
                    k = k1
            if k >= first:
                tail = np.int32(np.int32(p) - out[k])
                out[k] = tail
                tails[c] = np.int64(tail)
            else:
                tails[c] = 0
            counts[c] = k - base
            bad[c] = o
            suspect[c] = sus
    return segsum_int32_nocount


# chunks on threads, and the serial twin for one chunk (its first call compiles no parfor)
segsum_int32_nocount = variant(_make_segsum_int32_nocount, True, name="segsum_int32_nocount")
segsum_int32_nocount_serial = variant(_make_segsum_int32_nocount, False, name="segsum_int32_nocount_serial")


@njit(cache=True, parallel=True)
def gather_slots(src, starts, counts, bases, out):
    """out[bases[c] + 1 + j] = src[starts[c] + 1 + j] for j < counts[c], the chunks in parallel
    (``segsum_int32_nocount``'s provisional slots, moved to their true places)."""
    for c in prange(starts.size - 1):
        s = starts[c] + 1
        d = bases[c] + 1
        for j in range(counts[c]):
            out[d + j] = src[s + j]
