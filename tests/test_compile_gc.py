"""The garbage collector is paused while Numba compiles a kernel of mmvref (``mmvref._compile_gc``),
restored after it (also when it raises, and not enabled if it was disabled), and left alone for
other code's compilations."""
from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest
from numba.core import event

from mmvref._compile_gc import PauseGcWhileCompiling


class _Func:
    def __init__(self, module):
        self.__module__ = module


class _Dispatcher:
    def __init__(self, module):
        self.py_func = _Func(module)


def _compile(listener, module, body=None):
    """One numba:compile event of a dispatcher of ``module`` through ``listener``, running body()."""
    ev = dict(dispatcher=_Dispatcher(module))
    listener.on_start(event.Event("numba:compile", event.EventStatus.START, ev))
    try:
        if body is not None:
            body()
    finally:
        listener.on_end(event.Event("numba:compile", event.EventStatus.END, ev))


@pytest.fixture
def gc_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    gc.enable() if was else gc.disable()


@pytest.mark.usefixtures("gc_enabled")
def test_outermost_compile_of_ours_pauses_the_collector_nested_ones_keep_it_paused():
    seen = []
    listener = PauseGcWhileCompiling("mmvref")

    def nested():
        seen.append(gc.isenabled())
        _compile(listener, "numba.np.arraymath", lambda: seen.append(gc.isenabled()))
        seen.append(gc.isenabled())  # a nested compile's end does not resume it

    _compile(listener, "mmvref._fast.segment._portable", nested)
    assert seen == [False, False, False]
    assert gc.isenabled() and listener.depth == 0


@pytest.mark.usefixtures("gc_enabled")
def test_other_code_compiles_with_the_collector_as_it_was():
    seen = []
    listener = PauseGcWhileCompiling("mmvref")
    _compile(listener, "user_module", lambda: seen.append(gc.isenabled()))
    _compile(listener, "mmvrefx", lambda: seen.append(gc.isenabled()))  # a prefix, not a package
    assert seen == [True, True] and gc.isenabled() and listener.depth == 0


@pytest.mark.usefixtures("gc_enabled")
def test_collector_resumes_after_a_compile_that_raises_and_stays_off_if_it_was_off():
    listener = PauseGcWhileCompiling("mmvref")

    def fail():
        raise RuntimeError("compile failed")

    with pytest.raises(RuntimeError, match="compile failed"):
        _compile(listener, "mmvref.x", fail)
    assert gc.isenabled() and listener.depth == 0
    gc.disable()
    _compile(listener, "mmvref.x")
    assert not gc.isenabled()  # the user's choice is kept


def test_a_real_first_call_compiles_with_the_collector_paused(tmp_path):
    """In a fresh process with an empty cache: every compile event of mmvref's kernels starts with
    the collector disabled, a user's own @njit function compiles with it enabled, and afterwards
    it is enabled."""
    script = textwrap.dedent("""
        import gc
        import numpy as np
        from numba import njit
        from numba.core import event
        import mmvref

        seen = []

        class Probe(event.Listener):
            def on_start(self, ev):
                mod = ev.data["dispatcher"].py_func.__module__
                seen.append((mod.split(".")[0], gc.isenabled()))

            def on_end(self, ev):
                pass

        event.register("numba:compile", Probe())  # after mmvref's listener: sees its effect
        mmvref.scan(np.arange(100, dtype=np.int16))

        @njit
        def user(a):
            return a.sum()

        user(np.arange(3))
        print(sorted(set(seen)))
        print(gc.isenabled())
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    seen, enabled = out.stdout.strip().splitlines()
    seen = eval(seen)  # a list of (top-level package, collector enabled) the probe printed
    assert ("mmvref", False) in seen and ("mmvref", True) not in seen, seen
    assert ("__main__", True) in seen and ("__main__", False) not in seen, seen
    assert enabled == "True"
