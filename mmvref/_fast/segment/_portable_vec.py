"""Portable LLVM vector building blocks for the Numba kernels (``numba.extending.intrinsic``):
generic vector IR only (shuffles, adds, masked loads and stores), which LLVM
lowers for whatever CPU it compiles for (AVX-512, AVX2 or SSE). The x86-only
kernels live in ``_avx512``."""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["adjacent_diff", "block_prefix", "count_nonzero_or", "counted_loop", "freeze", "load_lanes", "rows_from_prefix", "same_width", "scan_range", "strided_loop", "sum_i64"]

_I1, _I32, _I64 = ir.IntType(1), ir.IntType(32), ir.IntType(64)
_OPAQUE = ir.PointerType()


def _call(builder, name, ret, args):
    """Call an LLVM intrinsic (declared on first use)."""
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ret, [a.type for a in args]), name=name)
    return builder.call(fn, args)


class _Freeze(ir.instructions.Instruction):
    """LLVM's ``freeze`` (llvmlite's builder has none)."""

    def __init__(self, parent, value):
        super().__init__(parent, value.type, "freeze", [value])

    def descr(self, buf):
        [v] = self.operands
        buf.append(f"freeze {v.type} {v.get_reference()}\n")


def freeze(builder, value):
    """``value`` unchanged, behind LLVM's ``freeze``. Storing it where a select chose between it and
    what was loaded from the same place keeps the store whole: without the freeze, LLVM's DAG
    combiner turns store(select(m, v, load p), p) into a masked store, which on AVX2 is
    vmaskmovps/pd, slow on AMD Zen (scatter max, F = 16, 1e7 random positions, Zen 3: 831 ms
    masked, 281 ms frozen; the sum's plain stores: 351 ms)."""
    instr = _Freeze(builder.block, value)
    builder._insert(instr)
    return instr


def _splat(builder, val, vt):
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), val, _I32(0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(_I32, vt.count),
                                                                                [0] * vt.count))


def load_lanes(builder, base, i, elem_t, width, lanes_mask, widen_to=None):
    """``width`` integers base[i], base[i + 1], ... (a masked load with zeros in the
    other lanes when ``lanes_mask`` is given: a tail), sign-extended to ``widen_to``
    when that integer type is wider."""
    p = builder.bitcast(builder.gep(base, [i], inbounds=True), _OPAQUE)
    vt = ir.VectorType(elem_t, width)
    align = elem_t.width // 8
    if lanes_mask is None:
        v = builder.load(builder.bitcast(p, vt.as_pointer()), align=align)
    else:
        v = _call(builder, f"llvm.masked.load.v{width}i{elem_t.width}.p0", vt,
                  [p, _I32(align), lanes_mask, ir.Constant(vt, None)])
    if widen_to is not None and elem_t.width < widen_to.width:
        v = builder.sext(v, ir.VectorType(widen_to, width))
    return v


def counted_loop(builder, name, first, more, step, body):
    """Emit ``for (i = first; more(i); i += step) body(i)``, i an i64, in the blocks ``name.cond``,
    ``name.body``, ``name.end``; returns the builder at the end block and the final i."""
    i_p = cgutils.alloca_once(builder, _I64)
    builder.store(first, i_p)
    fn = builder.function
    bcond, bbody, bend = (fn.append_basic_block(f"{name}.{n}") for n in ("cond", "body", "end"))
    builder.branch(bcond)
    builder.position_at_end(bcond)
    i = builder.load(i_p)
    builder.cbranch(more(i), bbody, bend)
    builder.position_at_end(bbody)
    body(i)
    builder.store(builder.add(i, _I64(step)), i_p)
    builder.branch(bcond)
    builder.position_at_end(bend)
    return builder.load(i_p)


def strided_loop(builder, lo, hi, width, step, name):
    """Emit ``for i in range(lo, hi, width)``: step(i, None) for every whole
    vector, then step(i, lanes) once for a partial tail (lanes: the first
    hi - i of ``width``). lo, hi: i64 values."""
    i = counted_loop(builder, name, lo, lambda i: builder.icmp_signed("<=", builder.add(i, _I64(width)), hi),
                     width, lambda i: step(i, None))
    rem = builder.sub(hi, i)
    vt = ir.VectorType(_I32, width)
    with builder.if_then(builder.icmp_signed(">", rem, _I64(0))):
        step(i, builder.icmp_signed("<", ir.Constant(vt, list(range(width))),
                                    _splat(builder, builder.trunc(rem, _I32), vt)))


