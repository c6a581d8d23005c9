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

    def memory_report(self, quick):
        """Markdown: peak memory of mmvref.spgemm with the dense and the sparse
        workspace, each measured in a fresh process, next to the workspace
        paper's model (§7.3: dense shape x 13 bytes, sparse nnz x 12 bytes)."""
        lines = ["| matrix | workspace | rows | paper model MB | peak above inputs MB | result MB | "
                 "temporaries MB |", "|---|---|---|---:|---:|---:|---:|"]
        notes = set()
        stagings = (True,) if quick else (True, False)  # --quick: the default rows only (each run is a fresh
        # process that compiles its own kernels: the counted ones took 7 of 14 s on a fresh cache)
        runs = [(case.params["matrix"], ws, staged) for case in self.cases(quick) for ws in ("dense", "sparse")
                for staged in stagings]
        for (key, ws, staged), m in zip(runs, _peaks_in_fresh_processes(runs)):
            if "error" in m:
                notes.add(m["error"])
                continue
            lines.append(f"| {key} | {ws} | {'staged' if staged else 'counted'} | "
                         f"{m['model_bytes'] / 1e6:.1f} | {m['peak'] / 1e6:.1f} | {m['result'] / 1e6:.1f} | "
                         f"{(m['peak'] - m['result']) / 1e6:.1f} |")
        out = "\n".join(lines)
        out += ("\n\nPaper model: dense = threads x n_cols x 13 B (one workspace per thread), sparse = "
                "products x 12 B (every product held as a coordinate entry). Peak: the process's resident "
                "high-water mark during one call above its resident size before it (Linux VmHWM after "
                "clear_refs), inputs built and kernels compiled beforehand. Rows: 'staged' (default: every row "
                "written at its product count, then compacted: products x 12 B of staging whatever the "
                "workspace) or 'counted' (STAGING_MAX_BYTES = 0: a counting pass first, then only the "
                "workspaces; not in --quick).")
        return out + "".join(f"\n{n}" for n in sorted(notes))


def _peak_child(key, workspace, staged):
    """Runs in a fresh process: one spgemm call's resident high-water mark above the resident size before it."""
    import gc
    import re

    import numba

    import mmvref
    from mmvref._fast.sparse import ops as sparse_products

    if not staged:
        sparse_products.STAGING_MAX_BYTES = 0

    def status(field):
        with open("/proc/self/status") as f:
            return 1024 * int(re.search(field + r":\s+(\d+)", f.read()).group(1))

    inp = SpgemmBench().inputs(Case("spgemm", key, 0, None, (), {"matrix": key}))
    A, B = inp["A"], inp["B"]
    small = A[:50].tocsr()
    mmvref.spgemm(small, B, workspace=workspace)  # compile or load the kernels first
    prods = int(np.diff(B.indptr)[A.indices].sum())
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current resident size
    except OSError as exc:
        return {"error": f"peak memory not measured: /proc/self/clear_refs not writable ({exc})"}
    before = status("VmRSS")
    C = mmvref.spgemm(A, B, workspace=workspace)
    peak = status("VmHWM") - before
    result = C.data.nbytes + C.indices.nbytes + C.indptr.nbytes
    if workspace == "dense":
        model = numba.get_num_threads() * B.shape[1] * 13
    else:
        model = prods * 12
    return {"peak": peak, "result": result, "model_bytes": model}


def _peaks_in_fresh_processes(runs):
    """``_peak_child(*run)`` of each run, each in a fresh (spawned) process of its own, two at a time:
    a process's high-water mark is its own, so two beside each other measure what one alone would
    (a reused process could hand an allocation back from memory its last call freed)."""
    import concurrent.futures
    import multiprocessing

    def failed(run, exc):  # a report line, not a crash of the whole benchmark run
        return {"error": f"peak memory of {run[0]}/{run[1]} not measured: {type(exc).__name__}: {exc}"}

    try:
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                                                    max_tasks_per_child=1) as ex:
            futures = [ex.submit(_peak_child, *run) for run in runs]
            results = []
            for run, fut in zip(runs, futures):
                try:
                    results.append(fut.result(timeout=600))
                except Exception as exc:
                    results.append(failed(run, exc))
            return results
    except Exception as exc:
        return [failed(run, exc) for run in runs]


OPS = {b.name: b for b in (SpmmBench(), SpgemmBench())}
