"""Input validation shared by the golden model and the fast ops.

Every error names the argument it is about, and says what was expected and
what was given. TypeError for a wrong kind of thing (dtype, type), ValueError
for a wrong value (shape, length, contents).
"""
from __future__ import annotations

import operator

import numpy as np

from ._dtypes import FLAG_DTYPES, VALUE_DTYPES

__all__ = [
    "as_values",
    "as_flags",
    "as_indptr",
    "as_csr",
    "check_s",
    "check_overflow",
    "as_uniform",
    "check_weights",
    "as_csr_matrix",
    "native_order",
    "plain_ndarray",
    "check_bool",
    "check_int",
    "check_cores",
    "S_MAX",
    "CORES_MAX",
]

OVERFLOW_MODES = ("raise", "wrap")
#: the largest model parameter s the golden model takes (its stages build s x s matrices)
S_MAX = 1 << 12
#: the largest number of cores (MCScan blocks) the golden model takes (the 910B4 has 20)
CORES_MAX = 1 << 16


def native_order(a):
    """``a`` in the machine's byte order: a non-native (e.g. big-endian ``>i4``)
    ndarray is converted once, here at the boundary (the kernels and Numba's
    typing take native byte order only); anything else is returned unchanged.
    Not for ``out=`` arrays, which must be written where they are (``plain_ndarray``)."""
    if isinstance(a, np.ndarray) and a.dtype.byteorder not in "=|" and a.dtype.fields is None:
        return a.astype(a.dtype.newbyteorder("="))
    return a


class _ReadableAlias:
    """Holds a read-only array and presents its memory as writeable (``read_only_as_writeable``)."""

    __slots__ = ("base", "__array_interface__")

    def __init__(self, a):
        self.base = a
        face = dict(a.__array_interface__)
        face["data"] = (face["data"][0], False)
        self.__array_interface__ = face


def read_only_as_writeable(a):
    """A read-only ndarray input as a view of the same memory that is not flagged read-only;
    anything else unchanged. Numba's array type carries the read-only flag, so a read-only input
    (a Dask chunk received from another worker, ``np.broadcast_to``, a memory map opened for
    reading) compiled a second specialization of every kernel it reached (1-3 s a kernel on a first
    call, and not in the cache ``python -m mmvref precompile`` fills). The kernels never write their
    inputs and no op returns a view of one (tests/test_bad_input.py checks both), so the flag only
    cost compilation. Inputs only: never for ``out=``."""
    if isinstance(a, np.ndarray) and not a.flags.writeable:
        return np.asarray(_ReadableAlias(a))
    return a


def plain_ndarray(a, name):
    """An ndarray subclass as a plain ndarray view (no copy): ``np.matrix`` keeps two dimensions
    through ``reshape(-1)`` and ``np.cumsum`` flattens it, so the ops see its data as a base-class
    array. A masked array is refused: its mask would be silently ignored."""
    if type(a) is np.ndarray:
        return a
    if isinstance(a, np.ma.MaskedArray):
        raise TypeError(f"{name} is a numpy masked array; the ops do not honour masks: pass "
                        f"{name}.filled(value) or {name}.compressed()")
    return a.view(np.ndarray)


def is_tensor(a) -> bool:
    return type(a).__module__.split(".")[0] == "torch" and hasattr(a, "detach")


#: torch dtypes numpy can hold (anything else, e.g. bfloat16 or the float8 types, is refused here)
_TORCH_NUMPY = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
                "float16", "float32", "float64", "complex64", "complex128")


def to_numpy(a, name: str):
    """The one boundary of the public ops: a torch CPU tensor as a numpy array
    (shared memory, no copy); a numpy array in native byte order (a non-native
    one is converted once, here) and not flagged read-only (``read_only_as_writeable``);
    anything else unchanged. Inputs only (``out=``: ``_policy.check_out``).

    A tensor of a dtype numpy cannot hold (bfloat16, float8, ...) raises
    TypeError naming the argument; the op then checks its own dtypes."""
    if type(a) is np.ndarray:  # (the common input: no module name to read)
        return read_only_as_writeable(native_order(a))
    if not is_tensor(a):
        return read_only_as_writeable(native_order(a))
    if a.device.type != "cpu":
        raise ValueError(f"{name} is a torch tensor on {a.device}; the CPU ops take CPU tensors "
                         f"(use {name}.cpu(), or the npu backends for device tensors)")
    dt = str(a.dtype).replace("torch.", "")
    if dt not in _TORCH_NUMPY:
        raise TypeError(f"{name} has unsupported dtype torch.{dt}; supported values: torch.int8, int16, int32, "
                        f"int64, float16, float32, float64 (flags and masks: torch.bool, int8, uint8)"
                        + ("; bfloat16 is not supported yet (convert with .float())" if dt == "bfloat16" else ""))
    return a.detach().resolve_conj().resolve_neg().numpy()


