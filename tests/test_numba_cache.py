"""Numba's disk cache under several processes (``mmvref/_numba_cache.py``): an entry whose code was
compiled for other array types is a miss (compiled again, saved over it), and a save holds a lock
beside the index. Each case runs a probe kernel (a function of a file in tmp_path, its module added
to ``_compile_thread.PACKAGES``) in fresh interpreters, so that each loads the cache from disk."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

fcntl = pytest.importorskip("fcntl")

pytestmark = pytest.mark.native_only  # the cache's bookkeeping does not depend on the compile target

PROBE = textwrap.dedent('''
    def probe(a):
        return a[0] * 2 + a.size
''')

RUNNER = textwrap.dedent('''
    import sys
    import numpy as np
    import numba
    import mmvref  # installs the guard
    from mmvref import _compile_thread
    _compile_thread.PACKAGES += ("probe_mod",)  # the probe's kernels taken as mmvref's
    sys.path.insert(0, sys.argv[1])
    import probe_mod
    k = numba.njit(cache=True)(probe_mod.probe)
    for dt in sys.argv[2].split(","):
        print("calling", dt, flush=True)
        print(dt, int(k(np.array([3, 0, 0], dtype=dt))), flush=True)
''')


def _run(tmp_path, dtypes, **kw):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path), dtypes], env=env, capture_output=True,
                          text=True, timeout=300, **kw)


def _index(tmp_path):
    (idx,) = (tmp_path / "cache").rglob("*probe*.nbi")
    return idx


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "probe_mod.py").write_text(PROBE)
    return tmp_path


def test_an_entry_holding_another_signatures_code_is_compiled_again(probe):
    r = _run(probe, "int8,int64")
    assert r.returncode == 0, r.stderr
    assert "int8 9" in r.stdout and "int64 9" in r.stdout
    idx = _index(probe)
    # what two processes saving at once can leave: the int64 entry naming the int8 entry's data file
    with open(idx, "rb") as f:
        version = pickle.load(f)
        stamp, overloads = pickle.loads(f.read())
    names = {str(key[0]): name for key, name in overloads.items()}
    (k8,) = [key for key in overloads if "int8" in str(key[0])]
    (k64,) = [key for key in overloads if "int64" in str(key[0])]
    assert overloads[k8] != overloads[k64], names
    overloads[k64] = overloads[k8]
    with open(idx, "wb") as f:
        pickle.dump(version, f, protocol=-1)
        f.write(pickle.dumps((stamp, overloads), protocol=-1))
    r = _run(probe, "int64,int8")
    assert r.returncode == 0, r.stderr  # without the guard: TypeError "can't unbox array ..."
    assert "int64 9" in r.stdout and "int8 9" in r.stdout
    with open(idx, "rb") as f:
        pickle.load(f)
        _, healed = pickle.loads(f.read())
    assert len(set(healed.values())) == len(healed)  # one data file per entry again


def test_a_save_waits_for_the_lock_beside_the_index(probe):
    r = _run(probe, "int16")  # makes the index (and its lock file)
    assert r.returncode == 0, r.stderr
    lock = Path(str(_index(probe)) + ".lock")
    assert lock.exists()
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        env = dict(os.environ, NUMBA_CACHE_DIR=str(probe / "cache"))
        p = subprocess.Popen([sys.executable, "-c", RUNNER, str(probe), "int32"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().startswith("calling int32")
            # compiling the probe takes well under a second; its save must wait for the lock
            time.sleep(3)
            assert p.poll() is None, p.communicate()
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
        out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "int32 9" in out
