"""torch.library custom ops over mmvref's segment reductions and scans, with autograd (issue 17).

Imported only when torch is in use (``mmvref`` itself imports without torch). The ops run the
numpy-level functions of ``mmvref`` on zero-copy views of CPU tensors and wrap the results with
``torch.from_numpy``; a result never aliases an input. Each op has a fake (meta) kernel, so
``torch.compile(fullgraph=True)`` traces through it, and a backward built from these ops and
plain torch ops, so the backward is itself differentiable where that is cheap.

Custom ops (namespace ``mmvref``, CPU; ``dtype=None`` returns ``src.dtype``, else ``dtype``)::

    mmvref::segment_csr(Tensor src, Tensor indptr, int dim, str reduce, ScalarType? dtype=None,
                        str overflow="raise") -> (Tensor out, Tensor arg)
    mmvref::segment_coo(Tensor src, Tensor index, int dim, int dim_size, str reduce,
                        ScalarType? dtype=None, str overflow="raise") -> (Tensor out, Tensor arg)
    mmvref::scatter(Tensor src, Tensor index, int dim, int dim_size, str reduce,
                    ScalarType? dtype=None, str overflow="raise") -> (Tensor out, Tensor arg)
    mmvref::gather_csr(Tensor src, Tensor indptr, int dim, int? size=None) -> Tensor
    mmvref::segmented_sum(Tensor x, Tensor flags, int dim, str reduce, ScalarType? dtype=None,
                          str overflow="raise") -> (Tensor out, Tensor arg)
    mmvref::scan(Tensor x, int dim, bool exclusive, ScalarType? dtype=None, str overflow="raise") -> Tensor
    mmvref::segmented_scan(Tensor x, Tensor flags, int dim, bool exclusive, ScalarType? dtype=None,
                           str overflow="raise") -> Tensor

``reduce`` is "sum", "mean", "min", "max" or "prod" ("add" and "mul" are accepted as aliases).
``arg`` is int64 of ``out``'s shape for min/max (position along ``dim`` in ``src``; ``src.size(dim)``
for an empty segment) and an empty int64 tensor of shape (0,) otherwise. ``dim_size < 0`` means
"index.max() + 1" (0 for an empty index); the output size is then data-dependent (an unbacked size
under torch.compile). ``size`` of gather_csr is the output length along ``dim`` (``indptr[-1]``,
checked); None makes it data-dependent the same way.

dtypes: float16 and bfloat16 accumulate in float32 (bfloat16, which numpy cannot hold, is handed to
the kernels as float32 and the result cast back); integer results that do not fit the result dtype
raise OverflowError (``overflow="wrap"``: wrap around). Integer mean is floor division.

Backward (gradients are returned in ``src``'s dtype):

- sum: the output gradient gathered back to each element (``gather_csr`` / ``index_select``);
- mean: the same divided by the segment's element count;
- min/max: the output gradient routed to the position ``arg`` chose (one element per segment and
  feature; empty segments pass nothing; an empty src or output gets a zero gradient of src's shape);
- prod: for a segment with no zero, ``grad * out / x``; in a segment with exactly one zero, that zero
  gets ``grad * (product of the other elements)`` and the others get 0; a segment with two or more
  zeros passes 0 to every element (the product is 0 whatever any one element is);
- scan: the reverse cumulative sum of the gradient (exclusive: the reverse exclusive scan);
- segmented_scan: within each segment, the suffix sums of the gradient (exclusive: strict suffix);
- gather_csr: segment_csr sum of the gradient (so sum's double backward works).

Routing functions, called by the public numpy-level functions of ``mmvref`` when
``mmvref._fast._policy.needs_torch_op(...)`` is true (a torch input that requires grad under grad mode,
or tracing by torch.compile). Names and argument order follow the public functions; every argument
may be passed by keyword. dtype=None means the project's result dtype (``mmvref._dtypes.result_dtype``:
int8/16/32 -> int32, int64 -> int64, float16 -> float32; bfloat16 stays bfloat16); ``out=`` is
written and returned (a tuple ``(values_out, arg_out)`` or a values tensor with ``return_arg``);
``out=`` together with an input that requires grad under grad mode raises RuntimeError. ``indptr``,
``index`` and ``flags`` take exactly what the plain path takes (tensors, numpy arrays of any byte order,
lists, tuples, ranges, an empty list), normalised once (``_index_arg``) with the plain path's own
checks and error messages; the kernels read an index tensor through ``_io.to_numpy`` as the plain
path does::

    segment_csr(src, indptr, axis=0, reduce="sum", return_arg=False, dtype=None, out=None, overflow="raise")
    segment_coo(src, index, axis=0, dim_size=None, reduce="sum", return_arg=False, dtype=None, out=None,
                overflow="raise")
    scatter(src, index, axis=0, dim_size=None, reduce="sum", return_arg=False, dtype=None, out=None,
            overflow="raise")
    gather_csr(src, indptr, axis=0, out=None)
    segment_sum_csr(x, indptr, axis=0, dtype=None, out=None, overflow="raise")
    segmented_sum(x, flags, axis=0, reduce="sum", return_arg=False, dtype=None, out=None, overflow="raise")
    segmented_scan(x, flags, axis=0, exclusive=False, dtype=None, out=None, overflow="raise")
    scan(x, axis=None, exclusive=False, dtype=None, out=None, overflow="raise")

Each returns a tensor, or ``(values, arg)`` with ``return_arg=True``.
"""
from __future__ import annotations

