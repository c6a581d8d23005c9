"""torch_scatter's public API on mmvref's kernels: ``import mmvref.torch_scatter as torch_scatter``.

The functions have torch_scatter 2.1.2's names, argument names, argument order and defaults:
``scatter`` (and ``scatter_sum``/``_add``/``_mul``/``_mean``/``_min``/``_max``), ``segment_csr``
(``segment_sum_csr``/``_add``/``_mean``/``_min``/``_max_csr``), ``segment_coo`` (same suffixes,
``_coo``), ``gather_csr`` and ``gather_coo``, and the composites ``scatter_softmax``,
``scatter_log_softmax``, ``scatter_logsumexp`` and ``scatter_std`` (built on this module's scatter max
and sum: softmax, log_softmax and logsumexp make one pass for the segment maxima and one for the sums,
std one for the sums and one for the squared deviations, plus the counts over ``index``; see each
function). They take CPU tensors, return ``src.dtype`` (``scatter_std`` of integers: a float) and are
differentiable (through the ``torch.ops.mmvref`` custom ops of ``mmvref._fast.segment._torch``, which
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
- An empty ``src`` gives zeros that stay on src's autograd graph (a zero gradient of src's shape).
- Composites: softmax, log_softmax and logsumexp take floating point ``src`` only (ValueError
  otherwise); their segment maximum skips NaN, as torch_scatter's; ``eps`` and the ``1e-6`` of
  ``scatter_std`` are added where torch_scatter adds them.

Where it differs (on purpose): reductions are deterministic (positions in increasing order; min/max
ties keep the lowest position); min/max propagate NaN (torch_scatter skips it); float16/bfloat16
accumulate in float32; an integer result that overflows ``src.dtype`` raises OverflowError instead of
wrapping; ``index``/``indptr`` are validated (out-of-range or unsorted values raise ValueError instead
of reading out of bounds); uint8 values are refused (int8, int16, int32, int64, float16, bfloat16,
float32, float64 are taken); areas of a ``gather_csr`` output no segment covers are 0, not uninitialised;
``scatter_mul`` on an empty ``src`` gives 0 like torch_scatter, otherwise empty segments give 1.
The backward of ``scatter_mul`` handles zeros exactly (see ``mmvref._fast.segment._torch``). With ``out=``,
``scatter_logsumexp`` keeps out's value where the result is not finite (an empty segment), as
torch_scatter does after 2.1.2 (2.1.2 wrote 0 there); ``scatter_std``'s gradient is 0, not NaN, where a
segment's values are all equal (as torch.std's). An index outside ``[0, dim_size)`` or one that does
not broadcast to ``src`` raises ValueError naming it, as do a negative ``dim_size`` (a non-int one:
TypeError), an ``indptr`` that is negative, decreasing or (segment_csr) past ``src.size(dim)``, an index
of ``gather_coo`` outside ``[0, src.size(dim))`` and ids that imply more than 2**63 - 1 output elements;
a floating point ``index``/``indptr`` raises TypeError naming it (torch_scatter requires integers) and
a ``src`` of another dtype TypeError naming src. Overflow is decided on the exact result: only the
elements inside ``indptr[0]:indptr[-1]`` take part in a ``segment_*_csr``; with ``out=`` the integer sum
and product include out's values (out + the sum, out times the product); integer means are exact
(int64 included; with ``out=`` an int64 out + sum that leaves int64 raises OverflowError). The
functions are plain Python, not TorchScript: ``torch.jit.script`` cannot compile them (use
torch.compile, which traces them, or call them from eager code).
"""
from __future__ import annotations

import math
import operator
from typing import Optional, Tuple

import torch
from torch import Tensor

from ._fast.segment import _torch as T

__all__ = [
    "scatter", "scatter_sum", "scatter_add", "scatter_mul", "scatter_mean", "scatter_min", "scatter_max",
    "segment_csr", "segment_sum_csr", "segment_add_csr", "segment_mean_csr", "segment_min_csr",
    "segment_max_csr", "segment_coo", "segment_sum_coo", "segment_add_coo", "segment_mean_coo",
    "segment_min_coo", "segment_max_coo", "gather_csr", "gather_coo",
    "scatter_softmax", "scatter_log_softmax", "scatter_logsumexp", "scatter_std",
]

