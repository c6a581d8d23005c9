"""Fast CPU segmented operations: thin wrappers that validate, allocate and
call the Numba kernels of ``_seg_kernels``.

Dtypes (DEVELOPERS.md): int8/int16/int32 -> int32, int64 -> int64,
fp16 -> fp32, fp32/fp64 kept; ``dtype=`` picks another result dtype among int8,
int16, int32, int64, float16, float32, float64 (a float input cannot ask for an
integer one; int8/int16/float16 results are computed at int32/float32 and
narrowed, ``segreduce.dtypes``: the one rule of the single-machine and Dask ops).
The private ``_*_1d`` kernels' wrappers take the compute dtypes only (int32,
int64, float32, float64).
Integer results are exact; an actual overflow of the result dtype raises
OverflowError unless ``overflow="wrap"`` (two's-complement wrap-around, the
exact result modulo 2**32 or 2**64). Flags mark segment STARTS and are 0/1 in
bool, int8 or uint8; position 0 always starts a segment.

Float error bounds (u = unit roundoff of the result dtype; sums run in index
order inside a chunk, and a chunk's first segment gets the previous chunk's
carry added at the end, so at most one extra rounding per chunk boundary):
  scan, segmented_scan:  |err_i| <= (len_i + 1) * u * sum_{j in segment, j<=i} |x_j|
  segmented_sum, segment_sum_csr: segment_csr(reduce="sum")'s one reduction (the same bits for
                         the same segments), |err_r| <= (len_r + parts) * u * sum_{j in row r} |x_j|
"""
from __future__ import annotations

import sys

import numba
import numpy as np

from .._dtypes import result_dtype
from .._threading import guarded
from .._validate import as_flags, as_indptr, as_values, check_bool, check_overflow
from . import _seg_kernels as K
from . import _target
from . import segreduce as SR
from ._csr_input import check_indptr_order, long_segments
from ._io import like_input, needs_torch_op, to_numpy

