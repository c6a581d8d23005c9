"""Cold start of the scan family and compress (issue 31, point 6): a first call compiles only the
kernel of the path its input takes, and the specialized kernels (sequential and parallel variants,
made by factories) give the same results on every path.

- A fresh process with an empty Numba cache: the kernels each op's first call compiles (counted by
  Numba's compile events, nested kernels and closures included) on the input of
  tools/cold_start.py: one each; then a second process on the same cache compiles nothing (the
  closures' cache entries are found again). The parallel variants compile without
  NumbaPerformanceWarning (a prange that Numba cannot parallelize runs serially).
- The parallel variants (PAR_MIN / MIN_CHUNK lowered) against the sequential ones, bit for bit:
  sorts, top-k and top-p of rows, split, compress (one chunk: the mask counted by numpy or by
  ``mask_stats``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import mmvref
from mmvref._fast.compress import ops as cops
from mmvref._fast.scanfamily import ops as sf

pytestmark = pytest.mark.native_only

from tests.compile_events import listener_source

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------- cold process

PROBE = listener_source('mmvref', 'd.py_func.__module__.rpartition("._fast.")[2] + "." + d.py_func.__qualname__') + r"""
import json
import numpy as np
import mmvref

out = {}
for DT in ("float32", "int32"):
    rng = np.random.default_rng(0)
    n = 1000
    x = rng.integers(-5, 6, n).astype(DT)
    mask = x > 0
    p2 = rng.random((4, 50)); p2 /= p2.sum(1, keepdims=True)
    calls = {
        "radix_sort": lambda: mmvref.radix_sort(x),
        "argsort": lambda: mmvref.argsort(x),
        "topk": lambda: mmvref.topk(x, 10),
        "split": lambda: mmvref.split(x, mask),
        "split_ind": lambda: mmvref.split_ind(x, mask),
        "compress": lambda: mmvref.compress(x, mask),
        "compress_ind": lambda: mmvref.compress_ind(x, mask),
    }
    if DT == "float32":
        calls["weighted_sample"] = lambda: mmvref.weighted_sample(np.abs(x) + 1, 0.5)
        calls["top_p_sample"] = lambda: mmvref.top_p_sample(p2, 0.9, np.full(4, 0.5))
    for op, call in calls.items():
        del compiled[:]
        call()
        out[op + " " + DT] = list(compiled)

# the parallel variants: every one parallelized (no NumbaPerformanceWarning)
import warnings
from numba.core.errors import NumbaPerformanceWarning
from mmvref._fast.scanfamily import ops as sf

