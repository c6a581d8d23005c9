"""segmented_sum and segment_sum_csr on dask arrays.

A segment's sum belongs to the output chunk of the x chunk where the segment is closed: by the next
start (segmented_sum) or by its last element (segment_sum_csr), or by the end of the array. So output
chunk i depends only on x chunk i and its carry (the exact sum of the segment's part in earlier chunks),
and its length is known before anything is summed: from a counting pass over the flags
(segmented_sum; one eager pass, reading the flags only) or from the offsets (segment_sum_csr, whose
offsets are numpy on the client).

Per chunk, the segments that begin and end in it are summed by the single-machine op, which also
decides their overflow; the segment it closes that began earlier is carry + its exact part here,
checked (or wrapped) exactly.
"""
from __future__ import annotations

import operator

import dask
import numpy as np

from .._fast.segment import ops as segment_ops
from .._threading import guarded
from .._validate import as_indptr, check_overflow
from . import _chunk as C
from . import _graph as G

__all__ = ["segmented_sum", "segment_sum_csr"]


def _count_starts(f, first):
    """Starts in a chunk that close a segment (global position 0 closes none); 0/1 checked."""
    f = np.asarray(f)
    C.check_flags(f, "flags")
    k = int(np.count_nonzero(f))
    if first and f.size and f[0]:
        k -= 1
    return np.array([k], np.int64)


@guarded
def _segsum_chunk(x, f, summ, carry, first, last, rdt, overflow):
    fs, ls, (has, tail), open_sum, _ = summ
    parts = []
    if not has:  # no start here: the open segment closes only at the end of the array
        if last and not first:
            parts.append([C.closing_value(carry[1] + open_sum, rdt, overflow, "segmented_sum")])
    else:
        if not first:  # the segment begun in earlier chunks closes at this chunk's first start
            parts.append([C.closing_value(carry[1] + open_sum, rdt, overflow, "segmented_sum")])
        if ls > fs:  # the segments from the first start to the last one lie in this chunk
            parts.append(segment_ops.segmented_sum(x[fs:ls], f[fs:ls], dtype=rdt, overflow=overflow))
        if last:
            parts.append([C.closing_value(tail, rdt, overflow, "segmented_sum")])
    return np.concatenate([np.asarray(p, rdt) for p in parts]) if parts else np.empty(0, rdt)


def segmented_sum(x, flags, *, dtype=None, overflow="raise"):
    """One sum per segment of a 1-D dask array (``flags`` mark starts, position 0 always starts one),
    in order; segments may span any number of chunks. Output chunk i holds the segments closed in x's
    chunk i, so the call computes the flags' start counts per chunk at once (one pass over the flags,
    which also checks them) and returns a lazy dask array with known chunks. Dtypes, integer exactness
    and ``overflow`` as ``mmvref.segmented_sum`` (1-D)."""
    op = "segmented_sum"
    x = G.as_dask(x, "x", op)
    f = G.aligned(flags, x, "flags", op)
    check_overflow(overflow)
    rdt, fin = G.result_dtypes(x, dtype, op)
    sizes = x.chunks[0]
    first = G.first_nonempty(sizes)
    nb = len(sizes)
    name = G.token(op, x, f, rdt, overflow)
    counts_dsk = {(name + "-count", i): (_count_starts, (f.name, i), i == first) for i in range(nb)}
    counts = G.new_array(name + "-count", counts_dsk, [f], ((1,) * nb,), np.int64)
    k = np.asarray(dask.compute(counts)[0], np.int64)
    if first is not None:
        k[-1] += 1  # the last segment, closed by the end of the array
    dsk = {}
    for i in range(nb):
        dsk[(name + "-sum", i)] = (C.summary, (x.name, i), (f.name, i), i == first, rdt)
    tree, prefix = G.carry_tree(name + "-tree", [(operator.getitem, (name + "-sum", i), 2) for i in range(nb)], C.combine,
                                C.identity(rdt))
    dsk.update(tree)
    for i in range(nb):
        dsk[(name, i)] = (_segsum_chunk, (x.name, i), (f.name, i), (name + "-sum", i), prefix[i], i == first,
                          i == nb - 1 and first is not None, rdt, overflow)
    return G.narrowed(G.new_array(name, dsk, [x, f], (tuple(int(v) for v in k),), rdt), rdt, fin, overflow, op)


