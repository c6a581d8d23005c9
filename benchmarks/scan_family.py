"""Benchmarks of the scan-based operators (parallel-scan-ascend §4-§5).

Byte model (minimum bytes moved; values of the stated dtype, int64 indices):

  batched_scan   B*n values read + B*n results written (int32 -> int32, float32 -> float32)
  radix_sort     n values read + n values and n int64 indices written
  argsort        n values read + n int64 indices written
  topk           n values read + k values and k int64 indices written

Peers: np.sort / np.argsort (kind="stable"), torch.sort(stable=True),
torch.topk, np.argpartition + a sort of the k chosen, np.cumsum(axis=1),
torch.cumsum(dim=1).
"""
from __future__ import annotations

import numpy as np

from .ops import Case, OpBench, _fmt_n, _rng, _torch

__all__ = ["OPS"]

SORT_N = (100_000, 1_000_000, 10_000_000)
QUICK_SORT_N = 1_000_000
BATCH_SHAPES = ((64, 65_536), (1024, 4096), (8, 1_000_000))
QUICK_BATCH = ((64, 65_536),)
TOPK_N = 10_000_000
TOPK_K = (10, 1000, 100_000)


def _sort_input(n, dtype):
    rng = _rng(7, n)
    if dtype == "int32":
        return rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32)
    return rng.standard_normal(n).astype(np.float32)


class _SortBench(OpBench):
    def cases(self, quick):
        ns = (QUICK_SORT_N,) if quick else SORT_N
        return [Case(self.name, f"n={_fmt_n(n)}, {dt}", n, None, ("n",), {"dtype": dt})
                for dt in ("int32", "float32") for n in ns]

    def inputs(self, case):
        return {"x": _sort_input(case.n, case.params["dtype"])}


class RadixSortBench(_SortBench):
    name = "radix_sort"

    def nbytes(self, case, inp):
        return case.n * (2 * inp["x"].itemsize + 8)

    def ours(self, fn, inp):
        x = inp["x"]
        return lambda: fn(x)[0]

    def peers(self):
        def np_sort(inp):
            x = inp["x"]
            return lambda: np.sort(x, kind="stable")

        def np_sort_and_argsort(inp):
            x = inp["x"]

            def run():
                i = np.argsort(x, kind="stable")
                return x[i]
            return run

        def torch_sort(inp):
            torch = _torch()
            xt = torch.from_numpy(inp["x"])
            return lambda: torch.sort(xt, stable=True).values
        return {"np.sort(stable)": np_sort, "np.argsort(stable)+take": np_sort_and_argsort,
                "torch.sort(stable)": torch_sort}


class ArgsortBench(_SortBench):
    name = "argsort"

    def nbytes(self, case, inp):
        return case.n * (inp["x"].itemsize + 8)

    def ours(self, fn, inp):
        x = inp["x"]
        return lambda: fn(x)

    def peers(self):
        def np_argsort(inp):
            x = inp["x"]
            return lambda: np.argsort(x, kind="stable")

        def torch_sort(inp):
            torch = _torch()
            xt = torch.from_numpy(inp["x"])
            return lambda: torch.sort(xt, stable=True).indices
        return {"np.argsort(stable)": np_argsort, "torch.sort(stable).indices": torch_sort}


class TopkBench(OpBench):
    name = "topk"

    def cases(self, quick):
        n = QUICK_SORT_N if quick else TOPK_N
        ks = (10, 1000) if quick else TOPK_K
        return [Case(self.name, f"n={_fmt_n(n)}, k={k:,}, float32", n, None, (), {"k": k}) for k in ks]

    def inputs(self, case):
        return {"x": _sort_input(case.n, "float32"), "k": case.params["k"]}

    def nbytes(self, case, inp):
        return case.n * 4 + inp["k"] * 12

    def ours(self, fn, inp):
        x, k = inp["x"], inp["k"]
        return lambda: fn(x, k)[0]

    def peers(self):
        def torch_topk(inp):
            torch = _torch()
            xt, k = torch.from_numpy(inp["x"]), inp["k"]
            return lambda: torch.topk(xt, k).values

        def np_partition(inp):
            x, k = inp["x"], inp["k"]

            def run():
                part = np.argpartition(-x, k - 1)[:k]
                return -np.sort(-x[part])
            return run
        return {"torch.topk": torch_topk, "np.argpartition+sort": np_partition}


class BatchedScanBench(OpBench):
    name = "batched_scan"

    def cases(self, quick):
        shapes = QUICK_BATCH if quick else BATCH_SHAPES
        return [Case(self.name, f"{b}x{_fmt_n(n)}, {dt}", b * n, None, (), {"shape": (b, n), "dtype": dt})
                for dt in ("int32", "float32") for b, n in shapes]

    def inputs(self, case):
        b, n = case.params["shape"]
        rng = _rng(11, b, n)
        if case.params["dtype"] == "int32":
            return {"x": rng.integers(-100, 101, (b, n), dtype=np.int32)}
        return {"x": rng.standard_normal((b, n)).astype(np.float32)}

    def nbytes(self, case, inp):
        return 8 * case.n

    def ours(self, fn, inp):
        x = inp["x"]
        return lambda: fn(x)

    def peers(self):
        def np_cumsum(inp):
            x = inp["x"]
            return lambda: np.cumsum(x, axis=1, dtype=x.dtype)

        def torch_cumsum(inp):
            torch = _torch()
            xt = torch.from_numpy(inp["x"])
            return lambda: torch.cumsum(xt, dim=1, dtype=xt.dtype)
        return {"np.cumsum(axis=1)": np_cumsum, "torch.cumsum(dim=1)": torch_cumsum}


OPS = {b.name: b for b in (BatchedScanBench(), RadixSortBench(), ArgsortBench(), TopkBench())}
