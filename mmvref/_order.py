"""The one total order of sorting, top-k and top-p (DEVELOPERS.md, "Order"),
as unsigned integer keys: keys compare as unsigned integers exactly as the
values compare in that order.

Integers: the sign bit flipped. Floats (Knuth 5.2.5 Ex. 8-9): -0.0 first
mapped to +0.0 and every NaN to the largest key; then non-negatives get their
sign bit set and negatives all bits inverted. ``descending`` inverts every
bit, so an ascending stable sort of the keys is a descending stable sort of
the values (NaNs first). Used by ``mmv.orderkey`` (the golden model's VCU
instruction), the fast ops and the torch emulation.
"""
from __future__ import annotations

import numpy as np

__all__ = ["order_keys", "key_dtype"]


def key_dtype(dtype) -> np.dtype:
    """The unsigned key type of a value dtype (same width)."""
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def order_keys(x, descending=False) -> np.ndarray:
    """Unsigned keys of ``x`` (any shape) in the order above."""
    x = np.asarray(x)
    kt = key_dtype(x.dtype)
    u = x.view(kt) if x.dtype.itemsize == kt.itemsize else x.astype(kt)
    top = kt.type(1 << (8 * kt.itemsize - 1))
    full = kt.type((1 << (8 * kt.itemsize)) - 1)
    if x.dtype.kind == "f":
        u = np.where(x == 0, kt.type(0), u)  # -0.0 -> +0.0
        u = np.where((u & top) != 0, u ^ full, u | top)
        u = np.where(np.isnan(x), full, u)
    else:
        u = u ^ top
    if descending:
        u = u ^ full
    return np.ascontiguousarray(u, dtype=kt)
