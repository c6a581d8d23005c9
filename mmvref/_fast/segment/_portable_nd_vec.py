"""One portable LLVM vector loop for the N-d segment reductions (generic vector IR,
lowered for whatever CPU Numba compiles for: AVX-512, AVX2, SSE or NEON).

``vreduce`` reduces ``width`` consecutive features of the rows of one segment,
keeping the accumulator (and, for min/max, the positions) in vector registers
for the whole segment: a Numba loop over a runtime feature count keeps them in
memory, with an aliasing check per row, which measured 2-3x slower at 16
features. Integers accumulate in int64 lanes and are finished in registers too
(a mean floor-divided by the count, the range of the results tracked, the words
stored at the result's width), so the integer kernels need no scalar pass over
an int64 copy of them.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._portable_vec import _call, counted_loop, freeze

__all__ = ["vreduce", "vrow", "vextreme_into", "ROW_W", "ROW_STEPS", "SUM", "MEAN", "MIN", "MAX", "PROD"]

#: reduction codes (runtime values in the kernels, literals here)
SUM, MEAN, MIN, MAX, PROD = 0, 1, 2, 3, 4

_I1, _I64 = ir.IntType(1), ir.IntType(64)


def _splat(builder, val, vt):
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), val, ir.IntType(32)(0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), vt.count), [0] * vt.count))


def _codegen(op, W, track, context, builder, sig, args):
    x_t, rows_t, out_t, arg_t, mm_t = sig.args[0], sig.args[1], sig.args[6], sig.args[8], sig.args[9]
    x = context.make_array(x_t)(context, builder, args[0]).data
    rows = context.make_array(rows_t)(context, builder, args[1]).data
    out = context.make_array(out_t)(context, builder, args[6]).data
    arg = context.make_array(arg_t)(context, builder, args[8]).data
    lo, hi, F, xb0, ob, use_rows = args[2], args[3], args[4], args[5], args[7], args[12]
    track = track and op in (MIN, MAX)
    is_float = isinstance(x_t.dtype, types.Float)
    et = context.get_value_type(x_t.dtype)
    # accumulator lanes: x's float dtype, or int64 words for integers
    at = et if is_float else _I64
    _I32 = ir.IntType(32)
    vt, avt, it = ir.VectorType(et, W), ir.VectorType(at, W), ir.VectorType(_I32, W)

    def row(e):
        with builder.if_else(use_rows) as (then, otherwise):
            with then:
                b1 = builder.basic_block
                r1 = builder.load(builder.gep(rows, [e], inbounds=True))
            with otherwise:
                b2 = builder.basic_block
        r = builder.phi(_I64)
        r.add_incoming(r1, b1)
        r.add_incoming(e, b2)
        return r

    def load(r):
        p = builder.gep(x, [builder.add(xb0, builder.mul(r, F))], inbounds=True)
        v = builder.load(builder.bitcast(p, vt.as_pointer()), align=x_t.dtype.bitwidth // 8)
        if not is_float and x_t.dtype.bitwidth < 64:
            v = builder.sext(v, avt)
        return v

    r0 = row(lo)
    acc_p = cgutils.alloca_once(builder, avt)
    builder.store(load(r0), acc_p)
    arg_p = cgutils.alloca_once(builder, it)  # e - lo of the chosen rows (a segment is < 2**31 long)
    builder.store(ir.Constant(it, None), arg_p)

    def one_row(e):
        r = row(e)
        v = load(r)
        acc = builder.load(acc_p)
        if op in (SUM, MEAN):
            acc = builder.fadd(acc, v) if is_float else builder.add(acc, v)
        elif op == PROD:
            acc = builder.fmul(acc, v) if is_float else builder.mul(acc, v)
        else:
            if is_float:
                c = builder.fcmp_ordered("<" if op == MIN else ">", v, acc)
                if track:  # a NaN replaces a number and then stays (the first NaN's position is kept)
                    c = builder.or_(c, builder.and_(builder.fcmp_unordered("uno", v, v),
                                                    builder.fcmp_ordered("ord", acc, acc)))
                else:  # a NaN replaces anything: the value is NaN either way
                    c = builder.or_(c, builder.fcmp_unordered("uno", v, v))
            else:
                c = builder.icmp_signed("<" if op == MIN else ">", v, acc)
            acc = builder.select(c, v, acc)
            if track:
                off = _splat(builder, builder.trunc(builder.sub(e, lo), _I32), it)
                builder.store(builder.select(c, off, builder.load(arg_p)), arg_p)
        builder.store(acc, acc_p)

    counted_loop(builder, "vreduce", builder.add(lo, _I64(1)), lambda e: builder.icmp_signed("<", e, hi), 1, one_row)
    res = builder.load(acc_p)
    if op == MEAN and is_float:  # the sum divided by the count, rounded once
        res = builder.fdiv(res, _splat(builder, builder.sitofp(builder.sub(hi, lo), at), avt))
    if not is_float:
        if op == MEAN:  # floor division by the count (> 0): the truncated quotient, less 1 where the remainder is < 0
            c = _splat(builder, builder.sub(hi, lo), avt)
            neg = builder.icmp_signed("<", builder.srem(res, c), ir.Constant(avt, None))
            res = builder.add(builder.sdiv(res, c), builder.sext(neg, avt))
        mm = context.make_array(mm_t)(context, builder, args[9]).data  # [min, max] of the int64 results so far
        for i, (kind, cmp) in enumerate((("smin", "<"), ("smax", ">"))):
            v = _call(builder, f"llvm.vector.reduce.{kind}.v{W}i64", _I64, [res])
            p = builder.gep(mm, [_I64(i)], inbounds=True)
            cur = builder.load(p)
            builder.store(builder.select(builder.icmp_signed(cmp, v, cur), v, cur), p)
        ot = context.get_value_type(out_t.dtype)
        if ot.width < 64:  # the words stored at the result's width (two's complement: they wrap)
            res = builder.trunc(res, ir.VectorType(ot, W))
    po = builder.gep(out, [ob], inbounds=True)
    builder.store(res, builder.bitcast(po, res.type.as_pointer()), align=out_t.dtype.bitwidth // 8)
    if track:
        a = builder.load(arg_p)
        for j in range(W):  # once per segment: the chosen e, through rows when given
            ej = builder.add(lo, builder.sext(builder.extract_element(a, _I32(j)), _I64))
            builder.store(row(ej), builder.gep(arg, [builder.add(ob, _I64(j))], inbounds=True))
    return context.get_dummy_value()


@intrinsic
def vreduce(typingctx, x, rows, lo, hi, F, xb0, out, ob, arg, mm, op, width, use_rows, want_arg):
    """Reduce features xb0 + r*F + [0, width) of the rows r of one non-empty segment (r = e, or
    rows[e] when ``use_rows``, for e in [lo, hi)) into out[ob:ob+width] (and, for min/max, the
    chosen r into arg[ob:ob+width] when ``want_arg``), rows in increasing e. x: 1-D C array.
    Floats: out of x's dtype, ``mm`` None; MEAN is the sum divided by the count. Integers: int64
    lanes; MEAN is the sum floor-divided by the count; the results are stored at out's integer
    width (wrapping) and mm (int64, 2) receives min(mm[0], their smallest) and max(mm[1], their
    largest). arg, rows: int64. ``op`` (SUM, MEAN, PROD, MIN, MAX) and ``width`` are literal
    ints, ``want_arg`` a literal bool.
    min/max: strict comparisons (ties keep the earlier row); a NaN replaces a number once."""
    if not (isinstance(op, types.IntegerLiteral) and isinstance(width, types.IntegerLiteral)
            and isinstance(want_arg, types.BooleanLiteral)):
        return None
    if not (isinstance(x, types.Array) and x.ndim == 1 and isinstance(out, types.Array) and out.ndim == 1):
        return None
    if isinstance(x.dtype, types.Float) and (out.dtype != x.dtype or not isinstance(mm, types.NoneType)):
        return None
    if isinstance(x.dtype, types.Integer) and not (isinstance(out.dtype, types.Integer) and out.dtype.signed
                                                   and isinstance(mm, types.Array) and mm.dtype == types.int64):
        return None
    o, W, track = op.literal_value, width.literal_value, want_arg.literal_value
    sig = types.void(x, rows, types.int64, types.int64, types.int64, types.int64, out, types.int64, arg, mm,
                     op, width, types.boolean, want_arg)
    return sig, lambda c, b, s, a: _codegen(o, W, track, c, b, s, a)


def _extreme_into_codegen(W, context, builder, sig, args):
    x_t, out_t, arg_t = sig.args[0], sig.args[2], sig.args[4]
    x = context.make_array(x_t)(context, builder, args[0]).data
    out = context.make_array(out_t)(context, builder, args[2]).data
    xo, oo, e, is_min, track = args[1], args[3], args[5], args[6], args[8]
    vt = ir.VectorType(context.get_value_type(x_t.dtype), W)
    eb = x_t.dtype.bitwidth // 8
    w = builder.load(builder.bitcast(builder.gep(x, [xo], inbounds=True), vt.as_pointer()), align=eb)
    po = builder.bitcast(builder.gep(out, [oo], inbounds=True), vt.as_pointer())
    c = builder.load(po, align=eb)
    better = builder.select(is_min, builder.fcmp_ordered("<", w, c), builder.fcmp_ordered(">", w, c))
    nan = builder.fcmp_unordered("uno", w, w)
    # with positions a NaN replaces a number and then stays (its position is the first NaN's);
    # without, a later NaN replaces a NaN: NaN either way
    first_nan = builder.fcmp_ordered("ord", c, c)
    nan = builder.and_(nan, builder.or_(_splat(builder, builder.not_(track), first_nan.type), first_nan))
    take = builder.or_(better, nan)
    builder.store(freeze(builder, builder.select(take, w, c)), po, align=eb)
    with builder.if_then(track):  # (a constant where the caller's is: the branch is folded away)
        arg = context.make_array(arg_t)(context, builder, args[4]).data
        at = ir.VectorType(context.get_value_type(arg_t.dtype), W)
        pa = builder.bitcast(builder.gep(arg, [oo], inbounds=True), at.as_pointer())
        ab = arg_t.dtype.bitwidth // 8
        es = _splat(builder, builder.trunc(e, at.element) if at.element.width < 64 else e, at)
        builder.store(freeze(builder, builder.select(take, es, builder.load(pa, align=ab))), pa, align=ab)
    return context.get_dummy_value()


@intrinsic
def vextreme_into(typingctx, x, xo, out, oo, arg, e, is_min, width, want_arg):
    """One step of a running min (``is_min``) or max kept in memory: for the ``width`` lanes j,
    out[oo + j] = x[xo + j] where it is strictly smaller (larger) or a NaN, and, when
    ``want_arg``, arg[oo + j] = e there too. The NaN rule is ``_better``'s with positions (the
    first NaN stays) and the plain loop's without (any NaN replaces). Both stores are whole
    vectors (see ``freeze``). x, out: 1-D C arrays of one float dtype; arg: 1-D C int32/int64
    (e fits it); ``width`` a literal int."""
    if not isinstance(width, types.IntegerLiteral):
        return None
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Float) and isinstance(out, types.Array)
            and out.dtype == x.dtype and isinstance(arg, types.Array) and isinstance(arg.dtype, types.Integer)):
        return None
    W = width.literal_value
    sig = types.void(x, types.int64, out, types.int64, arg, types.int64, types.boolean, width, types.boolean)
    return sig, lambda c, b, s, a: _extreme_into_codegen(W, c, b, s, a)


# ----------------------------------------------------------------------------- one column

ROW_W = 8  # positions per vector step of ``vrow`` (one AVX2 register of float32)
ROW_STEPS = 1  # steps ``vrow`` takes before its loop


def _combine(builder, op, acc, v):
    """acc (op) v, lane by lane. min/max: an ordered comparison (one minps/maxps), so a NaN in
    v never enters acc: NaNs are tracked apart (``vrow``)."""
    if op in (SUM, MEAN):
        return builder.fadd(acc, v)
    if op == PROD:
        return builder.fmul(acc, v)
    return builder.select(builder.fcmp_ordered("<" if op == MIN else ">", v, acc), v, acc)


def _row_codegen(op, context, builder, sig, args):
    x_t = sig.args[0]
    x = context.make_array(x_t)(context, builder, args[0]).data
    lo, hi = args[1], args[2]
    et = context.get_value_type(x_t.dtype)
    W = ROW_W
    vt = ir.VectorType(et, W)
    iota = ir.Constant(ir.VectorType(_I64, W), list(range(W)))
    ident = {SUM: -0.0, MEAN: -0.0, PROD: 1.0, MIN: float("inf"), MAX: float("-inf")}[op]
    fill = ir.Constant(vt, [ident] * W)  # -0.0 + v == v for every v, +0.0 included
    acc_p = cgutils.alloca_once(builder, vt)
    minmax = op in (MIN, MAX)
    mt = ir.VectorType(_I1, W)
    nan_p = cgutils.alloca_once(builder, mt)  # lanes that met a NaN (min/max): its own short chain

    def step(acc, nan, p):
        ptr = builder.bitcast(builder.gep(x, [p], inbounds=True), vt.as_pointer())
        v = builder.load(ptr, align=x_t.dtype.bitwidth // 8)
        keep = builder.icmp_signed("<", iota, _splat(builder, builder.sub(hi, p), ir.VectorType(_I64, W)))
        v = builder.select(keep, v, fill)  # lanes at or past the segment's end: masked out
        return _combine(builder, op, acc, v), builder.or_(nan, builder.fcmp_unordered("uno", v, v))

    # the first ROW_STEPS steps unconditionally (no loop, so no trip count to mispredict for
    # the short segments), the loop only for what is left
    acc, nan = fill, ir.Constant(mt, None)
    for k in range(ROW_STEPS):
        acc, nan = step(acc, nan, builder.add(lo, _I64(k * W)))
    builder.store(acc, acc_p)
    builder.store(nan, nan_p)

    def one_step(p):
        acc, nan = step(builder.load(acc_p), builder.load(nan_p), p)
        builder.store(acc, acc_p)
        builder.store(nan, nan_p)

    counted_loop(builder, "vrow", builder.add(lo, _I64(ROW_STEPS * W)), lambda p: builder.icmp_signed("<", p, hi), W,
                 one_step)
    acc = builder.load(acc_p)
    n = W
    while n > 1:  # a tree over the lanes: halves combined
        n //= 2
        lo_half = builder.shuffle_vector(acc, acc, ir.Constant(ir.VectorType(ir.IntType(32), n), list(range(n))))
        hi_half = builder.shuffle_vector(acc, acc, ir.Constant(ir.VectorType(ir.IntType(32), n),
                                                               list(range(n, 2 * n))))
        acc = _combine(builder, op, lo_half, hi_half)
    res = builder.extract_element(acc, ir.IntType(32)(0))
    if minmax:  # NaN propagates: any NaN met gives NaN
        nan = builder.icmp_unsigned("!=", builder.bitcast(builder.load(nan_p), ir.IntType(W)), ir.IntType(W)(0))
        res = builder.select(nan, ir.Constant(et, float("nan")), res)
    return res


@intrinsic
def vrow(typingctx, x, lo, hi, op):
    """The ``op`` reduction (SUM, MEAN = SUM here, PROD, MIN, MAX: a literal int) of x[lo:hi], a
    non-empty range of a 1-D C float array, ``ROW_W`` positions per vector step, the lanes then
    combined as a tree: a reassociated order (sums and products; min/max are order-free, NaN
    propagating). Every step loads ``ROW_W`` whole elements: the first ROW_STEPS steps at lo,
    lo + ROW_W, ... unconditionally, then from every p < hi, so the caller makes sure x[lo:lo +
    ROW_STEPS * ROW_W] and x[:hi + ROW_W - 1] exist (lanes at or past hi are masked out)."""
    if not isinstance(op, types.IntegerLiteral):
        return None
    if not (isinstance(x, types.Array) and x.ndim == 1 and x.layout == "C" and isinstance(x.dtype, types.Float)):
        return None
    o = op.literal_value
    sig = x.dtype(x, types.int64, types.int64, op)
    return sig, lambda c, b, s, a: _row_codegen(o, c, b, s, a)
