"""Kernels made by factories, one per combination of compile-time constants.

A factory ``_make_x(*consts)`` returns a jitted kernel whose closure cells hold ``consts``, so
each combination has its own entry in Numba's cache (the cache keys an entry by the closure's
cell values) and compiles only the code its constants select. A kernel body names every constant
(one that is only passed to ``njit``, such as ``parallel``, is named once as a bare expression), or
it would not be a cell. ``variant`` makes each kernel
once per process and also publishes it as an attribute of the factory's module, so that tools
listing a module's dispatchers see it.
"""
from __future__ import annotations

import sys

_MADE: dict = {}


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
