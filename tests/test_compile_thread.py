"""mmvref's kernels compile on a thread of their own (``mmvref/_compile_thread.py``): the outermost
compilation of a dispatcher whose function lives in ``mmvref`` runs on a new thread, the caller
gets its result or its exception; nested compilations and other code's stay on their thread."""
from __future__ import annotations

import threading

import numba
import numpy as np
import pytest
from numba.core import errors, event

import mmvref  # noqa: F401  (installs the wrapper)
from mmvref import _compile_thread

pytestmark = pytest.mark.native_only  # where Numba compiles does not depend on the compile target


class Threads(event.Listener):
    """Which thread each compilation (by function name) started on."""

    def __init__(self):
        self.seen = {}

    def on_start(self, ev):
        self.seen.setdefault(ev.data["dispatcher"].py_func.__name__, threading.get_ident())

    def on_end(self, ev):
        pass


def _as_mmvref(f):
    f.__module__ = "mmvref._compile_thread_probe"  # what _compile_thread looks at
    return f


def test_installed_once():
    from numba.core import dispatcher

    wrapped = dispatcher.Dispatcher.compile
    assert wrapped.mmvref_compile_thread
    _compile_thread.install()
    assert dispatcher.Dispatcher.compile is wrapped


def test_mmvref_kernels_compile_on_another_thread_and_nested_ones_with_them():
    def inner_probe(a):
        return a * 2

    inner = numba.njit(_as_mmvref(inner_probe))

    def outer_probe(a):
        s = 0.0
        for v in a:
            s += inner(v)
        return s

    outer = numba.njit(_as_mmvref(outer_probe))

    def user_probe(a):
        return a.sum()

    user = numba.njit(user_probe)  # this test module's: not mmvref's
    rec = Threads()
    with event.install_listener("numba:compile", rec):
        assert outer(np.arange(4.0)) == 12.0
        assert user(np.arange(4.0)) == 6.0
    me = threading.get_ident()
    assert rec.seen["outer_probe"] != me
    assert rec.seen["inner_probe"] == rec.seen["outer_probe"]  # nested: under the lock, on the same thread
    assert rec.seen["user_probe"] == me


def test_an_explicit_compile_of_a_nested_kernel_stays_on_the_locked_thread():
    from numba.core.compiler_lock import global_compiler_lock

    def locked_probe(a):
        return a + 1

    k = numba.njit(_as_mmvref(locked_probe))
    rec = Threads()
    with event.install_listener("numba:compile", rec), global_compiler_lock:
        assert k(1) == 2  # this thread holds the lock: a worker would wait for it forever
    assert rec.seen["locked_probe"] == threading.get_ident()


def test_a_compile_error_reaches_the_caller():
    def broken_probe(a):
        return a.no_such_attribute

    k = numba.njit(_as_mmvref(broken_probe))
    with pytest.raises(errors.TypingError, match="no_such_attribute"):
        k(np.arange(3))
    # and the dispatcher still works for what it can compile
    def fine_probe(a):
        return a + 1

    assert numba.njit(_as_mmvref(fine_probe))(1) == 2