# ----------------------------------------------------------------------------- segment_sum_csr

@guarded
def _csr_carry(x, last_boundary, rdt):
    """(has a row start in this chunk, exact sum from the last one to the chunk's end)."""
    if last_boundary >= 0:
        return (True, C.exact_sum(x[last_boundary:], rdt))
    return (False, C.exact_sum(x, rdt))


@guarded
def _csr_chunk(x, ip, carry, rdt, overflow):
    """The rows closed in this chunk: ``ip`` their offsets relative to the chunk's start (the first
    negative when that row began in an earlier chunk)."""
    if ip.size == 1:
        return np.empty(0, rdt)
    if ip[0] >= 0:
        return segment_ops.segment_sum_csr(x[:ip[-1]], ip, dtype=rdt, overflow=overflow)
    head = C.closing_value(carry[1] + C.exact_sum(x[:ip[1]], rdt), rdt, overflow, "segment_sum_csr")
    rest = ip[1:] - ip[1]
    out = np.empty(ip.size - 1, rdt)
    out[0] = head
    out[1:] = segment_ops.segment_sum_csr(x[ip[1]:ip[-1]], rest, dtype=rdt, overflow=overflow)
    return out


def segment_sum_csr(x, indptr, *, dtype=None, overflow="raise"):
    """Sums of a 1-D dask array over x[indptr[r]:indptr[r+1]] (empty rows give 0). ``indptr`` is a numpy
    array (or array-like) on the client, checked at the call (0 first, non-decreasing, len(x) last); a
    dask indptr is computed first. Output chunk i holds the rows whose last element lies in x's chunk i
    (empty rows go with the chunk before their position), each chunk's offsets travel with its task
    only. Lazy; semantics as ``mmvref.segment_sum_csr`` (1-D)."""
    op = "segment_sum_csr"
    x = G.as_dask(x, "x", op)
    check_overflow(overflow)
    rdt, fin = G.result_dtypes(x, dtype, op)
    if hasattr(indptr, "compute") and hasattr(indptr, "dask"):
        indptr = indptr.compute()
    ip = as_indptr(np.asarray(indptr), "indptr", nnz=x.shape[0])
    sizes = x.chunks[0]
    nb = len(sizes)
    a = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])  # chunk i covers [a[i], a[i+1])
    m = ip.size - 1
    # rows of chunk i: those with indptr[r+1] in (a[i], a[i+1]]; rows ending at 0 go to chunk 0
    cut = np.searchsorted(ip[1:], a, side="right")
    cut[0], cut[-1] = 0, m
    # the last row start (offset) inside each chunk, relative to it, or -1
    j = np.searchsorted(ip, a[1:], side="left") - 1
    lastb = np.where((j >= 0) & (ip[np.maximum(j, 0)] >= a[:-1]), ip[np.maximum(j, 0)] - a[:-1], -1)
    name = G.token(op, x, ip, rdt, overflow)
    dsk = {}
    for i in range(nb):
        dsk[(name + "-carry", i)] = (_csr_carry, (x.name, i), int(lastb[i]), rdt)
    tree, prefix = G.carry_tree(name + "-tree", [(name + "-carry", i) for i in range(nb)], C.combine,
                                C.identity(rdt))
    dsk.update(tree)
    for i in range(nb):
        local = ip[cut[i]:cut[i + 1] + 1] - a[i]
        dsk[(name, i)] = (_csr_chunk, (x.name, i), local, prefix[i], rdt, overflow)
    return G.narrowed(G.new_array(name, dsk, [x], (tuple(int(v) for v in np.diff(cut)),), rdt), rdt, fin,
                      overflow, op)