import math
import functools
from typing import Optional

import numpy as np
import torch
from torch import Tensor


from ..._dtypes import VALUE_DTYPES, result_dtype
from . import _portable_nd as R
from .._policy import needs_torch_op
from ..._validate import to_numpy
from . import _arrays
from .._policy import check_size
from ._arrays import _index as _plain_index
from ..._validate import _asarray, as_flags, as_indptr, check_bool

__all__ = [
    "segment_csr", "segment_coo", "scatter", "gather_csr", "segment_sum_csr", "segmented_sum",
    "segmented_scan", "scan", "needs_op",
]

_REDUCE = {"sum": "sum", "add": "sum", "mean": "mean", "min": "min", "max": "max", "prod": "prod",
           "mul": "prod"}
_ARG_REDUCE = ("min", "max")

_TO_NP = {
    torch.bool: np.dtype(np.bool_), torch.uint8: np.dtype(np.uint8), torch.int8: np.dtype(np.int8),
    torch.int16: np.dtype(np.int16), torch.int32: np.dtype(np.int32), torch.int64: np.dtype(np.int64),
    torch.float16: np.dtype(np.float16), torch.float32: np.dtype(np.float32),
    torch.float64: np.dtype(np.float64), torch.bfloat16: np.dtype(np.float32),
}
_FROM_NP = {v: k for k, v in _TO_NP.items() if k is not torch.bfloat16}
#: the project's dtype rule (``mmvref._dtypes.result_dtype``) between torch dtypes, derived once here so
#: that torch.compile traces a lookup of torch dtypes only (Dynamo cannot trace numpy dtype objects)
_RULE = {t: _FROM_NP[result_dtype(d)] for t, d in _TO_NP.items() if t is not torch.bfloat16 and d in VALUE_DTYPES}


def _reduce(reduce) -> str:
    try:
        return _REDUCE[reduce]
    except (KeyError, TypeError):
        raise ValueError(f"reduce must be 'sum', 'mean', 'min', 'max' or 'prod' ('add' and 'mul' are "
                         f"aliases); got {reduce!r}") from None


def _dim(dim: int, ndim: int, name: str = "dim") -> int:
    if ndim == 0:
        raise ValueError(f"the segment ops take tensors of rank >= 1; got a 0-d tensor ({name}={dim})")
    if not -ndim <= dim < ndim:
        raise IndexError(f"{name}={dim} is out of range for a tensor of rank {ndim}")
    return dim % ndim


def needs_op(*tensors) -> bool:
    """True when the custom op (rather than the plain kernel) must run: torch.compile is tracing, or
    grad mode is on and a tensor input requires grad."""
    if torch.compiler.is_compiling():
        return True
    return torch.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in tensors)


# ----------------------------------------------------------------------------- kernel plumbing

def _np_in(t: Tensor) -> np.ndarray:
    """A zero-copy numpy view of ``t`` (detached, contiguous; bfloat16 as float32)."""
    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    return t.resolve_conj().resolve_neg().contiguous().numpy()


def _np_dtype(td: torch.dtype) -> np.dtype:
    try:
        return _TO_NP[td]
    except KeyError:
        raise TypeError(f"unsupported dtype {td} for the mmvref segment ops") from None


def _wrap(res, inputs, td: torch.dtype) -> Tensor:
    """``res`` as a fresh tensor of dtype ``td`` (a copy where it would share memory with an input)."""
    res = np.asarray(res)
    if (not res.flags.c_contiguous or not res.flags.writeable
            or any(np.may_share_memory(res, a) for a in inputs)):
        res = np.array(res, order="C", copy=True)
    t = torch.from_numpy(res)
    return t if t.dtype == td else t.to(td)


def _empty_arg() -> Tensor:
    return torch.empty((0,), dtype=torch.int64)


def _out_shape(src: Tensor, dim: int, n) -> list:
    shape = list(src.shape)
    shape[dim] = n
    return shape


# ----------------------------------------------------------------------------- segment_csr

def _segment_csr_kernel(src: Tensor, indptr: Tensor, dim: int, reduce: str,
                        dtype: Optional[torch.dtype] = None, overflow: str = "raise") -> tuple[Tensor, Tensor]:
    r = _reduce(reduce)
    _dim(dim, src.dim())
    td = src.dtype if dtype is None else dtype
    s, p = _np_in(src), to_numpy(indptr, "indptr")
    res = _arrays.segment_csr(s, p, axis=dim, reduce=r, return_arg=r in _ARG_REDUCE, dtype=_np_dtype(td),
                             overflow=overflow)
    if r in _ARG_REDUCE:
        return _wrap(res[0], (s, p), td), _wrap(res[1], (s, p), torch.int64)
    return _wrap(res, (s, p), td), _empty_arg()


