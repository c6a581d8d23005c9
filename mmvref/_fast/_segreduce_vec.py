"""One portable LLVM vector loop for the N-d segment reductions (generic vector IR,
lowered for whatever CPU Numba compiles for: AVX-512, AVX2, SSE or NEON).

``vreduce`` reduces ``width`` consecutive features of the rows of one segment,
keeping the accumulator (and, for min/max, the positions) in vector registers
for the whole segment: a Numba loop over a runtime feature count keeps them in
memory, with an aliasing check per row, which measured 2-3x slower at 16
features.
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["vreduce", "SUM", "MEAN", "MIN", "MAX", "PROD"]

#: reduction codes (runtime values in the kernels, literals here)
SUM, MEAN, MIN, MAX, PROD = 0, 1, 2, 3, 4

_I1, _I64 = ir.IntType(1), ir.IntType(64)


def _splat(builder, val, vt):
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), val, ir.IntType(32)(0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                                  ir.Constant(ir.VectorType(ir.IntType(32), vt.count), [0] * vt.count))


def _codegen(op, W, track, context, builder, sig, args):
    x_t, rows_t, out_t, arg_t = sig.args[0], sig.args[1], sig.args[6], sig.args[8]
    x = context.make_array(x_t)(context, builder, args[0]).data
    rows = context.make_array(rows_t)(context, builder, args[1]).data
    out = context.make_array(out_t)(context, builder, args[6]).data
    arg = context.make_array(arg_t)(context, builder, args[8]).data
    lo, hi, F, xb0, ob, use_rows = args[2], args[3], args[4], args[5], args[7], args[11]
    track = track and op in (MIN, MAX)
    is_float = isinstance(x_t.dtype, types.Float)
    et = context.get_value_type(x_t.dtype)
    at = context.get_value_type(out_t.dtype)  # accumulator lanes: the result words
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
    e_p = cgutils.alloca_once(builder, _I64)
    builder.store(builder.add(lo, _I64(1)), e_p)
    fn = builder.function
    bcond, bbody, bend = (fn.append_basic_block(f"vreduce.{n}") for n in ("cond", "body", "end"))
    builder.branch(bcond)
    builder.position_at_end(bcond)
    e = builder.load(e_p)
    builder.cbranch(builder.icmp_signed("<", e, hi), bbody, bend)
    builder.position_at_end(bbody)
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
    builder.store(builder.add(e, _I64(1)), e_p)
    builder.branch(bcond)
    builder.position_at_end(bend)
    res = builder.load(acc_p)
    if op == MEAN and is_float:  # the sum divided by the count, rounded once (integers: the caller floors)
        res = builder.fdiv(res, _splat(builder, builder.sitofp(builder.sub(hi, lo), at), avt))
    po = builder.gep(out, [ob], inbounds=True)
    builder.store(res, builder.bitcast(po, avt.as_pointer()), align=out_t.dtype.bitwidth // 8)
    if track:
        a = builder.load(arg_p)
        for j in range(W):  # once per segment: the chosen e, through rows when given
            ej = builder.add(lo, builder.sext(builder.extract_element(a, _I32(j)), _I64))
            builder.store(row(ej), builder.gep(arg, [builder.add(ob, _I64(j))], inbounds=True))
    return context.get_dummy_value()


@intrinsic
def vreduce(typingctx, x, rows, lo, hi, F, xb0, out, ob, arg, op, width, use_rows, want_arg):
    """Reduce features xb0 + r*F + [0, width) of the rows r of one non-empty segment (r = e, or
    rows[e] when ``use_rows``, for e in [lo, hi)) into out[ob:ob+width] (and, for min/max, the
    chosen r into arg[ob:ob+width] when ``want_arg``), rows in increasing e. x: 1-D C array
    (floats, or integers widened to out's int64 words); out: x's float dtype or int64; arg,
    rows: int64. ``op`` (SUM; MEAN = the sum, divided by the count for floats; PROD, MIN, MAX) and ``width`` are literal ints, ``want_arg``
    a literal bool.
    min/max: strict comparisons (ties keep the earlier row); a NaN replaces a number once."""
    if not (isinstance(op, types.IntegerLiteral) and isinstance(width, types.IntegerLiteral)
            and isinstance(want_arg, types.BooleanLiteral)):
        return None
    if not (isinstance(x, types.Array) and x.ndim == 1 and isinstance(out, types.Array) and out.ndim == 1):
        return None
    if isinstance(x.dtype, types.Float) and out.dtype != x.dtype:
        return None
    if isinstance(x.dtype, types.Integer) and out.dtype != types.int64:
        return None
    o, W, track = op.literal_value, width.literal_value, want_arg.literal_value
    sig = types.void(x, rows, types.int64, types.int64, types.int64, types.int64, out, types.int64, arg,
                     op, width, types.boolean, want_arg)
    return sig, lambda c, b, s, a: _codegen(o, W, track, c, b, s, a)
