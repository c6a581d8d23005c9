"""AVX2 path of the fast CSR SpMV: the kernels of ``_spmv_kernels``, with x[indices]
read by AVX2's gather instructions (``vgatherdps`` / ``vgatherdpd`` /
``vgatherqps`` / ``vgatherqpd``).

Why a path of its own: LLVM lowers its generic masked gather by the target's
tuning, and for targets tuned "prefer-no-gather" (AMD Zen) it emits one scalar
load and insert per lane. Measured on AMD EPYC Zen 3, 2 threads, kernel and
call alike (``python -m benchmarks --ops spmv``), the same kernels with AVX2
gathers instead: uniform 1M float32 30.0 -> 16.6 ms, power-law 1M float32
27.4 -> 17.0 ms; the rest within the (large) noise of a shared machine.

``LONG_ROW``: with hardware gathers (masked lanes cost nothing and load
nothing), one ``simd_dot`` per row beats the two-phase batches already for rows
of about 8 entries (attention b-4 r-4 float64 2.3 -> 1.4 ms, same machine). But
batches of rows of nearly one length go faster still by scalar loads
(``SCALAR_SHORT``; an 8-lane gather costs more on Zen 3 than 8 scalar loads) up
to rows of about 20 entries. Kernel alone, one thread, Zen 3 (ms, LONG_ROW 16 /
24-32 / 48): rows of 18 (attention b-2 r-4) float32 1.58 / 1.03 / 1.02, float64
1.76 / 1.43 / 1.41; rows of 28 (b-4 r-2) float64 1.36 / 1.81 / 1.89, float32
1.56 / 1.49 / 1.48. 24 takes the better side of both. The row length is only a
proxy: what simd_dot gains from is runs of consecutive columns a whole vector long
(contiguous loads instead of gathers). Rows of 26 in runs of 2 (b-2 r-8) lose by it
(LONG_ROW 24 / 48: float32 1.89 / 1.54 ms, float64 2.43 / 2.12), rows of 28-36 in
runs of 4 (b-4 r-2, r-4) float64 gain (1.49 / 2.06, 1.69 / 2.28).

Imported only through ``_target.kernels("spmv")`` when the kernel level is
avx2, i.e. the compile target has AVX2; AVX-512 targets keep LLVM's lowering,
which emits zmm gathers there.
"""
from __future__ import annotations

from llvmlite import ir

from ._gather import Gather, _elem_bytes

__all__ = ["GATHER", "LONG_ROW", "LONG_ROW_SHORT_RUNS", "SCALAR_SHORT", "emit_gather"]

#: the marker that makes the kernels of ``_spmv_kernels`` use emit_gather
GATHER = Gather("avx2")
#: rows per chunk averaging at least this many entries take simd_dot per row
LONG_ROW = 24
#: LONG_ROW instead for a matrix whose columns come in runs shorter than a vector (``ops._short_runs``):
#: rows of 24-63 entries in runs of 2-4 take the scalar batches (64: the AVX-512 path's LONG_ROW).
#: Prepared matvec, Zen 4 running the haswell build, 2 threads (ms, LONG_ROW 24 / 48 / 64):
#: attention b-2 r-8 (rows of 30, runs of about 2) float32 0.531 / 0.300 / 0.306, float64
#: 0.570 / 0.339 / 0.335; b-4 r-8 (rows of 60, runs of 4) float32 - / 0.716 / 0.609; b-4 r-2 (rows of
#: 36) float32 0.423 / 0.347, float64 (a run fills a 4-lane vector: not short) 0.341 / 0.371; b-4
#: r-4 float32 0.558 / 0.433 / 0.415; b-16 r-4 (runs of 16: not short) float32 1.10 / 1.42
LONG_ROW_SHORT_RUNS = 64
#: short rows by scalar loads (see ``_spmv_kernels.SCALAR_SHORT``)
SCALAR_SHORT = True

_I32 = ir.IntType(32)


def _lanes_of(vec, lo, n, builder):
    """Lanes lo .. lo+n-1 of a vector."""
    return builder.shuffle_vector(vec, ir.Constant(vec.type, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, n), list(range(lo, lo + n))))


def _concat(parts, builder):
    """One vector of the lanes of ``parts`` (equal lengths, a power of two of them) in order."""
    while len(parts) > 1:
        n = parts[0].type.count
        idx = ir.Constant(ir.VectorType(_I32, 2 * n), list(range(2 * n)))
        parts = [builder.shuffle_vector(parts[i], parts[i + 1], idx) for i in range(0, len(parts), 2)]
    return parts[0]


def emit_gather(S, base, idx, elem_t, mask):
    """Lanes base[idx[l]] where ``mask`` (idx: W lanes of i32 or i64, non-negative;
    elem_t float or double; masked-off lanes are 0 and load nothing), as AVX2 gather
    instructions of 256 bits each: 8 lanes for 32-bit indices and values, else 4.
    ``S`` is the caller's ``_spmv_kernels._Simd``."""
    b = S.b
    W = S.W
    eb = _elem_bytes(elem_t)
    wide_idx = idx.type.element.width == 64
    per = 4 if (wide_idx or eb == 8) else 8
    name = f"llvm.x86.avx2.gather.{'q' if wide_idx else 'd'}.{'pd' if eb == 8 else 'ps'}"
    name += ".256"
    assert W % per == 0, (W, per)  # W is 256 or 512 bits of values (_spmv_kernels._vec_bits)
    ptr = b.bitcast(base, ir.PointerType())
    scale = ir.IntType(8)(eb)
    parts = []
    for lo in range(0, W, per):
        n = per
        iv = idx if n == W else _lanes_of(idx, lo, n, b)
        mv = mask if n == W else _lanes_of(mask, lo, n, b)
        vt = ir.VectorType(elem_t, n)
        # the instruction takes the mask as the sign bits of a vector of the value type
        m = b.bitcast(b.sext(mv, ir.VectorType(ir.IntType(8 * eb), n)), vt)
        parts.append(S.call(name, vt, [ir.Constant(vt, None), ptr, iv, m, scale]))
    return _concat(parts, b)