@torch.library.custom_op("mmvref::segment_csr", mutates_args=(), device_types="cpu")
def _segment_csr_op(src: Tensor, indptr: Tensor, dim: int, reduce: str, dtype: Optional[torch.dtype] = None,
                    overflow: str = "raise") -> tuple[Tensor, Tensor]:
    return _segment_csr_kernel(src, indptr, dim, reduce, dtype, overflow)


@_segment_csr_op.register_fake
def _(src, indptr, dim, reduce, dtype=None, overflow="raise"):
    r = _reduce(reduce)
    d = _dim(dim, src.dim())
    if indptr.dim() != 1:
        raise ValueError(f"indptr must be 1-D; got shape {tuple(indptr.shape)}")
    shape = _out_shape(src, d, max(indptr.shape[0] - 1, 0))
    out = src.new_empty(shape, dtype=src.dtype if dtype is None else dtype)
    arg = src.new_empty(shape, dtype=torch.int64) if r in _ARG_REDUCE else src.new_empty((0,), dtype=torch.int64)
    return out, arg


def _csr_counts(indptr: Tensor, ndim: int, dim: int) -> Tensor:
    """Element count of each segment (at least 1), shaped to broadcast along ``dim``."""
    ip = indptr.to(torch.int64)
    cnt = (ip[1:] - ip[:-1]).clamp(min=1)
    shape = [1] * ndim
    shape[dim] = cnt.shape[0]
    return cnt.view(shape)


def _route_arg(grad: Tensor, arg: Tensor, dim: int, E: int) -> Tensor:
    """Gradient of min/max: ``grad`` placed at the positions ``arg`` chose (arg == E: dropped).
    Real CPU float32/float64 gradients outside a differentiable backward take a parallel kernel
    (torch's scatter into the E-long zeros measured ~15x the forward); the rest (traced, fake,
    other devices or dtypes, create_graph=True) torch's differentiable scatter."""
    shape = list(grad.shape)
    if (grad.device.type == "cpu" and grad.dtype in (torch.float32, torch.float64)
            and not needs_torch_op(grad, arg)):
        shape[dim] = E
        # numpy's zeros come from calloc (pages zeroed lazily, huge pages where the OS allows):
        # torch.zeros writes every page first, which measured 8x this kernel
        out = np.zeros(shape, dtype=_TO_NP[grad.dtype])
        if out.size and grad.numel():  # else nothing to route (and no -1 a reshape could resolve)
            B = math.prod(shape[:dim])
            F = math.prod(shape[dim + 1:])
            R.route_arg(grad.contiguous().numpy().reshape(B, grad.shape[dim], F),
                        arg.contiguous().numpy().reshape(B, grad.shape[dim], F), out.reshape(B, E, F))
        return torch.from_numpy(out)
    shape[dim] = E + 1
    return grad.new_zeros(shape).scatter(dim, arg, grad).narrow(dim, 0, E)


def _div_counts(grad: Tensor, cnt: Tensor) -> Tensor:
    if grad.dtype in (torch.float16, torch.bfloat16):
        return (grad.float() / cnt).to(grad.dtype)
    return grad / cnt


def _prod_grad(grad: Tensor, out: Tensor, x: Tensor, reduce_fn, gather_fn) -> Tensor:
    """Gradient of a product reduction (see the module docstring).

    ``reduce_fn(t, reduce)`` reduces ``t`` segment-wise like the forward op, ``gather_fn(t)`` brings a
    per-segment tensor back to the elements."""
    x = x.to(grad.dtype)
    zero = x == 0
    zcount = gather_fn(reduce_fn(zero.to(grad.dtype), "sum"))
    nonzero_prod = reduce_fn(torch.where(zero, torch.ones_like(x), x), "prod")
    safe_x = torch.where(zero, torch.ones_like(x), x)
    no_zero = gather_fn(grad * out.to(grad.dtype)) / safe_x
    one_zero = gather_fn(grad * nonzero_prod)
    return torch.where(zcount == 0, no_zero,
                       torch.where(zero & (zcount == 1), one_zero, torch.zeros_like(no_zero)))


def _csr_grad(grad, indptr, arg, src, out, dim, reduce, E):
    if reduce == "sum":
        return _gather_csr_op(grad, indptr, dim, E)
    if reduce == "mean":
        return _gather_csr_op(_div_counts(grad, _csr_counts(indptr, grad.dim(), dim)), indptr, dim, E)
    if reduce in _ARG_REDUCE:
        return _route_arg(grad, arg, dim, E)
    return _prod_grad(grad, out, src,
                      lambda t, r: _segment_csr_op(t, indptr, dim, r)[0],
                      lambda t: _gather_csr_op(t, indptr, dim, E))


def _segment_csr_setup(ctx, inputs, output):
    src, indptr, dim, reduce = inputs[:4]
    ctx.dim = _dim(dim, src.dim())
    ctx.reduce = _reduce(reduce)
    ctx.src_dtype = src.dtype
    ctx.E = src.shape[ctx.dim]
    prod = ctx.reduce == "prod"
    ctx.save_for_backward(indptr, output[1], src if prod else None, output[0] if prod else None)


def _segment_csr_backward(ctx, grad, _grad_arg):
    if not ctx.needs_input_grad[0]:
        return None, None, None, None, None, None
    indptr, arg, src, out = ctx.saved_tensors
    g = _csr_grad(grad, indptr, arg, src, out, ctx.dim, ctx.reduce, ctx.E)
    return g.to(ctx.src_dtype), None, None, None, None, None


