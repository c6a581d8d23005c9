"""A CPU stand-in for the ``tcuscan_ops`` module (huawei-csl/pytorch-tcuscan),
so that ``TcuscanBackend``'s translation layer is tested for real on a CPU.

``fake_tcuscan_ops()`` returns an object with a twin of every ``run_*`` kernel,
taking and returning torch CPU tensors, computed with plain torch (independently
of mmvref), with the kernels' contract AND their quirks as read in the public
sources (src/torch/*.h, src/kernels/*.h and tests/*.py). The twins live in
``npu._standin``, one module per kernel family; each module's docstring lists its
kernels' facts and quirks and its ``DTYPES`` their argument and result dtypes.
``python -m npu --coverage`` tabulates them.

Common to all: the tiling parameter S must be 16, 32, 64 or 128; an output the
kernel leaves uninitialised (a dtype with no kernel branch) is filled with
``GARBAGE``; wrong argument dtypes raise TypeError naming the kernel (a real
launch would read garbage; the stand-in refuses so that a translation bug fails
loudly).
"""
from __future__ import annotations

import types

__all__ = ["fake_tcuscan_ops", "GARBAGE", "CpuTcuscanBackend"]  # noqa: F822 (lazy, see __getattr__)

def fake_tcuscan_ops():
    """A module-like object with every stand-in ``run_*`` kernel (``npu._standin``)."""
    from ._standin import kernels

    return types.SimpleNamespace(__name__="npu.testing.fake_tcuscan_ops", **kernels())


def _cpu_backend_class():
    from ._tcuscan import TcuscanBackend

    class CpuTcuscanBackend(TcuscanBackend):
        """``TcuscanBackend`` on the stand-in kernels, on the CPU (for the
        conformance runner: ``--backend npu.testing:CpuTcuscanBackend``)."""

        name = "tcuscan-standin"

        def __init__(self, s=32, variant="multi_core"):
            super().__init__(module=fake_tcuscan_ops(), device="cpu", s=s, variant=variant)

    return CpuTcuscanBackend


def __getattr__(name):  # lazy: the stand-in and TcuscanBackend import torch
    if name == "CpuTcuscanBackend":
        return _cpu_backend_class()
    if name == "GARBAGE":
        from ._standin._common import GARBAGE

        return GARBAGE
    raise AttributeError(f"module 'npu.testing' has no attribute {name!r}")
