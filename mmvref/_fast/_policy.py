"""The policy every op family shares, in one place: result dtypes, the overflow decision, and
output delivery (``out=``; torch in -> torch out).

- **Result dtypes** (``result_dtypes``): the project rule (int8/16/32 -> int32, int64 -> int64,
  fp16 -> fp32, fp32/fp64 kept), or ``dtype=`` among int8 ... float64, computed at the rule's
  width (int8/int16 from int32 words, float16 from float32) and narrowed by ``finish``. Ops whose
  kernels write only the four compute dtypes take ``kernel_result_dtype`` (the same parse, limited
  to int32, int64, float32, float64).
- **Overflow**: integer results are exact; a result that leaves its dtype raises
  ``overflow_error`` under overflow="raise", and wraps (two's complement) under "wrap". int64
  values asked for int32 results run at int64 and are narrowed (``narrowing`` / ``narrow``).
- **Delivery**: ``out_buffer`` says when the kernels can write the caller's ``out`` in place;
  ``deliver`` returns the result there (copying only when they could not) or like the input
  (``like_input``: a torch tensor for a torch input); ``needs_torch_op`` sends tensors that
  need autograd to the torch custom ops.

torch is never imported here; a tensor is recognised by its type's module.
"""
from __future__ import annotations

import numpy as np

from .._dtypes import result_dtype
from .._validate import is_tensor, to_numpy

_I32 = np.iinfo(np.int32)
_I64 = np.iinfo(np.int64)

# ----------------------------------------------------------------------------- result dtypes

_ANY_RESULT = tuple(np.dtype(t) for t in ("int8", "int16", "int32", "int64", "float16", "float32", "float64"))


def result_dtypes(x, dtype, op):
    """(compute dtype, final dtype): the project rule, or ``dtype`` computed at the rule's
    width (int8/int16 results from int32 words, float16 from float32) and narrowed."""
    if dtype is None:
        r = result_dtype(x.dtype)
        return r, r
    try:
        if type(dtype).__module__ == "torch" and str(dtype).startswith("torch."):
            dtype = str(dtype)[6:]  # a torch dtype names its numpy twin (bfloat16 has none: refused below)
        if not isinstance(dtype, (str, type, np.dtype)):
            raise TypeError
        fin = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: dtype must be a numpy dtype among "
                        f"{', '.join(map(str, _ANY_RESULT))} (or None), got {dtype!r}") from None
    if fin not in _ANY_RESULT:
        raise TypeError(f"{op}: dtype must be one of {', '.join(map(str, _ANY_RESULT))}, got {fin}")
    if x.dtype.kind == "f" and fin.kind != "f":
        raise TypeError(f"{op}: dtype={fin} cannot hold a result of {x.dtype} values; pass a float dtype")
    if fin.kind == "f":
        return (np.dtype(np.float32) if fin == np.float16 else fin), fin
    if x.dtype == np.int64 or fin == np.int64:
        return np.dtype(np.int64), fin
    return np.dtype(np.int32), fin


def overflow_error(op, dt):
    """The one OverflowError of an integer result that leaves ``dt`` under overflow="raise"."""
    dt = np.dtype(dt)
    return OverflowError(f"{op}: a result overflows {dt}; pass overflow='wrap' for two's-complement wrap-around"
                         + (", or dtype=np.int64" if dt == np.int32 else ", or a wider dtype=" if dt != np.int64
                            else ""))


def finish(res, lo_hi, cdt, fin, overflow, op):
    """``res`` (computed in cdt; for integers its exact int64 range lo_hi, or None when unknown)
    as ``fin``: integers checked against fin's range (raise) or wrapped; floats rounded."""
    if fin == cdt:
        if fin.kind == "i" and overflow == "raise" and lo_hi is not None:
            lim = np.iinfo(fin)
            if lo_hi[0] < lim.min or lo_hi[1] > lim.max:
                raise overflow_error(op, fin)
        return res
    if fin.kind == "i" and overflow == "raise":
        lim = np.iinfo(fin)
        if lo_hi is None and res.size:
            lo_hi = (int(res.min()), int(res.max()))
        if lo_hi is not None and (lo_hi[0] < lim.min or lo_hi[1] > lim.max):
            raise overflow_error(op, fin)
    with np.errstate(over="ignore"):  # float16: beyond its range rounds to inf, like every float cast
        return res.astype(fin)

#: the dtypes the kernels write (every other result dtype is computed at one of these and narrowed)
KERNEL_DTYPES = tuple(np.dtype(t) for t in ("int32", "int64", "float32", "float64"))


def kernel_result_dtype(x, dtype, op):
    """``result_dtypes``'s rule for the ops whose results are only the kernels' dtypes (int32, int64,
    float32, float64): the result dtype, or TypeError naming the ones allowed."""
    if dtype is None:
        return result_dtype(x.dtype)
    _, fin = result_dtypes(x, dtype, op)
    if fin not in KERNEL_DTYPES:
        raise TypeError(f"{op}: dtype must be one of int32, int64, float32, float64, got {fin}")
    return fin


# ----------------------------------------------------------------------------- the overflow decision

