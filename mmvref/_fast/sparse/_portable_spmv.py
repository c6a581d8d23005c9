"""Numba kernels of the fast CSR SpMV (``mmvref._fast.sparse.ops``).

Work split (``partition``): the rows and nonzeros are cut into chunks of
about equal cost ``nnz + ROW_COST * rows`` along the merge path of
(row, element) pairs, so a chunk may begin or end inside a row; a very long
row is shared by several chunks. Chunk c owns the elements [E[c], E[c+1]);
it finishes rows R[c] .. R[c+1]-1 and starts row R[c+1]. Rows strictly
between R[c] and R[c+1] are whole and written to ``y`` directly; row R[c]'s
part goes to ``first[c]`` and row R[c+1]'s part to ``last[c]``, and
``combine`` adds those partial sums in chunk order. (One chunk, small
matrices: R = [0, m], E = [0, nnz], which the caller sets without
``partition``, and row 0 is the only part, added by the caller.)

Float rows (``float_rows``), summation order (any order satisfies the
documented bound, which holds for every summation tree of a row's k
products):
- long rows (average row length of the chunk >= LONG_ROW, or a row longer
  than BATCH): ``simd_dot``, one pass over the row with four W-lane
  accumulators (W = 16 float32 / 8 float64 lanes on AVX-512 targets, 8 / 4
  elsewhere: ``lanes``), products
  ``data * x[col]`` fused into the adds, a masked tail, then a tree
  reduction. When W consecutive column indices are consecutive integers
  the W values of x are read with one contiguous load instead of a gather.
- short rows: a batch of whole rows holding at most BATCH nonzeros is done in
  two phases: ``simd_products`` writes the products of the batch to a small
  buffer (full-width gathers regardless of row length), then ``simd_sum``
  sums each row's run of the buffer with a masked load (no branch for rows
  of at most W entries, so short rows of varying length do not mispredict).
  A batch whose row lengths differ by at most REGULAR_SPREAD is instead done row
  by row with scalar loads and four accumulators (``_scalar_rows``) where the path
  sets ``SCALAR_SHORT`` (targets without AVX-512: an 8-lane AVX2 gather costs more
  than 8 scalar loads), and on every path where the batch's column indices span at
  most SCALAR_WINDOW columns (a banded matrix such as a 2-D Poisson stencil: its x
  loads hit cache, and the products buffer is a pass the rows do not need).
  A prepared matrix (``PreparedMatrix``) plans its batches once: its first product
  records each batch's end row and path (``batches``, ``batch_mode``), the later ones
  replay them without the end row's search and the pass over the batch's column
  indices that decides the path (same decisions, same bits; on a 2-D Poisson matrix
  of 1e6 rows that pass was a fifth of the product: 3.2 -> 2.1 ms, float64).

Validation is fused: every kernel returns the largest column index it read
(unsigned, so a negative index counts as huge) and flags any row whose
offsets are inconsistent; indices are clamped to the last column before
they are used (the scalar batches instead find the batch's largest index
first and skip a batch with an invalid one), and row ranges are checked
before they are read, so a bad matrix is never read out of bounds. The
caller raises the error.

Integer rows (``int_kernel``): plain loops, int64 accumulation that wraps
(exact modulo 2**64), and with ``check`` a float64 sum of |a_ij * x_j| per
row part, so the caller knows which rows may have left int64 on the way.

The SIMD building blocks are LLVM vector intrinsics (masked load/store,
masked gather, vector reductions) emitted through ``numba.extending.intrinsic``;
LLVM lowers them for the CPU it compiles for (AVX-512, AVX2, or scalar code).
The vector width follows the compile target (``_vec_bits``): 512 bits with
AVX-512F, 256 bits otherwise.

How x[indices] is read is the one thing the kernel paths differ in, and it is
a kernel argument (``Gather``) whose Numba type carries the choice, so each
path is its own compiled specialization and cache entry:
- ``GATHER`` (this module, the portable and AVX-512 paths): LLVM's generic
  masked gather, lowered by LLVM for the target (zmm gathers on AVX-512; on
  AVX2 targets tuned "prefer-no-gather", AMD Zen among them, one scalar load
  per lane).
- ``_spmv_avx2.GATHER`` (the AVX2 path): AVX2's gather instructions, always.

``LONG_ROW`` (chunks whose whole rows average at least that many entries take
``simd_dot`` per row, shorter ones the two-phase batches) is also per path:
the kernels take it as an argument.

Cold start (a user's first call compiles the kernel; issue 31): the kernel
is built per combination of the row paths a call takes (``float_kernel``:
long rows, short rows (with the scalar batches); ``int_kernel``: the overflow
bound), the paths compile-time constants held in closure cells, so a path
the input does not take is pruned before typing (the caller reads the row
kinds off the chunk boundaries, O(chunks)); each SIMD intrinsic is called
from one site (every ``simd_dot`` of a chunk goes through one loop over the
chunk's parts), and the helpers are spelled out in the kernel rather than
inlined by Numba (whose inlining costs more compile time than the code).
``float_rows`` / ``float_rows_serial`` are the kernel with every path
(chosen at run time by its arguments), which the specialized ones equal bit
for bit.
"""
from __future__ import annotations

import functools

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .._variants import TaskBody, flag_name, variant
from ._gather import Gather, GatherKind, _elem_bytes  # noqa: F401  (Gather: the kernels' marker type)

__all__ = ["partition", "row_kinds", "flagged", "batch_plan_size", "pair_bits", "float_kernel", "float_rows", "float_rows_serial", "int_kernel", "combine",
           "combine_bound", "lanes", "Gather", "GATHER", "LONG_ROW"]

#: cost of one row in units of one nonzero, for the partition
ROW_COST = 2
#: nonzeros per two-phase batch of short rows (the product buffer stays in L1/L2)
BATCH = 8192


def _vec_bits() -> int:
    """512-bit vectors when the compile target has AVX-512F, else 256 (AVX2: one ymm
    register; SSE2/NEON: LLVM splits them). Follows the target Numba compiles for
    (``_target.target()``), not MMVREF_SIMD: Numba's cache is keyed on the compile
    target, so the width must be a function of it. Measured on AMD Zen 3 (AVX2; LLVM
    scalarizes its gathers), 256 against 512 bits: equal within noise on the small
    attention matrices, faster on power-law and uniform 1M (2 threads, kernel only:
    uniform float32 20.2 -> 15.4 ms, power-law float32 20.6 -> 16.2 ms)."""
    from .. import _target

    t = _target.target()
    return 512 if t.is_x86 and t.has("avx512f") else 256


