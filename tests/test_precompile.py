"""``python -m mmvref precompile``: it fills the Numba cache, and a fresh process then compiles nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mmvref import _precompile

ROOT = Path(__file__).resolve().parents[1]


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(extra)
    return env


def _mmvref(*args, timeout=600, **env):
    return subprocess.run([sys.executable, "-m", "mmvref", *args], capture_output=True, text=True,
                          env=_env(**env), timeout=timeout, cwd=ROOT)


def _files(cache: Path) -> dict:
    """Every file under the cache directory: its size and modification time."""
    return {str(p.relative_to(cache)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in cache.rglob("*") if p.is_file()}


# The same kind of input as the precompile task (int32, 1-D n = 1000 and 2-D (n, 8)): after the calls,
# every Numba dispatcher of mmvref's code (module level or not) reports what it compiled (cache misses)
# and what it loaded from the cache (hits).
_SECOND_PROCESS = """
import gc, json
import numpy as np
import mmvref
from numba.core.dispatcher import Dispatcher

x = np.random.default_rng(0).integers(-5, 6, 1000).astype(np.int32)
mmvref.scan(x)
mmvref.scan(x, exclusive=True)
mmvref.scan(x.reshape(125, 8), axis=0)
misses, hits = {}, {}
for d in gc.get_objects():
    if isinstance(d, Dispatcher) and (getattr(d.py_func, "__module__", None) or "").startswith("mmvref"):
        key = d.py_func.__module__ + "." + d.py_func.__qualname__
        if d.stats.cache_misses:
            misses[key] = [str(s) for s in d.stats.cache_misses]
        if d.stats.cache_hits:
            hits[key] = sum(d.stats.cache_hits.values())
print(json.dumps({"misses": misses, "hits": hits}))
"""


def test_precompile_fills_the_cache_and_a_fresh_process_compiles_nothing(tmp_path):
    cache = tmp_path / "numba-cache"
    cache.mkdir()
    r = _mmvref("precompile", "--ops", "scan", "--dtypes", "int32", "--jobs", "1", NUMBA_CACHE_DIR=str(cache))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert any(line.startswith("[1/1] scan int32") and line.split()[4] == "s" for line in lines), r.stdout
    assert lines[-1].startswith("done: 1 task in ") and "all succeeded" in lines[-1], r.stdout
    assert f"Numba cache directory: {cache}" in lines[-1], r.stdout
    before = _files(cache)
    assert any(f.endswith(".nbi") for f in before), sorted(before)
    assert any(f.endswith(".nbc") for f in before), sorted(before)

    r2 = subprocess.run([sys.executable, "-c", _SECOND_PROCESS], capture_output=True, text=True,
                        env=_env(NUMBA_CACHE_DIR=str(cache)), timeout=600, cwd=ROOT)
    assert r2.returncode == 0, r2.stdout + r2.stderr
    report = json.loads(r2.stdout.splitlines()[-1])
    assert report["misses"] == {}, f"compiled in the second process: {report['misses']}"
    assert report["hits"], "nothing was loaded from the cache"
    assert _files(cache) == before, "the second process wrote to the cache"


@pytest.mark.parametrize("flag, value", [("--ops", "scan,no_such_op"), ("--ops", ","),
                                         ("--dtypes", "uint8"), ("--dtypes", "float32,complex64"),
                                         ("--jobs", "0")])
def test_bad_argument_exits_2_naming_it(flag, value, tmp_path):
    r = _mmvref("precompile", flag, value, timeout=120, NUMBA_CACHE_DIR=str(tmp_path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"argument {flag}" in r.stderr, r.stderr
    if flag != "--jobs":
        valid = _precompile.OPS if flag == "--ops" else _precompile.ALL_DTYPES
        assert "valid values: " + ", ".join(valid) in r.stderr, r.stderr
    assert _files(tmp_path) == {}, "a bad argument compiled something"


def test_unsupported_pairs_are_skipped_with_a_note(tmp_path):
    r = _mmvref("precompile", "--ops", "top_p_sample", "--dtypes", "int8,int64", timeout=120,
                NUMBA_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "skipping top_p_sample int8: " in r.stdout and "skipping top_p_sample int64: " in r.stdout, r.stdout
    assert r.stdout.splitlines()[-1].startswith("done: 0 tasks in "), r.stdout


def test_info_json_still_works():
    r = _mmvref("--info", "--json", timeout=120)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["versions"]["mmvref"]


def test_plain_invocation_still_prints_info():
    r = _mmvref(timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("mmvref "), r.stdout


def test_every_public_op_is_precompiled():
    import mmvref

    public_ops = [n for n in mmvref.__all__
                  if callable(getattr(mmvref, n)) and not isinstance(getattr(mmvref, n), type)
                  and n != "show_config"]
    assert list(_precompile.OPS) == public_ops


def test_import_mmvref_does_not_import_precompile():
    code = "import sys, mmvref; assert 'mmvref._precompile' not in sys.modules, 'imported'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=120,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr


@pytest.mark.native_only
@pytest.mark.parametrize("op", list(_precompile.OPS))
def test_the_calls_of_each_op_are_valid(op):
    """Every call a precompile task makes runs (float32; float16 for the ops with sparse inputs, which
    take the tuple form there), in this process: an op whose signature changed fails here, not in a
    user's Docker build."""
    _precompile._exercise(op, "float32")
    if op in ("spmv", "spmm", "spgemm", "prepare"):  # (prepare's float16 task once read a tuple's shape)
        _precompile._exercise(op, "float16")
