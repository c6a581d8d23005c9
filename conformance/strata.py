"""Release-gate strata: deterministic kernel-scale cases checked in every default, ci and release run.

Hypothesis spends an op's budget by chance: a row of exactly 2^k non-zeros at an undeclared k, an
int8 input above 2^16 elements, a segment long enough to be split among threads, a scatter with
more than 65536 positions each come up in some runs and not in others. So after the generated
passes (``conformance.regimes``) the runner checks these cases, built here from the backend's
regimes and a seed (the seed only picks the values; the strata are the same in every run):

- **rows** (the ops with CSR offsets: spmv, spmm, segment_sum_csr, and segment_csr and gather_csr
  at one feature): CSR rows of every length of ``Regimes.strata_row_lengths()``, i.e. 2^k - 1,
  2^k, 2^k + 1 for every 2^k up to the tier's max_n (2^22 in the default and ci profiles) whatever
  the backend declares, plus the declared row seams, packed into matrices of at most max_n
  non-zeros (first-fit by decreasing length), two empty rows in each; values are positive
  integers (every dropped or repeated term changes an exact result) in an integer dtype the
  backend takes for the op (int32 first; floats only when it takes none, then integer-valued, so
  every sum is exact in the result dtype).
- **dtype** (every op but spgemm and top_p_sample, whose strategies stay small): for every value
  dtype the backend takes for the op (within the op's strategy domain: spmv and spmm draw no
  int64), one input of ``Regimes.large_length()`` elements (the shortest seam above 2^16: 65537 by
  default), with the op's structure (flags at the seams, offsets with empty rows, masks, sorts'
  special values and ties, ...).
- **width** (segment_csr, segment_coo, gather_csr): for every feature width the N-d kernels tell
  apart (``WIDTHS``: F = 1, the column kernel; 3, scalar lanes only; 15 = 8 + 4 + 3; 16; 33 =
  32 + 1; 63 = 32 + 16 + 8 + 4 + 3; 64; 97 = 3 * 32 + 1), a segment of ``LONG_SEGMENT`` = 2^15 + 1
  positions (longer than ``mmvref._fast.segment._nd._LONG_MIN``, where one segment is split among
  threads) among short and empty ones; and (**many**) 2^16 + 1 segments of 0-4 positions at F = 1
  and F = 17 (outputs past every tile, coo_bounds' parallel chunks).
- **scatter**: more than 65536 positions in an unsorted index with one id holding a long segment
  (the counting sort and the private-copy paths), at F in ``SCATTER_WIDTHS``; and 2^17 + 1
  positions over 2^16 + 1 ids.
The width and scatter cases take the backend's dtypes in turn, integers and floats alternating,
so both the integer and the float kernels run.

The expected results come from ``conformance.exact.plain`` (plain numpy, independent of mmvref;
the golden model's radix sort alone took 6 s for one scatter of 2^17 positions), float sums are
judged against ``exact.reference`` as everywhere. A failing case is reported unshrunk (it is
kernel scale by construction), its stratum and the row or segment the failing output belongs to
in the message, and saved for ``--replay`` like any counterexample.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mmvref.registry import VALUE_RULE

from .regimes import MEDIUM_MAX

__all__ = ["Case", "cases", "STRATA_OPS", "ROW_OPS", "ND_OPS", "WIDTHS", "SCATTER_WIDTHS", "LONG_SEGMENT",
           "strata_dtypes"]

#: feature widths of the N-d strata (module docstring)
WIDTHS = (1, 3, 15, 16, 33, 63, 64, 97)
SCATTER_WIDTHS = (1, 3, 16, 33, 64)
#: a segment this long is split among threads by mmvref's N-d kernels (_LONG_MIN = 2^15)
LONG_SEGMENT = (1 << 15) + 1
#: ops with the rows strata, and the N-d ops (width / many / scatter strata)
ROW_OPS = ("spmv", "spmm", "segment_sum_csr", "segment_csr", "gather_csr")
ND_OPS = ("segment_csr", "segment_coo", "scatter", "gather_csr")
_INT = ("int8", "int16", "int32", "int64")
_FLOAT = ("float16", "float32", "float64")
_ALL = _INT + _FLOAT
#: op -> the value dtypes its strata may take (the strategies' domain of the op); ops absent here
#: have no strata (spgemm's and top_p_sample's strategies stay small: their references are quadratic
#: or per-row sorts)
_DOMAIN = {op: _ALL for op in ("scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "segment_csr",
                               "segment_coo", "scatter", "gather_csr", "compress", "compress_ind", "batched_scan",
                               "split", "split_ind", "radix_sort", "argsort", "topk", "weighted_sample")}
_DOMAIN.update(spmv=("int8", "int16", "int32") + _FLOAT, spmm=("int8", "int16", "int32") + _FLOAT)
STRATA_OPS = tuple(_DOMAIN)


@dataclass
class Case:
    """One stratum case: ``op(*args, **kwargs)`` judged against ``reference`` ("plain":
    ``exact.plain``). ``rows``: per output row (or segment) its length, so a failing output index
    can be named by its row; ``per_row``: outputs per row (features, columns)."""

    stratum: str
    label: str
    args: tuple
    kwargs: dict
    reference: str = "plain"
    rows: np.ndarray | None = field(default=None, repr=False)
    per_row: int = 1
    unit: tuple = ("row", "non-zeros")  # what a row is called, and what it holds

    def locate(self, index):
        """A note naming the row (segment) of output ``index``, or ""."""
        if self.rows is None:
            return ""
        r = int(index) // max(self.per_row, 1)
        if not 0 <= r < len(self.rows):
            return ""
        return f"; output {index} belongs to {self.unit[0]} {r} of {int(self.rows[r])} {self.unit[1]}"


def strata_dtypes(op, dtypes):
    """The value dtypes the strata of ``op`` take: the op's domain, narrowed to ``dtypes`` (the
    backend's and --dtypes; None: all)."""
    dom = _DOMAIN.get(op, ())
    return [d for d in dom if dtypes is None or d in dtypes]