_VEC_BITS = _vec_bits()
#: chunks whose whole rows average at least this many nonzeros use simd_dot per row (this path's
#: value: with gathers scalarized, the two-phase batches are faster for shorter rows). 64 with
#: AVX-512: a row of 48-63 entries is three or four 16-lane float32 gathers, the last mostly
#: masked; its batches (scalar loads where the columns span a window) measured faster on the
#: 2-vCPU AVX-512 Zen 4 VM: attention b-4 r-8 (60 entries a row) 0.91 -> 0.64 ms float32, 0.86 ->
#: 0.78 ms float64; random rows of 40-70 entries 0.91-1.11x over 64k-1M columns (noise), 1.23-1.25x
#: over 8k columns; every matrix whose rows average under 48 or over 64 unchanged
LONG_ROW = 64 if _VEC_BITS >= 512 else 48
#: batches of short rows of (nearly) one length by scalar loads (see ``_scalar_rows``) rather than
#: two phases: on targets without AVX-512 an 8-lane gather costs more than 8 scalar loads
#: (set per path, like LONG_ROW)
SCALAR_SHORT = _VEC_BITS < 512
#: where the path does not set SCALAR_SHORT, a regular batch still takes the scalar loads when its
#: column indices span at most this many columns (x's window: 256 KB of float32, 512 KB of float64,
#: within L2). Measured on AMD Zen 4 (AVX-512), 2 threads, prepared matvec: 2-D Poisson 1M rows
#: (5 entries a row, a band) 4.72 -> 2.76 ms float32, 4.72 -> 3.56 ms float64 (docs/performance.md);
#: the scattered regular batches of uniform / power-law 1M keep the gathers (scalar loads there
#: measured 0.90-0.98x)
SCALAR_WINDOW = 1 << 16
#: an x of at most this many bytes (an L1 data cache: 32 KB on Zen 4, 48 KB on recent Intel cores, 64 KB
#: or more on ARM server cores) takes the scalar loads for every batch of short rows, regular or not:
#: the gathers pay for their products buffer with memory-level parallelism, which loads that hit L1
#: do not need. Measured on Zen 4, prepared matvec of a uniform random matrix of 1,000 rows (5 entries
#: a row on average, lengths 0-12): 14.0 -> 12.4 us; with x in L2 (60,000 columns) the scalar loads were
#: slower (0.195 -> 0.29 ms float32), so the rule stops at L1
SCALAR_X_BYTES = 1 << 15
#: row lengths in a batch may differ by this much and still count as one length
REGULAR_SPREAD = 2
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_I1 = ir.IntType(1)
_OPAQUE = ir.PointerType()
_FLAGS = ("contract", "reassoc", "nsz")  # never nnan/ninf: NaN and inf must propagate
_U = np.uint64


def lanes(acc_dtype) -> int:
    """SIMD lanes of the float kernels for an accumulator dtype: 16 float32 / 8 float64
    with 512-bit vectors, 8 / 4 with 256-bit ones (see ``_vec_bits``)."""
    return _VEC_BITS // (8 * np.dtype(acc_dtype).itemsize)


# ----------------------------------------------------------------------------- gather kinds


#: LLVM's generic masked gather, lowered by LLVM for the compile target
GATHER = Gather("llvm")


def _gather_emitter(kind, S):
    """gather(base, idx, elem_t, align, mask) for a GatherKind."""
    if kind.isa == "avx2":
        from . import _avx2 as _spmv_avx2  # only reached when that path was chosen (so the target has AVX2)

        return lambda base, idx, elem_t, align, mask: _spmv_avx2.emit_gather(S, base, idx, elem_t, mask)
    return S.gather


# ----------------------------------------------------------------------------- IR helpers

