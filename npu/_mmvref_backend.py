"""MmvrefBackend: the fast CPU ops of ``mmvref`` behind the backend protocol."""
from __future__ import annotations

from mmvref.registry import REGISTRY

__all__ = ["MmvrefBackend"]


class MmvrefBackend:
    """A backend whose methods are the registry ops that have a fast CPU
    function (numpy in, numpy out). Ops without one (golden-only ops, stages)
    are absent: ``hasattr(backend, op)`` is False."""

    name = "mmvref"

    def error_model(self, op):
        """The fast function's float error model (the registry's ``fast_float_model``)."""
        return REGISTRY[op].fast_float_model

    def __getattr__(self, op):
        spec = REGISTRY.get(op)
        if spec is None or spec.fast_ref is None:
            raise AttributeError(f"MmvrefBackend has no op {op!r}")
        return spec.fast

    def __dir__(self):
        return sorted(set(super().__dir__()) | {n for n, s in REGISTRY.items() if s.fast_ref is not None})

    def __repr__(self):
        return "MmvrefBackend()"
