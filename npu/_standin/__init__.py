"""The CPU stand-in of ``tcuscan_ops``, one module per kernel family.

Every public ``run_*`` function of the family modules is a kernel twin;
``kernels()`` collects them (a name defined twice is an error)."""
from __future__ import annotations

import importlib

FAMILIES = ("scans", "segments", "moves", "sort_select", "sparse", "elementwise", "linalg")


def kernels():
    """{name: function} of every stand-in kernel, from every family module."""
    out = {}
    for fam in FAMILIES:
        try:
            mod = importlib.import_module(f"{__name__}.{fam}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{fam}":
                raise
            continue  # a family not written yet
        for name in dir(mod):
            if name.startswith("run_"):
                if name in out and out[name] is not getattr(mod, name):
                    raise RuntimeError(f"stand-in kernel {name} is defined in two families")
                out[name] = getattr(mod, name)
    return out
