"""Cold start of the sparse products (issue 31, point 6): a first call compiles only the kernels of
the paths its input takes, and every specialized kernel gives what the kernel with every path
gives, bit for bit.

- A fresh process with an empty Numba cache: the kernels each op's first call compiles (counted by
  Numba's compile events, nested kernels and closures included), then a second process on the same
  cache compiles nothing (the closures' cache entries are found again). The parallel kernels
  compile without NumbaPerformanceWarning (a prange that Numba cannot parallelize runs serially).
- spmv: the float kernel specialized by row kinds against ``float_rows`` / ``float_rows_serial``
  (every path, chosen at run time) on the same chunks: identical y, partial sums and flags.
- spmm and spgemm: the serial kernels (small products) and the parallel ones (``SERIAL_COST = 0``)
  against plain-loop oracles, floats bit for bit.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import mmvref
from mmvref._fast.sparse import _portable_spmv as K
from mmvref._fast.sparse import ops

from tests.compile_events import listener_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------- cold process

PROBE = listener_source('mmvref', 'd.py_func.__qualname__') + r"""
import json
import numpy as np, scipy.sparse as sp
import mmvref

out = {}
for DT in ("float32", "int32"):
    rng = np.random.default_rng(0)
    n = 1000
    x = rng.integers(-5, 6, n).astype(DT)
    x2 = rng.integers(-5, 6, (n, 8)).astype(DT)
    A = sp.random(n, n, 0.01, format="csr", random_state=0, dtype=np.float64)
    A.data = rng.integers(-5, 6, A.nnz).astype(DT)
    for op, call in (("spmv", lambda: mmvref.spmv(A, x)), ("spmm", lambda: mmvref.spmm(A, x2)),
                     ("spgemm", lambda: mmvref.spgemm(A, A))):
        del compiled[:]
        call()
        out[op + " " + DT] = list(compiled)

# the parallel kernels (large operands): every one parallelized (no NumbaPerformanceWarning)
import warnings
from numba.core.errors import NumbaPerformanceWarning
from mmvref._fast.sparse import ops

