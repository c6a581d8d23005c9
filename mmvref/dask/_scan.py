"""scan, segmented_scan and batched_scan on dask arrays: MCScan's three phases as a graph.

1. Per chunk (one task each): the carry it hands on, (has_start, exact sum since its last start).
2. The exclusive scan of those carries, a tree of fan-in ``_graph.FANIN``.
3. Per chunk: the single-machine op on the chunk; the part before its first start (a segment begun in
   an earlier chunk) is scanned with wrap-around, gets the carry added, and its overflow is decided on
   carry + its exact prefixes. The rest of the chunk is left to the single-machine op's own overflow
   handling, so the verdict is the whole array's.
"""
from __future__ import annotations

import operator

import numpy as np

from .._fast.scanfamily import ops as scanfamily_ops
from .._fast.segment import ops as segment_ops
from .._fast._policy import kernel_result_dtype as _result_dtype
from .._fast._policy import overflow_error as _overflow
from .._fast.segment._column import _scan_1d as _scan_into
from .._threading import guarded
from .._validate import check_bool, check_overflow
from . import _chunk as C
from . import _graph as G

__all__ = ["scan", "segmented_scan", "batched_scan"]


@guarded
def _scan_chunk(x, f, summ, carry, exclusive, rdt, overflow, op):
    n = x.shape[0]
    fs = summ[0]
    if n == 0:
        return np.empty(0, rdt)
    if fs == 0:  # every segment of the chunk starts in it: the single-machine op decides everything
        if f is None:
            return segment_ops.scan(x, exclusive=exclusive, dtype=rdt, overflow=overflow)
        return segment_ops.segmented_scan(x, f, exclusive=exclusive, dtype=rdt, overflow=overflow)
    c = carry[1]
    if overflow == "raise" and C.open_overflows(x[:fs], c, rdt, exclusive, summ[4]):
        raise _overflow(op, rdt)
    z = np.empty(n, rdt)
    # the carry enters the scan as its initial value: no second pass over the chunk
    _scan_into(x[:fs], exclusive=exclusive, dtype=rdt, overflow="wrap", initial=c, into=z[:fs])
    if fs < n:
        z[fs:] = segment_ops.segmented_scan(x[fs:], f[fs:], exclusive=exclusive, dtype=rdt, overflow=overflow)
    return z


def _scan_graph(op, x, f, exclusive, dtype, overflow):
    x = G.as_dask(x, "x", op)
    if op == "segmented_scan":  # flags=None is refused as by the single-machine op, not a plain scan
        f = G.aligned(f, x, "flags", op)
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    rdt, fin = G.result_dtypes(x, dtype, op)
    sizes = x.chunks[0]
    first = G.first_nonempty(sizes)
    name = G.token(op, x, f, exclusive, rdt, overflow)
    nb = len(sizes)
    xk = [(x.name, i) for i in range(nb)]
    fk = [None] * nb if f is None else [(f.name, i) for i in range(nb)]
    dsk = {}
    for i in range(nb):
        dsk[(name + "-sum", i)] = (C.summary, xk[i], fk[i], i == first, rdt, f is not None)
    tree, prefix = G.carry_tree(name + "-tree", [(operator.getitem, (name + "-sum", i), 2) for i in range(nb)], C.combine,
                                C.identity(rdt))
    dsk.update(tree)
    for i in range(nb):
        dsk[(name, i)] = (_scan_chunk, xk[i], fk[i], (name + "-sum", i), prefix[i], exclusive, rdt, overflow, op)
    return G.narrowed(G.new_array(name, dsk, [x] if f is None else [x, f], x.chunks, rdt), rdt, fin, overflow, op)


def scan(x, *, exclusive=False, dtype=None, overflow="raise"):
    """Prefix sums of a 1-D dask array (``mmvref.scan`` chunk by chunk, carries combined as a tree).

    Lazy: returns a dask array with ``x``'s chunks. Dtypes, ``exclusive``, ``dtype`` and ``overflow`` as
    the single-machine op; integer results are exact and an overflow anywhere raises OverflowError when
    the result is computed (``overflow="wrap"``: two's-complement wrap-around). Float results: each
    output is a sum of its own terms (a chunk's local prefix plus the exact-order carry), within the
    "sequential" bound of ``conformance.compare``."""
    return _scan_graph("scan", x, None, exclusive, dtype, overflow)


def segmented_scan(x, flags, *, exclusive=False, dtype=None, overflow="raise"):
    """Segmented prefix sums of a 1-D dask array; ``flags`` (bool / int8 / uint8 holding 0/1, same length,
    rechunked to ``x``'s chunks if needed) mark segment starts, position 0 always starts one. A segment
    may span any number of chunks. Lazy; semantics as ``mmvref.segmented_scan`` (1-D)."""
    return _scan_graph("segmented_scan", x, flags, exclusive, dtype, overflow)


# ----------------------------------------------------------------------------- batched_scan

@guarded
def _row_carry(block, rdt):
    return (False, C.rows_exact_sums(block, rdt))


@guarded
def _batched_chunk(block, carry, first, exclusive, rdt, overflow):
    if block.size == 0:
        return np.empty(block.shape, rdt)
    if first:
        return scanfamily_ops.batched_scan(block, exclusive=exclusive, dtype=rdt, overflow=overflow)
    c = carry[1]
    if overflow == "raise" and C.rows_overflow(block, c, rdt, exclusive):
        raise _overflow("batched_scan", rdt)
    z = scanfamily_ops.batched_scan(block, exclusive=exclusive, dtype=rdt, overflow="wrap")
    if rdt.kind == "f":
        with np.errstate(over="ignore", invalid="ignore"):
            z += c.astype(rdt)[:, None]
    else:
        z += np.array([C._wrap(v, rdt) for v in c], rdt)[:, None]
    return z


def batched_scan(x, *, exclusive=False, dtype=None, overflow="raise"):
    """Each row of a 2-D dask array scanned (``mmvref.batched_scan`` per block); a row spanning several
    column chunks gets the exact sums of its earlier blocks, combined as a tree per row block. Lazy;
    returns ``x``'s chunks. Semantics as the single-machine op."""
    x = G.as_dask(x, "x", "batched_scan", ndim=2)
    check_overflow(overflow)
    exclusive = check_bool(exclusive, "exclusive")
    rdt = _result_dtype(np.empty(0, x.dtype), dtype, "batched_scan")
    name = G.token("batched_scan", x, exclusive, rdt, overflow)
    first = G.first_nonempty(x.chunks[1])
    nr, nc = x.numblocks
    dsk = {}
    for i in range(nr):
        for j in range(nc):
            dsk[(name + "-carry", i, j)] = (_row_carry, (x.name, i, j), rdt)
        zero = np.zeros(x.chunks[0][i], rdt if rdt.kind == "f" else object)
        tree, prefix = G.carry_tree(f"{name}-tree-{i}", [(name + "-carry", i, j) for j in range(nc)], C.combine,
                                    (False, zero))
        dsk.update(tree)
        for j in range(nc):
            dsk[(name, i, j)] = (_batched_chunk, (x.name, i, j), prefix[j], j == first, exclusive, rdt, overflow)
    return G.new_array(name, dsk, [x], x.chunks, rdt)
