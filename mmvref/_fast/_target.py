"""Which CPU the Numba kernels are compiled for, and which kernel path each op family takes.

The one place that decides. Kernels are chosen by the target Numba *compiles for*
(``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES`` when set, otherwise the host), never by
the machine the tests happen to run on: an x86 intrinsic compiled for a target
without its feature aborts the interpreter inside LLVM ("Do not know how to split
the result of this operator!"), so a path is only chosen when the target has
every feature it needs.

How the target's features are read, in the order Numba itself uses them
(``numba.core.codegen.JITCPUCodegen``):

- ``NUMBA_CPU_FEATURES`` set: that "+feat,-feat" list (an empty value means "the
  features the CPU name implies").
- otherwise the host's features as Numba passes them to LLVM
  (``numba.core.codegen.get_host_cpu_features``, which honours
  ``NUMBA_ENABLE_AVX=0``), parsed as the "+feat" / "-feat" list they are: a
  substring test would read "-avx512f" as present.
- an empty list (``NUMBA_CPU_NAME=generic``, or ``NUMBA_CPU_FEATURES=""``): the
  features the CPU name implies are asked of LLVM itself, by compiling a probe for
  that CPU (a 512-bit and a 256-bit integer multiply) and reading the registers the
  assembly uses.

Note that ``NUMBA_CPU_NAME=haswell`` alone keeps the *host's* features (Numba
passes them along), so on an AVX-512 host it still compiles AVX-512 code; to
compile for what a Haswell has, set ``NUMBA_CPU_FEATURES=""`` as well (CI does).

``MMVREF_SIMD=auto|avx512|avx2|portable`` forces a level (``auto``, the default:
the best the target has). Asking for a level the target lacks raises at import:
running it would abort the process, and silently falling back would hide the
misconfiguration.

Op families and their paths are in ``FAMILIES``; ``path(family)`` is the one the
ops call. ``portable`` kernels are plain loops and generic LLVM vector IR
(``segment._portable_vec``), which LLVM lowers for whatever the target is (AVX-512, AVX2, SSE2,
NEON); ``avx512`` and ``avx2`` kernels use x86 intrinsics of those extensions and
are imported only when chosen.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

__all__ = ["Target", "parse_features", "detect", "target", "level", "path", "kernels", "FAMILIES", "LEVELS",
           "REQUIRES", "SIMD_ENV", "host_target"]

#: environment variable that forces a kernel level
SIMD_ENV = "MMVREF_SIMD"

#: kernel levels, best first
LEVELS = ("avx512", "avx2", "portable")

#: the target features each level needs (LLVM feature names); x86 only except portable
REQUIRES = {"avx512": ("avx512f",), "avx2": ("avx2",), "portable": ()}

#: op family -> {level: module under mmvref._fast holding that path's kernels}, best first.
#: A family without an entry for a level uses the next lower one it has. The packages are the op
#: families (``segment``, ``compress``, ``scanfamily``, ``sparse``), each with its boundary ``ops``.
FAMILIES: dict[str, dict[str, str]] = {
    "scan (int8/16/32 -> int32)": {"avx512": "segment._avx512", "avx2": "segment._avx2", "portable": "segment._portable"},
    "segmented_scan (int8/16/32 -> int32)": {"avx512": "segment._avx512", "avx2": "segment._avx2",
                                             "portable": "segment._portable"},
    "segmented_sum (int8/16/32 -> int32)": {"avx512": "segment._avx512", "avx2": "segment._avx2",
                                            "portable": "segment._portable"},
    "scan, segmented ops (int64, floats)": {"portable": "segment._portable"},
    "segment_sum_csr": {"portable": "segment._portable"},
    # one portable LLVM vector loop (generic vector IR, lowered for the compile target)
    "segment_csr / segment_coo / scatter (N-d)": {"portable": "segment._portable_nd"},
    "compress, compress_ind": {"portable": "compress._portable"},
    # float SpMV: on AVX-512 targets LLVM's own gathers (zmm) are the AVX-512 path; AVX2 forces
    # hardware gathers, which LLVM's tuning scalarizes on AMD Zen
    "spmv": {"avx512": "sparse._portable_spmv", "avx2": "sparse._avx2", "portable": "sparse._portable_spmv"},
    # SpMV of stencil matrices (rows of one pattern of diagonal offsets): plain loops LLVM vectorizes
    # for the target (interleaved loads and shuffles), no intrinsics
    "spmv (stencil matrices)": {"portable": "sparse._portable_stencil"},
    "spmm": {"portable": "sparse._portable_spmm"},
    "spgemm": {"portable": "sparse._portable_spgemm"},
    "scan family (split, sort, topk, sampling)": {"portable": "scanfamily._portable"},
}

_X86 = ("x86_64", "i386", "i686", "x86", "amd64")


def parse_features(s: str | None) -> dict[str, bool]:
    """A "+feat,-feat" list (LLVM's form) as {feat: enabled}. A name without a sign
    counts as enabled; empty items are ignored; the last mention of a name wins."""
    out: dict[str, bool] = {}
    for tok in (s or "").split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok[0] in "+-":
            out[tok[1:]] = tok[0] == "+"
        else:
            out[tok] = True
    return out


@dataclass(frozen=True)
class Target:
    """What Numba compiles for: the triple's architecture, the LLVM CPU name, the
    enabled features, and where they came from."""

    arch: str
    cpu: str
    features: frozenset
    source: str

    @property
    def is_x86(self) -> bool:
        return self.arch in _X86

    def has(self, feature: str) -> bool:
        return feature in self.features


_PROBE_IR = r"""
define void @p512(ptr %a) #0 {
  %v = load <16 x i32>, ptr %a, align 64
  %w = mul <16 x i32> %v, %v
  store <16 x i32> %w, ptr %a, align 64
  ret void
}
define void @p256(ptr %a) {
  %v = load <8 x i32>, ptr %a, align 32
  %w = mul <8 x i32> %v, %v
  store <8 x i32> %w, ptr %a, align 32
  ret void
}
attributes #0 = { "min-legal-vector-width"="512" "prefer-vector-width"="512" }
"""


@functools.lru_cache(maxsize=None)
def implied_features(triple: str, cpu: str) -> frozenset:
    """The SIMD features (of those the levels need) that LLVM gives ``cpu`` when no
    feature list is passed: compile a probe for it and read its registers (a 512-bit
    multiply in zmm registers needs avx512f; a 256-bit integer multiply in ymm
    registers, avx2). Non-x86 triples: none of them."""
    if triple.split("-")[0] not in _X86:
        return frozenset()
    from llvmlite import binding as ll

    ll.initialize_native_target()
    ll.initialize_native_asmprinter()
    mod = ll.parse_assembly(f'target triple = "{triple}"\n' + _PROBE_IR)
    tm = ll.Target.from_triple(triple).create_target_machine(cpu=cpu, features="")
    asm = tm.emit_assembly(mod)
    body512 = asm.split("p512:")[1].split("p256:")[0]
    body256 = asm.split("p256:")[1]
    feats = set()
    if "zmm" in body512:
        feats.add("avx512f")
    if "ymm" in body256 and "vpmulld" in body256:
        feats.add("avx2")
    return frozenset(feats)


def detect(cpu_name: str | None = None, cpu_features: str | None = None, *, host_cpu: str | None = None,
           host_features: str | None = None, triple: str | None = None) -> Target:
    """The target Numba compiles for. Arguments default to what Numba reads
    (``numba.core.config.CPU_NAME`` / ``CPU_FEATURES``, the host's name and
    features); tests pass them to check the parsing."""
    from llvmlite import binding as ll

    if triple is None:
        triple = ll.get_process_triple()
    arch = triple.split("-")[0]
    if cpu_name is None and cpu_features is None and host_cpu is None and host_features is None:
        from numba.core import config
        from numba.core.codegen import get_host_cpu_features

        cpu_name, cpu_features = config.CPU_NAME, config.CPU_FEATURES
        host_cpu = ll.get_host_cpu_name()
        host_features = get_host_cpu_features() if cpu_features is None else None
    cpu = cpu_name or host_cpu or "generic"
    if cpu_features is not None:
        fstr, source = cpu_features, "NUMBA_CPU_FEATURES"
    else:
        fstr, source = host_features or "", "host"
    if cpu_name:
        source = f"NUMBA_CPU_NAME, features from {source}"
    parsed = parse_features(fstr)
    if parsed:
        feats = frozenset(k for k, on in parsed.items() if on)
    else:  # no list: the features the CPU name implies, as LLVM knows them
        feats = implied_features(triple, cpu)
        source += " (none given: implied by the CPU name, probed)"
    return Target(arch=arch, cpu=cpu, features=feats, source=source)


def host_target() -> Target:
    """The machine itself (what a kernel may *execute*), whatever Numba compiles for."""
    from llvmlite import binding as ll
    from numba.core.codegen import get_host_cpu_features

    return detect("", None, host_cpu=ll.get_host_cpu_name(), host_features=get_host_cpu_features())


def supports(t: Target, lvl: str) -> bool:
    if lvl == "portable":
        return True
    return t.is_x86 and all(t.has(f) for f in REQUIRES[lvl])


def choose_level(t: Target, override: str | None) -> str:
    """The kernel level for target ``t``: the override when given (and not "auto"),
    else the best level ``t`` supports. ValueError when the override is unknown or
    needs features ``t`` lacks."""
    req = (override or "auto").strip().lower()
    if req == "auto":
        return next(lvl for lvl in LEVELS if supports(t, lvl))
    if req not in LEVELS:
        raise ValueError(f"{SIMD_ENV}={override!r}: expected one of auto, {', '.join(LEVELS)}")
    if not supports(t, req):
        missing = [f for f in REQUIRES[req] if not t.has(f)] if t.is_x86 else [f"an x86 target (arch {t.arch})"]
        raise ValueError(
            f"{SIMD_ENV}={req}: Numba compiles for {t.cpu} ({t.source}), which lacks {', '.join(missing)}; "
            f"compiling those kernels would abort the process. Unset {SIMD_ENV}, or set NUMBA_CPU_NAME and "
            f"NUMBA_CPU_FEATURES to a target that has them")
    return req


@functools.lru_cache(maxsize=None)
def target() -> Target:
    """The compile target of this process (read once: Numba reads its config once too)."""
    return detect()


@functools.lru_cache(maxsize=None)
def level() -> str:
    """The kernel level of this process (``MMVREF_SIMD``, else the best the target has)."""
    return choose_level(target(), os.environ.get(SIMD_ENV))


def path(family: str, lvl: str | None = None) -> str:
    """The path op ``family`` takes at level ``lvl`` (default: this process's level):
    the best of the family's paths that does not exceed it."""
    paths = FAMILIES[family]
    lvl = level() if lvl is None else lvl
    for cand in LEVELS[LEVELS.index(lvl):]:
        if cand in paths:
            return cand
    raise KeyError(f"{family}: no kernel path at or below {lvl}")  # pragma: no cover - portable always exists


def kernels(family: str, lvl: str | None = None):
    """The module holding ``family``'s kernels on its chosen path (imported on first use,
    so x86-only modules are never imported for other targets)."""
    import importlib

    return importlib.import_module(f"{__package__}.{FAMILIES[family][path(family, lvl)]}")
