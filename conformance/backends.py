"""Backend resolution. A backend is an object whose methods are registry op
names, taking and returning numpy arrays (the protocol of ``npu``): the named
ones are ``npu.BACKENDS`` (mmvref, emulation, tcuscan, dask); any other is given as
``package.module:attribute`` (an object, or a class/factory called with no
arguments)."""
from __future__ import annotations

import importlib

import npu


def resolve(name: str):
    """The backend object for ``name``."""
    if name in npu.BACKENDS:
        mod, _, attr = npu.BACKENDS[name].partition(":")
        return getattr(importlib.import_module(mod), attr)()
    if ":" in name:
        mod, _, attr = name.partition(":")
        obj = getattr(importlib.import_module(mod), attr)
        return obj() if _is_factory(obj) else obj
    raise ValueError(f"unknown backend {name!r}: use one of {sorted(npu.BACKENDS)} or 'package.module:attribute'")


def _is_factory(obj) -> bool:
    """A class, or a callable that is not itself a backend (it has no registry op)."""
    if isinstance(obj, type):
        return True
    from mmvref.registry import REGISTRY

    return callable(obj) and not any(has_op(obj, op) for op in REGISTRY)


def has_op(backend, op: str) -> bool:
    try:
        return callable(getattr(backend, op))
    except AttributeError:
        return False
