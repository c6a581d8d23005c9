"""The source of a Numba compile-event listener, for the cold-start tests' fresh processes.

Each test runs a probe script in a new process with an empty cache; the script starts with
``listener_source(...)``, which records in ``compiled`` every specialization Numba compiles for a
function of a module under ``module_prefix`` (kernels made by factories and nested callees
included), as the name the expression ``label`` gives from the dispatcher ``d``.
"""
from __future__ import annotations


def listener_source(module_prefix: str, label: str) -> str:
    """Python source defining ``compiled`` (a list) and registering the listener that fills it."""
    return f'''
from numba.core import event

compiled = []


class Listener(event.Listener):
    def on_start(self, ev):
        d = ev.data.get("dispatcher")
        if d is not None and d.py_func.__module__.startswith({module_prefix!r}):
            compiled.append({label})

    def on_end(self, ev):
        pass


event.register("numba:compile", Listener())
'''