_MINMAX = ("min", "max")


# ----------------------------------------------------------------------------- plumbing

def _call(name: str, src: Tensor, *args, want_arg: bool = True):
    """The custom op where autograd or torch.compile needs it, else its CPU kernel directly
    (``want_arg=False``: scatter / segment_coo's min/max positions are not needed, and the kernel
    skips them; the op keeps them for its backward)."""
    if T.needs_op(src):
        return T.OPS[name](src, *args)
    if not want_arg:
        return T.KERNELS[name](src, *args, want_arg=False)
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


_VALUE_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
                 torch.float64)
_INT64_MAX = 2**63 - 1


def _check_src(src, fn: str) -> None:
    """src is a tensor of a value dtype the kernels take."""
    _check_tensor(src, "src", fn)
    if src.dtype not in _VALUE_DTYPES:
        raise TypeError(f"{fn}: src has unsupported dtype {src.dtype}; supported: int8, int16, int32, int64, "
                        f"float16, bfloat16, float32, float64")


def _check_ids(t, name: str, fn: str) -> None:
    """``index``/``indptr`` is a tensor of an integer dtype (a float one would be silently truncated)."""
    _check_tensor(t, name, fn)
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise TypeError(f"{fn}: {name} must have an integer dtype (as in torch_scatter); got {t.dtype}")


def _check_dim_size(dim_size, fn: str):
    """``dim_size``: None or a non-negative int (returned as an int)."""
    if dim_size is None:
        return None
    if isinstance(dim_size, bool):
        raise TypeError(f"{fn}: dim_size must be a non-negative int or None; got {dim_size!r}")
    try:
        n = operator.index(dim_size)
    except TypeError:
        raise TypeError(f"{fn}: dim_size must be a non-negative int or None; got {type(dim_size).__name__}") \
            from None
    if n < 0:
        raise ValueError(f"{fn}: dim_size must be a non-negative int or None; got {n}")
    return n


def _size_from_index(idx: Tensor, fn: str) -> int:
    """index.max() + 1 (0 for an empty index), the number of segments torch_scatter infers."""
    if not idx.numel():
        return 0
    hi = int(idx.max())
    if hi >= _INT64_MAX:
        raise ValueError(f"{fn}: index holds {hi}, which implies a result of {hi + 1} entries along dim "
                         f"(more than int64 can count); pass a smaller index or dim_size")
    return hi + 1


def _check_numel(shape, fn: str, name: str) -> None:
    if math.prod(shape) > _INT64_MAX:
        raise ValueError(f"{fn}: the result would have shape {tuple(shape)}, more than 2**63 - 1 elements "
                         f"(from {name})")


def _dim(dim: int, src: Tensor, fn: str) -> int:
    """``dim`` (negative counts from the end) as an index into src's dimensions."""
    d = dim + src.dim() if dim < 0 else dim
    if not 0 <= d < src.dim():
        raise IndexError(f"{fn}: dim={dim} is out of range for src of rank {src.dim()}")
    return d


def _broadcast(t: Tensor, like: Tensor, d: int, name: str, fn: str) -> Tensor:
    """torch_scatter's broadcast of ``t`` (an index, or per-segment counts) to ``like``'s shape for a
    reduction along ``d``: a 1-D ``t`` is aligned with ``d``, trailing dimensions are added, then it
    is expanded (a view, nothing copied)."""
    r = t
    if r.dim() == 1:
        for _ in range(d):
            r = r.unsqueeze(0)
    for _ in range(r.dim(), like.dim()):
        r = r.unsqueeze(-1)
    try:
        return r.expand(like.size())
    except RuntimeError:
        raise ValueError(f"{fn}: {name} of shape {tuple(t.shape)} does not broadcast to shape "
                         f"{tuple(like.shape)} along dim {d}") from None


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


def _empty_src_zeros(src: Tensor, d: int, shape) -> Tensor:
    """The (all-zero) result of ``shape`` for an empty ``src``, which has nothing to reduce or gather,
    computed from ``src`` itself (its sum along ``d``, broadcast along ``d``) so that it stays on src's
    autograd graph: the result requires grad when src does, and src's gradient is zero of src's shape."""
    return src.sum(d, keepdim=True, dtype=src.dtype).expand(list(shape)).contiguous()


# ----------------------------------------------------------------------------- reduction by segment ids