def _tname(t) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_tname(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise TypeError(t)  # pragma: no cover


class _Simd:
    """Small vector-IR toolkit bound to one builder and lane count."""

    def __init__(self, builder, W):
        self.b = builder
        self.W = W
        self.mod = builder.module

    def call(self, name, ret, args, fastmath=()):
        fn = self.mod.globals.get(name)
        if fn is None:
            fn = ir.Function(self.mod, ir.FunctionType(ret, [a.type for a in args]), name=name)
        return self.b.call(fn, args, fastmath=fastmath)

    def vec(self, t):
        return ir.VectorType(t, self.W)

    def splat(self, val):
        vt = self.vec(val.type)
        v = self.b.insert_element(ir.Constant(vt, ir.Undefined), val, _I32(0))
        return self.b.shuffle_vector(v, ir.Constant(vt, ir.Undefined),
                                     ir.Constant(self.vec(_I32), [0] * self.W))

    def iota(self, t):
        return ir.Constant(self.vec(t), list(range(self.W)))

    def ptr(self, base, off):
        return self.b.gep(base, [off], inbounds=True)

    def load(self, base, off, vt, align):
        p = self.b.bitcast(self.ptr(base, off), vt.as_pointer())
        return self.b.load(p, align=align)

    def store(self, val, base, off, align):
        p = self.b.bitcast(self.ptr(base, off), val.type.as_pointer())
        self.b.store(val, p, align=align)

    def masked_load(self, base, off, vt, align, mask):
        p = self.b.bitcast(self.ptr(base, off), _OPAQUE)
        return self.call(f"llvm.masked.load.{_tname(vt)}.p0", vt,
                         [p, _I32(align), mask, ir.Constant(vt, None)])

    def masked_store(self, val, base, off, align, mask):
        p = self.b.bitcast(self.ptr(base, off), _OPAQUE)
        self.call(f"llvm.masked.store.{_tname(val.type)}.p0", ir.VoidType(),
                  [val, p, _I32(align), mask])

    def gather(self, base, idx, elem_t, align, mask):
        """Lanes base[idx[l]] where mask (idx: vector of i32 or i64 lanes, non-negative)."""
        g = self.b.gep(base, [idx], inbounds=True, source_etype=elem_t)
        g.type = self.vec(base.type)
        ptrs = self.b.bitcast(g, self.vec(_OPAQUE))
        vt = self.vec(elem_t)
        return self.call(f"llvm.masked.gather.{_tname(vt)}.v{self.W}p0", vt,
                         [ptrs, _I32(align), mask, ir.Constant(vt, None)])

    def tail_mask(self, rem):
        """Lanes l < rem (rem: i64; rem <= 0 gives no lane, rem >= W every lane)."""
        return self.b.icmp_signed("<", self.iota(_I64), self.splat(rem))

    def ones(self):
        return ir.Constant(self.vec(_I1), [1] * self.W)


def _while(builder, cond_fn, body_fn, name):
    """while cond_fn(): body_fn()  (values live in allocas; mem2reg promotes them)."""
    fn = builder.function
    bcond = fn.append_basic_block(name + ".cond")
    bbody = fn.append_basic_block(name + ".body")
    bend = fn.append_basic_block(name + ".end")
    builder.branch(bcond)
    builder.position_at_end(bcond)
    builder.cbranch(cond_fn(), bbody, bend)
    builder.position_at_end(bbody)
    body_fn()
    builder.branch(bcond)
    builder.position_at_end(bend)


def _convert(builder, v, src_t, dst_vt, src_signed=True):
    """Convert a vector of data values to the accumulator vector type."""
    if v.type == dst_vt:
        return v
    if isinstance(src_t, ir.IntType):
        return builder.sitofp(v, dst_vt) if src_signed else builder.uitofp(v, dst_vt)
    return builder.fpext(v, dst_vt)


def _check_arrays(*arrs):
    for a in arrs:
        if not (isinstance(a, types.Array) and a.ndim == 1 and a.layout == "C"):
            raise TypeError(f"expected a contiguous 1-D array, got {a}")


# ----------------------------------------------------------------------------- the streaming step

def _stream(context, builder, sig, args, mode):
    """Shared body of simd_dot (mode "dot") and simd_products (mode "store").

    Walks elements [lo, hi) of (ind, data) W lanes at a time, x values read by
    gather (or one contiguous load when the W indices are consecutive), with
    four independent accumulators (dot) or stores of the products to p[k - lo]
    (store). Returns the accumulator sum (dot) and the largest raw index
    (zero-extended, unsigned).
    """
    ind_t, data_t, x_t = sig.args[0], sig.args[1], sig.args[2]
    ind_a = context.make_array(ind_t)(context, builder, args[0])
    data_a = context.make_array(data_t)(context, builder, args[1])
    x_a = context.make_array(x_t)(context, builder, args[2])
    lo, hi = args[3], args[4]
    p_a = context.make_array(sig.args[5])(context, builder, args[5]) if mode != "dot" else None
    # dot: the indices of element k at k + shift (a matrix whose rows share their columns: see
    # ``float_kernel``'s ``shared``); 0 otherwise
    shift = args[5] if mode == "dot" else _I64(0)
    kind = sig.args[-1]

    it = context.get_value_type(ind_t.dtype)
    dt = context.get_value_type(data_t.dtype)
    at = context.get_value_type(x_t.dtype)
    W = lanes(np.dtype(str(x_t.dtype)))
    S = _Simd(builder, W)
    gather = _gather_emitter(kind, S)
    vi, vd, va = S.vec(it), S.vec(dt), S.vec(at)
    ib, db, ab = _elem_bytes(it), _elem_bytes(dt), _elem_bytes(at)
    data_signed = not (isinstance(data_t.dtype, types.Integer) and not data_t.dtype.signed)
    # indices narrower than 32 bits (a prepared matrix's uint16 columns, ``COMPACT_COLUMNS``) are
    # unsigned: zero-extended to i32 lanes before they address x (GEP indices are signed)
    narrow = it.width < 32
    wt = _I32 if narrow else it
    vw = S.vec(wt)

    # nc: last valid column; clamp value in the index type (GEP indices are signed: keep < 2**(w-1))
    nc = builder.sub(x_a.nitems, _I64(1))
    ncl = nc
    if wt.width < 64:
        cap = _I64((1 << (wt.width - 1)) - 1)
        ncl = builder.select(builder.icmp_signed("<", nc, cap), nc, cap)
        ncl = builder.trunc(ncl, wt)
    nclv = S.splat(ncl)
    lim = builder.sub(nc, _I64(W - 1))       # contiguous load allowed for i0 <= lim
    lim_ok = builder.icmp_signed(">=", lim, _I64(0))
    iota_i = S.iota(wt)

    n = builder.sub(hi, lo)
    k_ptr = cgutils.alloca_once(builder, _I64)
    builder.store(_I64(0), k_ptr)
    n_acc = 4 if mode == "dot" else 1
    accs = []
    for _ in range(n_acc):
        a = cgutils.alloca_once(builder, va)
        builder.store(ir.Constant(va, None), a)
        accs.append(a)
    umax_ptr = cgutils.alloca_once(builder, vi)
    builder.store(ir.Constant(vi, None), umax_ptr)

    def step(k, acc_ptr, mask=None):
        off = builder.add(lo, k)
        ioff = builder.add(off, shift)
        if mask is None:
            iv = S.load(ind_a.data, ioff, vi, ib)
        else:
            iv = S.masked_load(ind_a.data, ioff, vi, ib, mask)
        builder.store(S.call(f"llvm.umax.{_tname(vi)}", vi, [builder.load(umax_ptr), iv]), umax_ptr)
        if narrow:
            iv = builder.zext(iv, vw)
        ivc = S.call(f"llvm.umin.{_tname(vw)}", vw, [iv, nclv])
        if mask is None and mode != "dot":
            xv = gather(x_a.data, ivc, at, ab, S.ones())
            dv = S.load(data_a.data, off, vd, db)
        elif mask is None:
            i0 = builder.extract_element(iv, _I32(0))
            seq = builder.icmp_unsigned("==", iv, builder.add(S.splat(i0), iota_i))
            allseq = S.call(f"llvm.vector.reduce.and.v{W}i1", _I1, [seq])
            i0w = builder.zext(i0, _I64) if wt.width < 64 else i0
            inrange = builder.and_(lim_ok, builder.icmp_unsigned("<=", i0w, lim))
            contig = builder.and_(allseq, inrange)
            with builder.if_else(contig, likely=None) as (then, otherwise):
                with then:
                    b_then = builder.block
                    xv_c = S.load(x_a.data, i0w, va, ab)
                with otherwise:
                    b_else = builder.block
                    xv_g = gather(x_a.data, ivc, at, ab, S.ones())
            xv = builder.phi(va)
            xv.add_incoming(xv_c, b_then)
            xv.add_incoming(xv_g, b_else)
            dv = S.load(data_a.data, off, vd, db)
        else:
            xv = gather(x_a.data, ivc, at, ab, mask)
            dv = S.masked_load(data_a.data, off, vd, db, mask)
        dv = _convert(builder, dv, dt, va, data_signed)
        prod = builder.fmul(dv, xv, flags=_FLAGS)
        if mode == "dot":
            builder.store(builder.fadd(builder.load(acc_ptr), prod, flags=_FLAGS), acc_ptr)
        else:
            if mask is None:
                S.store(prod, p_a.data, k, ab)
            else:
                S.masked_store(prod, p_a.data, k, ab, mask)

    def body4():
        k = builder.load(k_ptr)
        for j in range(4):
            step(builder.add(k, _I64(j * W)), accs[j % n_acc])
        builder.store(builder.add(k, _I64(4 * W)), k_ptr)

    def body1():
        k = builder.load(k_ptr)
        step(k, accs[0])
        builder.store(builder.add(k, _I64(W)), k_ptr)

    _while(builder, lambda: builder.icmp_signed("<=", builder.add(builder.load(k_ptr), _I64(4 * W)), n),
           body4, "simd4")
    _while(builder, lambda: builder.icmp_signed("<=", builder.add(builder.load(k_ptr), _I64(W)), n),
           body1, "simd1")
    k = builder.load(k_ptr)
    with builder.if_then(builder.icmp_signed("<", k, n)):
        step(k, accs[0], S.tail_mask(builder.sub(n, k)))

    umax = S.call(f"llvm.vector.reduce.umax.{_tname(vi)}", it, [builder.load(umax_ptr)])
    umax = builder.zext(umax, _I64) if it.width < 64 else umax
    if mode == "store":
        return umax
    v = [builder.load(a) for a in accs]
    tot = builder.fadd(builder.fadd(v[0], v[1], flags=_FLAGS), builder.fadd(v[2], v[3], flags=_FLAGS),
                       flags=_FLAGS)
    s = S.call(f"llvm.vector.reduce.fadd.{_tname(va)}", at, [ir.Constant(at, -0.0), tot], fastmath=_FLAGS)
    return context.make_tuple(builder, sig.return_type, [s, umax])


def _check_kind(kind):
    if not isinstance(kind, GatherKind):
        raise TypeError(f"expected a Gather marker, got {kind}")


@intrinsic
def simd_dot(typingctx, ind, data, x, lo, hi, shift, kind):
    """(sum_{lo<=k<hi} data[k] * x[ind[k + shift]], max raw ind[k + shift] as uint64) for
    0 <= lo <= hi <= len(data), lo + shift >= 0, hi + shift <= len(ind).

    The accumulator dtype is x's; indices above the last column are clamped
    (the returned maximum tells the caller). Summation order: four W-lane
    accumulators, then a tree (so the same for any shift: the sum depends on the
    index values, not where they are kept). ``kind``: a ``Gather`` marker."""
    _check_arrays(ind, data, x)
    _check_kind(kind)
    sig = types.Tuple((x.dtype, types.uint64))(ind, data, x, types.int64, types.int64, types.int64, kind)
    return sig, lambda context, builder, s, a: _stream(context, builder, s, a, "dot")


@intrinsic
def simd_products(typingctx, ind, data, x, lo, hi, p, kind):
    """p[k - lo] = data[k] * x[ind[k]] for lo <= k < hi (p has x's dtype, len >= hi - lo);
    returns the largest raw index as uint64. ``kind``: a ``Gather`` marker."""
    _check_arrays(ind, data, x, p)
    _check_kind(kind)
    sig = types.uint64(ind, data, x, types.int64, types.int64, p, kind)
    return sig, lambda context, builder, s, a: _stream(context, builder, s, a, "store")


@intrinsic
def simd_sum(typingctx, p, s, n):
    """sum(p[s:s+n]) for n >= 0: V*W-lane steps (V accumulators), then V masked
    W-lane loads for the remaining < V*W values, tree-reduced; V = 1 for
    W >= 16 (float32 on 512-bit targets), else 2. A run of at most V*W values
    takes no loop iteration, so short rows of varying length cost no branch
    misprediction."""
    _check_arrays(p)
    sig = p.dtype(p, types.int64, types.int64)

    def codegen(context, builder, sg, args):
        p_a = context.make_array(sg.args[0])(context, builder, args[0])
        s, n = args[1], args[2]
        at = context.get_value_type(sg.args[0].dtype)
        W = lanes(np.dtype(str(sg.args[0].dtype)))
        V = 1 if W >= 16 else 2
        S = _Simd(builder, W)
        va = S.vec(at)
        ab = _elem_bytes(at)
        k_ptr = cgutils.alloca_once(builder, _I64)
        builder.store(_I64(0), k_ptr)
        accs = [cgutils.alloca_once(builder, va) for _ in range(V)]
        for a in accs:
            builder.store(ir.Constant(va, None), a)

        def body():
            k = builder.load(k_ptr)
            for j, a in enumerate(accs):
                v = S.load(p_a.data, builder.add(s, builder.add(k, _I64(j * W))), va, ab)
                builder.store(builder.fadd(builder.load(a), v, flags=_FLAGS), a)
            builder.store(builder.add(k, _I64(V * W)), k_ptr)

        _while(builder, lambda: builder.icmp_signed("<=", builder.add(builder.load(k_ptr), _I64(V * W)), n),
               body, "sum")
        k = builder.load(k_ptr)
        rem = builder.sub(n, k)  # in [0, V*W); all-false masks load nothing
        tot = None
        for j, a in enumerate(accs):
            v = S.masked_load(p_a.data, builder.add(s, builder.add(k, _I64(j * W))), va, ab,
                              S.tail_mask(builder.sub(rem, _I64(j * W))))
            t = builder.fadd(builder.load(a), v, flags=_FLAGS)
            tot = t if tot is None else builder.fadd(tot, t, flags=_FLAGS)
        return S.call(f"llvm.vector.reduce.fadd.{_tname(va)}", at, [ir.Constant(at, -0.0), tot],
                      fastmath=_FLAGS)

    return sig, codegen


# ----------------------------------------------------------------------------- partition

@njit(cache=True)
def partition(indptr, n_chunks, row_cost):
    """Merge-path split of (rows, nonzeros) into n_chunks parts of about equal
    cost nnz + row_cost * rows. Returns (R, E), each of length n_chunks + 1:
    chunk c owns elements [E[c], E[c+1]) and rows R[c] .. R[c+1]
    (R[c] and R[c+1] possibly partial). Assumes a valid indptr; on an invalid
    one the result is still in range and the kernels flag the rows."""
    m = indptr.size - 1
    nnz = max(np.int64(indptr[m]), np.int64(0))
    total = nnz + row_cost * m
    R = np.empty(n_chunks + 1, np.int64)
    E = np.empty(n_chunks + 1, np.int64)
    for c in range(n_chunks + 1):
        d = (total * c) // n_chunks
        a = 0
        b = m
        while a < b:  # largest r in [0, m] with indptr[r] + row_cost * r <= d
            mid = (a + b + 1) >> 1
            if np.int64(indptr[mid]) + row_cost * mid <= d:
                a = mid
            else:
                b = mid - 1
        e = d - row_cost * a
        if a < m:
            e = min(e, np.int64(indptr[a + 1]))
        R[c] = a
        E[c] = min(max(e, np.int64(0)), nnz)
    return R, E


@njit(cache=True)
def sample_rows_like_previous(indptr, indices, rows):
    """How many of ``rows`` (each in [1, m)) hold the columns of the row before, in the same order
    (offsets not checked yet: a row whose offsets are out of order or range is not counted)."""
    hits = 0
    nnz = indices.size
    for r in rows:
        a0 = np.int64(indptr[r - 1])
        a1 = np.int64(indptr[r])
        n = np.int64(indptr[r + 1]) - a1
        if a0 < 0 or a1 < a0 or n != a1 - a0 or a1 + n > nnz:
            continue
        prev = indices[a0:a1]
        cur = indices[a1:a1 + n]
        differ = 0
        for k in range(n):
            differ += prev[k] != cur[k]
        hits += differ == 0
    return hits


@njit(cache=True)
def lead_starts(indptr, same, starts):
    """starts[r] = where row r's columns begin when each run of rows ``same`` as the one before
    keeps its columns once (at its first row's place); returns the columns kept."""
    pos = np.int64(0)
    cur = np.int64(0)
    for r in range(indptr.size - 1):
        if not same[r]:
            cur = pos
            pos += np.int64(indptr[r + 1]) - np.int64(indptr[r])
        starts[r] = cur
    return pos


@njit(cache=True, parallel=True)
def copy_lead_rows(indptr, indices, same, starts, out):
    """out[starts[r] ...] = row r's columns for each row r not ``same`` as the one before."""
    for r in prange(indptr.size - 1):
        if not same[r]:
            a = np.int64(indptr[r])
            s = np.int64(starts[r])
            n = np.int64(indptr[r + 1]) - a
            dest = out[s:s + n]  # (slices: positions known non-negative, so the copy vectorizes:
            src = indices[a:a + n]  # 0.43 -> 0.18 ms on attention b-4 r-8)
            for k in range(n):
                dest[k] = src[k]


@njit(cache=True)
def row_kinds(indptr, R, long_row):
    """Which row kinds the chunks have, as the float kernel decides per chunk (whole rows
    r0+1 .. r1-1 averaging at least long_row entries: long, else short): bit 0 long, bit 1
    short. The caller compiles the kernel for those only. O(chunks); an invalid indptr only
    adds a kind (the kernel flags the rows)."""
    kinds = 0
    for c in range(R.size - 1):
        ra = R[c] + 1
        rb = R[c + 1]
        if ra < rb:
            if np.int64(indptr[rb]) - np.int64(indptr[ra]) >= long_row * (rb - ra):
                kinds |= 1
            else:
                kinds |= 2
    return kinds


# ----------------------------------------------------------------------------- float kernel

@njit(cache=True)
def _batch_shape(indptr, indices, t, q, lo, hi, small_x):
    """(regular, smallest, largest column index) of the batch of rows t..q-1, whose entries are
    [lo, hi) (hi >= lo): regular when the row lengths are non-negative and within
    REGULAR_SPREAD of each other. Two passes with no early exit, so LLVM vectorizes them (the
    early-exit loop they replace cost 8% of the b-2 r-2 attention matrix's short rows), that
    leave the indices in cache for the rows; the indices are read only for a regular batch, or
    for any batch when ``small_x`` (x within SCALAR_X_BYTES: every batch takes the scalar loads). A
    function of its own, not inlined: in the parallel kernel's body these loops cost 0.9 s more
    compile time than the call."""
    lmin = np.int64(indptr[t + 1]) - np.int64(indptr[t])
    lmax = lmin
    for ti in range(_U(t + 1), _U(q)):
        ln = np.int64(indptr[ti + _U(1)]) - np.int64(indptr[ti])
        lmin = ln if ln < lmin else lmin
        lmax = ln if ln > lmax else lmax
    regular = lmin >= 0 and lmax - lmin <= REGULAR_SPREAD
    mn = np.int64(0)
    mx = np.int64(0)
    if (regular or small_x) and hi > lo:
        a = indices[lo]
        b = a
        for k in range(_U(lo), _U(hi)):
            v = indices[k]
            a = v if v < a else a
            b = v if v > b else b
        mn = np.int64(a)
        mx = np.int64(b)
    return regular, mn, mx


@njit(cache=True)
def _scalar_rows(indptr, indices, data, x, y, r, q, lo, hi):
    """y[t] = sum of row t's products with scalar loads and four accumulators, for
    r <= t < q, whose entries lie in [lo, hi) and whose column indices are all valid; a
    row outside [lo, hi) gives 0 and True is returned. A function of its own (not
    inlined): LLVM schedules this loop much better alone (measured: 0.5 ms of 1.25 ms
    saved on the b-2 r-2 attention matrix). Each row's end offset is carried over as the
    next row's start (one load of indptr per row), and the positions are unsigned (no
    negative-index wrap-around per access): 10% less time on the short rows of b-2 r-2
    (0.67 -> 0.60 ms, one thread)."""
    bad = False
    s1 = np.int64(indptr[r])
    for t in range(_U(r), _U(q)):
        s0 = s1
        s1 = np.int64(indptr[t + _U(1)])
        if s0 < lo or s1 > hi or s0 > s1:
            bad = True
            y[t] = 0
            continue
        a = _U(s0)
        b = _U(s1)
        z0 = x.dtype.type(0)
        z1 = z0
        z2 = z0
        z3 = z0
        k = a
        while k + _U(4) <= b:
            z0 += data[k] * x[_U(indices[k])]
            z1 += data[k + _U(1)] * x[_U(indices[k + _U(1)])]
            z2 += data[k + _U(2)] * x[_U(indices[k + _U(2)])]
            z3 += data[k + _U(3)] * x[_U(indices[k + _U(3)])]
            k += _U(4)
        while k < b:
            z0 += data[k] * x[_U(indices[k])]
            k += _U(1)
        y[t] = (z0 + z1) + (z2 + z3)
    return bad


@njit(cache=True)
def _scalar_row_pairs(indptr, indices, data, x, y, r, q, lo, hi, batches, base):
    """``_scalar_rows`` for rows r <= t < q where a prepared matrix's pair bits (``batches`` from
    ``base`` on: bit t of the words, row t holds the columns of row t - 1 in the same order) pair
    a row with the next: the two rows' sums run in one loop that reads each column index and x
    value once (three loads an entry pair fewer, and twice the independent adds). Each row's sum
    is ``_scalar_rows``'s, in its order, so the bits are the same. Attention b-2 / b-4 r-8 (rows
    of 26-56 entries in blocks of 2 or 4 rows of one pattern), 2 threads, float32: 0.246 -> 0.209 /
    0.479 -> 0.367 ms for the rows."""
    bad = False
    t = _U(r)
    qu = _U(q)
    while t < qu:
        s0 = np.int64(indptr[t])
        s1 = np.int64(indptr[t + _U(1)])
        paired = False
        if t + _U(1) < qu and s0 >= lo and s0 <= s1:
            nxt = t + _U(1)
            s2 = np.int64(indptr[nxt + _U(1)])
            paired = (batches[_U(base) + (nxt >> _U(6))] >> np.int64(nxt & _U(63))) & 1 == 1
            paired = paired and s2 - s1 == s1 - s0 and s2 <= hi
        if not paired:  # (one row: ``_scalar_rows`` itself, its checks and its bits)
            if _scalar_rows(indptr, indices, data, x, y, t, t + _U(1), lo, hi):
                bad = True
            t += _U(1)
            continue
        a = _U(s0)
        b = _U(s1)
        o = b - a  # row t + 1's entry k at k + o: the same column as row t's entry k
        z0 = x.dtype.type(0)
        z1 = z0
        z2 = z0
        z3 = z0
        w0 = z0
        w1 = z0
        w2 = z0
        w3 = z0
        k = a
        while k + _U(4) <= b:
            x0 = x[_U(indices[k])]
            x1 = x[_U(indices[k + _U(1)])]
            x2 = x[_U(indices[k + _U(2)])]
            x3 = x[_U(indices[k + _U(3)])]
            z0 += data[k] * x0
            z1 += data[k + _U(1)] * x1
            z2 += data[k + _U(2)] * x2
            z3 += data[k + _U(3)] * x3
            w0 += data[k + o] * x0
            w1 += data[k + o + _U(1)] * x1
            w2 += data[k + o + _U(2)] * x2
            w3 += data[k + o + _U(3)] * x3
            k += _U(4)
        while k < b:
            x0 = x[_U(indices[k])]
            z0 += data[k] * x0
            w0 += data[k + o] * x0
            k += _U(1)
        y[t] = (z0 + z1) + (z2 + z3)
        y[t + _U(1)] = (w0 + w1) + (w2 + w3)
        t += _U(2)
    return bad


def pair_bits(same, nnz, chunks) -> np.ndarray:
    """A prepared matrix's short-row batch plan (``float_rows``'s ``batches``: ``batch_plan_size``
    slots) followed by its pair bits: bit t of word t // 64 set where ``same[t]`` (row t holds the
    columns of row t - 1: ``_scalar_row_pairs``)."""
    base = batch_plan_size(nnz, chunks)
    m = same.size
    out = np.zeros(base + (m + 64) // 64, np.int64)
    bits = np.packbits(np.asarray(same, np.bool_), bitorder="little")
    words = np.zeros(((m + 64) // 64) * 8, np.uint8)
    words[:bits.size] = bits
    out[base:] = words.view("<i8")
    return out


def batch_plan_size(nnz, chunks) -> int:
    """Slots of a batch plan (``float_rows``'s ``batches``) for nnz entries in ``chunks`` chunks.
    Chunk c's slots start at (2 E[c]) // BATCH + 3 c: its short-row batches are at most
    2 (E[c+1] - E[c]) / BATCH + 1 (each two consecutive batches hold more than BATCH entries),
    and the next chunk's first slot is at least that plus 2 further on."""
    return (2 * int(nnz)) // BATCH + 3 * int(chunks)


def float_kernel(parallel, long_rows=True, short_rows=True, shared=False, pairs=False):
    """The float kernel (``float_rows`` below) compiled for the row paths a call takes:
    ``long_rows`` (chunks whose whole rows average at least the path's LONG_ROW entries:
    simd_dot per row), ``short_rows`` (the other chunks: batches; a regular batch by scalar
    loads on every path where the path sets SCALAR_SHORT, else where its columns span at most
    SCALAR_WINDOW; the others in two phases). The flags are compile-time constants (closure
    cells, so a path that is off is pruned before typing, and Numba's cache keeps one entry
    per combination); where both row kinds are compiled the kernel chooses per chunk by its
    ``long_row`` argument, and per batch by ``scalar_short`` and the batch's columns.
    ``float_rows`` and ``float_rows_serial`` are the kernel with every path.

    ``shared`` (long rows only, a prepared matrix whose consecutive rows share their columns:
    ``ops.shared_columns``): ``indices`` holds each group of rows' columns once and the
    ``batches`` argument (no batches without short rows) each row's first position in it; row t's
    entry k reads its column at ``k + batches[t] - indptr[t]``. The same index values in the same
    loops, so the same bits.

    ``pairs`` (short rows, a prepared matrix whose short rows share their columns with the row
    before: ``ops.PAIR_SHARE``): its replayed scalar batches read the pair bits after the batch
    plan (``pair_bits``, ``_scalar_row_pairs``). A flag of its own: compiled into every short-row
    kernel, ``_scalar_row_pairs`` cost a first ``spmv`` 0.46 s more (1.33 -> 1.79 s)."""
    k = _FLOAT_KERNELS.get((parallel, long_rows, short_rows, shared, pairs))  # (a prepared matrix's first product)
    if k is not None:
        return k
    assert not (shared and short_rows), "shared columns: long rows only"
    assert not (pairs and not short_rows), "pairs: short rows only"
    key = (bool(parallel), bool(long_rows), bool(short_rows), bool(shared), bool(pairs))
    k = _FLOAT_KERNELS.get(key)
    if k is None:
        names = ("parallel", "long", "short", "shared", "pairs")
        k = _FLOAT_KERNELS[key] = variant(_make_float, *key, name=flag_name("float_", names, key))
    return k


_FLOAT_KERNELS = {}


@functools.lru_cache(maxsize=None)
def _float_chunk(long_rows, short_rows, shared=False, pairs=False):
    """The task body of the float kernels compiled for the row paths ``long_rows`` /
    ``short_rows`` (``float_kernel``): one chunk, c, of ``float_rows``; m = y.size, nc = the
    largest valid column (unsigned), small_x = x within SCALAR_X_BYTES. One body for the
    parallel kernel and its serial twin (``_variants.TaskBody``: compiled once, outside the
    parfor passes; inlined in the parallel kernel it cost 2.3 s a signature against 0.7 s)."""

    def chunk(c, indptr, indices, data, x, y, R, E, first, last, umax_out, bad_out, kind, long_row,
              scalar_short, batches, batch_mode, m, nc, small_x):
        r0 = R[c]
        r1 = R[c + 1]
        e0 = E[c]
        e1 = E[c + 1]
        umax = _U(0)
        bad = e0 > e1 or r0 > r1
        first[c] = 0
        last[c] = 0
        # the whole rows r0+1 .. r1-1, within [lo_w, hi_w): long (simd_dot each) or short
        ra = r0 + 1
        rb = r1
        lo_w = np.int64(0)
        hi_w = np.int64(0)
        is_long = False
        if not bad and ra < rb:
            lo_w = np.int64(indptr[ra])
            hi_w = np.int64(indptr[rb])
            if lo_w < e0 or hi_w > e1 or lo_w > hi_w:
                bad = True
            elif long_rows:
                if short_rows:
                    is_long = hi_w - lo_w >= long_row * (rb - ra)
                else:
                    is_long = True
        if short_rows:
            p = np.empty(BATCH + 64 if (ra < rb and not is_long) else 0, y.dtype)
            plan_end = np.int64(0)
            paired = False
            if pairs:  # a prepared matrix's pair bits follow its batch plan (``pair_bits``), replayed only
                plan_end = (2 * np.int64(E[E.size - 1])) // BATCH + 3 * (R.size - 1)
                paired = batch_mode == 2 and batches.size > plan_end
        # the chunk's work items in order, each a range [a, b) for simd_dot and where its
        # sum goes (0: y[t], 1: first[c], 2: last[c]), or a batch of short rows
        t = r0
        slot = (2 * e0) // BATCH + 3 * c  # the chunk's first slot of the batch plan (batch_plan_size)
        while not bad:
            dest = -1
            a = np.int64(0)
            b = np.int64(0)
            if t == r0:  # the first row's part [e0, ...)
                if r0 >= m:
                    break
                lo0 = np.int64(indptr[r0])
                hi0 = np.int64(indptr[r0 + 1])
                b = hi0 if hi0 < e1 else e1
                if lo0 <= e0 and e0 <= b and b <= hi0 and (r1 > r0 or e1 <= hi0):
                    a = e0
                    dest = 1
                else:
                    bad = True
            elif t < rb:  # whole rows
                if long_rows:
                    if is_long:
                        a = np.int64(indptr[t])
                        b = np.int64(indptr[t + 1])
                        if a < lo_w or b > hi_w or a > b:
                            bad = True
                        else:
                            dest = 0
                if short_rows:
                    if not is_long:
                        # a batch of whole rows t..q-1 of at most BATCH entries
                        lo = np.int64(indptr[t])
                        planned = 0
                        if batch_mode == 2:
                            planned = batches[slot]
                            q = planned >> 1
                        else:
                            qa = t
                            qb = rb
                            while qa < qb:  # largest q in [t, rb] with indptr[q] - lo <= BATCH
                                mid = (qa + qb + 1) >> 1
                                if np.int64(indptr[mid]) - lo <= BATCH:
                                    qa = mid
                                else:
                                    qb = mid - 1
                            q = qa
                        hi = np.int64(indptr[q + 1] if q == t else indptr[q])
                        if hi < lo or hi > hi_w:  # offsets out of order: nothing read
                            bad = True
                        elif q == t:  # one row longer than a batch
                            a = lo
                            b = hi
                            dest = 0
                            if batch_mode == 1:
                                batches[slot] = 2 * q
                            slot += 1
                        else:
                            done = False
                            # rows of (nearly) one length by scalar loads, where the path
                            # prefers them for every regular batch, else where the batch
                            # reads x within SCALAR_WINDOW columns (banded matrices: the
                            # loads hit cache, and the gathers' products buffer is a pass
                            # the rows do not need); only a batch whose indices are all
                            # valid is computed
                            if batch_mode == 2:
                                done = (planned & 1) == 1
                                if done:
                                    if pairs:
                                        if paired:
                                            if _scalar_row_pairs(indptr, indices, data, x, y, t, q, lo, hi, batches,
                                                                 plan_end):
                                                bad = True
                                        elif _scalar_rows(indptr, indices, data, x, y, t, q, lo, hi):
                                            bad = True
                                    elif _scalar_rows(indptr, indices, data, x, y, t, q, lo, hi):
                                        bad = True
                            else:
                                regular, mn, mx = _batch_shape(indptr, indices, t, q, lo, hi, small_x)
                                if (regular or small_x) and (mn < 0 or scalar_short or mx - mn <= SCALAR_WINDOW):
                                    done = True
                                    u = _U(0xFFFFFFFFFFFFFFFF) if mn < 0 else _U(mx)
                                    umax = u if u > umax else umax
                                    if u <= nc:  # else the caller raises; nothing of this batch is read
                                        if _scalar_rows(indptr, indices, data, x, y, t, q, lo, hi):
                                            bad = True
                                if batch_mode == 1:
                                    batches[slot] = 2 * q + (1 if done else 0)
                            slot += 1
                            if not done:
                                # two phases: the batch's products (full-width gathers
                                # regardless of row length), then each row's run summed
                                # with masked loads (no branch for rows of varying length)
                                u = simd_products(indices, data, x, lo, hi, p, kind)
                                umax = u if u > umax else umax
                                for tt in range(t, q):
                                    s0 = np.int64(indptr[tt]) - lo
                                    nt = np.int64(indptr[tt + 1]) - np.int64(indptr[tt])
                                    if s0 < 0 or nt < 0 or s0 + nt > hi - lo:
                                        bad = True
                                        y[tt] = 0
                                        continue
                                    y[tt] = simd_sum(p, s0, nt)
                            t = q
                            continue
                if dest < 0:
                    bad = True  # (a row kind this kernel was not compiled for: not reached)
            elif t == r1 and r1 < m:  # the last row's part [..., e1)
                a = np.int64(indptr[r1])
                b = e1
                if a <= e1 and a >= e0 and np.int64(indptr[r1 + 1]) >= e1:
                    dest = 2
                else:
                    bad = True
            else:
                break
            if bad:
                break
            shift = np.int64(0)
            if shared:  # row t's columns at its group's place (``float_kernel``)
                shift = np.int64(batches[t]) - np.int64(indptr[t])
            s, u = simd_dot(indices, data, x, a, b, shift, kind)
            umax = u if u > umax else umax
            if dest == 0:
                y[t] = s
            elif dest == 1:
                first[c] = s
                if R.size == 2:
                    # one chunk: its first row's part is the row (added to 0, as ``combine`` does:
                    # -0.0 becomes 0.0), written here, so that first is written but never read
                    # (``ops.FloatSpmv``: one-chunk products share their scratch)
                    y[t] = 0.0 + s
            else:
                last[c] = s
            t += 1
        umax_out[c] = umax
        bad_out[c] = bad


    return TaskBody(flag_name("float_rows_", ("long", "short", "shared", "pairs"), (long_rows, short_rows, shared, pairs)),
                    chunk)


def _make_float(parallel, long_rows, short_rows, shared=False, pairs=False):
    """One function body for every path, with one call site of each SIMD intrinsic (the
    chunk's boundary parts, its long rows and a short row longer than a batch all go
    through the same ``simd_dot``): each site is lowered and optimized separately, and
    Numba's inlining of helpers costs more compile time than their code."""

    body = _float_chunk(long_rows, short_rows, shared, pairs)

    def float_rows(indptr, indices, data, x, y, R, E, first, last, umax_out, bad_out, kind, long_row,
                   scalar_short, batches, batch_mode):
        """y[r] for the whole rows of every chunk; partial sums of the chunk's
        boundary rows into first/last (see the module docstring; one chunk: its first
        row is written to y by its chunk, and ``combine`` is not needed). ``x`` and ``y``
        have the accumulator dtype. Per chunk: umax_out = largest raw column
        index read, bad_out = an inconsistent row offset was seen. ``kind`` (a
        ``Gather``) and ``long_row`` are the kernel path's.

        ``batches`` / ``batch_mode``: the short-row batches' plan (``batch_plan_size``
        int64 slots, chunk c's from (2 E[c]) // BATCH + 3 c: each batch's end row q
        and whether it takes the scalar loads, as 2 q + scalar). Mode 0: each batch is
        planned as it comes (``batches`` may be empty); 1: planned and recorded; 2:
        replayed from a plan recorded for the same matrix structure, chunks and path,
        and the batches' structure reads (the end row's search, ``_batch_shape``'s
        pass over the column indices: 20-25% of a 2-D Poisson product) are skipped.
        Mode 2 only for a matrix whose structure was checked (``PreparedMatrix``): the
        replayed scalar batches do not update umax_out. The same decisions, so the
        same bits, in every mode."""
        if parallel:  # referenced, so that it is a cell: part of the cache key
            pass
        m = y.size
        nc = _U(x.size - 1)
        small_x = x.size * x.itemsize <= SCALAR_X_BYTES
        for c in prange(R.size - 1):
            body(np.int64(c), indptr, indices, data, x, y, R, E, first, last, umax_out, bad_out, kind, long_row,
                 scalar_short, batches, batch_mode, m, nc, small_x)

    return njit(cache=True, parallel=parallel)(float_rows)


#: the float kernel with every path (the chosen paths and LONG_ROW by argument):
#: chunks in parallel, and on the calling thread
float_rows = float_kernel(True)
float_rows_serial = float_kernel(False)


# ----------------------------------------------------------------------------- integer kernel

def int_kernel(parallel, check):
    """Integer rows: int64 sums that wrap (exact modulo 2**64) into y; with
    ``check`` also the float64 sums of |a_ij x_j| into bnd (per whole row) and
    fbnd/lbnd (per boundary part). Same chunking and flags as the float kernel.
    ``check`` is a compile-time constant (a closure cell): without it the bound
    is not compiled."""
    key = (bool(parallel), bool(check))
    return variant(_make_int, *key, name=flag_name("int_", ("parallel", "check"), key))


@functools.lru_cache(maxsize=None)
def _int_chunk(check):
    """The task body of the integer kernels (``int_kernel``): one chunk, c, of ``int_rows``; m =
    y.size, nc = the largest valid column. One body for the parallel kernel and its serial twin
    (``_variants.TaskBody``)."""

    # one loop over the chunk's parts (first part, whole rows, last part): the dot is written once
    def chunk(c, indptr, indices, data, x, y, bnd, R, E, first, last, fbnd, lbnd, umax_out, bad_out, m, nc):
        r0 = R[c]
        r1 = R[c + 1]
        e0 = E[c]
        e1 = E[c + 1]
        umax = np.uint64(0)
        bad = e0 > e1 or r0 > r1
        first[c] = 0
        last[c] = 0
        if check:
            fbnd[c] = 0.0
            lbnd[c] = 0.0
        t = r0
        while not bad:
            if t == r0:  # the first row's part [e0, ...)
                if r0 >= m:
                    break
                lo0 = np.int64(indptr[r0])
                hi0 = np.int64(indptr[r0 + 1])
                hi = hi0 if hi0 < e1 else e1
                lo = e0
                if not (lo0 <= e0 and e0 <= hi and hi <= hi0 and (r1 > r0 or e1 <= hi0)):
                    bad = True
                    break
            elif t < r1:  # whole rows
                lo = np.int64(indptr[t])
                hi = np.int64(indptr[t + 1])
                if lo < e0 or hi > e1 or lo > hi:
                    bad = True
                    break
            elif t == r1 and r1 < m:  # the last row's part [..., e1)
                lo = np.int64(indptr[r1])
                hi = e1
                if not (lo <= e1 and lo >= e0 and np.int64(indptr[r1 + 1]) >= e1):
                    bad = True
                    break
            else:
                break
            acc = np.int64(0)
            bd = 0.0
            for k in range(lo, hi):
                j = np.int64(indices[k])
                if j < 0 or j > nc:
                    umax = np.uint64(0xFFFFFFFFFFFFFFFF)
                    continue
                av = np.int64(data[k])
                xv = np.int64(x[j])
                acc += av * xv
                if check:
                    bd += abs(float(av)) * abs(float(xv))
                uj = np.uint64(j)
                umax = uj if uj > umax else umax
            if t == r0:
                first[c] = acc
                if check:
                    fbnd[c] = bd
            elif t < r1:
                y[t] = acc
                if check:
                    bnd[t] = bd
            else:
                last[c] = acc
                if check:
                    lbnd[c] = bd
            t += 1
        umax_out[c] = umax
        bad_out[c] = bad


    return TaskBody(flag_name("int_rows_", ("check",), (check,)), chunk)


def _make_int(parallel, check):
    body = _int_chunk(check)

    def int_rows(indptr, indices, data, x, y, bnd, R, E, first, last, fbnd, lbnd, umax_out, bad_out):
        if parallel:  # referenced, so that it is a cell: part of the cache key
            pass
        m = y.size
        nc = np.int64(x.size) - 1
        for c in prange(R.size - 1):
            body(np.int64(c), indptr, indices, data, x, y, bnd, R, E, first, last, fbnd, lbnd, umax_out, bad_out,
                 m, nc)

    return njit(cache=True, parallel=parallel)(int_rows)


# ----------------------------------------------------------------------------- per-call helpers

@njit(cache=True)
def flagged(umax, bad, n):
    """True when a kernel saw an inconsistent offset or read a column index >= n
    (negative ones count as huge: umax is unsigned). Several chunks only (one: the
    caller reads the two flags)."""
    for c in range(bad.size):
        if bad[c] or umax[c] > np.uint64(n - 1):
            return True
    return False


# ----------------------------------------------------------------------------- combine

@njit(cache=True)
def combine(y, R, first, last):
    """Boundary rows: y[R[c]] = sum of the parts of that row, in chunk order."""
    m = y.size
    C = R.size - 1
    for c in range(C):
        if R[c] < m:
            y[R[c]] = 0
    for c in range(C):
        if R[c] < m:
            y[R[c]] += first[c]
        if R[c + 1] > R[c] and R[c + 1] < m:
            y[R[c + 1]] += last[c]


@njit(cache=True)
def combine_bound(bnd, R, fbnd, lbnd):
    m = bnd.size
    C = R.size - 1
    for c in range(C):
        if R[c] < m:
            bnd[R[c]] = 0.0
    for c in range(C):
        if R[c] < m:
            bnd[R[c]] += fbnd[c]
        if R[c + 1] > R[c] and R[c + 1] < m:
            bnd[R[c + 1]] += lbnd[c]