_segment_csr_op.register_autograd(_segment_csr_backward, setup_context=_segment_csr_setup)


# ----------------------------------------------------------------------------- gather_csr

def _gather_csr_kernel(src: Tensor, indptr: Tensor, dim: int, size: Optional[int] = None) -> Tensor:
    _dim(dim, src.dim())
    half = src.dtype in (torch.float16, torch.bfloat16)  # a pure copy: moved as 16-bit integers, bit for bit
    s, p = _np_in(src.detach().view(torch.int16) if half else src), to_numpy(indptr, "indptr")
    if size is not None and p.size and int(p[-1]) != size:
        raise ValueError(f"indptr[-1] = {int(p[-1])} does not match the output length {size}")
    res = _arrays.gather_csr(s, p, axis=dim)
    if half:
        return _wrap(res, (s, p), torch.int16).view(src.dtype)
    return _wrap(res, (s, p), src.dtype)


@torch.library.custom_op("mmvref::gather_csr", mutates_args=(), device_types="cpu")
def _gather_csr_op(src: Tensor, indptr: Tensor, dim: int, size: Optional[int] = None) -> Tensor:
    return _gather_csr_kernel(src, indptr, dim, size)


@_gather_csr_op.register_fake
def _(src, indptr, dim, size=None):
    d = _dim(dim, src.dim())
    n = torch.library.get_ctx().new_dynamic_size() if size is None else size
    return src.new_empty(_out_shape(src, d, n))


def _gather_csr_setup(ctx, inputs, output):
    src, indptr, dim = inputs[:3]
    ctx.dim = _dim(dim, src.dim())
    ctx.save_for_backward(indptr)


def _gather_csr_backward(ctx, grad):
    if not ctx.needs_input_grad[0]:
        return None, None, None, None
    (indptr,) = ctx.saved_tensors
    return _segment_csr_op(grad, indptr, ctx.dim, "sum")[0], None, None, None


_gather_csr_op.register_autograd(_gather_csr_backward, setup_context=_gather_csr_setup)


# ----------------------------------------------------------------------------- scatter / segment_coo

def _index_kernel(fn, src, index, dim, dim_size, reduce, dtype=None, overflow="raise", want_arg=True):
    """``fn`` (scatter or segment_coo of numpy arrays) on torch tensors: (values, arg), arg empty
    unless min/max; ``want_arg=False`` (a direct kernel call, no autograd to feed) skips min/max's
    positions: the same values, without the position arrays (4-7x faster at E = 4e5, F = 128)."""
    r = _reduce(reduce)
    _dim(dim, src.dim())
    td = src.dtype if dtype is None else dtype
    s, i = _np_in(src), to_numpy(index, "index")
    with_arg = r in _ARG_REDUCE and want_arg
    res = fn(s, i, axis=dim, dim_size=None if dim_size < 0 else dim_size, reduce=r,
             return_arg=with_arg, dtype=_np_dtype(td), overflow=overflow)
    if with_arg:
        return _wrap(res[0], (s, i), td), _wrap(res[1], (s, i), torch.int64)
    return _wrap(res, (s, i), td), _empty_arg()


def _index_fake(src, index, dim, dim_size, reduce, dtype=None, overflow="raise"):
    r = _reduce(reduce)
    d = _dim(dim, src.dim())
    if index.dim() != 1:
        raise ValueError(f"index must be 1-D; got shape {tuple(index.shape)}")
    n = torch.library.get_ctx().new_dynamic_size() if dim_size < 0 else dim_size
    shape = _out_shape(src, d, n)
    out = src.new_empty(shape, dtype=src.dtype if dtype is None else dtype)
    arg = src.new_empty(shape, dtype=torch.int64) if r in _ARG_REDUCE else src.new_empty((0,), dtype=torch.int64)
    return out, arg


@torch.library.custom_op("mmvref::scatter", mutates_args=(), device_types="cpu")
def _scatter_op(src: Tensor, index: Tensor, dim: int, dim_size: int, reduce: str,
                dtype: Optional[torch.dtype] = None, overflow: str = "raise") -> tuple[Tensor, Tensor]:
    return _index_kernel(_arrays.scatter, src, index, dim, dim_size, reduce, dtype, overflow)


@torch.library.custom_op("mmvref::segment_coo", mutates_args=(), device_types="cpu")
def _segment_coo_op(src: Tensor, index: Tensor, dim: int, dim_size: int, reduce: str,
                    dtype: Optional[torch.dtype] = None, overflow: str = "raise") -> tuple[Tensor, Tensor]:
    return _index_kernel(_arrays.segment_coo, src, index, dim, dim_size, reduce, dtype, overflow)


_scatter_op.register_fake(_index_fake)
_segment_coo_op.register_fake(_index_fake)