def _interleave(dts):
    """Integers and floats alternating (so cases taken in turn reach both kinds of kernel)."""
    ints = [d for d in dts if np.dtype(d).kind == "i"]
    flts = [d for d in dts if np.dtype(d).kind == "f"]
    out = []
    for i in range(max(len(ints), len(flts))):
        out += ([ints[i]] if i < len(ints) else []) + ([flts[i]] if i < len(flts) else [])
    return out


def _row_dtype(dts):
    """The dtype of the rows strata: an integer one (exact sums), int32 first; else float64 first."""
    for d in ("int32", "int16", "int64", "int8", "float64", "float32", "float16"):
        if d in dts:
            return d
    return None


def _fit_limit(dt, terms):
    """The largest |value| of ``dt`` whose sums of ``terms`` values fit the op's result dtype (ints)."""
    dt = np.dtype(dt)
    return max(1, min(int(np.iinfo(dt).max), int(np.iinfo(VALUE_RULE[dt]).max) // (int(terms) + 1)))


def _summands(rng, dt, n, terms, positive=False):
    """Values of ``dt`` whose every sum of up to ``terms`` of them is exact in the result dtype:
    integers within the fit limit (signed, or >= 1 with ``positive``); floats integer-valued (in
    [1, 3], or [-8, 8] signed), exact in any summation order up to 2^21 terms in fp32."""
    dt = np.dtype(dt)
    if dt.kind == "f":
        v = rng.integers(1, 4, n) if positive else rng.integers(-8, 9, n)
        return v.astype(dt)
    lim = _fit_limit(dt, terms)
    lo = 1 if positive else max(int(np.iinfo(dt).min), -lim - 1)
    return rng.integers(lo, lim, n, dtype=dt, endpoint=True)


def _moved(rng, dt, n):
    """Values that are only moved (compress, split, gather, sorts): the full range; floats with every
    special value (NaN, +-inf, -0.0, +0.0, the smallest subnormal) at drawn positions, and ties."""
    dt = np.dtype(dt)
    if dt.kind == "i":
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        x[: n // 2] = rng.integers(-3, 4, n // 2).astype(dt)  # ties
        return rng.permutation(x)
    x = (rng.standard_normal(n) * 100).astype(dt)
    x[: n // 4] = rng.integers(-3, 4, n // 4).astype(dt)
    x = rng.permutation(x)
    specials = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, np.finfo(dt).smallest_subnormal], dt)
    if n:
        x[rng.integers(0, n, 3 * specials.size)] = np.tile(specials, 3)
    return x


def _shuffle(rng, n):
    """A permutation of range(n) in which no id stays sorted: i -> (a i + b) mod n, a coprime to n
    and about n / phi (neighbours land far apart), cheaper than a random permutation at 2^22."""
    if n < 2:
        return np.arange(n, dtype=np.int64)
    a = max(1, int(n / 1.6180339887)) + int(rng.integers(0, 64))
    while np.gcd(a, n) != 1:
        a += 1
    return (np.arange(n, dtype=np.int64) * a + int(rng.integers(0, n))) % n


def _ptr(lens):
    return np.concatenate([[0], np.cumsum(np.asarray(lens, np.int64))]).astype(np.int64)


def _bins(lengths, cap):
    """First-fit decreasing: the lengths in bins of at most ``cap`` elements (one per bin when longer)."""
    bins = []
    for L in sorted(lengths, reverse=True):
        for b in bins:
            if sum(b) + L <= cap:
                b.append(L)
                break
        else:
            bins.append([L])
    return bins


# ----------------------------------------------------------------------------- rows strata

def _csr_case(op, stratum, label, dt, lens, rng, *, values="positive", k=2):
    """A case of ``op`` whose rows (segments) have the lengths ``lens`` (in this order)."""
    lens = np.asarray(lens, np.int64)
    ptr = _ptr(lens)
    nnz = int(ptr[-1])
    longest = int(lens.max()) if lens.size else 0
    dt = np.dtype(dt)
    if op in ("spmv", "spmm"):
        n_cols = 4099
        if dt.kind == "f":  # products <= 4: every partial sum of up to 2^22 of them exact in fp32
            lim = 2
        else:
            lim = max(1, min(int(np.iinfo(dt).max), int(np.sqrt(np.iinfo(np.int32).max // (longest + 1)))))
        data = rng.integers(1, lim, nnz, endpoint=True).astype(dt)
        indices = rng.integers(0, n_cols, nnz, dtype=np.int32)
        shape = (lens.size, n_cols)
        if op == "spmv":
            x = rng.integers(1, lim, n_cols, endpoint=True).astype(dt)
            return Case(stratum, label, ((ptr, indices, data, shape), x), {}, rows=lens)
        D = rng.integers(1, lim, (n_cols, k), endpoint=True).astype(dt)
        return Case(stratum, label, ((ptr, indices, data, shape), D), {}, rows=lens, per_row=k)
    x = _summands(rng, dt, nnz, max(nnz, 1), positive=values == "positive")
    if op == "segment_sum_csr":
        return Case(stratum, label, (x, ptr), {}, rows=lens)
    if op == "gather_csr":
        src = _moved(rng, dt, lens.size).reshape(lens.size, 1)
        return Case(stratum, label, (src, ptr), {}, rows=None)
    X = x.reshape(nnz, 1)
    kw = {"reduce": "sum"}
    if op == "segment_csr":
        return Case(stratum, label, (X, ptr), kw, rows=lens)
    index = np.repeat(np.arange(lens.size, dtype=np.int64), lens)
    kw["dim_size"] = int(lens.size)
    if op == "scatter":
        perm = _shuffle(rng, nnz)
        X, index = np.ascontiguousarray(X[perm]), index[perm]
    return Case(stratum, label, (X, index), kw, rows=lens)


def _row_cases(op, dts, regimes, rng):
    dt = _row_dtype(dts)
    if dt is None:
        return
    lengths = regimes.strata_row_lengths()
    bins = _bins([L for L in lengths if L > 0], regimes.max_n)
    for b in bins:
        lens = np.concatenate([[0], rng.permutation(np.array(b, np.int64)), [0]])
        label = (f"{dt}, rows of {', '.join(map(str, sorted(b)))} non-zeros" if len(b) <= 6 else
                 f"{dt}, {len(b)} rows of {min(b)}..{max(b)} non-zeros (the 2^k +- 1 row seams there)")
        yield _csr_case(op, "rows", label, dt, lens, rng)


# ----------------------------------------------------------------------------- dtype strata

def _flags(rng, n, regimes, fdt):
    f = (rng.random(n) < 0.01).astype(np.uint8)
    seams = np.array([p for p in regimes.seam_lengths() if p < n], np.int64)
    f[seams] = 1
    return f.astype(fdt)


def _dtype_case(op, dt, i, n, regimes, rng):
    """One input of ``op`` with ``n`` values of dtype ``dt`` (the i-th dtype of the op)."""
    label = f"{dt}, {n} values"
    fdt = ("bool", "int8", "uint8")[i % 3]
    if op in ("scan", "batched_scan"):
        if op == "batched_scan":
            x = _summands(rng, dt, 2 * n, n).reshape(2, n)
            label = f"{dt}, 2 rows of {n} values"
        else:
            x = _summands(rng, dt, n, n)
        return Case("dtype", label, (x,), {"exclusive": bool(i % 2)})
    if op in ("segmented_scan", "segmented_sum"):
        x = _summands(rng, dt, n, n)
        kw = {"exclusive": bool(i % 2)} if op == "segmented_scan" else {}
        return Case("dtype", label, (x, _flags(rng, n, regimes, fdt)), kw)
    if op in ("segment_sum_csr", "segment_csr", "segment_coo", "scatter", "gather_csr", "spmv", "spmm"):
        lens = rng.integers(0, 64, n // 16)
        lens[rng.integers(0, lens.size, lens.size // 8)] = 0  # empty rows
        cut = int(np.searchsorted(np.cumsum(lens), n))  # n values in all: the rows that fit, the last one trimmed
        lens = lens[: cut + 1].copy()
        lens[-1] -= int(lens.sum()) - n
        case = _csr_case(op, "dtype", f"{dt}, {int(lens.sum())} values in {lens.size} rows", dt, lens, rng,
                         values="signed", k=3)
        if op in ("segment_csr", "segment_coo", "scatter"):
            case.kwargs["reduce"] = ("sum", "mean")[i % 2]
        return case
    if op in ("compress", "compress_ind", "split", "split_ind"):
        density = 0.9 if op.startswith("compress") else 0.5
        m = (rng.random(n) < density).astype(fdt)
        return Case("dtype", label, (_moved(rng, dt, n), m), {})
    if op in ("radix_sort", "argsort"):
        return Case("dtype", label, (_moved(rng, dt, n),), {"descending": bool(i % 2)})
    if op == "topk":
        return Case("dtype", label, (_moved(rng, dt, n), n // 3), {"largest": not i % 2})
    if op == "weighted_sample":
        w = rng.integers(0, 65, n) * (rng.random(n) < 0.5)
        w[int(rng.integers(0, n))] = 64
        w = w.astype(dt) if np.dtype(dt).kind == "i" else (w / 64).astype(dt)
        u = (0.0, 0.25, 0.5, 0.75, 1 - 2**-53, 0.3, 0.9)[i % 7]
        return Case("dtype", label, (w, u), {})
    return None


def _dtype_cases(op, dts, regimes, rng):
    n = regimes.large_length()
    for i, dt in enumerate(dts):
        case = _dtype_case(op, dt, i, n, regimes, rng)
        if case is not None:
            yield case


# ----------------------------------------------------------------------------- N-d strata

def _nd_case(op, stratum, label, dt, lens, F, reduce, rng):
    """An N-d case: segments of ``lens`` positions, F features (scatter: positions permuted)."""
    lens = np.asarray(lens, np.int64)
    ptr = _ptr(lens)
    E = int(ptr[-1])
    if op == "gather_csr":
        return Case(stratum, label, (_moved(rng, dt, lens.size * F).reshape(lens.size, F), ptr), {})
    X = _summands(rng, dt, E * F, E, positive=True).reshape(E, F)  # every prefix fits: exact int64 words
    kw = {"reduce": reduce}
    seg = ("segment", "positions")
    if op == "segment_csr":
        return Case(stratum, label, (X, ptr), kw, rows=lens, per_row=F, unit=seg)
    index = np.repeat(np.arange(lens.size, dtype=np.int64), lens)
    kw["dim_size"] = int(lens.size)
    if op == "scatter":
        perm = _shuffle(rng, E)
        X, index = np.ascontiguousarray(X[perm]), index[perm]
    return Case(stratum, label, (X, index), kw, rows=lens, per_row=F, unit=seg)


def _nd_cases(op, dts, regimes, rng):
    turn = _interleave(dts)
    if not turn:
        return
    short = [0, 1, 2, 3, 5, 17, 31, 33, 0, 64, 65]
    if op == "scatter":
        for i, F in enumerate(SCATTER_WIDTHS):  # > 65536 positions, unsorted, one id with a long segment
            dt = turn[i % len(turn)]
            n_ids = 4097
            lens = rng.multinomial((MEDIUM_MAX + 1) - LONG_SEGMENT, np.full(n_ids, 1 / n_ids))
            lens[int(rng.integers(0, n_ids))] += LONG_SEGMENT
            yield _nd_case(op, "scatter", f"{dt}, F={F}, {int(lens.sum())} positions in any order over {n_ids} "
                           f"ids, one id at {int(lens.max())} positions", dt, lens, F, ("sum", "mean")[i % 2], rng)
        dt = turn[len(SCATTER_WIDTHS) % len(turn)]
        lens = rng.multinomial((1 << 17) + 1, np.full(MEDIUM_MAX + 1, 1 / (MEDIUM_MAX + 1)))
        yield _nd_case(op, "scatter", f"{dt}, F=1, {(1 << 17) + 1} positions in any order over {MEDIUM_MAX + 1} ids",
                       dt, lens, 1, "sum", rng)
        return
    for i, F in enumerate(WIDTHS):  # one long segment among short and empty ones, at every width
        dt = turn[i % len(turn)]
        lens = rng.permutation(np.array(short + [LONG_SEGMENT], np.int64))
        yield _nd_case(op, "width", f"{dt}, F={F}, a segment of {LONG_SEGMENT} positions among {len(short)} "
                       f"short and empty ones", dt, lens, F, ("sum", "mean")[i % 2], rng)
    for j, F in enumerate((1, 17)):  # outputs past every tile
        dt = turn[(len(WIDTHS) + j) % len(turn)]
        lens = rng.integers(0, 5, MEDIUM_MAX + 1)
        yield _nd_case(op, "many", f"{dt}, F={F}, {lens.size} segments of 0-4 positions ({int(lens.sum())} in all)",
                       dt, lens, F, ("sum", "mean")[j % 2], rng)


# ----------------------------------------------------------------------------- all

def cases(op, s, dtypes, regimes, seed=0):
    """The strata cases of ``op`` (an iterator of ``Case``, built lazily: one kernel-scale input in
    memory at a time) for a backend taking value ``dtypes`` (None: every dtype of the op), with its
    ``regimes`` (``conformance.regimes.Regimes``; max_n the tier's); ``seed`` picks the values."""
    dts = strata_dtypes(op, dtypes)
    if op not in _DOMAIN or not dts:
        return
    rng = np.random.default_rng([int(seed) % 2**32, sum(map(ord, op))])
    if op in ROW_OPS:
        yield from _row_cases(op, dts, regimes, rng)
    yield from _dtype_cases(op, dts, regimes, rng)
    if op in ND_OPS:
        yield from _nd_cases(op, dts, regimes, rng)
