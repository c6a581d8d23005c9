"""Alg. 2 (SCD: Scan, Compress, Differentiate) and Alg. 3 (SSCR: Scan, Scan,
Compress, Revert) of §4.1, with their stages COMPRESS, DIFF and REVERT; COMPRESS
as an op, alone and with the kept positions (``compress_ind``)."""
from __future__ import annotations

import numpy as np

from .. import bounds, mmv
from .._validate import as_flags, as_values, check_bool, check_overflow, check_s
from ._words import DEFAULT_S, finish, flag_words, max_abs_int, to_words
from .scan import scan_words

__all__ = ["compress", "compress_ind", "compress_words", "compress_positions", "diff", "diff_mmu", "revert",
           "end_flags", "scd", "sscr"]


def end_flags(f):
    """f^- of Alg. 2 line 3 / Alg. 3 line 3: f(1:) appended with 1, marking
    segment ENDS. One SHIFTL; the final 1 is a scalar store."""
    fm = mmv.shiftl(f, 1)
    if len(fm):
        fm[-1] = 1
    return fm


def compress_positions(f, s):
    """The positions of COMPRESS (Thm 4.2's proof), on 0/1 words ``f``.

    f_hat = SCAN(f) (Alg. 1); g = MASK(f_hat, f) (the output position + 1 of every
    kept entry); the scalar unit reads m = f_hat(n-1). Returns (g - 1, m): the
    SCATTER index of every entry (-1 for a dropped one) and the output length.
    """
    f = flag_words(f)
    if len(f) == 0:
        return f.copy(), 0
    fhat = scan_words(f, s)
    g = mmv.mask(fhat, f)
    return mmv.sub(g, 1), int(fhat[-1])


def compress_words(x, f, s):
    """COMPRESS(x, f) as in Thm 4.2's proof, on words.

    ``compress_positions``: f_hat = SCAN(f), g = MASK(f_hat, f), m = f_hat(n-1);
    the all-to-all circuit writes x(i) to position g(i) - 1 (SCATTER with index
    g - 1, where g = 0 -> -1 writes nothing).
    """
    f = flag_words(f)
    if len(x) == 0:
        return x[:0].copy()
    pos, m = compress_positions(f, s)
    return mmv.scatter(x, pos, m)


def compress(x, f, s=DEFAULT_S):
    """COMPRESS (§2): the entries of ``x`` whose flag is 1, in order; dtype of ``x`` kept."""
    x = as_values(x, "x")
    f = as_flags(f, len(x), "f")
    s = check_s(s)
    return compress_words(np.ascontiguousarray(x), f, s)


def compress_ind(x, mask, s=DEFAULT_S):
    """COMPRESS with indices: (x[mask == 1], their positions int64), in order.

    COMPRESS of §2 (Thm 4.2's proof) applied to the values and to the index
    vector 0, 1, ..., n-1 (a constant of the machine's memory), as the Ascend
    scan paper's compress (parallel-scan-ascend §5, "Compress": the first part
    of SplitInd's output, values and indices): one f_hat = SCAN(mask) (Alg. 1),
    g = MASK(f_hat, mask), m = f_hat(n-1) (``compress_positions``), then two
    SCATTERs with index g - 1, one of x and one of the index vector. dtype of
    ``x`` kept; indices int64.
    """
    x = np.ascontiguousarray(as_values(x, "x"))
    m = as_flags(mask, len(x), "mask")
    s = check_s(s)
    if len(x) == 0:
        return x[:0].copy(), np.zeros(0, np.int64)
    pos, k = compress_positions(m, s)
    return mmv.scatter(x, pos, k), mmv.scatter(np.arange(len(x), dtype=np.int64), pos, k)


def diff(z):
    """DIFF (Alg. 2 line 5): z_diff(i) = z(i) - z(i-1), z(-1) = 0.

    As Thm 4.2's proof has it, one AC[0] instruction pair: SUB(z, SHIFTR(z, 1))."""
    return mmv.sub(z, mmv.shiftr(z, 1))


