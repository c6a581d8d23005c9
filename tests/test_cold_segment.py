"""Cold start of the segment family's reductions (issue 31, point 6): a first call compiles only the
kernel of the path its input takes, made for its reduction, args, feature blocks and rows
(``_portable_nd``), and the specialized kernels give the plain loops' results on every path.

- A fresh process with an empty Numba cache: the kernels each op's first call compiles (counted by
  Numba's compile events, kernel bodies included) on the inputs of tools/cold_start.py and a few
  more (max with args, one column, unsorted scatter): one kernel and its body, no offset check, no
  index pass; then a second process on the same cache compiles nothing, with the same results
  (kernels of different feature blocks keep different cache entries).
- Every kind of feature blocks (blocks of 32/16/8/4, a last block ending at F, one block of 1-3
  lanes), every reduction, with and without args and rows, against plain loops, bit for bit.
- The numpy paths of the small inputs (index bounds, counting sort, flag counts, segment starts)
  against the kernels of the large ones; offsets checked inside the reductions' pass.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numba
import numpy as np
import pytest

import mmvref
from mmvref._fast import _variants
from mmvref._fast.segment import _nd
from mmvref._fast.segment import _portable as K
from mmvref._fast.segment import _portable_nd as R
from tests.compile_events import listener_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# the N-d reductions and the segment family's portable kernels: one portable path of plain loops and generic vector IR (no kernel chosen by the compile target)
pytestmark = pytest.mark.native_only

# ----------------------------------------------------------------------------- cold process

PROBE = listener_source('mmvref._fast.segment', 'd.py_func.__module__.rpartition(".")[2] + "." + d.py_func.__qualname__') + r"""
import json
import numpy as np
import mmvref

out, res = {}, {}
for DT in ("float32", "int32"):
    rng = np.random.default_rng(0)
    n = 1000
    x = rng.integers(-5, 6, n).astype(DT)
    x2 = rng.integers(-5, 6, (n, 8)).astype(DT)
    flags = np.zeros(n, bool); flags[::7] = True
    indptr = np.arange(0, n + 1, 10, dtype=np.int64)
    index = np.sort(rng.integers(0, 100, n))
    shuffled = rng.permutation(index)
    calls = {
        "segment_csr": lambda: mmvref.segment_csr(x2, indptr),
        "segment_coo": lambda: mmvref.segment_coo(x2, index),
        "scatter": lambda: mmvref.scatter(x2, index),
        "segmented_sum": lambda: mmvref.segmented_sum(x, flags),
        "segment_sum_csr": lambda: mmvref.segment_sum_csr(x, indptr),
        "argmax": lambda: mmvref.segment_csr(x2, indptr, reduce="max", return_arg=True),
        "max_1d": lambda: mmvref.segment_csr(x, indptr, reduce="max"),
        "scatter_unsorted": lambda: mmvref.scatter(x2, shuffled),
        "f4": lambda: mmvref.segment_csr(x2[:, :4], indptr),
        "f5": lambda: mmvref.segment_csr(x2[:, :5], indptr),
        "segmented_scan_nd": lambda: mmvref.segmented_scan(x2, flags),
    }
    for op, call in calls.items():
        del compiled[:]
        r = call()
        out[op + " " + DT] = list(compiled)
        res[op + " " + DT] = [np.asarray(v).tolist() for v in (r if isinstance(r, tuple) else (r,))]