_V8 = ir.VectorType(_I64, 8)


_W = 16
_V16 = ir.VectorType(_I32, _W)


def scan16(builder, v):
    """Inclusive prefix sums of 16 int32 lanes: lane j += lane j - s for s = 1, 2, 4, 8."""
    zero = ir.Constant(_V16, None)
    for s in (1, 2, 4, 8):
        idx = [(j - s) if j >= s else _W for j in range(_W)]  # lane 16 = the first lane of ``zero``
        v = builder.add(v, builder.shuffle_vector(v, zero, ir.Constant(_V16, idx)))
    return v


def carry16(builder, c, S):
    """The carry into the next vector, c + (last lane of S) in every lane. Adding the
    broadcast sum to the old carry, rather than broadcasting the last lane of P = S + c,
    leaves a single vector add on the chain from one vector to the next (the broadcast's
    latency then overlaps across iterations)."""
    return builder.add(c, builder.shuffle_vector(S, ir.Constant(_V16, ir.Undefined),
                                                 ir.Constant(_V16, [_W - 1] * _W)))


def absmax16(builder, xv, mx_p):
    """*mx_p = max(*mx_p, |xv|) lane-wise, unsigned (|INT32_MIN| = 2**31): an overflow
    screen's max |x|, gathered while the values are in registers."""
    a = _call(builder, "llvm.abs.v16i32", _V16, [xv, ir.Constant(_I1, 0)])
    builder.store(_call(builder, "llvm.umax.v16i32", _V16, [builder.load(mx_p), a]), mx_p)


def reduce_umax16(builder, mx_p):
    return builder.zext(_call(builder, "llvm.vector.reduce.umax.v16i32", _I32, [builder.load(mx_p)]), _I64)


def _scan32(builder, x, xt, out, lo, hi, p0, excl, off):
    """out[i - off] = (inclusive or, when excl, exclusive) int32 prefix from p0 for
    lo <= i < hi, 16 lanes at a time; returns (the last P as i64, max |x| as i64)."""
    c_p = cgutils.alloca_once(builder, _V16)
    builder.store(_splat(builder, builder.trunc(p0, _I32), _V16), c_p)
    mx_p = cgutils.alloca_once(builder, _V16)
    builder.store(ir.Constant(_V16, None), mx_p)

    def step(i, lanes_mask):
        op = builder.bitcast(builder.gep(out, [builder.sub(i, off)], inbounds=True), _OPAQUE)
        xv = load_lanes(builder, x, i, xt, _W, lanes_mask, _I32)
        absmax16(builder, xv, mx_p)
        S = scan16(builder, xv)
        c = builder.load(c_p)
        P = builder.add(S, c)
        res = builder.select(excl, builder.sub(P, xv), P)
        if lanes_mask is None:
            builder.store(res, builder.bitcast(op, _V16.as_pointer()), align=4)
        else:
            _call(builder, "llvm.masked.store.v16i32.p0", ir.VoidType(), [res, op, _I32(4), lanes_mask])
        builder.store(carry16(builder, c, S), c_p)

    strided_loop(builder, lo, hi, _W, step, "scan")
    p = builder.sext(builder.extract_element(builder.load(c_p), _I32(0)), _I64)
    return p, reduce_umax16(builder, mx_p)


def _int32_array(a):
    return isinstance(a, types.Array) and a.layout == "C" and a.dtype == types.int32


def _narrow_values(x):
    return (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.dtype.bitwidth <= 32
            and x.layout == "C")


def _scan_range_codegen(context, builder, sig, args):
    x = context.make_array(sig.args[0])(context, builder, args[0]).data
    out = context.make_array(sig.args[3])(context, builder, args[3]).data
    p, mx = _scan32(builder, x, context.get_value_type(sig.args[0].dtype), out, args[1], args[2], args[4],
                    args[5], _I64(0))
    return context.make_tuple(builder, sig.return_type, [p, mx])