def _index_counts(index: Tensor, n: int, ndim: int, dim: int) -> Tensor:
    """Positions per id (at least 1), shaped to broadcast along ``dim``."""
    if needs_torch_op(index) or index.device.type != "cpu":  # traced or fake: torch's differentiable ops
        cnt = torch.zeros(n, dtype=torch.int64).index_add(0, index, torch.ones_like(index)).clamp(min=1)
    else:  # a real CPU index: numpy's count (no E-long tensor of ones: 25 against 57 ms at 1e7)
        cnt = torch.from_numpy(np.bincount(index.numpy(), minlength=n)).clamp_(min=1)
    shape = [1] * ndim
    shape[dim] = n
    return cnt.view(shape)


def _index_grad(op, grad, index, arg, src, out, dim, reduce, E):
    """Backward of a reduction by segment ids ``index`` (1-D int64, any order)."""
    n = grad.shape[dim]
    if reduce == "sum":
        return grad.index_select(dim, index)
    if reduce == "mean":
        return _div_counts(grad, _index_counts(index, n, grad.dim(), dim)).index_select(dim, index)
    if reduce in _ARG_REDUCE:
        return _route_arg(grad, arg, dim, E)
    return _prod_grad(grad, out, src,
                      lambda t, r: op(t, index, dim, n, r)[0],
                      lambda t: t.index_select(dim, index))


def _index_setup(ctx, inputs, output):
    src, index, dim, _dim_size, reduce = inputs[:5]
    ctx.dim = _dim(dim, src.dim())
    ctx.reduce = _reduce(reduce)
    ctx.src_dtype = src.dtype
    ctx.E = src.shape[ctx.dim]
    prod = ctx.reduce == "prod"
    ctx.save_for_backward(index, output[1], src if prod else None, output[0] if prod else None)


def _make_index_backward(op):
    def backward(ctx, grad, _grad_arg):
        if not ctx.needs_input_grad[0]:
            return None, None, None, None, None, None, None
        index, arg, src, out = ctx.saved_tensors
        g = _index_grad(op, grad, index.to(torch.int64), arg, src, out, ctx.dim, ctx.reduce, ctx.E)
        return g.to(ctx.src_dtype), None, None, None, None, None, None
    return backward


_scatter_op.register_autograd(_make_index_backward(_scatter_op), setup_context=_index_setup)
_segment_coo_op.register_autograd(_make_index_backward(_segment_coo_op), setup_context=_index_setup)


# ----------------------------------------------------------------------------- segmented_sum (flags)

def _segment_ids(flags: Tensor) -> Tensor:
    """Segment id of each position (flags mark starts; position 0 always starts one)."""
    f = flags.to(torch.int64)
    if f.shape[0]:
        f = torch.cat([f.new_zeros(1), (f[1:] != 0).to(torch.int64)])
    return torch.cumsum(f, 0)


@torch.library.custom_op("mmvref::segmented_sum", mutates_args=(), device_types="cpu")
def _segmented_sum_op(x: Tensor, flags: Tensor, dim: int, reduce: str, dtype: Optional[torch.dtype] = None,
                      overflow: str = "raise") -> tuple[Tensor, Tensor]:
    r = _reduce(reduce)
    _dim(dim, x.dim())
    td = x.dtype if dtype is None else dtype
    s, f = _np_in(x), to_numpy(flags, "flags")
    res = _arrays.segmented_sum(s, f, axis=dim, reduce=r, return_arg=r in _ARG_REDUCE, dtype=_np_dtype(td),
                               overflow=overflow)
    if r in _ARG_REDUCE:
        return _wrap(res[0], (s, f), td), _wrap(res[1], (s, f), torch.int64)
    return _wrap(res, (s, f), td), _empty_arg()


@_segmented_sum_op.register_fake
def _(x, flags, dim, reduce, dtype=None, overflow="raise"):
    r = _reduce(reduce)
    d = _dim(dim, x.dim())
    shape = _out_shape(x, d, torch.library.get_ctx().new_dynamic_size())
    out = x.new_empty(shape, dtype=x.dtype if dtype is None else dtype)
    arg = x.new_empty(shape, dtype=torch.int64) if r in _ARG_REDUCE else x.new_empty((0,), dtype=torch.int64)
    return out, arg


def _segmented_sum_setup(ctx, inputs, output):
    x, flags, dim, reduce = inputs[:4]
    ctx.dim = _dim(dim, x.dim())
    ctx.reduce = _reduce(reduce)
    ctx.src_dtype = x.dtype
    ctx.E = x.shape[ctx.dim]
    prod = ctx.reduce == "prod"
    ctx.save_for_backward(_segment_ids(flags), output[1], x if prod else None, output[0] if prod else None)


def _segmented_sum_backward(ctx, grad, _grad_arg):
    if not ctx.needs_input_grad[0]:
        return None, None, None, None, None, None
    ids, arg, x, out = ctx.saved_tensors
    g = _index_grad(_segment_coo_op, grad, ids, arg, x, out, ctx.dim, ctx.reduce, ctx.E)
    return g.to(ctx.src_dtype), None, None, None, None, None


_segmented_sum_op.register_autograd(_segmented_sum_backward, setup_context=_segmented_sum_setup)


# ----------------------------------------------------------------------------- scans

