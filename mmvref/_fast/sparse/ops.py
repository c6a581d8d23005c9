"""Sparse products: ``spmv`` (A x), ``spmm`` (A D, D dense), ``spgemm`` (A B): the family's
boundary (validation and normalisation of the CSR operands, once: ``_csr_input``), and the
choice of kernels by target (``_target.FAMILIES``: ``_portable_spmv`` with LLVM's gathers, or
its AVX2 gathers from ``_avx2``; ``_portable_spmm``; ``_portable_spgemm``).

## spmv

Fast CPU CSR sparse matrix-vector product: validate, allocate, call the
Numba kernels of ``_portable_spmv`` (the design is described there), or, for
a stencil matrix (``stencil_of``), those of ``_portable_stencil``.

This is the production path; ``mmvref.golden.spmv`` is the paper's Alg. 4
(global scan, gather, difference), which is not used here because in floating
point a row's error would scale with the global prefix sums instead of the row.

## spmm and spgemm

Fast CPU SpMM and SpGEMM (Numba-parallel).

``spmm(A, D)``: O = A D, rows in parallel (balanced by nonzeros), each row's
products added in index order into register accumulators (integers in int64
words, floats in the result dtype), so that
|err_ij| <= gamma_{len_i} sum_q |a_iq D_qj| (as spmv); float results equal
scipy's bit for bit, which adds in the same order (``_spmm_kernels``).

``spgemm(A, B, workspace="auto")``: C = A B, row-wise Gustavson, rows in
parallel. Workspace rule: ``"dense"`` (a value and a row marker per column of
B, per thread: 12 bytes x n_cols with 4-byte markers) when
n_cols <= DENSE_MAX_COLS, else ``"sparse"`` (the row's products appended as
(column, value) pairs, stably sorted by column, equal columns summed:
Insert-Sort-Merge with the Coord policy); the keyword overrides. Rows are
staged at an upper bound of their length (the row's number of products) and
compacted once, so every product is visited once; when that staging would
exceed STAGING_MAX_BYTES, a counting pass sizes the rows first (two visits, no
staging). Result: sorted column indices, duplicates summed, entries that are
exactly zero dropped (as scipy and the golden SpGEMMs); float sums in product
order, so the two workspaces agree bit for bit. Small products (below
SERIAL_COST: about a millisecond of work) run on the calling thread, rows
written at their final offsets as they are finished (nothing to compact).

Cold start (issue 31): every kernel is compiled for the paths the call takes
(see the kernel modules: specialized closures, one cache entry per
combination); small operands use serial kernels, which compile in about a
third of the time of parallel ones.

The CSR operands are read as given when their indices are int32 or int64 (no copy); other
integer index dtypes reach the kernels as one of those two (``_csr_input.index_arrays``: narrow
ones widened, unsigned ones viewed as signed once no value can wrap), so each kernel compiles for
at most four index dtype pairs. Validation is fused into the kernels' passes.
"""
from __future__ import annotations

import functools
import os

import threading

import numba
import numpy as np

from ..._dtypes import result_dtype
from ..._threading import guarded
from ..._validate import as_values, check_overflow, to_numpy
from .. import _target
from .._csr_input import csr_arrays, raise_invalid
from .._policy import like_input
from . import _portable_spgemm as KG
from . import _portable_spmm as KM
from . import _portable_spmv as K
from . import _portable_stencil as KS

__all__ = ["spmv", "spmm", "spgemm", "spmv_arrays", "spmv_plan", "spmm_arrays", "spmm_tasks", "FloatSpmv", "BoundSpmm"]

#: cost (nonzeros + ROW_COST * rows) per chunk below which fewer chunks are used
#: (one chunk runs on the calling thread); tests lower it to split rows across
#: chunks on small matrices
MIN_CHUNK_COST = 1 << 15
#: chunks per thread
CHUNKS_PER_THREAD = 8
#: kernel level override for tests (None: ``_target.level()``); see ``_path``
_LEVEL = None

_SAFE_INT64 = float(1 << 62)  # a row whose sum of |a_ij x_j| stays below this never left int64


@guarded
def spmv(A, x, *, overflow="raise"):
    """y = A @ x for a CSR matrix A; rows without entries give 0.

    Parameters
    - A: a ``scipy.sparse`` CSR matrix or CSR array, a torch sparse CSR CPU
      tensor, or a tuple ``(indptr, indices, data, shape)``. Column indices
      may be unsorted and repeated within a row (repeats are summed). Any
      integer index dtypes; the arrays are used as given (no copy) when they
      are contiguous int32/int64; 8- and 16-bit ones are widened to int32
      (a copy), unsigned 32- and 64-bit ones read as int32/int64 after a check
      that every value is in range (a uint32 column index with more than
      2**31 columns: a widening copy).
    - x: 1-D, length ``shape[1]``; numpy, array-like or torch CPU tensor.
    - overflow: integer results only. ``"raise"`` (default) raises
      OverflowError when an exact row result does not fit the result dtype;
      ``"wrap"`` returns it modulo 2**32 / 2**64 (two's complement).

    Returns y of length ``shape[0]``: a numpy array, or a torch tensor when x
    is one.

    Dtypes: the values are promoted with ``np.result_type(data, x)`` and the
    project rule (``mmvref._dtypes.result_dtype``) gives the result dtype:
    int8/int16/int32 -> int32, int64 -> int64, float16 -> float32, float32
    and float64 kept. Examples: (float32, float32) -> float32; (float32,
    float64) -> float64; (int32, float32) -> float64 (numpy's promotion);
    (int8, int16) -> int32. Unsigned, bool and complex values raise TypeError.

    Integers are exact: products and sums run in int64 that wraps (exact
    modulo 2**64); with ``overflow="raise"`` a row whose float64 sum of
    |a_ij x_j| reaches 2**62 is recomputed with Python integers, so the check
    is on the exact value, products and sums of int64 inputs included.

    Floats accumulate in the result dtype in an order that is not the index
    order (W-lane partial sums, rows split across threads, a tree at the
    end). For a row i with k stored entries and u the unit roundoff of the
    result dtype (2**-24 float32, 2**-53 float64):

        |y_i - sum_j a_ij x_j| <= gamma_k * sum_j |a_ij x_j|,  gamma_k = k u / (1 - k u),

    where a_ij and x_j are the inputs converted to the result dtype (exact,
    except int64 values above 2**53 in float64: then use gamma_{k+2}). This is
    the bound of any summation order of the k products, so it covers the
    reassociation. NaN and inf propagate as in IEEE arithmetic.

    Stencil matrices (at least 2**17 entries, most rows holding one pattern of
    at most 32 offsets from the diagonal, in one order, 9 to 16 not where the
    compile target has AVX-512: 2-D 5- and 9-point, 3-D 7- and 27-point
    stencils, tridiagonal and banded matrices; ``stencil_of``) take a
    kernel that does not read those rows' column indices; every row is then
    summed in one fixed order (four accumulators, ``_portable_stencil``), so
    the result does not depend on the thread count.

    Validation (indptr starts at 0, ends at nnz and never decreases; every
    column index in [0, shape[1])) is fused into the kernel's single pass over
    the matrix: an invalid matrix is never read out of bounds, and the error
    (ValueError naming indptr or indices) is raised after that pass.
    """
    src = x
    check_overflow(overflow)
    indptr, indices, data, (m, n) = csr_arrays(A)
    x = as_values(to_numpy(x, "x"), "x")
    if x.shape[0] != n:
        raise ValueError(f"x has length {x.shape[0]} but A has {n} columns (shape {(m, n)})")
    return like_input(spmv_arrays(indptr, indices, data, x, m, n, overflow), src)


def spmv_plan(indptr, m, nnz):
    """The chunks of an SpMV over this structure for the current thread count: (R, E), chunk c
    holding rows R[c]..R[c+1] and entries E[c]..E[c+1] (``partition``: about equal cost, entries +
    ROW_COST per row, a merge-path split of rows and entries; rows cut by a chunk border are
    combined from the chunks' parts afterwards). A structure without rows outside every chunk
    (offsets in order) gives R[0] = 0 and R[-1] = m."""
    C = _n_chunks(nnz + K.ROW_COST * m)
    if C == 1:
        return one_chunk_plan(m, nnz)
    return K.partition(indptr, C, K.ROW_COST)


