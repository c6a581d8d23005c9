"""Kernels made by factories, one per combination of compile-time constants.

A factory ``_make_x(*consts)`` returns a jitted kernel whose closure cells hold ``consts``, so
each combination has its own entry in Numba's cache (the cache keys an entry by the closure's
cell values) and compiles only the code its constants select. A kernel body names every constant
(one that is only passed to ``njit``, such as ``parallel``, is named once as a bare expression), or
it would not be a cell. ``variant`` makes each kernel
once per process and also publishes it as an attribute of the factory's module, so that tools
listing a module's dispatchers see it.

Serial twins: a kernel whose tasks run on threads (``parallel=True``) has a twin made with
``parallel=False``, the same tasks through the same code in turn, so the same bits. Inputs under
``PARALLEL_MIN`` elements take the twin (``threads_pay``): a parallel launch costs about as much as
that much work, and the twin's first call compiles without the parfor passes, in about half the
time (most first calls are on small inputs).
"""
from __future__ import annotations

import sys

import numba

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
    """``prefix`` and the names of the flags that are set, joined by '_' (a variant's attribute
    name, e.g. ``rows_b64_tail``)."""
    return prefix + "_".join(n for n, on in zip(names, flags) if on)
