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

__all__ = ["Regimes", "TIERS", "for_backend"]

#: tier -> (weights of small / medium / large lengths in percent, max_n)
TIERS = {"default": ((60, 35, 5), 1 << 22), "release": ((40, 30, 30), 10_000_000)}
MEDIUM_MAX = 1 << 16
CLASSES = ("small", "medium", "large")


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
            raise ValueError(f"tier must be one of {sorted(TIERS)}, got {self.tier!r}")
        if self.max_n is None:
            object.__setattr__(self, "max_n", TIERS[self.tier][1])
        for name in ("tiles", "lanes", "cores", "row_buckets"):
            v = tuple(int(t) for t in getattr(self, name))
            if not v or min(v) < 1:
                raise ValueError(f"regimes: {name} must be positive integers, got {getattr(self, name)!r}")
            object.__setattr__(self, name, v)
        if min(self.tiles) < 2:
            raise ValueError(f"regimes: tiles must be >= 2, got {self.tiles}")
        if not self.classes or set(self.classes) - set(CLASSES):
            raise ValueError(f"regimes: classes must be a non-empty subset of {CLASSES}, got {self.classes!r}")

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
    for ``tier``, drawing the length ``classes``."""
    declared = {}
    if callable(getattr(backend, "regimes", None)):
        declared = dict(backend.regimes() or {})
        unknown = set(declared) - {f.name for f in fields(Regimes)} | ({"tier", "max_n", "classes"} & set(declared))
        if unknown:
            raise ValueError(f"the backend declares unknown regimes {sorted(unknown)}; known: tiles, lanes, "
                             f"cores, row_buckets")
    declared.setdefault("tiles", (s,))
    return Regimes(**declared, tier=tier, max_n=TIERS[tier][1], classes=tuple(classes))
