"""Backend resolution. A backend is an object whose methods are registry op
names, taking and returning numpy arrays (the protocol of ``npu``): the named
ones are ``npu.BACKENDS`` (mmvref, mmvref-prepared, emulation, tcuscan, dask); any other is given as
``package.module:attribute`` (an object, or a class/factory called with no
arguments).

Starting a backend is resolving its name (an import, an attribute: a name that
resolves to nothing is a usage error), calling its class or factory, and
``describe``: asking it once everything the runner will ask (which ops it has,
their ``dtypes``, ``variants`` and ``error_model``, its ``regimes()``, its
``overflow``, ``topk_ties``, ``s`` and ``version``). An exception raised by the
backend's own code there (its constructor, a device query in ``regimes()``)
becomes ``BackendFailure`` of kind "crash", naming the method; an answer the
suite cannot use (unknown regimes, an error model or overflow contract that
does not exist, dtypes that are not dtypes) one of kind "config". The CLI ends
the run on either (exit status 4 or 2, see ``conformance.__main__``).
"""
from __future__ import annotations

import importlib

import numpy as np

import npu

__all__ = ["resolve", "has_op", "describe", "BackendFailure", "DESCRIPTION"]

#: the methods a backend may declare to describe itself (not ops)
DESCRIPTION = ("dtypes", "error_model", "regimes", "variants")
#: attributes the runner reads besides ops
ATTRS = ("overflow", "topk_ties", "s", "version", "__version__", "name")


class BackendFailure(Exception):
    """The backend ``backend`` failed while the suite started or described it: ``method`` raised
    (``kind="crash"``) or answered something unusable (``kind="config"``). Carries the error's
    type name and message as strings (it travels from a worker process by pickle)."""

    def __init__(self, backend, method, error, kind="crash"):
        if kind not in ("crash", "config"):
            raise ValueError(f"kind must be 'crash' or 'config', got {kind!r}")
        self.backend, self.method, self.kind = str(backend), str(method), kind
        if isinstance(error, BaseException):
            self.error_type, self.error = type(error).__name__, " ".join(str(error).split())
        else:
            self.error_type, self.error = error
        super().__init__(self.line())

    def line(self):
        """One line: the backend, the method and what went wrong."""
        what = "raised" if self.kind == "crash" else "declared something the suite cannot use:"
        return f"backend {self.backend}: {self.method} {what} {self.error_type}: {self.error}"

    def __reduce__(self):
        return (BackendFailure, (self.backend, self.method, (self.error_type, self.error), self.kind))


def resolve(name: str):
    """The backend object for ``name``. ValueError, ImportError or AttributeError when the name
    resolves to nothing; npu.NpuUnavailableError passes through; anything else the backend's class
    or factory raises is a BackendFailure naming it."""
    if name in npu.BACKENDS:
        mod, _, attr = npu.BACKENDS[name].partition(":")
        return _construct(name, getattr(importlib.import_module(mod), attr), f"{npu.BACKENDS[name]}()")
    if ":" in name:
        mod, _, attr = name.partition(":")
        obj = getattr(importlib.import_module(mod), attr)
        return _construct(name, obj, f"{name}()") if _is_factory(obj) else obj
    raise ValueError(f"unknown backend {name!r}: use one of {sorted(npu.BACKENDS)} or 'package.module:attribute'")


def _construct(name, factory, what):
    try:
        return factory()
    except npu.NpuUnavailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - the backend's own constructor failed
        raise BackendFailure(name, what, exc) from exc


def _is_factory(obj) -> bool:
    """A class, or a callable that is not itself a backend (it has no registry op)."""
    if isinstance(obj, type):
        return True
    from mmvref.registry import REGISTRY

    return callable(obj) and not any(has_op(obj, op) for op in REGISTRY)


def has_op(backend, op: str) -> bool:
    try:
        return callable(getattr(backend, op))
    except AttributeError:
        return False


def _ask(name, method, f, *args):
    try:
        return f(*args)
    except Exception as exc:  # noqa: BLE001 - whatever the backend's own code raised
        raise BackendFailure(name, method, exc) from exc


