"""``mmvref.prepare`` and ``PreparedMatrix``: a CSR matrix prepared once for many products. The
sparse family's second boundary (``ops`` is the first: one-shot products): ``prepare`` validates and
normalises the matrix once, the methods their vectors.

What ``spmv`` and ``spmm`` decide from the structure alone is decided here once and kept: the index
dtype (int32 where the matrix fits; a uint16 copy for the float SpMV of a large matrix of at most
2**16 columns, made in the structure check's pass), the structure check (offsets in order, column indices in range),
the chunks of the SpMV for the thread count (``ops.spmv_plan``: a merge-path split of rows and
entries into chunks of about equal cost; rows cut by a chunk border are combined from the chunks'
parts), the float SpMV bound to them (``ops.FloatSpmv``, whose first product records the plan of its
short-row batches for the later ones to replay; for a stencil matrix, ``ops.stencil_of``'s runs and
``ops.StencilSpmv``: found here in the pass that checks the structure), the SpMM's row tasks per
column count, and, on the first ``rmatvec``, the transpose (its structure and the permutation that
carries values over). Each product then runs the same code as ``spmv`` / ``spmm`` (``ops.spmv_arrays`` / ``ops.spmm_arrays``),
so it gives the same bits as they do with the same thread count.

Thread safety: the plans are immutable arrays swapped in whole (a changed thread count makes new
ones); every call allocates its own result (or writes its own ``out``); a matrix of several chunks
gives each thread its own scratch, and the products of one-chunk matrices share scratch that the
kernel writes and never reads back (``ops.FloatSpmv._new_scratch``), so concurrent calls share
nothing they read after writing. Pickling keeps the arrays and the options; the plans are made again where it is unpickled
(its thread count may differ).
"""
from __future__ import annotations

import functools
import threading

import numba
import numpy as np

from ..._dtypes import result_dtype
from ..._threading import guarded
from ..._validate import as_values, check_overflow, is_tensor, to_numpy
from .._csr_input import csr_arrays, raise_invalid
from .._policy import like_input
from . import ops

__all__ = ["PreparedMatrix", "prepare"]

_UNKNOWN = "unknown"  # a PreparedMatrix's stencil not looked for yet


