"""The MMV-RAM machine (Sobczyk, Sorrentino, Zouzias, "Segmented Operations using
Matrix Multiplications", §3 and Appendix A.2.2): constant matrices, the MMU
instruction ``matmul`` and the VCU instructions, with accounting.

Words. Integer data lives in int64 words with two's-complement arithmetic, as
hardware registers do; every algorithm here is a ring computation (+, -, and
products with 0/+-1 matrices), so results are exact modulo 2**64, and exact
outright whenever ``mmvref.bounds`` says the intermediates fit in 63 bits.
Flags and other bit vectors are int64 words holding 0/1. fp16 data lives in
fp32 words (the cube unit accumulates fp16 in fp32); fp32 and fp64 keep their
width.

Accounting. Inside ``with counting() as c:`` every instruction adds to ``c``:
``steps`` (MMU calls + VCU calls, the step count of Theorems 4.1-4.3),
``mmu_calls``, ``vcu_calls``, ``mmu_rows`` (sum of left-operand rows, the unit
of M(n)), ``vcu_elements`` (sum of vector lengths), ``calls`` (per
instruction), and ``max_abs`` (largest magnitude produced, per instruction).
Scalar-unit work (reading one element, a loop test) is not an instruction and
is not counted.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import threading
from dataclasses import dataclass, field

import numpy as np

from . import _mmv_kernels as _k
from ._order import order_keys
from ._validate import check_s

__all__ = [
    # constants
    "upper_ones", "b_matrix", "diff_matrix", "lower_strict", "ones", "first_of_block",
    # MMU
    "matmul", "lmatmul",
    # VCU, Table A.2 and App. Alg. 3
    "and_", "or_", "not_", "xor", "mask", "iszero", "leq", "add", "sub", "mul",
    "fills", "gathers", "scatters", "shiftl", "shiftr", "revspec",
    # VCU, irregular access (§3.1: "implemented with a dedicated AC[0] circuit")
    "gather", "scatter", "bit", "bitshl",
    # VCU, bit-wise pre-processing of radix sort (parallel-scan-ascend §5)
    "orderkey",
    # accounting
    "Counter", "counting",
]


# --------------------------------------------------------------------------- accounting

@dataclass
class Counter:
    """Instruction accounting of one ``counting()`` block."""

    steps: int = 0
    mmu_calls: int = 0
    vcu_calls: int = 0
    mmu_rows: int = 0
    vcu_elements: int = 0
    calls: collections.Counter = field(default_factory=collections.Counter)
    max_abs: dict = field(default_factory=dict)

    def overall_max_abs(self):
        """Largest magnitude produced by any instruction (0 if none ran)."""
        return max(self.max_abs.values(), default=0)

    def _note_magnitude(self, name, z):
        if z.size == 0:
            return
        # the ufuncs' reduce directly: ndarray.min/max go through two Python wrappers, and the golden
        # model notes the magnitude of every instruction (millions in a conformance run)
        if z.dtype.kind == "f":
            m = float(_max_of(np.abs(z)))
        else:
            # Python ints: abs(INT64_MIN) must not wrap.
            m = max(abs(int(_min_of(z))), abs(int(_max_of(z))))
        if m > self.max_abs.get(name, 0):
            self.max_abs[name] = m


_max_of, _min_of = np.maximum.reduce, np.minimum.reduce

_state = threading.local()


def _active():
    return getattr(_state, "counters", ())


@contextlib.contextmanager
def counting():
    """Count MMV-RAM instructions executed in the block (nestable)."""
    c = Counter()
    prev = _active()
    _state.counters = prev + (c,)
    try:
        yield c
    finally:
        _state.counters = prev


def _mmu(name, rows, z):
    for c in _active():
        c.steps += 1
        c.mmu_calls += 1
        c.mmu_rows += rows
        c.calls[name] += 1
        c._note_magnitude(name, z)
    return z


def _vcu(name, n, z):
    for c in _active():
        c.steps += 1
        c.vcu_calls += 1
        c.vcu_elements += n
        c.calls[name] += 1
        c._note_magnitude(name, z)
    return z


# --------------------------------------------------------------------------- constants

def _const(fn):
    """Cache a constant (s, dtype) matrix and hand it out read-only."""

    @functools.lru_cache(maxsize=None)
    def cached(s, dtype):
        a = fn(s, np.dtype(dtype))
        a.setflags(write=False)
        return a

    @functools.wraps(fn)
    def get(s, dtype=np.int64):
        return cached(check_s(s), np.dtype(dtype))

    return get


@_const
def upper_ones(s, dtype):
    """U_s: upper-triangular all-ones s x s matrix, diagonal included (§1.2).

    x^T U_s is the inclusive scan of x, so MATMUL(x, U_s) scans every s-block."""
    return np.triu(np.ones((s, s), dtype=dtype))


@_const
def b_matrix(s, dtype):
    """B_s: the identity with an all-ones first row (§4, Alg. 1 line 8).

    Row-vector times B_s adds the block's first entry to every other entry."""
    b = np.eye(s, dtype=dtype)
    b[0, :] = 1
    return b


