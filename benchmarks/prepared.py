"""Prepared matrices (``mmvref.prepare``, issue 32): the prepared matvec against the plain ``spmv``,
``torch.mv`` and scipy on the SpMV matrices, a 2-D Poisson matrix and a small one (the per-call
overhead); the preparation's cost in matvecs; the prepared SpMM (``P @ X``, X dense n x k, k = 16,
64, 256) against ``torch.sparse.mm`` and scipy; and ``cg`` end to end on the Poisson matrix with the
prepared operator against scipy's own matrix (same tolerance, same iteration count).

Byte model of ``prepared_spmm``: nnz (value + index) + (m+1) offsets + n*k dense read + m*k written."""
from __future__ import annotations

import contextlib
import time

import numpy as np
import scipy.sparse as sp

from . import matrices, sparse_products
from .ops import Case, OpBench, SpmvBench, _attention_grid, _rng, _torch


def poisson_2d(side: int) -> sp.csr_matrix:
    """The 5-point Laplacian on a side x side grid (side**2 rows), float64."""
    T = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(side, side))
    I = sp.identity(side)
    A = (sp.kron(I, T) + sp.kron(T, I)).tocsr()
    A.indices = A.indices.astype(np.int32)
    A.indptr = A.indptr.astype(np.int32)
    return A


def _matrix(key):
    if key[0] == "poisson":
        return poisson_2d(key[1])
    if key[0] == "small":
        return matrices.uniform_random(1000, mean=5.0)
    if key[0] == "power-law-10M":
        return matrices.power_law(1_400_000, cap=20_000)
    if key[0] == "power-law-200k":
        return matrices.power_law(n=200_000)
    return None


def _preparation(prepare, product):
    """(ms of ``prepare()``, ms of ``prepare()`` plus the first ``product``, a prepared matrix):
    medians of 15, after 32 untimed ones, so that both are timed warm, as the products they are
    set against are (Python 3.11+ specializes a function's bytecode after several calls: timed from
    the first, a 1,000-row matrix's preparation measured 12.5 / 28.8 us where it takes 8.1 / 19 us
    from the ninth on; after 8 untimed calls at the start of a process its prepare plus first
    product still measured 14.3 us, 2.8 products, and 11.7-12.1 us, 2.2-2.3, after 32 or 1,000).
    The preparation's cost is the second less one product (the first product also makes the plan
    and binds the kernel)."""
    for _ in range(32):
        product(prepare())
    alone, first = [], []
    for _ in range(15):
        t0 = time.perf_counter()
        P = prepare()
        t1 = time.perf_counter()
        product(P)
        t2 = time.perf_counter()
        alone.append(t1 - t0)
        first.append(t2 - t0)
    return 1e3 * float(np.median(alone)), 1e3 * float(np.median(first)), P


class PreparedSpmvBench(SpmvBench):
    name = "prepared_spmv"
    fast_name = "prepare"

    def cases(self, quick):
        mats = [("small 1k", ("small",)), ("poisson 1M", ("poisson", 1000))]
        if not quick:
            mats += [("attention " + matrices.attention_name(b, r), ("attention", b, r)) for b, r in _attention_grid(False)]
            mats += [("power-law 1M", ("power-law",)), ("uniform 1M", ("uniform",)),
                     ("power-law ~1e7 nnz", ("power-law-10M",))]
        else:
            mats += [("power-law 1M", ("power-law",))]
        return [Case(self.name, f"{label}, {dt}", 0, None, (), {"matrix": key, "dtype": dt, "label": label})
                for label, key in mats for dt in ("float32", "float64")]

    def _matrix(self, key):
        A = _matrix(key)
        if A is None:
            return super()._matrix(key)
        self._cache = (key, A)
        return A

    def inputs(self, case):
        import mmvref

        inp = super().inputs(case)
        A, x = inp["A"], inp["x"]
        case.params["prepare_ms"], case.params["prepare_first_ms"], inp["P"] = _preparation(lambda: mmvref.prepare(A),
                                                                                           lambda P: P @ x)
        return inp

    def ours(self, fn, inp):
        P, x = inp["P"], inp["x"]
        return lambda: P @ x

    def peers(self):
        import mmvref

        def plain(inp):
            A, x = inp["A"], inp["x"]
            return lambda: mmvref.spmv(A, x)

        return {"mmvref.spmv": plain, **super().peers()}