class PreparedMatrix:
    """A CSR matrix prepared for repeated products: ``P @ x``, ``P.matvec(x)``, ``P @ X``,
    ``P.matmat(X)``, ``P.rmatvec(y)`` (A^T y), ``P.rmatmat(Y)``, and ``P.aslinearoperator()`` for
    ``scipy.sparse.linalg`` (cg, gmres, minres, eigsh, lsqr, ...). Made by ``mmvref.prepare(A)``.

    Attributes: ``shape`` (m, n), ``dtype`` (of the stored values), ``nnz``, and the CSR arrays
    ``indptr``, ``indices``, ``data`` as kept (int32 indices where they fit; a float matrix of at
    most 2**16 columns and 2**17 entries also keeps a uint16 copy of ``indices`` that its SpMV
    reads, ``ops.COMPACT_MAX_COLS``: 2 bytes an entry less to stream, the same bits). ``overflow``: the
    integer overflow rule of every product ("raise" or "wrap", as ``spmv``).

    Results follow ``spmv`` / ``spmm``: numpy in, numpy out; a torch CPU tensor in, a tensor out;
    the result dtype is the project rule on ``np.result_type(data, x)``; floats within the
    per-row bound of ``spmv``, integers exact. ``out=`` (float results): a C-contiguous array of
    the result's shape and dtype, written in place and returned. A float result of another dtype
    than the values (float32 values and a float64 x, integer values and a float x) uses the values
    converted once and kept (nnz elements), where ``spmv`` converts them on every call.

    New values go through ``update_values``. Writing into the arrays given to ``prepare`` is not a
    way to change the matrix: what a product derived from the values (their converted copy, a
    stencil matrix's constant coefficients, ``ops.StencilSpmv``) is kept until ``update_values``,
    so later products may use the old values.
    """

    def __init__(self, indptr, indices, data, shape, overflow="raise", stencil=_UNKNOWN, columns=None,
                 shared=None, pairs=None):
        """From parts already checked by ``mmvref.prepare`` (use that); ``stencil``: its
        ``ops.stencil_of``, where prepare found it (else found on the first float product);
        ``columns``: the uint16 copy of ``indices`` its float SpMV reads (``ops.COMPACT_MAX_COLS``),
        or None; ``shared``: its ``ops.shared_columns`` (rows that share their columns), or None;
        ``pairs``: the flags of its short rows that hold the columns of the row before
        (``ops.PAIR_SHARE``), or None."""
        self.indptr, self.indices, self.data = indptr, indices, data
        self._columns = columns
        self._shared = shared
        self._pairs = pairs
        self.shape = (int(shape[0]), int(shape[1]))
        self._nnz = int(data.shape[0])  # (update_values keeps it)
        self._x_shape = (self.shape[1],)
        self._y_shape = (self.shape[0],)
        self._one_chunk = ops.one_chunk_for_any_threads(self.shape[0], self._nnz)
        self.overflow = overflow
        self._lock = threading.Lock()
        self._spmv = None  # (threads (0: any), (R, E), {(ops._LEVEL, result dtype): (values, FloatSpmv)}, one chunk for any T)
        self._bound = None  # the bound FloatSpmv of the current plan, values and path (``matvec``'s fast path)
        self._one = None  # for a bound one-chunk plan: (rdt, entry point, its arguments before x and after y)
        self._spmm = {}  # (threads, k) -> tasks
        self._spmm_bound = {}  # k -> ops.BoundSpmm of the current values (``matmat``'s fast path)
        self._transpose = None  # (PreparedMatrix of A^T, permutation of the values)
        self._stencil = stencil  # ops.Stencil, None (not a stencil matrix) or _UNKNOWN (not looked at yet)

    # ------------------------------------------------------------------ attributes

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def nnz(self):
        return self._nnz

    @property
    def ndim(self):
        return 2

    def __repr__(self):
        compact = ("" if self._columns is None else " (a uint16 copy for its SpMV)") + (
            "" if self._shared is None else f" (its SpMV reads {self._shared[0].size} shared columns)")
        return (f"<PreparedMatrix {self.shape[0]}x{self.shape[1]}, {self.nnz} stored entries, {self.dtype}, "
                f"{self.indices.dtype} indices{compact}>")

    def __reduce__(self):
        return (_unpickle, (self.indptr, self.indices, self.data, self.shape, self.overflow, self._columns,
                            self._shared, self._pairs))

    # ------------------------------------------------------------------ plans

    def _spmv_plan(self):
        plan = self._spmv
        if plan is not None and plan[3]:  # one chunk for every thread count
            return plan
        m, nnz = self.shape[0], self.nnz
        if plan is None and self._one_chunk:
            plan = self._spmv = (0, ops.one_chunk_plan(m, nnz), {}, True)
            return plan
        T = numba.get_num_threads()
        if plan is None or plan[0] != T:  # a changed thread count re-partitions
            self._bound = None
            plan = self._spmv = (T, ops.spmv_plan(self.indptr, m, nnz), {}, False)
        return plan

    def _float_spmv(self, plan, rdt):
        """The ``ops.FloatSpmv`` of this matrix for ``plan`` on the chosen path with values in the
        float result dtype ``rdt`` (kept in the plan per values array, so ``update_values`` makes a
        new one). Values of another dtype (float32 with a float64 x, integers with a float x) are
        converted once here and kept (nnz elements of ``rdt``), as ``spmv`` converts them on every
        call: the same values, the same kernel, the same bits."""
        key = (ops._LEVEL, rdt)  # the path follows ops._LEVEL (None: the target's best), fixed otherwise
        kept = plan[2].get(key)
        if kept is not None and kept[0] is self.data:
            return kept[1]
        source = self.data
        data = source if source.dtype == rdt else source.astype(rdt)
        if self._stencil is _UNKNOWN:
            self._stencil = ops.stencil_of(self.indptr, self.indices, self.shape[0], self.shape[1], self.nnz)
        if self._stencil is not None:  # (as spmv decides: the same kernel, the same bits)
            run = ops.StencilSpmv(self.indptr, self.indices, data, self._stencil, constant=True)
        else:
            R, E = plan[1]
            run = ops.FloatSpmv(self.indptr, self.indices, data, R, E, plan_batches=True, columns=self._columns,
                                shared=self._shared, pairs=self._pairs)
        plan[2][key] = (source, run)
        return run

    def _spmm_tasks(self, k):
        key = (numba.get_num_threads(), k)
        tasks = self._spmm.get(key)
        if tasks is None:
            tasks = self._spmm[key] = ops.spmm_tasks(self.indptr, self.shape[0], self.nnz, k)
        return tasks

    # ------------------------------------------------------------------ products

    def matvec(self, x, out=None):
        """y = A x for x of length n (1-D, or an (n, 1) column as scipy's LinearOperator passes)."""
        one = self._one
        if (one is not None and type(x) is np.ndarray and x.shape == self._x_shape and x.dtype == one[0]
                and x.flags.num & _PLAIN == _PLAIN and ops._LEVEL is None):
            # the common call of an iterative solver on a matrix of one chunk for every thread count,
            # after a first product bound its float SpMV: a numpy vector of the values' dtype, the
            # result new or in a plain ``out``; the kernel runs on this thread and launches nothing,
            # so it needs neither the threading guard nor the thread count: one call of its entry
            # point (issue 32: <= 10 us above the kernel on a 1,000-row matrix, and 2x scipy's
            # product; ``out=`` no slower than a new result)
            y = np.empty(self.shape[0], one[0]) if out is None else _plain_out(out, self._y_shape, x)
            if y is not None:
                one[1](one[2], one[3], one[4], x, y, *one[5])
                return y
        run = self._bound
        if (run is not None and type(x) is np.ndarray and x.dtype == run.rdt and x.shape == self._x_shape
                and x.flags.num & _PLAIN == _PLAIN and run.data is self.data and ops._LEVEL is None
                and self._spmv[0] == numba.get_num_threads()):
            # the same for a matrix of several chunks (the plan's thread count still in force)
            y = np.empty(self.shape[0], run.rdt) if out is None else _plain_out(out, (self.shape[0],), x)
            if y is not None:
                _bound_parallel(run, x, y)
                return y
        if self._one_chunk and self._stencil is None:
            # (its product runs on this thread, one chunk for every thread count, and launches
            # nothing: the threading guard, 0.65 us of a 1,000-row matrix's first product, is not needed)
            return self._matvec(x, out)
        return self._guarded_matvec(x, out)

    @guarded
    def _guarded_matvec(self, x, out):
        return self._matvec(x, out)

    def _matvec(self, x, out):
        src = x
        m, n = self.shape
        column = False
        if not (type(x) is np.ndarray and x.ndim == 1 and x.dtype == self.data.dtype and x.flags.writeable):
            # (else x is a plain vector of the values' dtype, which to_numpy and as_values return as it is)
            x = to_numpy(x, "x")
            x = as_values(x, "x", ndim=np.ndim(x))
            column = x.ndim == 2 and x.shape[1] == 1
            if x.ndim != 1 and not column:
                raise ValueError(f"x must be 1-D of length {n} (or an ({n}, 1) column), got shape {x.shape}")
            x = x.reshape(-1)
        if x.shape[0] != n:
            raise ValueError(f"x has length {x.shape[0]} but the matrix has {n} columns (shape {(m, n)})")
        rdt = _result_dtype(self.data.dtype, x.dtype)
        buf = None
        if out is not None:
            buf = _out(out, (m,), rdt)
            if np.may_share_memory(buf, x):
                buf = None  # out overlaps x, which the kernels still read: a new result, then copied
        plan = self._spmv_plan()
        if rdt.kind == "f" and m and self._nnz:
            # the float SpMV bound to this matrix and chunking (``ops.FloatSpmv``, as spmv runs it);
            # the structure was checked by prepare, so the kernel's flags are not read again
            y = np.empty(m, rdt) if buf is None else buf
            run = self._float_spmv(plan, rdt)
            run(np.ascontiguousarray(x, dtype=rdt), y, bind=True)
            if run.entry is not None and ops._LEVEL is None and rdt == self.data.dtype:
                self._bound = run  # (matvec's fast path: x of the values' own dtype)
                if plan[3] and self._stencil is None:
                    # one chunk for every thread count: one call for any thread (``ops.FloatSpmv.one_tail``)
                    self._one = (rdt, run.entry, run.indptr, run.indices, run.data, run.one_tail)
        else:
            y = ops.spmv_arrays(self.indptr, self.indices, self.data, x, m, n, self.overflow, plan[1], buf)
        if out is not None:
            if y is not out:
                out[...] = y
            return out
        if column:
            y = y.reshape(m, 1)
        return y if type(src) is np.ndarray else like_input(y, src)

    def matmat(self, X, out=None):
        """Y = A X for a dense X of n rows (2-D)."""
        if type(X) is np.ndarray and X.ndim == 2 and X.dtype == self.data.dtype and X.shape[0] == self.shape[1]:
            run = self._spmm_bound.get(X.shape[1])
            fl = X.flags
            if run is not None and fl.c_contiguous and fl.aligned and fl.writeable and run.data is self.data:
                # a float X of the values' dtype after a first product with k columns bound the kernel
                # (``ops.BoundSpmm``): the kernel's call and nothing else it does not need
                m, k = self.shape[0], X.shape[1]
                Y = np.empty((m, k), X.dtype) if out is None else _plain_out(out, (m, k), X)
                if Y is not None:
                    res = Y.reshape(-1)
                    if run.threads is None:  # one task: runs on this thread, launches nothing (see matvec)
                        run.bound(X, res)
                        return Y
                    if run.threads == numba.get_num_threads():
                        _bound_parallel(run, X, res)
                        return Y
        return self._guarded_matmat(X, out)

    @guarded
    def _guarded_matmat(self, X, out):
        src = X
        m, n = self.shape
        X = as_values(to_numpy(X, "X"), "X", ndim=2)
        if X.shape[0] != n:
            raise ValueError(f"X must have {n} rows (the matrix has {n} columns), got shape {X.shape}")
        rdt = result_dtype(np.result_type(self.data.dtype, X.dtype))
        buf = _out(out, (m, X.shape[1]), rdt)
        if buf is not None and np.may_share_memory(buf, X):
            buf = None  # out overlaps X, which the kernels still read: a new result, then copied
        k = X.shape[1]
        tasks = self._spmm_tasks(k)
        Y = ops.spmm_arrays(self.indptr, self.indices, self.data, X, m, n, self.overflow, tasks, buf, self._shared)
        fl = X.flags
        if (rdt == self.data.dtype and rdt.kind == "f" and X.dtype == rdt and m and k and self.nnz
                and fl.c_contiguous and fl.aligned and fl.writeable):  # the kinds the fast path takes (and
            # the kernel just compiled for: binding adds no compilation)
            threads = None if ops.spmm_one_task(m, self.nnz, k) else numba.get_num_threads()
            run = self._spmm_bound.get(k)
            if run is None or run.threads != threads:  # first product with k columns, or a new thread count
                self._spmm_bound[k] = ops.BoundSpmm(self.indptr, self.indices, self.data, n, k, tasks, threads,
                                                    self._shared)
        if out is not None:
            if Y is not out:
                out[...] = Y
            return out
        return like_input(Y, src)

    def __matmul__(self, other):
        if type(other) is np.ndarray and other.ndim == 1:
            return self.matvec(other)
        nd = getattr(other, "ndim", None)
        if nd is None:
            nd = np.ndim(other)
        return self.matmat(other) if nd == 2 else self.matvec(other)

    def dot(self, other):
        return self @ other

    @property
    def T(self):
        """A^T as a PreparedMatrix (made on first use, then kept; ``update_values`` carries new
        values over to it)."""
        return self._transposed()

    def rmatvec(self, y, out=None):
        """A^T y for y of length m."""
        return self._transposed().matvec(y, out=out)

    def rmatmat(self, Y, out=None):
        """A^T Y for a dense Y of m rows."""
        return self._transposed().matmat(Y, out=out)

    def _transposed(self):
        t = self._transpose
        if t is None:
            with self._lock:
                t = self._transpose
                if t is None:
                    t = self._transpose = _transpose(self)
        return t[0]

    # ------------------------------------------------------------------ values

    def update_values(self, data):
        """New values for the same pattern: ``data`` holds ``nnz`` values in the order of the stored
        entries (the order of ``indptr`` / ``indices``); the plans are kept. Returns self."""
        new = to_numpy(data, "data")
        new = np.ascontiguousarray(as_values(new, "data", ndim=np.ndim(new)))
        if new.ndim != 1 or new.shape[0] != self.nnz:
            raise ValueError(f"update_values: data must be 1-D with {self.nnz} values (the stored entries of the "
                             f"pattern), got shape {new.shape}; a new pattern needs mmvref.prepare")
        with self._lock:
            self.data = new
            self._bound = None
            self._one = None
            self._spmm_bound = {}
            if self._spmv is not None:
                self._spmv[2].clear()
            t = self._transpose
            if t is not None:
                t[0].update_values(new[t[1]])
        return self

    # ------------------------------------------------------------------ scipy

    def aslinearoperator(self):
        """This matrix as a ``scipy.sparse.linalg.LinearOperator`` (matvec, rmatvec, matmat,
        rmatmat), which ``cg``, ``gmres``, ``minres``, ``eigsh``, ``lsqr`` accept."""
        from scipy.sparse.linalg import LinearOperator

        dtype = result_dtype(self.data.dtype)
        return LinearOperator(self.shape, matvec=self.matvec, rmatvec=self.rmatvec, matmat=self.matmat,
                              rmatmat=self.rmatmat, dtype=dtype)


