"""Kernel regimes: where a backend's kernels change behaviour, so where inputs must land.

A backend may declare ``regimes()`` returning a dict with any of the fields of
:class:`Regimes` (tile sizes, SIMD lane counts, core or chunk counts, CSR row-length
buckets); the rest default. ``for_backend(backend, s, tier)`` gives the Regimes the
strategies draw from (``strategies.lengths``, ``strategies.csr_matrices``):

- ``seam_lengths()``: 0, 1, 2, and for every tile S: k S^j - 1, k S^j, k S^j + 1
  (k = 1..3, every j with S^j <= max_n); 2^k - 1, 2^k, 2^k + 1; c S and c S^2
  (and +-1) for every core count c; L - 1, L, L + 1 for every lane count L; all
  up to ``max_n``.
- ``row_lengths()``: CSR row lengths 0, 1 and S - 1, S, S + 1 for every tile S and
  b - 1, b, b + 1 for every bucket edge b.
- ``strata_row_lengths()``: the row lengths the release-gate strata check in every run
  (``conformance.strata``): 2^k - 1, 2^k, 2^k + 1 for every k with 2^k <= max_n, whatever
  the backend declares (a kernel's undeclared threshold sits at some power of two), plus
  ``row_lengths()`` on top; all up to max_n.

Tiers: a drawn length is small (<= 20 S^2 or a random length up to 3 S^2), medium
(a seam up to 2^16) or large (a seam above that, up to ``max_n``), with weights per
tier: "default" 60 / 35 / 5 and max_n = 2^22; "release" 40 / 30 / 30 and max_n =
10^7 (inputs of 1e6-1e7 elements). The runner spends those shares of an op's
example budget in two passes (``classes``): small lengths, then kernel-scale ones
(medium and large at their relative weights). Left to one Hypothesis run, the
share was chance: 100 derandomized examples of scan drew 2 distinct inputs of
4096 or more elements. The class choice shrinks towards small (medium in the
kernel-scale pass), and a seam towards the smallest seam of its class, so a
failure that needs a kernel-scale input shrinks to the smallest one that still
fails.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["Regimes", "RegimesError", "TIERS", "MEDIUM_MAX", "for_backend"]

#: tier -> (weights of small / medium / large lengths in percent, max_n)
TIERS = {"default": ((60, 35, 5), 1 << 22), "release": ((40, 30, 30), 10_000_000)}
MEDIUM_MAX = 1 << 16
CLASSES = ("small", "medium", "large")


class RegimesError(ValueError):
    """Regimes that cannot be used (an unknown field, a tile below 2, not integers): a
    configuration error of whoever declared them."""


def share(tier, classes):
    """Percent of a ``tier``'s examples drawn from the length ``classes`` (its TIERS weights)."""
    return sum(w for c, w in zip(CLASSES, TIERS[tier][0]) if c in classes)


@dataclass(frozen=True)
class Regimes:
    tiles: tuple = (8,)
    lanes: tuple = (8, 16)
    cores: tuple = (2, 20)
    row_buckets: tuple = (8, 16, 32, 64)
    tier: str = "default"
    max_n: int | None = None  # None: the tier's
    #: which of the tier's length classes are drawn ("small", "medium", "large"), at the tier's
    #: weights among them: the runner spends a profile's budget on the small class and on the
    #: kernel-scale classes in two passes, so kernel-scale examples are not left to chance
    classes: tuple = ("small", "medium", "large")

    def __post_init__(self):
        if self.tier not in TIERS:
            raise RegimesError(f"tier must be one of {sorted(TIERS)}, got {self.tier!r}")
        if self.max_n is None:
            object.__setattr__(self, "max_n", TIERS[self.tier][1])
        for name in ("tiles", "lanes", "cores", "row_buckets"):
            try:
                v = tuple(int(t) for t in getattr(self, name))
            except (TypeError, ValueError):
                v = ()
            if not v or min(v) < 1:
                raise RegimesError(f"regimes: {name} must be positive integers, got {getattr(self, name)!r}")
            object.__setattr__(self, name, v)
        if min(self.tiles) < 2:
            raise RegimesError(f"regimes: tiles must be >= 2, got {self.tiles}")
        if not self.classes or set(self.classes) - set(CLASSES):
            raise RegimesError(f"regimes: classes must be a non-empty subset of {CLASSES}, got {self.classes!r}")

    @property
    def weights(self):
        """Weights of the small / medium / large lengths in percent (0 for a class not drawn)."""
        return tuple(share(self.tier, (c,)) if c in self.classes else 0 for c in CLASSES)

    def seam_lengths(self):
        """Sorted seam lengths up to max_n (see the module docstring)."""
        pts = {0, 1, 2}
        for S in self.tiles:
            v = S
            while v <= self.max_n:
                for k in (1, 2, 3):
                    pts.update((k * v - 1, k * v, k * v + 1))
                v *= S
            for c in self.cores:
                for base in (c * S, c * S * S):
                    pts.update((base - 1, base, base + 1))
        k = 1
        while (1 << k) <= self.max_n:
            pts.update(((1 << k) - 1, 1 << k, (1 << k) + 1))
            k += 1
        for L in self.lanes:
            pts.update((L - 1, L, L + 1))
        return tuple(sorted(p for p in pts if 0 <= p <= self.max_n))

    def strata_row_lengths(self):
        """Sorted CSR row lengths checked by the strata in every run (module docstring)."""
        pts = set(self.row_lengths())
        k = 0
        while (1 << k) <= self.max_n:
            pts.update(((1 << k) - 1, 1 << k, (1 << k) + 1))
            k += 1
        return tuple(sorted(p for p in pts if 0 <= p <= self.max_n))

    def large_length(self, cap=None):
        """The shortest seam length of the large class (above MEDIUM_MAX), or the longest seam up
        to ``cap`` when the cap is lower: the length of the per-dtype kernel-scale strata."""
        seams = self.seam_lengths()
        if cap is not None and cap <= MEDIUM_MAX:
            return max(p for p in seams if p <= cap)
        big = [p for p in seams if p > MEDIUM_MAX and (cap is None or p <= cap)]
        return big[0] if big else max(p for p in seams if cap is None or p <= cap)

    def row_lengths(self):
        """Sorted CSR row lengths at the seams (see the module docstring)."""
        pts = {0, 1}
        for S in self.tiles:
            pts.update((S - 1, S, S + 1))
        for b in self.row_buckets:
            pts.update((b - 1, b, b + 1))
        return tuple(sorted(p for p in pts if p >= 0))


def for_backend(backend, s=8, tier="default", classes=CLASSES):
    """The Regimes of ``backend`` (its ``regimes()`` dict, else defaults with tile ``s``)
    for ``tier``, drawing the length ``classes``. Whatever ``backend.regimes()`` raises passes
    through; a declaration that cannot be used raises RegimesError (a ValueError)."""
    declared = {}
    if callable(getattr(backend, "regimes", None)):
        got = backend.regimes()
        try:
            declared = dict(got or {})
        except (TypeError, ValueError):
            raise RegimesError(f"regimes() must return a dict (tiles, lanes, cores, row_buckets), "
                               f"got {type(got).__name__}") from None
        unknown = set(declared) - {f.name for f in fields(Regimes)} | ({"tier", "max_n", "classes"} & set(declared))
        if unknown:
            raise RegimesError(f"the backend declares unknown regimes {sorted(unknown)}; known: tiles, lanes, "
                               f"cores, row_buckets")
    declared.setdefault("tiles", (s,))
    return Regimes(**declared, tier=tier, max_n=TIERS[tier][1], classes=tuple(classes))
