"""The benchmarked ops: their cases, inputs, byte models and peers.

Byte model (stated once, here; every case computes its ``nbytes`` from it).
It counts the minimum bytes an op must move, with int32 values, uint8/bool
flags (1 B each) and int64 offsets:

  scan             4n read + 4n written                       = 8n
  segmented_scan   4n read + n flags + 4n written             = 9n
  segmented_sum    4n read + n flags + 4S written              (S segments)
  segment_sum_csr  4n read + 8(S+1) offsets + 4S written
  compress         4n read + n mask + 4K written               (K kept)
  spmv             nnz (value + index bytes) + (m+1) offset bytes
                   + x read once + y written                   (value/index/offset sizes as stored)

Gelem/s counts n = len(x) (spmv: nnz). Peers are timed in the same process on
the same inputs; compositions include every step from the op's own inputs
(flags -> segment starts etc.), so the work compared is the same.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from . import matrices
from .harness import Skip

__all__ = ["Case", "OPS", "op_names"]

FULL_N = 100_000_000
SWEEP_N = (1_000, 100_000, 1_000_000, 10_000_000, 100_000_000)  # 1e3: a call's own overhead
QUICK_N = 10_000_000
DENSITIES = (0.001, 0.01, 0.1)
SWEEP_DENSITY = 0.01
COMPRESS_DENSITIES = (0.01, 0.1, 0.5)
COMPRESS_SWEEP_DENSITY = 0.5


@dataclass
class Case:
    op: str
    label: str
    n: int
    density: float | None = None
    plots: tuple = ()          # "n" (bandwidth vs n) and/or "density" (bandwidth vs density)
    params: dict = field(default_factory=dict)


def _fmt_n(n):
    e = int(round(math.log10(n)))
    return f"1e{e}" if 10**e == n else f"{n:,}"


def _pct(d):
    return f"{d * 100:g}%"


def _torch():
    try:
        import torch
    except ImportError:
        raise Skip("torch is not installed") from None
    return torch


def _rng(*key):
    return np.random.default_rng([20261122, *key])


# ----------------------------------------------------------------------------- generic segmented inputs

def _values(n, seed):
    return _rng(seed, n).integers(-100, 101, n, dtype=np.int32)


def _flags(n, density, seed):
    """uint8 0/1 segment-start flags, about density * n of them, flags[0] = 1."""
    f = np.zeros(n, dtype=np.uint8)
    k = max(1, int(round(density * n)))
    f[_rng(seed, n, k).integers(0, n, k)] = 1
    f[0] = 1
    return f


def _sweep_cases(op, density):
    return [Case(op, f"n={_fmt_n(n)}, d={_pct(density)}", n, density, ("n",)) for n in SWEEP_N]


def _density_cases(op, densities, plots_n_density):
    out = []
    for d in densities:
        plots = ("density", "n") if d == plots_n_density else ("density",)
        out.append(Case(op, f"n={_fmt_n(FULL_N)}, d={_pct(d)}", FULL_N, d, plots))
    return out


def _segmented_cases(op, quick, densities=DENSITIES, sweep_density=SWEEP_DENSITY):
    if quick:
        return [Case(op, f"n={_fmt_n(QUICK_N)}, d={_pct(sweep_density)}", QUICK_N, sweep_density,
                     ("n", "density"))]
    cases = [c for c in _sweep_cases(op, sweep_density) if c.n != FULL_N]
    return cases + _density_cases(op, densities, sweep_density)


class OpBench:
    name = ""
    float_peers = ()  # peers that run on float32 copies of the data (named in the label)

    def cases(self, quick):
        raise NotImplementedError

    def inputs(self, case):
        raise NotImplementedError

    def nbytes(self, case, inp):
        raise NotImplementedError

    def ours(self, fn, inp):
        raise NotImplementedError

    def peers(self):
        """name -> (inputs -> zero-argument callable); a peer raises Skip when it cannot run."""
        return {}

    def same(self, ours_out, peer_out):
        """Do the outputs agree (for the sanity check)? Float peers are compared loosely."""
        a = np.asarray(ours_out)
        b = np.asarray(peer_out.numpy() if hasattr(peer_out, "numpy") else peer_out)
        if a.shape != b.shape:
            return False
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            return bool(np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=1e-5, atol=1e-3))
        return bool(np.array_equal(a, b))


# ----------------------------------------------------------------------------- scan

class ScanBench(OpBench):
    name = "scan"

    def cases(self, quick):
        if quick:
            return [Case("scan", f"n={_fmt_n(QUICK_N)}", QUICK_N, None, ("n",))]
        return [Case("scan", f"n={_fmt_n(n)}", n, None, ("n",)) for n in SWEEP_N]

    def inputs(self, case):
        return {"x": _values(case.n, 1)}

    def nbytes(self, case, inp):
        return 8 * case.n

    def ours(self, fn, inp):
        x = inp["x"]
        return lambda: fn(x)

    def peers(self):
        def np_cumsum(inp):
            x = inp["x"]
            return lambda: np.cumsum(x, dtype=np.int32)

        def torch_cumsum(inp):
            torch = _torch()
            xt = torch.from_numpy(inp["x"])
            return lambda: torch.cumsum(xt, 0, dtype=torch.int32)

        return {"np.cumsum": np_cumsum, "torch.cumsum": torch_cumsum}


# ----------------------------------------------------------------------------- segmented scan

class SegScanBench(OpBench):
    name = "segmented_scan"

    def cases(self, quick):
        return _segmented_cases(self.name, quick)

    def inputs(self, case):
        return {"x": _values(case.n, 2), "f": _flags(case.n, case.density, 2)}

    def nbytes(self, case, inp):
        return 9 * case.n

    def ours(self, fn, inp):
        x, f = inp["x"], inp["f"]
        return lambda: fn(x, f)

    def peers(self):
        def numpy_comp(inp):
            x, f = inp["x"], inp["f"]
            n = x.size

            def run():
                z = np.cumsum(x, dtype=np.int32)
                starts = np.flatnonzero(f)
                lengths = np.diff(starts, append=n)
                return z - np.repeat(z[starts] - x[starts], lengths)
            return run

        def torch_comp(inp):
            torch = _torch()
            xt, ft = torch.from_numpy(inp["x"]), torch.from_numpy(inp["f"])
            n = xt.numel()
            end = torch.tensor([n])

            def run():
                z = torch.cumsum(xt, 0, dtype=torch.int32)
                starts = torch.nonzero(ft).flatten()
                lengths = torch.diff(starts, append=end)
                return z - torch.repeat_interleave(z[starts] - xt[starts], lengths)
            return run

        return {"numpy cumsum-repeat": numpy_comp, "torch cumsum-repeat_interleave": torch_comp}


# ----------------------------------------------------------------------------- segmented sum

def _torch_scatter():
    try:
        import torch_scatter
    except ImportError:
        raise Skip("torch_scatter is not installed") from None
    return torch_scatter


class SegSumBench(OpBench):
    name = "segmented_sum"
    float_peers = ("torch.segment_reduce [float32]",)

    def cases(self, quick):
        return _segmented_cases(self.name, quick)

    def inputs(self, case):
        x, f = _values(case.n, 3), _flags(case.n, case.density, 3)
        return {"x": x, "f": f, "S": int(np.count_nonzero(f))}

    def nbytes(self, case, inp):
        return 5 * case.n + 4 * inp["S"]

    def ours(self, fn, inp):
        x, f = inp["x"], inp["f"]
        return lambda: fn(x, f)

    def peers(self):
        def numpy_reduceat(inp):
            x, f = inp["x"], inp["f"]
            # flags cannot express empty segments, so reduceat is exact here
            return lambda: np.add.reduceat(x, np.flatnonzero(f), dtype=np.int32)

        def torch_segment_reduce(inp):
            torch = _torch()
            xf = torch.from_numpy(inp["x"].astype(np.float32))
            ft = torch.from_numpy(inp["f"])
            end = torch.tensor([xf.numel()])

            def run():
                starts = torch.nonzero(ft).flatten()
                return torch.segment_reduce(xf, "sum", lengths=torch.diff(starts, append=end))
            return run

        def torch_scatter_csr(inp):
            ts = _torch_scatter()
            torch = _torch()
            xt = torch.from_numpy(inp["x"])
            ft = torch.from_numpy(inp["f"])
            end = torch.tensor([xt.numel()])

            def run():
                ptr = torch.cat([torch.nonzero(ft).flatten(), end])
                return ts.segment_csr(xt, ptr, reduce="sum")
            return run

        return {"numpy reduceat": numpy_reduceat, "torch.segment_reduce [float32]": torch_segment_reduce,
                "torch_scatter.segment_csr": torch_scatter_csr}


# ----------------------------------------------------------------------------- segment sum, CSR offsets

class SegSumCsrBench(OpBench):
    name = "segment_sum_csr"
    float_peers = ("torch.segment_reduce [float32]",)

    def cases(self, quick):
        return _segmented_cases(self.name, quick)

    def inputs(self, case):
        n = case.n
        S = max(1, int(round(case.density * n)))
        cuts = np.sort(_rng(4, n, S).integers(0, n + 1, S - 1))  # repeats give empty segments
        indptr = np.concatenate([[0], cuts, [n]]).astype(np.int64)
        return {"x": _values(n, 4), "indptr": indptr, "S": S}

    def nbytes(self, case, inp):
        return 4 * case.n + 8 * (inp["S"] + 1) + 4 * inp["S"]

    def ours(self, fn, inp):
        x, p = inp["x"], inp["indptr"]
        return lambda: fn(x, p)

    def peers(self):
        def numpy_reduceat(inp):
            x, p = inp["x"], inp["indptr"]
            n = x.size

            def run():  # reduceat gives x[start] for an empty segment, and needs start < n: fix both
                starts = p[:-1]
                out = np.add.reduceat(x, np.minimum(starts, n - 1), dtype=np.int32)
                out[starts == p[1:]] = 0
                return out
            return run

        def torch_segment_reduce(inp):
            torch = _torch()
            xf = torch.from_numpy(inp["x"].astype(np.float32))
            pt = torch.from_numpy(inp["indptr"])
            return lambda: torch.segment_reduce(xf, "sum", offsets=pt)

        def torch_scatter_csr(inp):
            ts = _torch_scatter()
            torch = _torch()
            xt, pt = torch.from_numpy(inp["x"]), torch.from_numpy(inp["indptr"])
            return lambda: ts.segment_csr(xt, pt, reduce="sum")

        return {"numpy reduceat (empty-safe)": numpy_reduceat,
                "torch.segment_reduce [float32]": torch_segment_reduce,
                "torch_scatter.segment_csr": torch_scatter_csr}


# ----------------------------------------------------------------------------- compress

class CompressBench(OpBench):
    name = "compress"

    def cases(self, quick):
        return _segmented_cases(self.name, quick, COMPRESS_DENSITIES, COMPRESS_SWEEP_DENSITY)

    def inputs(self, case):
        x = _values(case.n, 5)
        m = _rng(5, case.n).random(case.n, dtype=np.float32) < case.density
        return {"x": x, "m": m, "K": int(np.count_nonzero(m))}

    def nbytes(self, case, inp):
        return 5 * case.n + 4 * inp["K"]

    def ours(self, fn, inp):
        x, m = inp["x"], inp["m"]
        return lambda: fn(x, m)

    def peers(self):
        def np_compress(inp):
            x, m = inp["x"], inp["m"]
            return lambda: np.compress(m, x)

        def np_boolean_index(inp):
            x, m = inp["x"], inp["m"]
            return lambda: x[m]

        def torch_masked_select(inp):
            torch = _torch()
            xt, mt = torch.from_numpy(inp["x"]), torch.from_numpy(inp["m"])
            return lambda: torch.masked_select(xt, mt)

        return {"np.compress": np_compress, "x[mask]": np_boolean_index,
                "torch.masked_select": torch_masked_select}


# ----------------------------------------------------------------------------- spmv

def _attention_grid(quick):
    if quick:
        return [(64, 2)]
    return [(b, r) for b in (2, 4, 16, 64) for r in (2, 4, 8)]


class SpmvBench(OpBench):
    name = "spmv"

    def __init__(self):
        self._cache = (None, None)

    def cases(self, quick):
        mats = [("attention " + matrices.attention_name(b, r), ("attention", b, r)) for b, r in _attention_grid(quick)]
        mats += [("power-law 1M", ("power-law",)), ("uniform 1M", ("uniform",))]
        return [Case("spmv", f"{label}, {dt}", 0, None, (), {"matrix": key, "dtype": dt, "label": label})
                for label, key in mats for dt in ("float32", "float64")]

    def _matrix(self, key):
        if self._cache[0] != key:
            self._cache = (None, None)
            if key[0] == "attention":
                A = matrices.sparse_attention(key[1], key[2])
            elif key[0] == "power-law":
                A = matrices.power_law()
            else:
                A = matrices.uniform_random()
            self._cache = (key, A)
        return self._cache[1]

    def inputs(self, case):
        A64 = self._matrix(case.params["matrix"])
        dt = np.dtype(case.params["dtype"])
        A = A64.astype(dt) if dt != A64.dtype else A64
        x = _rng(6, A.shape[1]).uniform(-1, 1, A.shape[1]).astype(dt)
        case.n = A.nnz
        return {"A": A, "x": x}

    def nbytes(self, case, inp):
        A, x = inp["A"], inp["x"]
        return (A.data.nbytes + A.indices.nbytes + A.indptr.nbytes + x.nbytes
                + A.shape[0] * x.dtype.itemsize)

    def ours(self, fn, inp):
        A, x = inp["A"], inp["x"]
        return lambda: fn(A, x)

    def peers(self):
        def scipy_csr(inp):
            A, x = inp["A"], inp["x"]
            return lambda: A @ x

        def torch_mv(inp):
            torch = _torch()
            A = inp["A"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int32)),
                                             torch.from_numpy(A.indices.astype(np.int32)),
                                             torch.from_numpy(A.data), size=A.shape)
            xt = torch.from_numpy(inp["x"])
            return lambda: torch.mv(At, xt)

        return {"scipy A @ x": scipy_csr, "torch.mv (CSR, int32)": torch_mv}

    def accuracy(self, inp, outputs):
        """Per implementation: max over rows of |y - exact| / sum|a x| (normwise) and
        max |y - exact| / |exact| (rows with exact != 0), against a double-double reference."""
        A, x = inp["A"], inp["x"]
        ref, mag = _dd_spmv(A.indptr, A.indices, A.data, x)
        lens = np.diff(A.indptr)
        u = 2.0**-24 if x.dtype == np.float32 else 2.0**-53
        k = lens.astype(np.float64)
        bound_ok = {}
        out = {}
        for name, y in outputs.items():
            y = np.asarray(y.numpy() if hasattr(y, "numpy") else y, dtype=np.float64)
            err = np.abs(y - ref)
            with np.errstate(divide="ignore", invalid="ignore"):
                norm = np.where(mag > 0, err / mag, 0.0)
                rel = np.where(ref != 0, err / np.abs(ref), 0.0)
            out[name] = {"max_normwise": float(norm.max(initial=0.0)), "max_rel": float(rel.max(initial=0.0))}
            bound_ok[name] = bool(np.all(err <= (k * u / (1 - k * u)) * mag))
            out[name]["within_gamma_k"] = bound_ok[name]
        return out


def _dd_spmv(indptr, indices, data, x):
    from ._reference import dd_spmv

    return dd_spmv(indptr, indices, data.astype(np.float64), x.astype(np.float64))


OPS = {b.name: b for b in (ScanBench(), SegScanBench(), SegSumBench(), SegSumCsrBench(), CompressBench(),
                           SpmvBench())}



def op_names():
    """The benchmarked ops, in the registry's order when the registry lists them."""
    try:
        from mmvref.registry import REGISTRY

        order = [n for n in REGISTRY if n in OPS]
        return order + [n for n in OPS if n not in order]
    except Exception:
        return list(OPS)
