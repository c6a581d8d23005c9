"""Python's cyclic garbage collector paused while Numba compiles one of mmvref's kernels.

A compilation allocates millions of short-lived objects (IR, types, LLVM wrappers), so the
collector runs many times during it, and each full collection walks the whole heap of the process,
which in a torch or PyG process (or a test worker that has compiled hundreds of kernels) is large.
That walk finds nothing of the compilation to free until the compilation ends. Measured on a cold
cache, serially over two compile-heavy test modules: 109 full collections took 77 s of 447 s.

So while the outermost compilation of a kernel of mmvref runs (Numba's ``numba:compile`` event,
which Numba sends holding its global compiler lock: one compilation at a time in a process), the
collector is disabled, and it is enabled again when that compilation ends (also when it raises),
unless it was already disabled when the compilation began. The garbage of the compilation is
collected by the next automatic collection after it. Compilations of other code (a user's own
``@njit`` functions) are left as they are; no global setting is changed outside a compilation.
"""
from __future__ import annotations

import gc

from numba.core import event


class PauseGcWhileCompiling(event.Listener):
    """Disables the collector for the outermost ``numba:compile`` event of a dispatcher whose
    function lives in ``prefix`` (and for the compilations nested in it), then restores it."""

    def __init__(self, prefix: str = "mmvref"):
        self.prefix = prefix
        self.depth = 0  # compile events open since the outermost one of ours
        self.resume = False  # whether the collector was enabled when that one began

    def _ours(self, ev) -> bool:
        data = ev.data if isinstance(ev.data, dict) else {}
        func = getattr(data.get("dispatcher"), "py_func", None)
        module = getattr(func, "__module__", None) or ""
        return module == self.prefix or module.startswith(self.prefix + ".")

    def on_start(self, ev):
        if self.depth == 0:
            if not self._ours(ev):
                return
            self.resume = gc.isenabled()
            gc.disable()
        self.depth += 1

    def on_end(self, ev):
        if self.depth == 0:
            return
        self.depth -= 1
        if self.depth == 0 and self.resume:
            gc.enable()


LISTENER = PauseGcWhileCompiling()
event.register("numba:compile", LISTENER)
