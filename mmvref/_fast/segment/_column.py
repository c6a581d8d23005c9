"""One column: the drivers of the 1-D kernels, which the segment family's dispatch (``_arrays``)
takes for a single column (B == F == 1 of ``[B, E, F]``) and ``scan_rows`` for rows (F == 1).

- ``_scan_1d``, ``_segmented_scan_1d``: scans of any value dtype, split among threads by chunks
  (each chunk scanned, then its carry propagated);
- ``_segmented_sum_1d`` (flags) and ``_segment_sum_csr_1d`` (offsets): integer sums, exact
  (int8/16/32 values in int32 or int64 words, int64 in int64 words), the overflow decided exactly.
  Float sums are not here: they are ``segment_csr``'s one reduction (``_nd``), so a float
  ``segmented_sum`` and ``segment_csr`` over the same segments give the same bits.

Kernels: the x86 ones of the chosen path (``_target.FAMILIES``: ``_avx512`` / ``_avx2`` for
int8/16/32 -> int32) or the portable ``_portable``. Arguments arrive validated, at a compute dtype
(int32, int64, float32, float64; ``_policy``); int64 values asked for int32 results run at int64
and are narrowed.

Float error bounds (u = unit roundoff of the result dtype): a chunk's first segment gets the
previous chunk's carry added at the end, so at most one extra rounding per chunk boundary:
  scan, segmented_scan:  |err_i| <= (len_i + 1) * u * sum_{j in segment, j<=i} |x_j|
"""
from __future__ import annotations

import sys

import numba
import numpy as np

from ..._threading import guarded
from ..._validate import as_flags, as_indptr, as_values, check_bool, check_overflow, to_numpy
from .. import _target
from .._csr_input import check_indptr_order, long_segments
from .._policy import kernel_result_dtype, like_input, narrow, narrowing, overflow_error, wrap_int
from .._variants import threads_pay
from . import _portable as K

__all__ = ["scan_rows"]

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


# ----------------------------------------------------------------------------- helpers

def _simd(family, rdt, xk):
    """The x86 kernel module of ``family`` (int8/16/32 values, int32 results) on the
    chosen path, or None for the portable kernels of ``_seg_kernels``. Its kernels run the chunks
    on threads; each has a serial twin (``*_serial``) for one chunk, the same code without the
    parfor, whose first call compiles in about half the time (small inputs, one thread)."""
    if rdt != np.int32 or xk.dtype.itemsize > 4:
        return None
    fam = f"{family} (int8/16/32 -> int32)"
    if _target.path(fam, _LEVEL) == "portable":
        return None
    return _target.kernels(fam, _LEVEL)