class _ByIndex:
    """A reduction of ``src`` along ``d`` by an index of ``src``'s full (broadcast) shape.

    Dimensions along which the index varies (V) become batches: src is permuted to [V..., d, rest...]
    and flattened, and fibre v's ids are offset by v * N, which keeps a sorted index sorted."""

    def __init__(self, src: Tensor, idx: Tensor, d: int, n: Optional[int], fn: str = "scatter"):
        self.d, self.r = d, src.dim()
        self.E = src.size(d)
        self.V = _varying(idx, [k for k in range(src.dim()) if k != d])
        if n is None:
            if self.V or not _compiling():
                n = _size_from_index(idx, fn)
                _check_numel(_with_size(src.shape, d, n), fn, "index")
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

    def reduce(self, op: str, src: Tensor, reduce: str, dtype=None, overflow: str = "raise",
               want_arg: bool = True):
        if not self.V:
            return _call(op, src, self.i1, self.d, self.N, reduce, dtype, overflow, want_arg=want_arg)
        sizes_w = [src.size(k) for k in self.W]
        xs = src.permute(self.perm).reshape([self.P * self.E] + sizes_w)
        vals, arg = _call(op, xs, self.g, 0, self.P * self.N, reduce, dtype, overflow)
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


def _trunc_mean_exact(m: Tensor, s_wrap: Tensor, cnt: Tensor, dtype: torch.dtype) -> Tensor:
    """The mean truncated toward zero from the exact floor mean ``m`` (the kernels') and the sum modulo
    2**64 ``s_wrap`` (int64, wrapped): r = s - m * cnt (0 <= r < cnt, exact modulo 2**64) is the
    remainder, and trunc = floor + 1 where the sum is negative (m < 0) and r != 0. Exact for int64 too,
    where the sum itself may leave int64 (the mean never does)."""
    m = m.to(torch.int64)
    r = s_wrap - m * cnt
    return (m + ((r != 0) & (m < 0)).to(torch.int64)).to(dtype)


def _add_exact_int64(s: Tensor, o: Tensor, fn: str) -> Tensor:
    """s + o in int64, OverflowError where it leaves int64 (torch would wrap)."""
    t = s + o
    if bool((((s ^ t) & (o ^ t)) < 0).any()):
        raise OverflowError(f"{fn}: out + the segment sum overflows int64")
    return t


def _check_sorted(idx: Tensor, d: int, fn: str) -> None:
    E = idx.size(d)
    if E > 1 and not _compiling() and bool((idx.narrow(d, 1, E - 1) < idx.narrow(d, 0, E - 1)).any()):
        raise ValueError(f"{fn}: index must be sorted (non-decreasing) along dim {d} for segment_coo")


