"""Stage-level conformance: every golden stage a backend exposes, compared
stage by stage (a kernel team can localise a bug to one kernel).

Stage protocol (a backend exposes any subset; numpy in and out, words out:
int64 for integers, fp32 for fp16, else the input's float type; ``s`` is the
backend's tile size, ``backend.s``):

  row_scan(x)                     MATMUL(x, U_s): every s-tile scanned (Alg. 1 line 2)
  block_scan(x)                   every s^2-block scanned on its own (ScanUL1, Eq. 1)
  reduce_tiles(x, blocks)         MCScan phase I: the sum of each of ``blocks`` blocks of whole s-tiles
  complete_rows(y, r, blocks)     MCScan phase II: row scans y completed with the block sums r
  csr_gather(data, indices, x)    App. Alg. 5: data(i) * x(indices(i))
  gather_spmv(yhat, indptr)       App. Alg. 6: the scan value at every row end (leading empty rows 0)
  diff(z)                         Alg. 2 line 5: z(i) - z(i-1)
  revert(xhat, fhat, w)           SSCR's REVERT (§4.1): xhat - w[fhat - 1], the segmented-scan revert
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from mmvref import bounds, golden
from mmvref.golden import to_words

from . import strategies as S

__all__ = ["STAGES", "check"]


@st.composite
def _vec(draw, s, dtypes=None):
    dt = S._dtype(draw, dtypes)
    n = draw(S.lengths(s, multi_core=False))
    x = draw(S.values(dt, n, finite_sums=True))
    if np.dtype(dt).kind == "i":
        x = (x.astype(np.int64) % 10_000).astype(dt)  # stage words stay far from any edge
    return x


@st.composite
def _row_scan(draw, s, dtypes=None):
    return (draw(_vec(s, dtypes)),)


@st.composite
def _reduce(draw, s, dtypes=None):
    return (draw(_vec(s, dtypes)), draw(st.sampled_from([1, 2, 3, 20])))


@st.composite
def _complete(draw, s, dtypes=None):
    x, blocks = draw(_reduce(s, dtypes))
    w = to_words(x)
    return (golden.row_scan(w, s), golden.reduce_tiles(w, s, blocks), blocks)


@st.composite
def _csr_gather(draw, s, dtypes=None):
    dt = S._dtype(draw, dtypes, S.FLOAT_DTYPES)
    indptr, indices, data, shape = draw(S.csr_matrices(dt, s))
    x = draw(S.values(dt, shape[1]))
    lim = float(np.sqrt(np.finfo(dt).max)) / 2  # products stay finite
    return (np.clip(data, -lim, lim).astype(dt), indices, np.clip(x, -lim, lim).astype(dt))


@st.composite
def _gather_spmv(draw, s, dtypes=None):
    """A scanned product vector (int64 or fp32 words) and the CSR offsets."""
    kind = S._dtype(draw, dtypes, ("int32", "float32"))
    indptr, indices, data, shape = draw(S.csr_matrices("int32", s, unsorted=False, duplicates=False))
    yhat = np.cumsum(np.abs(data.astype(np.int64)) % 100)
    return (yhat.astype(np.float32) if kind == "float32" else yhat, indptr)


@st.composite
def _revert(draw, s, dtypes=None):
    """REVERT's operands as SSCR produces them: x_hat = SCAN(x), f_hat = SCAN(f^-)
    (starts after position 0), w = COMPRESS(x_hat, end flags)."""
    x = to_words(draw(_vec(s, dtypes)))
    f = draw(S.flags(len(x), s, dtype="uint8")).astype(np.int64)
    if len(f):
        f[0] = 0
    xhat, fhat = np.cumsum(x).astype(x.dtype), np.cumsum(f)
    ends = np.concatenate([f[1:], [1]])[: len(x)] if len(x) else f
    return (xhat, fhat, xhat[ends.astype(bool)])


@st.composite
def _diff(draw, s, dtypes=None):
    return (to_words(draw(_vec(s, dtypes))),)


#: stage -> (strategy of args given (s, dtypes=None), golden function of (args, s))
STAGES = {
    "row_scan": (_row_scan, lambda a, s: golden.row_scan(to_words(a[0]), s)),
    "block_scan": (_row_scan, lambda a, s: golden.block_scan(to_words(a[0]), s)),
    "reduce_tiles": (_reduce, lambda a, s: golden.reduce_tiles(to_words(a[0]), s, a[1])),
    "complete_rows": (_complete, lambda a, s: golden.complete_rows(a[0], a[1], s, a[2])),
    "csr_gather": (_csr_gather, lambda a, s: golden.csr_gather(to_words(a[0]), a[1], to_words(a[2]))),
    "gather_spmv": (_gather_spmv, lambda a, s: golden.gather_spmv(a[0], a[1])),
    "diff": (_diff, lambda a, s: golden.diff(a[0])),
    "revert": (_revert, lambda a, s: golden.revert(a[0], a[1], a[2])),
}


#: stages whose every output is a sum of x over one contiguous range: |out| <= n * max|x|
#: (mmvref.bounds.scan, the contiguous-range lemma)
_RANGE_SUM_STAGES = ("row_scan", "block_scan", "reduce_tiles")


def check(stage, args, expected, actual, s):
    """None when a stage's output conforms: integers (words) exactly, dtype
    included, and within the bit bound of mmvref.bounds where the stage sums
    ranges of x; floats within 2 (n + 2s) u sum|inputs| (every stage output is
    a sum of at most n input terms; one rounding budget per side)."""
    expected, actual = np.asarray(expected), np.asarray(actual)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return f"{stage}: dtype/shape {actual.dtype}{actual.shape}, expected {expected.dtype}{expected.shape}"
    x0 = np.asarray(args[0])
    if stage in _RANGE_SUM_STAGES and x0.dtype.kind == "i" and x0.size and actual.size:
        b = bounds.scan(x0.size, s, max(abs(int(x0.min())), abs(int(x0.max()))))
        seen = max(abs(int(actual.min())), abs(int(actual.max())))
        if seen > b.magnitude:
            return f"{stage}: magnitude {seen} exceeds the bound {b.magnitude} ({b.bits} bits)"
    if expected.dtype.kind != "f":
        bad = np.flatnonzero(actual.ravel() != expected.ravel())
        if bad.size:
            i = int(bad[0])
            return f"{stage}: index {i}: expected {expected.ravel()[i]}, actual {actual.ravel()[i]} (exact)"
        return None
    with np.errstate(over="ignore"):  # huge inputs: the magnitude is inf and so is the bound
        mag = sum(float(np.abs(np.asarray(a, dtype=np.float64)).sum()) for a in args if isinstance(a, np.ndarray))
    n = max((np.asarray(a).size for a in args if isinstance(a, np.ndarray)), default=1)
    fi = np.finfo(expected.dtype)  # as Python floats: a float32 scalar times a huge mag would overflow
    bound = 2 * (n + 2 * s) * float(fi.eps) / 2 * mag + float(fi.tiny)
    a, e = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    with np.errstate(invalid="ignore"):
        err = np.where((a == e) | (np.isnan(a) & np.isnan(e)), 0.0, np.abs(a - e))
    bad = np.flatnonzero(~(err <= bound))
    if bad.size:
        i = int(bad[0])
        return (f"{stage}: index {i}: expected {expected.ravel()[i]!r}, actual {actual.ravel()[i]!r}, "
                f"error {err[i]:.3g} > bound {bound:.3g}")
    return None
