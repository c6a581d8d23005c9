"""Compress: ``compress`` (x[mask == 1], in order) and ``compress_ind`` (those values and their
positions): COMPRESS of §2 of the segmented-operations paper, one scan of the kept counts of the
mask's chunks giving each chunk its output base.

The family's boundary: the mask is validated here (0/1 of bool/int8/uint8, one per value, checked
in the same parallel pass that counts it: segment's ``flag_stats`` kernel); the kernels of
``_portable`` (plain loops, lowered for any target) move the values' bits.
"""
from __future__ import annotations

import numpy as np

from ..._threading import guarded
from .._policy import like_input
from ..segment import _portable as K
from ..segment._column import _chunks, _flags, _raise_bad_flags, _values
from . import _portable as KC

__all__ = ["compress", "compress_ind"]


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
    KC.compress_kernel(xb, m, starts, bases, bb)
    KC.compress_repair(xb, m, starts, bases, bb)
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
    KC.compress_ind_kernel(xb, m, starts, bases, bb, idx)
    KC.compress_ind_repair(xb, m, starts, bases, bb, idx)
    return like_input(buf[:total], src), like_input(idx[:total], src)
