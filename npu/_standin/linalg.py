"""Stand-in triangular-inverse kernels (torch_linalg.h). Every kernel takes a tensor of
(..., n, n) square matrices (fewer than 2 dimensions or non-square: RuntimeError, as the wrapper
throws) and treats it as numel / n^2 matrices.

- run_tri_inv_col_sweep(x): upstream passes lower triangular matrices L transposed (column-major),
  so x[b], as torch indexes it, is U = L^T, upper triangular; the diagonal is not read (taken as 1:
  a zero diagonal gives the same result). Column sweep solving U x = e_j for every j, in x's dtype:
  fp16 launches the fp16 kernel, every other dtype the fp32 kernel (4-byte words read as fp32; other
  widths refused). The result (empty_like(x)) is (U^-1)^T = (L + I)^-1 (column-major U^-1). The twin does the sweep vectorised over the batch and
  the columns with one rounding per multiply and per subtract, as upstream's numpy reference does.
- run_tri_inv_cube_col_sweep(x): fp16 only (else RuntimeError "only half precision"); x holds U
  column-major; the result is fp32 (batch, n, n): the product of the n column-sweep factors
  M_k (identity with column k = (2I - U)[:, k]), accumulated in fp32 and rounded to fp16 after every
  factor (the FIXPIPE fp32 -> fp16), as upstream's reference ``triu_inv_cs`` of U computes it.
- run_triu_inv_rec_unroll(x): fp16 only (else RuntimeError); x holds strictly upper triangular
  matrices (row-major; the twin reads triu(x, 1)); the result is fp32 (batch, n, n) = (I + x)^-1
  (computed here in float64 and rounded once to fp32).
"""
from __future__ import annotations

import torch

from ._common import cpu, f16, f32

DTYPES = {
    "run_tri_inv_col_sweep": "fp16 -> fp16; fp32 -> fp32; int32 -> int32 holding fp32 bit patterns "
                             "(fp32 kernel on the words); other widths refused",
    "run_tri_inv_cube_col_sweep": "fp16 -> fp32 (other dtypes: RuntimeError)",
    "run_triu_inv_rec_unroll": "fp16 -> fp32 (other dtypes: RuntimeError)",
}


def _square(name, x):
    cpu(name, x)
    if x.dim() < 2:
        raise RuntimeError(f"{name}: Input tensor must have at least 2 dimensions.")
    n = x.shape[-1]
    if x.shape[-2] != n:
        raise RuntimeError(f"{name}: Only square matrices are supported.")
    return n, x.contiguous().reshape(-1, n, n)


def run_tri_inv_col_sweep(x):
    n, xb = _square("run_tri_inv_col_sweep", x)
    if x.dtype not in (f16, f32):
        if x.element_size() != 4:
            raise TypeError(f"run_tri_inv_col_sweep: unsupported dtype {x.dtype}; the kernel takes float16 "
                            "or 4-byte words read as float32")
        return run_tri_inv_col_sweep(x.view(f32)).view(x.dtype)
    u = xb  # the upper triangular matrices U
    b = torch.eye(n, dtype=x.dtype).expand(xb.shape[0], n, n).clone()  # right-hand sides e_j, columns
    out = torch.zeros_like(b)
    for k in range(n - 1, -1, -1):
        out[:, k, :] = b[:, k, :]
        if k:
            b[:, :k, :] -= u[:, :k, k:k + 1] * out[:, k:k + 1, :]
    return out.transpose(1, 2).contiguous().reshape(x.shape)


def run_tri_inv_cube_col_sweep(x):
    n, xb = _square("run_tri_inv_cube_col_sweep", x)
    if x.dtype != f16:
        raise RuntimeError("run_tri_inv_cube_col_sweep: Currently only half precision is supported.")
    u = xb.transpose(1, 2).float()
    m = 2 * torch.eye(n) - u  # column k of M_k
    p = torch.eye(n).expand(xb.shape[0], n, n).clone()
    for k in range(n - 1, -1, -1):
        # M_k @ P = P + (m_k - e_k) P[k, :]: one product (exact in fp32 for fp16 data) and one sum per entry
        c = m[:, :, k].clone()
        c[:, k] -= 1
        p = (p + c[:, :, None] * p[:, k:k + 1, :]).half().float()
    return p


def run_triu_inv_rec_unroll(x):
    n, xb = _square("run_triu_inv_rec_unroll", x)
    if x.dtype != f16:
        raise RuntimeError("run_triu_inv_rec_unroll: Currently only half precision is supported.")
    a = torch.eye(n, dtype=torch.float64) + torch.triu(xb.double(), 1)
    eye = torch.eye(n, dtype=torch.float64).expand_as(a)
    return torch.linalg.solve_triangular(a, eye, upper=True, unitriangular=True).float()