def _chunks(n: int) -> np.ndarray:
    # one thread: one chunk (several would only cost the scans a reduction pass over the chunks
    # before the last; a Dask worker running the ops at one Numba thread per task is that case)
    if n < 2 * MIN_CHUNK:  # one chunk for any thread count (asking Numba for it costs 1.6 us)
        return np.array([0, n], dtype=np.int64)
    T = numba.get_num_threads()
    c = max(1, min(T * CHUNKS_PER_THREAD if T > 1 else 1, n // MIN_CHUNK))
    if c == 1:  # (np.linspace costs 5-15 us: a tenth of a small scan's call)
        return np.array([0, n], dtype=np.int64)
    return np.linspace(0, n, c + 1).astype(np.int64)


def _values(x, name="x"):
    x = as_values(to_numpy(x, name), name)
    return np.ascontiguousarray(x)


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
    rdt = kernel_result_dtype(x, dtype, "scan")
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    if initial and rdt.kind != "f" and overflow != "wrap":
        raise ValueError("scan: an integer initial value needs overflow='wrap'")
    if narrowing(x, rdt):
        res = narrow(lambda d: _scan_1d(x, exclusive=exclusive, dtype=d, overflow=overflow, initial=initial),
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
        if C > 1:  # the last chunk's sum is not needed (one chunk: none, and no parallel launch)
            K.chunk_sums(xk, starts[:-1], sums[:-1])
        offs = np.zeros(C, dtype=rdt)
        acc = rdt.type(initial)
        for c in range(C):
            offs[c] = acc
            acc = rdt.type(acc + sums[c])
        K.scan_float(xk, out, starts, offs, bool(exclusive))
        return like_input(out, src)
    check = overflow == "raise" and rdt == np.int32
    simd = _simd("scan", rdt, xk)
    # (one chunk, the kernel for several), the x86 one's serial twin for one chunk (see ``_simd``)
    kernels = (simd.scan_int32_serial, simd.scan_int32) if simd is not None else (K.scan_int, K.scan_int)
    # Reduce-then-scan per super-block of at most _SCAN_SUPER elements (the carry crosses
    # the seams): the scan could re-read a super-block's values from the cache the
    # reduction just filled (see _SCAN_SUPER for why one block is the default).
    nsb = -(-n // _SCAN_SUPER)
    bounds = np.array([0, n], dtype=np.int64) if nsb == 1 else np.linspace(0, n, nsb + 1).astype(np.int64)
    carry = np.zeros(1, dtype=np.int64)  # the prefix before the super-block (int64 words wrap)
    carry[0] = wrap_int(initial, carry.dtype)
    sus_any = False
    for s in range(nsb):
        starts = bounds[s] + _chunks(int(bounds[s + 1] - bounds[s]))
        C = starts.size - 1
        offs = np.zeros(C + 1, dtype=np.int64)
        offs[0] = carry[0]
        # the sums of the chunks (the last one's only as the next super-block's carry)
        k = C if s < nsb - 1 else C - 1
        if k:  # (one chunk: none to sum, and no parallel launch for nothing)
            K.chunk_sums(xk, starts[:k + 1], offs[1:k + 1])
            np.cumsum(offs, out=offs)  # int64 words wrap; exactness is checked below
        else:  # (no sums: every offset is the carry; np.cumsum of two words costs 2.5 us)
            offs[1:] = offs[0]
        carry[0] = offs[C]
        suspect = np.zeros(C, dtype=np.bool_)
        kernels[C > 1](xk, out, starts, offs[:C], bool(exclusive), check, suspect)
        sus_any = sus_any or bool(suspect[0] if C == 1 else suspect.any())
    if overflow == "raise":
        lim = _I32 if rdt == np.int32 else _I64
        if (rdt == np.int32 and sus_any) or (rdt == np.int64 and _int64_may_overflow(x)):
            if not K.exact_segscan_range(xk, np.zeros(n, np.uint8), bool(exclusive), lim.min, lim.max):
                raise overflow_error("scan", rdt)
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
    rdt = kernel_result_dtype(x, dtype, "segmented_scan")
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    if narrowing(x, rdt):
        return like_input(narrow(lambda d: _segmented_scan_1d(x, f, exclusive=exclusive, dtype=d, overflow=overflow),
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
        if C > 1:  # (one chunk: no carry to add, and no parallel launch for nothing: 20-30 us a call)
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
        segscan = simd.segscan_int32 if C > 1 else simd.segscan_int32_serial
        segscan(xk, f, out, starts, ex, check, suspect, tails, has_flag, bad)
    else:
        K.segscan_int(xk, f, out, starts, ex, check, suspect, tails, has_flag, bad)
    _raise_bad_flags(bad, f, "flags")
    carry = np.zeros(C, dtype=np.int64)
    for c in range(1, C):  # int64 words: wrap like the kernels (exact modulo 2**64)
        carry[c] = tails[c - 1] if has_flag[c - 1] else wrap_int(int(carry[c - 1]) + int(tails[c - 1]), carry.dtype)
    mins = np.zeros(C, dtype=np.int64)
    maxs = np.zeros(C, dtype=np.int64)
    if C > 1:  # (chunk 0 has no carry: the kernel skips it, and one chunk needs no launch)
        K.fix_first_segment_int(xk, f, out, starts, carry, ex, mins, maxs)
    if overflow == "raise":
        lim = _I32 if rdt == np.int32 else _I64
        if rdt == np.int32:
            maybe = suspect.any() or mins.min() < lim.min or maxs.max() > lim.max
        else:
            maybe = _int64_may_overflow(x)
        if maybe and not K.exact_segscan_range(xk, f, ex, lim.min, lim.max):
            raise overflow_error("segmented_scan", rdt)
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
    rdt = kernel_result_dtype(x, dtype, "segmented_sum")
    check_overflow(overflow)
    if narrowing(x, rdt):
        return like_input(narrow(lambda d: _segmented_sum_1d(x, f, dtype=d, overflow=overflow),
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
    if rdt.kind == "f":  # floats: segment_csr's reduction over the starts' offsets (``_arrays``)
        raise TypeError(f"_segmented_sum_1d sums integers; got result dtype {rdt}")
    simd = _simd("segmented_sum", rdt, xk)
    if simd is not None and hasattr(simd, "segsum_int32_nocount") and _sampled_density(f) < _NOCOUNT_BELOW:
        # no flag-counting pass: each chunk packs its sums at a provisional base (its own
        # start), counting and OR-ing the flags as it goes; then the chunks' slots are
        # gathered into the result in parallel (see _NOCOUNT_BELOW)
        heads = np.zeros(C, dtype=np.int64)
        tails = np.zeros(C, dtype=np.int64)
        suspect = np.zeros(C, dtype=np.bool_)
        check = overflow == "raise"
        scratch = np.empty(n + 1, dtype=rdt)
        nocount = simd.segsum_int32_nocount if C > 1 else simd.segsum_int32_nocount_serial
        nocount(xk, f, starts, scratch, heads, tails, counts, bad, check, suspect, _SPARSE_STARTS)
        _raise_bad_flags(bad, f, "flags")
        np.cumsum(counts[:-1], out=bases[1:])
        nseg = 1 + int(counts.sum())
        out = _segsum_out(into, nseg, rdt)
        if C > 1:
            simd.gather_slots(scratch, starts, counts, bases, out)
        else:  # one chunk: its slots move by a copy (a parallel launch costs 20-30 us here)
            out[1:1 + counts[0]] = scratch[1:1 + counts[0]]
        del scratch
        heads_l, tails_l = [int(v) for v in heads], [int(v) for v in tails]
        return _segsum_join(x, xk, f, src, rdt, overflow, out, starts, counts, bases, nseg,
                            heads_l, tails_l, suspect)
    K.flag_stats(f, starts, counts, bad)
    _raise_bad_flags(bad, f, "flags")
    np.cumsum(counts[:-1], out=bases[1:])
    nseg = 1 + int(counts.sum())
    out = _segsum_out(into, nseg, rdt)
    heads = np.zeros(C, dtype=np.int64)
    tails = np.zeros(C, dtype=np.int64)
    suspect = np.zeros(C, dtype=np.bool_)
    check = overflow == "raise" and rdt == np.int32
    if simd is not None:
        # every density: one compressed store per segment start, no branch per flag
        segsum = simd.segsum_int32 if C > 1 else simd.segsum_int32_serial
        segsum(xk, f, starts, bases, out, heads, tails, check, suspect, _SPARSE_STARTS * nseg < n)
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
    return _segsum_join(x, xk, f, src, rdt, overflow, out, starts, counts, bases, nseg, heads_l, tails_l, suspect)


def _segsum_out(into, nseg, rdt):
    buf = into(nseg) if into is not None else None
    return np.empty(nseg, dtype=rdt) if buf is None else buf


def _segsum_join(x, xk, f, src, rdt, overflow, out, starts, counts, bases, nseg, heads_l, tails_l, suspect):
    """segmented_sum's last step: the chunks' heads and tails joined into the sums of the
    segments that cross chunk boundaries, the overflow verdict, the int words wrapped."""
    C = starts.size - 1
    # Join segments across chunks, in order: a chunk's head continues the
    # segment running in from the left; its last segment may run on.
    pending = 0
    finished = []
    for c in range(C):
        if starts[c + 1] == starts[c]:
            continue
        pending = pending + heads_l[c]
        if counts[c] > 0:
            finished.append((int(bases[c]), pending))
            pending = tails_l[c]
    finished.append((nseg - 1, pending))
    if overflow == "raise":
        if rdt == np.int64:
            maybe = _int64_may_overflow(x)  # int64 words are exact only modulo 2**64
        else:
            vals = [v for _, v in finished]
            maybe = suspect.any() or min(vals) < _I32.min or max(vals) > _I32.max
        if maybe and not K.exact_segsum_range(xk, f, np.iinfo(rdt).min, np.iinfo(rdt).max):
            raise overflow_error("segmented_sum", rdt)
    for i, v in finished:
        out[i] = wrap_int(v, rdt)
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
    rdt = kernel_result_dtype(x, dtype, "segment_sum_csr")
    check_overflow(overflow)
    if narrowing(x, rdt):
        return like_input(narrow(lambda d: _segment_sum_csr_1d(x, ip, dtype=d, overflow=overflow),
                                  "segment_sum_csr", overflow), src)
    if rdt.kind == "f":  # floats: segment_csr's reduction (``_nd.reduce3``'s column kernel)
        raise TypeError(f"_segment_sum_csr_1d sums integers; got result dtype {rdt}")
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
    short_path = n < 32 * m and long_rows.size == 0
    if not short_path:  # the other kernels trust the order: check it first (one parallel pass)
        check_indptr_order(ip)
    mins = np.zeros(rstarts.size - 1, dtype=np.int64)
    maxs = np.zeros(rstarts.size - 1, dtype=np.int64)
    if short_path:  # short rows: prefix differences; the kernel checks the order itself
        bad = np.full(rstarts.size - 1, -1, np.int64)
        suspect = np.zeros(rstarts.size - 1, np.bool_)
        # int32 words when they can be exact: sixteen lanes per step instead of eight
        words = np.int32 if rdt == np.int32 and xk.dtype.itemsize <= 4 else np.int64
        bufs = np.empty((rstarts.size - 1, _CSR_BLOCK), words)
        # the tasks in turn below PARALLEL_MIN elements (the serial twin: the same bits)
        sums = K.csr_sums_int_short if threads_pay(n) else K.csr_sums_int_short_serial
        sums(xk, ip, rstarts, out, mins, maxs, bad, bufs, suspect)
        if suspect.any() and not (bad >= 0).any():  # a row might not fit int32: int64 words
            bufs = np.empty((rstarts.size - 1, _CSR_BLOCK), np.int64)
            sums(xk, ip, rstarts, out, mins, maxs, bad, bufs, suspect)
        if (bad >= 0).any():
            check_indptr_order(ip)  # names the first offending position
            raise ValueError("indptr must be non-decreasing")
    else:
        K.csr_sums_int(xk, ip, rstarts, share, out, mins, maxs)
    lo_v, hi_v = int(mins.min()), int(maxs.max())
    for r in long_rows:  # a long row's elements are split across threads
        a, b = int(ip[r]), int(ip[r + 1])
        parts = np.linspace(a, b, T * 4 + 1).astype(np.int64)
        ps = np.zeros(parts.size - 1, dtype=np.int64)
        K.chunk_sums(xk, parts, ps)
        v = int(ps.sum())  # exact for int8/16/32 input; modulo 2**64 for int64
        lo_v, hi_v = min(lo_v, v), max(hi_v, v)
        out[r] = wrap_int(v, rdt)
    if overflow == "raise":
        lim = _I32 if rdt == np.int32 else _I64
        if rdt == np.int64:
            if _int64_may_overflow(x) and not K.exact_csr_range(xk, ip, lim.min, lim.max):
                raise overflow_error("segment_sum_csr", rdt)
        elif lo_v < lim.min or hi_v > lim.max:
            raise overflow_error("segment_sum_csr", rdt)
    return like_input(out, src)


# ----------------------------------------------------------------------------- rows

def scan_rows(x, ex, rdt, overflow, into=None):
    """Scans along the last axis of a validated 2-D ``x`` (``batched_scan``; ``scan`` of rows), into ``into`` (a C-contiguous array of x's shape
    and the result dtype) when given."""
    rows, n = x.shape
    if narrowing(x, rdt):
        res = narrow(lambda d: scan_rows(x, ex, np.dtype(d), overflow), "batched_scan", overflow)
        if into is None:
            return res
        into[...] = res
        return into
    out = np.empty((rows, n), dtype=rdt) if into is None else into
    if 0 < rows < numba.get_num_threads() and n >= 1 << 16:
        for r in range(rows):
            try:
                _scan_1d(x[r], exclusive=ex, dtype=rdt, overflow=overflow, into=out[r])
            except OverflowError:
                raise overflow_error("batched_scan", rdt) from None
        return out
    if rows == 0 or n == 0:
        return out
    if rdt.kind == "f":
        xk = x if x.dtype == rdt else x.astype(rdt)
        K.rows_scan_float(xk, out, ex, rdt.type(0))
        return out
    raise_ = overflow == "raise"
    # int64 words can only wrap when n * max|x| > 2**63 - 1 (int64 x): then the exact, checked loop
    check64 = raise_ and x.dtype == np.int64 and n * max(abs(int(x.min())), abs(int(x.max()))) > _I64.max
    mode = 2 if check64 else (1 if raise_ and rdt == np.int32 else 0)
    lo = np.zeros(rows, np.int64)
    hi = np.zeros(rows, np.int64)
    ovf = np.zeros(rows, np.bool_)
    K.rows_scan_int(x, out, ex, mode, lo, hi, ovf)
    if ovf.any() or (mode == 2 and rdt == np.int32 and (lo.min() < _I32.min or hi.max() > _I32.max)):
        raise overflow_error("batched_scan", rdt)
    return out
