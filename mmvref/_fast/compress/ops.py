"""Compress: ``compress`` (x[mask == 1], in order) and ``compress_ind`` (those values and their
positions): COMPRESS of §2 of the segmented-operations paper, one scan of the kept counts of the
mask's chunks giving each chunk its output base.

The family's boundary: the mask is validated here (0/1 of bool/int8/uint8, one per value, checked
in the same parallel pass that counts it: segment's ``flag_stats``; an input of one chunk, small or
on one thread, is counted by numpy or ``_portable.mask_stats`` and moved by the sequential variants
of the chunk kernels); the kernels of ``_portable`` (plain loops, lowered for any target) move the
values' bits.
"""
from __future__ import annotations

import numba
import numpy as np

from ..._threading import guarded
from .._policy import like_input
from ..segment import _portable as K
from ..segment._column import _chunks, _flags, _raise_bad_flags, _values
from . import _portable as KC

__all__ = ["compress", "compress_ind"]

#: a mask of one chunk and at most this many bytes is counted by numpy (``_compress_bases``)
MASK_SMALL = 1 << 16


def _compress_bases(x, mask):
    """(values, mask as uint8, chunk starts, output base of every chunk + the total, parallel?):
    the mask validated (0/1 of bool/int8/uint8, len(x) entries) on the way. One chunk (a small
    input, or one thread): the sequential kernels, the mask counted by numpy (at most
    MASK_SMALL bytes) or ``mask_stats``."""
    x = _values(x)
    m = _flags(mask, x.size, "mask")
    n = x.size
    if n == 0:
        return x, m, None, None, False
    starts = _chunks(n)
    C = starts.size - 1
    if C == 1:  # one chunk: its count and the OR of the mask bytes (> 1: invalid)
        if n <= MASK_SMALL:  # numpy: as fast there, and no kernel to compile
            total, bad = np.count_nonzero(m), np.bitwise_or.reduce(m)
        else:
            total, bad = KC.mask_stats(m)
        _raise_bad_flags(np.array([bad], dtype=np.uint8), m, "mask")
        return x, m, starts, np.array([0, total], dtype=np.int64), False
    counts = np.zeros(C, dtype=np.int64)
    bad = np.zeros(C, dtype=np.uint8)
    K.flag_stats(m, starts, counts, bad)
    _raise_bad_flags(bad, m, "mask")
    counts[0] += m[0]  # flag_stats does not count position 0; compress does
    bases = np.zeros(C + 1, dtype=np.int64)
    np.cumsum(counts, out=bases[1:])
    return x, m, starts, bases, numba.get_num_threads() > 1


@guarded
def compress(x, mask):
    """The entries of ``x`` where ``mask`` is 1, in order (COMPRESS of §2; like
    ``np.compress`` / ``torch.masked_select``). The dtype of ``x`` is kept."""
    src = x
    x, m, starts, bases, par = _compress_bases(x, mask)
    if starts is None:
        return like_input(x[:0].copy(), src)
    total = int(bases[-1])
    # the kernel moves bits: view the values as unsigned words of their size
    # (so fp16, which numba cannot load, and NaN payloads copy exactly)
    bits = np.dtype(f"u{x.dtype.itemsize}")
    buf = np.empty(total + 1, dtype=x.dtype)
    xb, bb = x.view(bits), buf.view(bits)
    KC.compress_kernel(par)(xb, m, starts, bases, bb)
    if starts.size > 2:  # one chunk has no trailing store to repair
        KC.compress_repair(xb, m, starts, bases, bb)
    return like_input(buf[:total], src)


@guarded
def compress_ind(x, mask):
    """``compress`` -> (x[mask == 1], their positions int64), in order (COMPRESS
    of §2 applied to the values and to the positions; like tcuscan's
    run_compress_ind, or ``(x[mask], np.flatnonzero(mask))``). The dtype of
    ``x`` is kept; empty input or an all-zero mask gives two empty arrays."""
    src = x
    x, m, starts, bases, par = _compress_bases(x, mask)
    if starts is None:
        return like_input(x[:0].copy(), src), like_input(np.zeros(0, np.int64), src)
    total = int(bases[-1])
    bits = np.dtype(f"u{x.dtype.itemsize}")
    buf = np.empty(total + 1, dtype=x.dtype)
    idx = np.empty(total + 1, dtype=np.int64)
    xb, bb = x.view(bits), buf.view(bits)
    KC.compress_ind_kernel(par)(xb, m, starts, bases, bb, idx)
    if starts.size > 2:  # one chunk has no trailing store to repair
        KC.compress_ind_repair(xb, m, starts, bases, bb, idx)
    return like_input(buf[:total], src), like_input(idx[:total], src)