@_const
def diff_matrix(s, dtype):
    """D_s of Eq. (3): ones on the diagonal, -1 on the superdiagonal.

    (A D_s)(r, j) = A(r, j) - A(r, j-1) for j >= 1, and A(r, 0) for j = 0."""
    return np.eye(s, dtype=dtype) - np.eye(s, k=1, dtype=dtype)


@_const
def lower_strict(s, dtype):
    """L_s^-: strictly lower-triangular all-ones s x s matrix (ScanUL1, Eq. 1)."""
    return np.tril(np.ones((s, s), dtype=dtype), k=-1)


@_const
def ones(s, dtype):
    """1_s: the all-ones s x s matrix."""
    return np.ones((s, s), dtype=dtype)


def first_of_block(n, s):
    """Constant bit vector with 1 at the first position of every s-block.

    A constant of the machine's memory, like U_s (not computed by an instruction)."""
    s = check_s(s)
    z = np.zeros(n, dtype=np.int64)
    z[::s] = 1
    return z


@functools.lru_cache(maxsize=256)
def _band(a_bytes, s, dtype):
    """Per row k of A: the column range [lo, hi) of its nonzeros, and whether
    the row is all finite (a zero x(k) may skip a finite row only: 0 * inf and
    0 * NaN are NaN, as on the hardware)."""
    a = np.frombuffer(a_bytes, dtype=dtype).reshape(s, s)
    lo = np.zeros(s, dtype=np.int64)
    hi = np.zeros(s, dtype=np.int64)
    finite = np.ones(s, dtype=np.bool_)
    for k in range(s):
        nz = np.flatnonzero(a[k])
        if nz.size:
            lo[k], hi[k] = nz[0], nz[-1] + 1
        if a.dtype.kind == "f" and not np.isfinite(a[k]).all():
            finite[k] = False
            lo[k], hi[k] = 0, s  # every product is formed: non-finite entries propagate
    return lo, hi, finite


# --------------------------------------------------------------------------- MMU