def diff_mmu(z, s):
    """DIFF on the MMU (§4.1, Eq. 3): MATMUL(z, D_s) differences inside each
    s-block; the block-boundary entries are fixed on the VCU by subtracting
    SHIFTR(z, 1) masked to the first position of every block. Equals ``diff``."""
    d = mmv.matmul(z, mmv.diff_matrix(s, z.dtype))
    fix = mmv.mask(mmv.shiftr(z, 1), mmv.first_of_block(len(z), s))
    return mmv.sub(d, fix)


def revert(xhat, fhat, w):
    """REVERT(x_hat, f_hat, w) of §4.1: z = x_hat - (f_hat == idx+1) * w(idx) for
    every idx, i.e. each segment k >= 1 (f_hat = k) loses w(k-1), the scan value
    at the end of the previous segment. As Thm 4.2's proof has it, an all-to-all
    read: GATHER(w, f_hat - 1) (f_hat = 0 reads 0), then SUB.
    """
    return mmv.sub(xhat, mmv.gather(w, mmv.sub(fhat, 1)))


def _starts_after_first(f):
    # Position 0 always starts a segment; SSCR counts starts AFTER position 0,
    # so the scalar unit clears f(0) (a scalar store, not an instruction).
    f = flag_words(f).copy()
    if len(f):
        f[0] = 0
    return f


def _segment_sums_exact(x, f):
    out, acc = [], 0
    for i, (v, b) in enumerate(zip(x.tolist(), f.tolist())):
        if i > 0 and b:
            out.append(acc)
            acc = 0
        acc += v
    if len(x):
        out.append(acc)
    return out


def _seg_scan_exact(x, f, exclusive=False):
    out, acc = [], 0
    for i, (v, b) in enumerate(zip(x.tolist(), f.tolist())):
        acc = v if (i == 0 or b) else acc + v
        out.append(acc - v if exclusive else acc)
    return out


def scd(x, f, s=DEFAULT_S, *, overflow="raise"):
    """Segmented sum by SCD (Alg. 2): DIFF(COMPRESS(SCAN(x), f^-)).

    One value per segment, in order (f marks segment STARTS; position 0 always
    starts one). Float note: the differences of global prefix sums carry an
    error that scales with the prefix sums, not with the segment's own sum.
    """
    x = as_values(x, "x")
    f = as_flags(f, len(x), "f")
    s = check_s(s)
    w = to_words(x)
    xhat = scan_words(w, s)                          # line 2
    fm = end_flags(flag_words(f))                    # line 3
    z = compress_words(xhat, fm, s)                  # line 4
    zd = diff(z)                                     # line 5
    if x.dtype.kind != "f":
        b = bounds.scd(len(x), s, max_abs_int(x))
        return finish(zd, x.dtype, overflow, bound_magnitude=b.magnitude, op="golden.scd",
                      exact=lambda: _segment_sums_exact(x.astype(object), f))
    return finish(zd, x.dtype, overflow)


def sscr(x, f, s=DEFAULT_S, *, exclusive=False, overflow="raise"):
    """Segmented scan by SSCR (Alg. 3): REVERT(SCAN(x), SCAN(f), COMPRESS(SCAN(x), f^-))."""
    x = as_values(x, "x")
    f = as_flags(f, len(x), "f")
    s = check_s(s)
    exclusive = check_bool(exclusive, "exclusive")
    check_overflow(overflow)
    w = to_words(x)
    fw = _starts_after_first(f)
    xhat, fhat = scan_words(w, s), scan_words(fw, s)  # line 2
    fm = end_flags(flag_words(f))                      # line 3
    wv = compress_words(xhat, fm, s)                   # line 4
    z = revert(xhat, fhat, wv)                         # line 5
    if exclusive:  # the exclusive segmented scan: z - x (one VCU SUB)
        z = mmv.sub(z, to_words(x))
    if x.dtype.kind != "f":
        b = bounds.sscr(len(x), s, max_abs_int(x))
        return finish(z, x.dtype, overflow, bound_magnitude=b.magnitude, op="golden.sscr",
                      exact=lambda: _seg_scan_exact(x.astype(object), f, exclusive))
    return finish(z, x.dtype, overflow)
