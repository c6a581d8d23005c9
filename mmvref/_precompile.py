"""``python -m mmvref precompile``: fill Numba's on-disk cache for this machine ahead of time.

Every fast op of mmvref is a set of Numba kernels compiled on first use, one
specialization per argument types and per path an op takes (1-D or N-d input,
reduction, inclusive or exclusive, serial or threaded). Compiled code is cached
on disk (``cache=True``), so only the first process that needs a kernel pays for
it: seconds per op and dtype, minutes for all of them. This command pays that
cost once, up front, where it is cheap:

* **Docker images**: run it as a build step (``RUN python -m mmvref precompile``)
  after installing mmvref, so that containers start with a warm cache;
* **Dask workers** (and other fleets of fresh processes): run it once per node,
  or in the image, so that a hundred workers starting at once do not each
  compile the same kernels (and do not race each other writing the cache);
* **CI**: run it in a cached step so that the test jobs start warm.

It runs one task per (op, dtype) pair, each in its own fresh process (spawned,
never forked, so no Numba or TBB state crosses over), ``--jobs`` at a time. A
task imports mmvref and calls the op on small inputs (about a thousand
elements, plus one input past the size at which the ops go parallel) through
the paths a first real call takes: 1-D and 2-D ``(n, 8)`` inputs of the N-d
segment ops, every reduction (with ``return_arg`` for min and max), inclusive
and exclusive scans, scipy CSR matrices with 32- and 64-bit indices for the
sparse ops (small ones, ones past the size at which a product splits its work
among threads, with short rows and with long ones, and a banded matrix for the
SpMV of stencil matrices; SpMM at 8 columns: its kernels are made per set of
column blocks, and another column count compiles its own on first use), sorted
and unsorted indices for ``scatter``, and ``out=`` where the op takes it. A line is printed as each task finishes, with the number of
specializations it compiled and loaded from the cache; a task that fails
prints its error and the command exits 1 once the others are done.

The cache is only used by processes that match the one that filled it:

* the same **Numba version** (the index records it);
* the same **compile target**: the CPU name and feature list Numba compiles
  for, i.e. the host CPU, or ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` when
  set (entries are keyed on the target, so one cache directory can hold
  several targets side by side; a Docker image built on one machine and run
  on another CPU model misses unless both set the same portable target, e.g.
  ``NUMBA_CPU_NAME=generic`` or ``NUMBA_CPU_NAME=haswell NUMBA_CPU_FEATURES=""``,
  at some cost in speed). ``MMVREF_SIMD`` must match as well;
* the same **cache directory**: ``NUMBA_CACHE_DIR`` when set, otherwise
  ``__pycache__`` folders next to mmvref's sources (Numba falls back to a
  per-user directory, ``~/.cache/numba``, where those are read-only);
* the same **sources**: entries are stamped with each source file's
  modification time and size, so reinstalling or editing mmvref invalidates
  them.

The tasks inherit the environment of this command, so run it with the same
``NUMBA_CACHE_DIR`` / ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` /
``MMVREF_SIMD`` as the processes that will use the cache. Running it again is
cheap: kernels already in the cache are loaded, not compiled.

Numba's cache files are not written under a lock: two processes that compile
different specializations of one kernel at the same moment can lose one of
them, or point it at the other's code. The tasks here serialize their cache
reads and writes with a lock file (``fcntl``, POSIX only), so running them in
parallel is safe; processes outside this command are not covered, which is one
more reason to fill the cache before starting many workers.

This module uses mmvref's public API only and is not imported by ``import mmvref``.
"""
from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import wait

__all__ = ["OPS", "INTEGRATIONS", "DTYPES", "ALL_DTYPES", "main", "run_task", "add_arguments"]

#: every public op, in the order of ``mmvref.__all__``
OPS = (
    "scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "segment_csr", "segment_coo", "scatter",
    "gather_csr", "compress", "compress_ind", "spmv",
    "batched_scan", "split", "split_ind", "radix_sort", "argsort", "topk", "weighted_sample", "top_p_sample",
    "spmm", "spgemm", "prepare",
)
#: the dtypes compiled by default
DTYPES = ("float32", "float64", "int32", "int64")
#: every value dtype the ops accept
ALL_DTYPES = ("int8", "int16", "int32", "int64", "float16", "float32", "float64")
_INTS = frozenset({"int8", "int16", "int32", "int64"})
#: (op, dtype) pairs the op rejects by design: skipped with this note
_UNSUPPORTED = {("top_p_sample", d): "probabilities are floats (float16, float32, float64)" for d in _INTS}
#: integrations precompiled beside the ops: ``pyg`` (``mmvref.pyg``'s kernels, through a training
#: step of each fused layer; in the default list when torch_geometric is installed)
INTEGRATIONS = ("pyg",)
_UNSUPPORTED.update({("pyg", d): "mmvref.pyg runs float32/float64 features (others stay on PyG's code)"
                     for d in ALL_DTYPES if d not in ("float32", "float64")})