class PreparedSpmmBench(OpBench):
    """P @ X with X dense (n, k): the prepared operator (prepared outside the timing, its cost
    reported in products) against ``torch.sparse.mm`` on a CSR tensor (int32 indices) and scipy's
    ``A @ X``; float32, and float64 outside ``--quick``. Matrices of 0.25-1e6 rows: a product at
    k = 256 writes m x 256 values (1 GB at 1e6 rows in float32), so the Poisson grid is 500 x 500."""
    name = "prepared_spmm"
    fast_name = "prepare"
    KS = (16, 64, 256)

    def __init__(self):
        self._matrices = PreparedSpmvBench()

    def cases(self, quick):
        mats = [("small 1k", ("small",)), ("poisson 250k", ("poisson", 500)),
                ("attention " + matrices.attention_name(64, 2), ("attention", 64, 2)),
                ("power-law 200k", ("power-law-200k",))]
        if quick:
            mats, ks, dts = mats[1:2], (16,), ("float32",)
        else:
            ks, dts = self.KS, ("float32", "float64")
        return [Case(self.name, f"{label}, k={k}, {dt}", 0, None, (), {"matrix": key, "k": k, "dtype": dt,
                                                                       "label": label})
                for label, key in mats for k in ks for dt in dts]

    def _matrix(self, key):
        return self._matrices._matrix(key)  # the prepared matvec's matrices (float64), one kept at a time

    def inputs(self, case):
        import mmvref

        dt = np.dtype(case.params["dtype"])
        A = self._matrix(case.params["matrix"]).astype(dt)
        k = case.params["k"]
        X = _rng(7, A.shape[1], k).standard_normal((A.shape[1], k)).astype(dt)
        case.n = A.nnz
        case.params["prepare_ms"], case.params["prepare_first_ms"], P = _preparation(lambda: mmvref.prepare(A),
                                                                                     lambda P: P @ X)
        return {"A": A, "D": X, "P": P}

    def nbytes(self, case, inp):
        A, X = inp["A"], inp["D"]
        return A.data.nbytes + A.indices.nbytes + A.indptr.nbytes + X.nbytes + A.shape[0] * X.shape[1] * X.itemsize

    def ours(self, fn, inp):
        P, X = inp["P"], inp["D"]
        return lambda: P @ X

    def peers(self):
        return sparse_products.SpmmBench.peers(self)  # scipy A @ D, torch.sparse.mm (the operand is "D")


class CgBench(SpmvBench):
    """cg on the 2-D Poisson matrix to rtol 1e-8 (at most 300 iterations), float64: the prepared
    operator (``aslinearoperator``) against scipy's CSR matrix; both must take the same iterations.
    A second case runs both with the BLAS in one thread (``threadpoolctl``, where installed: the
    ``bench`` extra): cg's vector updates call the BLAS, whose OpenBLAS threads keep spinning after
    each call and take the cores the parallel SpMV that follows needs (on this 2-vCPU VM the
    prepared product took 1.6-1.9 ms a call inside cg against 0.9 ms back to back; with the BLAS
    in one thread 1.0 ms)."""
    name = "cg"
    fast_name = "prepare"

    def cases(self, quick):
        side = 300 if quick else 1000  # quick: 90,000 rows (300 iterations of 250,000 took 17 s of a 2-minute run)
        blas = [None]
        try:
            import threadpoolctl  # noqa: F401
            blas.append(1)
        except ImportError:
            pass
        return [Case(self.name, f"poisson {side * side:,} rows, float64, 300 iterations"
                     + ("" if b is None else ", BLAS in one thread"), 0, None, (),
                     {"matrix": ("poisson", side), "dtype": "float64", "label": f"poisson {side}", "blas_threads": b})
                for b in blas]

    def _matrix(self, key):
        A = _matrix(key)
        self._cache = (key, A)
        return A

    def inputs(self, case):
        inp = super().inputs(case)
        inp["b"] = np.ones(inp["A"].shape[0])
        inp["blas_threads"] = case.params["blas_threads"]
        return inp

    @staticmethod
    def _solve(op, b, blas_threads):
        from scipy.sparse.linalg import cg

        it = [0]

        def count(_):
            it[0] += 1

        if blas_threads is None:
            limit = contextlib.nullcontext()
        else:
            from threadpoolctl import threadpool_limits

            limit = threadpool_limits(limits=blas_threads, user_api="blas")
        with limit:
            x, _ = cg(op, b, rtol=1e-8, maxiter=300, callback=count)
        return x, it[0]

    def ours(self, fn, inp):
        A, b, bt = inp["A"], inp["b"], inp["blas_threads"]

        def run():
            return self._solve(fn(A).aslinearoperator(), b, bt)  # the preparation counted
        return run

    def peers(self):
        def scipy_cg(inp):
            A, b, bt = inp["A"], inp["b"], inp["blas_threads"]
            return lambda: self._solve(A, b, bt)
        return {"scipy cg (CSR matrix)": scipy_cg}

    def nbytes(self, case, inp):
        return 0

    def same(self, ours_out, peer_out):
        (x1, i1), (x2, i2) = ours_out, peer_out
        return i1 == i2 and np.allclose(x1, x2, rtol=1e-6, atol=1e-9)

    def accuracy(self, inp, outputs):
        return {}


OPS = {b.name: b for b in (PreparedSpmvBench(), PreparedSpmmBench(), CgBench())}