@torch.library.custom_op("mmvref::scan", mutates_args=(), device_types="cpu")
def _scan_op(x: Tensor, dim: int, exclusive: bool = False, dtype: Optional[torch.dtype] = None,
             overflow: str = "raise") -> Tensor:
    _dim(dim, x.dim())
    td = x.dtype if dtype is None else dtype
    s = _np_in(x)
    res = _arrays.scan(s, axis=dim, exclusive=exclusive, dtype=_np_dtype(td), overflow=overflow)
    return _wrap(res, (s,), td)


@_scan_op.register_fake
def _(x, dim, exclusive=False, dtype=None, overflow="raise"):
    _dim(dim, x.dim())
    return x.new_empty(x.shape, dtype=x.dtype if dtype is None else dtype)


def _scan_setup(ctx, inputs, output):
    x, dim, exclusive = inputs[:3]
    ctx.dim = _dim(dim, x.dim())
    ctx.exclusive = bool(exclusive)
    ctx.src_dtype = x.dtype


def _scan_backward(ctx, grad):
    if not ctx.needs_input_grad[0]:
        return None, None, None, None, None
    d = ctx.dim
    g = _scan_op(grad.flip(d), d, ctx.exclusive).flip(d)
    return g.to(ctx.src_dtype), None, None, None, None


_scan_op.register_autograd(_scan_backward, setup_context=_scan_setup)


@torch.library.custom_op("mmvref::segmented_scan", mutates_args=(), device_types="cpu")
def _segmented_scan_op(x: Tensor, flags: Tensor, dim: int, exclusive: bool = False,
                       dtype: Optional[torch.dtype] = None, overflow: str = "raise") -> Tensor:
    _dim(dim, x.dim())
    td = x.dtype if dtype is None else dtype
    s, f = _np_in(x), to_numpy(flags, "flags")
    res = _arrays.segmented_scan(s, f, axis=dim, exclusive=exclusive, dtype=_np_dtype(td), overflow=overflow)
    return _wrap(res, (s, f), td)


@_segmented_scan_op.register_fake
def _(x, flags, dim, exclusive=False, dtype=None, overflow="raise"):
    _dim(dim, x.dim())
    return x.new_empty(x.shape, dtype=x.dtype if dtype is None else dtype)


def _reversed_flags(flags: Tensor) -> Tensor:
    """Start flags of the reversed sequence: position i of the reversal starts a segment where
    position E-1-i of the original ends one."""
    f = flags != 0
    if f.shape[0] == 0:
        return f.to(torch.uint8)
    ends = torch.cat([f[1:], f.new_ones(1)])
    return ends.flip(0).to(torch.uint8)


def _segmented_scan_setup(ctx, inputs, output):
    x, flags, dim, exclusive = inputs[:4]
    ctx.dim = _dim(dim, x.dim())
    ctx.exclusive = bool(exclusive)
    ctx.src_dtype = x.dtype
    ctx.save_for_backward(_reversed_flags(flags))


def _segmented_scan_backward(ctx, grad):
    if not ctx.needs_input_grad[0]:
        return None, None, None, None, None, None
    (rflags,) = ctx.saved_tensors
    d = ctx.dim
    g = _segmented_scan_op(grad.flip(d), rflags, d, ctx.exclusive).flip(d)
    return g.to(ctx.src_dtype), None, None, None, None, None


_segmented_scan_op.register_autograd(_segmented_scan_backward, setup_context=_segmented_scan_setup)


#: the custom ops by name (``torch.ops.mmvref.<name>`` is the same op)
OPS = {
    "segment_csr": _segment_csr_op, "gather_csr": _gather_csr_op, "scatter": _scatter_op,
    "segment_coo": _segment_coo_op, "segmented_sum": _segmented_sum_op, "scan": _scan_op,
    "segmented_scan": _segmented_scan_op,
}

#: the CPU kernels the ops run, callable directly where no autograd or tracing is involved
KERNELS = {
    "segment_csr": _segment_csr_kernel, "gather_csr": _gather_csr_kernel,
    "scatter": functools.partial(_index_kernel, _arrays.scatter),
    "segment_coo": functools.partial(_index_kernel, _arrays.segment_coo),
}


# ----------------------------------------------------------------------------- routing (public API)

def _values_arg(a, name: str) -> Tensor:
    """The values argument of a routed public function: a tensor of rank >= 1 (the plain path's own
    check and message, ``segreduce.values_nd``)."""
    t = _as_tensor(a, name)
    if t.dim() == 0:
        raise ValueError(f"{name} must be at least 1-D, got a scalar")
    return t


def _as_tensor(a, name: str) -> Tensor:
    if isinstance(a, Tensor):
        return a
    try:
        return torch.as_tensor(np.asarray(a))
    except (TypeError, ValueError, RuntimeError) as e:
        raise TypeError(f"{name} must be an array or a tensor; got {type(a).__name__}") from e


def _plain_check(kind: str, a: np.ndarray, name: str) -> None:
    """Run the plain path's own check of argument ``kind`` on ``a`` (it raises for every array this module
    cannot hand on as it is, so the error is the plain path's, word for word)."""
    if kind == "indptr":
        as_indptr(a, name, check_order=False)
    else:
        _plain_index(a, a.shape[0] if a.ndim == 1 else 0, None, name)