__all__ = ["scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "compress", "compress_ind"]

#: elements per chunk below which fewer chunks are used (tests lower it to
#: exercise the multi-chunk paths on small inputs)
MIN_CHUNK = 1 << 14
#: chunks per thread
CHUNKS_PER_THREAD = 4

#: segmented_sum's AVX-512 kernel tests flags 64 at a time and only adds up
#: groups without a start when there is at most one start per this many
#: elements (measured: faster below ~2% flag density, slower above)
_SPARSE_STARTS = 64

#: segmented_sum's AVX2 kernel skips the flag-counting pass (packing each chunk's sums at a
#: provisional offset, then gathering them) below this flag density, estimated from a sample.
#: Measured at n = 1e8, 2 threads (Zen 3): flag pass 4 ms; gather 0.8 / 4.3 / 6.5 ms and the
#: kernel 1.5-3 ms slower at 1 / 5 / 10%, so it pays below ~2-3%. Tests set 0 or 2 to force a path.
_NOCOUNT_BELOW = 0.02

#: elements per super-block of the integer scan (each reduced, then scanned while it may
#: still be in the last-level cache; tests lower it to exercise the seams). Measured on a
#: 2-vCPU Zen 3 VM at n = 1e8: super-blocks of 1M/2M/4M/8M elements were 0.59/0.64/0.66/0.70x
#: of a copy against 0.73x for one block (two passes over x): there the reduction is not
#: faster from the L3 than from memory and each super-block costs two parallel launches
#: (~33 us each), so by default one block (up to 2**30 elements) is used.
_SCAN_SUPER = 1 << 30

#: elements per block of segment_sum_csr's short-row kernel (its prefix buffer stays in L1)
_CSR_BLOCK = 4096

#: kernel level override for tests (None: ``_target.level()``, i.e. MMVREF_SIMD or the best the
#: compile target has); tests set "portable" to run the portable twins on any CPU
_LEVEL = None

_I32 = np.iinfo(np.int32)
_I64 = np.iinfo(np.int64)
_RESULT_DTYPES = tuple(np.dtype(t) for t in ("int32", "int64", "float32", "float64"))


# ----------------------------------------------------------------------------- helpers

def _simd(family, rdt, xk):
    """The x86 kernel module of ``family`` (int8/16/32 values, int32 results) on the
    chosen path, or None for the portable kernels of ``_seg_kernels``."""
    if rdt != np.int32 or xk.dtype.itemsize > 4:
        return None
    fam = f"{family} (int8/16/32 -> int32)"
    if _target.path(fam, _LEVEL) == "portable":
        return None
    return _target.kernels(fam, _LEVEL)


def _chunks(n: int) -> np.ndarray:
    # one thread: one chunk (several would only cost the scans a reduction pass over the chunks
    # before the last; a Dask worker running the ops at one Numba thread per task is that case)
    T = numba.get_num_threads()
    c = max(1, min(T * CHUNKS_PER_THREAD if T > 1 else 1, n // MIN_CHUNK))
    return np.linspace(0, n, c + 1).astype(np.int64)


def _values(x, name="x"):
    x = as_values(to_numpy(x, name), name)
    return np.ascontiguousarray(x)


def _result_dtype(x, dtype, op):
    if dtype is None:
        return result_dtype(x.dtype)
    try:
        if not isinstance(dtype, (str, type, np.dtype)):
            raise TypeError
        rdt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: dtype must be one of int32, int64, float32, float64 (or None), "
                        f"got {dtype!r}") from None
    if rdt not in _RESULT_DTYPES:
        raise TypeError(f"{op}: dtype must be one of int32, int64, float32, float64, got {rdt}")
    if x.dtype.kind == "f" and rdt.kind != "f":
        raise TypeError(f"{op}: dtype={rdt} cannot hold a sum of {x.dtype} values; pass a float dtype")
    return rdt


def _kernel_input(x, rdt):
    """What the kernels read: the integers as given (int64 accumulation), floats in the result dtype."""
    if rdt.kind == "f":
        return np.ascontiguousarray(x, dtype=rdt)
    return x


def _flags(f, n, name):
    f = as_flags(to_numpy(f, name), n, name, check_values=False)
    f = np.ascontiguousarray(f)
    return f.view(np.uint8)


def _sampled_density(f, pieces=16, piece=4096):
    """The fraction of set flags in ``pieces`` evenly spread runs of ``piece`` flags (all of
    them when there are few): a speed hint only, never a result."""
    n = f.size
    if n <= pieces * piece:
        return np.count_nonzero(f) / max(n, 1)
    step = n // pieces
    return sum(np.count_nonzero(f[i * step:i * step + piece]) for i in range(pieces)) / (pieces * piece)


def _raise_bad_flags(bad, f, name):
    if bad.size and int(bad.max()) > 1:
        i = int(np.argmax(f > 1))
        raise ValueError(f"{name} must hold only 0 and 1 (segment starts); {name}[{i}] = {f[i]}")


def _overflow(op, rdt):
    return OverflowError(
        f"{op}: a result overflows {rdt}; pass overflow='wrap' for two's-complement wrap-around"
        + (", or dtype=np.int64" if rdt == np.int32 else ""))


def _narrowing(x, rdt) -> bool:
    """int64 values asked for int32 results: the kernels' int32 screens assume
    int8/16/32 values, so such calls run at int64 and are narrowed by ``_narrow``."""
    return rdt == np.int32 and x.dtype == np.int64


def _narrow(fn, op, overflow):
    """The int32 result of ``fn(np.int64)`` (the op at int64, exact or raising on
    an exact int64 overflow): OverflowError when an exact result leaves int32
    under overflow="raise"; else wrapped modulo 2**32 (exact modulo 2**64 words)."""
    try:
        out = fn(np.int64)
    except OverflowError:
        raise _overflow(op, np.dtype(np.int32)) from None  # outside int64, so outside int32
    if overflow == "raise" and out.size and (int(out.min()) < _I32.min or int(out.max()) > _I32.max):
        raise _overflow(op, np.dtype(np.int32))
    return out.astype(np.int32)


def _wrap(v, rdt):
    """A Python int wrapped to ``rdt`` (two's complement)."""
    bits = 8 * rdt.itemsize
    v = (int(v) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    return rdt.type(v)


def _int64_may_overflow(x) -> bool:
    """Sufficient test that no partial sum of x can leave int64: n * max|x| < 2**63."""
    if x.size == 0:
        return False
    m = max(abs(int(x.min())), abs(int(x.max())))
    return x.size * m > _I64.max


# ----------------------------------------------------------------------------- scan

@guarded
def _scan_1d(x, *, exclusive=False, dtype=None, overflow="raise", initial=0, into=None):
    """Inclusive (or exclusive) prefix sum of a 1-D array: z[i] = sum(x[:i+1]) (x[:i]).

    Parameters: x (1-D, int8/16/32/64 or fp16/32/64; numpy, array-like or torch
    CPU tensor), exclusive, dtype (result dtype override), overflow ("raise" or
    "wrap"). Returns an array of length len(x) (torch in -> torch out).
    Private (``mmvref.dask``): ``initial`` is added to every output, as the sum of
    terms before x (an integer is taken modulo 2**64, so only with overflow="wrap";
    the caller decides the overflow); ``into``, an array of len(x) and the result
    dtype, receives the result.
    """
    src = x
    x = _values(x)
    rdt = _result_dtype(x, dtype, "scan")
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    if initial and rdt.kind != "f" and overflow != "wrap":
        raise ValueError("scan: an integer initial value needs overflow='wrap'")
    if _narrowing(x, rdt):
        res = _narrow(lambda d: _scan_1d(x, exclusive=exclusive, dtype=d, overflow=overflow, initial=initial),
                      "scan", overflow)
        if into is not None:
            into[...] = res
            return into
        return like_input(res, src)
    n = x.size
    out = np.empty(n, dtype=rdt) if into is None else into
    if n == 0:
        return like_input(out, src)
    xk = _kernel_input(x, rdt)
    starts = _chunks(n)
    C = starts.size - 1
    if rdt.kind == "f":
        sums = np.zeros(C, dtype=rdt)
        K.chunk_sums(xk, starts[:-1], sums[:-1])  # the last chunk's sum is not needed
        offs = np.zeros(C, dtype=rdt)
        acc = rdt.type(initial)
        for c in range(C):
            offs[c] = acc
            acc = rdt.type(acc + sums[c])
        K.scan_float(xk, out, starts, offs, bool(exclusive))
        return like_input(out, src)
    check = overflow == "raise" and rdt == np.int32
    simd = _simd("scan", rdt, xk)
    kernel = simd.scan_int32 if simd is not None else K.scan_int
    # Reduce-then-scan per super-block of at most _SCAN_SUPER elements (the carry crosses
    # the seams): the scan could re-read a super-block's values from the cache the
    # reduction just filled (see _SCAN_SUPER for why one block is the default).
    nsb = -(-n // _SCAN_SUPER)
    bounds = np.linspace(0, n, nsb + 1).astype(np.int64)
    carry = np.zeros(1, dtype=np.int64)  # the prefix before the super-block (int64 words wrap)
    carry[0] = _wrap(initial, carry.dtype)
    sus_any = False
    for s in range(nsb):
        starts = bounds[s] + _chunks(int(bounds[s + 1] - bounds[s]))
        C = starts.size - 1
        offs = np.zeros(C + 1, dtype=np.int64)
        offs[0] = carry[0]
        # the sums of the chunks (the last one's only as the next super-block's carry)
        k = C if s < nsb - 1 else C - 1
        K.chunk_sums(xk, starts[:k + 1], offs[1:k + 1])
        np.cumsum(offs, out=offs)  # int64 words wrap; exactness is checked below
        carry[0] = offs[C]
        suspect = np.zeros(C, dtype=np.bool_)
        kernel(xk, out, starts, offs[:C], bool(exclusive), check, suspect)
        sus_any = sus_any or bool(suspect.any())
    if overflow == "raise":
        lim = _I32 if rdt == np.int32 else _I64
        if (rdt == np.int32 and sus_any) or (rdt == np.int64 and _int64_may_overflow(x)):
            if not K.exact_segscan_range(xk, np.zeros(n, np.uint8), bool(exclusive), lim.min, lim.max):
                raise _overflow("scan", rdt)
    return like_input(out, src)


# ----------------------------------------------------------------------------- segmented scan

@guarded
def _segmented_scan_1d(x, flags, *, exclusive=False, dtype=None, overflow="raise", into=None):
    """Segmented prefix sum (Problem 2.1): z[i] = x[i] if i == 0 or flags[i] else z[i-1] + x[i].

    ``flags`` (bool/int8/uint8, 0/1, same length) mark segment starts. With
    ``exclusive=True`` each segment's first output is 0 and z[i] sums the
    segment's elements before i. Returns an array of len(x) (``into``, when given: an array of
    len(x) and the result dtype that receives it).
    """
    src = x
    x = _values(x)
    f = _flags(flags, x.size, "flags")
    rdt = _result_dtype(x, dtype, "segmented_scan")
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    if _narrowing(x, rdt):
        return like_input(_narrow(lambda d: _segmented_scan_1d(x, f, exclusive=exclusive, dtype=d, overflow=overflow),
                                  "segmented_scan", overflow), src)
    n = x.size
    out = np.empty(n, dtype=rdt) if into is None else into
    if n == 0:
        return like_input(out, src)
    xk = _kernel_input(x, rdt)
    starts = _chunks(n)
    C = starts.size - 1
    has_flag = np.zeros(C, dtype=np.bool_)
    bad = np.zeros(C, dtype=np.uint8)
    ex = bool(exclusive)
    if rdt.kind == "f":
        tails = np.zeros(C, dtype=rdt)
        K.segscan_float(xk, f, out, starts, ex, tails, has_flag, bad)
        _raise_bad_flags(bad, f, "flags")
        carry = np.zeros(C, dtype=rdt)
        for c in range(1, C):
            carry[c] = tails[c - 1] if has_flag[c - 1] else rdt.type(carry[c - 1] + tails[c - 1])
        K.fix_first_segment_float(f, out, starts, carry)
        return like_input(out, src)
    tails = np.zeros(C, dtype=np.int64)
    suspect = np.zeros(C, dtype=np.bool_)
    check = overflow == "raise" and rdt == np.int32
    simd = _simd("segmented_scan", rdt, xk)
    if simd is not None:
        simd.segscan_int32(xk, f, out, starts, ex, check, suspect, tails, has_flag, bad)
    else:
        K.segscan_int(xk, f, out, starts, ex, check, suspect, tails, has_flag, bad)
    _raise_bad_flags(bad, f, "flags")
    carry = np.zeros(C, dtype=np.int64)
    for c in range(1, C):  # int64 words: wrap like the kernels (exact modulo 2**64)
        carry[c] = tails[c - 1] if has_flag[c - 1] else _wrap(int(carry[c - 1]) + int(tails[c - 1]), carry.dtype)
    mins = np.zeros(C, dtype=np.int64)
    maxs = np.zeros(C, dtype=np.int64)
    K.fix_first_segment_int(xk, f, out, starts, carry, ex, mins, maxs)
    if overflow == "raise":
        lim = _I32 if rdt == np.int32 else _I64
        if rdt == np.int32:
            maybe = suspect.any() or mins.min() < lim.min or maxs.max() > lim.max
        else:
            maybe = _int64_may_overflow(x)
        if maybe and not K.exact_segscan_range(xk, f, ex, lim.min, lim.max):
            raise _overflow("segmented_scan", rdt)
    return like_input(out, src)


# ----------------------------------------------------------------------------- segmented sum

@guarded
def _segmented_sum_1d(x, flags, *, dtype=None, overflow="raise", into=None):
    """One sum per segment, in order. ``flags`` mark segment starts (position 0
    always starts one), so there are 1 + (set flags after position 0) segments
    for len(x) >= 1, and none for len(x) == 0.

    ``into``: None, or a function of the number of segments giving the array (of the result
    dtype) to write the sums into, or None for a new one.

    Integers: running sums in int64 (exact), written as int32/int64.
    Floats: each segment accumulated directly in index order (no prefix
    differences), so a segment's error scales with its own magnitude; a
    segment crossing chunk boundaries gets one extra rounding per boundary.
    """
    src = x
    x = _values(x)
    f = _flags(flags, x.size, "flags")
    rdt = _result_dtype(x, dtype, "segmented_sum")
    check_overflow(overflow)
    if _narrowing(x, rdt):
        return like_input(_narrow(lambda d: _segmented_sum_1d(x, f, dtype=d, overflow=overflow),
                                  "segmented_sum", overflow), src)
    n = x.size
    if n == 0:
        return like_input(np.empty(0, dtype=rdt), src)
    xk = _kernel_input(x, rdt)
    starts = _chunks(n)
    C = starts.size - 1
    counts = np.zeros(C, dtype=np.int64)
    bad = np.zeros(C, dtype=np.uint8)
    bases = np.zeros(C, dtype=np.int64)
    is_int = rdt.kind != "f"
    simd = _simd("segmented_sum", rdt, xk) if is_int else None
    if simd is not None and hasattr(simd, "segsum_int32_nocount") and _sampled_density(f) < _NOCOUNT_BELOW:
        # no flag-counting pass: each chunk packs its sums at a provisional base (its own
        # start), counting and OR-ing the flags as it goes; then the chunks' slots are
        # gathered into the result in parallel (see _NOCOUNT_BELOW)
        heads = np.zeros(C, dtype=np.int64)
        tails = np.zeros(C, dtype=np.int64)
        suspect = np.zeros(C, dtype=np.bool_)
        check = overflow == "raise"
        scratch = np.empty(n + 1, dtype=rdt)
        simd.segsum_int32_nocount(xk, f, starts, scratch, heads, tails, counts, bad, check, suspect,
                                  _SPARSE_STARTS)
        _raise_bad_flags(bad, f, "flags")
        np.cumsum(counts[:-1], out=bases[1:])
        nseg = 1 + int(counts.sum())
        out = _segsum_out(into, nseg, rdt)
        simd.gather_slots(scratch, starts, counts, bases, out)
        del scratch
        heads_l, tails_l = [int(v) for v in heads], [int(v) for v in tails]
        return _segsum_join(x, xk, f, src, rdt, overflow, out, starts, counts, bases, nseg,
                            heads_l, tails_l, suspect)
    K.flag_stats(f, starts, counts, bad)
    _raise_bad_flags(bad, f, "flags")
    np.cumsum(counts[:-1], out=bases[1:])
    nseg = 1 + int(counts.sum())
    out = _segsum_out(into, nseg, rdt)
    if is_int:
        heads = np.zeros(C, dtype=np.int64)
        tails = np.zeros(C, dtype=np.int64)
        suspect = np.zeros(C, dtype=np.bool_)
        check = overflow == "raise" and rdt == np.int32
        if simd is not None:
            # every density: one compressed store per segment start, no branch per flag
            simd.segsum_int32(xk, f, starts, bases, out, heads, tails, check, suspect, _SPARSE_STARTS * nseg < n)
        elif 64 * nseg < n:  # long segments: find flags 8 at a time, reduce each segment at SIMD width
            mins = np.zeros(C, dtype=np.int64)
            maxs = np.zeros(C, dtype=np.int64)
            # flags as words (the byte order of _next_flag's trailing-zero count is little-endian)
            words_ok = f.ctypes.data % 8 == 0 and sys.byteorder == "little"
            f64 = f[: n // 8 * 8].view(np.uint64) if words_ok else np.zeros(0, np.uint64)
            K.segsum_int_sparse(xk, f, f64, starts, bases, out, heads, tails, mins, maxs)
            suspect[:] = check and (mins.min() < _I32.min or maxs.max() > _I32.max)
        else:
            K.segsum_int(xk, f, starts, bases, out, heads, tails, check, suspect)
        heads_l, tails_l = [int(v) for v in heads], [int(v) for v in tails]
    else:
        heads = np.zeros(C, dtype=rdt)
        tails = np.zeros(C, dtype=rdt)
        K.segsum_float(xk, f, starts, bases, out, heads, tails, rdt.type(0))
        heads_l, tails_l = list(heads), list(tails)
    return _segsum_join(x, xk, f, src, rdt, overflow, out, starts, counts, bases, nseg,
                        heads_l, tails_l, suspect if is_int else None)


def _segsum_out(into, nseg, rdt):
    buf = into(nseg) if into is not None else None
    return np.empty(nseg, dtype=rdt) if buf is None else buf


def _segsum_join(x, xk, f, src, rdt, overflow, out, starts, counts, bases, nseg, heads_l, tails_l, suspect):
    """segmented_sum's last step: the chunks' heads and tails joined into the sums of the
    segments that cross chunk boundaries, the overflow verdict, the int words wrapped."""
    is_int = rdt.kind != "f"
    C = starts.size - 1
    # Join segments across chunks, in order: a chunk's head continues the
    # segment running in from the left; its last segment may run on.
    pending = 0 if is_int else rdt.type(0)
    finished = []
    for c in range(C):
        if starts[c + 1] == starts[c]:
            continue
        pending = pending + heads_l[c]
        if counts[c] > 0:
            finished.append((int(bases[c]), pending))
            pending = tails_l[c]
    finished.append((nseg - 1, pending))
    if not is_int:
        for i, v in finished:
            out[i] = v
        return like_input(out, src)
    if overflow == "raise":
        if rdt == np.int64:
            maybe = _int64_may_overflow(x)  # int64 words are exact only modulo 2**64
        else:
            vals = [v for _, v in finished]
            maybe = suspect.any() or min(vals) < _I32.min or max(vals) > _I32.max
        if maybe and not K.exact_segsum_range(xk, f, np.iinfo(rdt).min, np.iinfo(rdt).max):
            raise _overflow("segmented_sum", rdt)
    for i, v in finished:
        out[i] = _wrap(v, rdt)
    return like_input(out, src)


# ----------------------------------------------------------------------------- CSR segment sums

@guarded
def _segment_sum_csr_1d(x, indptr, *, dtype=None, overflow="raise", into=None):
    """Sums of x over the segments x[indptr[r]:indptr[r+1]]; empty segments give 0.

    ``indptr``: integers, indptr[0] == 0, non-decreasing, indptr[-1] == len(x).
    Returns an array of len(indptr) - 1 (``into``, when given: an array of that length and the
    result dtype that receives it). Rows are split among threads by element count; a row longer
    than a thread's share is itself split.
    """
    src = x
    x = _values(x)
    ip = np.ascontiguousarray(as_indptr(to_numpy(indptr, "indptr"), "indptr", nnz=x.size, check_order=False))
    rdt = _result_dtype(x, dtype, "segment_sum_csr")
    check_overflow(overflow)
    if _narrowing(x, rdt):
        return like_input(_narrow(lambda d: _segment_sum_csr_1d(x, ip, dtype=d, overflow=overflow),
                                  "segment_sum_csr", overflow), src)
    m = ip.size - 1
    n = x.size
    T = numba.get_num_threads()
    share = max(n // T, 1 << 16)
    if m == 0 or n == 0:
        check_indptr_order(ip)
        if into is not None:
            into[...] = 0
            return into
        return like_input(np.zeros(m, dtype=rdt), src)
    out = np.empty(m, dtype=rdt) if into is None else into  # every row is written below
    xk = _kernel_input(x, rdt)
    tasks = max(1, min(T * 16, m, n // 1024 + 1))
    # int64 queries: float ones would make numpy cast (copy) all of ip to float64
    cuts = np.searchsorted(ip, np.linspace(0, n, tasks + 1)[1:-1].astype(np.int64), side="right") - 1
    rstarts = np.unique(np.concatenate([[0], np.clip(cuts, 0, m), [m]])).astype(np.int64)
    long_rows = long_segments(ip, share)
    short_path = rdt.kind != "f" and n < 32 * m and long_rows.size == 0
    if not short_path:  # the other kernels trust the order: check it first (one parallel pass)
        check_indptr_order(ip)
    is_int = rdt.kind != "f"
    if is_int:
        mins = np.zeros(rstarts.size - 1, dtype=np.int64)
        maxs = np.zeros(rstarts.size - 1, dtype=np.int64)
        if short_path:  # short rows: prefix differences; the kernel checks the order itself
            bad = np.full(rstarts.size - 1, -1, np.int64)
            suspect = np.zeros(rstarts.size - 1, np.bool_)
            # int32 words when they can be exact: sixteen lanes per step instead of eight
            words = np.int32 if rdt == np.int32 and xk.dtype.itemsize <= 4 else np.int64
            bufs = np.empty((rstarts.size - 1, _CSR_BLOCK), words)
            K.csr_sums_int_short(xk, ip, rstarts, out, mins, maxs, bad, bufs, suspect)
            if suspect.any() and not (bad >= 0).any():  # a row might not fit int32: int64 words
                bufs = np.empty((rstarts.size - 1, _CSR_BLOCK), np.int64)
                K.csr_sums_int_short(xk, ip, rstarts, out, mins, maxs, bad, bufs, suspect)
            if (bad >= 0).any():
                check_indptr_order(ip)  # names the first offending position
                raise ValueError("indptr must be non-decreasing")
        else:
            K.csr_sums_int(xk, ip, rstarts, share, out, mins, maxs)
        lo_v, hi_v = int(mins.min()), int(maxs.max())
    else:
        K.csr_sums_float(xk, ip, rstarts, share, out, rdt.type(0))
    for r in long_rows:  # a long row's elements are split across threads
        a, b = int(ip[r]), int(ip[r + 1])
        parts = np.linspace(a, b, T * 4 + 1).astype(np.int64)
        if is_int:
            ps = np.zeros(parts.size - 1, dtype=np.int64)
            K.chunk_sums(xk, parts, ps)
            v = int(ps.sum())  # exact for int8/16/32 input; modulo 2**64 for int64
            lo_v, hi_v = min(lo_v, v), max(hi_v, v)
            out[r] = _wrap(v, rdt)
        else:
            ps = np.zeros(parts.size - 1, dtype=rdt)
            K.range_sums_float(xk, parts, ps)
            out[r] = ps.sum(dtype=rdt)
    if is_int and overflow == "raise":
        lim = _I32 if rdt == np.int32 else _I64
        if rdt == np.int64:
            if _int64_may_overflow(x) and not K.exact_csr_range(xk, ip, lim.min, lim.max):
                raise _overflow("segment_sum_csr", rdt)
        elif lo_v < lim.min or hi_v > lim.max:
            raise _overflow("segment_sum_csr", rdt)
    return like_input(out, src)


# ----------------------------------------------------------------------------- compress

def _compress_bases(x, mask):
    """(values, mask as uint8, chunk starts, output base of every chunk + the total):
    the mask validated (0/1 of bool/int8/uint8, len(x) entries) on the way."""
    x = _values(x)
    m = _flags(mask, x.size, "mask")
    n = x.size
    if n == 0:
        return x, m, None, None
    starts = _chunks(n)
    C = starts.size - 1
    counts = np.zeros(C, dtype=np.int64)
    bad = np.zeros(C, dtype=np.uint8)
    K.flag_stats(m, starts, counts, bad)
    _raise_bad_flags(bad, m, "mask")
    counts[0] += m[0]  # flag_stats does not count position 0; compress does
    bases = np.zeros(C + 1, dtype=np.int64)
    np.cumsum(counts, out=bases[1:])
    return x, m, starts, bases


@guarded
def compress(x, mask):
    """The entries of ``x`` where ``mask`` is 1, in order (COMPRESS of §2; like
    ``np.compress`` / ``torch.masked_select``). The dtype of ``x`` is kept."""
    src = x
    x, m, starts, bases = _compress_bases(x, mask)
    if starts is None:
        return like_input(x[:0].copy(), src)
    total = int(bases[-1])
    # the kernel moves bits: view the values as unsigned words of their size
    # (so fp16, which numba cannot load, and NaN payloads copy exactly)
    bits = np.dtype(f"u{x.dtype.itemsize}")
    buf = np.empty(total + 1, dtype=x.dtype)
    xb, bb = x.view(bits), buf.view(bits)
    K.compress_kernel(xb, m, starts, bases, bb)
    K.compress_repair(xb, m, starts, bases, bb)
    return like_input(buf[:total], src)


@guarded
def compress_ind(x, mask):
    """``compress`` -> (x[mask == 1], their positions int64), in order (COMPRESS
    of §2 applied to the values and to the positions; like tcuscan's
    run_compress_ind, or ``(x[mask], np.flatnonzero(mask))``). The dtype of
    ``x`` is kept; empty input or an all-zero mask gives two empty arrays."""
    src = x
    x, m, starts, bases = _compress_bases(x, mask)
    if starts is None:
        return like_input(x[:0].copy(), src), like_input(np.zeros(0, np.int64), src)
    total = int(bases[-1])
    bits = np.dtype(f"u{x.dtype.itemsize}")
    buf = np.empty(total + 1, dtype=x.dtype)
    idx = np.empty(total + 1, dtype=np.int64)
    xb, bb = x.view(bits), buf.view(bits)
    K.compress_ind_kernel(xb, m, starts, bases, bb, idx)
    K.compress_ind_repair(xb, m, starts, bases, bb, idx)
    return like_input(buf[:total], src), like_input(idx[:total], src)


# ----------------------------------------------------------------------------- public entry points
# One boundary for the four ops above: torch tensors that need autograd (or are being traced) go
# to the torch custom ops; N-d inputs (and 1-D ones asking for another reduction) to ``segreduce``;
# 1-D inputs to the 1-D kernels; ``dtype=`` beyond the kernels' four result dtypes and ``out=``
# are settled here, once.

def _computed(fn, cdt, fin, op):
    """fn() at the compute dtype; an overflow there is an overflow of the narrower result dtype."""
    try:
        return fn()
    except OverflowError:
        if fin == cdt:
            raise
        raise SR._overflow(op, fin) from None


@guarded
def scan(x, *, axis=None, exclusive=False, dtype=None, overflow="raise", out=None, dim=None):
    """Inclusive (or exclusive) prefix sums along ``axis``, like ``np.cumsum(x, axis)``:
    z[..., i, ...] = sum of x[..., :i+1, ...] (``exclusive``: x[..., :i, ...]).

    Parameters: x (any rank, int8/16/32/64 or fp16/32/64; numpy, array-like or
    torch CPU tensor); axis (None: x flattened, as np.cumsum); exclusive; dtype
    (result dtype; default the project rule); overflow ("raise" or "wrap"); out
    (an array of the result's shape and dtype to write into). A 1-D scan is
    split among threads by chunks; rows (the scanned axis last) are scanned in
    parallel; other axes scan each (batch, feature) column, features inside the
    kernel. torch in -> torch out (with autograd when x requires grad).
    """
    axis = SR.axis_or_dim(axis, dim, None)
    if needs_torch_op(x):
        from .. import _torch_ops

        return _torch_ops.scan(x, axis=axis, exclusive=exclusive, dtype=dtype, overflow=overflow, out=out)
    src = x
    x = SR.values_nd(x, "x")
    if axis is None:
        x = x.reshape(-1)
        axis = 0
    axis = SR.norm_axis(axis, x.ndim)
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    B = int(np.prod(x.shape[:axis], dtype=np.int64))
    F = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    if B == 1 and F == 1:
        cdt, fin = SR.dtypes(x, dtype, "scan")
        buf = SR.out_buffer(out, x.shape, cdt, fin, x)  # the kernels write there when they can
        res = _computed(lambda: _scan_1d(x.reshape(-1), exclusive=exclusive, dtype=cdt, overflow=overflow,
                                         into=None if buf is None else buf.reshape(-1)),
                        cdt, fin, "scan").reshape(x.shape)
        return SR.deliver(SR.finish(res, None, cdt, fin, overflow, "scan"), out, src)
    if F == 1 and x.shape[axis]:
        from .scanfamily import _batched_scan

        cdt, fin = SR.dtypes(x, dtype, "scan")
        buf = SR.out_buffer(out, x.shape, cdt, fin, x)
        rows = np.ascontiguousarray(x).reshape(B, x.shape[axis])
        res = _computed(lambda: _batched_scan(rows, exclusive, cdt, overflow,
                                              into=None if buf is None else buf.reshape(rows.shape)),
                        cdt, fin, "scan").reshape(x.shape)
        return SR.deliver(SR.finish(res, None, cdt, fin, overflow, "scan"), out, src)
    return SR.nd_scan(src, x, None, axis, exclusive, dtype, overflow, out, "scan")


@guarded
def segmented_scan(x, flags, *, axis=0, exclusive=False, dtype=None, overflow="raise", out=None, dim=None):
    """Segmented prefix sums along ``axis`` (Problem 2.1): z[i] = x[i] where i == 0 or
    flags[i], else z[i-1] + x[i], for every (batch, feature) column.

    ``flags`` (1-D, bool/int8/uint8 holding 0/1, length x.shape[axis]) mark segment
    starts. With ``exclusive=True`` each segment's first output is 0 and z[i] sums
    the segment's elements before i. dtype / overflow / out: as ``scan``.
    """
    axis = SR.axis_or_dim(axis, dim, 0)
    if needs_torch_op(x):
        from .. import _torch_ops

        return _torch_ops.segmented_scan(x, flags, axis=axis, exclusive=exclusive, dtype=dtype,
                                         overflow=overflow, out=out)
    src = x
    x = SR.values_nd(x, "x")
    axis = SR.norm_axis(axis, x.ndim)
    check_overflow(overflow)
    if x.ndim == 1:
        cdt, fin = SR.dtypes(x, dtype, "segmented_scan")
        buf = SR.out_buffer(out, x.shape, cdt, fin, x)  # the kernels write there when they can
        res = _computed(lambda: _segmented_scan_1d(x, flags, exclusive=exclusive, dtype=cdt, overflow=overflow,
                                                   into=buf), cdt, fin, "segmented_scan")
        return SR.deliver(SR.finish(res, None, cdt, fin, overflow, "segmented_scan"), out, src)
    return SR.nd_scan(src, x, flags, axis, exclusive, dtype, overflow, out, "segmented_scan")


@guarded
def segmented_sum(x, flags, *, axis=0, reduce="sum", return_arg=False, dtype=None, overflow="raise", out=None,
                  dim=None):
    """One reduction per segment along ``axis``, in order; ``flags`` (1-D 0/1, length
    x.shape[axis]) mark segment starts (position 0 always starts one), so there are
    1 + (set flags after position 0) segments for a non-empty axis, and none for an
    empty one.

    reduce: "sum" (default), "mean", "min", "max", "prod"; ``return_arg`` (min/max)
    also returns the int64 positions chosen. Semantics of the reductions, empty
    input, NaN and dtypes: ``mmvref._fast.segreduce``. Integer sums are exact;
    1-D float sums accumulate each segment in index order (a segment crossing a
    chunk boundary gets one extra rounding per boundary).
    """
    axis = SR.axis_or_dim(axis, dim, 0)
    if needs_torch_op(x):
        from .. import _torch_ops

        return _torch_ops.segmented_sum(x, flags, axis=axis, reduce=reduce, return_arg=return_arg, dtype=dtype,
                                        overflow=overflow, out=out)
    src = x
    x = SR.values_nd(x, "x")
    if x.ndim == 1 and SR.reduce_code(reduce) == SR.R.SUM and not return_arg and x.dtype.kind != "f":
        # one integer column: the 1-D kernels (exact, so the same bits as segment_csr's). Floats take
        # segment_csr's reduction over the starts' offsets: one result, one rounding, one code path.
        SR.norm_axis(axis, 1)
        cdt, fin = SR.dtypes(x, dtype, "segmented_sum")
        check_overflow(overflow)
        def into(nseg):  # the caller's out, when the kernels can write it as it is
            return SR.out_buffer(out, (nseg,), cdt, fin, x)

        res = _computed(lambda: _segmented_sum_1d(x, flags, dtype=cdt, overflow=overflow, into=into), cdt, fin,
                        "segmented_sum")
        return SR.deliver(SR.finish(res, None, cdt, fin, overflow, "segmented_sum"), out, src)
    return SR.nd_segmented_sum(src, x, flags, axis, reduce, return_arg, dtype, overflow, out)


@guarded
def segment_sum_csr(x, indptr, *, axis=0, dtype=None, overflow="raise", out=None, dim=None):
    """Sums of x over the segments indptr[r]:indptr[r+1] along ``axis``; empty segments give 0.

    ``indptr``: integers, indptr[0] == 0, non-decreasing, indptr[-1] == x.shape[axis].
    Returns x.shape with the axis replaced by len(indptr) - 1. Rows are split among
    threads by element count; a row longer than a thread's share is itself split.
    ``segment_csr(x, indptr, reduce=...)`` takes the other reductions.
    """
    axis = SR.axis_or_dim(axis, dim, 0)
    if needs_torch_op(x):
        from .. import _torch_ops

        return _torch_ops.segment_sum_csr(x, indptr, axis=axis, dtype=dtype, overflow=overflow, out=out)
    src = x
    x = SR.values_nd(x, "x")
    axis = SR.norm_axis(axis, x.ndim)
    check_overflow(overflow)
    # segment_csr(reduce="sum")'s one code path (the 1-D integer kernels are its one-column case)
    ip = as_indptr(to_numpy(indptr, "indptr"), "indptr", nnz=x.shape[axis], check_order=False)
    return SR.reduce_nd(src, x, axis, ip, np.zeros(0, np.int64), "sum", False, dtype, overflow, out,
                        "segment_sum_csr", ip.size - 1, order_checked=False)