warnings.simplefilter("error", NumbaPerformanceWarning)
sf.PAR_MIN, sf.MIN_CHUNK = 8, 3
x = np.random.default_rng(1).integers(-9, 9, 6000).astype(np.float32)
x2 = x.reshape(60, 100)
del compiled[:]
mmvref.radix_sort(x), mmvref.argsort(x), mmvref.topk(x, 5), mmvref.topk(x, 3000)
mmvref.radix_sort(x2), mmvref.topk(x2, 5), mmvref.top_p_sample(np.abs(x2) + 1, 0.9, np.full(60, 0.5))
mmvref.split(x, x > 0), mmvref.split_ind(x, x > 0)
xb = np.random.default_rng(2).integers(-9, 9, 200000).astype(np.float32)
mmvref.compress(xb, xb > 0), mmvref.compress_ind(xb, xb > 0)
out["parallel"] = list(compiled)
print(json.dumps(out))
"""


def _probe(cache):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    env.pop("NUMBA_DISABLE_JIT", None)
    env.pop("NUMBA_NUM_THREADS", None)
    r = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=ROOT,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


ROWS = "scanfamily._portable._make_rows.<locals>.rows"
#: the functions the row kernel calls: compiled with it (nested events after its own) when no
#: earlier kernel compiled them for these words
ROW_HELPERS = {"scanfamily._portable._row_keys", "scanfamily._portable.select_seq"}


def test_first_call_compiles_one_kernel_and_a_second_process_none(tmp_path):
    """The input of tools/cold_start.py (n = 1000, one chunk): every first call compiles one
    sequential kernel (the sorts, top-k and top-p: the row kernel's variant for the input), or none
    where an earlier call compiled it: every kernel here moves words of the input's width (the sorts
    take float-or-integer as an argument), so int32 reuses float32's; then nothing at all from the
    cache."""
    cold = _probe(tmp_path)
    expect = {
        "radix_sort": [ROWS], "argsort": [ROWS], "topk": [ROWS],
        "split": ["scanfamily._portable._make_split_scatter.<locals>.split_scatter"],
        "split_ind": ["scanfamily._portable._make_split_scatter.<locals>.split_scatter"],
        "compress": ["compress._portable._make_compress.<locals>.compress_kernel"],
        "compress_ind": ["compress._portable._make_compress_ind.<locals>.compress_ind_kernel"],
        "weighted_sample": ["scanfamily._portable.sample_float"], "top_p_sample": [ROWS],
    }
    for key, got in cold.items():
        if key == "parallel":
            continue
        op, dt = key.split()
        same_words = dt == "int32"  # after float32's calls: words of the same width
        if got[:1] == [ROWS]:  # the row kernel and, nested, its helpers not yet compiled
            assert len(set(got[1:])) == len(got) - 1 and set(got[1:]) <= ROW_HELPERS, (key, got)
            got = got[:1]
        assert got == ([] if same_words else expect[op]), (key, got)
    assert {"scanfamily._portable.keys_hist",
            "scanfamily._portable._make_scatter.<locals>.scatter", ROWS,
            "scanfamily._portable._make_mask_counts.<locals>.mask_counts",
            "scanfamily._portable._make_split_scatter.<locals>.split_scatter",
            "compress._portable._make_compress.<locals>.compress_kernel"} <= set(cold["parallel"]), cold["parallel"]
    warm = _probe(tmp_path)
    assert all(v == [] for v in warm.values()), warm


# ----------------------------------------------------------------------------- parallel = sequential

def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}")


def _both(monkeypatch, fn):
    """fn() on the sequential variants, then on the parallel ones (PAR_MIN, MIN_CHUNK lowered)."""
    seq = fn()
    with monkeypatch.context() as m:
        m.setattr(sf, "PAR_MIN", 8)
        m.setattr(sf, "MIN_CHUNK", 3)
        par = fn()
    return seq, par


def _same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for u, v in zip(a, b):
            _same(u, v)
        return
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(_bits(a), _bits(b))


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "float16", "float32", "float64"])
def test_parallel_variants_equal_sequential(dtype, monkeypatch):
    rng = np.random.default_rng(7)
    x = rng.integers(-40, 40, (24, 333)).astype(dtype)
    if x.dtype.kind == "f":
        x[:, ::17] = np.nan
        x[:, 1::13] = -0.0
    flat = x.reshape(-1)
    mask = rng.random(flat.size) < 0.3
    for fn in (lambda: mmvref.radix_sort(x), lambda: mmvref.radix_sort(x, descending=True),
               lambda: mmvref.argsort(x), lambda: mmvref.topk(x, 7), lambda: mmvref.topk(x, 333, largest=False),
               lambda: mmvref.radix_sort(flat), lambda: mmvref.argsort(flat, descending=True),
               lambda: mmvref.topk(flat, 50), lambda: mmvref.split(flat, mask), lambda: mmvref.split_ind(flat, mask)):
        seq, par = _both(monkeypatch, fn)
        _same(seq, par)
    ref = np.argsort(x, axis=1, kind="stable")
    _same(mmvref.argsort(x), ref)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_top_p_parallel_rows_equal_sequential(dtype, monkeypatch):
    rng = np.random.default_rng(11)
    probs = np.round(rng.random((9, 500)), 2).astype(dtype)  # ties
    u = rng.random(9)
    for p in (0.0, 0.3, 0.9, 1.0):
        seq, par = _both(monkeypatch, lambda p=p: mmvref.top_p_sample(probs, p, u))
        _same(seq, par)
        one = [mmvref.top_p_sample(probs[r], p, float(u[r])) for r in range(9)]
        assert seq.tolist() == [int(v) for v in one]


@pytest.mark.parametrize("small", [1 << 16, 0])
def test_compress_one_chunk_mask_counts(small, monkeypatch):
    """One chunk: the mask counted by numpy (small) or by ``mask_stats``; invalid bytes refused."""
    monkeypatch.setattr(cops, "MASK_SMALL", small)
    rng = np.random.default_rng(3)
    for n in (1, 7, 1000):
        x = rng.standard_normal(n).astype(np.float32)
        for mask in (rng.random(n) < 0.4, np.zeros(n, bool), np.ones(n, bool)):
            for m in (mask, mask.view(np.uint8), mask.view(np.int8)):
                _same(mmvref.compress(x, m), x[mask])
                _same(mmvref.compress_ind(x, m), (x[mask], np.flatnonzero(mask)))
        bad = np.zeros(n, np.uint8)
        bad[n - 1] = 3
        with pytest.raises(ValueError, match=rf"mask\[{n - 1}\] = 3"):
            mmvref.compress(x, bad)