@intrinsic
def scan_range(typingctx, x, lo, hi, out, p, exclusive):
    """out[i] = p + x[lo] + ... + x[i] (inclusive) or that less x[i] (exclusive)
    for lo <= i < hi, int32 words that wrap; returns (p + sum(x[lo:hi]), max |x[i]|).
    Sixteen lanes at a time, an in-register scan. x (int8/16/32) and out (int32)
    contiguous, 0 <= lo <= hi <= len."""
    if not (_narrow_values(x) and _int32_array(out)):
        return None
    return types.UniTuple(types.int64, 2)(x, types.int64, types.int64, out, types.int64, types.boolean), \
        _scan_range_codegen


def _block_prefix_codegen(context, builder, sig, args):
    x_t, buf_t = sig.args[0], sig.args[3]
    x = context.make_array(x_t)(context, builder, args[0]).data
    buf = context.make_array(buf_t)(context, builder, args[3]).data
    lo, hi, p0 = args[1], args[2], args[4]
    xt = context.get_value_type(x_t.dtype)
    if buf_t.dtype == types.int32:
        p, mx = _scan32(builder, x, xt, buf, lo, hi, p0, ir.Constant(_I1, 0), lo)
        return context.make_tuple(builder, sig.return_type, [p, mx])
    zero = ir.Constant(_V8, None)
    c_p = cgutils.alloca_once(builder, _V8)
    builder.store(_splat(builder, p0, _V8), c_p)

    def step(i, lanes_mask):
        bp = builder.bitcast(builder.gep(buf, [builder.sub(i, lo)], inbounds=True), _OPAQUE)
        xv = load_lanes(builder, x, i, xt, 8, lanes_mask, _I64)
        for sh in (1, 2, 4):
            idx = [(j - sh) if j >= sh else 8 for j in range(8)]
            xv = builder.add(xv, builder.shuffle_vector(xv, zero, ir.Constant(ir.VectorType(_I32, 8), idx)))
        c = builder.load(c_p)
        P = builder.add(xv, c)
        if lanes_mask is None:
            builder.store(P, builder.bitcast(bp, _V8.as_pointer()), align=8)
        else:
            _call(builder, "llvm.masked.store.v8i64.p0", ir.VoidType(), [P, bp, _I32(8), lanes_mask])
        # c + (the vector's sum in every lane): one add on the chain between vectors, the
        # broadcast off it (broadcasting P's last lane put the shuffle's latency on the chain)
        builder.store(builder.add(c, builder.shuffle_vector(xv, ir.Constant(_V8, ir.Undefined),
                                                            ir.Constant(ir.VectorType(_I32, 8), [7] * 8))), c_p)

    strided_loop(builder, lo, hi, 8, step, "pre")
    p = builder.extract_element(builder.load(c_p), _I32(0))
    return context.make_tuple(builder, sig.return_type, [p, _I64(0)])


@intrinsic
def block_prefix(typingctx, x, lo, hi, buf, p):
    """buf[i - lo] = p + x[lo] + ... + x[i] for lo <= i < hi; returns (the last,
    max |x[i]|). An int64 ``buf``: exact for int8/16/32 values (int64 wraps),
    eight lanes at a time, and max |x| is not gathered (0). An int32 ``buf``
    (int8/16/32 values): words that wrap, sixteen lanes at a time (twice the
    elements per instruction), max |x| for the caller's overflow screen.
    x and buf contiguous, len(buf) >= hi - lo."""
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.layout == "C"
            and isinstance(buf, types.Array) and buf.layout == "C"
            and (buf.dtype == types.int64 or (buf.dtype == types.int32 and _narrow_values(x)))):
        return None
    return types.UniTuple(types.int64, 2)(x, types.int64, types.int64, buf, types.int64), _block_prefix_codegen