def _asarray(a, name, empty_dtype=None):
    if isinstance(a, np.ndarray):
        return read_only_as_writeable(native_order(plain_ndarray(a, name)))
    if empty_dtype is not None and isinstance(a, (list, tuple, range)) and len(a) == 0:
        return np.zeros(0, dtype=empty_dtype)  # np.asarray([]) would be float64
    if is_tensor(a):
        return to_numpy(a, name)  # the one torch boundary (dtype checks, CPU only)
    if hasattr(a, "__array__") or isinstance(a, (list, tuple, range)):
        try:
            return read_only_as_writeable(native_order(np.asarray(a)))
        except Exception as exc:  # numpy's own message is kept
            raise TypeError(f"{name}: cannot convert {type(a).__name__} to an array: {exc}") from exc
    if np.isscalar(a):
        raise ValueError(f"{name} must be 1-D, got a scalar ({a!r})")
    raise TypeError(f"{name} must be an array, got {type(a).__name__}")


def as_values(x, name: str = "x", ndim: int = 1) -> np.ndarray:
    """Return ``x`` as an ndarray of a supported value dtype and ``ndim`` dims.

    Python sequences are converted with ``np.asarray`` (so ``[1, 2]`` is int64
    and ``[1.0]`` float64). An ndarray is never copied here.
    """
    a = _asarray(x, name)
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got an array of shape {a.shape}")
    if a.dtype not in _VALUE_SET and a.dtype not in VALUE_DTYPES:  # (a hash, not seven comparisons, first)
        raise TypeError(
            f"{name} has unsupported dtype {a.dtype}; supported: "
            + ", ".join(str(d) for d in VALUE_DTYPES)
        )
    return a


_VALUE_SET = frozenset(VALUE_DTYPES)


def as_flags(f, n: int, name: str = "flags", check_values: bool = True) -> np.ndarray:
    """Return segment-start flags as a 1-D ndarray of length ``n``.

    Accepted: bool, int8 or uint8 arrays holding 0/1, or a Python sequence of
    0/1 (converted to uint8). ``check_values=False`` skips the O(n) scan for
    values outside {0, 1}, for callers that check inside their kernel.
    """
    a = _asarray(f, name, empty_dtype=np.uint8)  # [] is no flags, not float64
    if isinstance(f, (list, tuple, range)) and a.dtype.kind in "iub" and a.dtype not in FLAG_DTYPES:
        if a.size and (a.min() < 0 or a.max() > 1):
            raise ValueError(f"{name} must hold only 0 and 1 (segment starts), got values in [{a.min()}, {a.max()}]")
        a = a.astype(np.uint8)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {a.shape}")
    if a.dtype not in FLAG_DTYPES:
        raise TypeError(f"{name} must be bool, int8 or uint8 (0/1 segment-start flags), got dtype {a.dtype}")
    if a.shape[0] != n:
        raise ValueError(f"{name} has length {a.shape[0]} but the values have length {n}")
    if check_values and a.dtype != np.bool_ and a.size:
        bad = a.view(np.uint8) > 1
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(f"{name} must hold only 0 and 1 (segment starts); {name}[{i}] = {a[i]}")
    return a


def check_s(s) -> int:
    """Validate the MMV-RAM model parameter s (an integer in [2, S_MAX])."""
    return check_int(s, "s", 2, S_MAX, what=" (the MMV-RAM model parameter)")


def check_cores(cores) -> int:
    """Validate the number of cores (MCScan blocks): an integer in [1, CORES_MAX]."""
    return check_int(cores, "cores", 1, CORES_MAX)


def check_int(v, name: str, lo: int | None = None, hi: int | None = None, what: str = "") -> int:
    """An integer argument (anything ``operator.index`` takes: Python or numpy
    integers, bools as 0/1; not floats or strings) in [lo, hi]."""
    try:
        vi = operator.index(v)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(v).__name__} ({v!r})") from None
    if (lo is not None and vi < lo) or (hi is not None and vi > hi):
        rng = f">= {lo}" if hi is None else (f"<= {hi}" if lo is None else f">= {lo} and <= {hi}")
        raise ValueError(f"{name} must be {rng}{what}, got {vi}")
    return vi


def check_bool(v, name: str) -> bool:
    """A flag argument (exclusive=, descending=, largest=): a bool or numpy bool, nothing else."""
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    raise TypeError(f"{name} must be a bool (True or False), got {type(v).__name__} ({v!r})")


def check_overflow(overflow) -> str:
    if not isinstance(overflow, str) or overflow not in OVERFLOW_MODES:
        raise ValueError(f"overflow must be one of {OVERFLOW_MODES}, got {overflow!r}")
    return overflow