_REDUCE = ("sum", "mean", "min", "max", "prod")
_ARG_REDUCE = ("min", "max")

N = 1000  #: small inputs: past every early return, cheap to run
LONG = 1 << 17  #: one 1-D input past the sizes at which the ops split work among threads
F = 8  #: features of the 2-D inputs
STENCIL_ROWS = 1 << 16  #: rows of the tridiagonal matrix that takes spmv's stencil kernel (3 entries a row)
LARGE_COLS = 1 << 15  #: columns (and rows of the short-row one) of the matrices past one SpMV chunk
LONG_ROW_ENTRIES = 128  #: entries a row of the long-row one (past every path's LONG_ROW)


# ----------------------------------------------------------------------------- the calls


class _Inputs:
    """Small, valid inputs of one value dtype (deterministic)."""

    def __init__(self, dtype: str, n: int = N, sparse: bool = True):
        import numpy as np
        import scipy.sparse as sp

        rng = np.random.default_rng(12345)
        self.dt = dt = np.dtype(dtype)
        self.n = n
        self.x = rng.integers(-5, 6, n).astype(dt)
        self.x2 = rng.integers(-5, 6, (n, F)).astype(dt)
        if n <= N:  # 100 segments of random lengths (a few empty); starts at about 10% of positions
            cuts = np.sort(rng.integers(0, n + 1, 99))
            self.flags = rng.random(n) < 0.1
        else:  # a few segments, one longer than any thread's share (the ops split it)
            cuts = np.array([N, n - N])
            self.flags = np.zeros(n, bool)
            self.flags[cuts] = True
        self.flags[0] = True
        self.indptr = np.concatenate([[0], cuts, [n]]).astype(np.int64)
        self.segs = self.indptr.size - 1
        self.index = np.repeat(np.arange(self.segs, dtype=np.int64), np.diff(self.indptr))  # sorted ids
        self.shuffled = rng.permutation(self.index)  # unsorted ids (scatter's other paths)
        self.mask = rng.random(n) < 0.5
        self.w = (rng.integers(0, 5, n) + 1).astype(dt)  # positive weights
        if not sparse:
            return
        # an n x n CSR matrix with 10 entries per row (repeats and unsorted columns allowed)
        k = 10
        cols = rng.integers(0, n, n * k)
        data = rng.integers(-5, 6, n * k).astype(dt)
        indptr = np.arange(0, n * k + 1, k)
        i32, i64 = (cols.astype(np.int32), indptr.astype(np.int32)), (cols.astype(np.int64), indptr.astype(np.int64))
        if dt == np.float16:  # scipy.sparse has no float16: the ops' (indptr, indices, data, shape) form
            self.A = (i32[1], i32[0], data, (n, n))
            self.A64 = (i64[1], i64[0], data, (n, n))
        else:
            self.A = sp.csr_matrix((data, *i32), shape=(n, n))
            self.A64 = self.A.copy()  # the index dtype of large matrices (scipy picks int32 at this size)
            self.A64.indices, self.A64.indptr = i64
        self.D = self.x2
        # two matrices past one chunk of the SpMV (``sparse.ops.spmv_plan``), so that the parallel kernels a
        # first product on a large matrix takes are compiled too: short rows (10 a row) and long ones
        # (LONG_ROW_ENTRIES a row), with 32- and 64-bit indices (scipy gives 32, torch 64)
        self.xl = rng.integers(-5, 6, LARGE_COLS).astype(dt)
        self.large = []
        for rows, k in ((LARGE_COLS, 10), (LARGE_COLS // 16, LONG_ROW_ENTRIES)):
            lind = rng.integers(0, LARGE_COLS, rows * k).astype(np.int32)
            lptr = np.arange(0, rows * k + 1, k, dtype=np.int32)
            ldata = rng.integers(-5, 6, rows * k).astype(dt)
            for wide in (False, True):
                ind, ptr = (lind.astype(np.int64), lptr.astype(np.int64)) if wide else (lind, lptr)
                if dt == np.float16:
                    self.large.append((ptr, ind, ldata, (rows, LARGE_COLS)))
                else:
                    L = sp.csr_matrix((ldata, lind, lptr), shape=(rows, LARGE_COLS))
                    L.indices, L.indptr = ind, ptr  # (scipy would narrow int64 indices that fit)
                    self.large.append(L)
        # the long-row matrix again with runs of 4 rows that share their columns: a prepared matrix keeps
        # them once and its SpMV compiles the kernel that reads them (``sparse.ops.shared_columns``)
        self.shared = []
        if dt.kind == "f":
            rows, k = LARGE_COLS // 16, LONG_ROW_ENTRIES
            sind = np.repeat(rng.integers(0, LARGE_COLS, (rows // 4, k)).astype(np.int32), 4, axis=0).ravel()
            sptr = np.arange(0, rows * k + 1, k, dtype=np.int32)
            sdata = rng.integers(-5, 6, rows * k).astype(dt)
            self.shared.append((sptr, sind, sdata, (rows, LARGE_COLS)))
        # short rows (10 a row) in runs of 4 that share their columns: a prepared matrix sums them in
        # pairs (``sparse.ops.PAIR_SHARE``: its structure check also finds the runs, its SpMV kernel
        # reads the pair bits)
        self.paired = []
        if dt.kind == "f":
            rows, k = LARGE_COLS, 10
            pind = np.repeat(np.sort(rng.integers(0, LARGE_COLS, (rows // 4, k)), axis=1).astype(np.int32), 4, axis=0)
            pptr = np.arange(0, rows * k + 1, k, dtype=np.int32)
            pdata = rng.integers(-5, 6, rows * k).astype(dt)
            self.paired.append((pptr, pind.ravel(), pdata, (rows, LARGE_COLS)))
        # a banded matrix of one pattern past the stencil path's size (``spmv``'s kernel of stencil
        # matrices: ``sparse.ops.stencil_of``), float values only (integer products keep theirs)
        self.stencils = ()
        if dt.kind == "f" and dt != np.float16:
            ns = STENCIL_ROWS
            band = sp.diags_array([np.ones(ns - 1), np.ones(ns), np.ones(ns - 1)], offsets=[-1, 0, 1], dtype=dt)
            self.xs = np.ones(ns, dt)
            S = sp.csr_matrix(band)
            S64 = S.copy()
            S64.indices, S64.indptr = S.indices.astype(np.int64), S.indptr.astype(np.int64)
            self.stencils = (S, S64)


def _scan(m, i):
    import numpy as np

    for x in (i.x, i.x2):
        for ex in (False, True):
            z = m.scan(x, axis=0, exclusive=ex)
            m.scan(x, axis=0, exclusive=ex, out=np.empty_like(z))
    for ex in (False, True):
        m.scan(i.x2, axis=1, exclusive=ex)  # rows
        m.scan(i.x2, exclusive=ex)  # axis=None: flattened


def _segmented_scan(m, i):
    import numpy as np

    for x in (i.x, i.x2):
        for ex in (False, True):
            z = m.segmented_scan(x, i.flags, exclusive=ex)
            m.segmented_scan(x, i.flags, exclusive=ex, out=np.empty_like(z))


def _reductions(call, x):
    """``call(x, reduce=..., return_arg=...)`` for every reduction (prod on +-1 values: no overflow)."""
    import numpy as np

    for r in _REDUCE:
        call(np.where(x < 0, -1, 1).astype(x.dtype) if r == "prod" else x, reduce=r)
    for r in _ARG_REDUCE:
        call(x, reduce=r, return_arg=True)


def _segmented_sum(m, i):
    for x in (i.x, i.x2):
        _reductions(lambda v, **kw: m.segmented_sum(v, i.flags, **kw), x)


def _segment_sum_csr(m, i):
    import numpy as np

    for x in (i.x, i.x2):
        z = m.segment_sum_csr(x, i.indptr)
        m.segment_sum_csr(x, i.indptr, out=np.empty_like(z))


def _segment_csr(m, i):
    for x in (i.x, i.x2):
        _reductions(lambda v, **kw: m.segment_csr(v, i.indptr, **kw), x)


def _segment_coo(m, i):
    for x in (i.x, i.x2):
        _reductions(lambda v, **kw: m.segment_coo(v, i.index, dim_size=i.segs, **kw), x)


def _scatter(m, i):
    for x in (i.x, i.x2):
        for index in (i.index, i.shuffled):
            _reductions(lambda v, index=index, **kw: m.scatter(v, index, dim_size=i.segs, **kw), x)


def _gather_csr(m, i):
    for x in (i.x, i.x2):
        m.gather_csr(x[:i.segs], i.indptr)


def _compress(m, i):
    m.compress(i.x, i.mask)


def _compress_ind(m, i):
    m.compress_ind(i.x, i.mask)


def _spmv(m, i):
    for A in (i.A, i.A64):
        m.spmv(A, i.x)
    for A in i.large:
        m.spmv(A, i.xl)
    for A in i.stencils:
        m.spmv(A, i.xs)


def _batched_scan(m, i):
    for x in (i.x2, i.x2.T.copy()):  # many short rows, few long ones
        for ex in (False, True):
            m.batched_scan(x, exclusive=ex)


def _split(m, i):
    m.split(i.x, i.mask)


def _split_ind(m, i):
    m.split_ind(i.x, i.mask)


def _radix_sort(m, i):
    for x in (i.x, i.x2):
        for desc in (False, True):
            m.radix_sort(x, descending=desc)


def _argsort(m, i):
    for x in (i.x, i.x2):
        for desc in (False, True):
            m.argsort(x, descending=desc)


def _topk(m, i):
    for x in (i.x, i.x2.T.copy()):
        for largest in (True, False):
            m.topk(x, 10, largest=largest)


def _weighted_sample(m, i):
    import numpy as np

    m.weighted_sample(i.w, 0.5)
    m.weighted_sample(i.w, np.linspace(0, 0.99, 16))


def _top_p_sample(m, i):
    import numpy as np

    p2 = i.w.reshape(-1, 50).astype(np.float64)
    p2 = (p2 / p2.sum(axis=1, keepdims=True)).astype(i.dt)
    m.top_p_sample(p2[0], 0.9, 0.5)
    m.top_p_sample(p2, 0.9, np.full(p2.shape[0], 0.5))


def _spmm(m, i):
    for A in (i.A, i.A64):
        m.spmm(A, i.D)
    for A in i.large[:2]:  # (short rows: SpMM's tasks do not depend on the row lengths)
        m.spmm(A, i.xl[:, None].repeat(F, axis=1))


def _spgemm(m, i):
    for A in (i.A, i.A64):
        for ws in ("dense", "sparse"):
            m.spgemm(A, A, workspace=ws)


def _prepare(m, i):
    for A in (i.A, i.A64):
        P = m.prepare(A)
        P @ i.x
        P @ i.D
        P.rmatvec(i.x[:P.shape[0]])
    for A in i.large[::2]:  # (prepare keeps 32-bit indices where they fit)
        P = m.prepare(A)
        P @ i.xl
        P @ i.xl  # (the bound product)
    for A in i.shared:
        P = m.prepare(A)
        P @ i.xl
        P @ i.xl  # (the bound product)
        X = i.xl[:, None].repeat(F, axis=1)
        P @ X  # (its SpMM reads them too: ``sparse._portable_spmm.shared_rows_kernel``)
        P @ X
    for A in i.paired:
        P = m.prepare(A)
        P @ i.xl
        P @ i.xl  # (the bound product: the pairs)
    for A in i.stencils:
        P = m.prepare(A)
        P @ i.xs
        P @ i.xs  # (the bound product)


def _pyg(m, i):
    """One training step of each fused layer with mmvref.pyg enabled, on a graph large enough for
    the kernels' threaded paths: what a user's first step compiles."""
    import torch
    from torch_geometric.nn import GATConv, GCNConv, GINConv, GraphConv, SAGEConv

    import mmvref.pyg

    dt = torch.float32 if i.dt == "float32" else torch.float64
    n, e = 4000, LONG  # past the sizes at which the scatter route splits its work
    g = torch.Generator().manual_seed(1)
    ei = torch.randint(0, n, (2, e), generator=g)
    x = torch.randn(n, F, generator=g, dtype=dt)
    layers = [SAGEConv(F, F, aggr=a) for a in ("sum", "mean", "max", "min")]
    layers += [GCNConv(F, F), GINConv(torch.nn.Linear(F, F)), GraphConv(F, F), GraphConv(F, F, aggr="max"),
               GATConv(F, 2, heads=4)]  # (GraphConv max: the weighted max/min kernels)
    w = torch.rand(e, generator=g, dtype=dt, requires_grad=True)
    from torch_geometric.utils import to_torch_csr_tensor

    adj_t = to_torch_csr_tensor(ei.flip(0), torch.ones(e, dtype=dt), size=(n, n))  # the sparse representation
    with mmvref.pyg.enable():
        for layer in layers:
            layer = layer.to(dt)
            out = layer(x, ei, w) if isinstance(layer, GraphConv) else layer(x, ei)
            out.sum().backward()
            if not isinstance(layer, GraphConv):
                layer(x, adj_t).sum().backward()
    mmvref.pyg.clear_cache()


_CALLS = {
    "scan": _scan, "segmented_scan": _segmented_scan, "segmented_sum": _segmented_sum,
    "segment_sum_csr": _segment_sum_csr, "segment_csr": _segment_csr, "segment_coo": _segment_coo,
    "scatter": _scatter, "gather_csr": _gather_csr, "compress": _compress, "compress_ind": _compress_ind,
    "spmv": _spmv, "batched_scan": _batched_scan, "split": _split, "split_ind": _split_ind,
    "radix_sort": _radix_sort, "argsort": _argsort, "topk": _topk, "weighted_sample": _weighted_sample,
    "top_p_sample": _top_p_sample, "spmm": _spmm, "spgemm": _spgemm, "prepare": _prepare,
    "pyg": _pyg,
}
assert tuple(_CALLS) == OPS + INTEGRATIONS

#: ops whose work is split among threads past some size: also called on one LONG 1-D input
_LONG_CALLS = {
    "scan": lambda m, i: (m.scan(i.x), m.scan(i.x, exclusive=True)),
    "segmented_scan": lambda m, i: m.segmented_scan(i.x, i.flags),
    "segmented_sum": lambda m, i: m.segmented_sum(i.x, i.flags),
    "segment_sum_csr": lambda m, i: m.segment_sum_csr(i.x, i.indptr),
    "segment_csr": lambda m, i: m.segment_csr(i.x, i.indptr),
    "scatter": lambda m, i: (m.scatter(i.x, i.index), m.scatter(i.x, i.shuffled)),
    "compress": _compress, "compress_ind": _compress_ind, "split": _split, "split_ind": _split_ind,
    "radix_sort": lambda m, i: m.radix_sort(i.x), "argsort": lambda m, i: m.argsort(i.x),
    "topk": lambda m, i: m.topk(i.x, 10),
    "weighted_sample": lambda m, i: m.weighted_sample(i.w, 0.5),
}


def _exercise(op: str, dtype: str) -> None:
    """Every call of ``op`` on ``dtype`` inputs that precompile makes, in this process."""
    import mmvref

    _CALLS[op](mmvref, _Inputs(dtype))
    if op in _LONG_CALLS:
        _LONG_CALLS[op](mmvref, _Inputs(dtype, LONG, sparse=False))


# ----------------------------------------------------------------------------- one task (a child process)


@contextlib.contextmanager
def _flock(path):
    import fcntl

    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _lock_numba_cache(lock_path) -> bool:
    """Serialize Numba's cache index reads and writes across the tasks (see the module docstring).
    False where that is not possible (no fcntl, or a Numba whose cache class differs)."""
    try:
        import fcntl  # noqa: F401

        from numba.core.caching import IndexDataCacheFile
    except ImportError:
        return False
    if not lock_path or getattr(IndexDataCacheFile, "_mmvref_locked", False):
        return bool(lock_path)
    try:
        load, save = IndexDataCacheFile.load, IndexDataCacheFile.save
    except AttributeError:
        return False

    def locked_load(self, key):
        with _flock(lock_path):
            return load(self, key)

    def locked_save(self, key, data):
        with _flock(lock_path):
            return save(self, key, data)

    IndexDataCacheFile.load, IndexDataCacheFile.save = locked_load, locked_save
    IndexDataCacheFile._mmvref_locked = True
    return True


def _dispatchers():
    """Every Numba dispatcher of mmvref's code alive in this process (module level or not)."""
    import gc

    from numba.core.dispatcher import Dispatcher

    return [o for o in gc.get_objects()
            if isinstance(o, Dispatcher) and (getattr(o.py_func, "__module__", None) or "").startswith("mmvref")]


def _compile_counts() -> tuple[int, int]:
    """(specializations compiled, specializations loaded from the cache) in this process so far."""
    compiled = loaded = 0
    for d in _dispatchers():
        st = d.stats
        compiled += sum(st.cache_misses.values())
        loaded += sum(st.cache_hits.values())
    return compiled, loaded


def run_task(op: str, dtype: str, lock_path=None) -> dict:
    """Run one (op, dtype) task in this process; returns seconds, compiled/loaded counts and error."""
    locked = _lock_numba_cache(lock_path)
    t0 = time.perf_counter()
    error = None
    try:
        _exercise(op, dtype)
    except BaseException:  # reported; the parent decides
        error = traceback.format_exc()
    seconds = time.perf_counter() - t0
    try:
        compiled, loaded = _compile_counts()
    except Exception:  # the counts are informative only
        compiled = loaded = None
    return {"op": op, "dtype": dtype, "seconds": seconds, "error": error, "compiled": compiled,
            "loaded": loaded, "locked": locked}


def _child(conn, op, dtype, lock_path):
    try:
        result = run_task(op, dtype, lock_path)
    except BaseException:
        result = {"op": op, "dtype": dtype, "seconds": 0.0, "error": traceback.format_exc()}
    conn.send(result)
    conn.close()


# ----------------------------------------------------------------------------- the command


def _csv_type(valid, flag):
    """An argparse ``type=``: a comma-separated list of names out of ``valid`` (a bad one exits 2)."""

    def parse(value: str) -> list[str]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in valid]
        if bad or not items:
            what = (f"unknown value{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))}" if bad
                    else "no value given")
            raise argparse.ArgumentTypeError(f"{what}; valid values: {', '.join(valid)}")
        return list(dict.fromkeys(items))  # repeats dropped, order kept

    parse.__name__ = flag.lstrip("-")  # argparse names the type in some messages
    return parse


def _jobs_type(value: str) -> int:
    try:
        j = int(value)
    except ValueError:
        j = 0
    if j < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value!r}")
    return j


def _default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cache_dir_description() -> str:
    from numba.core import config

    if config.CACHE_DIR:
        return f"{config.CACHE_DIR} (NUMBA_CACHE_DIR)"
    here = os.path.dirname(os.path.abspath(__file__))
    return (f"__pycache__ next to the sources under {here} (NUMBA_CACHE_DIR unset; "
            "Numba uses ~/.cache/numba where those are read-only)")


def target_description() -> str:
    from numba.core import config

    try:
        from llvmlite import binding as ll

        host = ll.get_host_cpu_name()
    except Exception:
        host = "?"
    name = config.CPU_NAME or host
    src = "NUMBA_CPU_NAME" if config.CPU_NAME else "host"
    feats = config.CPU_FEATURES
    extra = "" if feats is None else f", NUMBA_CPU_FEATURES={feats!r}"
    return f"{name} ({src}{extra})"


def default_ops() -> list:
    """Every op, and the integrations whose packages are installed."""
    import importlib.util

    return list(OPS) + (["pyg"] if importlib.util.find_spec("torch_geometric") is not None else [])


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """The options of ``python -m mmvref precompile``, on ``ap``."""
    others = ", ".join(d for d in ALL_DTYPES if d not in DTYPES)
    ap.add_argument("--ops", metavar="OP[,OP...]", type=_csv_type(OPS + INTEGRATIONS, "--ops"),
                    default=default_ops(),
                    help=f"the ops to compile, comma-separated (default: all: {', '.join(OPS)}; and pyg "
                         f"(mmvref.pyg's kernels) when torch_geometric is installed)")
    ap.add_argument("--dtypes", metavar="DT[,DT...]", type=_csv_type(ALL_DTYPES, "--dtypes"),
                    default=list(DTYPES),
                    help=f"the input dtypes to compile for (default: {','.join(DTYPES)}; also {others}). "
                         f"Pairs an op rejects (top_p_sample with integers) are skipped with a note")
    ap.add_argument("--jobs", "-j", metavar="N", type=_jobs_type, default=None,
                    help=f"processes at a time (default: the CPUs this process may use, here {_default_jobs()})")


def _fmt_error(text: str) -> str:
    return "\n".join("    " + line for line in text.rstrip().splitlines())


def _schedule(ctx, pending, running, jobs, lock_path, finish):
    """Run the ``pending`` (op, dtype) tasks, ``jobs`` spawned processes at a time; ``finish`` each."""
    while pending or running:
        while pending and len(running) < jobs:
            op, dt = pending.pop(0)
            parent_conn, child_conn = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(child_conn, op, dt, lock_path),
                               name=f"mmvref-precompile-{op}-{dt}", daemon=True)
            proc.start()
            child_conn.close()
            running[proc.sentinel] = (proc, parent_conn, op, dt, time.perf_counter())
        ready = wait(list(running) + [r[1] for r in running.values()])
        for key in list(running):
            proc, conn, op, dt, start = running[key]
            if key in ready or conn in ready:
                if conn in ready and key not in ready:
                    proc.join()  # it sent its result: it is exiting
                del running[key]
                finish(proc, conn, op, dt, start)


def run(ops, dtypes, jobs=None, out=None) -> int:
    """Precompile ``ops`` x ``dtypes`` in ``jobs`` spawned processes; progress to ``out``. Returns
    the exit status (0, or 1 when a task failed)."""
    out = out or sys.stdout
    jobs = jobs or _default_jobs()

    def say(line=""):
        print(line, file=out, flush=True)

    tasks, skipped = [], []
    # op-major: the tasks running side by side are mostly one op's dtypes, different specializations of
    # the same kernels (the lock keeps their cache writes apart), not two ops that share kernels and would
    # compile the same ones twice (argsort after radix_sort, segment_coo after segment_csr load them)
    for op in ops:
        for dt in dtypes:
            (skipped.append((op, dt)) if (op, dt) in _UNSUPPORTED else tasks.append((op, dt)))
    for op, dt in skipped:
        say(f"skipping {op} {dt}: {_UNSUPPORTED[(op, dt)]}")
    total = len(tasks)
    jobs = max(1, min(jobs, total or 1))
    cache = cache_dir_description()
    say(f"precompiling {total} task{'s' if total != 1 else ''} ({len(ops)} op{'s' if len(ops) != 1 else ''} x "
        f"{len(dtypes)} dtype{'s' if len(dtypes) != 1 else ''}) in {jobs} process{'es' if jobs != 1 else ''} "
        f"for target {target_description()}; cache: {cache}")
    opw = max((len(op) for op, _ in tasks), default=0)
    dtw = max((len(dt) for _, dt in tasks), default=0)
    w = len(str(total))
    ctx = multiprocessing.get_context("spawn")
    t0 = time.perf_counter()
    failed = []
    done = 0
    with tempfile.TemporaryDirectory(prefix="mmvref-precompile-") as tmp:
        lock_path = os.path.join(tmp, "numba-cache.lock")
        pending = list(tasks)
        running = {}  # sentinel -> (process, conn, op, dt, start)

        def finish(proc, conn, op, dt, start):
            nonlocal done
            result = None
            try:
                if conn.poll():
                    result = conn.recv()
            except (EOFError, OSError):
                result = None
            proc.join()
            conn.close()
            if result is None:
                code = proc.exitcode
                result = {"seconds": time.perf_counter() - start,
                          "error": f"the process died (exit code {code}) before reporting"}
            done += 1
            secs = result.get("seconds", 0.0)
            line = f"[{done:>{w}}/{total}] {op:<{opw}} {dt:<{dtw}} {secs:6.2f} s"
            if result.get("compiled") is not None:
                line += f"  ({result['compiled']} compiled, {result['loaded']} from cache)"
            if result.get("error"):
                failed.append((op, dt))
                line += "  FAILED\n" + _fmt_error(result["error"])
            say(line)

        try:
            _schedule(ctx, pending, running, jobs, lock_path, finish)
        except KeyboardInterrupt:
            for proc, conn, *_ in running.values():
                proc.terminate()
                proc.join()
                conn.close()
            say(f"interrupted after {done} of {total} tasks ({time.perf_counter() - t0:.1f} s)")
            return 130
    wall = time.perf_counter() - t0
    status = f"{len(failed)} failed: " + ", ".join(f"{o} {d}" for o, d in failed) if failed else "all succeeded"
    say(f"done: {total} task{'s' if total != 1 else ''} in {wall:.1f} s wall ({status}); "
        f"{len(skipped)} skipped; Numba cache directory: {cache}")
    return 1 if failed else 0


def main(args) -> int:
    """``python -m mmvref precompile`` with the parsed ``args`` (``add_arguments``); the exit status."""
    return run(args.ops, args.dtypes, args.jobs)
