"""App. A.2, Alg. 1: block-recursive segmented scan (Thm 4.3), with
BlockSegScan, Recurse, UpdateFirstSegment, and the two vector-instruction
simulations of REVSPEC (App. A.2.1, Algs. 2 and 3)."""
from __future__ import annotations

import numpy as np

from .. import bounds, mmv
from .._validate import as_flags, as_values, check_bool, check_overflow, check_s
from ._words import DEFAULT_S, finish, flag_words, max_abs_int, to_words
from .segmented import _seg_scan_exact

__all__ = ["seg_scan", "seg_scan_words", "block_seg_scan", "recurse", "update_first_segment",
           "revert_spec_simple", "revert_spec_vector"]


def block_seg_scan(x, f, s):
    """BlockSegScan(x, f; s), App. Alg. 1 lines 16-19.

    Line 17: x_bar = MATMUL(x, U_s) (speculative s-block scans).
    Line 18: f_bar = MATMUL(f, U_s). Line 19: REVSPEC(x_bar, f_bar; s).
    Result: the segmented scan of every s-block on its own. 3 steps (2 MMU, 1 VCU).
    """
    xbar = mmv.matmul(x, mmv.upper_ones(s, x.dtype))
    fbar = mmv.matmul(f, mmv.upper_ones(s, f.dtype))
    return mmv.revspec(xbar, fbar, s)


def update_first_segment(z, f, s):
    """UpdateFirstSegment(z, f; s), App. Alg. 1 lines 20-27.

    Called on z(s-1:), f(s-1:), whose blocks start at a block end of the
    caller, holding that block's finished value: add it to every element of
    the first segment of the block that follows.

    Line 21: f_bar = MATMUL(f, U_s). Line 22: f_bar_start = FILLS(f_bar; s).
    Line 23: m = ISZERO(SUB(f_bar, f_bar_start)) (no segment start since the
    block's first position). Line 24: m = AND(m, NOT f).
    Erratum: as printed, line 24 leaves m = 1 at a block's first position when
    its flag is 0, which would add that position's value to itself; we also AND
    with NOT(first_of_block) (a constant vector, like U_s). One extra VCU step.
    Line 25: w = FILLS(z; s). Line 26: w = MASK(w, m). Line 27: z = ADD(z, w).
    """
    fbar = mmv.matmul(f, mmv.upper_ones(s, f.dtype))
    fbar_start = mmv.fills(fbar, s)
    m = mmv.iszero(mmv.sub(fbar, fbar_start))
    m = mmv.and_(m, mmv.not_(f))
    m = mmv.and_(m, mmv.not_(mmv.first_of_block(len(f), s)))  # erratum fix, see docstring
    w = mmv.fills(z, s)
    w = mmv.mask(w, m)
    return mmv.add(z, w)


def recurse(z, f, s):
    """Recurse(z, f; s), App. Alg. 1 lines 4-15.

    Lines 5-6: done if len(z) <= s. Line 7: f_bar = MATMUL(f, U_s).
    Line 8: f_bar_s = GATHERS(f_bar; s) (flags per block). Line 9:
    f_s = NOT(ISZERO(f_bar_s)) (block holds a segment start). Line 10:
    z_s = GATHERS(z; s). Line 11: z_s = BlockSegScan(z_s, f_s; s). Line 12:
    z_s = Recurse(z_s, f_s; s). Line 13: z = SCATTERS(z_s; s).
    Line 14: UpdateFirstSegment(z(s-1:), f(s-1:); s).
    """
    if len(z) <= s:
        return z
    fbar = mmv.matmul(f, mmv.upper_ones(s, f.dtype))
    fbar_s = mmv.gathers(fbar, s)
    f_s = mmv.not_(mmv.iszero(fbar_s))
    z_s = mmv.gathers(z, s)
    z_s = block_seg_scan(z_s, f_s, s)
    z_s = recurse(z_s, f_s, s)
    z = mmv.scatters(z_s, s, z)
    z[s - 1:] = update_first_segment(z[s - 1:], f[s - 1:], s)
    return z


def seg_scan_words(x, f, s):
    """SegScan(x, f; s), App. Alg. 1 lines 1-3, on words."""
    z = block_seg_scan(x, f, s)
    return recurse(z, f, s)


