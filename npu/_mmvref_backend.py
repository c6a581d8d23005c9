"""MmvrefBackend: the fast CPU ops of ``mmvref`` behind the backend protocol."""
from __future__ import annotations

from mmvref.registry import REGISTRY

__all__ = ["MmvrefBackend", "MmvrefPreparedBackend"]


class MmvrefBackend:
    """A backend whose methods are the registry ops that have a fast CPU
    function (numpy in, numpy out). Ops without one (golden-only ops, stages)
    are absent: ``hasattr(backend, op)`` is False."""

    name = "mmvref"

    def regimes(self):
        """Where the fast kernels change regime (``conformance.regimes``): the golden tile 8, SIMD
        lanes 8 / 16, one chunk per thread or four, and SpMV's row-length switches (LONG_ROW 8, 16,
        48; a row longer than a batch of 8192)."""
        import numba

        t = numba.get_num_threads()
        return {"tiles": (8,), "lanes": (8, 16), "cores": (t, 4 * t), "row_buckets": (8, 16, 48, 8192)}

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


class MmvrefPreparedBackend(MmvrefBackend):
    """``MmvrefBackend`` whose ``spmv`` and ``spmm`` go through a prepared matrix
    (``mmvref.prepare(A, overflow=...)``, then ``P @ x`` / ``P @ D``): the suite checks the prepared
    path with the same inputs, references and bounds as the one-shot functions. Every other op is
    ``MmvrefBackend``'s."""

    name = "mmvref-prepared"

    @staticmethod
    def spmv(A, x, overflow="raise"):
        import mmvref

        return mmvref.prepare(A, overflow=overflow).matvec(x)

    @staticmethod
    def spmm(A, D, overflow="raise"):
        import mmvref

        return mmvref.prepare(A, overflow=overflow).matmat(D)

    def __repr__(self):
        return "MmvrefPreparedBackend()"
