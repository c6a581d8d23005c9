"""Portable kernels of ``compress`` / ``compress_ind``: each chunk of the mask writes its kept
values at its output base (one scan of the chunks' counts, §2's COMPRESS), a serial repair pass
fills what a chunk could not (plain loops; LLVM lowers them for any target)."""
from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, parallel=True)
def compress_kernel(x, m, starts, bases, out):
    """Branch-free: every element is stored at the next free slot, which only
    advances where the mask is set. The one trailing store of a chunk lands on
    the next chunk's first slot (or the spare last slot) and is repaired by
    ``compress_repair`` after the parallel region."""
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        xs = x[lo:hi]
        ms = m[lo:hi]
        k = np.uint64(bases[c])
        for i in range(xs.size):
            out[k] = xs[i]
            k += np.uint64(ms[i] != 0)


@njit(cache=True)
def compress_repair(x, m, starts, bases, out):
    for c in range(1, starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        if bases[c + 1] == bases[c]:
            continue  # chunk c kept nothing; the repair of a later chunk covers the slot
        for i in range(lo, hi):
            if m[i] != 0:
                out[bases[c]] = x[i]
                break


@njit(cache=True, parallel=True)
def compress_ind_kernel(x, m, starts, bases, out, idx):
    """``compress_kernel`` that also stores every element's position in ``idx``
    (the same slot, the same trailing store per chunk, repaired by
    ``compress_ind_repair``). A chunk keeping few elements (under 1/16 of its
    own) stores only those: chunks keeping nothing would otherwise all store to
    one slot at once, every thread fighting for its cache line."""
    for c in prange(starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        xs = x[lo:hi]
        ms = m[lo:hi]
        k = np.uint64(bases[c])
        if (bases[c + 1] - bases[c]) * 16 < hi - lo:
            for i in range(xs.size):
                if ms[i] != 0:
                    out[k] = xs[i]
                    idx[k] = lo + i
                    k += np.uint64(1)
        else:
            for i in range(xs.size):
                out[k] = xs[i]
                idx[k] = lo + i
                k += np.uint64(ms[i] != 0)


@njit(cache=True)
def compress_ind_repair(x, m, starts, bases, out, idx):
    for c in range(1, starts.size - 1):
        lo, hi = starts[c], starts[c + 1]
        if bases[c + 1] == bases[c]:
            continue  # chunk c kept nothing; the repair of a later chunk covers the slot
        for i in range(lo, hi):
            if m[i] != 0:
                out[bases[c]] = x[i]
                idx[bases[c]] = i
                break
