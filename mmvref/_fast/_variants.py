"""Kernels made by factories, one per combination of compile-time constants.

A factory ``_make_x(*consts)`` returns a jitted kernel whose closure cells hold ``consts``, so
each combination has its own entry in Numba's cache (the cache keys an entry by the closure's
cell values) and compiles only the code its constants select. A kernel body names every constant
(one that is only passed to ``njit``, such as ``parallel``, is named once as a bare expression), or
it would not be a cell. ``variant`` makes each kernel
once per process and also publishes it as an attribute of the factory's module, so that tools
listing a module's dispatchers see it.

Task bodies: a parallel kernel is a ``prange`` loop calling the serial body of one task
(``TaskBody``), and its serial twin the same loop with ``range``. The body is compiled once per
signature in a process, outside the parfor machinery (whose passes and gufunc compile grow with
the loop body: inlined, a large body cost the parallel kernel 2-3x the serial one's compile), and
linked into both kernels, whose cache entries hold it.

Serial twins: a kernel whose tasks run on threads (``parallel=True``) has a twin made with
``parallel=False``, the same tasks through the same code in turn, so the same bits. Inputs under
``PARALLEL_MIN`` elements take the twin (``threads_pay``): a parallel launch costs about as much as
that much work, and the twin's first call compiles without the parfor passes, in about half the
time (most first calls are on small inputs).
"""
from __future__ import annotations

import sys

import numba
from numba.extending import typeof_impl

_MADE: dict = {}

#: elements below which a kernel's tasks run in turn on the calling thread (its serial twin)
PARALLEL_MIN = 1 << 15


def threads_pay(elements):
    """Whether a kernel over ``elements`` elements runs its tasks on Numba's threads (else its
    serial twin): at least ``PARALLEL_MIN`` of them and more than one thread."""
    return elements >= PARALLEL_MIN and numba.get_num_threads() > 1


def variant(factory, *consts, name=None):
    """The kernel ``factory(*consts)`` makes, made once per process; published in the factory's
    module as ``name`` (default: ``_<factory name without _make_>_<const>_...``)."""
    key = (factory, consts)
    k = _MADE.get(key)
    if k is None:
        k = _MADE[key] = factory(*consts)
        if name is None:
            name = "_" + factory.__name__.removeprefix("_make_") + "".join(f"_{c}" for c in consts)
        setattr(sys.modules[factory.__module__], name, k)
    return k


def flag_name(prefix, names, flags):
    """``prefix`` and the names of the flags that are set, joined by '_', an integer flag's value
    after its name (a variant's attribute name, e.g. ``rows_b64_tail3``)."""
    return prefix + "_".join(f"{n}{on}" if type(on) is int else n for n, on in zip(names, flags) if on)


class TaskBody:
    """The serial body of one task, made for one set of kernel constants: a closure variable of
    the kernels that loop over it (Numba types it as the body's dispatcher). It pickles by name,
    so a kernel's cache key (which hashes its closure variables) is the same in every process:
    the name stands for the constants, one body each."""

    made: dict = {}

    def __init__(self, name, py_func):
        if name in TaskBody.made:
            raise RuntimeError(f"two task bodies named {name}")
        py_func.__name__ = py_func.__qualname__ = name + "__body"
        self.name = name
        # the numpy error model, as the parfor bodies the kernels inlined before (no checks of
        # divisors); no Python or C wrappers: only its kernels call it
        self.dispatcher = numba.njit(error_model="numpy", no_cpython_wrapper=True,
                                     no_cfunc_wrapper=True)(py_func)
        TaskBody.made[name] = self

    def __reduce__(self):
        return _task_body_named, (self.name,)


def _task_body_named(name):
    return TaskBody.made[name]


@typeof_impl.register(TaskBody)
def _typeof_task_body(val, c):
    return typeof_impl(val.dispatcher, c)