print(json.dumps({"compiled": out, "results": res}))
"""


def _probe(cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), NUMBA_NUM_THREADS="2")  # scatter's direct path
    env.pop("NUMBA_DISABLE_JIT", None)
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=ROOT,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _kernel(name):
    # inputs of under PARALLEL_MIN elements take the kernel's serial twin: its tasks in turn
    return ["_portable_nd." + name + "__serial", "_portable_nd." + name + "__body"]


def test_first_call_compiles_one_kernel_and_a_second_process_none(tmp_path):
    """Each first call compiles the one kernel (and its body) made for its reduction, args, feature
    blocks and rows, its serial twin (the inputs are under ``PARALLEL_MIN`` elements): no parallel
    kernel, no other reduction, width or path, no offset-order pass (the reductions check
    the offsets they read), no index pass below ``COO_SMALL``. A second process compiles nothing and
    gets the same results, so the kernels' cache entries stay apart (F = 4 and F = 5 included)."""
    cold = _probe(tmp_path)
    expect = {
        "segment_csr": _kernel("csr_reduce_{k}__sum_w8"),
        "segment_coo": [], "scatter": [],  # segment_csr's kernel, compiled by its call
        "segmented_sum float32": _kernel("csr_reduce_column_float__sum"),
        "segment_sum_csr float32": [],  # segmented_sum's kernel
        "segment_sum_csr int32": ["_portable._make_csr_sums_int_short.<locals>.csr_sums_int_short"],  # serial twin
        "argmax": _kernel("csr_reduce_{k}__max_arg_w8"),
        "max_1d float32": _kernel("csr_reduce_column_float__max"),
        "max_1d int32": _kernel("csr_reduce_int__max_w1"),
        "f4": _kernel("csr_reduce_{k}__sum_w4"),
        "f5": _kernel("csr_reduce_{k}__sum_w4_4"),
        "segmented_scan_nd": _kernel("column_scan_{k}__seg_inclusive"),
    }
    for key, got in cold["compiled"].items():
        op, dt = key.split()
        k = "float" if dt == "float32" else "int"
        if op == "segmented_sum" and dt == "int32":
            # the one-column integer kernels of the target's path (x86 or portable): no N-d kernel,
            # no flag-counting pass below FLAGS_SMALL
            assert not any("_portable_nd" in g or "flag_stats" in g for g in got), got
            continue
        if op == "scatter_unsorted":
            want = (_kernel("scatter_direct_float__sum") if dt == "float32"
                    else ["_portable_nd.counting_sort_pass"] + _kernel("csr_reduce_int__sum_w8_rows"))
        else:
            want = [w.format(k=k) for w in expect.get(key, expect.get(op))]
        assert sorted(got) == sorted(want), (key, got)
    warm = _probe(tmp_path)
    assert all(v == [] for v in warm["compiled"].values()), warm["compiled"]
    assert warm["results"] == cold["results"]
    for dt in ("float32", "int32"):
        rng = np.random.default_rng(0)
        rng.integers(-5, 6, 1000)
        x2 = rng.integers(-5, 6, (1000, 8)).astype(dt)
        for key, F in (("f4", 4), ("f5", 5)):
            want = np.add.reduceat(x2[:, :F].astype(np.int64), np.arange(0, 1000, 10)).tolist()
            assert warm["results"][f"{key} {dt}"] == [want]


# ----------------------------------------------------------------------------- the specializations