def _scatter_like(kind: str, fn: str, src: Tensor, index: Tensor, dim: int, out, dim_size, reduce: str,
                  values_only: bool = False):
    """scatter (kind "scatter") or segment_coo (kind "segment_coo") with torch_scatter's semantics;
    returns the values (and arg for min/max: empty with ``values_only`` and no ``out``, where the
    positions are not computed unless autograd needs them)."""
    _check_src(src, fn)
    _check_ids(index, "index", fn)
    dim_size = _check_dim_size(dim_size, fn)
    if kind == "scatter":
        d = _dim(dim, src, fn)
        idx = _broadcast(index, src, d, "index", fn)
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
        if n is not None:
            _check_numel(_with_size(src.shape, d, n), fn, "dim_size")
    E = src.size(d)
    if src.numel() == 0:
        if n is None:
            n = _size_from_index(idx, fn)
            _check_numel(_with_size(src.shape, d, n), fn, "index")
        vals = _empty_src_zeros(src, d, _with_size(src.shape, d, n))
        arg = torch.full(vals.shape, E, dtype=torch.int64) if reduce in _MINMAX else None
        if out is not None:
            return (out, arg) if reduce in _MINMAX else out
        return (vals, arg) if reduce in _MINMAX else vals

    int_src = not (src.is_floating_point() or src.is_complex())
    if out is not None and int_src and reduce in ("sum", "prod"):
        # reduced INTO out: out's values are one more element of each segment (placed first), so that
        # overflow is decided on the exact result, as without out=
        if kind == "segment_coo":
            _check_sorted(idx, d, fn)
        view = [1] * src.dim()
        view[d] = n
        oi = torch.arange(n, dtype=torch.int64).view(view).expand(out.shape)
        src2 = torch.cat([out, src], d)
        idx2 = torch.cat([oi, idx.to(torch.int64)], d)
        vals, _ = _ByIndex(src2, idx2, d, n, fn).reduce("scatter", src2, reduce)
        return out.copy_(vals)

    plan = _ByIndex(src, idx, d, n, fn)
    if reduce == "mean" and out is None and not int_src:
        vals, _ = plan.reduce(kind, src, "mean")
        return vals
    if reduce == "mean" and out is None:
        m, _ = plan.reduce(kind, src, "mean")  # floor, exact
        if kind == "scatter":
            return m
        s, _ = plan.reduce(kind, src, "sum", torch.int64, "wrap")
        return _trunc_mean_exact(m, s, plan.counts(s.shape), src.dtype)
    if reduce == "mean":
        s, _ = plan.reduce(kind, src, "sum", torch.int64 if int_src else None)
        cnt = plan.counts(s.shape)
        if not int_src:
            res = (s + out) / cnt
        else:
            s = _add_exact_int64(s, out.to(torch.int64), fn)
            res = torch.div(s, cnt, rounding_mode="floor" if kind == "scatter" else "trunc")
            info = torch.iinfo(src.dtype)  # out is not counted: (out + sum) / count may leave src.dtype
            if res.numel() and (int(res.min()) < info.min or int(res.max()) > info.max):
                raise OverflowError(f"{fn}: a result ((out + sum) / count) overflows {src.dtype}")
            res = res.to(src.dtype)
        return out.copy_(res)
    vals, arg = plan.reduce(kind, src, reduce, want_arg=not (values_only and out is None))
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
    res = _scatter_like("scatter", "scatter", src, index, dim, out, dim_size, r, values_only=True)
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
    res = _scatter_like("segment_coo", "segment_coo", src, index, -1, out, dim_size, r, values_only=True)
    return res[0] if r in _MINMAX else res


