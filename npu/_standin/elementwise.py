"""Stand-in element-wise and utility kernels (torch_copy.h, torch_vadd.h, torch_diff.h,
torch_pad.h, torch_gen_lower.h, torch_matmul_cce.h).

- run_copy(x, s): single-core copy into a fresh 1-D tensor of x's dtype and numel (fp32 launches
  copy_fp32, every other dtype copy_fp16, i.e. 2-byte words: for a 2-byte dtype the copy is exact; a
  dtype of another width has no correct branch and is refused). s is the tile length (any positive int).
- run_add(x, y): vadd_custom on fp16 (the kernel is written for half): z = empty_like(x), x + y
  element-wise, y at least as long as x.
- run_diff(x, max_size=0): z(i) = x(i) - x(i-1), x(-1) = 0, over the first max_size elements
  (max_size <= 0: all); the result has x's dtype and length max_size. fp16 launches diff_fp16, every
  other dtype diff_fp32, which reads and writes the buffers as fp32 words: a 4-byte integer dtype gets
  the fp32 difference of its words reinterpreted as fp32 (bit patterns in the int result); a dtype of
  another width would be read / written out of bounds and is refused. max_size > numel reads past x:
  refused (ValueError).
- run_simple_pad(x, align_len): only simple_pad_fp16 exists; z has align_len elements of x's dtype and
  holds the LAST tile of x: the last (numel mod align_len) elements followed by zeros (the tail padded
  up to align_len). Upstream's test checks z[:-offset] == the tail; a 2-byte dtype only.
- run_gen_lower(matrix_size, device, dtype): the lower-triangular ones matrix (diagonal included),
  (matrix_size, matrix_size) of dtype; int8 and fp16 have kernels, any other dtype leaves the output
  uninitialised (GARBAGE). device must be a CPU device here.
- run_matmul_cce(a, b): C = a @ b^T (b passed transposed, (N, K)), fp16 in and out (accumulated in
  fp32, rounded once to fp16), shape (M, N); "B dims must be a multiple of 512" (N and K).
"""
from __future__ import annotations

import torch

from ._common import GARBAGE, cpu, f16, f32, i8, need

DTYPES = {
    "run_copy": "fp16 / bf16 / int16 -> same (copy_fp16); fp32 -> fp32 (copy_fp32); others refused",
    "run_add": "fp16 + fp16 -> fp16",
    "run_diff": "fp16 -> fp16 (diff_fp16); fp32 -> fp32; int32 -> int32 holding fp32 bit patterns "
                "(diff_fp32 on the words); other widths refused",
    "run_simple_pad": "2-byte dtypes (fp16, bf16, int16) -> same",
    "run_gen_lower": "(no tensor input) -> dtype: int8 / fp16 computed, any other dtype uninitialised",
    "run_matmul_cce": "fp16 x fp16 -> fp16",
}


def run_copy(x, s):
    cpu("run_copy", x)
    if int(s) <= 0:
        raise ValueError(f"run_copy: tile length s must be positive, got {s}")
    if x.dtype != f32 and x.element_size() != 2:
        raise TypeError(f"run_copy: unsupported dtype {x.dtype}; the kernel copies fp32 (copy_fp32) or "
                        "2-byte words (copy_fp16)")
    return x.contiguous().reshape(-1).clone()


def run_add(x, y):
    cpu("run_add", x, y)
    need("run_add", x, f16)
    need("run_add", y, f16)
    if y.numel() < x.numel():
        raise ValueError(f"run_add: y has {y.numel()} elements, x has {x.numel()}")
    return (x.reshape(-1) + y.reshape(-1)[: x.numel()]).reshape(x.shape)


def run_diff(x, max_size=0):
    cpu("run_diff", x)
    n = int(max_size) if max_size and int(max_size) > 0 else x.numel()
    if n > x.numel():
        raise ValueError(f"run_diff: max_size {n} exceeds the {x.numel()} elements of x")
    xs = x.contiguous().reshape(-1)[:n]
    if x.dtype in (f16, f32):
        return torch.diff(xs, prepend=torch.zeros(1, dtype=x.dtype))
    if x.element_size() != 4:
        raise TypeError(f"run_diff: unsupported dtype {x.dtype}; the kernel takes float16 (diff_fp16) or "
                        "4-byte words read as float32 (diff_fp32)")
    w = xs.view(f32)
    return torch.diff(w, prepend=torch.zeros(1, dtype=f32)).view(x.dtype)


def run_simple_pad(x, align_len):
    cpu("run_simple_pad", x)
    a = int(align_len)
    if a <= 0:
        raise ValueError(f"run_simple_pad: align_len must be positive, got {align_len}")
    if x.element_size() != 2:
        raise TypeError(f"run_simple_pad: unsupported dtype {x.dtype}; only simple_pad_fp16 (2-byte words)")
    xs = x.contiguous().reshape(-1)
    tail = xs.numel() % a
    z = torch.zeros(a, dtype=x.dtype)
    if tail:
        z[:tail] = xs[xs.numel() - tail:]
    return z


def run_gen_lower(matrix_size, device, dtype):
    if torch.device(device).type != "cpu":
        raise ValueError(f"run_gen_lower: the stand-in runs on the CPU, got device {device}")
    m = int(matrix_size)
    if dtype in (i8, f16):
        return torch.tril(torch.ones(m, m, dtype=dtype))
    return torch.full((m, m), GARBAGE, dtype=dtype)  # no kernel branch: uninitialised


def run_matmul_cce(a, b):
    cpu("run_matmul_cce", a, b)
    need("run_matmul_cce", a, f16)
    need("run_matmul_cce", b, f16)
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"run_matmul_cce: a (M, K) and b (N, K) expected, got {tuple(a.shape)}, "
                         f"{tuple(b.shape)}")
    if b.shape[0] % 512 or b.shape[1] % 512:
        raise ValueError(f"run_matmul_cce: B dims must be a multiple of 512, got {tuple(b.shape)}")
    return (a.float() @ b.float().T).to(f16)
