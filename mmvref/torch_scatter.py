"""torch_scatter's public API on mmvref's kernels: ``import mmvref.torch_scatter as torch_scatter``.

The functions have torch_scatter 2.1.2's names, argument names, argument order and defaults:
``scatter`` (and ``scatter_sum``/``_add``/``_mul``/``_mean``/``_min``/``_max``), ``segment_csr``
(``segment_sum_csr``/``_add``/``_mean``/``_min``/``_max_csr``), ``segment_coo`` (same suffixes,
``_coo``), ``gather_csr`` and ``gather_coo``. They take CPU tensors, return ``src.dtype`` and are
differentiable (through the ``torch.ops.mmvref`` custom ops of ``mmvref._torch_ops``, which
torch.compile also traces, ``fullgraph=True`` included).

Behaviour kept from torch_scatter:

- ``scatter*``: ``dim`` (default -1) may be negative; ``index`` is broadcast against ``src`` as
  torch_scatter does (a 1-D index is aligned with ``dim``, then trailing dimensions are added and the
  result expanded to ``src``'s shape). An index that does not vary across the other dimensions (the
  usual case) runs as one reduction with a 1-D index; one that does is reduced per fibre.
- ``segment_*_csr`` / ``gather_csr``: the reduced dimension is ``indptr.dim() - 1``; leading dimensions
  of ``indptr`` broadcast against ``src`` (size 1 is shared, a real batch of pointers is honoured), and
  ``indptr`` may start above 0 or end below ``src.size(dim)``: the elements outside
  ``indptr[0]:indptr[-1]`` are ignored.
- ``segment_*_coo`` / ``gather_coo``: the reduced dimension is ``index.dim() - 1``; ``index`` is sorted
  along it; leading dimensions broadcast as for ``indptr``.
- Empty segments: 0 (min and max too; ``scatter_mul``: 1), ``arg`` = ``src.size(dim)``.
- mean on integers: ``scatter_mean`` floors, ``segment_mean_csr``/``_coo`` truncate toward zero.
- ``out=``: checked (shape and dtype), written and returned. As in torch_scatter, ``scatter*`` and
  ``segment_*_coo`` reduce INTO ``out`` (its values take part: sum adds to it, mul multiplies it,
  min/max compare with it, mean divides ``out + sum`` by the count), while ``segment_*_csr`` and the
  gathers overwrite it.
- ``scatter_min``/``_max`` and ``segment_min/max_*`` return ``(out, arg)``; ``arg`` is int64.

Where it differs (on purpose): reductions are deterministic (positions in increasing order; min/max
ties keep the lowest position); min/max propagate NaN (torch_scatter skips it); float16/bfloat16
accumulate in float32; an integer result that overflows ``src.dtype`` raises OverflowError instead of
wrapping; ``index``/``indptr`` are validated (out-of-range or unsorted values raise ValueError instead
of reading out of bounds); uint8 values are refused (int8, int16, int32, int64, float16, bfloat16,
float32, float64 are taken); areas of a ``gather_csr`` output no segment covers are 0, not uninitialised;
``scatter_mul`` on an empty ``src`` gives 0 like torch_scatter, otherwise empty segments give 1.
The backward of ``scatter_mul`` handles zeros exactly (see ``mmvref._torch_ops``).
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _torch_ops as T

__all__ = [
    "scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean", "scatter_min", "scatter_max",
    "segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr", "segment_min_csr",
    "segment_max_csr", "segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
    "segment_min_coo", "segment_max_coo", "gather_csr", "gather_coo",
]

_MINMAX = ("min", "max")


# ----------------------------------------------------------------------------- plumbing

def _call(name: str, src: Tensor, *args):
    """The custom op where autograd or torch.compile needs it, else its CPU kernel directly."""
    if T.needs_op(src):
        return T.OPS[name](src, *args)
    return T.KERNELS[name](src, *args)


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _reduce(reduce, fn: str) -> str:
    r = {"sum": "sum", "add": "sum", "mean": "mean", "min": "min", "max": "max", "mul": "prod"}.get(reduce)
    if r is None:
        raise ValueError(f"{fn}: reduce must be 'sum', 'add', 'mean', 'min', 'max' or 'mul'; got {reduce!r}")
    return r


def _check_tensor(t, name: str, fn: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor; got {type(t).__name__}")


def _check_out(out, shape, dtype, fn: str) -> None:
    _check_tensor(out, "out", fn)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{fn}: out has shape {tuple(out.shape)}; expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{fn}: out has dtype {out.dtype}; expected src's dtype {dtype}")


def _with_size(shape, d: int, n: int) -> list:
    s = list(shape)
    s[d] = n
    return s


def _inverse(perm):
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return inv


def _varying(idx: Tensor, dims) -> list:
    """The dimensions among ``dims`` along which ``idx`` really varies (stride-0 or size-1 ones never do;
    in eager mode a materialised but constant index is recognised too)."""
    v = [k for k in dims if idx.size(k) > 1 and idx.stride(k) != 0]
    if v and not _compiling() and idx.numel():
        first = idx
        for k in v:
            first = first.narrow(k, 0, 1)
        if torch.equal(idx, first.expand_as(idx)):
            return []
    return v


def _line(idx: Tensor, d: int) -> Tensor:
    """The 1-D slice of ``idx`` along ``d`` at position 0 of every other dimension."""
    return idx[tuple(slice(None) if k == d else 0 for k in range(idx.dim()))]


def _trunc_mean(s: Tensor, cnt: Tensor, dtype: torch.dtype) -> Tensor:
    return torch.div(s, cnt, rounding_mode="trunc").to(dtype)


# ----------------------------------------------------------------------------- reduction by segment ids

class _ByIndex:
    """A reduction of ``src`` along ``d`` by an index of ``src``'s full (broadcast) shape.

    Dimensions along which the index varies (V) become batches: src is permuted to [V..., d, rest...]
    and flattened, and fibre v's ids are offset by v * N, which keeps a sorted index sorted."""

    def __init__(self, src: Tensor, idx: Tensor, d: int, n: Optional[int]):
        self.d, self.r = d, src.dim()
        self.E = src.size(d)
        self.V = _varying(idx, [k for k in range(src.dim()) if k != d])
        if n is None:
            if self.V or not _compiling():
                n = int(idx.max()) + 1 if idx.numel() else 0
            else:
                n = -1  # data-dependent (resolved by the op)
        self.N = n
        if not self.V:
            self.i1 = _line(idx, d)
            return
        self.W = [k for k in range(self.r) if k != d and k not in self.V]
        self.perm = self.V + [d] + self.W
        self.P = math.prod(src.size(k) for k in self.V)
        ip = idx.permute(self.perm)
        ip = ip[tuple([slice(None)] * (len(self.V) + 1) + [0] * len(self.W))].reshape(self.P, self.E)
        if not _compiling() and ip.numel():
            lo, hi = int(ip.min()), int(ip.max())
            if lo < 0 or hi >= n:
                raise ValueError(f"index holds {lo if lo < 0 else hi}, outside [0, {n}) (dim_size)")
        self.g = (ip + torch.arange(self.P).view(self.P, 1) * n).reshape(-1)

    def reduce(self, op: str, src: Tensor, reduce: str, dtype=None):
        if not self.V:
            return _call(op, src, self.i1, self.d, self.N, reduce, dtype)
        sizes_w = [src.size(k) for k in self.W]
        xs = src.permute(self.perm).reshape([self.P * self.E] + sizes_w)
        vals, arg = _call(op, xs, self.g, 0, self.P * self.N, reduce, dtype)
        shape_p = [src.size(k) for k in self.V] + [self.N] + sizes_w
        inv = _inverse(self.perm)
        vals = vals.reshape(shape_p).permute(inv).contiguous()
        if reduce in _MINMAX:
            a = arg.reshape([self.P, self.N] + sizes_w)
            offs = (torch.arange(self.P) * self.E).view([self.P, 1] + [1] * len(sizes_w))
            a = torch.where(a == self.P * self.E, torch.full_like(a, self.E), a - offs)
            arg = a.reshape(shape_p).permute(inv).contiguous()
        return vals, arg

    def counts(self, shape) -> Tensor:
        """Elements per segment (at least 1), broadcastable to the output ``shape``."""
        if not self.V:
            i = self.i1.to(torch.int64)
            n = shape[self.d]
            c = torch.zeros(n, dtype=torch.int64).index_add(0, i, torch.ones_like(i))
            view = [1] * self.r
            view[self.d] = n
            return c.clamp(min=1).view(view)
        g = self.g.to(torch.int64)
        c = torch.zeros(self.P * self.N, dtype=torch.int64).index_add(0, g, torch.ones_like(g)).clamp(min=1)
        shape_p = [shape[k] for k in self.V] + [self.N] + [1] * len(self.W)
        return c.reshape(shape_p).permute(_inverse(self.perm))