def gather_coo(src: Tensor, index: Tensor, out: Optional[Tensor] = None) -> Tensor:
    """out[..., e, ...] = src[..., index[..., e], ...] along ``index.dim() - 1``."""
    _check_src(src, "gather_coo")
    _check_ids(index, "index", "gather_coo")
    if index.dim() < 1 or index.dim() > src.dim():
        raise ValueError(f"gather_coo: index must have 1 to src.dim() = {src.dim()} dimensions; got {index.dim()}")
    d = index.dim() - 1
    for k in range(d):
        if index.size(k) not in (1, src.size(k)):
            raise ValueError(f"gather_coo: index.size({k}) = {index.size(k)} != src.size({k}) = {src.size(k)}")
    idx = index.to(torch.int64)
    if idx.numel() and not _compiling() and math.prod(_with_size(src.shape, d, idx.size(d))):
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= src.size(d):
            raise ValueError(f"gather_coo: index holds {lo if lo < 0 else hi}, outside [0, {src.size(d)}) "
                             f"(src.size({d}))")
    if not math.prod(_with_size(src.shape, d, idx.size(d))):  # nothing is gathered
        res = _empty_src_zeros(src, d, _with_size(src.shape, d, idx.size(d)))
    elif all(idx.size(k) == 1 for k in range(d)):
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
        _check_src(src, fn)
        _check_ids(indptr, "indptr", fn)
        m = indptr.dim()
        if m < 1 or m > src.dim():
            raise ValueError(f"{fn}: indptr must have 1 to src.dim() = {src.dim()} dimensions; got {m}")
        d = m - 1
        self.d, self.r, self.E = d, src.dim(), src.size(d)
        self.N = max(indptr.size(-1) - 1, 0)
        ip = indptr.expand(list(src.shape[:d]) + [indptr.size(-1)])
        if ip.numel() == 0:
            # a leading dimension of src is 0 (src is empty: nothing is reduced), or indptr holds no
            # offsets (no segment); one line of offsets keeps the plan's shape (N segments), zeros where
            # indptr has none to give
            ip = indptr.new_zeros([1] * d + [indptr.size(-1)]) if indptr.numel() == 0 else \
                indptr.reshape(-1, indptr.size(-1))[:1].reshape([1] * d + [-1])
        self.V = _varying(ip, range(d))
        self.W = [k for k in range(self.r) if k != d and k not in self.V]
        self.perm = self.V + [d] + self.W
        self.P = math.prod(src.size(k) for k in self.V) if self.V else 1
        ipv = ip.permute(self.V + [d] + [k for k in range(d) if k not in self.V])
        ipv = ipv[tuple([slice(None)] * (len(self.V) + 1) + [0] * (d - len(self.V)))]
        self.ip = ipv.reshape(self.P, indptr.size(-1)).to(torch.int64)  # [P, N+1]
        if self.ip.numel() and not _compiling():
            if int(self.ip[:, 0].min()) < 0:
                raise ValueError(f"{fn}: indptr must be non-negative; it holds {int(self.ip[:, 0].min())}")
            if bool((self.ip[:, 1:] < self.ip[:, :-1]).any()):
                raise ValueError(f"{fn}: indptr must be non-decreasing along its last dimension")
        self.direct = False
        if not self.V and not _compiling() and indptr.size(-1):
            p = self.ip[0]
            self.direct = int(p[0]) == 0 and int(p[-1]) == self.E

    def _gap_ptr(self, length) -> Tensor:
        """Offsets of [gap, P x (N segments, gap)] over P concatenated stretches of ``length``."""
        off = torch.arange(self.P, dtype=torch.int64).view(self.P, 1) * length
        z = torch.zeros(1, dtype=torch.int64)
        return torch.cat([z, (self.ip + off).reshape(-1), (torch.ones(1, dtype=torch.int64) * self.P) * length])

    def _covered(self, x: Tensor, reduce: str, stretches: int) -> Tensor:
        """``x`` (``stretches`` stretches of E along dim d) with the elements outside
        ``indptr[0]:indptr[-1]`` of each stretch replaced by the reduction's neutral value, so that
        the gap segments cannot overflow (integers only: only the covered elements take part)."""
        if x.is_floating_point() or reduce not in ("sum", "mean", "prod"):
            return x
        e = torch.arange(self.E, dtype=torch.int64).view(1, self.E)
        if self.ip.size(1):
            keep = ((e >= self.ip[:, :1]) & (e < self.ip[:, -1:])).reshape(-1)  # [stretches * E]
        else:  # no offsets: nothing is covered
            keep = torch.zeros(stretches * self.E, dtype=torch.bool)
        view = [1] * x.dim()
        view[self.d if stretches == 1 and not self.V else 0] = keep.numel()
        return torch.where(keep.view(view), x, torch.ones_like(x) if reduce == "prod" else torch.zeros_like(x))

    def reduce(self, src: Tensor, reduce: str, dtype=None, overflow: str = "raise"):
        d, N = self.d, self.N
        if self.direct:
            return _call("segment_csr", src, self.ip[0], d, reduce, dtype, overflow)
        if not self.V:
            src = self._covered(src, reduce, 1)
            vals, arg = _call("segment_csr", src, self._gap_ptr(self.E), d, reduce, dtype, overflow)
            vals = vals.narrow(d, 1, N).contiguous()
            if reduce in _MINMAX:
                arg = arg.narrow(d, 1, N).contiguous()
            return vals, arg
        sizes_w = [src.size(k) for k in self.W]
        xs = self._covered(src.permute(self.perm).reshape([self.P * self.E] + sizes_w), reduce, self.P)
        vals, arg = _call("segment_csr", xs, self._gap_ptr(self.E), 0, reduce, dtype, overflow)
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
    if plan.ip.numel() and not _compiling() and int(plan.ip[:, -1].max()) > plan.E:
        raise ValueError(f"{fn}: indptr holds {int(plan.ip[:, -1].max())}, past src.size({plan.d}) = {plan.E}")
    if out is not None:
        _check_out(out, shape, src.dtype, fn)
    if src.numel() == 0:
        vals = _empty_src_zeros(src, plan.d, shape)
        arg = torch.full(shape, plan.E, dtype=torch.int64) if reduce in _MINMAX else None
    elif reduce == "mean" and not (src.is_floating_point() or src.is_complex()):
        m, _ = plan.reduce(src, "mean")  # floor, exact
        s, _ = plan.reduce(src, "sum", torch.int64, "wrap")
        vals, arg = _trunc_mean_exact(m, s, plan.counts_like(s.shape), src.dtype), None
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
        res = _empty_src_zeros(src, d, _with_size(src.shape, d, e_out or 0))
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