def matmul(x, a):
    """MATMUL(x, A) of §1.2: the MMU's one step.

    ``x`` (length n) is viewed row-major as a ceil(n/s) x s matrix X, zero-padded;
    the result holds X A in row-major order with the padding positions dropped,
    so it has length n. ``A`` is s x s. Counted as one MMU call of ceil(n/s) rows.
    """
    x = np.asarray(x)
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"A must be a square s x s matrix, got shape {a.shape}")
    s = check_s(a.shape[0])
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}")
    a = a.astype(x.dtype, copy=False)
    lo, hi, finite = _band(np.ascontiguousarray(a).tobytes(), s, a.dtype)
    out = np.empty_like(x)
    _k.matmul_rows(np.ascontiguousarray(x), np.ascontiguousarray(a), lo, hi, finite, out)
    return _mmu("matmul", -(-x.shape[0] // s), out)


def lmatmul(a, x):
    """MATMUL with the constant on the left: A X for every s x s tile X of x.

    ``x`` (length n) is cut into tiles of s*s elements, each viewed row-major as
    an s x s matrix (the last one zero-padded); the result holds A X per tile,
    row-major, padding dropped. ScanUL1 (parallel-scan-ascend Alg. 2 line 12)
    multiplies L_s^- from the left; the cube unit takes either operand order.
    Counted as one MMU call of ceil(n/s) rows, like ``matmul``.
    """
    x = np.asarray(x)
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"A must be a square s x s matrix, got shape {a.shape}")
    s = check_s(a.shape[0])
    if x.ndim != 1:
        raise ValueError(f"x must be 1-D, got shape {x.shape}")
    out = np.empty_like(x)
    _k.lmatmul_tiles(np.ascontiguousarray(a.astype(x.dtype, copy=False)), np.ascontiguousarray(x), out)
    return _mmu("lmatmul", -(-x.shape[0] // s), out)


# --------------------------------------------------------------------------- VCU

def _bits(z):
    return z.astype(np.int64, copy=False)


def and_(x, y):
    """AND (Table A.2 row 1): z(i) = x(i) AND y(i), on 0/1 words."""
    return _vcu("and", len(x), _bits(np.logical_and(x, y)))


def or_(x, y):
    """OR (Table A.2 row 1): z(i) = x(i) OR y(i), on 0/1 words."""
    return _vcu("or", len(x), _bits(np.logical_or(x, y)))


def not_(x):
    """NOT (Table A.2 row 2): z(i) = NOT x(i), on 0/1 words."""
    return _vcu("not", len(x), _bits(np.logical_not(x)))


def xor(x, y):
    """XOR (App. Alg. 3 line 10): bitwise exclusive or of integer words."""
    return _vcu("xor", len(x), np.bitwise_xor(x, y))


def mask(x, y):
    """MASK (Table A.2 row 3): z(i) = x(i) if y(i) != 0 else 0."""
    x = np.asarray(x)
    return _vcu("mask", len(x), np.where(np.asarray(y) != 0, x, np.zeros((), x.dtype)))


def iszero(x):
    """ISZERO (Table A.2 row 4): z(i) = 1 if x(i) == 0 else 0."""
    return _vcu("iszero", len(x), _bits(np.asarray(x) == 0))


def leq(x, y):
    """LEQ (App. Alg. 3 line 17): z(i) = 1 if x(i) <= y(i) else 0 (y may be a scalar)."""
    return _vcu("leq", len(x), _bits(np.asarray(x) <= y))


def add(x, y):
    """ADD (Table A.2 row 5): z(i) = x(i) + y(i); y may be a scalar (broadcast add)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":  # integer arrays wrap without a warning
        return _vcu("add", len(x), np.add(x, y, dtype=x.dtype))
    with np.errstate(over="ignore", invalid="ignore"):  # as the unit gives them: floats reach inf/nan
        z = np.add(x, y, dtype=x.dtype)
    return _vcu("add", len(x), z)


def sub(x, y):
    """SUB (Table A.2 row 5): z(i) = x(i) - y(i); y may be a scalar."""
    x = np.asarray(x)
    if x.dtype.kind != "f":  # integer arrays wrap without a warning
        return _vcu("sub", len(x), np.subtract(x, y, dtype=x.dtype))
    with np.errstate(over="ignore", invalid="ignore"):  # as the unit gives them: floats reach inf/nan
        z = np.subtract(x, y, dtype=x.dtype)
    return _vcu("sub", len(x), z)


def mul(x, y):
    """MUL (App. Alg. 5 line 5): element-wise product, as the vector unit does it.

    Not an AC[0] instruction for integers (parity reduces to it); Lemma 4.4 /
    Cor. 4.5 (``golden.int_mult`` / ``golden.mult``) build it from a scan instead.
    """
    x = np.asarray(x)
    if x.dtype.kind != "f":  # integer arrays wrap without a warning
        return _vcu("mul", len(x), np.multiply(x, y, dtype=x.dtype))
    with np.errstate(over="ignore", invalid="ignore"):  # as the unit gives them: floats reach inf/nan
        z = np.multiply(x, y, dtype=x.dtype)
    return _vcu("mul", len(x), z)


def fills(x, s):
    """FILLS (Table A.2 row 6): z(is : is+s) = x(is) for every s-block."""
    x = np.asarray(x)
    s = check_s(s)
    z = np.repeat(x[::s], s)[: len(x)]
    return _vcu("fills", len(x), z)


def gathers(x, s):
    """GATHERS (Table A.2 row 7): z(i-1) = x(si-1), i = 1..ceil(n/s).

    x is viewed zero-padded to a multiple of s (App. A.2 step 3: "pad with zero
    if necessary"), so a partial last block contributes 0.
    """
    x = np.asarray(x)
    s = check_s(s)
    n = len(x)
    m = -(-n // s)
    z = np.zeros(m, dtype=x.dtype)
    full = n // s
    z[:full] = x[s - 1: full * s: s]
    return _vcu("gathers", m, z)


def scatters(x, s, into):
    """SCATTERS (Table A.2 row 8): z(si-1) = x(i-1), i = 1..ceil(n/s).

    Writes into a copy of ``into`` (length n): the positions it does not write
    keep their values (Alg. 1 line 7, App. Alg. 1 line 13). Positions si-1 >= n
    are padding and are dropped.
    """
    x = np.asarray(x)
    s = check_s(s)
    z = np.array(into, copy=True)
    full = len(z) // s
    z[s - 1: full * s: s] = x[:full]
    return _vcu("scatters", len(x), z)


def _shift(x, b, s, left):
    x = np.asarray(x)
    n = len(x)
    if s is None:
        z = np.zeros_like(x)
        if b < n:
            if left:
                z[: n - b] = x[b:]
            else:
                z[b:] = x[: n - b]
        return z
    s = check_s(s)
    pad = (-n) % s
    xp = np.concatenate([x, np.zeros(pad, x.dtype)]).reshape(-1, s)
    zp = np.zeros_like(xp)
    if b < s:
        if left:
            zp[:, : s - b] = xp[:, b:]
        else:
            zp[:, b:] = xp[:, : s - b]
    return zp.reshape(-1)[:n]


def shiftl(x, b=1, s=None):
    """SHIFTL (App. Alg. 3 line 10): z(i) = x(i+b), zero-filled.

    With ``s`` the shift stays inside each s-block (App. Alg. 3 processes every
    s-block on its own); without, it runs over the whole vector."""
    return _vcu("shiftl", len(x), _shift(x, b, s, True))


def shiftr(x, b=1, s=None):
    """SHIFTR (App. Alg. 3 lines 11-16): z(i) = x(i-b), zero-filled; ``s`` as for shiftl."""
    return _vcu("shiftr", len(x), _shift(x, b, s, False))


def revspec(xbar, fbar, s):
    """REVSPEC (Table A.2 row 9, Lemma A.1): revert the speculation of block scans.

    Given xbar = MATMUL(x, U_s) and fbar = MATMUL(f, U_s), returns the segmented
    scan of every s-block (position 0 of a block acts as a segment start): from
    xbar(j) it subtracts xbar(i) for the i < j in the same block with
    fbar(i) != fbar(i+1) and fbar(j) == fbar(i+1) (the filter matrix Q of the
    proof), i.e. the block-local sum that ends just before j's segment starts.
    """
    xbar = np.ascontiguousarray(xbar)
    fbar = np.ascontiguousarray(fbar)
    s = check_s(s)
    if len(fbar) != len(xbar):
        raise ValueError(f"fbar has length {len(fbar)} but xbar has length {len(xbar)}")
    out = np.empty_like(xbar)
    _k.revspec_blocks(xbar, fbar.astype(np.int64, copy=False), s, out)
    return _vcu("revspec", len(xbar), out)


def _as_bits(a):
    """Data movement moves bits: view 2-byte floats (which numba cannot load) as uint16."""
    return a.view(np.uint16) if a.dtype == np.float16 else a


def gather(x, idx):
    """GATHER: z(i) = x(idx(i)), and 0 where idx(i) is outside [0, len(x)).

    The irregular read of §3.1 / Thm 4.7's proof / App. Alg. 5 line 4."""
    x = np.ascontiguousarray(x)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    z = np.zeros(len(idx), dtype=x.dtype)
    _k.gather_idx(_as_bits(x), idx, _as_bits(z))
    return _vcu("gather", len(idx), z)


def scatter(x, idx, m):
    """SCATTER: z = zeros(m); z(idx(i)) = x(i) where 0 <= idx(i) < m.

    The all-to-all write of Thm 4.2's proof (COMPRESS's "GATHER" circuit)."""
    x = np.ascontiguousarray(x)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    z = np.zeros(int(m), dtype=x.dtype)
    _k.scatter_idx(_as_bits(x), idx, _as_bits(z))
    return _vcu("scatter", len(x), z)


def orderkey(x, descending=False):
    """Order-preserving keys (Knuth 5.2.5 Ex. 8-9; parallel-scan-ascend §5, Radix sort).

    Bit-wise pre-processing of radix sort, one VCU instruction: the result
    words (int64 holding the unsigned key's bits) compare as unsigned integers
    in the order of DEVELOPERS.md ("Order"): signed integers get their sign bit
    flipped; floats get the sign bit of non-negatives flipped and all bits of
    negatives inverted, after -0.0 is mapped to +0.0 and every NaN to the
    largest key. ``descending`` inverts every key bit. The key width is the
    input's bit width. The definition: ``mmvref._order``.
    """
    x = np.asarray(x)
    u = order_keys(x, descending).astype(np.uint64)
    return _vcu("orderkey", len(x), u.view(np.int64))


def bit(x, k):
    """BIT: z(i) = bit k(i) of x(i) (0/1); wiring only, O(nB) size (Lemma 4.4)."""
    x = np.asarray(x)
    return _vcu("bit", len(x), _bits((x >> np.asarray(k, dtype=np.int64)) & 1))


def bitshl(x, k):
    """BITSHL: z(i) = x(i) * 2**k(i), a left shift of the bits; wiring only (Lemma 4.4)."""
    x = np.asarray(x)
    return _vcu("bitshl", len(x), np.left_shift(x, np.asarray(k, dtype=np.int64)).astype(x.dtype))
