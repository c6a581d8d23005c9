"""mmvref's kernels compile on a thread of their own, with a fresh Python stack.

CPython 3.11+ keeps each thread's interpreter frames in a stack of 16 KiB chunks; a chunk is
allocated (mmap) when a call crosses into it and released (munmap) when the call that crossed
returns. A compilation makes millions of Python calls, and where the calls of its inner loops
cross a chunk boundary, every one maps, faults in and unmaps four pages. Whether they do depends
only on the depth of the stack the compilation starts from. Measured (torch 2.13, PyG 2.8.1, Python
3.11.7): in a GAT training step, the first call of ``scatter``'s max kernel compiles from deep inside
torch's dispatcher and PyG's layer, and compiling its task body took 1.97 s, 1.31 s of it in the
kernel (213,000 minor faults, the same number of 16 KiB mmap/munmap pairs under strace); the same
compilation from a shallow stack took 0.47 s (9,500 faults). The first enabled step: 6.25 -> 4.74 s.

So the outermost compilation of a dispatcher whose function lives in ``mmvref`` runs on a new
thread (whose stack starts empty, so its depth does not depend on the caller's), and the calling
thread waits for it: its result or its exception is the caller's. A compilation nested in another
(Numba's global compiler lock already held by this thread) stays where it is: moving it would wait
for a lock its own caller holds. Other code's compilations (a user's ``@njit`` functions) are left
as they are. The thread costs about 0.1 ms a compilation (and a load from Numba's cache, which goes
through the same method).
"""
from __future__ import annotations

import threading

from numba.core import dispatcher
from numba.core.compiler_lock import global_compiler_lock

from . import _numba_cache

#: the packages whose dispatchers this applies to (tests add a probe module of their own)
PACKAGES = ("mmvref",)


def _ours(disp) -> bool:
    module = getattr(getattr(disp, "py_func", None), "__module__", None) or ""
    return any(module == p or module.startswith(p + ".") for p in PACKAGES)


def _compile_on_a_thread(compile_):
    def compile(self, sig):
        if not _ours(self):
            return compile_(self, sig)
        _numba_cache.guard(self)  # (its disk cache made safe for several processes: see there)
        if global_compiler_lock.is_locked():
            return compile_(self, sig)
        outcome = {}

        def run():
            try:
                outcome["value"] = compile_(self, sig)
            except BaseException as e:  # noqa: BLE001  (re-raised in the caller, whatever it is)
                outcome["error"] = e

        worker = threading.Thread(target=run, name=f"mmvref-compile-{self.py_func.__name__}", daemon=True)
        worker.start()
        worker.join()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    compile.__wrapped__ = compile_
    compile.__doc__ = compile_.__doc__
    compile.mmvref_compile_thread = True
    return compile


def install():
    """Put the wrapper around ``numba.core.dispatcher.Dispatcher.compile`` (idempotent)."""
    if not getattr(dispatcher.Dispatcher.compile, "mmvref_compile_thread", False):
        dispatcher.Dispatcher.compile = _compile_on_a_thread(dispatcher.Dispatcher.compile)


install()
