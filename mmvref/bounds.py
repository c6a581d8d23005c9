"""Largest magnitude any intermediate of each golden algorithm can reach, and
the bits that implies.

Every function returns a :class:`Bound`: ``magnitude`` (ours, proven below and
checked by the tests against ``mmv.counting().max_abs`` on adversarial
inputs), ``bits`` (two's-complement bits to hold it: magnitude.bit_length() + 1),
and ``paper_magnitude`` / ``paper_bits`` (the paper's bound, for comparison).

Why ours is tighter (Remark 3.1 asks for a bound per algorithm):

* **Contiguous-range lemma.** In Alg. 1 (Scan) every value an instruction
  produces is the sum of x over one contiguous range: MATMUL with U_s sums a
  range inside a block, GATHERS/SCATTERS copy, and MATMUL with B_s adds the
  prefix ending at ks-1 to an in-block sum starting at ks. So |value| <= n*M,
  against the paper's M(t) <= s^2 M(t-1), i.e. s^(2 ceil(log_s n)) M = O(n^2 M)
  (Thm 4.1's proof).
* **Disjoint-ranges lemma.** In App. Alg. 1 (block-recursive segmented scan)
  and SCD/SSCR every value on the data path is a sum of x over a union of
  disjoint ranges (a speculative block scan of segment partial sums, REVSPEC
  differences of nested prefixes, UpdateFirstSegment's carry plus an in-block
  sum that follows it). So |value| <= sum |x| <= n*M. Flag scans count flags:
  <= n. The paper bounds these by Thm 4.1's O(n^2 M) (Thms 4.2, 4.3).
* Lemma 4.4 / Cor. 4.5 (integer products): the k-th partial sum of the
  school method for |a|*|b| is |a| * (|b| mod 2^(k+1)) <= |a||b|, and the
  shifted rows |a| 2^k (k < m = bit length of |b|) are <= |a||b| too; a
  segmented scan over n such rows only ever sums disjoint ranges of them:
  <= sum_i |x_i||y_i| <= n M_x M_y. Paper: O(log M) bits per element.
* The Ascend scans (parallel-scan-ascend Algs. 1-3) obey the contiguous-range
  lemma too: tile scans, tile sums (A 1_s), sums of earlier rows of a tile
  (L_s^- A 1_s), block reductions and the carried partials are all sums over
  one contiguous range, so ``scan``'s bound n*M holds for ScanU, ScanUL1 and
  MCScan. Split, radix sort and top-k only move values; their arithmetic is
  the mask scan and the output positions (<= n): ``compress``'s bound.
  Weighted and top-p sampling scan the weights: ``scan``'s bound.
"""
from __future__ import annotations

from dataclasses import dataclass

from ._validate import check_s

__all__ = ["Bound", "bits_for", "scan", "seg_scan", "scd", "sscr", "compress", "int_mult", "mult",
           "matrix_product", "spmv"]


def bits_for(magnitude: int) -> int:
    """Two's-complement bits needed to hold every integer in [-magnitude, magnitude]."""
    return int(magnitude).bit_length() + 1


@dataclass(frozen=True)
class Bound:
    magnitude: int
    paper_magnitude: int
    note: str

    @property
    def bits(self) -> int:
        return bits_for(self.magnitude)

    @property
    def paper_bits(self) -> int:
        return bits_for(self.paper_magnitude)


def _levels(n: int, s: int) -> int:
    """ceil(log_s n) for n >= 1, computed exactly (0 for n <= 1)."""
    L, p = 0, 1
    while p < n:
        p *= s
        L += 1
    return L


def _check(n, M):
    n, M = int(n), int(M)
    if n < 0 or M < 0:
        raise ValueError(f"n and max_abs must be >= 0, got n={n}, max_abs={M}")
    return n, M


def _paper_scan(n, s, M):
    return s ** (2 * _levels(n, s)) * M


def scan(n, s, max_abs) -> Bound:
    """Alg. 1 (Scan). Ours: n*M (contiguous-range lemma). Paper (Thm 4.1): s^(2 ceil(log_s n)) M."""
    n, M = _check(n, max_abs)
    s = check_s(s)
    return Bound(n * M, _paper_scan(n, s, M), "Thm 4.1; tightened by the contiguous-range lemma")


