"""Portable LLVM vector building blocks for the Numba kernels (``numba.extending.intrinsic``):
generic vector IR only (shuffles, adds, masked loads and stores), which LLVM
lowers for whatever CPU it compiles for (AVX-512, AVX2 or SSE). The x86-only
kernels live in ``_avx512``."""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["prefix_i64"]

_I32, _I64 = ir.IntType(32), ir.IntType(64)
_OPAQUE = ir.PointerType()


def _call(builder, name, ret, args):
    """Call an LLVM intrinsic (declared on first use)."""
    fn = builder.module.globals.get(name)
    if fn is None:
        fn = ir.Function(builder.module, ir.FunctionType(ret, [a.type for a in args]), name=name)
    return builder.call(fn, args)


def _splat(builder, val, vt):
    v = builder.insert_element(ir.Constant(vt, ir.Undefined), val, _I32(0))
    return builder.shuffle_vector(v, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(_I32, vt.count),
                                                                                [0] * vt.count))


_V8 = ir.VectorType(_I64, 8)


def _prefix64_codegen(context, builder, sig, args):
    x_t, buf_t = sig.args[0], sig.args[3]
    x = context.make_array(x_t)(context, builder, args[0]).data
    buf = context.make_array(buf_t)(context, builder, args[3]).data
    lo, hi, p0 = args[1], args[2], args[4]
    xt = context.get_value_type(x_t.dtype)
    xvt = ir.VectorType(xt, 8)
    xb = x_t.dtype.bitwidth // 8
    iota = ir.Constant(ir.VectorType(_I64, 8), list(range(8)))
    zero = ir.Constant(_V8, None)
    i_p = builder.alloca(_I64)
    builder.store(lo, i_p)
    c_p = builder.alloca(_V8)
    builder.store(_splat(builder, p0, _V8), c_p)

    def step(i, lanes_mask):
        xp = builder.bitcast(builder.gep(x, [i], inbounds=True), _OPAQUE)
        bp = builder.bitcast(builder.gep(buf, [builder.sub(i, lo)], inbounds=True), _OPAQUE)
        if lanes_mask is None:
            xv = builder.load(builder.bitcast(xp, xvt.as_pointer()), align=xb)
        else:
            xv = _call(builder, f"llvm.masked.load.v8i{xt.width}.p0", xvt,
                       [xp, _I32(xb), lanes_mask, ir.Constant(xvt, None)])
        if xt.width < 64:
            xv = builder.sext(xv, _V8)
        for sh in (1, 2, 4):
            idx = [(j - sh) if j >= sh else 8 for j in range(8)]
            xv = builder.add(xv, builder.shuffle_vector(xv, zero, ir.Constant(ir.VectorType(_I32, 8), idx)))
        P = builder.add(xv, builder.load(c_p))
        if lanes_mask is None:
            builder.store(P, builder.bitcast(bp, _V8.as_pointer()), align=8)
        else:
            _call(builder, "llvm.masked.store.v8i64.p0", ir.VoidType(), [P, bp, _I32(8), lanes_mask])
        builder.store(builder.shuffle_vector(P, ir.Constant(_V8, ir.Undefined),
                                             ir.Constant(ir.VectorType(_I32, 8), [7] * 8)), c_p)

    fn = builder.function
    bcond, bbody, bend = (fn.append_basic_block(n) for n in ("pre.cond", "pre.body", "pre.end"))
    builder.branch(bcond)
    builder.position_at_end(bcond)
    i = builder.load(i_p)
    builder.cbranch(builder.icmp_signed("<=", builder.add(i, _I64(8)), hi), bbody, bend)
    builder.position_at_end(bbody)
    step(i, None)
    builder.store(builder.add(i, _I64(8)), i_p)
    builder.branch(bcond)
    builder.position_at_end(bend)
    i = builder.load(i_p)
    rem = builder.sub(hi, i)
    with builder.if_then(builder.icmp_signed(">", rem, _I64(0))):
        step(i, builder.icmp_signed("<", iota, _splat(builder, rem, ir.VectorType(_I64, 8))))
    return builder.extract_element(builder.load(c_p), _I32(0))


@intrinsic
def prefix_i64(typingctx, x, lo, hi, buf, p):
    """buf[i - lo] = p + x[lo] + ... + x[i] for lo <= i < hi, in int64 (exact for
    int8/16/32 values; int64 wraps); returns the last. Eight lanes at a time, an
    in-register scan. x and buf contiguous, len(buf) >= hi - lo."""
    if not (isinstance(x, types.Array) and isinstance(x.dtype, types.Integer) and x.layout == "C"
            and isinstance(buf, types.Array) and buf.layout == "C" and buf.dtype == types.int64):
        return None
    return types.int64(x, types.int64, types.int64, buf, types.int64), _prefix64_codegen
