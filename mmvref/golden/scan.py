"""Alg. 1 (Scan in MMV-RAM, §4; a simplified version of Zouzias & McColl's
block scan): recursive, with GATHERS / SCATTERS and the matrix B_s."""
from __future__ import annotations

import numpy as np

from .. import bounds, mmv
from .._validate import as_values, check_bool, check_overflow, check_s
from ._words import DEFAULT_S, finish, max_abs_int, to_words

__all__ = ["scan", "scan_words"]


def scan_words(x, s):
    """Scan(x; s), Alg. 1 lines 1-9, on machine words.

    Line 2: z = MATMUL(x, U_s) (every s-block scanned). Lines 3-4: done if n <= s.
    Line 5: x_s = GATHERS(z; s) (block totals). Line 6: z_s = Scan(x_s; s).
    Line 7: z = SCATTERS(z_s; s) (block-end prefixes written back).
    Line 8: z(s-1:n) = MATMUL(z(s-1:n), B_s) (each carry added to the next block).
    Steps: 4 per recursion level plus 1 (Thm 4.1: O(log_s n)).
    """
    n = len(x)
    z = mmv.matmul(x, mmv.upper_ones(s, x.dtype))
    if n <= s:
        return z
    xs = mmv.gathers(z, s)
    zs = scan_words(xs, s)
    z = mmv.scatters(zs, s, z)
    z[s - 1:] = mmv.matmul(z[s - 1:], mmv.b_matrix(s, x.dtype))
    return z


def scan(x, s=DEFAULT_S, *, exclusive=False, overflow="raise"):
    """Inclusive scan of ``x`` by Alg. 1: z(i) = sum_{j<=i} x(j); ``exclusive``:
    the inclusive result shifted right by one, zero first (SHIFTR, as the
    Ascend scan paper's §4.3 does it), z(i) = sum_{j<i} x(j).

    Result dtype per the project rules (int8/16/32 -> int32, int64 -> int64,
    fp16 -> fp32, fp32/fp64 kept); integers exact, overflow of the result dtype
    raises unless ``overflow="wrap"``.
    """
    x = as_values(x, "x")
    s = check_s(s)
    exclusive = check_bool(exclusive, "exclusive")
    check_overflow(overflow)
    w = to_words(x)
    z = scan_words(w, s)
    if exclusive:
        z = mmv.shiftr(z, 1)
    if x.dtype.kind != "f":
        b = bounds.scan(len(x), s, max_abs_int(x))

        def exact():
            c = np.cumsum(x.astype(object)).tolist()
            return ([0] + c[:-1]) if exclusive and c else c

        return finish(z, x.dtype, overflow, bound_magnitude=b.magnitude, op="golden.scan", exact=exact)
    return finish(z, x.dtype, overflow)