# ----------------------------------------------------------------------------- composites

def _composite_args(fn: str, src: Tensor, index: Tensor, dim: int, dim_size, float_only: bool):
    """Checked arguments of a composite: (d, index broadcast to src as int64, number of segments)."""
    _check_src(src, fn)
    _check_tensor(index, "index", fn)
    if float_only and not torch.is_floating_point(src):
        raise ValueError(f"{fn}: src must have a floating point dtype (as in torch_scatter); got {src.dtype}")
    if index.dtype.is_floating_point or index.dtype.is_complex or index.dtype == torch.bool:
        raise TypeError(f"{fn}: index must have an integer dtype; got {index.dtype}")
    d = _dim(dim, src, fn)
    idx = _broadcast(index, src, d, "index", fn).to(torch.int64)
    if dim_size is None:
        dim_size = _size_from_index(idx, fn)
    _check_numel(_with_size(src.shape, d, dim_size), fn, "dim_size")
    return d, idx, dim_size


def _out_size(out, src: Tensor, d: int, fn: str) -> int:
    """``out.size(d)``, the number of segments when ``out=`` is given (out checked to be a tensor of
    src's rank; its shape and dtype are checked against the result afterwards)."""
    _check_tensor(out, "out", fn)
    if out.dim() != src.dim():
        raise ValueError(f"{fn}: out has shape {tuple(out.shape)}; expected {src.dim()} dimensions, as src")
    return out.size(d)


def _segment_max(fn: str, src: Tensor, idx: Tensor, d: int, n: int) -> Tensor:
    """The maximum of each segment in one pass, as the composites of torch_scatter take it: NaN skipped
    (torch_scatter's max never picks NaN; mmvref's would propagate it) and -inf for a segment with
    nothing else (torch_scatter starts its maximum at -inf)."""
    mx, arg = _scatter_like("scatter", fn, src.masked_fill(torch.isnan(src), float("-inf")), idx, d, None, n,
                            "max")
    return mx.masked_fill(arg == src.size(d), float("-inf"))


def scatter_softmax(src: Tensor, index: Tensor, dim: int = -1, dim_size: Optional[int] = None) -> Tensor:
    """Softmax of ``src`` within each group of equal ``index`` along ``dim`` (torch_scatter.scatter_softmax):
    exp(src - m) / (sum of exp(src - m) over the group), m the group's maximum. Floating point src only
    (ValueError otherwise); the result has src's shape and dtype. One max pass and one sum pass."""
    fn = "scatter_softmax"
    dim_size = _check_dim_size(dim_size, fn)
    d, idx, n = _composite_args(fn, src, index, dim, dim_size, True)
    e = (src - _segment_max(fn, src, idx, d, n).gather(d, idx)).exp()
    return e / _scatter_like("scatter", fn, e, idx, d, None, n, "sum").gather(d, idx)


def scatter_log_softmax(src: Tensor, index: Tensor, dim: int = -1, eps: float = 1e-12,
                        dim_size: Optional[int] = None) -> Tensor:
    """Log-softmax within each group of equal ``index`` along ``dim`` (torch_scatter.scatter_log_softmax):
    (src - m) - log(eps + sum of exp(src - m) over the group), m the group's maximum. Floating point src
    only. One max pass and one sum pass."""
    fn = "scatter_log_softmax"
    dim_size = _check_dim_size(dim_size, fn)
    d, idx, n = _composite_args(fn, src, index, dim, dim_size, True)
    shifted = src - _segment_max(fn, src, idx, d, n).gather(d, idx)
    total = _scatter_like("scatter", fn, shifted.exp(), idx, d, None, n, "sum")
    return shifted - (total + eps).log().gather(d, idx)