def _rows_codegen(context, builder, sig, args):
    ip_t, buf_t, os_t = sig.args[0], sig.args[5], sig.args[7]
    ip = context.make_array(ip_t)(context, builder, args[0]).data
    buf = context.make_array(buf_t)(context, builder, args[5]).data
    os = context.make_array(os_t)(context, builder, args[7]).data
    r0, nr, b0, b1, prev0, last0, mn0, mx0 = args[1], args[2], args[3], args[4], args[6], args[8], args[9], args[10]
    ot = context.get_value_type(os_t.dtype)
    bt = context.get_value_type(buf_t.dtype)  # i64, or i32 words that wrap
    BV = ir.VectorType(bt, 8)
    V8 = _V8
    i8, i1 = ir.IntType(8), ir.IntType(1)
    iota = ir.Constant(V8, list(range(8)))
    shift_in = ir.Constant(ir.VectorType(_I32, 8), [8] + list(range(7)))
    r_p, prev_p, last_p = (cgutils.alloca_once(builder, _I64) for _ in range(3))
    uns_p, mn_p, mx_p, len_p = (cgutils.alloca_once(builder, V8) for _ in range(4))
    for ptr, val in ((r_p, r0), (prev_p, prev0), (last_p, last0)):
        builder.store(val, ptr)
    builder.store(ir.Constant(V8, None), uns_p)
    builder.store(ir.Constant(V8, None), len_p)
    builder.store(_splat(builder, mn0, V8), mn_p)
    builder.store(_splat(builder, mx0, V8), mx_p)
    bmax = _splat(builder, builder.sub(b1, _I64(1)), V8)
    fn = builder.function
    bcond, bbody, bend = (fn.append_basic_block(n) for n in ("rows.cond", "rows.body", "rows.end"))
    builder.branch(bcond)
    builder.position_at_end(bcond)
    r = builder.load(r_p)
    builder.cbranch(builder.icmp_signed("<=", builder.add(r, _I64(8)), nr), bbody, bend)
    builder.position_at_end(bbody)
    e = builder.load(builder.bitcast(builder.gep(ip, [builder.add(r, _I64(1))], inbounds=True), V8.as_pointer()),
                     align=8)
    inb = builder.icmp_signed("<=", e, _splat(builder, b1, V8))
    bits = builder.zext(builder.bitcast(inb, i8), _I32)
    k = _call(builder, "llvm.cttz.i32", _I32,  # the leading lanes that end in the block (8 when all do)
              [builder.or_(builder.xor(bits, _I32(0xFF)), _I32(0x100)), ir.Constant(i1, 0)])
    k64 = builder.zext(k, _I64)
    lanes = builder.icmp_signed("<", iota, _splat(builder, k64, V8))
    # row end e: the prefix at e - 1, an index into the block's buffer (clamped: unsorted offsets read garbage)
    j = _call(builder, "llvm.umin.v8i64", V8, [builder.sub(e, _splat(builder, builder.add(b0, _I64(1)), V8)),
                                              builder.sub(bmax, _splat(builder, b0, V8))])
    g = builder.gep(buf, [j], inbounds=True, source_etype=bt)
    g.type = ir.VectorType(buf.type, 8)
    vals = _call(builder, f"llvm.masked.gather.v8i{bt.width}.v8p0", BV,
                 [builder.bitcast(g, ir.VectorType(_OPAQUE, 8)), _I32(bt.width // 8), lanes, ir.Constant(BV, None)])
    prv = builder.shuffle_vector(vals, _splat(builder, builder.trunc(builder.load(prev_p), bt)
                                              if bt.width < 64 else builder.load(prev_p), BV), shift_in)
    v = builder.sub(vals, prv)  # int32 words: the row sum modulo 2**32
    if bt.width < 64:
        v = builder.sext(v, V8)
    dst = builder.bitcast(builder.gep(os, [r], inbounds=True), _OPAQUE)
    vo = builder.trunc(v, ir.VectorType(ot, 8)) if ot.width < 64 else v
    _call(builder, f"llvm.masked.store.v8i{ot.width}.p0", ir.VoidType(), [vo, dst, _I32(ot.width // 8), lanes])
    vz = builder.select(lanes, v, ir.Constant(V8, None))
    builder.store(_call(builder, "llvm.smin.v8i64", V8, [builder.load(mn_p), vz]), mn_p)
    builder.store(_call(builder, "llvm.smax.v8i64", V8, [builder.load(mx_p), vz]), mx_p)
    pe = builder.shuffle_vector(e, _splat(builder, builder.load(last_p), V8), shift_in)
    dec = builder.and_(lanes, builder.icmp_signed("<", e, pe))
    ln = builder.select(lanes, builder.sub(e, pe), ir.Constant(V8, None))
    builder.store(_call(builder, "llvm.smax.v8i64", V8, [builder.load(len_p), ln]), len_p)
    builder.store(builder.or_(builder.load(uns_p), builder.zext(dec, V8)), uns_p)
    with builder.if_then(builder.icmp_unsigned(">", k, _I32(0))):
        pv = builder.extract_element(vals, builder.sub(k, _I32(1)))
        builder.store(builder.sext(pv, _I64) if bt.width < 64 else pv, prev_p)
        builder.store(builder.extract_element(e, builder.sub(k, _I32(1))), last_p)
    builder.store(builder.add(r, k64), r_p)
    builder.cbranch(builder.icmp_unsigned("==", k, _I32(8)), bcond, bend)
    builder.position_at_end(bend)
    uns = _call(builder, "llvm.vector.reduce.or.v8i64", _I64, [builder.load(uns_p)])
    mn = _call(builder, "llvm.vector.reduce.smin.v8i64", _I64, [builder.load(mn_p)])
    mx = _call(builder, "llvm.vector.reduce.smax.v8i64", _I64, [builder.load(mx_p)])
    ln = _call(builder, "llvm.vector.reduce.smax.v8i64", _I64, [builder.load(len_p)])
    return context.make_tuple(builder, sig.return_type,
                              [builder.load(r_p), builder.load(prev_p), builder.load(last_p), uns, mn, mx, ln])


@intrinsic
def rows_from_prefix(typingctx, ip, r, nr, b0, b1, buf, prev, os, last, mn, mx):
    """Rows r, r+1, ... ending in the block [b0, b1), eight at a time, while
    r + 8 <= nr: os[q] = P(ip[q + 1]) - P(row start), P read from buf (the
    block's running prefix, buf[i - b0] = P(i + 1)) by a gather, the previous
    row's end value ``prev`` shifted in. Returns (next row, prev, last end,
    whether an end decreased, min(mn, values), max(mx, values), the longest of
    these rows); the caller finishes the rows the vector steps leave. ip: int64
    offsets (contiguous); buf: int64, or int32 words that wrap (a row's value is
    then its sum modulo 2**32, exact when it fits int32); os: int32 or int64
    (contiguous)."""
    if not (isinstance(ip, types.Array) and ip.dtype == types.int64 and ip.layout == "C"
            and isinstance(buf, types.Array) and buf.dtype in (types.int32, types.int64) and buf.layout == "C"
            and isinstance(os, types.Array) and os.dtype in (types.int32, types.int64) and os.layout == "C"):
        return None
    sig = types.UniTuple(types.int64, 7)(ip, types.int64, types.int64, types.int64, types.int64, buf, types.int64,
                                         os, types.int64, types.int64, types.int64)
    return sig, _rows_codegen




def _sum_codegen(context, builder, sig, args):
    x_t = sig.args[0]
    x = context.make_array(x_t)(context, builder, args[0]).data
    lo, hi = args[1], args[2]
    xt = context.get_value_type(x_t.dtype)
    W = 16
    vt = ir.VectorType(_I64, W)
    acc_p = cgutils.alloca_once(builder, vt)
    builder.store(ir.Constant(vt, None), acc_p)

    def step(i, lanes_mask):
        xv = load_lanes(builder, x, i, xt, W, lanes_mask, _I64)
        builder.store(builder.add(builder.load(acc_p), xv), acc_p)

    strided_loop(builder, lo, hi, W, step, "sum")
    return _call(builder, f"llvm.vector.reduce.add.v{W}i64", _I64, [builder.load(acc_p)])


@intrinsic
def sum_i64(typingctx, x, lo, hi):
    """x[lo] + ... + x[hi - 1] in int64 (exact for int8/16/32 values; int64 wraps),
    sixteen lanes at a time and a masked tail (no scalar remainder loop, which
    dominates rows of ~100 elements). x contiguous, 0 <= lo <= hi <= len(x)."""
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.layout == "C"):
        return None
    return types.int64(x, types.int64, types.int64), _sum_codegen


@intrinsic
def same_width(typingctx, like, v):
    """v (int64) wrapped to the element width of the array ``like`` and sign-extended
    back: the int32 word arithmetic of an int32 buffer, unchanged for int64."""
    if not (isinstance(like, types.Array) and like.dtype in (types.int32, types.int64) and v == types.int64):
        return None

    def codegen(context, builder, sig, args):
        if sig.args[0].dtype == types.int64:
            return args[1]
        return builder.sext(builder.trunc(args[1], _I32), _I64)

    return types.int64(like, v), codegen


def _diff_codegen(context, builder, sig, args):
    a_t = sig.args[0]
    a = context.make_array(a_t)(context, builder, args[0]).data
    et = context.get_value_type(a_t.dtype)
    vt = ir.VectorType(et, _W)
    align = et.width // 8

    def step(j, lanes_mask):
        nxt = load_lanes(builder, a, builder.add(j, _I64(1)), et, _W, lanes_mask)
        cur = load_lanes(builder, a, j, et, _W, lanes_mask)
        d = builder.sub(nxt, cur)
        p = builder.bitcast(builder.gep(a, [j], inbounds=True), _OPAQUE)
        if lanes_mask is None:
            builder.store(d, builder.bitcast(p, vt.as_pointer()), align=align)
        else:
            _call(builder, f"llvm.masked.store.v{_W}i{et.width}.p0", ir.VoidType(), [d, p, _I32(align), lanes_mask])

    # forward in place: each step reads a[j + 1 .. j + 16] before a later step overwrites a[j + 16]
    strided_loop(builder, args[1], args[2], _W, step, "diff")
    return context.get_dummy_value()


@intrinsic
def adjacent_diff(typingctx, a, lo, hi):
    """a[j] = a[j + 1] - a[j] for lo <= j < hi, in place, sixteen lanes at a time
    (integer words that wrap). a contiguous, 0 <= lo <= hi < len(a)."""
    if not (isinstance(a, types.Array) and isinstance(a.dtype, types.Integer) and a.layout == "C"):
        return None
    return types.void(a, types.int64, types.int64), _diff_codegen


def _prefetch_codegen(context, builder, sig, args):
    a_t = sig.args[0]
    a = context.make_array(a_t)(context, builder, args[0]).data
    esize = context.get_abi_sizeof(context.get_value_type(a_t.dtype))
    lo, hi = args[1], args[2]
    step = max(1, 64 // esize)  # one request per 64-byte line

    def body(i, lanes_mask):
        p = builder.bitcast(builder.gep(a, [i], inbounds=True), ir.IntType(8).as_pointer())
        _call(builder, "llvm.prefetch.p0", ir.VoidType(), [p, _I32(0), _I32(3), _I32(1)])

    # whole lines only (no masked tail: a prefetch past the range is harmless but not past the array)
    strided_loop(builder, lo, builder.sub(hi, _I64(step - 1)), step,
                 lambda i, m: body(i, m) if m is None else None, "pf")
    return context.get_dummy_value()


@intrinsic
def prefetch(typingctx, a, lo, hi):
    """Ask for the cache lines of a[lo:hi] (a read prefetch into all levels);
    0 <= lo <= hi <= len(a), a contiguous."""
    if not (isinstance(a, types.Array) and a.layout == "C"):
        return None
    return types.void(a, types.int64, types.int64), _prefetch_codegen


def _count_codegen(context, builder, sig, args):
    f = context.make_array(sig.args[0])(context, builder, args[0]).data
    i8 = ir.IntType(8)
    W = 64
    bv = ir.VectorType(i8, W)
    n_p = cgutils.alloca_once(builder, _I64)
    builder.store(_I64(0), n_p)
    o_p = cgutils.alloca_once(builder, bv)
    builder.store(ir.Constant(bv, None), o_p)

    def step(i, lanes_mask):
        v = load_lanes(builder, f, i, i8, W, lanes_mask)
        set_ = builder.bitcast(builder.icmp_unsigned("!=", v, ir.Constant(bv, None)), _I64)
        builder.store(builder.add(builder.load(n_p), _call(builder, "llvm.ctpop.i64", _I64, [set_])), n_p)
        builder.store(builder.or_(builder.load(o_p), v), o_p)

    strided_loop(builder, args[1], args[2], W, step, "cnt")
    o = builder.zext(_call(builder, "llvm.vector.reduce.or.v64i8", i8, [builder.load(o_p)]), _I64)
    return context.make_tuple(builder, sig.return_type, [builder.load(n_p), o])


@intrinsic
def count_nonzero_or(typingctx, f, lo, hi):
    """(number of nonzero bytes in f[lo:hi], OR of those bytes): 64 bytes per step,
    a compare to a bit mask and a population count (a widening byte sum takes
    eight vector adds per 64 bytes). f contiguous, of bytes; 0 <= lo <= hi <= len."""
    if not (isinstance(f, types.Array) and f.layout == "C" and isinstance(f.dtype, (types.Integer, types.Boolean))
            and context_bits(f.dtype) == 8):
        return None
    return types.UniTuple(types.int64, 2)(f, types.int64, types.int64), _count_codegen


def context_bits(t):
    return 8 if isinstance(t, types.Boolean) else t.bitwidth