def seg_scan(x, f, s=DEFAULT_S, *, exclusive=False, overflow="raise"):
    """Segmented scan by the block-recursive App. Alg. 1 (Thm 4.3).

    z(i) = x(i) if i = 0 or f(i) = 1, else z(i-1) + x(i) (Problem 2.1).
    """
    x = as_values(x, "x")
    f = as_flags(f, len(x), "f")
    s = check_s(s)
    exclusive = check_bool(exclusive, "exclusive")
    check_overflow(overflow)
    z = seg_scan_words(to_words(x), flag_words(f), s)
    if exclusive:  # the exclusive segmented scan: z - x (one VCU SUB)
        z = mmv.sub(z, to_words(x))
    if x.dtype.kind != "f":
        b = bounds.seg_scan(len(x), s, max_abs_int(x))
        return finish(z, x.dtype, overflow, bound_magnitude=b.magnitude, op="golden.seg_scan",
                      exact=lambda: _seg_scan_exact(x.astype(object), f, exclusive))
    return finish(z, x.dtype, overflow)


def revert_spec_simple(z, x, f, s):
    """RevertSpecSimple(z, x, f, s), App. Alg. 2: a direct transcription.

    Per s-block: mu = f_bar_s(s-1); speculation is right if mu == 0 or
    (mu == 1 and f_bar_s(0) == 1) (lines 5-6); if mu == s every element starts
    a segment and z_s = x_s (lines 7-9); otherwise for idx = f_bar_s(0)+1..mu,
    offset = Sum(LessThan(f_bar_s, idx)) - 1 and z_s -= (f_bar_s == idx) * z_s(offset)
    (lines 10-12), where the parfor reads the speculative z_s (not the
    partially corrected one). A per-block scalar loop, not an MMV-RAM
    composition; only f_bar (line 2) is counted. Returns a new array.
    """
    fw = flag_words(f)
    fbar = mmv.matmul(fw, mmv.upper_ones(s, fw.dtype))
    z = np.array(z, copy=True)
    n = len(z)
    for base in range(0, n, s):
        zs, xs, fb = z[base:base + s], x[base:base + s], fbar[base:base + s]
        spec = zs.copy()
        m = len(zs)
        mu = int(fb[m - 1])
        if mu == 0 or (mu == 1 and fb[0] == 1):
            continue
        if mu == m:
            zs[:] = xs
            continue
        for idx in range(int(fb[0]) + 1, mu + 1):
            offset = int(np.sum(fb < idx)) - 1
            zs -= (fb == idx).astype(zs.dtype) * spec[offset]
    return z


def revert_spec_vector(z, f, s):
    """RevertSpecVector, App. Alg. 3, with MMV-RAM vector instructions only.

    Shifts are block-local (each s-block is processed on its own, line 3).
    Line 2: f_bar = MATMUL(f, U_s). Line 10: q = XOR(SHIFTL(f_bar, 1), f_bar):
    non-zero at i iff a segment starts at i+1 (the printed XOR with f is read as
    f_bar, the only reading that marks segment ends). Lines 11-12:
    m = SHIFTR(q != 0, 1) (segment starts after the block's first position),
    w = SHIFTR(MASK(z, q), 1) (the speculative sum before each such start).
    Lines 13-19: a Kogge-Stone segmented broadcast over b = 1, 2, 4, ... < s:
    where m = 0 take the predecessor's (m, w) at distance b
    (w += MASK(SHIFTR(w, b), LEQ(m, 0)); m = OR(m, SHIFTR(m, b))); the printed
    lines 17-19 do not propagate as stated, this is the standard masked form
    with the same instructions. Line 20: z = SUB(z, w).
    The per-block shortcuts of lines 4-9 change no result and are omitted:
    a vector unit runs every block through the same instructions.
    """
    fw = flag_words(f)
    fbar = mmv.matmul(fw, mmv.upper_ones(s, fw.dtype))
    q = mmv.xor(mmv.shiftl(fbar, 1, s), fbar)
    m = mmv.shiftr(mmv.not_(mmv.iszero(q)), 1, s)
    w = mmv.shiftr(mmv.mask(z, q), 1, s)
    b = 1
    while b < s:
        take = mmv.leq(m, 0)
        w = mmv.add(w, mmv.mask(mmv.shiftr(w, b, s), take))
        m = mmv.or_(m, mmv.shiftr(m, b, s))
        b *= 2
    return mmv.sub(z, w)