def narrowing(x, rdt) -> bool:
    """int64 values asked for int32 results: the kernels' int32 screens assume
    int8/16/32 values, so such calls run at int64 and are narrowed by ``narrow``."""
    return rdt == np.int32 and x.dtype == np.int64


def narrow(fn, op, overflow):
    """The int32 result of ``fn(np.int64)`` (the op at int64, exact or raising on
    an exact int64 overflow): OverflowError when an exact result leaves int32
    under overflow="raise"; else wrapped modulo 2**32 (exact modulo 2**64 words)."""
    try:
        out = fn(np.int64)
    except OverflowError:
        raise overflow_error(op, np.int32) from None  # outside int64, so outside int32
    if overflow == "raise" and out.size and (int(out.min()) < _I32.min or int(out.max()) > _I32.max):
        raise overflow_error(op, np.int32)
    return out.astype(np.int32)


def wrap_int(v, rdt):
    """A Python int wrapped to ``rdt`` (two's complement)."""
    bits = 8 * rdt.itemsize
    v = (int(v) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    return rdt.type(v)


def computed(fn, cdt, fin, op):
    """fn() at the compute dtype; an overflow there is an overflow of the narrower result dtype."""
    try:
        return fn()
    except OverflowError:
        if fin == cdt:
            raise
        raise overflow_error(op, fin) from None


# ----------------------------------------------------------------------------- output delivery

def _native(dt):
    return dt.newbyteorder("=") if dt.byteorder not in "=|" else dt


def check_size(shape, itemsize, what):
    """ValueError naming ``what`` when a result of ``shape`` cannot even be addressed (its byte
    count reaches 2**63: numpy would say only "array is too big" or fail converting the size);
    a size that can be addressed but not allocated gets numpy's MemoryError, which states it."""
    n = 1
    for d in shape:  # numpy refuses the product of the non-zero dimensions, even beside a 0
        n *= int(d) or 1
    if n * itemsize >= 2**63:
        raise ValueError(f"{what}: a result of shape {tuple(int(d) for d in shape)} is more than an array can "
                         "address")


def check_out(out, shape, dtype, name="out"):
    """The caller's own ``out`` array, validated (its shape, dtype in any byte order, writeable): a
    numpy array itself (never a copy: a big-endian or strided ``out`` is written where it is) or a
    torch CPU tensor's numpy view (shared memory). None when ``out`` is None."""
    if out is None:
        return None
    if is_tensor(out):
        o = to_numpy(out, name)
    elif isinstance(out, np.ndarray):
        if isinstance(out, np.ma.MaskedArray):
            raise TypeError(f"{name} is a numpy masked array; pass a plain ndarray")
        o = out.view(np.ndarray) if type(out) is not np.ndarray else out
    else:
        raise TypeError(f"{name} must be an array (or a torch CPU tensor), got {type(out).__name__}")
    if o.shape != tuple(shape):
        raise ValueError(f"{name} has shape {o.shape}, the result has shape {tuple(shape)}")
    if _native(o.dtype) != dtype:
        raise TypeError(f"{name} has dtype {o.dtype}, the result has dtype {dtype}")
    if not o.flags.writeable:
        raise ValueError(f"{name} is read-only")
    return o


def out_buffer(out, shape, cdt, fin, *inputs):
    """Where the kernels write the result directly: the caller's ``out`` (validated here) when it can
    take the kernels' output as it is (the compute dtype is the result dtype, native byte order,
    C-contiguous, not overlapping an input the kernels still read), else None (the result is then
    computed into a new array and copied into ``out`` by ``deliver``)."""
    o = check_out(out, shape, fin)
    if o is None or fin != cdt or o.dtype != cdt or not o.flags.c_contiguous:
        return None
    if any(isinstance(a, np.ndarray) and np.may_share_memory(o, a) for a in inputs):
        return None
    return o


def _same_buffer(a, b):
    return (a.size == b.size and a.flags.c_contiguous and b.flags.c_contiguous
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def deliver(res, out, src):
    """The result as the caller asked: in ``out`` (returned; copied there unless the kernels wrote it
    in place, see ``out_buffer``), or like the input (torch in -> torch out)."""
    if out is not None:
        o = check_out(out, res.shape, res.dtype)
        if not _same_buffer(res, o):
            o[...] = res
        return out
    return like_input(res, src)


def needs_torch_op(*arrays) -> bool:
    """Whether a public op must run as its torch custom op (``mmvref._fast.segment._torch``): a torch
    tensor among ``arrays`` that requires grad under grad mode (the result must carry the
    autograd graph, never come back silently detached), that is being traced by
    torch.compile, or that is not a real CPU tensor (fake/meta tensors hold no data)."""
    for a in arrays:
        if not is_tensor(a):
            continue
        import torch

        if torch.compiler.is_compiling() or (a.requires_grad and torch.is_grad_enabled()):
            return True
        if a.device.type == "meta" or "Fake" in type(a).__name__ or "Functional" in type(a).__name__:
            return True
        if a.dtype == torch.bfloat16:  # numpy has no bfloat16: the torch ops accumulate it in float32
            return True
    return False


def like_input(result, template):
    """Return ``result`` as a torch tensor when ``template`` was one."""
    if not is_tensor(template):
        return result
    import torch

    return torch.from_numpy(np.ascontiguousarray(result))