def as_indptr(indptr, name: str = "indptr", nnz: int | None = None, check_order: bool = True) -> np.ndarray:
    """Validate CSR/segment offsets: 1-D integers, starting at 0, non-decreasing,
    ending at ``nnz`` when given. Returns an int64 array (no copy if already int64).
    ``check_order=False`` skips the O(m) monotonicity check, for callers that
    check it inside their own (parallel) pass."""
    a = _asarray(indptr, name, empty_dtype=np.int64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {a.shape}")
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must have an integer dtype, got {a.dtype}")
    if a.shape[0] == 0:
        raise ValueError(f"{name} must have at least one entry (indptr[0] = 0)")
    if a[0] != 0:
        raise ValueError(f"{name}[0] must be 0, got {a[0]}")
    if check_order and a.shape[0] > 1:
        d = a[1:] < a[:-1]  # compared, not subtracted: a difference can overflow near +-2**63
        if d.any():
            i = int(np.argmax(d))
            raise ValueError(f"{name} must be non-decreasing; {name}[{i}] = {a[i]} > {name}[{i + 1}] = {a[i + 1]}")
    if nnz is not None and a[-1] != nnz:
        raise ValueError(f"{name}[-1] must equal the number of entries ({nnz}), got {a[-1]}")
    if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:  # checked before int64 wraps it
        raise ValueError(f"{name} has an offset of {a.max()}, more than an array can address (2**63 - 1)")
    return a.astype(np.int64, copy=False)


def as_csr(indptr, indices, data, n_cols: int | None = None, data_name: str = "data"):
    """Validate a CSR triple. Returns (indptr int64, indices int64, data).

    ``n_cols``, when given, bounds the column indices to [0, n_cols).
    """
    data = as_values(data, data_name)
    ind = _asarray(indices, "indices", empty_dtype=np.int64)
    if ind.ndim != 1:
        raise ValueError(f"indices must be 1-D, got an array of shape {ind.shape}")
    if ind.dtype.kind not in "iu":
        raise TypeError(f"indices must have an integer dtype, got {ind.dtype}")
    if ind.shape[0] != data.shape[0]:
        raise ValueError(f"indices has length {ind.shape[0]} but {data_name} has length {data.shape[0]}")
    ptr = as_indptr(indptr, "indptr", nnz=data.shape[0])
    if n_cols is not None and ind.size:
        lo, hi = int(ind.min()), int(ind.max())  # before the int64 conversion: a uint64 index keeps its value
        if lo < 0 or hi >= n_cols:
            bad = lo if lo < 0 else hi
            raise ValueError(f"indices out of range: column index {bad} not in [0, {n_cols})")
    elif ind.dtype == np.uint64 and ind.size and ind.max() > np.iinfo(np.int64).max:
        raise ValueError(f"indices has an index of {ind.max()}, more than an array can address (2**63 - 1)")
    return ptr, ind.astype(np.int64, copy=False), data


def as_uniform(u, name: str = "u") -> np.ndarray:
    """Uniform sample(s) in [0, 1) as float64 (a 0-d array for a scalar)."""
    try:
        a = np.asarray(u)
        if a.dtype.kind not in "iuf":  # not a str, bool, complex, object, ...
            raise TypeError
        a = a.astype(np.float64, copy=False)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a float or an array of floats, got {type(u).__name__}"
                        + (f" of dtype {a.dtype}" if isinstance(u, np.ndarray) else "")) from None
    ok = (a >= 0) & (a < 1)
    if not np.all(ok):
        bad = a if a.ndim == 0 else a[~ok].ravel()[0]
        raise ValueError(f"{name} must lie in [0, 1), got {float(bad)!r}")
    return a


def check_weights(w: np.ndarray, name: str) -> None:
    """Sampling weights: finite and non-negative (ValueError naming the first bad one)."""
    if w.dtype.kind == "f":
        bad = ~np.isfinite(w)
        if bad.any():
            i = tuple(int(v) for v in np.unravel_index(int(np.argmax(bad)), w.shape))
            raise ValueError(f"{name} must be finite; {name}{list(i)} = {w[i]}")
    neg = w < 0
    if neg.any():
        i = tuple(int(v) for v in np.unravel_index(int(np.argmax(neg)), w.shape))
        raise ValueError(f"{name} must be non-negative; {name}{list(i)} = {w[i]}")


def as_csr_matrix(A, name: str = "A"):
    """A CSR operand -> (indptr int64, indices int64, data, (m, n)): a scipy CSR
    matrix/array, or an (indptr, indices, data, shape) tuple (arrays may be
    anything ``np.asarray`` takes); validated by ``as_csr``."""
    if hasattr(A, "indptr") and hasattr(A, "indices") and hasattr(A, "data"):
        if getattr(A, "format", "csr") != "csr":
            raise TypeError(f"{name} must be CSR, got format {A.format!r}")
        indptr, indices, data, shape = A.indptr, A.indices, A.data, A.shape
    else:
        try:
            indptr, indices, data, shape = A
        except (TypeError, ValueError):
            raise TypeError(f"{name} must be a scipy CSR matrix/array or (indptr, indices, data, shape)") from None
    try:
        m, n = shape
    except (TypeError, ValueError):
        raise TypeError(f"{name}: shape must be a pair (rows, columns), got {shape!r}") from None
    m = check_int(m, f"{name}: shape[0]", 0)
    n = check_int(n, f"{name}: shape[1]", 0)
    indptr, indices, data = as_csr(indptr, indices, data, n_cols=n)
    if len(indptr) - 1 != m:
        raise ValueError(f"{name}: indptr describes {len(indptr) - 1} rows but the shape says {m}")
    return indptr, indices, np.asarray(data), (m, n)
