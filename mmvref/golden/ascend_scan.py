"""The scans of the Ascend scan paper (parallel-scan-ascend.txt §4), stage by stage.

ScanU (Alg. 1), ScanUL1 (Alg. 2, Eq. 1) and MCScan (Alg. 3), on machine words
(``*_words``) and as ops: 1-D input, or 2-D input scanned row by row (the
batched scans of §4.2), inclusive or exclusive (§4.3: the inclusive result
shifted right by one, zero first), int8/16/32 accumulated in int32 results
(int64 words inside), fp16 in fp32. Semantics: DEVELOPERS.md, "Batched scans".

Stages: ``row_scan`` (MATMUL(x, U_s): every s-tile scanned by the cube unit),
``propagate`` (the vector unit's sequential carry over s-tiles), ``tile_scan_ul1``
(Eq. 1 on one s^2-tile), ``block_scan`` (every s^2-tile by Eq. 1), ``reduce_sum`` (one block's ReduceSum), ``reduce_tiles``
(MCScan phase I block reductions), ``complete_rows`` (MCScan phase II).
"""
from __future__ import annotations

import numpy as np

from .. import bounds, mmv
from .._validate import as_values, check_bool, check_cores, check_overflow, check_s
from ._words import DEFAULT_S, finish, max_abs_int, to_words

__all__ = [
    "scan_u", "scan_ul1", "mc_scan",
    "scan_u_words", "scan_ul1_words", "mc_scan_words",
    "row_scan", "propagate", "tile_scan_ul1", "block_scan", "reduce_sum", "reduce_tiles", "complete_rows", "exclusive_shift",
]


def row_scan(x, s):
    """C = A_s @ U_s (Alg. 1 line 7, Alg. 3 line 8): every s-tile scanned, one MMU call."""
    return mmv.matmul(x, mmv.upper_ones(s, x.dtype))


def propagate(y, s, partial):
    """Alg. 1 lines 11-13 (Alg. 3 lines 20-22): for each s-tile y_s of y,
    y_s <- y_s + partial (one VCU add), partial <- last entry of y_s.

    Returns (y, partial). The vector unit's loop is sequential over tiles."""
    y = np.array(y, copy=True)
    for b in range(0, len(y), s):
        y[b:b + s] = mmv.add(y[b:b + s], partial)
        partial = y[min(b + s, len(y)) - 1]
    return y, partial


def scan_u_words(x, s):
    """ScanU(x, s), Alg. 1: row_scan of every tile (line 7), then the carry
    propagated tile by tile by the vector unit (lines 11-13). The s^2-tiles of
    line 5 only pipeline the work; they do not change the result."""
    if len(x) == 0:
        return x.copy()
    y = row_scan(x, s)
    y, _ = propagate(y, s, x.dtype.type(0))
    return y


def tile_scan_ul1(t, s):
    """Eq. 1 on one s^2-tile A (Alg. 2 lines 7-12): C1 = A 1_s (line 7),
    C2 = A U_s (line 10), C2 = C2 + L_s^- C1 (line 12, accumulation on). The
    result is the tile's scan, row-major; a short tile is zero-padded."""
    c1 = mmv.matmul(t, mmv.ones(s, t.dtype))
    c2 = mmv.matmul(t, mmv.upper_ones(s, t.dtype))
    return mmv.add(c2, mmv.lmatmul(mmv.lower_strict(s, t.dtype), c1))


def block_scan(x, s):
    """The scan of every s^2-block on its own (ScanUL1, Alg. 2 lines 6-12, Eq. 1,
    without the carry of lines 16-17); the kernel run_block_scan. Words in, out."""
    y = np.empty_like(x)
    tile = s * s
    for b in range(0, len(x), tile):
        y[b:b + tile] = tile_scan_ul1(x[b:b + tile], s)
    return y


def scan_ul1_words(x, s):
    """ScanUL1(x, s), Alg. 2: each s^2-tile scanned by Eq. 1 (lines 6-12), then
    y_l <- y_l + partial and partial <- last entry of y_l (lines 16-17)."""
    y = np.empty_like(x)
    partial = x.dtype.type(0)
    tile = s * s
    for b in range(0, len(x), tile):
        yl = mmv.add(tile_scan_ul1(x[b:b + tile], s), partial)
        y[b:b + tile] = yl
        partial = yl[-1]
    return y


def reduce_sum(x, s):
    """ReduceSum of a block (Alg. 3 line 12), hierarchically: MATMUL with 1_s
    puts each s-tile's sum in every position of the tile, GATHERS keeps one
    per tile; repeated until one value is left. Empty input sums to 0."""
    if len(x) == 0:
        return x.dtype.type(0)
    while len(x) > 1:
        x = np.concatenate([x, np.zeros((-len(x)) % s, x.dtype)])  # zero padding to whole tiles
        x = mmv.gathers(mmv.matmul(x, mmv.ones(s, x.dtype)), s)
    return x[0]