@functools.lru_cache(maxsize=256)
def one_chunk_plan(m, nnz):
    """The plan of one chunk: all rows, all entries (what partition gives; the kernels check every row).
    Memoized (a small prepared matrix's first product: 0.6 us of two arrays): matrices of one size
    share the arrays, which nothing writes (plans are replaced whole, never changed)."""
    return np.array([0, m], np.int64), np.array([0, nnz], np.int64)


def one_chunk_for_any_threads(m, nnz):
    """Whether ``spmv_plan`` gives one chunk whatever the thread count: the cost is below two chunks'
    worth (``_n_chunks``), so a plan made with any thread count holds for every other."""
    return (nnz + K.ROW_COST * m) // MIN_CHUNK_COST <= 1


def spmv_arrays(indptr, indices, data, x, m, n, overflow, plan=None, out=None):
    """y = A x from validated parts (``spmv`` and ``PreparedMatrix.matvec``: one code path): data
    contiguous values, indptr/indices as ``index_arrays`` gives them, x 1-D of length n. ``plan``:
    ``spmv_plan``'s (R, E) (made here when None); ``out``: a contiguous array of m elements of the
    result dtype receiving y (float results only: integers are checked in int64 words first). The
    structure is checked in the kernel's pass whatever was known before (an invalid one raises ValueError)."""
    rdt = result_dtype(np.result_type(data.dtype, x.dtype))
    nnz = data.shape[0]
    if nnz == 0 or m == 0:
        if out is not None:
            out[...] = 0
            return out
        return np.zeros(m, dtype=rdt)
    if n == 0:  # entries but no column for them
        raise_invalid(indptr, indices, data, n)
    if rdt.kind == "f":
        stencil = stencil_of(indptr, indices, m, n, nnz)
        if stencil is not None:  # (the structure was checked on the way)
            if data.dtype != rdt:
                data = data.astype(rdt)
            y = np.empty(m, dtype=rdt) if out is None else out
            StencilSpmv(indptr, indices, data, stencil)(np.ascontiguousarray(x, dtype=rdt), y)
            return y
    R, E = spmv_plan(indptr, m, nnz) if plan is None else plan
    if R[0] != 0 or R[-1] != m:  # only offsets out of order leave rows outside every chunk
        raise_invalid(indptr, indices, data, n)
    C = R.size - 1
    umax = np.zeros(C, dtype=np.uint64)
    bad = np.zeros(C, dtype=np.bool_)
    if rdt.kind == "f":
        return _float(indptr, indices, data, x, rdt, R, E, umax, bad, m, n, out)
    y = _int(indptr, indices, data, x, rdt, R, E, umax, bad, m, n, overflow)
    if out is not None:
        out[...] = y
        return out
    return y


# ----------------------------------------------------------------------------- paths

def _float(indptr, indices, data, x, rdt, R, E, umax, bad, m, n, out=None):
    # values of another dtype (float16, integers with float x) are converted first: exact (the result
    # dtype holds them, see spmv's docstring), one extra pass over the values, and the kernels compile
    # for two value dtypes instead of seven (cold start, every user's first call)
    if data.dtype != rdt:
        data = data.astype(rdt)
    y = np.empty(m, dtype=rdt) if out is None else out
    run = FloatSpmv(indptr, indices, data, R, E)
    umax, bad = run(np.ascontiguousarray(x, dtype=rdt), y)
    _check_flags(indptr, indices, data, n, umax, bad)
    return y


#: a prepared matrix of at most this many columns whose float SpMV reads a uint16 copy of its column
#: indices (``compact_columns_pay``): 2 bytes an entry instead of 4 to stream, in the same pass over
#: the same values (``_portable_spmv._stream`` widens them to 32-bit lanes), so the same bits as
#: ``spmv``. Prepared matvec, 2 threads, 2-vCPU AVX-512 Zen 5 VM, attention matrices of 65,536 columns
#: (ms, int32 -> uint16): b-16 r-8 float32 2.12-2.19 -> 1.62, float64 3.48 -> 3.14; b-64 r-8 float32
#: 9.82 -> 7.51, float64 15.0-15.3 -> 13.9; b-64 r-2 float32 5.63 -> 4.36; b-2 / b-4 (1.2-3.9M
#: entries) 1.02-1.05x. The copy is made in the pass of ``prepare`` that checks the structure
COMPACT_MAX_COLS = 1 << 16
#: ... and at least this many entries (a smaller matrix's indices stay in cache: its products gain
#: nothing and a first one would compile the uint16 kernel)
COMPACT_MIN_NNZ = 1 << 17


def compact_columns_pay(n, nnz, dtype):
    """Whether a prepared matrix of n columns and nnz entries with values of ``dtype`` keeps a uint16
    copy of its column indices for its float SpMV (``COMPACT_MAX_COLS``, ``COMPACT_MIN_NNZ``; float
    values: an integer matrix's products keep its indices)."""
    return n <= COMPACT_MAX_COLS and nnz >= COMPACT_MIN_NNZ and np.dtype(dtype).kind == "f"


#: a prepared float matrix of at least COMPACT_MIN_NNZ entries whose rows average at least
#: SHARED_MIN_ROW entries (so that its chunks take the long-row path of every kernel path: LONG_ROW is
#: at most 64) keeps its columns once per run of consecutive rows that hold the same columns, when such
#: rows hold at least SHARED_SHARE of its entries (``shared_columns``): its SpMV streams the values and
#: reads each run's columns from cache (block-sparse attention: the rows of a block row share their
#: pattern). Prepared matvec, kernel bound, 2 threads, 2-vCPU AVX-512 Zen 5 VM, alternating in one
#: process, ms (int32 / uint16 copy / shared): attention b-16 r-2 float32 0.88-0.92 / 0.70-0.75 /
#: 0.62-0.64, float64 1.48-1.49 / 1.49-1.50 / 1.44-1.48; b-16 r-8 float32 1.41-1.42 / 1.20 / 1.13-1.16,
#: float64 2.42 / 2.35-2.37 / 2.10-2.12; b-64 r-4 float32 4.64-4.80 / 3.81-3.83 / 3.64-3.65, float64
#: 8.00-8.02 / 7.66-7.72 / 7.21-7.23; b-64 r-8 float32 6.30-6.48 / 5.06 / 4.58-4.59, float64 10.5-10.6 /
#: 9.95-9.97 / 9.19-9.27. The short-row b-2 and b-4 matrices (rows of 14-60) do not qualify
SHARED_MIN_ROW = 64
SHARED_SHARE = 0.5
#: rows sampled before the pass that finds the runs (in windows of 4): more than half must equal the
#: row before
SHARED_SAMPLES = 32


#: a prepared float matrix whose rows are short (on average below SHARED_MIN_ROW entries) and
#: whose sampled rows mostly hold the columns of the row before (``shares_columns``) has those rows
#: found by its structure check; when they hold at least PAIR_SHARE of its entries, its replayed
#: scalar batches sum such a row with the one before in one loop (``_portable_spmv.
#: _scalar_row_pairs``). Block-sparse attention with blocks of 2 or 4 rows (b-2, b-4), prepared
#: matvec, 2 threads: see ``_scalar_row_pairs``
PAIR_SHARE = 0.25


def pairs_may_pay(m, nnz, dtype):
    """Whether ``prepare`` looks for short rows that share their columns (``PAIR_SHARE``)."""
    return np.dtype(dtype).kind == "f" and m >= 2 and nnz >= COMPACT_MIN_NNZ and nnz < SHARED_MIN_ROW * m


def shared_columns_may_pay(m, nnz, dtype):
    """Whether ``prepare`` looks for rows that share their columns (``SHARED_MIN_ROW``)."""
    return np.dtype(dtype).kind == "f" and m >= 2 and nnz >= COMPACT_MIN_NNZ and nnz >= SHARED_MIN_ROW * m


def narrow_columns(indptr, indices):
    """A uint16 copy of the column indices (all below 2**16), in parallel by rows."""
    m = indptr.size - 1
    out = np.empty(indices.size, np.uint16)
    K.copy_lead_rows(indptr, indices, np.zeros(m, np.bool_), indptr.astype(np.int64), out)
    return out


