"""Benchmarks of SpMM and SpGEMM (issue 7).

Byte model: spmm   nnz (value + index) + (m+1) offsets + n*k dense read + m*k written (float32)
            spgemm A and B (values + indices + offsets) read + C written (as stored)

spmm peers: scipy ``A @ D`` and ``torch.sparse.mm`` (CSR, int32 indices), on the
sparse-attention matrix (b=64, r=2) and the power-law matrix, k in {8, 64}.
spgemm peer: scipy ``A @ B`` with B = A transposed with its columns shifted by
one (the workspace paper's operand recipe), uniform and power-law matrices
(scaled down so that one product fits this machine in seconds).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from . import matrices
from .ops import Case, OpBench, _rng, _torch

__all__ = ["OPS"]


def _spmm_matrix(key):
    if key == "attention":
        return matrices.sparse_attention(64, 2)
    return matrices.power_law(n=200_000)


class SpmmBench(OpBench):
    name = "spmm"

    def cases(self, quick):
        ks = (8,) if quick else (8, 64)
        keys = ("attention",) if quick else ("attention", "power-law")
        return [Case("spmm", f"{key}, k={k}, float32", 0, None, (), {"matrix": key, "k": k}) for key in keys
                for k in ks]

    def inputs(self, case):
        A = _spmm_matrix(case.params["matrix"]).astype(np.float32)
        case.n = A.nnz
        D = _rng(5, A.shape[1], case.params["k"]).standard_normal((A.shape[1], case.params["k"])).astype(np.float32)
        return {"A": A, "D": D}

    def nbytes(self, case, inp):
        A, D = inp["A"], inp["D"]
        return A.nnz * 8 + (A.shape[0] + 1) * A.indptr.itemsize + D.nbytes + A.shape[0] * D.shape[1] * 4

    def ours(self, fn, inp):
        A, D = inp["A"], inp["D"]
        return lambda: fn(A, D)

    def peers(self):
        def scipy_mm(inp):
            A, D = inp["A"], inp["D"]
            return lambda: A @ D

        def torch_mm(inp):
            torch = _torch()
            A = inp["A"]
            At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int32)),
                                         torch.from_numpy(A.indices.astype(np.int32)),
                                         torch.from_numpy(A.data), size=A.shape)
            Dt = torch.from_numpy(inp["D"])
            return lambda: torch.sparse.mm(At, Dt)
        return {"scipy A @ D": scipy_mm, "torch.sparse.mm": torch_mm}


def _shifted_transpose(A):
    """The workspace paper's operand: A transposed, columns shifted by one (cyclically)."""
    T = A.T.tocsr()
    T.indices = ((T.indices + 1) % T.shape[1]).astype(T.indices.dtype)
    T.has_sorted_indices = False
    T.sort_indices()
    return T


class SpgemmBench(OpBench):
    name = "spgemm"

    def cases(self, quick):
        keys = ("uniform",) if quick else ("uniform", "power-law")
        return [Case("spgemm", f"{key} x shifted transpose, float64", 0, None, (), {"matrix": key}) for key in keys]

    def inputs(self, case):
        if case.params["matrix"] == "uniform":
            A = matrices.uniform_random(n=100_000, mean=5.0)
        else:
            A = matrices.power_law(n=50_000, cap=2_000)
        A = A.astype(np.float64)
        B = _shifted_transpose(A)
        case.n = A.nnz
        return {"A": A, "B": B}

    def nbytes(self, case, inp):
        A, B = inp["A"], inp["B"]
        return sum(M.data.nbytes + M.indices.nbytes + M.indptr.nbytes for M in (A, B))

    def ours(self, fn, inp):
        A, B = inp["A"], inp["B"]
        return lambda: fn(A, B)

    def peers(self):
        def scipy_mm(inp):
            A, B = inp["A"], inp["B"]
            return lambda: A @ B
        return {"scipy A @ B": scipy_mm}

    def same(self, ours_out, peer_out):
        d = (sp.csr_matrix(ours_out) - sp.csr_matrix(peer_out))
        return bool(d.nnz == 0 or np.abs(d.data).max() < 1e-9 * (np.abs(peer_out.data).max() + 1))


OPS = {b.name: b for b in (SpmmBench(), SpgemmBench())}
