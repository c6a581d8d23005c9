"""Bit bounds per op, from ``mmvref.bounds`` through the registry: the bits the
golden algorithm's intermediates and result need for given inputs, and a check
that the magnitudes the golden model actually produced (``mmv.counting``) stay
within them, on the suite's inputs (which reach and cross the int32 edge).
"""
from __future__ import annotations

import numpy as np

from mmvref.registry import REGISTRY

__all__ = ["ARITHMETIC_OPS", "required", "check_magnitude"]

#: ops whose intermediates are sums of the values (the others move values)
ARITHMETIC_OPS = ("scan", "batched_scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "spmv", "spmm")


def _max_abs(a):
    a = np.asarray(a)
    return 0 if a.size == 0 else max(abs(int(a.min())), abs(int(a.max())))


def required(op, args, s):
    """The registry bound (``mmvref.bounds.Bound``: magnitude, bits, paper's
    bits) of ``op`` on integer ``args`` with tile size ``s``; None for float
    input or an op whose bound has no integer meaning."""
    spec = REGISTRY[op]
    if op == "spgemm":
        return None
    if op == "spmm":
        (ptr, ind, data, shape), D = args
        if np.asarray(data).dtype.kind == "f":
            return None
        return spec.bound(len(data) * max(np.shape(D)[1], 1), s, _max_abs(data), _max_abs(D))
    if op == "spmv":
        (ptr, ind, data, shape), x = args
        if np.asarray(data).dtype.kind == "f":
            return None
        return spec.bound(len(data), s, _max_abs(data), _max_abs(x))
    x = np.asarray(args[0])
    if x.dtype.kind == "f" or op not in ARITHMETIC_OPS + ("compress", "compress_ind"):
        return None
    n = x.shape[-1] if x.ndim == 2 else x.size
    return spec.bound(n, s, _max_abs(x))


def check_magnitude(op, args, s, counter):
    """None when every magnitude the golden run counted in ``counter`` is
    within the op's bound, else a message (a defect of the golden model or of
    ``mmvref.bounds``)."""
    b = required(op, args, s)
    if b is None or op not in ARITHMETIC_OPS:
        return None
    seen = counter.overall_max_abs()
    if seen > b.magnitude:
        worst = max(counter.max_abs, key=counter.max_abs.get)
        return (f"golden intermediate magnitude {seen} (instruction {worst}) exceeds the bound "
                f"{b.magnitude} ({b.bits} bits)")
    return None