def test_block_widths_cover_every_feature():
    for F in range(1, 300):
        W, Wt = R.block_widths(F)
        assert W <= F and (W in R.WIDTHS or (F < 4 and W == F)), F
        blocks = [(k, W) for k in range(0, F - W + 1, W)]
        k = blocks[-1][0] + W
        if k < F:
            assert Wt in R.WIDTHS and F % W <= Wt <= W, (F, W, Wt)
            blocks.append((F - Wt, Wt))
        else:
            assert Wt == 0, F
        covered = np.zeros(F, int)
        for k0, w in blocks:
            covered[k0:k0 + w] += 1
        assert covered.min() == 1, F
        assert len(blocks) <= -(-F // 32) + 2, F


def test_kernel_names_stand_for_their_constants():
    """The name of a kernel is its cache key's closure value: one per set of constants."""
    names = set()
    for op in (R.SUM, R.MEAN, R.MIN, R.MAX, R.PROD):
        for arg in (False, True):
            for F in (1, 2, 3, 4, 5, 8, 9, 13, 16, 20, 31, 32, 33, 40, 48, 60, 64, 100):
                for rows in (False, True):
                    names.add(R.csr_reduce_float(op, arg, F, rows).py_func.__name__)
                    for check in (False, True):
                        names.add(R.csr_reduce_int(op, arg, F, check, rows).py_func.__name__)
            names.add(R.scatter_direct_float(op, arg).py_func.__name__)
            names.add(R.scatter_private_float(op, arg).py_func.__name__)
        names.add(R.csr_reduce_column_float(op).py_func.__name__)
    from mmvref._fast._variants import TaskBody

    made = [n for n, b in TaskBody.made.items() if b.dispatcher.py_func.__module__ == R.__name__]
    assert len(made) == len(set(made)) and names <= set(made)
    for name in made:  # each body has a parallel kernel and a serial twin, under names of their own
        assert getattr(R, name).py_func.__name__ == name
        assert getattr(R, name + "__serial").py_func.__name__ == name + "__serial"
        assert getattr(R, name).targetoptions.get("parallel") is True
        assert not getattr(R, name + "__serial").targetoptions.get("parallel")
    with pytest.raises(RuntimeError, match="two task bodies named"):
        TaskBody(made[0], lambda: None)


def _plain(x3, bounds, rows, op, want_arg):
    """The reductions of x3 [B, E, F] over the segments, position by position (ties: the first;
    NaN: the first), in x3's dtype for floats and Python ints for integers."""
    B, E, F = x3.shape
    N = bounds.size - 1
    out = np.zeros((B, N, F), x3.dtype if x3.dtype.kind == "f" else object)
    arg = np.full((B, N, F), E, np.int64)
    for b in range(B):
        for n in range(N):
            pos = [rows[e] if rows.size else e for e in range(bounds[n], bounds[n + 1])]
            if not pos:
                out[b, n] = 1 if op == "prod" else 0
                continue
            for k in range(F):
                vals = [x3[b, p, k] if x3.dtype.kind == "f" else int(x3[b, p, k]) for p in pos]
                acc, a = vals[0], pos[0]
                for v, p in zip(vals[1:], pos[1:]):
                    if op in ("sum", "mean"):
                        acc = acc + v
                    elif op == "prod":
                        acc = acc * v
                    elif acc == acc and (v != v or (v < acc if op == "min" else v > acc)):
                        acc, a = v, p
                if op == "mean":
                    acc = acc / x3.dtype.type(len(pos)) if x3.dtype.kind == "f" else acc // len(pos)
                out[b, n, k], arg[b, n, k] = acc, a
    return out, arg


# every reduction (args included) and every kind of feature blocks (W, Wt) at least once per dtype, with
# and without rows: F = 1 and 3 (one block of 1-3 lanes), 4 and 8 (whole blocks), 5 (a last block of the
# same width, overlapping), 13 and 20 (narrower last blocks), 40 (32 then 8), 33 (32 then 4)
_CASES = [(1, "max", True, False), (1, "sum", False, True), (3, "prod", False, False), (3, "min", True, True),
          (4, "mean", False, True), (5, "min", False, False), (5, "sum", False, True), (8, "max", True, True),
          (13, "mean", False, False), (13, "max", False, True), (20, "min", True, False), (33, "sum", False, False),
          (40, "max", True, True), (40, "prod", False, True)]


# float64 / int64 and the sweep of every feature count compile more kernels of the same code: the native
# stage runs them (the haswell stage skips slow tests)
_SLOW = pytest.mark.slow
_FEATURE_COUNTS = [(F, "sum", False, F % 2 == 0) for F in list(range(1, 18)) + [24, 31, 36, 47, 63, 65, 70]]


@pytest.mark.parametrize("dt,cases", [(np.float32, _CASES), (np.int32, _CASES),
                                      pytest.param(np.float64, _CASES, marks=_SLOW),
                                      pytest.param(np.int64, _CASES, marks=_SLOW),
                                      pytest.param(np.float32, _FEATURE_COUNTS, marks=_SLOW),
                                      pytest.param(np.int64, _FEATURE_COUNTS, marks=_SLOW)],
                         ids=["float32", "int32", "float64", "int64", "float32-every-F", "int64-every-F"])
def test_every_kind_of_feature_blocks_matches_plain_loops(dt, cases):
    rng = np.random.default_rng(7)
    for F, op, want_arg, with_rows in cases:
        B, E = (2 if F % 2 == 0 else 1), 23
        x3 = rng.integers(-2, 3, (B, E, F)).astype(dt)  # exact sums and products, in any order; ties
        if x3.dtype.kind == "f":
            x3[0, 5, F // 2] = x3[-1, 17, F - 1] = np.nan
        bounds = np.array([0, 0, 3, 4, 11, 11, 23], np.int64)
        rows = rng.permutation(E).astype(np.int64) if with_rows else np.zeros(0, np.int64)
        cdt = np.dtype(dt) if x3.dtype.kind == "f" else np.dtype(np.int64)
        got, garg, _, _ = _nd.reduce3(x3, bounds, rows, _nd.reduce_code(op), cdt, want_arg, False)
        want, warg = _plain(x3, bounds, rows, op, want_arg)
        if x3.dtype.kind == "f":
            np.testing.assert_array_equal(got, want, err_msg=f"{F} {op} {with_rows}")
        else:
            assert [int(v) for v in got.ravel()] == [int(v) for v in want.ravel()], (F, op, with_rows)
        if want_arg:
            np.testing.assert_array_equal(garg, warg, err_msg=f"{F} {op} {with_rows} arg")


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="one thread: the parallel kernels are never taken")
@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_serial_and_parallel_twins_give_the_same_bits(dt, monkeypatch):
    """Inputs under ``PARALLEL_MIN`` elements run a kernel's tasks in turn (its serial twin), larger ones
    on threads: the same tasks through the same body, so the same bits (NaNs, ties and args included),
    and the parallel kernel is the one that ran when the threshold is lowered."""
    rng = np.random.default_rng(9)
    B, E = 2, 3000  # several tasks per batch (``_tasks``)
    bounds = np.unique(np.r_[0, rng.integers(0, E, 40), E]).astype(np.int64)
    assert _nd._tasks(bounds, B, E)[0].size > 1
    for F, op, want_arg, with_rows in [(1, "sum", False, False), (1, "max", True, True), (5, "sum", False, True),
                                       (8, "mean", False, False), (40, "max", True, False), (3, "prod", False, True)]:
        x3 = rng.integers(-2, 3, (B, E, F)).astype(dt)
        if x3.dtype.kind == "f":
            x3[0, 5, F // 2] = x3[-1, 1700, F - 1] = np.nan
        rows = rng.permutation(E).astype(np.int64) if with_rows else np.zeros(0, np.int64)
        cdt = np.dtype(dt) if x3.dtype.kind == "f" else np.dtype(np.int64)
        code = _nd.reduce_code(op)
        got = []
        for pmin in (1 << 62, 0):
            monkeypatch.setattr(_variants, "PARALLEL_MIN", pmin)
            got.append(_nd.reduce3(x3, bounds, rows, code, cdt, want_arg, False)[:2])
        np.testing.assert_array_equal(got[0][0], got[1][0], err_msg=f"{F} {op} {with_rows}")
        np.testing.assert_array_equal(got[0][1], got[1][1], err_msg=f"{F} {op} {with_rows} arg")
        if x3.dtype.kind == "f" and F == 1 and not want_arg:
            kernel = R.csr_reduce_column_float(code, parallel=True)
        elif x3.dtype.kind == "f":
            kernel = R.csr_reduce_float(code, want_arg, F, with_rows, parallel=True)
        else:
            kernel = R.csr_reduce_int(code, want_arg, F, False, with_rows, parallel=True)
        assert kernel.signatures, (F, op)  # the parallel kernel ran
    # scatter's direct path and the column scans
    x2 = rng.integers(-9, 9, (E, 6)).astype(dt)
    index = rng.integers(0, 50, E)
    flags = (rng.random(E) < 0.01).astype(np.uint8)
    got = []
    for pmin in (1 << 62, 0):
        monkeypatch.setattr(_variants, "PARALLEL_MIN", pmin)
        got.append([mmvref.scatter(x2, index, reduce="max"), mmvref.segmented_scan(x2, flags, axis=0),
                    mmvref.scan(x2, axis=0, exclusive=True)])
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)


def test_integer_results_are_stored_at_their_width_with_their_range():
    """int32 results from int64 words: stored wrapping, the range of the words kept (the overflow
    decision), the mean floor-divided (negative sums included)."""
    x = np.array([[2**31 - 1, -7], [1, -2], [5, 3]], np.int32)
    with pytest.raises(OverflowError):
        mmvref.segment_csr(x, [0, 2, 3])
    w = mmvref.segment_csr(x, [0, 2, 3], overflow="wrap")
    assert w.dtype == np.int32 and w.tolist() == [[-2**31, -9], [5, 3]]
    m = mmvref.segment_csr(np.array([[-7, 7], [2, -2], [0, 0]] * 3, np.int32), [0, 2, 9], reduce="mean")
    assert m.tolist() == [[-3, 2], [-2, 1]]


@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_column_scans_match_cumsum(dt):
    """The N-d scans (one kernel per segmented / exclusive / checked): position order, restarting at
    the flags; exclusive: the sum before each position."""
    rng = np.random.default_rng(8)
    for shape, axis in [((40, 3), 0), ((3, 30, 20), 1)]:
        x = (rng.standard_normal(shape) * 8).astype(dt) if dt == np.float32 else rng.integers(-9, 9, shape).astype(dt)
        E = shape[axis]
        flags = (rng.random(E) < 0.2).astype(np.uint8)
        starts = np.flatnonzero(flags[1:]) + 1
        for exclusive in (False, True):
            for seg in (False, True):
                got = (mmvref.segmented_scan(x, flags, axis=axis, exclusive=exclusive) if seg
                       else mmvref.scan(x, axis=axis, exclusive=exclusive))
                want = np.zeros_like(got)
                for lo, hi in zip(np.r_[0, starts] if seg else [0], np.r_[starts, E] if seg else [E]):
                    part = np.take(x, np.arange(lo, hi), axis=axis).astype(got.dtype)
                    c = np.cumsum(part, axis=axis, dtype=got.dtype)
                    if exclusive:
                        c = c - part if dt != np.float32 else np.concatenate(
                            [np.zeros_like(np.take(c, [0], axis=axis)), np.take(c, np.arange(hi - lo - 1), axis=axis)],
                            axis=axis)
                    idx = [slice(None)] * x.ndim
                    idx[axis] = slice(lo, hi)
                    want[tuple(idx)] = c
                np.testing.assert_array_equal(got, want, err_msg=f"{shape} {exclusive} {seg}")


# ----------------------------------------------------------------------------- small inputs: numpy paths


def test_index_bounds_numpy_and_kernel_agree(monkeypatch):
    rng = np.random.default_rng(3)
    for E, n in [(1, 1), (5, 3), (1000, 100), (3000, 7000), (70000, 100)]:
        idx = np.sort(rng.integers(0, n, E))
        bad = idx.copy()
        bad[E // 2] = -1
        for index in (idx, idx[::-1].copy(), bad, idx + 1):
            small = R.coo_bounds(index, n)
            monkeypatch.setattr(R, "COO_SMALL", -1)
            big = R.coo_bounds(index, n)
            monkeypatch.undo()
            assert small[1:] == big[1:], (E, n)
            if small[1] >= 0 and small[2] < n and not small[3]:
                assert small[0].dtype == big[0].dtype == np.int64
                np.testing.assert_array_equal(small[0], big[0])
                np.testing.assert_array_equal(small[0], np.searchsorted(index, np.arange(n + 1)))


def test_counting_sort_one_and_several_pieces():
    rng = np.random.default_rng(4)
    for E, n in [(0, 0), (0, 4), (1, 1), (1000, 100), (5000, 3)]:
        idx = rng.integers(0, max(n, 1), E) if n else np.zeros(0, np.int64)
        for parts in (1, 2, 5):
            bounds, perm = R.counting_sort(idx, n, parts)
            np.testing.assert_array_equal(perm, np.argsort(idx, kind="stable"))
            np.testing.assert_array_equal(bounds, np.searchsorted(np.sort(idx), np.arange(n + 1)))


def test_flag_counts_numpy_and_kernel_agree(monkeypatch):
    rng = np.random.default_rng(5)
    for n in (1, 2, 100, 5000):
        f = (rng.random(n) < 0.3).astype(np.uint8)
        if n > 10:
            f[7] = 3
        starts = np.linspace(0, n, min(n, 6) + 1).astype(np.int64)
        a = (np.zeros(starts.size - 1, np.int64), np.zeros(starts.size - 1, np.uint8))
        b = (np.zeros(starts.size - 1, np.int64), np.zeros(starts.size - 1, np.uint8))
        K.flag_stats(f, starts, *a)
        K.flag_stats_chunks(f, starts, *b)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        fl = np.minimum(f, 1)
        ip = _nd.starts_indptr(fl, n)
        monkeypatch.setattr(_nd, "_STARTS_SMALL", 0)
        np.testing.assert_array_equal(ip, _nd.starts_indptr(fl, n))
        monkeypatch.undo()
        with pytest.raises(ValueError, match=r"flags\[7\] = 3" if n > 10 else "never"):
            if n > 10:
                _nd.starts_indptr(f, n)
            else:
                raise ValueError("never")


@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_scatter_and_coo_small_and_large_paths_agree(monkeypatch, dt):
    rng = np.random.default_rng(6)
    x = rng.integers(-9, 9, (3000, 5)).astype(dt)
    index = np.sort(rng.integers(0, 400, 3000))
    shuffled = rng.permutation(index)
    calls = [lambda r: mmvref.segment_coo(x, index, reduce=r), lambda r: mmvref.scatter(x, shuffled, reduce=r),
             lambda r: mmvref.scatter(x, index, reduce=r)]
    for r in ("sum", "max", "mean"):
        small = [c(r) for c in calls]
        monkeypatch.setattr(R, "COO_SMALL", -1)
        big = [c(r) for c in calls]
        monkeypatch.undo()
        for a, b in zip(small, big):
            np.testing.assert_array_equal(a, b)


# ----------------------------------------------------------------------------- offsets checked in the pass


@pytest.mark.parametrize("dt", [np.float32, np.int32])
@pytest.mark.parametrize("shape", [(6, 3), (6,), (6, 0), (0, 6, 2)])
def test_decreasing_offsets_raise_from_the_reduction(dt, shape):
    axis = 1 if len(shape) == 3 else 0
    x = np.ones(shape, dt)
    E = shape[axis]
    ip = np.array([0, 4, 2, E], np.int64)
    for reduce in ("sum", "max"):
        with pytest.raises(ValueError, match=r"indptr must be non-decreasing; indptr\[1\] = 4 > indptr\[2\] = 2"):
            mmvref.segment_csr(x, ip, axis=axis, reduce=reduce)
    with pytest.raises(ValueError, match="non-decreasing"):
        mmvref.segment_sum_csr(x, ip, axis=axis)
    out = np.empty(x.shape[:axis] + (3,) + x.shape[axis + 1:], mmvref.segment_csr(x, [0, E], axis=axis).dtype)
    with pytest.raises(ValueError, match="non-decreasing"):
        mmvref.segment_csr(x, ip, axis=axis, out=out)