def _scatter_like(kind: str, fn: str, src: Tensor, index: Tensor, dim: int, out, dim_size, reduce: str):
    """scatter (kind "scatter") or segment_coo (kind "segment_coo") with torch_scatter's semantics;
    returns the values (and arg for min/max)."""
    _check_tensor(src, "src", fn)
    _check_tensor(index, "index", fn)
    if kind == "scatter":
        d = dim + src.dim() if dim < 0 else dim
        if not 0 <= d < src.dim():
            raise IndexError(f"{fn}: dim={dim} is out of range for src of rank {src.dim()}")
        idx = index
        if idx.dim() == 1:
            for _ in range(d):
                idx = idx.unsqueeze(0)
        for _ in range(idx.dim(), src.dim()):
            idx = idx.unsqueeze(-1)
        idx = idx.expand(src.size())
    else:
        if index.dim() < 1 or index.dim() > src.dim():
            raise ValueError(f"{fn}: index must have 1 to src.dim() = {src.dim()} dimensions; got {index.dim()}")
        d = index.dim() - 1
        idx = index.expand(list(src.shape[:d + 1]))
        for _ in range(idx.dim(), src.dim()):
            idx = idx.unsqueeze(-1)
        idx = idx.expand(src.size())
    if out is not None:
        n = out.size(d) if isinstance(out, Tensor) and out.dim() == src.dim() else -1
        _check_out(out, _with_size(src.shape, d, n), src.dtype, fn)
    else:
        n = dim_size
    E = src.size(d)
    if src.numel() == 0:
        if n is None:
            n = int(idx.max()) + 1 if idx.numel() else 0
        vals = src.new_zeros(_with_size(src.shape, d, n))
        arg = torch.full(vals.shape, E, dtype=torch.int64) if reduce in _MINMAX else None
        if out is not None:
            return (out, arg) if reduce in _MINMAX else out
        return (vals, arg) if reduce in _MINMAX else vals

    plan = _ByIndex(src, idx, d, n)
    int_src = not (src.is_floating_point() or src.is_complex())
    if reduce == "mean" and out is None and not (kind == "segment_coo" and int_src):
        vals, _ = plan.reduce(kind, src, "mean")
        return vals
    if reduce == "mean":
        s, _ = plan.reduce(kind, src, "sum", torch.int64 if int_src else None)
        cnt = plan.counts(s.shape)
        if out is not None:
            s = s + out
        if not int_src:
            res = s / cnt
        elif kind == "scatter":
            res = torch.div(s, cnt, rounding_mode="floor").to(src.dtype)
        else:
            res = _trunc_mean(s, cnt, src.dtype)
        if out is None:
            return res
        return out.copy_(res)
    vals, arg = plan.reduce(kind, src, reduce)
    if out is None:
        return (vals, arg) if reduce in _MINMAX else vals
    if reduce == "sum":
        return out.add_(vals)
    if reduce == "prod":
        return out.mul_(vals)
    take = (arg != E) & ((vals < out) if reduce == "min" else (vals > out))
    new = torch.where(take, vals, out)
    arg = torch.where(take, arg, torch.full_like(arg, E))
    return out.copy_(new), arg