def _unpickle(indptr, indices, data, shape, overflow, columns, shared=None, pairs=None):
    """A pickled ``PreparedMatrix``: its arrays (the uint16 or shared columns and the pair flags
    among them); its plans and stencil are made again where it lands."""
    return PreparedMatrix(indptr, indices, data, shape, overflow, columns=columns, shared=shared, pairs=pairs)


@guarded
def _bound_parallel(run, x, y):
    """``run.bound(x, y)`` (``ops.FloatSpmv``, ``ops.BoundSpmm``) for a plan of several chunks or
    tasks: the parallel kernel's launch passes the threading guard, as every public op's does."""
    run.bound(x, y)


#: numpy's flag bits of an array the bound kernels take as it is: C_CONTIGUOUS, ALIGNED, WRITEABLE
_PLAIN = 0x0001 | 0x0100 | 0x0400
_OWNDATA = 0x0004  # (numpy's flag of an array whose memory it allocated itself)


def _plain_out(out, shape, src):
    """``out`` when the bound kernels can write it as it is (a C-contiguous, aligned, writeable
    ndarray of ``shape`` and src's dtype, not overlapping src), else None: the full path validates
    it. Two distinct arrays that each own their data do not overlap; only views are handed to
    ``np.may_share_memory`` (0.17 us, half of this check's cost before on a 1,000-row matrix)."""
    if type(out) is np.ndarray and out.dtype == src.dtype and out.shape == shape:
        flags = out.flags.num
        if flags & _PLAIN == _PLAIN and out is not src and (
                flags & src.flags.num & _OWNDATA or not np.may_share_memory(out, src)):
            return out
    return None


