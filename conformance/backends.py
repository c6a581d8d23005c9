"""Backend resolution: a backend is an object whose methods are registry op
names, taking and returning numpy arrays."""
from __future__ import annotations

import importlib

from mmvref.registry import REGISTRY


class MmvrefFastBackend:
    """The fast CPU ops of ``mmvref`` (each registry op's ``fast`` function)."""

    name = "mmvref"

    def __getattr__(self, op):
        spec = REGISTRY.get(op)
        if spec is None or spec.fast_ref is None:
            raise AttributeError(op)
        return spec.fast


BUILTIN = {"mmvref": MmvrefFastBackend}


def resolve(name: str):
    """``mmvref`` or ``package.module:attribute`` naming a backend object (or a class/factory)."""
    if name in BUILTIN:
        return BUILTIN[name]()
    if ":" in name:
        mod, _, attr = name.partition(":")
        obj = getattr(importlib.import_module(mod), attr)
        return obj() if isinstance(obj, type) else obj
    raise ValueError(f"unknown backend {name!r}: use one of {sorted(BUILTIN)} or 'package.module:attribute'")


def has_op(backend, op: str) -> bool:
    try:
        return callable(getattr(backend, op))
    except AttributeError:
        return False