# ----------------------------------------------------------------------------- scatter

def scatter_sum(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
                dim_size: Optional[int] = None) -> Tensor:
    """Sum of the elements of ``src`` with the same ``index`` along ``dim`` (torch_scatter.scatter_sum)."""
    return _scatter_like("scatter", "scatter_sum", src, index, dim, out, dim_size, "sum")


def scatter_add(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
                dim_size: Optional[int] = None) -> Tensor:
    """Alias of ``scatter_sum``."""
    return _scatter_like("scatter", "scatter_add", src, index, dim, out, dim_size, "sum")


def scatter_mul(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
                dim_size: Optional[int] = None) -> Tensor:
    """Product per index (empty segments: 1)."""
    return _scatter_like("scatter", "scatter_mul", src, index, dim, out, dim_size, "prod")


def scatter_mean(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
                 dim_size: Optional[int] = None) -> Tensor:
    """Mean per index (empty segments: 0; integers: floor division)."""
    return _scatter_like("scatter", "scatter_mean", src, index, dim, out, dim_size, "mean")


def scatter_min(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
                dim_size: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """(minimum per index, its position along ``dim``); empty segments: (0, src.size(dim))."""
    return _scatter_like("scatter", "scatter_min", src, index, dim, out, dim_size, "min")


def scatter_max(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
                dim_size: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """(maximum per index, its position along ``dim``); empty segments: (0, src.size(dim))."""
    return _scatter_like("scatter", "scatter_max", src, index, dim, out, dim_size, "max")


def scatter(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
            dim_size: Optional[int] = None, reduce: str = "sum") -> Tensor:
    """Reduce ``src`` along ``dim`` by ``index`` (any order), like torch_scatter.scatter.

    reduce: "sum"/"add", "mul", "mean", "min", "max" (min/max return the values only). Implemented
    as a stable counting sort of the index and one segmented reduction (``mmvref.scatter``)."""
    r = _reduce(reduce, "scatter")
    res = _scatter_like("scatter", "scatter", src, index, dim, out, dim_size, r)
    return res[0] if r in _MINMAX else res


# ----------------------------------------------------------------------------- segment_coo

def segment_sum_coo(src: Tensor, index: Tensor, out: Optional[Tensor] = None,
                    dim_size: Optional[int] = None) -> Tensor:
    """Sum by a sorted index along ``index.dim() - 1``."""
    return _scatter_like("segment_coo", "segment_sum_coo", src, index, -1, out, dim_size, "sum")


def segment_add_coo(src: Tensor, index: Tensor, out: Optional[Tensor] = None,
                    dim_size: Optional[int] = None) -> Tensor:
    """Alias of ``segment_sum_coo``."""
    return _scatter_like("segment_coo", "segment_add_coo", src, index, -1, out, dim_size, "sum")


def segment_mean_coo(src: Tensor, index: Tensor, out: Optional[Tensor] = None,
                     dim_size: Optional[int] = None) -> Tensor:
    """Mean by a sorted index (integers: truncated toward zero, as torch_scatter)."""
    return _scatter_like("segment_coo", "segment_mean_coo", src, index, -1, out, dim_size, "mean")


def segment_min_coo(src: Tensor, index: Tensor, out: Optional[Tensor] = None,
                    dim_size: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """(minimum, position) by a sorted index."""
    return _scatter_like("segment_coo", "segment_min_coo", src, index, -1, out, dim_size, "min")


def segment_max_coo(src: Tensor, index: Tensor, out: Optional[Tensor] = None,
                    dim_size: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """(maximum, position) by a sorted index."""
    return _scatter_like("segment_coo", "segment_max_coo", src, index, -1, out, dim_size, "max")


def segment_coo(src: Tensor, index: Tensor, out: Optional[Tensor] = None, dim_size: Optional[int] = None,
                reduce: str = "sum") -> Tensor:
    """Reduce ``src`` by an index sorted along its last dimension (``index.dim() - 1`` of src), like
    torch_scatter.segment_coo. reduce: "sum"/"add", "mean", "min", "max" (and "mul")."""
    r = _reduce(reduce, "segment_coo")
    res = _scatter_like("segment_coo", "segment_coo", src, index, -1, out, dim_size, r)
    return res[0] if r in _MINMAX else res


def gather_coo(src: Tensor, index: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """out[..., e, ...] = src[..., index[..., e], ...] along ``index.dim() - 1``."""
    _check_tensor(src, "src", "gather_coo")
    _check_tensor(index, "index", "gather_coo")
    if index.dim() < 1 or index.dim() > src.dim():
        raise ValueError(f"gather_coo: index must have 1 to src.dim() = {src.dim()} dimensions; got {index.dim()}")
    d = index.dim() - 1
    for k in range(d):
        if index.size(k) not in (1, src.size(k)):
            raise ValueError(f"gather_coo: index.size({k}) = {index.size(k)} != src.size({k}) = {src.size(k)}")
    idx = index.to(torch.int64)
    if all(idx.size(k) == 1 for k in range(d)):
        res = src.index_select(d, idx.reshape(-1))
    else:
        idx = idx.expand(list(src.shape[:d]) + [index.size(d)])
        for _ in range(idx.dim(), src.dim()):
            idx = idx.unsqueeze(-1)
        res = torch.gather(src, d, idx.expand(_with_size(src.shape, d, index.size(d))))
    if out is None:
        return res
    _check_out(out, res.shape, src.dtype, "gather_coo")
    return out.copy_(res)


# ----------------------------------------------------------------------------- segment_csr

class _ByPtr:
    """A reduction of ``src`` along ``indptr.dim() - 1`` by CSR offsets, torch_scatter-style.

    An ``indptr`` that does not cover all of ``src`` along the dimension (``indptr[0] > 0`` or
    ``indptr[-1] < src.size(dim)``), or a batch of them, runs as one reduction over offsets with a gap
    segment before and after each batch's segments (dropped from the result)."""

    def __init__(self, src: Tensor, indptr: Tensor, fn: str):
        _check_tensor(src, "src", fn)
        _check_tensor(indptr, "indptr", fn)
        m = indptr.dim()
        if m < 1 or m > src.dim():
            raise ValueError(f"{fn}: indptr must have 1 to src.dim() = {src.dim()} dimensions; got {m}")
        d = m - 1
        self.d, self.r, self.E = d, src.dim(), src.size(d)
        self.N = max(indptr.size(-1) - 1, 0)
        ip = indptr.expand(list(src.shape[:d]) + [indptr.size(-1)])
        self.V = _varying(ip, range(d))
        self.W = [k for k in range(self.r) if k != d and k not in self.V]
        self.perm = self.V + [d] + self.W
        self.P = math.prod(src.size(k) for k in self.V) if self.V else 1
        ipv = ip.permute(self.V + [d] + [k for k in range(d) if k not in self.V])
        ipv = ipv[tuple([slice(None)] * (len(self.V) + 1) + [0] * (d - len(self.V)))]
        self.ip = ipv.reshape(self.P, indptr.size(-1)).to(torch.int64)  # [P, N+1]
        self.direct = False
        if not self.V and not _compiling() and indptr.size(-1):
            p = self.ip[0]
            self.direct = int(p[0]) == 0 and int(p[-1]) == self.E

    def _gap_ptr(self, length) -> Tensor:
        """Offsets of [gap, P x (N segments, gap)] over P concatenated stretches of ``length``."""
        off = torch.arange(self.P, dtype=torch.int64).view(self.P, 1) * length
        z = torch.zeros(1, dtype=torch.int64)
        return torch.cat([z, (self.ip + off).reshape(-1), (torch.ones(1, dtype=torch.int64) * self.P) * length])

    def reduce(self, src: Tensor, reduce: str, dtype=None):
        d, N = self.d, self.N
        if self.direct:
            return _call("segment_csr", src, self.ip[0], d, reduce, dtype)
        if not self.V:
            vals, arg = _call("segment_csr", src, self._gap_ptr(self.E), d, reduce, dtype)
            vals = vals.narrow(d, 1, N).contiguous()
            if reduce in _MINMAX:
                arg = arg.narrow(d, 1, N).contiguous()
            return vals, arg
        sizes_w = [src.size(k) for k in self.W]
        xs = src.permute(self.perm).reshape([self.P * self.E] + sizes_w)
        vals, arg = _call("segment_csr", xs, self._gap_ptr(self.E), 0, reduce, dtype)
        shape_p = [src.size(k) for k in self.V] + [N] + sizes_w
        inv = _inverse(self.perm)
        vals = vals[1:].reshape([self.P, N + 1] + sizes_w)[:, :N].reshape(shape_p).permute(inv).contiguous()
        if reduce in _MINMAX:
            a = arg[1:].reshape([self.P, N + 1] + sizes_w)[:, :N]
            offs = (torch.arange(self.P) * self.E).view([self.P, 1] + [1] * len(sizes_w))
            a = torch.where(a == self.P * self.E, torch.full_like(a, self.E), a - offs)
            arg = a.reshape(shape_p).permute(inv).contiguous()
        return vals, arg

    def counts_like(self, out_shape) -> Tensor:
        """Elements per segment (at least 1), broadcastable to the output shape."""
        c = (self.ip[:, 1:] - self.ip[:, :-1]).clamp(min=1)  # [P, N]
        if not self.V:
            view = [1] * self.r
            view[self.d] = self.N
            return c.reshape(view)
        shape_p = [out_shape[k] for k in self.V] + [self.N] + [1] * len(self.W)
        return c.reshape(shape_p).permute(_inverse(self.perm))


def _segment_csr(fn: str, src: Tensor, indptr: Tensor, out, reduce: str):
    plan = _ByPtr(src, indptr, fn)
    shape = _with_size(src.shape, plan.d, plan.N)
    if out is not None:
        _check_out(out, shape, src.dtype, fn)
    if src.numel() == 0:
        vals = src.new_zeros(shape)
        arg = torch.full(shape, plan.E, dtype=torch.int64) if reduce in _MINMAX else None
    elif reduce == "mean" and not (src.is_floating_point() or src.is_complex()):
        s, _ = plan.reduce(src, "sum", torch.int64)
        vals, arg = _trunc_mean(s, plan.counts_like(s.shape), src.dtype), None
    else:
        vals, arg = plan.reduce(src, reduce)
    if out is not None:
        vals = out.copy_(vals)
    return (vals, arg) if reduce in _MINMAX else vals


def segment_sum_csr(src: Tensor, indptr: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """Sum over the CSR segments ``indptr`` along ``indptr.dim() - 1``."""
    return _segment_csr("segment_sum_csr", src, indptr, out, "sum")


def segment_add_csr(src: Tensor, indptr: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """Alias of ``segment_sum_csr``."""
    return _segment_csr("segment_add_csr", src, indptr, out, "sum")


def segment_mean_csr(src: Tensor, indptr: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """Mean over CSR segments (empty: 0; integers: truncated toward zero, as torch_scatter)."""
    return _segment_csr("segment_mean_csr", src, indptr, out, "mean")


def segment_min_csr(src: Tensor, indptr: Tensor, out: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """(minimum, position along the dimension) over CSR segments; empty: (0, src.size(dim))."""
    return _segment_csr("segment_min_csr", src, indptr, out, "min")


def segment_max_csr(src: Tensor, indptr: Tensor, out: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
    """(maximum, position along the dimension) over CSR segments; empty: (0, src.size(dim))."""
    return _segment_csr("segment_max_csr", src, indptr, out, "max")


def segment_csr(src: Tensor, indptr: Tensor, out: Optional[Tensor] = None, reduce: str = "sum") -> Tensor:
    """Reduce ``src`` over the segments ``indptr[i]:indptr[i+1]`` along ``indptr.dim() - 1``, like
    torch_scatter.segment_csr. reduce: "sum"/"add", "mean", "min", "max" (and "mul")."""
    r = _reduce(reduce, "segment_csr")
    res = _segment_csr("segment_csr", src, indptr, out, r)
    return res[0] if r in _MINMAX else res


def gather_csr(src: Tensor, indptr: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """Every position of segment n along ``indptr.dim() - 1`` gets ``src``'s n-th entry (the inverse
    pattern of segment_csr); the output has ``indptr.flatten()[-1]`` positions along the dimension."""
    plan = _ByPtr(src, indptr, "gather_csr")
    d, N = plan.d, plan.N
    if src.size(d) != N and src.numel():
        raise ValueError(f"gather_csr: src.size({d}) = {src.size(d)} but indptr describes {N} segments")
    compiling = _compiling()
    e_out = None if compiling else (int(indptr.reshape(-1)[-1]) if indptr.numel() else 0)
    if src.numel() == 0:
        res = src.new_zeros(_with_size(src.shape, d, e_out or 0))
    elif not plan.V:
        p = plan.ip[0]
        if not compiling and int(p[0]) == 0:
            res = _call("gather_csr", src, p, d, e_out)
        else:
            z = src.new_zeros(_with_size(src.shape, d, 1))
            gp = torch.cat([torch.zeros(1, dtype=torch.int64), p])
            res = _call("gather_csr", torch.cat([z, src], d), gp, d, e_out)
    else:
        sizes_w = [src.size(k) for k in plan.W]
        xs = src.permute(plan.perm).reshape([plan.P, N] + sizes_w)
        xs = torch.cat([xs, xs.new_zeros([plan.P, 1] + sizes_w)], 1).reshape([plan.P * (N + 1)] + sizes_w)
        xs = torch.cat([xs.new_zeros([1] + sizes_w), xs])
        length = plan.ip[-1, -1] if compiling else e_out
        g = _call("gather_csr", xs, plan._gap_ptr(length), 0, None if compiling else plan.P * e_out)
        shape_p = [src.size(k) for k in plan.V] + [g.shape[0] // plan.P] + sizes_w
        res = g.reshape(shape_p).permute(_inverse(plan.perm)).contiguous()
    if out is None:
        return res
    _check_out(out, res.shape, src.dtype, "gather_csr")
    return out.copy_(res)