warnings.simplefilter("error", NumbaPerformanceWarning)
ops.SERIAL_COST, ops.MIN_CHUNK_COST = 0, 1
del compiled[:]
mmvref.spmv(A, x), mmvref.spmm(A, x2), mmvref.spgemm(A, A)
out["parallel"] = list(compiled)
print(json.dumps(out))
"""


def _probe(cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    env.pop("NUMBA_DISABLE_JIT", None)
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=ROOT,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_first_call_compiles_only_its_paths_and_a_second_process_none(tmp_path):
    """The input of tools/cold_start.py (1000 x 1000, 1% dense, short rows of varying length, one
    chunk): spmv one kernel and its chunk body (plus the scalar-batch helpers where the path has them), spmm one,
    spgemm two (the fill, and the serial structure check; row products by numpy, no staging to
    compact, no workspace the rows do not use); then nothing at all from the cache."""
    cold = _probe(tmp_path)
    scalar = {"_batch_shape", "_scalar_rows"}
    for dt in ("float32", "int32"):
        spmv = cold[f"spmv {dt}"]
        kernel = "_make_float.<locals>.float_rows" if dt == "float32" else "_make_int.<locals>.int_rows"
        body = [n for n in spmv if n.endswith("__body")]  # the chunk body the kernel calls (TaskBody)
        assert len(body) == 1 and body[0].startswith(kernel.rsplit(".", 1)[1] + "_"), spmv
        assert spmv.count(kernel) == 1 and set(spmv) <= {kernel, body[0]} | scalar, spmv
        assert cold[f"spmm {dt}"] == ["_make_rows.<locals>.rows"], cold[f"spmm {dt}"]
        # small operands: validated by the small serial check, counted by numpy, no staging to compact
        # (the check compiles once for the two dtypes: it reads only the int32 indices)
        sg = cold[f"spgemm {dt}"]
        assert sg.count("_make_fill.<locals>.fill") == 1 and set(sg) <= {"_make_fill.<locals>.fill", "valid_small"}, sg
    assert "valid_small" in cold["spgemm float32"] + cold["spgemm int32"]
    assert set(cold["parallel"]) >= {"_make_int.<locals>.int_rows", "_make_rows.<locals>.rows",
                                     "_make_fill.<locals>.fill", "structure", "compact"}
    warm = _probe(tmp_path)
    assert all(v == [] for v in warm.values()), warm


# ----------------------------------------------------------------------------- spmv: specialized = generic

def _lens(kind, rng):
    if kind == "short":
        return rng.integers(0, 9, 3000)
    if kind == "regular":  # one length: the scalar batches where the path has them
        return np.full(3000, 5)
    if kind == "long":
        return rng.integers(60, 200, 300)
    if kind == "huge":  # a row longer than a batch among short ones
        return np.r_[rng.integers(0, 4, 500), K.BATCH + 77, rng.integers(0, 4, 500)]
    return np.r_[rng.integers(0, 6, 1500), rng.integers(60, 200, 200), np.full(1500, 3)]  # mixed


@pytest.mark.parametrize("kind", ["short", "regular", "long", "huge", "mixed"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("chunks", [1, 13])
def test_spmv_specialized_kernel_equals_every_path_kernel(kind, dtype, chunks):
    rng = np.random.default_rng(3)
    lens = _lens(kind, rng)
    n = 4096
    indptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
    indices = rng.integers(0, n, int(indptr[-1])).astype(np.int32)
    runs = rng.random(indices.size) < 0.5  # runs of consecutive columns: the contiguous loads
    indices[1:][runs[1:]] = np.minimum(indices[:-1][runs[1:]] + 1, n - 1)
    data = rng.standard_normal(indices.size).astype(dtype)
    x = rng.standard_normal(n).astype(dtype)
    m, nnz = lens.size, int(indptr[-1])
    if chunks == 1:
        R, E = np.array([0, m], np.int64), np.array([0, nnz], np.int64)
    else:
        R, E = K.partition(indptr, chunks, K.ROW_COST)
    P = ops._path()
    long_rows, short_rows = ops._row_kinds(indptr, R, P.LONG_ROW)
    special = K.float_kernel(chunks > 1, long_rows, short_rows)
    generic = K.float_rows if chunks > 1 else K.float_rows_serial
    got = []
    for kernel in (special, generic):
        C = R.size - 1
        y = np.full(m, np.nan, dtype)
        first, last = np.zeros(C, dtype), np.zeros(C, dtype)
        umax, bad = np.zeros(C, np.uint64), np.zeros(C, np.bool_)
        kernel(indptr, indices, data, x, y, R, E, first, last, umax, bad, P.GATHER, P.LONG_ROW, P.SCALAR_SHORT,
               np.zeros(0, np.int64), 0)
        got.append((y, first, last, umax, bad))
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)
    assert not got[0][4].any()
    if chunks == 1:
        with _setattr(ops, "MIN_CHUNK_COST", 1 << 60):
            y = mmvref.spmv((indptr, indices, data, (m, n)), x)  # the boundary row added to 0 as the chunked combine does
        ref = got[1][0].copy()
        ref[0] = dtype_zero(dtype) + got[1][1][0]
        np.testing.assert_array_equal(y, ref)


def dtype_zero(dtype):
    return np.dtype(dtype).type(0)


def test_spmv_offset_past_the_rows_is_refused_not_read():
    """One chunk (no partition pass): a row offset far past nnz inside the matrix is flagged by
    the kernel before anything is read (the row longer than a batch is checked too)."""
    for big in (10, K.BATCH + 10, 10**9):
        A = (np.array([0, 0, big, 1]), np.array([0]), np.array([1.0]), (3, 2))
        with pytest.raises(ValueError, match="indptr"):
            mmvref.spmv(A, np.ones(2))
        with pytest.raises(ValueError, match="indptr"):
            mmvref.spmv((A[0], A[1], np.array([1], np.int64), A[3]), np.ones(2, np.int64))


@pytest.mark.parametrize("overflow", ["raise", "wrap"])
def test_spmv_int_one_and_many_chunks(overflow):
    rng = np.random.default_rng(5)
    A = sp.random(700, 300, 0.05, format="csr", random_state=1)
    A.data = rng.integers(-1000, 1000, A.nnz).astype(np.float64)
    A = A.astype(np.int64)
    x = rng.integers(-1000, 1000, 300)
    ref = (A @ x).tolist()  # |sums| < 2**40: int64 exact
    big = sp.csr_matrix(np.full((3, 4), 2**20, np.int32))
    for min_cost in (ops.MIN_CHUNK_COST, 1):
        with _setattr(ops, "MIN_CHUNK_COST", min_cost):
            assert mmvref.spmv(A, x, overflow=overflow).tolist() == ref
            if overflow == "raise":
                with pytest.raises(OverflowError):
                    mmvref.spmv(big, np.full(4, 2**10, np.int32))  # 2**32 does not fit int32
            else:
                assert mmvref.spmv(big, np.full(4, 2**10, np.int32), overflow="wrap").tolist() == [0, 0, 0]


# ----------------------------------------------------------------------------- spmm / spgemm: serial = parallel

@contextlib.contextmanager
def _setattr(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _spmm_oracle(A, D, rdt):
    out = np.zeros((A.shape[0], D.shape[1]), rdt)
    for r in range(A.shape[0]):
        acc = np.zeros(D.shape[1], rdt)
        for q in range(A.indptr[r], A.indptr[r + 1]):
            acc = acc + rdt.type(A.data[q]) * D[A.indices[q]].astype(rdt)
        out[r] = acc
    return out


@pytest.mark.native_only  # SpMM / SpGEMM: one portable path of plain loops (no target-specific code)
@pytest.mark.parametrize("k", [1, 3, 8, 15, 24, 48, 64, 102, 129])  # tails of 1, 3, 7, 6 and 1 columns
@pytest.mark.parametrize("serial_cost", [0, 1 << 40])
def test_spmm_serial_and_parallel_kernels(k, serial_cost):
    rng = np.random.default_rng(k)
    A = sp.random(120, 90, 0.08, format="csr", random_state=k, dtype=np.float32)
    D = rng.standard_normal((90, k)).astype(np.float32)
    with _setattr(ops, "SERIAL_COST", serial_cost):
        got = mmvref.spmm(A, D)
        bad = (A.indptr, np.r_[A.indices[:-1], 90].astype(A.indices.dtype), A.data, A.shape)
        with pytest.raises(ValueError, match="indices"):
            mmvref.spmm(bad, D)
    np.testing.assert_array_equal(got, _spmm_oracle(A, D, np.dtype(np.float32)))


@pytest.mark.native_only
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_spmm_kernel_for_every_k_gives_the_oracles_bits(dtype):
    """``ops.spmm_into_any_k`` (mmvref.pyg's fused sums): one kernel whose blocks are taken by
    the columns left; every k from 1 to 20 and wider ones, serial (one task) and parallel tasks."""
    from mmvref._fast.sparse.ops import spmm_into_any_k

    rng = np.random.default_rng(5)
    A = sp.random(70, 50, 0.1, format="csr", random_state=5, dtype=dtype)
    A.indptr = A.indptr.astype(np.int64)
    A.indices = A.indices.astype(np.int32)
    for k in list(range(1, 21)) + [37, 64, 85, 130]:
        D = rng.standard_normal((50, k)).astype(dtype)
        want = _spmm_oracle(A, D, np.dtype(dtype))
        for tasks in (np.array([0, 70]), np.array([0, 9, 30, 31, 70])):
            out = np.full((70, k), np.nan, dtype)
            spmm_into_any_k(A.indptr, A.indices, A.data, D, out, tasks)
            np.testing.assert_array_equal(out, want, err_msg=f"k={k} tasks={tasks}")


def _extreme_oracle(indptr, col, perm, x, is_max, w=None):
    """Plain loops: each output the first extreme of its row in CSR order (the first NaN takes the
    place and keeps it, as ``mmvref.scatter`` with positions) and its edge id; rows without entries 0 and -1. With weights w (E, heads): of the products
    w[e, f // C] * x[src, f] (C = F / heads), each rounded once."""
    n, F = indptr.size - 1, x.shape[1]
    out = np.zeros((n, F), x.dtype)
    arg = np.full((n, F), -1, np.int32)
    for i in range(n):
        for f in range(F):
            for j, p in enumerate(range(indptr[i], indptr[i + 1])):
                v = x[col[p], f]
                if w is not None:
                    v = w[perm[p], f // (F // w.shape[1])] * v
                if j == 0 or (v != v and out[i, f] == out[i, f]) or (v > out[i, f] if is_max else v < out[i, f]):
                    out[i, f], arg[i, f] = v, perm[p]
    return out, arg


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_max_and_min_kernel_against_plain_loops(dtype):
    """``_portable_gspmm.gspmm_extreme`` (mmvref.pyg's max/min aggregation): register blocks of 32
    down to 1 column, every width k takes (1-20, 37, 85, 130); ties, NaN and -0.0 among the values;
    empty rows; one task and several. Values bit for bit, edge ids equal."""
    from mmvref._fast.sparse import _portable_gspmm as G

    rng = np.random.default_rng(9)
    n, E = 40, 300
    indptr, col, perm, ok = G.csr_by_key(rng.integers(0, n - 4, E), rng.integers(0, n, E), n, n)
    assert ok
    for k in list(range(1, 21)) + [37, 85, 130]:
        x = rng.integers(-3, 3, (n, k)).astype(dtype)
        x[rng.random((n, k)) < 0.05] = np.nan
        x[rng.random((n, k)) < 0.05] = -0.0
        for is_max in (True, False):
            want, want_arg = _extreme_oracle(indptr, col, perm, x, is_max)
            for tasks in (np.array([0, n]), np.array([0, 3, 20, 21, n])):
                out = np.full((n, k), 5, dtype)
                arg = np.full((n, k), 5, np.int32)
                G.gspmm_extreme(tasks, indptr, col, perm, x, out, arg, is_max)
                np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), want.view(f"u{out.itemsize}"),
                                              err_msg=f"k={k} max={is_max}")
                np.testing.assert_array_equal(arg, want_arg, err_msg=f"k={k} max={is_max}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_weighted_max_and_min_kernel_against_plain_loops(dtype):
    """``_portable_gspmm.gspmm_extreme_weighted`` (max/min of edge-weighted source rows, a weight
    per edge and head): 1, 2 and 3 heads; head widths that take every register block (32 down to
    1 column); weights of both signs and zero, NaN and -0.0 among the values; empty rows; one task
    and several. Values bit for bit, edge ids equal."""
    from mmvref._fast.sparse import _portable_gspmm as G

    rng = np.random.default_rng(10)
    n, E = 30, 200
    indptr, col, perm, ok = G.csr_by_key(rng.integers(0, n - 3, E), rng.integers(0, n, E), n, n)
    assert ok
    for heads, C in ((1, 1), (1, 63), (2, 5), (3, 20), (2, 32)):
        F = heads * C
        x = rng.integers(-3, 3, (n, F)).astype(dtype)
        x[rng.random((n, F)) < 0.05] = np.nan
        x[rng.random((n, F)) < 0.05] = -0.0
        w = rng.choice(np.array([-1.5, -1.0, 0.0, 0.5, 2.0]), (E, heads)).astype(dtype)
        for is_max in (True, False):
            want, want_arg = _extreme_oracle(indptr, col, perm, x, is_max, w)
            for tasks in (np.array([0, n]), np.array([0, 3, 20, 21, n])):
                out = np.full((n, F), 5, dtype)
                arg = np.full((n, F), 5, np.int32)
                G.gspmm_extreme_weighted(tasks, indptr, col, perm, w, heads, x, out, arg, is_max)
                np.testing.assert_array_equal(out.view(f"u{out.itemsize}"), want.view(f"u{out.itemsize}"),
                                              err_msg=f"heads={heads} C={C} max={is_max}")
                np.testing.assert_array_equal(arg, want_arg, err_msg=f"heads={heads} C={C} max={is_max}")


@pytest.mark.native_only  # plain loops of one portable path (no target-specific code)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_max_backward_kernels_against_plain_loops(dtype):
    """``_portable_gspmm.gspmm_extreme_backward`` (and the weighted one, with and without the
    weights' gradient): each output's gradient routed to the source row (times the weight) of its
    edge, rows without an edge (-1) skipped, many outputs into one source row; every block width
    (16 up to all columns, widths that do not divide F) gives the plain loops' bits, which add in
    output-row order."""
    from mmvref._fast.sparse import _portable_gspmm as G

    rng = np.random.default_rng(10)
    n_out, n_src, E, heads = 30, 12, 90, 2
    src = rng.integers(0, n_src, E).astype(np.int32)
    for F in (1, 6, 40, 70):
        arg = rng.integers(-1, E, (n_out, F)).astype(np.int32)
        g = rng.standard_normal((n_out, F)).astype(dtype)
        x = rng.standard_normal((n_src, F)).astype(dtype)
        hs = heads if F % heads == 0 else 1
        C = F // hs
        w = rng.standard_normal((E, hs)).astype(dtype)
        want = np.zeros((n_src, F), dtype)
        want_w = np.zeros((n_src, F), dtype)
        want_gw = np.zeros((E, hs), dtype)
        for i in range(n_out):
            for f in range(F):
                e = arg[i, f]
                if e >= 0:
                    want[src[e], f] += g[i, f]
                    want_w[src[e], f] += w[e, f // C] * g[i, f]
                    want_gw[e, f // C] += g[i, f] * x[src[e], f]
        steps = sorted({16, 32, 48, F, G.backward_columns(F, 2), G.backward_columns(F, 8)})
        for step in steps:
            got = np.zeros((n_src, F), dtype)
            G.gspmm_extreme_backward(arg, src, g, got, step)
            np.testing.assert_array_equal(got, want, err_msg=f"F={F} step={step}")
            got = np.zeros((n_src, F), dtype)
            G.gspmm_extreme_backward_weighted(arg, src, w, hs, g, x, got, np.zeros((0, 1), dtype), step)
            np.testing.assert_array_equal(got, want_w, err_msg=f"weighted F={F} step={step}")
            got, gw = np.zeros((n_src, F), dtype), np.zeros((E, hs), dtype)
            G.gspmm_extreme_backward_weighted(arg, src, w, hs, g, x, got, gw, step)
            np.testing.assert_array_equal(got, want_w, err_msg=f"weighted, weights' gradient F={F} step={step}")
            np.testing.assert_array_equal(gw, want_gw, err_msg=f"weights' gradient F={F} step={step}")
    assert G.backward_columns(128, 2) == 64 and G.backward_columns(16, 2) == 16 and G.backward_columns(70, 2) == 48


@pytest.mark.native_only  # plain loops of one portable path (no target-specific code)
def test_csr_values_puts_each_edge_weight_at_its_entry():
    """``_portable_gspmm.csr_values`` (the fused weighted sums' values in CSR order): out[p] =
    values[perm[p]] for every entry, with empty rows and tasks of one row, several, or none."""
    from mmvref._fast.sparse import _portable_gspmm as G

    rng = np.random.default_rng(11)
    for n, E in ((1, 0), (5, 1), (40, 300), (300, 5000)):
        indptr, col, perm, ok = G.csr_by_key(rng.integers(0, n, E), rng.integers(0, n, E), n, n)
        assert ok
        values = rng.standard_normal(E).astype(np.float32)
        for n_tasks in (1, 3, min(n, 7)):
            out = np.full(E, np.nan, np.float32)
            G.csr_values(G.row_tasks(indptr, n_tasks), indptr, values, perm, out)
            np.testing.assert_array_equal(out, values[perm], err_msg=f"n={n} E={E} tasks={n_tasks}")


def _row_tasks_oracle(indptr, n_tasks):
    """Plain loop: task t ends at the first row r with indptr[r] + r >= (total * t) // n_tasks,
    total = nnz + rows (or at the last row)."""
    n = len(indptr) - 1
    total = int(indptr[n]) + n
    bounds, r = [0], 0
    for t in range(1, n_tasks):
        while r < n and int(indptr[r]) + r < (total * t) // n_tasks:
            r += 1
        bounds.append(r)
    return bounds + [n]


def test_row_tasks_split_rows_and_entries_evenly():
    """``_portable_gspmm.row_tasks`` (the fused kernels' row tasks): against a plain loop, with
    empty rows, one giant row, fewer rows than tasks and no rows."""
    from mmvref._fast.sparse import _portable_gspmm as G

    rng = np.random.default_rng(12)
    cases = [np.zeros(1, np.int64), np.array([0, 0, 0, 0]), np.array([0, 1000, 1000, 1001]),
             np.array([0, 5]), np.concatenate([[0], np.cumsum(rng.integers(0, 4, 500))]),
             np.concatenate([[0], np.cumsum(rng.zipf(1.5, 300) % 5000)])]
    for indptr in cases:
        indptr = np.asarray(indptr, np.int64)
        for n_tasks in (1, 2, 3, 8, 17):
            got = G.row_tasks(indptr, n_tasks)
            assert got.dtype == np.int64
            assert got.tolist() == _row_tasks_oracle(indptr.tolist(), n_tasks), (indptr[:8], n_tasks)


def _spgemm_oracle(A, B, rdt):
    rows = []
    for r in range(A.shape[0]):
        acc = {}
        for q in range(A.indptr[r], A.indptr[r + 1]):
            kk = A.indices[q]
            for pp in range(B.indptr[kk], B.indptr[kk + 1]):
                j = int(B.indices[pp])
                prod = rdt.type(A.data[q]) * rdt.type(B.data[pp])
                acc[j] = prod if j not in acc else acc[j] + prod
        rows.append(sorted((j, v) for j, v in acc.items() if v != 0))
    indptr = np.cumsum([0] + [len(rw) for rw in rows])
    return indptr, [j for rw in rows for j, _ in rw], [v for rw in rows for _, v in rw]


def _operands(seed, p):
    """A with short rows (the coordinate list), long rows (> RANK_MAX products) whose columns
    are spread over p (the sort fallback when p is large) or dense; repeats and cancellations."""
    rng = np.random.default_rng(seed)
    n = 40
    B = sp.random(n, p, min(1.0, 8.0 / p), format="csr", random_state=seed)
    B.data = np.round(B.data * 8) - 4
    A = sp.random(60, n, 0.1, format="csr", random_state=seed + 1).tolil()
    A[0] = 1.0
    A[1, :20] = 2.0
    A = A.tocsr()
    A.data = np.round(rng.standard_normal(A.nnz) * 3)
    return A, B.tocsr()


@pytest.mark.native_only  # SpGEMM: one portable path of plain loops (no target-specific code)
@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**16), p=st.sampled_from([50, 1000, 5000, 1 << 16]),
       workspace=st.sampled_from(["auto", "dense", "sparse"]), staging=st.booleans(),
       serial_cost=st.sampled_from([0, 1 << 40]))
def test_spgemm_serial_and_parallel_kernels(seed, p, workspace, staging, serial_cost):
    A, B = _operands(seed, p)
    rdt = np.dtype(np.float64)
    with _setattr(ops, "SERIAL_COST", serial_cost), _setattr(ops, "STAGING_MAX_BYTES", 1 << 30 if staging else 0):
        C = mmvref.spgemm(A, B, workspace=workspace)
    indptr, indices, vals = _spgemm_oracle(A, B, rdt)
    assert C.indptr.tolist() == indptr.tolist() and C.indices.tolist() == indices
    np.testing.assert_array_equal(C.data, np.array(vals, rdt))


@pytest.mark.native_only  # SpMM / SpGEMM: one portable path of plain loops (no target-specific code)
@pytest.mark.parametrize("serial_cost", [0, 1 << 40])
def test_spgemm_invalid_operands_named(serial_cost):
    A = sp.csr_matrix(np.eye(3))
    with _setattr(ops, "SERIAL_COST", serial_cost):
        with pytest.raises(ValueError, match="B: .*indices out of range"):
            mmvref.spgemm(A, (np.array([0, 1, 1, 1]), np.array([5]), np.array([1.0]), (3, 3)))
        with pytest.raises(ValueError, match="A: .*non-decreasing"):
            mmvref.spgemm((np.array([0, 1, 0, 1]), np.array([0]), np.array([1.0]), (3, 3)), A)
        with pytest.raises(ValueError, match="A: "):  # A's error first when both are invalid
            mmvref.spgemm((np.array([0, 1, 0, 1]), np.array([0]), np.array([1.0]), (3, 3)),
                          (np.array([0, 1, 1, 1]), np.array([5]), np.array([1.0]), (3, 3)))