def _out(out, shape, rdt):
    if out is None:
        return None
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    if out.shape != shape or out.dtype != rdt or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError(f"out must be a writeable C-contiguous array of shape {shape} and dtype {rdt}, got shape "
                         f"{out.shape}, dtype {out.dtype}" + ("" if out.flags.c_contiguous else ", not contiguous"))
    return out


def _transpose(P):
    """(A^T prepared, perm): A^T's entries are A's entries perm (stable by column, so each column
    keeps A's row order: A^T's rows are sorted)."""
    m, n = P.shape
    cols = P.indices
    perm = np.argsort(cols, kind="stable")
    counts = np.bincount(cols, minlength=n) if cols.size else np.zeros(n, np.int64)
    tptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=tptr[1:])
    rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(P.indptr.astype(np.int64)))
    idt = P.indices.dtype
    T = PreparedMatrix(tptr.astype(idt), rows[perm].astype(idt), np.ascontiguousarray(P.data[perm]), (n, m),
                       P.overflow)
    return T, perm


@functools.lru_cache(maxsize=None)
def _result_dtype(a, b):
    """The project's result dtype of values a with x of dtype b (``result_dtype``; memoized: a
    product's overhead)."""
    return result_dtype(np.result_type(a, b))


@guarded
def _stencil_in_parallel(indptr, indices, m, n, nnz):
    return ops.stencil_of(indptr, indices, m, n, nnz)