def seg_scan(n, s, max_abs) -> Bound:
    """App. Alg. 1 (SegScan). Ours: max(n*M, n) (disjoint ranges; flag scans <= n). Paper: Thm 4.3 -> Thm 4.1."""
    n, M = _check(n, max_abs)
    s = check_s(s)
    return Bound(max(n * M, n), max(_paper_scan(n, s, M), n),
                 "Thm 4.3 (bits of Thm 4.1); tightened by the disjoint-ranges lemma")


def scd(n, s, max_abs) -> Bound:
    """Alg. 2 (SCD). Ours: max(n*M, n). Paper: Thm 4.2 -> Thm 4.1."""
    n, M = _check(n, max_abs)
    s = check_s(s)
    return Bound(max(n * M, n), max(_paper_scan(n, s, M), n), "Thm 4.2; prefix sums <= n*M, flag scan <= n")


def sscr(n, s, max_abs) -> Bound:
    """Alg. 3 (SSCR). Ours: max(n*M, n). Paper: Thm 4.2 -> Thm 4.1."""
    n, M = _check(n, max_abs)
    s = check_s(s)
    return Bound(max(n * M, n), max(_paper_scan(n, s, M), n), "Thm 4.2; prefix sums <= n*M, flag scan <= n")


def compress(n, s, max_abs) -> Bound:
    """COMPRESS (Thm 4.2's proof): values are copied (<= M); the flag scan and indices <= n."""
    n, M = _check(n, max_abs)
    s = check_s(s)
    return Bound(max(M, n), max(M, n), "values copied; flag scan <= n")


def int_mult(max_a, max_b, s=2) -> Bound:
    """Lemma 4.4. Ours: max(|a||b|, |a|, |b|, m), m = bit length of |b| (partial sums
    |a| (|b| mod 2^(k+1)) and rows |a| 2^k never exceed |a||b|). Paper: O(log M) bits, ~2 M^2."""
    A, Bm = _check(max_a, max_b)
    m = max(Bm.bit_length(), 1)
    # rows |a| 2^k <= |a| 2^(m-1) <= |a||b| when b != 0; for b = 0 the unmasked row is |a|
    return Bound(max(A * Bm, A, Bm, m), max(A, Bm, 1) ** 2 * 2, "Lemma 4.4; school-method partial sums")


def mult(n, s, max_x, max_y) -> Bound:
    """Cor. 4.5. Ours: max(n M_x M_y, M_x, M_y, n*m), m = bit length of max|y| (disjoint
    ranges of school-method rows; n*m bounds the flag scans). Paper: O(log(nM)) bits."""
    n, Mx = _check(n, max_x)
    _, My = _check(n, max_y)
    s = check_s(s)
    m = max(My.bit_length(), 1)
    return Bound(max(n * Mx * My, Mx, My, n * m), max(n * max(Mx, My, 1) ** 2 * 2, n * m, Mx, My),
                 "Cor. 4.5; disjoint ranges of school-method rows")


def matrix_product(n, p, q, s, max_a, max_b) -> Bound:
    """Thm 4.6 for an n x p times p x q product: N = n*q*p scalar products, then
    segment sums of p. Ours: max(N M_A M_B, N*m). Paper: O(log(nM)) bits."""
    N = int(n) * int(q) * int(p)
    inner = mult(N, s, max_a, max_b)
    return Bound(inner.magnitude, inner.paper_magnitude, "Thm 4.6 via Cor. 4.5 and a segmented scan")


def spmv(nnz, s, max_data, max_x) -> Bound:
    """App. Alg. 4 (SpMV via one scan of the products). Ours: max(nnz Ma Mx, Ma, Mx, nnz + 1)
    (prefix sums of products; gathered x; row-end indices). Paper (Thm 4.7): O(log(nM)) bits."""
    nnz, Ma = _check(nnz, max_data)
    _, Mx = _check(nnz, max_x)
    s = check_s(s)
    mag = max(nnz * Ma * Mx, Ma, Mx, nnz + 1)
    return Bound(mag, max(_paper_scan(nnz, s, Ma * Mx), Ma, Mx, nnz + 1), "Thm 4.7; prefix sums of products")


def levels(n: int, s: int) -> int:
    """ceil(log_s n): the recursion depth the step counts grow with."""
    return _levels(int(n), check_s(s))

