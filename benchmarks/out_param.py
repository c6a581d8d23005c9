"""``out=`` against a new result: every op that takes ``out=``, timed both ways in one run.

A caller passes ``out=`` to skip the allocation (and the page faults of fresh memory) of a result;
the kernels then write into it directly, so the call with ``out=`` must take at most the time of
the one without. ``python -m benchmarks --ops out`` (add ``--reuse-memory`` to take the page faults
out of the comparison: then both sides write memory already mapped, and only a temporary plus a
copy could make ``out=`` slower). Our row is the call with ``out=``; the peer "new array" is the
same call without it, so "vs peer" > 1.0x means ``out=`` is the faster.

Byte model: the op's own (``benchmarks.ops``): values read + result written (+ offsets, flags, ids).
"""
from __future__ import annotations

import numpy as np

from .ops import FULL_N, QUICK_N, Case, OpBench, _fmt_n, _rng

__all__ = ["OPS"]


def _inputs(op, n, dt):
    rng = _rng(31, n)
    x = rng.integers(-100, 101, n).astype(dt)
    if op in ("scan",):
        return (x,), {}, n
    if op in ("segmented_scan", "segmented_sum"):
        f = (rng.random(n) < 0.01).astype(np.uint8)
        f[0] = 1
        return (x, f), {}, n if op == "segmented_scan" else int(f.sum())
    S = max(1, n // 100)  # rows of 100 on average
    cuts = np.sort(rng.integers(0, n + 1, S - 1))
    ip = np.concatenate([[0], cuts, [n]]).astype(np.int64)
    if op in ("segment_sum_csr", "segment_csr"):
        return (x, ip), {}, S
    if op == "gather_csr":
        return (x[:S], ip), {}, n
    ids = np.repeat(np.arange(S), np.diff(ip))
    if op == "segment_coo":
        return (x, ids), {"dim_size": S}, S
    return (x, rng.permutation(ids)), {"dim_size": S}, S  # scatter: any order


_INT32_FIRST = ("scan", "segmented_scan", "segmented_sum", "segment_sum_csr")


def _result_dtype(op, dt):
    if op == "gather_csr":
        return np.dtype(dt)
    return np.dtype(np.int32) if np.dtype(dt) == np.int32 else np.dtype(dt)


class OutBench(OpBench):
    def __init__(self, op):
        self.op = op
        self.name = f"out:{op}"
        self.fast_name = op

    def cases(self, quick):
        if quick:  # one dtype an op: int32 for the 1-D scans and sums (their AVX-512/AVX2 kernels), float32 for the rest
            ns, dts = (QUICK_N,), (("int32",) if self.op in _INT32_FIRST else ("float32",))
        else:
            ns, dts = (QUICK_N, FULL_N), ("int32", "float32")
        return [Case(self.name, f"n={_fmt_n(n)}, {dt}", n, None, (), {"dtype": dt}) for n in ns for dt in dts]

    def inputs(self, case):
        args, kw, m = _inputs(self.op, case.n, case.params["dtype"])
        return {"args": args, "kw": kw, "out": np.empty(m, _result_dtype(self.op, case.params["dtype"]))}

    def nbytes(self, case, inp):
        return sum(a.nbytes for a in inp["args"]) + inp["out"].nbytes

    def ours(self, fn, inp):
        args, kw, out = inp["args"], inp["kw"], inp["out"]
        return lambda: fn(*args, out=out, **kw)

    def peers(self):
        import mmvref

        def new_array(inp):
            fn = getattr(mmvref, self.op)
            args, kw = inp["args"], inp["kw"]
            return lambda: fn(*args, **kw)

        return {"new array": new_array}


OPS = {b.name: b for b in (OutBench(op) for op in (
    "scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "segment_csr", "segment_coo", "scatter",
    "gather_csr"))}