def _index_arg(a, name: str, kind: str) -> Tensor:
    """``indptr`` (kind "indptr"), ``index`` ("index") or ``flags`` ("flags") of a routed function as a
    tensor, normalised once, here, exactly as the plain (numpy) path normalises it: a tensor is taken as
    it is (the kernels read it through ``_io.to_numpy``, the plain path's boundary, so its dtype errors
    are the plain path's too); anything else goes through ``_validate._asarray`` (numpy arrays of any
    byte order in native order, an empty list as int64 ids or uint8 flags, lists and tuples through
    ``np.asarray``, the same TypeError/ValueError for the rest), flags through ``_validate.as_flags``
    (a list of 0/1 ints becomes uint8). A non-integer index/indptr raises the plain path's error."""
    if isinstance(a, Tensor):
        return a
    if torch.compiler.is_compiling():
        # Dynamo traces torch.as_tensor and np.asarray, not the checks below (it has turned a numpy
        # array into a tensor already; a list of Python ints is a constant of the graph)
        if isinstance(a, (list, tuple, range)) and len(a) == 0:
            return torch.zeros(0, dtype=torch.uint8 if kind == "flags" else torch.int64)
        return _as_tensor(a, name)
    if kind == "flags":
        f = _asarray(a, name, empty_dtype=np.uint8)
        arr = as_flags(a, f.shape[0] if f.ndim == 1 else -1, name, check_values=False)  # the list rule
    else:
        arr = _asarray(a, name, empty_dtype=np.int64)
        if arr.dtype.kind not in "iu":
            _plain_check(kind, arr, name)
            raise TypeError(f"{name} must have an integer dtype, got {arr.dtype}")  # not reached
    if not (arr.flags.c_contiguous and arr.flags.writeable):
        arr = np.array(arr, order="C")  # torch.from_numpy takes neither strides it lacks nor read-only memory
    return torch.from_numpy(arr)


def _result_torch_dtype(src: Tensor, dtype, op: str) -> torch.dtype:
    if dtype is not None:
        if isinstance(dtype, torch.dtype):
            return dtype
        try:
            return _FROM_NP[np.dtype(dtype)]
        except (KeyError, TypeError):
            raise TypeError(f"{op}: unsupported dtype {dtype!r}") from None
    if src.dtype == torch.bfloat16:
        return torch.bfloat16
    if src.dtype not in _RULE:
        raise TypeError(f"{op}: unsupported value dtype {src.dtype}")
    return _RULE[src.dtype]


def _check_out_grad(out, op: str, *inputs) -> None:
    if out is None:
        return
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if torch.is_grad_enabled() and any(isinstance(t, Tensor) and t.requires_grad for t in (*inputs, *outs)):
        raise RuntimeError(f"mmvref.{op}(): functions with out=... arguments don't support automatic "
                           f"differentiation, but one of the arguments requires grad; call it without out= "
                           f"(or under torch.no_grad())")


def _write_out(out, res: Tensor, op: str, name: str = "out") -> Tensor:
    if not isinstance(out, Tensor):
        raise TypeError(f"mmvref.{op}(): {name} must be a torch tensor when the inputs are tensors; "
                        f"got {type(out).__name__}")
    if tuple(out.shape) != tuple(res.shape):
        raise ValueError(f"mmvref.{op}(): {name} has shape {tuple(out.shape)}; the result has shape "
                         f"{tuple(res.shape)}")
    if out.dtype != res.dtype:
        raise TypeError(f"mmvref.{op}(): {name} has dtype {out.dtype}; the result has dtype {res.dtype}")
    out.copy_(res)
    return out


def _finish(res, arg, return_arg: bool, out, op: str):
    if out is None:
        return (res, arg) if return_arg else res
    if return_arg:
        if isinstance(out, (tuple, list)):
            if len(out) != 2:
                raise ValueError(f"mmvref.{op}(): out must be a tensor or a pair (values, arg) with return_arg")
            return _write_out(out[0], res, op, "out[0]"), _write_out(out[1], arg, op, "out[1]")
        return _write_out(out, res, op), arg
    return _write_out(out, res, op)


def _check_return_arg(reduce: str, return_arg, op: str) -> bool:
    if not isinstance(return_arg, (bool, np.bool_)):
        raise TypeError(f"mmvref.{op}(): return_arg must be a bool; got {type(return_arg).__name__}")
    if return_arg and reduce not in _ARG_REDUCE:
        raise ValueError(f"mmvref.{op}(): return_arg=True needs reduce='min' or 'max'; got {reduce!r}")
    return bool(return_arg)


def _axis(axis, op: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"mmvref.{op}(): axis must be an int; got {type(axis).__name__}")
    return int(axis)


def segment_csr(src, indptr, axis=0, reduce="sum", return_arg=False, dtype=None, out=None, overflow="raise"):
    """Routed ``mmvref.segment_csr`` (see the module docstring)."""
    r = _reduce(reduce)
    return_arg = _check_return_arg(r, return_arg, "segment_csr")
    src, indptr = _values_arg(src, "src"), _index_arg(indptr, "indptr", "indptr")
    _check_out_grad(out, "segment_csr", src)
    td = _result_torch_dtype(src, dtype, "segment_csr")
    res, arg = _segment_csr_op(src, indptr, _axis(axis, "segment_csr"), r, td, overflow)
    return _finish(res, arg, return_arg, out, "segment_csr")