def scatter_logsumexp(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
                      dim_size: Optional[int] = None, eps: float = 1e-12) -> Tensor:
    """log(eps + sum of exp(src)) per index along ``dim``, computed as m + log(eps + sum of exp(src - m)),
    m the segment's maximum (torch_scatter.scatter_logsumexp). Floating point src only.

    As torch_scatter: m skips NaN, a difference src - m that is NaN (a NaN, or -inf in a segment of
    -inf, or +inf) counts as exp(-inf) = 0 (so NaN values take no part), and the result goes through
    ``nan_to_num(neginf=0.0)`` (an empty or all -inf segment gives 0, one holding +inf the dtype's
    largest value). With ``out=`` (dim_size = out.size(dim)) its values take part as one more element
    of each segment (reduced INTO out, as the other scatters), the result is written into ``out`` and
    returned, and where that result is not finite (an empty segment, for one) ``out`` keeps its value:
    torch_scatter's behaviour since 2.1.2 fixed its ``out=`` path (2.1.2 itself wrote 0 there)."""
    fn = "scatter_logsumexp"
    _check_tensor(src, "src", fn)
    dim_size = _check_dim_size(dim_size, fn)
    if out is not None:
        dim_size = _out_size(out, src, _dim(dim, src, fn), fn)
    d, idx, n = _composite_args(fn, src, index, dim, dim_size, True)
    if out is not None:
        _check_out(out, _with_size(src.shape, d, n), src.dtype, fn)
    mx = _segment_max(fn, src, idx, d, n)
    shifted = src - mx.gather(d, idx)
    shifted = shifted.masked_fill(torch.isnan(shifted), float("-inf"))
    total = _scatter_like("scatter", fn, shifted.exp(), idx, d, None, n, "sum")
    if out is None:
        return ((total + eps).log() + mx).nan_to_num(neginf=0.0)
    res = (total + (out - mx).exp() + eps).log() + mx
    return out.copy_(torch.where(res.isfinite(), res, out))


def scatter_std(src: Tensor, index: Tensor, dim: int = -1, out: Optional[Tensor] = None,
                dim_size: Optional[int] = None, unbiased: bool = True) -> Tensor:
    """Standard deviation per index along ``dim`` (torch_scatter.scatter_std):
    sqrt(sum((src - mean)^2) / (c + 1e-6)) with c = max(count - 1, 1) (unbiased) or max(count, 1),
    count the segment's element count along ``dim`` (computed in src's dtype, over ``index`` as given:
    along ``dim``, or along its last dimension when it has no more than ``dim`` dimensions), mean the sum
    over max(count, 1). Two passes over src: the sums, then the squared deviations from the mean
    (numerically stable), and one over ``index`` for the counts. An integer src gives a floating result
    (the default dtype), as in torch_scatter. Where a segment's values are all equal (one element, for
    one) the gradient is 0, as torch.std's (torch_scatter's is NaN there: sqrt's derivative at 0 times 0).
    With ``out=`` (dim_size = out.size(dim)), the squared deviations are summed INTO ``out`` (as
    torch_scatter does: out then holds out + that sum) and the result is a new tensor."""
    fn = "scatter_std"
    _check_tensor(src, "src", fn)
    dim_size = _check_dim_size(dim_size, fn)
    _check_tensor(index, "index", fn)
    d = _dim(dim, src, fn)
    if out is not None:
        dim_size = _out_size(out, src, d, fn)
    if index.dim() < 1:
        raise ValueError(f"{fn}: index must have at least one dimension; got a 0-d tensor")
    count_dim = d if index.dim() > d else index.dim() - 1
    d, idx, n = _composite_args(fn, src, index, d, dim_size, False)
    if out is not None:  # the squared deviations: src's dtype, or the default float dtype for integers
        _check_out(out, _with_size(src.shape, d, n),
                   src.dtype if src.is_floating_point() else torch.get_default_dtype(), fn)
    count = _scatter_like("scatter", fn, torch.ones(index.size(), dtype=src.dtype), index, count_dim, None, n,
                          "sum")
    total = _scatter_like("scatter", fn, src, idx, d, None, n, "sum")
    count = _broadcast(count, total, d, "the counts", fn).clamp(min=1)
    dev = src - (total / count).gather(d, idx)
    sq = _scatter_like("scatter", fn, dev * dev, idx, d, out, n, "sum")
    if unbiased:
        count = (count - 1).clamp(min=1)
    var = sq / (count + 1e-6)
    zero = var == 0  # sqrt's derivative is infinite at 0: take the zero subgradient there, as torch.std does
    return torch.where(zero, torch.zeros_like(var), torch.where(zero, torch.ones_like(var), var).sqrt())
