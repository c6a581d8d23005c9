"""What a bug report needs: versions, the CPU and the target Numba compiles for,
the kernel path of each op family, threading and the cache directory.

``mmvref.show_config()`` prints it; ``python -m mmvref --info`` too; the
benchmark header prints the same lines. Nothing here imports torch (its version
comes from the installed package's metadata).
"""
from __future__ import annotations

import os
import platform
import sys

__all__ = ["config_info", "show_config", "format_config"]

#: the features worth naming in a report (LLVM names), when the target or host lists them
RELEVANT_FEATURES = ("sse2", "sse4.2", "avx", "avx2", "fma", "bmi2", "avx512f", "avx512bw", "avx512vl",
                     "avx512dq", "avx512vbmi2", "neon", "sve")


def _version(dist: str):
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _cache_dir() -> str:
    from numba.core import config

    if config.CACHE_DIR:
        return f"{config.CACHE_DIR} (NUMBA_CACHE_DIR)"
    here = os.path.join(os.path.dirname(__file__), "_fast", "__pycache__")
    return f"{here} (beside the sources; NUMBA_CACHE_DIR unset)"


def _threading() -> dict:
    import numba

    info = {"threads": numba.get_num_threads()}
    try:
        from . import _threading as policy  # the process-model policy, when present

        info.update(policy.describe())
    except ImportError:
        pass
    try:
        info["layer"] = numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        from numba.core import config

        info.setdefault("layer", f"not launched yet (NUMBA_THREADING_LAYER={config.THREADING_LAYER})")
    return info


def config_info() -> dict:
    """The report as a dict (for JSON and the benchmark header)."""
    import llvmlite
    import numba
    import numpy as np
    from llvmlite import binding as ll

    from ._version import __version__
    from ._fast import _target

    t = _target.target()
    host = _target.host_target()
    try:
        lvl, lvl_err = _target.level(), None
    except ValueError as exc:
        lvl, lvl_err = None, str(exc)
    fams = {}
    for fam, paths in _target.FAMILIES.items():
        chosen = _target.path(fam, lvl) if lvl else "?"
        fams[fam] = {"chosen": chosen, "paths": list(paths)}
    missing_on_host = sorted(f for f in t.features & set(RELEVANT_FEATURES) if host.arch == t.arch
                             and f not in host.features)
    return {
        "versions": {"mmvref": __version__, "python": platform.python_version(), "numpy": np.__version__,
                     "numba": numba.__version__, "llvmlite": llvmlite.__version__, "scipy": _version("scipy"),
                     "torch": _version("torch"), "tbb": _version("tbb"), "dask": _version("dask"),
                     "distributed": _version("distributed")},
        "platform": {"system": platform.platform(), "machine": platform.machine(),
                     "processor": platform.processor() or None, "triple": ll.get_process_triple()},
        "host": {"cpu": host.cpu, "features": sorted(host.features & set(RELEVANT_FEATURES))},
        "target": {"cpu": t.cpu, "arch": t.arch, "source": t.source,
                   "features": sorted(t.features & set(RELEVANT_FEATURES)),
                   "NUMBA_CPU_NAME": os.environ.get("NUMBA_CPU_NAME"),
                   "NUMBA_CPU_FEATURES": os.environ.get("NUMBA_CPU_FEATURES"),
                   "missing_on_host": missing_on_host},
        "simd": {"MMVREF_SIMD": os.environ.get(_target.SIMD_ENV), "level": lvl, "error": lvl_err},
        "families": fams,
        "threading": _threading(),
        "cache": _cache_dir(),
    }


def format_config(info: dict | None = None) -> str:
    """The report as text lines."""
    i = config_info() if info is None else info
    v = i["versions"]
    t, h, s = i["target"], i["host"], i["simd"]
    lines = [
        "mmvref " + str(v["mmvref"]) + " | " + ", ".join(f"{k} {v[k]}" for k in v if k != "mmvref"),
        f"platform: {i['platform']['system']} ({i['platform']['triple']})",
        f"host CPU: {h['cpu']}; features: {' '.join(h['features']) or '-'}",
        f"compile target: {t['cpu']} [{t['source']}]; features: {' '.join(t['features']) or '-'}",
    ]
    if t["missing_on_host"]:
        lines.append(f"  WARNING: the target has {' '.join(t['missing_on_host'])}, which this CPU lacks: "
                     f"compiled code will fault here")
    lines.append(f"kernel level: {s['level'] or 'ERROR'} (MMVREF_SIMD={s['MMVREF_SIMD'] or 'auto'})"
                 + (f": {s['error']}" if s["error"] else ""))
    width = max(len(f) for f in i["families"])
    for fam, p in i["families"].items():
        others = [q for q in p["paths"] if q != p["chosen"]]
        lines.append(f"  {fam:<{width}}  {p['chosen']}" + (f"   (also: {', '.join(others)})" if others else ""))
    th = i["threading"]
    lines.append("threading: " + ", ".join(f"{k} {val}" for k, val in th.items()))
    lines.append(f"numba cache: {i['cache']}")
    return "\n".join(lines)


def show_config(file=None) -> None:
    """Print what a bug report needs: versions, host CPU and the target Numba
    compiles for (with its relevant features), the kernel path chosen for each op
    family, Numba's threading layer and thread count, the cache directory."""
    print(format_config(), file=file or sys.stdout)