def segment_sum_csr(x, indptr, axis=0, dtype=None, out=None, overflow="raise"):
    """Routed ``mmvref.segment_sum_csr``: ``segment_csr`` with reduce="sum"."""
    _values_arg(x, "x")  # the values are named x here
    return segment_csr(x, indptr, axis, "sum", False, dtype, out, overflow)


def _index_route(op, name, src, index, axis, dim_size, reduce, return_arg, dtype, out, overflow):
    r = _reduce(reduce)
    return_arg = _check_return_arg(r, return_arg, name)
    src, index = _values_arg(src, "src"), _index_arg(index, "index", "index")
    _check_out_grad(out, name, src)
    td = _result_torch_dtype(src, dtype, name)
    if dim_size is None:
        ds = -1
    elif isinstance(dim_size, bool) or not isinstance(dim_size, (int, np.integer)) or dim_size < 0:
        raise ValueError(f"mmvref.{name}(): dim_size must be a non-negative int or None; got {dim_size!r}")
    else:
        ds = int(dim_size)
    res, arg = op(src, index, _axis(axis, name), ds, r, td, overflow)
    return _finish(res, arg, return_arg, out, name)


def segment_coo(src, index, axis=0, dim_size=None, reduce="sum", return_arg=False, dtype=None, out=None,
                overflow="raise"):
    """Routed ``mmvref.segment_coo`` (see the module docstring)."""
    return _index_route(_segment_coo_op, "segment_coo", src, index, axis, dim_size, reduce, return_arg, dtype,
                        out, overflow)


def scatter(src, index, axis=0, dim_size=None, reduce="sum", return_arg=False, dtype=None, out=None,
            overflow="raise"):
    """Routed ``mmvref.scatter`` (see the module docstring)."""
    return _index_route(_scatter_op, "scatter", src, index, axis, dim_size, reduce, return_arg, dtype, out,
                        overflow)


def gather_csr(src, indptr, axis=0, out=None):
    """Routed ``mmvref.gather_csr``: out[indptr[n]:indptr[n+1]] = src[n] along ``axis`` (dtype kept)."""
    src, indptr = _values_arg(src, "src"), _index_arg(indptr, "indptr", "indptr")
    _check_out_grad(out, "gather_csr", src)
    if type(indptr) is Tensor and not torch.compiler.is_compiling():
        # the plain path's checks of the offsets and of the output's size, before the op (whose fake
        # implementation would allocate indptr[-1] positions)
        ip = as_indptr(to_numpy(indptr, "indptr"), "indptr")
        shape = list(src.shape)
        shape[_dim(_axis(axis, "gather_csr"), src.dim())] = int(ip[-1])
        check_size(shape, src.element_size(), f"indptr (indptr[-1] = {int(ip[-1])} sets the output length)")
    size = None
    if type(indptr) is Tensor and indptr.dim() == 1 and indptr.numel() and not torch.compiler.is_compiling():
        size = int(indptr[-1])  # a real tensor: the output length is known here, not data-dependent
    res = _gather_csr_op(src, indptr, _axis(axis, "gather_csr"), size)
    return _finish(res, None, False, out, "gather_csr")


def segmented_sum(x, flags, axis=0, reduce="sum", return_arg=False, dtype=None, out=None, overflow="raise"):
    """Routed ``mmvref.segmented_sum`` (flags mark segment starts along ``axis``)."""
    r = _reduce(reduce)
    return_arg = _check_return_arg(r, return_arg, "segmented_sum")
    x, flags = _values_arg(x, "x"), _index_arg(flags, "flags", "flags")
    _check_out_grad(out, "segmented_sum", x)
    td = _result_torch_dtype(x, dtype, "segmented_sum")
    res, arg = _segmented_sum_op(x, flags, _axis(axis, "segmented_sum"), r, td, overflow)
    return _finish(res, arg, return_arg, out, "segmented_sum")


def segmented_scan(x, flags, axis=0, exclusive=False, dtype=None, out=None, overflow="raise"):
    """Routed ``mmvref.segmented_scan``."""
    x, flags = _values_arg(x, "x"), _index_arg(flags, "flags", "flags")
    _check_out_grad(out, "segmented_scan", x)
    td = _result_torch_dtype(x, dtype, "segmented_scan")
    res = _segmented_scan_op(x, flags, _axis(axis, "segmented_scan"), check_bool(exclusive, "exclusive"), td,
                             overflow)
    return _finish(res, None, False, out, "segmented_scan")


def scan(x, axis=None, exclusive=False, dtype=None, out=None, overflow="raise"):
    """Routed ``mmvref.scan``: axis=None scans the flattened input (like np.cumsum)."""
    x = _values_arg(x, "x")
    _check_out_grad(out, "scan", x)
    td = _result_torch_dtype(x, dtype, "scan")
    if axis is None:
        x, d = x.reshape(-1), 0
    else:
        d = _axis(axis, "scan")
    res = _scan_op(x, d, check_bool(exclusive, "exclusive"), td, overflow)
    return _finish(res, None, False, out, "scan")