def _blocks(n, s, cores):
    """Block boundaries of MCScan: B = cores blocks of whole s-tiles (the last
    may be short; blocks past the end are empty)."""
    tiles = -(-n // s)
    per = -(-tiles // cores) if tiles else 0
    return [(min(n, i * per * s), min(n, (i + 1) * per * s)) for i in range(cores)]


def reduce_tiles(x, s, cores):
    """MCScan phase I on the vector units (Alg. 3 lines 11-13): r_i =
    ReduceSum(x[i]) for each of the ``cores`` blocks (``reduce_sum``); the
    kernel run_reduce_tiles. Returns r (length cores; empty blocks give 0)."""
    r = np.zeros(cores, dtype=x.dtype)
    for i, (lo, hi) in enumerate(_blocks(len(x), s, cores)):  # parfor
        r[i] = reduce_sum(x[lo:hi], s)
    return r


def complete_rows(y, r, s, cores):
    """MCScan phase II (Alg. 3 lines 16-26; the kernel run_complete_rows):
    per block i, partial = r_0 + ... + r_{i-1} (line 18, summed in the vector
    core's scratchpad), then ``propagate`` over the block's s-tiles of the
    row scans y (lines 19-23). Returns the scan."""
    y = np.array(y, copy=True)
    for i, (lo, hi) in enumerate(_blocks(len(y), s, cores)):  # parfor, after SyncAll
        partial = y.dtype.type(0)
        with np.errstate(over="ignore"):  # integers wrap as the kernel's int32 adds do
            for j in range(i):
                partial = partial + r[j]
        y[lo:hi], _ = propagate(y[lo:hi], s, partial)
    return y


def mc_scan_words(x, s, cores):
    """MCScan(x, s, B = cores), Alg. 3: phase I, per block, the row scans
    (lines 5-10, ``row_scan``) and the block sums (``reduce_tiles``); SyncAll;
    phase II, ``complete_rows``."""
    y = np.empty_like(x)
    for lo, hi in _blocks(len(x), s, cores):  # phase I, cube units (parfor)
        y[lo:hi] = row_scan(x[lo:hi], s)
    return complete_rows(y, reduce_tiles(x, s, cores), s, cores)


def exclusive_shift(y):
    """Exclusive scan from the inclusive one (§4.3): shifted right by one, zero first."""
    return mmv.shiftr(y, 1)


def _run(name, words_fn, x, s, exclusive, overflow, *extra):
    if np.ndim(x) not in (1, 2):
        raise ValueError(f"x must be 1-D, or 2-D (a batch of rows), got shape {np.shape(x)}")
    x = as_values(x, "x", ndim=np.ndim(x))
    s = check_s(s)
    exclusive = check_bool(exclusive, "exclusive")
    check_overflow(overflow)
    rows = x if x.ndim == 2 else x[None, :]
    out = []
    for row in rows:
        w = to_words(row)
        z = words_fn(w, s, *extra)
        if exclusive:
            z = exclusive_shift(z)
        out.append(z)
    z = np.stack(out) if out else np.zeros(rows.shape, dtype=to_words(rows).dtype)
    z = z if x.ndim == 2 else z[0]
    if x.dtype.kind != "f":
        b = bounds.scan(x.shape[-1], s, max_abs_int(x))
        return finish(z.reshape(-1), x.dtype, overflow, bound_magnitude=b.magnitude, op=f"golden.{name}",
                      exact=lambda: _exact_rows(rows, exclusive)).reshape(z.shape)
    return finish(z, x.dtype, overflow)


def _exact_rows(rows, exclusive):
    out = []
    for row in rows:
        c = np.cumsum(row.astype(object)).tolist()
        out.extend([0] + c[:-1] if exclusive and c else c)
    return out


def scan_u(x, s=DEFAULT_S, *, exclusive=False, overflow="raise"):
    """Scan by ScanU (Alg. 1); x 1-D, or 2-D scanned row by row (§4.2)."""
    return _run("scan_u", scan_u_words, x, s, exclusive, overflow)


def scan_ul1(x, s=DEFAULT_S, *, exclusive=False, overflow="raise"):
    """Scan by ScanUL1 (Alg. 2, Eq. 1); x 1-D, or 2-D scanned row by row (§4.2)."""
    return _run("scan_ul1", scan_ul1_words, x, s, exclusive, overflow)


def mc_scan(x, s=DEFAULT_S, cores=20, *, exclusive=False, overflow="raise"):
    """Scan by MCScan (Alg. 3) with ``cores`` blocks (the 910B4 has 20 AI cores);
    x 1-D, or 2-D scanned row by row."""
    cores = check_cores(cores)
    return _run("mc_scan", mc_scan_words, x, s, exclusive, overflow, cores)
