"""Named faults that wrap any backend: the suite's proof of power.

``FaultyBackend(base, fault, s)`` behaves like ``base`` except that the ops
the fault touches return what a kernel with that bug would. On the command
line: ``--backend faulty:FAULT:BASE`` (BASE a backend name or
``package.module:attribute``). Every fault must be detected by the default
profile; ``python -m conformance --mutation-score`` runs them all. The last
five sit at thresholds no backend declares (a row of 1024 or 2049 non-zeros,
int8 inputs above 2^16, a long segment at 33 features, more than 65536 scatter
positions): the generated passes reach them by chance only, the strata
(``conformance.strata``) in every run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import backends
from .compare import dense_csr

__all__ = ["FAULTS", "Fault", "FaultyBackend", "FaultNotApplicable", "resolve"]


class FaultNotApplicable(NotImplementedError):
    """The fault's wrapper itself failed on this input (not the backend): the input is one
    the fault cannot simulate, so the runner rejects it (a NotImplementedError) instead of
    counting the crash as a detection."""


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    ops: tuple
    apply: object  # (base, op, args, kwargs, s) -> result
    #: (backend) -> None when the fault is observable through the backend's contract, else the reason
    #: it is not (the mutation score then says N/A)
    requires: object = None
    #: regimes the faulty kernel would declare besides the base backend's (conformance.regimes), e.g.
    #: the row-length bucket whose kernel is broken
    regimes: object = None


def _np(a):
    return np.asarray(a)


def _tile_starts(n, s):
    f = np.zeros(n, np.uint8)
    f[::s] = 1
    return f


def _block_boundary(base, op, args, kw, s):
    z = _np(base.scan(args[0], exclusive=False)).copy()
    for i in range(s, len(z), s):  # the carry is not added to a tile's first element
        z[i] = z[i] - z[i - 1]
    if kw.get("exclusive"):
        z = np.concatenate([np.zeros(1, z.dtype), z[:-1]])[: len(z)]
    return z


def _carry_first_segment(base, op, args, kw, s):
    x, f = args
    forced = np.asarray(f).astype(np.uint8) | _tile_starts(len(x), s)  # each tile restarts: carry lost
    return base.segmented_scan(x, forced.astype(np.asarray(f).dtype), **kw)


def _start_end(base, op, args, kw, s):
    x, f = args
    f = np.asarray(f).astype(np.uint8)
    starts = np.concatenate([[1], f[:-1]]).astype(np.uint8)[: len(f)]  # read as END flags
    return getattr(base, op)(x, starts.astype(np.asarray(args[1]).dtype), **kw)


def _trailing_dropped(base, op, args, kw, s):
    out = _np(getattr(base, op)(*args, **kw))
    ptr = np.asarray(args[1] if op == "segment_sum_csr" else args[0][0])
    lens = np.diff(ptr)
    nz = np.flatnonzero(lens)
    return out[: (nz[-1] + 1) if nz.size else 0]


def _int32_accumulator(base, op, args, kw, s):
    x = np.asarray(args[0] if op != "spmv" else args[0][2])
    out = getattr(base, op)(*args, **kw, overflow="wrap") if x.dtype.kind == "i" else \
        getattr(base, op)(*args, **kw)
    out = _np(out)
    if out.dtype.kind == "i":
        return out.astype(np.int32).astype(out.dtype)  # int32 registers, wrap-around, no check
    return out


def _fp16_accumulation(base, op, args, kw, s):
    x = np.asarray(args[0])
    if x.dtype != np.float16:
        return base.scan(*args, **kw)
    z = np.cumsum(x, dtype=np.float16)
    if kw.get("exclusive"):
        z = np.concatenate([[np.float16(0)], z[:-1]])[: len(z)]
    return z.astype(np.float32)


def _incl_excl(base, op, args, kw, s):
    kw = dict(kw)
    kw["exclusive"] = not kw.get("exclusive", False)
    return getattr(base, op)(*args, **kw)


def _padding(base, op, args, kw, s):
    out = _np(getattr(base, op)(*args, **kw)).copy()
    n = len(np.asarray(args[0]))
    if n % s and out.size:
        out[-1] = out[-1] + out.dtype.type(s - n % s)  # padding read as ones, summed into the last segment
    return out


def _n_ge_s2(base, op, args, kw, s):
    z = _np(base.scan(*args, **kw)).copy()
    if len(z) >= s * s:
        z[-1] = z[-1] + z.dtype.type(1)
    return z


def _unsorted_cols(base, op, args, kw, s):
    (ptr, ind, data, shape), x = args
    ptr, ind, data = np.asarray(ptr), np.asarray(ind), np.asarray(data).copy()
    for r in range(len(ptr) - 1):
        a, b = int(ptr[r]), int(ptr[r + 1])
        dec = np.flatnonzero(np.diff(ind[a:b]) < 0)
        if dec.size:  # a decreasing column read as the row's end: the rest is dropped
            data[a + dec[0] + 1:b] = 0
    return base.spmv((ptr, ind, data, shape), x, **kw)


def _empty_repeat(base, op, args, kw, s):
    out = _np(base.segment_sum_csr(*args, **kw)).copy()
    lens = np.diff(np.asarray(args[1]))
    for r in range(1, len(out)):
        if lens[r] == 0:
            out[r] = out[r - 1]  # GatherSpMV's repeated row end, never differenced
    return out


def _leading_empty(base, op, args, kw, s):
    out = _np(base.spmv(*args, **kw)).copy()
    lens = np.diff(np.asarray(args[0][0]))
    nz = np.flatnonzero(lens)
    if nz.size:
        out[: nz[0]] = out[nz[0]]  # HandleLeadingZeros forgotten
    return out


def _nan_first(base, op, args, kw, s):
    x = np.asarray(args[0])
    v, i = base.radix_sort(*args, **kw)
    v, i = _np(v), _np(i)
    if x.dtype.kind == "f" and not kw.get("descending"):
        nan = np.isnan(v)
        order = np.concatenate([np.flatnonzero(nan), np.flatnonzero(~nan)])
        v, i = v[order], i[order]
    return (v, i) if op == "radix_sort" else i


def _topk_ties(base, op, args, kw, s):
    x, k = args
    x = np.asarray(x)
    largest = kw.get("largest", True)
    order = np.argsort(-np.arange(len(x)), kind="stable")  # visit higher indices first
    v, i = base.radix_sort(x[order], descending=largest)
    i = order[_np(i)][:k]
    return x[i], i.astype(np.int64)


def _split_unstable(base, op, args, kw, s):
    x, m = args
    v, i = base.split_ind(x, m)
    v, i = _np(v).copy(), _np(i).copy()
    ones = int(np.asarray(m).astype(bool).sum())
    v[ones:], i[ones:] = v[ones:][::-1], i[ones:][::-1]
    return (v, i) if op == "split_ind" else v


def _compress_last(base, op, args, kw, s):
    out = _np(base.compress(*args, **kw))
    m = np.asarray(args[1]).astype(bool)
    return out[:-1] if len(m) and m[-1] else out


def _compress_ind_tile_relative(base, op, args, kw, s):
    v, i = base.compress_ind(*args, **kw)
    return v, _np(i) % (s * s)  # each s*s tile writes its local positions: the tile offset is not added


def _sample_geq(base, op, args, kw, s):
    w, u = args
    w = np.asarray(w)
    c = np.cumsum(w.astype(np.float64 if w.dtype.kind == "f" else np.int64))
    t = u * float(c[-1])
    return np.int64(np.argmax(c >= t))  # >= instead of >


def _spmm_first_column(base, op, args, kw, s):
    out = _np(base.spmm(*args, **kw)).copy()
    if out.ndim == 2 and out.shape[1] > 1:
        out[:, 1:] = out[:, :1]  # the tile's first column broadcast to all k
    return out


def _spgemm_last_wins(base, op, args, kw, s):
    import scipy.sparse as sps

    from mmvref._validate import as_csr_matrix

    (ap, ai, ad, (m, _)), (bp, bi, bd, (_, n)) = as_csr_matrix(args[0], "A"), as_csr_matrix(args[1], "B")
    dt = dense_csr(base.spgemm(*args, **kw)).dtype  # scipy or (indptr, indices, data, shape): both backends' forms
    out = np.zeros((m, n), dt)
    for r in range(m):  # a workspace that overwrites instead of accumulating
        for q in range(ap[r], ap[r + 1]):
            k = ai[q]
            out[r, bi[bp[k]:bp[k + 1]]] = ad[q] * bd[bp[k]:bp[k + 1]]
    return sps.csr_matrix(out)


# ----------------------------------------------------------------------------- kernel-scale seams
# Faults a kernel could really have at the seams of its regimes (conformance.regimes): they are
# invisible on small inputs, so only inputs at kernel scale (the default profile's medium and large
# tiers, and CSR rows at the bucket edges) catch them.

_SEAM = 1 << 12  # 4096 = 8^4: the fourth level of s = 8 tiles, and a plausible chunk / counter width


def _wrong_at_4095(base, op, args, kw, s):
    z = _np(base.scan(*args, **kw)).copy()
    if len(z) >= _SEAM:  # the last element of the fourth recursion level keeps its predecessor's value
        z[_SEAM - 1] = z[_SEAM - 2]
    return z


def _rows_of_64_dropped(base, op, args, kw, s):
    y = _np(base.spmv(*args, **kw)).copy()
    ptr = np.asarray(args[0][0], np.int64)
    y[np.flatnonzero(np.diff(ptr) == 64)] = 0  # the 64-entry bucket's kernel never writes its rows
    return y


def _fp16_result_rounding(base, op, args, kw, s):
    z = _np(getattr(base, op)(*args, **kw))
    if np.asarray(args[0]).dtype != np.float16:
        return z
    with np.errstate(over="ignore"):  # beyond fp16's range: inf, as the register would hold
        return z.astype(np.float16).astype(z.dtype)  # results stored through fp16 registers


def _carry_between_cores(base, op, args, kw, s):
    z = _np(base.scan(args[0], exclusive=False)).copy()
    n, cores = len(z), 20
    if n >= cores * s * s:  # MCScan's multi-core regime: cores 1.. miss the carry of the cores before
        cuts = [n * c // cores for c in range(1, cores)]
        carry = z[[c - 1 for c in cuts]]
        for c, lo in enumerate(cuts):
            hi = cuts[c + 1] if c + 1 < len(cuts) else n
            z[lo:hi] = z[lo:hi] - carry[c]
    if kw.get("exclusive"):
        z = np.concatenate([np.zeros(1, z.dtype), z[:-1]])[: len(z)]
    return z


def _start_at_chunk_border(base, op, args, kw, s):
    x, f = args
    f = np.asarray(f).copy()
    f[_SEAM::_SEAM] = 0  # a start exactly on a 4096-element chunk border is lost
    return getattr(base, op)(x, f, **kw)


def _count_12bit(base, op, args, kw, s):
    out = _np(base.compress(*args, **kw))
    return out[: len(out) % _SEAM] if len(out) >= _SEAM else out  # the kept count wraps at 2^12


def _rows_truncated(base, op, args, kw, s):
    x, ptr = np.asarray(args[0]), np.asarray(args[1], np.int64)
    if len(ptr) < 2 or not (np.diff(ptr) > _SEAM).any():
        return base.segment_sum_csr(*args, **kw)
    keep = np.zeros(len(x), bool)
    for a, b in zip(ptr[:-1], ptr[1:]):  # a row's elements beyond its first 4096 are never read
        keep[a:min(b, a + _SEAM)] = True
    newptr = np.concatenate([[0], np.cumsum(np.minimum(np.diff(ptr), _SEAM))])
    return base.segment_sum_csr(x[keep], newptr, **kw)


def _batched_restarts(base, op, args, kw, s):
    x = np.asarray(args[0])
    if x.ndim != 2 or x.shape[1] <= _SEAM:
        return base.batched_scan(*args, **kw)
    parts = [_np(base.batched_scan(np.ascontiguousarray(x[:, a:a + _SEAM]), **kw))
             for a in range(0, x.shape[1], _SEAM)]  # each 4096-wide row tile starts from 0
    return np.concatenate(parts, axis=1)


# ----------------------------------------------------------------------------- release-gate strata
# Faults at thresholds no backend declares and a generated pass reaches only by chance: only the
# deterministic strata (conformance.strata) catch them in every run.

_POW2_ROW = 1 << 10  # 1024: a power of two between mmvref's declared buckets (48 and 8192)
_POW2P1_ROW = (1 << 11) + 1  # 2049
_WIDE_INT8 = 1 << 16


def _rows_of_1024_zero(base, op, args, kw, s):
    y = _np(base.spmv(*args, **kw)).copy()
    ptr = np.asarray(args[0][0], np.int64)
    y[np.flatnonzero(np.diff(ptr) == _POW2_ROW)] = 0  # an undeclared 1024-entry kernel never writes its rows
    return y


def _rows_of_2049_lose_last(base, op, args, kw, s):
    (ptr, ind, data, shape), x = args
    ptr = np.asarray(ptr, np.int64)
    rows = np.flatnonzero(np.diff(ptr) == _POW2P1_ROW)
    if not rows.size:
        return base.spmv(*args, **kw)
    data = np.asarray(data).copy()
    data[ptr[rows + 1] - 1] = 0  # a 2048-wide kernel drops the row's one remaining non-zero
    return base.spmv((ptr, ind, data, shape), x, **kw)


def _int8_wide_carry(base, op, args, kw, s):
    x = np.asarray(args[0])
    z = _np(base.scan(*args, **kw)).copy()
    n = len(z)
    if x.dtype != np.int8 or n <= _WIDE_INT8:
        return z
    m = n - (n % 64 or 64)  # the last partial 64-lane vector of int8 misses the carry before it
    z[m:] = z[m:] - z[m - 1]
    return z


def _long_segment_f33(base, op, args, kw, s):
    x, ptr = np.asarray(args[0]), np.asarray(args[1], np.int64)
    out = _np(base.segment_csr(*args, **kw)).copy()
    if x.ndim != 2 or x.shape[1] != 33 or kw.get("axis", 0) not in (0, -2):
        return out
    for n in np.flatnonzero(np.diff(ptr) > (1 << 15)):  # a split segment's last eighth is lost
        lo, hi = int(ptr[n]), int(ptr[n + 1])
        part = np.ascontiguousarray(x[lo: hi - (hi - lo) // 8])
        out[n] = _np(base.segment_csr(part, np.array([0, len(part)], np.int64), **kw))[0]
    return out


def _scatter_16bit_positions(base, op, args, kw, s):
    x, index = np.asarray(args[0]), np.asarray(args[1])
    if x.shape[0] <= 1 << 16:
        return base.scatter(*args, **kw)
    kw = dict(kw)
    kw.setdefault("dim_size", int(index.max()) + 1)
    return base.scatter(np.ascontiguousarray(x[: 1 << 16]), index[: 1 << 16], **kw)  # a 16-bit position counter


FAULTS = {f.name: f for f in (
    Fault("block_boundary_off_by_one", "scan: a tile's first element misses the carry from the tiles before",
          ("scan",), _block_boundary),
    Fault("carry_not_added_to_first_segment",
          "segmented_scan: the carry is not added to each tile's first segment", ("segmented_scan",),
          _carry_first_segment),
    Fault("start_end_flag_confusion", "segmented ops read START flags as END flags (run_seg_sum's convention)",
          ("segmented_scan", "segmented_sum"), _start_end),
    Fault("trailing_empty_rows_dropped", "CSR ops return no value for trailing empty rows",
          ("segment_sum_csr", "spmv"), _trailing_dropped),
    Fault("int32_accumulator_overflow", "integer sums kept in wrapping int32 registers, never checked",
          ("scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "spmv"), _int32_accumulator),
    Fault("fp16_accumulation", "scan of fp16 accumulated in fp16, then widened", ("scan",), _fp16_accumulation),
    Fault("inclusive_exclusive_mixup", "scans: exclusive and inclusive swapped",
          ("scan", "segmented_scan", "batched_scan"), _incl_excl),
    Fault("padding_not_zeroed", "the last tile's padding is summed into the last segment",
          ("segmented_sum", "segment_sum_csr"), _padding),
    Fault("wrong_only_when_n_ge_s2", "scan: the second recursion level (n >= s^2) is off by one at the end",
          ("scan",), _n_ge_s2),
    Fault("unsorted_column_indices_mishandled", "spmv: a decreasing column index ends the row",
          ("spmv",), _unsorted_cols),
    Fault("empty_rows_repeat_previous", "segment_sum_csr: an empty row repeats the previous row's sum",
          ("segment_sum_csr",), _empty_repeat),
    Fault("leading_empty_rows_not_zeroed", "spmv: leading empty rows get the first row's value",
          ("spmv",), _leading_empty),
    Fault("nan_sorted_first", "radix sort: NaNs placed first in ascending order", ("radix_sort", "argsort"),
          _nan_first),
    Fault("topk_ties_higher_index_first", "topk: among equal values the higher index wins", ("topk",),
          _topk_ties, requires=lambda b: ("the backend declares topk_ties = 'kernel' (any index among ties "
                                          "conforms)") if getattr(b, "topk_ties", "documented") == "kernel"
          else None),
    Fault("split_not_stable", "split: the mask-0 group comes out reversed", ("split", "split_ind"),
          _split_unstable),
    Fault("compress_drops_last", "compress: the last element is lost when it is kept", ("compress",),
          _compress_last),
    Fault("compress_ind_indices_tile_relative", "compress_ind: the indices are positions within each s*s "
          "tile (the tile's offset is not added)", ("compress_ind",), _compress_ind_tile_relative),
    Fault("sample_uses_geq", "weighted_sample: the first c_i >= t instead of > t", ("weighted_sample",),
          _sample_geq),
    Fault("spmm_first_column_broadcast", "spmm: every output column is the first one", ("spmm",),
          _spmm_first_column),
    Fault("spgemm_workspace_overwrites", "spgemm: the workspace overwrites instead of accumulating",
          ("spgemm",), _spgemm_last_wins),
    # kernel-scale seams
    Fault("scan_wrong_at_4095", "scan: index 4095 (8^4 - 1, the fourth tile level's last element) keeps its "
          "predecessor's value", ("scan",), _wrong_at_4095),
    Fault("spmv_rows_of_64_dropped", "spmv: rows of exactly 64 non-zeros (a row-length bucket edge) give 0",
          ("spmv",), _rows_of_64_dropped, regimes={"row_buckets": (64,)}),
    Fault("fp16_result_rounding", "scan, segmented_scan: fp16 inputs' results stored through fp16 (the result "
          "dtype is fp32)", ("scan", "segmented_scan"), _fp16_result_rounding),
    Fault("carry_lost_between_cores", "scan: with 20 cores (n >= 20 s^2) each core after the first misses the "
          "carry of the cores before it", ("scan",), _carry_between_cores),
    Fault("segment_start_at_chunk_border_lost", "segmented ops: a segment starting exactly at a multiple of "
          "4096 (a chunk border) is merged into the previous one", ("segmented_scan", "segmented_sum"),
          _start_at_chunk_border),
    Fault("compress_count_12bit", "compress: the kept count lives in a 12-bit counter (4096 or more kept "
          "elements wrap)", ("compress",), _count_12bit),
    Fault("csr_rows_truncated_at_4096", "segment_sum_csr: a row's elements beyond its first 4096 are never read",
          ("segment_sum_csr",), _rows_truncated),
    Fault("batched_scan_restarts_every_4096", "batched_scan: rows longer than 4096 restart the scan at every "
          "4096-wide row tile", ("batched_scan",), _batched_restarts),
    # release-gate strata: undeclared thresholds
    Fault("spmv_rows_of_1024_zero", "spmv: rows of exactly 1024 = 2^10 non-zeros (an undeclared power of two) "
          "give 0", ("spmv",), _rows_of_1024_zero),
    Fault("spmv_rows_of_2049_lose_last", "spmv: rows of 2049 = 2^11 + 1 non-zeros lose their last non-zero "
          "(a 2048-wide kernel drops the remainder)", ("spmv",), _rows_of_2049_lose_last),
    Fault("scan_int8_wide_carry_lost", "scan: int8 inputs of more than 2^16 elements: the last partial 64-lane "
          "vector misses the carry before it", ("scan",), _int8_wide_carry),
    Fault("segment_csr_long_segment_f33", "segment_csr: at 33 features a segment longer than 2^15 positions (split "
          "among threads) loses its last eighth", ("segment_csr",), _long_segment_f33),
    Fault("scatter_16bit_positions", "scatter: positions beyond the first 65536 are never read (a 16-bit position "
          "counter)", ("scatter",), _scatter_16bit_positions),
)}


def resolve(name, s=8):
    """The backend named ``name`` as ``--backend`` takes it: ``faulty:FAULT:BASE`` (the named fault
    injected into the backend BASE, a FaultyBackend with tile size ``s``) or any name
    ``backends.resolve`` takes. ValueError for a malformed faulty name or an unknown fault; otherwise
    what ``backends.resolve`` raises."""
    if name.startswith("faulty:"):
        parts = name.split(":", 2)
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise ValueError(f"faulty backends are named faulty:FAULT:BASE, got {name!r}")
        _, fault, base = parts
        return FaultyBackend(backends.resolve(base), fault, s)
    return backends.resolve(name)


class FaultyBackend:
    """``base`` with fault ``fault`` injected into the ops it touches; every
    other op (and attribute) is the base's."""

    def __init__(self, base, fault, s=8):
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        self._base = base
        self._fault = FAULTS[fault]
        self.s = s
        self.name = f"faulty:{fault}"
        #: calls in which the fault changed the base backend's result (0 after a run: the fault never
        #: showed through the inputs this backend takes, so the mutation score says N/A)
        self.activated = 0

    def regimes(self):
        """The base's regimes plus the faulty kernel's own (``Fault.regimes``), as such a kernel
        would declare them."""
        base = dict(self._base.regimes()) if callable(getattr(self._base, "regimes", None)) else {}
        for k, v in (self._fault.regimes or {}).items():
            from .regimes import Regimes

            base[k] = tuple(sorted(set(base.get(k, getattr(Regimes(), k))) | set(v)))
        return base

    def __getattr__(self, op):
        attr = getattr(self._base, op)
        if op not in self._fault.ops:
            return attr

        def faulty(*args, **kwargs):
            try:
                out = self._fault.apply(_TagBase(self._base), op, args, kwargs, self.s)
            except Exception as exc:
                if getattr(exc, "_raised_by_base", False):
                    raise  # the backend's own error (e.g. OverflowError): judged as usual
                raise FaultNotApplicable(f"fault {self._fault.name} cannot simulate this input "
                                         f"({type(exc).__name__}: {exc})") from exc
            try:
                if not _same(out, attr(*args, **kwargs)):
                    self.activated += 1
            except Exception:  # noqa: BLE001 - the base raised: the fault's result differs in kind
                self.activated += 1
            return out
        return faulty


def _same(a, b):
    """Bit-identical results (arrays, tuples of them, scipy matrices)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b))
    if hasattr(a, "toarray"):
        a = a.toarray()
    if hasattr(b, "toarray"):
        b = b.toarray()
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


class _TagBase:
    """The base backend, with every exception its ops raise marked as the base's, so that
    FaultyBackend can tell them from a failure of the fault's own wrapper code."""

    def __init__(self, base):
        self._base = base

    def __getattr__(self, name):
        attr = getattr(self._base, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            try:
                return attr(*args, **kwargs)
            except Exception as exc:
                try:
                    exc._raised_by_base = True
                except AttributeError:  # an exception type without a __dict__: treated as the wrapper's
                    pass
                raise
        return call