def shares_columns(indptr, indices, m):
    """Whether more than half of SHARED_SAMPLES rows hold the columns of the row before: windows of 4
    consecutive rows at evenly spaced places (single rows at a fixed stride would see only one row
    of each run where the runs' length divides the stride). On an unchecked structure: a sampled
    row whose offsets are out of order or range is no hit."""
    rows = (np.linspace(1, max(1, m - 4), SHARED_SAMPLES // 4).astype(np.int64)[:, None] + np.arange(4)).ravel()
    rows = rows[rows < m]
    return rows.size > 0 and 2 * K.sample_rows_like_previous(indptr, indices, rows) > rows.size


def shared_columns(indptr, indices, same, n):
    """(columns, starts) of a matrix whose rows flagged ``same`` hold the columns of the row before
    (``check_structure`` found them): ``columns`` holds each run's columns once (uint16 over at most
    COMPACT_MAX_COLS columns, else the indices' dtype), ``starts[r]`` (int64) where row r's are."""
    starts = np.empty(indptr.size - 1, np.int64)
    kept = K.lead_starts(indptr, same, starts)
    columns = np.empty(kept, np.uint16 if n <= COMPACT_MAX_COLS else indices.dtype)
    K.copy_lead_rows(indptr, indices, same, starts, columns)
    return columns, starts


class FloatSpmv:
    """The float SpMV of one matrix (``data`` in the result dtype) over one chunking (R, E): the
    kernel made for its chunks' row kinds on the chosen path, with its arguments bound. ``spmv``
    makes one per call; ``PreparedMatrix`` keeps one, whose calls then cost a few microseconds
    less: after the first call it calls the compiled kernel's entry point directly (Numba's
    dispatcher would type all fourteen arguments again), while x and y have the types that call
    had (C-contiguous, aligned, writeable 1-D arrays of the result dtype: every y is, and an x
    that is not takes the dispatcher). ``__call__(xk, y)`` writes y = A xk, the rows cut by chunk
    borders combined, and returns the kernel's structure flags (umax, bad)."""

    __slots__ = ("indptr", "indices", "data", "R", "E", "C", "rdt", "kernel", "path", "long_row", "entry",
                 "_scratch", "one_tail", "batches", "batch_mode")

    def __init__(self, indptr, indices, data, R, E, plan_batches=False, columns=None, shared=None, pairs=None):
        """``plan_batches`` (a matrix whose structure was checked: ``PreparedMatrix``): the first call
        records the short-row batches' plan (``float_rows``'s ``batches``) and later calls replay it.
        ``columns``: the column indices as the kernel reads them, where they differ from ``indices``
        (a prepared matrix's compact uint16 copy, ``COMPACT_MAX_COLS``; the same values, so the same
        decisions and bits); the row kinds and runs are read off ``indices``. ``shared``: a prepared
        matrix's ``shared_columns``, read where every chunk takes the long-row path (else
        ``indices``: the short-row batches read a row's columns at its entries' places). ``pairs``
        (with ``plan_batches``): a prepared matrix's flags of the rows that hold the columns of the
        row before (``PAIR_SHARE``), which its replayed scalar batches take two rows at a time
        (``_portable_spmv.pair_bits``; the same bits)."""
        self.indptr, self.data, self.R, self.E = indptr, data, R, E
        self.C = R.size - 1
        self.rdt = data.dtype
        self.path = P = _path()
        self.long_row = P.LONG_ROW
        long_rows, short_rows = _row_kinds(indptr, R, P.LONG_ROW)
        if long_rows and P.LONG_ROW < getattr(P, "LONG_ROW_SHORT_RUNS", 0) and _short_runs(indices, K.lanes(self.rdt)):
            # rows of LONG_ROW.. entries whose columns come in runs shorter than a vector: batches
            self.long_row = P.LONG_ROW_SHORT_RUNS
            long_rows, short_rows = _row_kinds(indptr, R, self.long_row)
        self.indices = indices if columns is None else columns  # (what the kernel reads)
        self.entry = None
        self._scratch = {}  # thread id -> that thread's scratch (a dict: threading.local() costs a first product 0.5 us)
        self.one_tail = None  # one chunk: the scratch of every thread (``_new_scratch``)
        if shared is not None and long_rows and not short_rows:
            # (the batches' argument carries each row's place in the shared columns: ``float_kernel``)
            self.indices, self.batches = shared
            self.kernel = K.float_kernel(self.C > 1, True, False, shared=True)
            self.batch_mode = 0
            return
        planned = plan_batches and short_rows
        paired = planned and pairs is not None
        self.kernel = K.float_kernel(self.C > 1, long_rows, short_rows, pairs=paired)
        if paired:
            self.batches = K.pair_bits(pairs, E.item(-1), self.C)
        else:
            self.batches = np.zeros(K.batch_plan_size(E.item(-1), self.C) if planned else 0, np.int64)
        self.batch_mode = 1 if planned else 0  # 2 once a call has recorded the plan

    def bound(self, xk, y):
        """y = A xk through the bound entry point (``entry`` set by a first call with ``bind``), for
        an xk of the kinds that call had: a C-contiguous, aligned, writeable 1-D array of the result
        dtype (the caller checks), y a C-contiguous array of m elements. The chunks' boundary parts
        go to scratch arrays of the calling thread (a thread runs one product at a time; their
        values are written by the kernel before they are read), not four new arrays a call. The
        structure flags are not returned: a bound matrix was checked before (``PreparedMatrix``)."""
        tail = self.one_tail
        if tail is None:
            tail = self._scratch.get(threading.get_ident())
            if tail is None:
                tail = self._new_scratch()
        self.entry(self.indptr, self.indices, self.data, xk, y, *tail)
        if self.C > 1:  # (one chunk: the kernel wrote its first row)
            K.combine(y, self.R, tail[2], tail[3])

    def _new_scratch(self):
        """The kernel's arguments after x and y for the calling thread's products (``bound``, and a
        first call with ``bind``): R, E, its boundary parts and flags (first, last, umax, bad), the
        path's constants, the batch plan and the mode of the calls after the first (the plan
        replayed where it is recorded). One tuple, so a bound call does not look up eleven.

        One chunk: the kernel writes its boundary parts and flags but reads none of them back (it
        writes its first row to y itself), and a bound call does not read the flags: every
        one-chunk product of a dtype, on any thread, passes the same four arrays
        (``_ONE_CHUNK_SCRATCH``; a small matrix's first product made them new: 0.5 us of its 10),
        and one tail serves every thread (``one_tail``). (Numba holds the GIL through the kernel, so
        two calls do not overlap today; nothing here relies on that.)"""
        C, P = self.C, self.path
        if C == 1:
            parts = _ONE_CHUNK_SCRATCH.get(self.rdt)
            if parts is None:
                parts = _ONE_CHUNK_SCRATCH[self.rdt] = (np.zeros(1, self.rdt), np.zeros(1, self.rdt),
                                                        np.zeros(1, np.uint64), np.zeros(1, np.bool_))
        else:
            parts = (np.zeros(C, self.rdt), np.zeros(C, self.rdt), np.zeros(C, np.uint64), np.zeros(C, np.bool_))
        tail = (self.R, self.E, *parts, P.GATHER, self.long_row, P.SCALAR_SHORT, self.batches,
                2 if self.batch_mode else 0)
        if C == 1:
            self.one_tail = tail
        else:
            # (a thread's id may be reused by a later thread: it then takes these over, as it runs one product at a time)
            self._scratch[threading.get_ident()] = tail
        return tail

    def __call__(self, xk, y, bind=False):
        C, rdt, P = self.C, self.rdt, self.path
        if bind:  # (a prepared matrix: it makes the scratch the bound calls use; its flags are not returned)
            first, last, umax, bad = self._new_scratch()[2:6]
        else:
            first = np.zeros(C, dtype=rdt)
            last = np.zeros(C, dtype=rdt)
            umax = np.zeros(C, dtype=np.uint64)
            bad = np.zeros(C, dtype=np.bool_)
        mode = self.batch_mode
        args = (self.indptr, self.indices, self.data, xk, y, self.R, self.E, first, last, umax, bad, P.GATHER,
                self.long_row, P.SCALAR_SHORT, self.batches, mode)
        fl = xk.flags
        plain_x = fl.c_contiguous and fl.aligned and fl.writeable and xk.ndim == 1
        if self.entry is not None and plain_x and xk.dtype == rdt:
            self.entry(*args)
        elif bind and plain_x and xk.dtype == rdt:
            # the arguments' Numba types: those of the matrix's arrays, x and y vary; R, E and the
            # scratch arrays are new C-contiguous arrays of fixed dtypes (given rdt, which data's kind
            # holds), the last three are the path's constants
            # (R and E: int64; x: a plain vector of rdt, see plain_x; y and the matrix's arrays 1-D)
            key = (self.kernel, P, rdt.num, self.indptr.dtype.num, self.indices.dtype.num, self.data.dtype.num,
                   (self.indptr.flags.num & _TYPED_FLAGS) | (self.indices.flags.num & _TYPED_FLAGS) << 12
                   | (self.data.flags.num & _TYPED_FLAGS) << 24 | (y.flags.num & _TYPED_FLAGS) << 36)
            entry = _ENTRY_POINTS.get(key)
            if entry is None:
                self.kernel(*args)  # compiled (or loaded) and run; then its entry point looked up once
                entry = _ENTRY_POINTS[key] = self.kernel.overloads[
                    tuple(self.kernel.typeof_pyval(a) for a in args)].entry_point
            else:
                entry(*args)
            self.entry = entry
        else:
            self.kernel(*args)
        if mode == 1:
            self.batch_mode = 2  # the plan is recorded: later calls (and the bound ones) replay it
        if C > 1:  # (one chunk: the kernel wrote its first row)
            K.combine(y, self.R, first, last)
        return None if bind else (umax, bad)


_ONE_CHUNK_SCRATCH = {}  # result dtype -> the boundary parts and flags every one-chunk bound product writes

# ----------------------------------------------------------------------------- stencil matrices

#: a matrix of fewer entries is never taken for a stencil (its product is a few tens of
#: microseconds at most: the sample's call would be a visible share)
STENCIL_MIN_NNZ = 1 << 17
#: rows sampled for the pattern (``_portable_stencil.stencil_sample``; half of them must hold it):
#: the sample's reads miss the cache (two lines a row), on every ``spmv`` of a large matrix: 64
#: rows cost the 1.2M-entry attention matrix b-2 r-2 10-15 us of its 0.23 ms
STENCIL_SAMPLES = 32
#: the longest pattern taken, and the lengths not taken where the compile target has AVX-512. LLVM
#: vectorizes ``_stencil_run``'s rows by shuffles of the values' interleaved group up to 8 terms a
#: row; from 9 to 16 it emits gathers when it compiles for AVX-512, slower than the CSR kernel (Zen
#: 5, one thread, ns an entry: 5 terms 0.065, 8 0.112, 9 0.45, 12 0.89; a 2-D 9-point matrix of 1e6
#: rows, 2 threads: 6.0-6.6 ms against the CSR kernel's 3.2), and past 16 scalar code (0.30-0.35),
#: which still wins (3-D 27-point, 60^3 rows: 1.25 against 1.48 ms float32, 1.44-1.49 against 2.19
#: float64). Compiled for haswell or the x86-64 baseline no length gathers: 2-D 9-point 1.34-1.40
#: against 3.44 ms (haswell) and 1.50-1.53 against 5.75 (x86-64) float32; 27-point 1.24-1.29
#: against 1.48 and 2.55. The target's features decide (``_target.target()``: what LLVM compiles
#: for, whatever level MMVREF_SIMD asks of the other kernels).
STENCIL_MAX_TERMS = 32
STENCIL_GATHERED_TERMS = range(9, 17)
#: a stencil matrix holds at least this share of its entries in stencil rows (a 3-D 7-point
#: Poisson matrix of 36^3 rows: 0.87), and its other rows, which take the CSR kernel's scalar rows
#: (``_scalar_rows``), hold at most STENCIL_OTHER_ROW entries on average (longer rows go faster
#: by the CSR kernel's vector paths)
STENCIL_SHARE = 0.5
STENCIL_OTHER_ROW = 32


class Stencil:
    """A stencil matrix's pattern (``stencil_of``): ``off`` (a tuple of K offsets from the diagonal,
    in the rows' entry order) and ``runs`` (int64 flat (start, end) pairs of the maximal ranges of
    consecutive rows that hold it, ascending)."""

    __slots__ = ("off", "runs")

    def __init__(self, off, runs):
        self.off, self.runs = off, runs


def stencil_of(indptr, indices, m, n, nnz):
    """The ``Stencil`` of a CSR matrix whose rows, most of them, hold one pattern of offsets from
    the diagonal (``_portable_stencil``), else None: at least STENCIL_MIN_NNZ entries; one pattern
    held by half of STENCIL_SAMPLES sampled rows (a matrix that is no stencil stops here, after a
    call of a few microseconds); then one pass over the offsets and column indices finds the rows
    that hold it, which must have STENCIL_SHARE of the entries, the other rows short
    (STENCIL_OTHER_ROW). A function of the structure alone, so ``spmv`` and a prepared matrix
    decide alike. That pass checks the structure: an invalid one gives None (the CSR kernel then
    raises the error)."""
    if nnz < STENCIL_MIN_NNZ or m < 2 or n < 1:
        return None
    off = KS.stencil_sample(indptr, indices, n, STENCIL_SAMPLES, STENCIL_MAX_TERMS)
    if off.size == 0 or int(indptr[0]) != 0 or int(indptr[m]) != nnz:
        return None
    if off.size in STENCIL_GATHERED_TERMS and _target.target().has("avx512f"):
        return None
    off = tuple(off.tolist())  # (the kernels' pattern length a compile-time constant)
    blocks = _row_blocks(m)
    C = blocks.size - 1
    runs = np.empty(2 * m + 2, np.int64)  # (only the slots written are touched)
    counts = np.zeros(C, np.int64)
    umax = np.zeros(C, np.uint64)
    bad = np.zeros(C, np.bool_)
    KS.stencil_match(indptr, indices, off, n, blocks, runs, counts, umax, bad)
    if K.flagged(umax, bad, n):
        return None
    pairs = np.concatenate([runs[2 * b:2 * (b + c)] for b, c in zip(blocks[:-1].tolist(), counts.tolist())])
    starts, ends = pairs[0::2], pairs[1::2]
    if starts.size > 1:  # runs that go on across a block border are one run
        cont = starts[1:] == ends[:-1]
        if cont.any():
            starts = starts[np.concatenate(([True], ~cont))]
            ends = ends[np.concatenate((~cont, [True]))]
    rows = int((ends - starts).sum())
    held = rows * len(off)
    if held < STENCIL_SHARE * nnz or nnz - held > STENCIL_OTHER_ROW * (m - rows):
        return None
    flat = np.empty(2 * starts.size, np.int64)
    flat[0::2] = starts
    flat[1::2] = ends
    return Stencil(off, flat)


def _row_blocks(m):
    """Equal blocks of rows, CHUNKS_PER_THREAD per thread (a stencil matrix's rows cost alike)."""
    C = max(1, min(m, numba.get_num_threads() * CHUNKS_PER_THREAD))
    return np.linspace(0, m, C + 1).astype(np.int64)


class StencilSpmv:
    """The float SpMV of a stencil matrix (``data`` in the result dtype) over row blocks for the
    current thread count: the interface of ``FloatSpmv`` (``bound``, ``entry``, ``__call__``) for
    ``spmv`` and ``PreparedMatrix``. The rows' bits do not depend on the blocks
    (``_portable_stencil``).

    ``constant`` (a prepared matrix's): its first product also looks whether every stencil row
    holds the same values, bit for bit (a finite-difference matrix of constant coefficients, as the
    Poisson matrices); then the later products read those K values once (``coef``) instead of the
    values of every row: the same products summed in the same order, so the same bits, with x the
    only array a stencil row reads. The look reads the values a second time, from cache
    (``_portable_stencil.stencil_rows``). ``spmv`` does not look: one product could not win it back."""

    __slots__ = ("indptr", "indices", "data", "stencil", "rdt", "blocks", "entry", "coef", "_look")

    def __init__(self, indptr, indices, data, stencil, constant=False):
        self.indptr, self.indices, self.data, self.stencil = indptr, indices, data, stencil
        self.rdt = data.dtype
        self.blocks = _row_blocks(indptr.size - 1)
        # (its dispatcher: a product here is at least tens of microseconds)
        self.entry = KS.prepared_stencil_rows if constant else KS.stencil_rows
        self.coef = _NO_VALUES[self.rdt]  # (empty: the rows' values are read)
        self._look = constant and stencil.runs.size > 0  # (the first product looks for constant values)

    def bound(self, xk, y):
        """y = A xk (xk: a contiguous vector of the result dtype, y: m elements)."""
        st = self.stencil
        nobits = _NO_BITS[self.rdt]
        if not self._look:
            self.entry(self.indptr, self.indices, self.data, xk, y, st.runs, self.blocks, st.off, self.coef,
                       nobits, nobits, _NO_MISS)
            return
        bits = self.data.view(nobits.dtype)
        first = int(self.indptr[int(st.runs[0])])
        K = len(st.off)
        miss = np.zeros(self.blocks.size - 1, np.bool_)
        self.entry(self.indptr, self.indices, self.data, xk, y, st.runs, self.blocks, st.off, self.coef,
                   bits, bits[first:first + K].copy(), miss)
        if not miss.any():
            self.coef = self.data[first:first + K].copy()
        self._look = False

    def __call__(self, xk, y, bind=False):
        self.bound(xk, y)


#: ``StencilSpmv``'s arguments where its product reads every row's values and does not look at them
_NO_VALUES = {np.dtype(t): np.empty(0, t) for t in (np.float32, np.float64)}
_NO_BITS = {np.dtype(np.float32): np.empty(0, np.uint32), np.dtype(np.float64): np.empty(0, np.uint64)}
_NO_MISS = np.empty(0, np.bool_)


#: (kernel, kinds of its arguments) -> the compiled entry point: a prepared matrix's first product
#: (``FloatSpmv``, ``BoundSpmm``) binds by a lookup here (Numba's typeof of fourteen arguments took
#: 90 us, 8 of the 1,000-row matrix's products, on every new matrix; now once per process and kind
#: of arguments)
_ENTRY_POINTS = {}


def _arg_kind(a):
    """What Numba's type of an argument depends on: an array's dtype, dimensions and flags, the
    Python type of anything else."""
    if isinstance(a, np.ndarray):
        return a.dtype, a.ndim, a.flags.num & _TYPED_FLAGS
    return type(a)


#: numpy's flag bits of an array that its Numba type depends on: C_CONTIGUOUS, F_CONTIGUOUS, ALIGNED,
#: WRITEABLE (not OWNDATA and the others, which vary between arrays of one type)
_TYPED_FLAGS = 0x0001 | 0x0002 | 0x0100 | 0x0400


def _row_kinds(indptr, R, long_row):
    """(any chunk has long whole rows, any has short ones), as the float kernel decides per
    chunk (whole rows r0+1 .. r1-1 averaging at least long_row entries: long): the kernel is
    compiled for those paths only. One chunk: in Python; several: ``row_kinds``."""
    if R.size == 2:
        ra, rb = 1, R.item(1)
        if ra >= rb:
            return False, False
        lng = indptr.item(rb) - indptr.item(ra) >= long_row * (rb - ra)
        return lng, not lng
    kinds = K.row_kinds(indptr, R, long_row)
    return bool(kinds & 1), bool(kinds & 2)


#: ``_short_runs`` reads this many windows of RUN_WINDOW consecutive entries, evenly spaced
RUN_SAMPLES = 64
RUN_WINDOW = 64
#: below this share of vector-long stretches of consecutive columns, a matrix's runs are short
RUN_SHARE = 0.5


def _short_runs(indices, lanes):
    """Whether few of the matrix's stretches of ``lanes`` neighbouring entries hold consecutive
    columns (the stretches ``simd_dot`` reads with one contiguous load instead of a gather): under
    RUN_SHARE of the stretches at every offset within RUN_SAMPLES evenly spaced windows of
    RUN_WINDOW entries (all entries when fewer). A function of the structure alone, so ``spmv`` and
    a prepared matrix decide alike; stretches across a row border count (as broken ones, mostly).
    Shares on the attention matrices, which fixed the threshold (``_avx2.LONG_ROW_SHORT_RUNS``):
    b-2 0.14-0.22 (8 lanes) / 0.27-0.45 (4 lanes), b-4 0.24-0.39 / 0.50-0.67, b-16 0.71-0.79 /
    0.87-0.91; a random matrix about 0."""
    nnz = indices.shape[0]
    if nnz <= RUN_SAMPLES * RUN_WINDOW:
        sample = indices.reshape(1, -1)
    else:
        starts = np.linspace(0, nnz - RUN_WINDOW, RUN_SAMPLES).astype(np.int64)
        sample = indices[starts[:, None] + np.arange(RUN_WINDOW)]
    if sample.shape[1] < lanes:
        return True
    # steps[:, j] = consecutive steps among the first j neighbour pairs; a stretch j..j+lanes-1 is
    # consecutive when all its lanes-1 pairs are
    steps = np.zeros((sample.shape[0], sample.shape[1]), np.int32)
    np.cumsum(np.diff(sample, axis=1) == 1, axis=1, out=steps[:, 1:])
    runs = steps[:, lanes - 1:] - steps[:, :1 - lanes or None] == lanes - 1
    return np.count_nonzero(runs) < RUN_SHARE * runs.size


def _combine(y, R, first, last, kernel=None):
    """The boundary rows' parts added in chunk order (``combine``); one chunk: row 0 is its first
    part (added to 0, as combine does: -0.0 becomes 0.0)."""
    if R.size == 2:
        if R[0] < y.size:
            y[R[0]] = y.dtype.type(0) + first[0]
    else:
        (kernel or K.combine)(y, R, first, last)


def _int(indptr, indices, data, x, rdt, R, E, umax, bad, m, n, overflow):
    # x of another integer dtype than the values is widened to int64 (one pass over x; the kernels
    # compile for 7 dtype pairs instead of 16)
    xk = np.ascontiguousarray(x) if x.dtype == data.dtype else x.astype(np.int64)
    y = np.empty(m, dtype=np.int64)
    C = R.size - 1
    check = overflow == "raise"
    bnd = np.zeros(m if check else 0, dtype=np.float64)  # not written without check
    first = np.zeros(C, dtype=np.int64)
    last = np.zeros(C, dtype=np.int64)
    fb = np.zeros(C, dtype=np.float64)
    lb = np.zeros(C, dtype=np.float64)
    K.int_kernel(C > 1, check)(indptr, indices, data, xk, y, bnd, R, E, first, last, fb, lb, umax, bad)
    _check_flags(indptr, indices, data, n, umax, bad)
    _combine(y, R, first, last)
    if check:
        _combine(bnd, R, fb, lb, K.combine_bound)
        info = np.iinfo(rdt)
        suspect = np.flatnonzero(bnd >= _SAFE_INT64)
        if suspect.size:
            exact = {int(r): _exact_row(indptr, indices, data, x, int(r)) for r in suspect}
            for r, v in exact.items():
                if v < info.min or v > info.max:
                    raise _overflow_error(rdt, r, v)
                y[r] = v
        if rdt != np.int64:
            out = (y < info.min) | (y > info.max)
            if out.any():
                r = int(np.argmax(out))
                raise _overflow_error(rdt, r, int(y[r]))
    return y.astype(rdt, copy=False)


def _exact_row(indptr, indices, data, x, r):
    lo, hi = int(indptr[r]), int(indptr[r + 1])
    return sum(int(a) * int(x[int(j)]) for a, j in zip(data[lo:hi].tolist(), indices[lo:hi].tolist()))


def _overflow_error(rdt, r, v):
    return OverflowError(
        f"spmv: row {r} of the result is {v}, which overflows {rdt}; pass overflow='wrap' for "
        f"two's-complement wrap-around" + (" or use int64 values" if rdt == np.int32 else ""))


def _path():
    """The module of the chosen float path (``_target.FAMILIES["spmv"]``): it gives the
    kernels their gather kind and LONG_ROW."""
    P = _PATHS.get(_LEVEL)
    if P is None:
        P = _PATHS[_LEVEL] = _target.kernels("spmv", _LEVEL)
    return P


_PATHS = {}  # _LEVEL -> the path's module (the process's compile target, and so its level, is fixed)


def _n_chunks(cost):
    T = numba.get_num_threads()
    return int(max(1, min(T * CHUNKS_PER_THREAD, cost // MIN_CHUNK_COST)))


def _check_flags(indptr, indices, data, n, umax, bad):
    """A kernel saw an inconsistent offset, or read a column index >= n (a negative one counts
    as huge: umax is unsigned); n >= 1."""
    if (bad[0] or int(umax[0]) >= n) if bad.size == 1 else K.flagged(umax, bad, n):
        raise_invalid(indptr, indices, data, n)


# ----------------------------------------------------------------------------- spmm and spgemm

#: the dense workspace is used up to this many columns (value + 4- or 8-byte marker each, per thread)
DENSE_MAX_COLS = 1 << 22
#: staging buffers (products x (index + value) bytes) above this size: count first instead
STAGING_MAX_BYTES = 1 << 30
#: a row costs as much as this many products when balancing the tasks
ROW_COST = 2
#: spgemm: operands (entries + rows) and products (+ ROW_COST per row) below this are done on the
#: calling thread (about a millisecond of work: no parallel launch, and serial kernels, which
#: compile in a fraction of the time of parallel ones: a first call's cold start)
SERIAL_COST = 1 << 17


def _tasks(cost_ptr, parts):
    """Row boundaries of ``parts`` tasks of about equal cost; cost_ptr[r] = cost before row r."""
    m = len(cost_ptr) - 1
    total = int(cost_ptr[-1])
    if m == 0:
        return np.zeros(1, np.int64)
    cuts = np.searchsorted(cost_ptr, np.linspace(0, total, parts + 1)[1:-1], side="right") - 1
    return np.unique(np.concatenate([[0], np.clip(cuts, 0, m), [m]])).astype(np.int64)


def _operand(A, name):
    """(indptr, indices, data, (m, n)) as given (no copy), O(1) checks only."""
    return csr_arrays(A, name, f"{name}.data")


# ----------------------------------------------------------------------------- SpMM

@guarded
def spmm(A, D, *, overflow="raise"):
    """O = A D for CSR A and dense D.

    Parameters
    - A: scipy.sparse CSR matrix/array, torch sparse CSR CPU tensor or
      ``(indptr, indices, data, shape)``; unsorted and repeated column
      indices allowed (repeats summed); index dtypes as in ``spmv``.
    - D: 2-D, ``shape[1]`` rows, k columns; numpy, array-like or torch CPU.
    - overflow: integers only: ``"raise"`` (default) raises OverflowError when
      an exact entry does not fit the result dtype, ``"wrap"`` wraps.

    Returns an (m, k) array (a torch tensor when D is one). Result dtype: the
    project rule on ``np.result_type(A.data, D)`` (int8/16/32 -> int32, int64,
    float16 -> float32, float32/float64 kept). Floats: each entry's products
    in index order, |err_ij| <= gamma_{len_i} sum_q |a_iq D_qj| with
    gamma_l = l u / (1 - l u). Integers exact (int64 words; entries whose
    bound reaches 2**63 recomputed with Python integers). Empty rows give 0.
    Invalid structure raises ValueError naming indptr or indices.
    """
    src = D
    check_overflow(overflow)
    indptr, indices, data, (m, n) = _operand(A, "A")
    D = as_values(to_numpy(D, "D"), "D", ndim=2)
    if D.shape[0] != n:
        raise ValueError(f"D must have {n} rows (A has {n} columns), got shape {D.shape}")
    return like_input(spmm_arrays(indptr, indices, data, D, m, n, overflow), src)


def spmm_one_task(m, nnz, k):
    """Whether ``spmm_tasks`` gives one task (the calling thread) whatever the thread count."""
    return (nnz + m) * k < SERIAL_COST


def spmm_tasks(indptr, m, nnz, k):
    """The row tasks of an SpMM with k columns over this structure for the current thread count:
    one task (the calling thread) below SERIAL_COST, else tasks of about equal entries."""
    if spmm_one_task(m, nnz, k):
        return np.array([0, m], np.int64)
    return _tasks(indptr, numba.get_num_threads() * 4)


def spmm_arrays(indptr, indices, data, D, m, n, overflow, tasks=None, out=None, shared=None):
    """O = A D from validated parts (``spmm`` and ``PreparedMatrix.matmat``: one code path); D 2-D
    with n rows. ``tasks``: ``spmm_tasks``'s (made here when None); ``out``: a C-contiguous (m, k)
    array of the result dtype receiving O (float results only); ``shared``: a prepared (checked)
    matrix's ``shared_columns``, which a float product reads (``shared_rows_kernel``: the same bits)."""
    dt = np.result_type(data, D)
    rdt = result_dtype(dt)
    k = D.shape[1]
    wd = rdt if dt.kind == "f" else np.dtype(np.int64)
    nnz = data.shape[0]
    if nnz and n == 0:
        raise_invalid(indptr, indices, data, n)
    if m == 0 or k == 0 or nnz == 0:
        if nnz:  # no columns of D: the kernel pass that checks the structure does not run
            _validate(indptr, indices, data, n, "A")
        if out is not None:
            out[...] = 0
            return out
        return np.zeros((m, k), rdt)
    res = np.empty(m * k, wd) if out is None or dt.kind != "f" else out.reshape(-1)
    Dw = np.ascontiguousarray(D, dtype=wd).reshape(-1)
    if tasks is None:
        tasks = spmm_tasks(indptr, m, nnz, k)
    bad = np.zeros(tasks.size - 1, np.bool_)
    if shared is not None and dt.kind == "f":
        KM.shared_rows_kernel(k, tasks.size > 2)(indptr, shared[0], shared[1], np.ascontiguousarray(data, dtype=wd),
                                                 Dw, k, res, tasks)
    else:
        KM.rows_kernel(k, tasks.size > 2)(indptr, indices, np.ascontiguousarray(data, dtype=wd), Dw, k, n, res,
                                          tasks, bad)
    if bad.any():
        raise_invalid(indptr, indices, data, n)
    res = res.reshape(m, k)
    if dt.kind != "f":
        res = _spmm_int_result(res, indptr, indices, data, D, rdt, overflow)
        if out is not None:
            out[...] = res
    return res if out is None else out


#: ``spmm_into_any_k``'s ``bad`` argument, which its kernel never writes
_NO_FLAGS = np.zeros(1, np.bool_)


def spmm_into_any_k(indptr, indices, data, D, out, tasks):
    """out = A D for a float CSR whose structure its builder made valid (``mmvref.pyg``'s graphs)
    and row ``tasks`` of the caller's: ``spmm_arrays``'s products and bits, by the kernel compiled
    once for every k (``rows_kernel(None, ...)``: a graph's feature widths are not known when a
    precompile runs). data, D (n, k) and out (m, k) of one float dtype, D and out C-contiguous. The
    structure is not checked (the kernel for any k reads none of its rows' checks): the caller's
    builder guarantees offsets in order and columns in [0, n)."""
    KM.rows_kernel(None, tasks.size > 2)(indptr, indices, data, D.reshape(-1), D.shape[1], D.shape[0],
                                         out.reshape(-1), tasks, _NO_FLAGS)


class BoundSpmm:
    """The float SpMM of one checked matrix for k columns of its values' dtype over one set of row
    tasks: ``spmm_arrays``'s kernel call with its compiled entry point bound (Numba's dispatcher
    would type ten arguments again on every call: about 3 us, a third of a 1,000-row matrix's
    product at k = 16). ``PreparedMatrix.matmat`` binds one per k after a first product. ``bound(X,
    res)`` writes res (m * k, C-contiguous) = A X for an X of the kinds the binding call had
    (C-contiguous, aligned, writeable (n, k) of the values' dtype: the caller checks); the same
    kernel with the same arguments as ``spmm_arrays``: the same bits."""

    __slots__ = ("indptr", "indices", "data", "k", "n", "tasks", "entry", "threads", "_scratch", "shared")

    def __init__(self, indptr, indices, data, n, k, tasks, threads, shared=None):
        """``shared``: the matrix's ``shared_columns``, read by ``shared_rows_kernel`` (as ``spmm_arrays``)."""
        self.indptr, self.indices, self.data, self.n, self.k, self.tasks = indptr, indices, data, n, k, tasks
        self.threads = threads  # the thread count the tasks were made for (None: one task for any count)
        self._scratch = threading.local()
        self.shared = shared
        if shared is not None:
            kernel = KM.shared_rows_kernel(k, tasks.size > 2)
            m = indptr.size - 1
            args = (indptr, shared[0], shared[1], data, np.empty(n * k, data.dtype), k, np.empty(m * k, data.dtype),
                    tasks)
            sig = tuple(kernel.typeof_pyval(a) for a in args)  # (once a matrix and k: its product is long)
            if sig not in kernel.overloads:
                kernel.compile(sig)
            self.entry = kernel.overloads[sig].entry_point
            return
        kernel = KM.rows_kernel(k, tasks.size > 2)
        # the arguments' Numba types vary with the matrix's arrays only (X, the result and the flags
        # are plain arrays of fixed kinds, k and n Python ints): typed once per process and kinds
        # (typing the nine arguments costs 60 us, six products of the 1,000-row matrix at k = 16)
        key = (kernel, _arg_kind(indptr), _arg_kind(indices), _arg_kind(data), tasks.dtype)
        entry = _ENTRY_POINTS.get(key)
        if entry is None:
            m = indptr.size - 1
            args = (indptr, indices, data, np.empty(n * k, data.dtype), k, n, np.empty(m * k, data.dtype), tasks,
                    np.zeros(tasks.size - 1, np.bool_))
            sig = tuple(kernel.typeof_pyval(a) for a in args)
            if sig not in kernel.overloads:
                kernel.compile(sig)
            entry = _ENTRY_POINTS[key] = kernel.overloads[sig].entry_point
        self.entry = entry

    def bound(self, X, res):
        if self.shared is not None:
            self.entry(self.indptr, self.shared[0], self.shared[1], self.data, X.reshape(-1), self.k, res, self.tasks)
            return
        bad = getattr(self._scratch, "bad", None)  # not read: the matrix was checked when it was prepared
        if bad is None:
            bad = self._scratch.bad = np.zeros(self.tasks.size - 1, np.bool_)
        self.entry(self.indptr, self.indices, self.data, X.reshape(-1), self.k, self.n, res, self.tasks, bad)


def _spmm_int_result(out, indptr, indices, data, D, rdt, overflow):
    """int64 words -> the result dtype: exact check (Python integers where int64 may have wrapped)."""
    m, k = out.shape
    ma = max(abs(int(data.min())), abs(int(data.max())))
    mx = max(abs(int(D.min())), abs(int(D.max()))) if D.size else 0
    longest = int(np.diff(indptr).max())
    info = np.iinfo(rdt)
    if longest * ma * mx < 2**63:  # the int64 words are the exact values
        if overflow == "raise" and (out.min() < info.min or out.max() > info.max):
            raise OverflowError(f"spmm: a result overflows {rdt}; pass overflow='wrap'")
        return out.astype(rdt)
    if overflow == "raise":
        Do = D.astype(object)
        for r in range(m):
            exact = sum((int(data[q]) * Do[int(indices[q])] for q in range(indptr[r], indptr[r + 1])),
                        np.zeros(k, object))
            if any(v < info.min or v > info.max for v in exact):
                raise OverflowError(f"spmm: row {r} of the result overflows {rdt}; pass overflow='wrap'")
    return out.astype(rdt)  # int64 words are exact modulo 2**64: narrowing wraps like hardware


# ----------------------------------------------------------------------------- SpGEMM: structure

def _validate(indptr, indices, data, ncols, name, narrow=None, same=None):
    """Offsets in order and column indices in [0, ncols) (ValueError naming ``name``), in parallel;
    ``narrow`` (nnz uint16, ``compact_columns_pay``): also receives the column indices; ``same`` (m
    flags, ``shared_columns``): also receives which rows hold the row before's columns. Returns the
    entries of those rows (0 without ``same``)."""
    m = len(indptr) - 1
    if m == 0:
        return 0
    chunks = _row_chunks(m)
    bad = np.zeros(chunks.size - 1, np.bool_)
    check = KG.check_structure_kernel(narrow is not None, same is not None)  # (each compiles its own path only)
    held = check(indptr, indices, ncols, chunks, bad, _NO_NARROW if narrow is None else narrow,
                 _NO_SAME if same is None else same)
    if bad.any():
        raise_invalid(indptr, indices, data, ncols, name)
    return held


_NO_NARROW = np.zeros(0, np.uint16)
_NO_SAME = np.zeros(0, np.bool_)


def _row_chunks(m):
    return np.linspace(0, m, min(m, numba.get_num_threads() * 4) + 1).astype(np.int64)


def _structure(ap, ai, ad, bp, bi, bd, m, n, p):
    """Both operands validated (ValueError naming A, then B) and prods[r] = the number of
    products of row r of A B, in one pass (``_portable_spgemm.structure``). Small operands
    (below SERIAL_COST) on the calling thread instead: the checks by a small serial kernel
    (``valid_small``: 0.1 s to compile), the products by numpy (a few passes over arrays of at
    most SERIAL_COST entries), where the parallel kernel would cost a first call (cold start)
    about a third of a second to compile."""
    if ai.size + bi.size + m + n < SERIAL_COST:
        if not _valid_small(ap, ai, n):
            raise_invalid(ap, ai, ad, n, "A")
        if not _valid_small(bp, bi, p):
            raise_invalid(bp, bi, bd, p, "B")
        cs = np.zeros(ai.size + 1, np.int64)  # cs[q] = products of A's entries before q
        np.cumsum(np.diff(bp.astype(np.int64, copy=False))[ai], out=cs[1:])
        return cs[ap[1:]] - cs[ap[:-1]]
    prods = np.zeros(m, np.int64)
    ca = _row_chunks(m) if m else np.zeros(1, np.int64)
    cb = _row_chunks(n) if n else np.zeros(1, np.int64)
    bad_a = np.zeros(ca.size - 1, np.bool_)
    bad_b = np.zeros(cb.size - 1, np.bool_)
    KG.structure(ap, ai, bp, bi, n, p, ca, cb, prods, bad_a, bad_b, max(ca.size, cb.size) - 1)
    if bad_a.any():
        raise_invalid(ap, ai, ad, n, "A")
    if bad_b.any():
        raise_invalid(bp, bi, bd, p, "B")
    return prods


def _valid_small(indptr, indices, ncols):
    """Offsets non-decreasing (the ends are checked already: 0 and nnz) and column indices in
    [0, ncols), for small operands: on the calling thread (``_portable_spgemm.valid_small``)."""
    return KG.valid_small(indptr, indices, ncols)


def _one_index_dtype(*arrays):
    """The four index arrays of an SpGEMM in one dtype: int32 when all are, int64 when all are int32 or
    int64 (a widening copy of the int32 ones). Every kernel then compiles for 2 index dtypes instead of
    up to 16 combinations (a user's first call, and the tests, compile far less); the copy is one pass over
    the input indices, small beside the products. (``index_arrays`` has made every one int32 or int64.)"""
    kinds = {a.dtype for a in arrays}
    if kinds <= {np.dtype(np.int32)} or not kinds <= {np.dtype(np.int32), np.dtype(np.int64)}:
        return arrays
    return tuple(np.ascontiguousarray(a, dtype=np.int64) for a in arrays)


@guarded
def spgemm(A, B, *, workspace="auto", overflow="raise"):
    """C = A B for CSR A (m x n) and B (n x p).

    A, B: scipy.sparse CSR matrices/arrays, torch sparse CSR CPU tensors or
    ``(indptr, indices, data, shape)`` tuples (any column order, repeats
    allowed). Returns a scipy ``csr_array`` when A is one, else a
    ``csr_matrix``, with sorted column indices, duplicates summed and exact
    zeros dropped; int32 index arrays when they fit. ``workspace``: "auto"
    (dense up to DENSE_MAX_COLS columns of B, else sparse), "dense" or
    "sparse". Result dtype: the project rule on the promoted value dtype.
    Floats: each entry is the sum of its products in product order (A's row
    order, then B's). Integers exact: int64 words, a result outside the result
    dtype raises OverflowError unless ``overflow="wrap"`` (two's complement).
    """
    import scipy.sparse as sps

    if workspace not in ("auto", "dense", "sparse"):
        raise ValueError(f"workspace must be 'auto', 'dense' or 'sparse', got {workspace!r}")
    check_overflow(overflow)
    ap, ai, ad, (m, n) = _operand(A, "A")
    bp, bi, bd, (n2, p) = _operand(B, "B")
    if n != n2:
        raise ValueError(f"shapes {(m, n)} and {(n2, p)} do not multiply")
    ap, ai, bp, bi = _one_index_dtype(ap, ai, bp, bi)
    prods = _structure(ap, ai, ad, bp, bi, bd, m, n, p)  # raises on an invalid A, then B
    dt = np.result_type(ad.dtype, bd.dtype)
    rdt = result_dtype(dt)
    wd = rdt if dt.kind == "f" else np.dtype(np.int64)
    dense = workspace == "dense" or (workspace == "auto" and p <= DENSE_MAX_COLS)
    if dense:
        _check_dense_workspace(p, wd)
    auto = workspace == "auto"  # rows of at most RANK_MAX products by the coordinate list, also when dense
    ad = np.ascontiguousarray(ad, dtype=wd)
    bd = np.ascontiguousarray(bd, dtype=wd)
    mark_proto = np.zeros(0, np.int32 if m < 2**31 else np.int64)

    pptr = np.zeros(m + 1, np.int64)
    np.cumsum(prods, out=pptr[1:])
    total = int(pptr[-1])
    idx_t = np.dtype(np.int32 if max(p, total) < 2**31 else np.int64)
    serial = total + ROW_COST * m < SERIAL_COST
    if serial:
        tasks = np.array([0, m], np.int64)
    else:
        cost = pptr + ROW_COST * np.arange(m + 1, dtype=np.int64)
        tasks = _tasks(cost, numba.get_num_threads() * 8)
    counts = np.zeros(m, np.int64)
    # the row paths this call takes (the kernels are compiled for those only): rows of at most
    # RANK_MAX products by the coordinate list (the sparse workspace, or "auto"), the others by
    # the bitmap or the merge sort; the bitmap's sort fallback only where B has more columns than
    # SCAN_WORDS words of them
    longest = int(prods.max()) if m else 0
    small = (not dense or auto) and m > 0 and int(prods.min()) <= KG.RANK_MAX
    big = (dense and not auto and m > 0) or longest > KG.RANK_MAX
    sort = dense and ((p + 63) >> 6) > KG.SCAN_WORDS

    if total * (idx_t.itemsize + wd.itemsize) <= STAGING_MAX_BYTES:
        # one visit of every product: rows staged at pptr, then compacted (one thread: written at
        # their final offsets as they are finished, nothing to compact)
        si = np.empty(total, idx_t)
        sd = np.empty(total, wd)
        if total:
            key = (dense, small, big, sort, True, not serial, serial)
            KG.fill_kernel(*key)(ap, ai, ad, bp, bi, bd, p, prods, tasks, pptr, si, sd, counts,
                                 *KG.fill_scratch(key, tasks.size - 1, p, longest, idx_t, wd))
        cp = np.zeros(m + 1, np.int64)
        np.cumsum(counts, out=cp[1:])
        nnz = int(cp[-1])
        if nnz == total:  # no duplicates, no zeros: the staging is the result
            ci, cd = si, sd
        elif serial:
            ci, cd = si[:nnz].copy(), sd[:nnz].copy()
            del si, sd
        else:
            ci = np.empty(nnz, idx_t)
            cd = np.empty(nnz, wd)
            KG.compact(pptr, counts, cp, tasks, si, sd, ci, cd)
            del si, sd
    else:
        # count the distinct columns first, fill at the final places, drop zeros after
        if dense:
            KG.count_dense(ap, ai, bp, bi, p, tasks, counts, mark_proto)
        else:
            KG.count_sparse(ap, ai, bp, bi, prods, tasks, counts)
        cp = np.zeros(m + 1, np.int64)
        np.cumsum(counts, out=cp[1:])
        ci = np.empty(int(cp[-1]), idx_t)
        cd = np.empty(int(cp[-1]), wd)
        filled = np.zeros(m, np.int64)
        key = (dense, small, big, sort, False, not serial, False)
        KG.fill_kernel(*key)(ap, ai, ad, bp, bi, bd, p, prods, tasks, cp, ci, cd, filled,
                             *KG.fill_scratch(key, tasks.size - 1, p, longest, idx_t, wd))

    if dt.kind != "f":
        cd = _spgemm_int_result(cd, ap, ai, ad, bp, bi, bd, prods, rdt, overflow)
    cls = sps.csr_array if isinstance(A, getattr(sps, "csr_array", ())) else sps.csr_matrix
    C = cls((m, p), dtype=rdt)
    # built from parts already valid (sorted, in range): no O(nnz) format check by scipy
    C.data, C.indices, C.indptr = cd.astype(rdt, copy=False), ci, cp.astype(idx_t)
    if C.nnz and not (cd != 0).all():  # the counting path keeps cancellations until here
        C.eliminate_zeros()
    C.has_sorted_indices = True
    return C


def _check_dense_workspace(p, wd):
    """The dense workspace (per thread: a value and a bit per column of B) must fit
    in half the machine's memory: a failed allocation inside the parallel kernel
    would not surface as a clean error. Refused with MemoryError naming the
    workspace; workspace="sparse" (or "auto") needs memory per product only."""
    T = numba.get_num_threads()
    need = T * p * (wd.itemsize + 4.125)  # values, bitmap, and count_dense's 4-byte markers
    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        phys = 1 << 40
    if need > phys / 2:
        raise MemoryError(
            f"spgemm: workspace='dense' needs about {need / 2**30:.1f} GiB ({T} threads x {p} columns of B x "
            f"{wd.itemsize + 4.125:g} B), more than half this machine's memory ({phys / 2**30:.1f} GiB); "
            f"pass workspace='sparse' (or 'auto')")


def _spgemm_int_result(cd, ap, ai, ad, bp, bi, bd, prods, rdt, overflow):
    """int64 words -> the result dtype, with the exact overflow check."""
    info = np.iinfo(rdt)
    if overflow == "wrap":
        return cd.astype(rdt)
    # max |.| as Python ints (np.abs of the int64 minimum is negative); an entry whose
    # int64 word wrapped to exactly 0 was dropped, so an empty cd is no proof of no overflow
    ma = max(abs(int(ad.min())), abs(int(ad.max()))) if ad.size else 0
    mb = max(abs(int(bd.min())), abs(int(bd.max()))) if bd.size else 0
    if int(prods.max(initial=0)) * ma * mb < 2**63:  # no int64 word wrapped: they are exact
        if cd.size and (cd.min() < info.min or cd.max() > info.max):
            raise OverflowError(f"spgemm: a result overflows {rdt}; pass overflow='wrap'")
        return cd.astype(rdt)
    # rows whose words may have wrapped (float64 bound, conservative): recomputed with Python ints
    for r in np.flatnonzero(prods.astype(np.float64) * (float(ma) * float(mb)) >= 2.0**62):
        acc = {}
        for q in range(ap[r], ap[r + 1]):
            kk = int(ai[q])
            for pp in range(bp[kk], bp[kk + 1]):
                acc[int(bi[pp])] = acc.get(int(bi[pp]), 0) + int(ad[q]) * int(bd[pp])
        if any(v < info.min or v > info.max for v in acc.values()):
            raise OverflowError(f"spgemm: row {r} of the result overflows {rdt}; pass overflow='wrap'")
    if rdt != np.int64 and (cd.min() < info.min or cd.max() > info.max):
        raise OverflowError(f"spgemm: a result overflows {rdt}; pass overflow='wrap'")
    return cd.astype(rdt)