@guarded
def _shared_in_parallel(indptr, indices, same, n):
    return ops.shared_columns(indptr, indices, same, n)


@guarded
def _narrow_in_parallel(indptr, indices):
    return ops.narrow_columns(indptr, indices)


@guarded
def _validate_in_parallel(indptr, indices, data, n, narrow=None, same=None):
    return ops._validate(indptr, indices, data, n, "A", narrow, same)


def prepare(A, *, overflow="raise"):
    """A prepared CSR matrix (``PreparedMatrix``) for many products with the same matrix: iterative
    solvers, power iterations, graph propagation.

    ``A``: a scipy.sparse matrix or array of any format (converted with ``tocsr()``), a torch sparse
    CSR CPU tensor, a tuple ``(indptr, indices, data, shape)``, or a dense 2-D array (converted by
    ``scipy.sparse.csr_array``). Values: the dtypes of ``spmv`` (int8..int64, float16..float64).
    The arrays are kept as given when their indices are int32 (or int64 and the matrix does not fit
    int32), else converted once to int32; the structure is checked once here (ValueError naming
    ``indptr`` or ``indices``). ``overflow``: integer products, as ``spmv``.

    The result's products run ``spmv``'s and ``spmm``'s code with the plans made here, so they give
    the same bits as those functions (same thread count)."""
    check_overflow(overflow)
    if type(A).__module__.startswith("scipy.sparse") and getattr(A, "format", "csr") != "csr":
        A = A.tocsr()
    elif not isinstance(A, (tuple, list)) and not type(A).__module__.startswith("scipy.sparse") \
            and not is_tensor(A) and np.ndim(A) == 2:
        import scipy.sparse as sp

        A = sp.csr_array(np.asarray(A))
    indptr, indices, data, (m, n) = csr_arrays(A)
    stencil = _UNKNOWN
    columns = None
    same = None
    pairs = None
    narrow = False  # a uint16 copy still to make (the pass looked for shared columns and found too few)
    if m and data.shape[0]:  # checked before any narrowing: a column index of 2**40 must not wrap into range
        if n == 0:
            raise_invalid(indptr, indices, data, n)
        if data.shape[0] < ops.STENCIL_MIN_NNZ:
            stencil = None  # (too small to be taken for one: ``stencil_of``)
        elif data.dtype.kind == "f":
            # a stencil matrix's pass (``ops.stencil_of``) checks the structure too: then the only pass
            stencil = _stencil_in_parallel(indptr, indices, m, n, data.shape[0])
        # (integer values: looked at on a first product with a float result, as ``spmv`` does)
        if stencil is not None and stencil is not _UNKNOWN:
            pass
        elif data.shape[0] + m < ops.SERIAL_COST:  # a small serial kernel (not the parallel one: cold start)
            if not ops._valid_small(indptr, indices, n):
                raise_invalid(indptr, indices, data, n)
        else:  # a parallel kernel: the one launch here (a small matrix's serial checks need no guard)
            # rows of a run that share their columns (found by the same pass: ``ops.shared_columns``),
            # else the uint16 columns of its float SpMV (written by it): the indices read once
            same = None
            if ops.shared_columns_may_pay(m, data.shape[0], data.dtype) and ops.shares_columns(indptr, indices, m):
                same = np.zeros(m, np.bool_)
            else:
                if ops.compact_columns_pay(n, data.shape[0], data.dtype):
                    columns = np.empty(data.shape[0], np.uint16)
                if ops.pairs_may_pay(m, data.shape[0], data.dtype) and ops.shares_columns(indptr, indices, m):
                    # short rows that share their columns: summed two at a time (``ops.PAIR_SHARE``)
                    pairs = np.zeros(m, np.bool_)
            held = _validate_in_parallel(indptr, indices, data, n, columns, same if pairs is None else pairs)
            if pairs is not None and held < ops.PAIR_SHARE * data.shape[0]:
                pairs = None
            if same is not None and held < ops.SHARED_SHARE * data.shape[0]:
                same = None
                if ops.compact_columns_pay(n, data.shape[0], data.dtype):
                    narrow = True
    # int32 indices where they fit: 4 bytes per entry fewer to read
    # (index_arrays gave contiguous int32 or int64 arrays)
    size = 4 if max(m, n, data.shape[0]) < 2**31 - 1 else 8
    if indptr.itemsize != size:
        indptr = indptr.astype(np.int32 if size == 4 else np.int64)
    if indices.itemsize != size:
        indices = indices.astype(np.int32 if size == 4 else np.int64)
    shared = None
    if same is not None:  # runs of rows that share their columns keep them once
        shared = _shared_in_parallel(indptr, indices, same, n)
    elif narrow:
        columns = _narrow_in_parallel(indptr, indices)
    return PreparedMatrix(indptr, indices, data, (m, n), overflow, stencil, columns, shared, pairs)