def _dtype_names(name, key, declared):
    if declared is None:
        return None
    try:
        if isinstance(declared, (str, bytes)):
            raise TypeError("a single string, not a list of dtypes")
        return [np.dtype(d).name for d in declared]
    except TypeError as exc:
        raise BackendFailure(name, f"dtypes({key!r})", exc, kind="config") from None


def _variant_table(name, op, v):
    try:
        if isinstance(v, dict):
            return {str(k): (None if d is None else tuple(np.dtype(t).name for t in d)) for k, d in v.items()}
        if isinstance(v, (str, bytes)):
            raise TypeError("a single string, not a tuple of variant names")
        return tuple(v or ())
    except TypeError as exc:
        raise BackendFailure(name, f"variants({op!r})", exc, kind="config") from None


def describe(backend, name, *, s=8, tier="default"):
    """Everything the runner asks ``backend`` (called ``name``), asked once: a dict with its "ops"
    (registry ops and stage names it has), "attrs" (overflow, topk_ties, s, version, name),
    "dtypes" ({op or "stage:NAME": dtype names or None}, or None without ``dtypes``), "models"
    (error models per registry op, or None), "regimes" (its declaration, or None) and "variants".
    BackendFailure for the first method that raises (kind "crash") or whose answer is unusable
    (kind "config": see ``conformance.regimes``, ``conformance.compare.ERROR_MODELS``)."""
    from mmvref.registry import REGISTRY

    from . import compare, regimes
    from .stages import STAGES

    attrs = {}
    for a in ATTRS:
        v = _ask(name, f"the attribute {a}", getattr, backend, a, None)
        if v is not None and a in ("version", "__version__") and callable(v):
            v = _ask(name, f"{a}()", v)
        if v is not None:
            attrs[a] = v
    for a, allowed in (("overflow", ("raise", "wrap")), ("topk_ties", ("documented", "kernel"))):
        if a in attrs and attrs[a] not in allowed:
            raise BackendFailure(name, f"the attribute {a}", ("ValueError", f"{attrs[a]!r} is not one of {allowed}"),
                                 kind="config")
    names = list(REGISTRY) + [st for st in STAGES if st not in REGISTRY]
    ops = sorted(n for n in names if n not in DESCRIPTION and _ask(name, f"the attribute {n}", has_op, backend, n))
    declared = None
    if has_op(backend, "regimes"):
        declared = _ask(name, "regimes()", backend.regimes)
        try:
            regimes.for_backend(_Declares(declared), s, tier)
        except regimes.RegimesError as exc:
            raise BackendFailure(name, "regimes()", exc, kind="config") from None
        declared = dict(declared or {})
    dtypes = None
    if has_op(backend, "dtypes"):
        dtypes = {}
        for op in ops:
            key = op if op in REGISTRY else f"stage:{op}"
            dtypes[key] = _dtype_names(name, key, _ask(name, f"dtypes({key!r})", backend.dtypes, key))
    models = None
    if has_op(backend, "error_model"):
        models = {}
        for op in (o for o in ops if o in REGISTRY):
            m = _ask(name, f"error_model({op!r})", backend.error_model, op)
            if m not in compare.ERROR_MODELS:
                raise BackendFailure(name, f"error_model({op!r})",
                                     ("ValueError", f"{m!r} is not one of {', '.join(compare.ERROR_MODELS)}"),
                                     kind="config")
            models[op] = m
    variants = None
    if has_op(backend, "variants"):
        variants = {op: _variant_table(name, op, _ask(name, f"variants({op!r})", backend.variants, op))
                    for op in ops if op in REGISTRY}
    return {"ops": ops, "attrs": attrs, "dtypes": dtypes, "models": models, "regimes": declared,
            "variants": variants}


class _Declares:
    """A stand-in answering ``regimes()`` with a declaration already obtained."""

    def __init__(self, declared):
        self._declared = declared

    def regimes(self):
        return self._declared
