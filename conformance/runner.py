"""Run registry ops through the golden model and a backend under Hypothesis.

For each op: Hypothesis draws inputs from ``strategies.op_inputs(op, s)``; the
golden model computes the expected result (its intermediate magnitudes
checked against the op's bit bound); the backend computes its own; the
comparator decides. A failure is shrunk by Hypothesis to a minimal
counterexample, saved as data (``failures/<backend>-<op>.npz``, ``casefile.py``; replayable with
``--replay``), and Hypothesis's example database (``--db``) replays it first
on the next run.

After the generated passes, every run with a tier (the default, ci and release
profiles) checks the op's release-gate strata (``conformance.strata``):
deterministic kernel-scale cases (CSR rows of every 2^k - 1, 2^k, 2^k + 1, a
kernel-scale input in every value dtype, the N-d ops' long segments at every
feature width, large unsorted scatters) judged by the plain references of
``conformance.exact``; a failing one is reported unshrunk, its message naming
the stratum, and saved for ``--replay`` (which uses the same reference). The
report's ``extra`` counts the strata checked ("strata") and names a failing one
("failed_stratum").

A backend may declare ``dtypes(op)`` (the value dtypes it accepts; only
those are drawn), ``variants(op)`` (several kernels computing the op: every
example is checked under each, called with ``variant=``) and may raise NotImplementedError for an input it declares
outside its support (the example is discarded, not failed).

A backend whose top-k keeps a kernel-defined choice among equal values
declares ``topk_ties = "kernel"``: its values must be exact (-0.0 and +0.0 count as equal there: the kernel may keep either), its indices valid.

Overflow contract: a backend declares ``overflow = "raise"`` (the default:
where an integer result overflows its dtype it must raise OverflowError) or
``"wrap"`` (it must return the two's-complement wrap-around, bit-exact).
"""
from __future__ import annotations

import contextvars
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, example, given, reject, settings
from hypothesis import seed as hyp_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Unsatisfiable, UnsatisfiedAssumption

from mmvref import mmv
from mmvref.registry import REGISTRY

from . import bounds, compare, exact, regimes, stages, strata, strategies
from .backends import BackendFailure, has_op
from .casefile import load_case, save_case
from .isolate import BackendCrash, BackendTimeout

__all__ = ["OpReport", "STATUSES", "golden_result", "one_example", "run_op", "run_stage", "replay", "PROFILES",
           "OVERFLOW_OPS", "STAGE_PREFIX"]

#: ops whose golden function and backends take ``overflow=``
OVERFLOW_OPS = ("scan", "batched_scan", "segmented_scan", "segmented_sum", "segment_sum_csr", "spmv", "spmm",
                "segment_csr", "segment_coo", "scatter")

#: how a stage of the golden model (``conformance.stages``) is named among the ops: "stage:NAME"
STAGE_PREFIX = "stage:"

#: example budgets: "default" for releases, "ci" derandomized and bounded
PROFILES = {"default": dict(max_examples=100, derandomize=False, tier="default"),
            "ci": dict(max_examples=40, derandomize=True, tier="default"),
            "release": dict(max_examples=200, derandomize=False, tier="release")}
#: the input tiers of the profiles (``conformance.regimes``): lengths at the backend's kernel seams,
#: up to 2^22 elements (default, ci) or 10^7 (release: 30% of the inputs of 1e6-1e7 elements)


class _Stop(BaseException):
    """Ends an op's Hypothesis run at once (a crash or a timeout is not shrunk: every
    shrink step would cost a worker restart or a full timeout). A BaseException, so
    Hypothesis lets it through."""


#: statuses of an op's report; "crash" and "timeout" come from an isolated backend
#: (``conformance.isolate``) or the per-op time limit
STATUSES = ("pass", "fail", "skipped", "crash", "timeout")


@dataclass
class OpReport:
    op: str
    backend: str
    status: str                  # one of STATUSES
    examples: int = 0            # generated inputs checked (not rejected ones, not shrink calls)
    failures: int = 0
    seconds: float = 0.0
    message: str = ""
    counterexample: str = ""
    command: str = ""
    replay_file: str = ""
    extra: dict = field(default_factory=dict)
    rejected: int = 0            # inputs declined (the backend's NotImplementedError, a dtype it lacks)
    shrink_calls: int = 0        # calls made while shrinking a failure
    worst_margin: float = 0.0    # largest error / tolerance over the passing examples (< 1; 0 exact)
    by_dtype: dict = field(default_factory=dict)  # value dtype -> the counts above and max_n

    def to_dict(self):
        return asdict(self)


def golden_result(op, args, kwargs, s, overflow="raise", reference="golden"):
    """The golden model's result for ``op`` (``reference="plain"``: ``exact.plain``'s, for the
    strata's kernel-scale cases); with ``overflow="raise"`` an integer result that overflows its
    dtype raises OverflowError."""
    if reference == "plain":
        return exact.plain(op, args, kwargs, overflow)
    if reference != "golden":
        raise ValueError(f"reference must be 'golden' or 'plain', got {reference!r}")
    spec = REGISTRY[op]
    kw = dict(kwargs)
    if op in OVERFLOW_OPS:
        kw["overflow"] = overflow
    if op in ("spmv", "spmm"):
        (ptr, ind, data, _shape), x = args
        return spec.golden(ptr, ind, data, x, s, **kw)
    if op == "spgemm":  # CSR out: compared as a dense matrix (see compare.check)
        return _dense_csr(spec.golden(*args, **kw))
    return spec.golden(*args, s, **kw)


_dense_csr = compare.dense_csr  # a CSR result as a dense array (the one definition is in conformance.compare)


def _rdt(op, args):
    try:
        first = args[0][2] if isinstance(args[0], tuple) else args[0]
        return REGISTRY[op].result_dtype(np.asarray(first).dtype)
    except Exception:
        return "its dtype"


#: the reference ``one_example`` takes when none is given: "golden", or "plain" while the runner
#: checks the strata (a context variable, so that the generated passes' test function, whose source
#: seeds a derandomized run, is the same for every pass)
_REFERENCE = contextvars.ContextVar("conformance_reference", default="golden")


def one_example(backend, op, args, kwargs, *, s, policy="derived", stats=None, reference=None):
    """None when the backend conforms on this input, else a message. ``stats`` (a dict)
    receives the comparison's "margin" (``compare.check``). ``reference``: "golden" (the golden
    model, its intermediate magnitudes checked against the op's bound) or "plain"
    (``exact.plain``: the strata's kernel-scale cases); None: the runner's current one."""
    reference = _REFERENCE.get() if reference is None else reference
    contract = getattr(backend, "overflow", "raise")
    with mmv.counting() as counter:
        try:
            expected, overflows = golden_result(op, args, kwargs, s, reference=reference), False
        except OverflowError:
            expected, overflows = golden_result(op, args, kwargs, s, "wrap", reference=reference), True
    msg = bounds.check_magnitude(op, args, s, counter) if reference == "golden" else None
    if msg:
        return msg
    for variant in variants_of(backend, op, _value_dtype(args)):
        call_kwargs = dict(kwargs) if variant is None else {**kwargs, "variant": variant}
        msg = _one_call(backend, op, args, kwargs, call_kwargs, expected, overflows, contract, s, policy, stats)
        if msg:
            return msg if variant is None else f"variant={variant!r}: {msg}"
    return None


def variants_of(backend, op, dtype=None):
    """The kernel variants the suite checks ``op`` under, for values of ``dtype``: every one the
    backend declares (``backend.variants(op)``: names, or a mapping name -> the value dtypes that
    variant takes, None for all), each called with ``variant=``; or the backend's one way (None).
    Values no declared variant takes are checked the backend's one way (it must then refuse or
    compute them)."""
    declared = backend.variants(op) if _has(backend, "variants") else ()
    if isinstance(declared, dict):
        declared = tuple(v for v, dts in declared.items()
                         if dts is None or dtype is None or np.dtype(dtype).name in tuple(dts))
    return tuple(declared) or (None,)


def _value_dtype(args):
    """The dtype of an op's values (its first array argument; a CSR matrix's data), or None."""
    for a in args:
        if isinstance(a, np.ndarray):
            return a.dtype
        if isinstance(a, tuple) and len(a) == 4 and isinstance(a[2], np.ndarray):
            return a[2].dtype
    return None


def _one_call(backend, op, args, kwargs, call_kwargs, expected, overflows, contract, s, policy, stats):
    """None when ``backend.op(*args, **call_kwargs)`` conforms (``kwargs``: the op's own, as the golden
    model took them), else a message."""
    try:
        actual = getattr(backend, op)(*args, **call_kwargs)
        if op == "spgemm":
            actual = _dense_csr(actual)
    except NotImplementedError:
        # the backend declares this input outside what it supports (e.g. a kernel option it lacks): rejected
        # (what hypothesis.reject() raises; raised here directly, as the strata run outside a Hypothesis test)
        raise UnsatisfiedAssumption("the backend declined this input (NotImplementedError)") from None
    except (BackendCrash, BackendTimeout):
        raise  # the caller records it (run_op: CRASH / TIMEOUT) instead of shrinking
    except OverflowError as exc:
        if overflows and contract == "raise":
            return None
        why = "the exact result fits its dtype" if not overflows else "the backend declares overflow='wrap'"
        return f"raised OverflowError ({exc}) but {why}; input: {compare._input_summary(args)}"
    except Exception as exc:  # a crash is a failure with the input that caused it
        return f"raised {type(exc).__name__}: {exc}; input: {compare._input_summary(args)}"
    try:
        return _check_result(backend, op, args, kwargs, expected, actual, overflows, contract, s, policy, stats)
    except Exception as exc:  # a result the checks cannot handle still fails with its input, never is lost
        return (f"checking the result raised {type(exc).__name__}: {exc} (returned {_kind(actual)}); "
                f"input: {compare._input_summary(args)}")


def _kind(v):
    t = type(v)
    return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__


def _protocol(expected, actual):
    """None when ``actual`` has the result protocol's types: numpy arrays where the golden
    model gives arrays (tuples part by part), numpy or Python scalars where it gives scalars."""
    if isinstance(expected, tuple):
        if not isinstance(actual, tuple) or len(actual) != len(expected):
            return f"returned {_kind(actual)}, expected a tuple of {len(expected)} numpy arrays"
        for k, (e, a) in enumerate(zip(expected, actual)):
            msg = _protocol(e, a)
            if msg:
                return f"part {k}: {msg}"
        return None
    if isinstance(expected, np.ndarray):
        if not isinstance(actual, np.ndarray):
            return (f"returned {_kind(actual)}, expected a numpy.ndarray (backends return numpy arrays of the "
                    f"declared shape and dtype)")
    elif not isinstance(actual, (np.generic, np.ndarray, int, float, bool)):
        return f"returned {_kind(actual)}, expected a numpy scalar"
    return None


def _check_result(backend, op, args, kwargs, expected, actual, overflows, contract, s, policy, stats=None):
    if overflows and contract == "raise":
        return (f"an integer result overflows {_rdt(op, args)} but the backend returned instead of raising "
                f"OverflowError (declare overflow='wrap' if wrap-around is its contract); "
                f"input: {compare._input_summary(args)}")
    msg = _protocol(expected, actual)
    if msg:
        return f"{msg}; input: {compare._input_summary(args)}"
    model = error_model(backend, op)
    if op == "topk" and getattr(backend, "topk_ties", "documented") == "kernel":
        # the kernel keeps its own choice among equal values: values exact, indices valid
        msg = compare.check(op, args, kwargs, expected[0], actual[0], s=s, policy=policy, model=model, stats=stats)
        ev, av = np.asarray(expected[0]), np.asarray(actual[0])
        if (msg is not None and ev.dtype.kind == "f" and av.dtype == ev.dtype and av.shape == ev.shape
                and np.array_equal(ev, av, equal_nan=True)):
            msg = None  # equal values: the kernel kept -0.0 where the order's tie rule keeps +0.0 (or back)
        idx, x = np.asarray(actual[1]), np.asarray(args[0])
        if msg is None and (idx.dtype != np.int64 or len(set(idx.tolist())) != idx.size
                            or (idx.size and (idx.min() < 0 or idx.max() >= x.size))
                            or not np.array_equal(x[idx].view(np.uint8), np.asarray(actual[0]).view(np.uint8))):
            msg = f"topk indices {idx.tolist()[:12]} do not point at the returned values (distinct, in range)"
        return msg
    return compare.check(op, args, kwargs, expected, actual, s=s, policy=policy, model=model, stats=stats)


def error_model(backend, op):
    """The float error model ``backend`` declares for ``op`` (``backend.error_model(op)``, one of
    ``compare.ERROR_MODELS``); "prefix", the loosest, when it declares none."""
    if not _has(backend, "error_model"):
        return "prefix"
    model = backend.error_model(op)
    if model not in compare.ERROR_MODELS:
        raise ValueError(f"the backend declares error model {model!r} for {op}; known: "
                         f"{', '.join(compare.ERROR_MODELS)}")
    return model


def _describe(args, kwargs):
    def one(a):
        if isinstance(a, np.ndarray):
            return f"np.array({a.tolist()!r}, dtype=np.{a.dtype})" if a.size <= 64 else \
                f"<{a.dtype} array of shape {a.shape}>"
        if isinstance(a, tuple):
            return "(" + ", ".join(one(b) for b in a) + ")"
        return repr(a)
    parts = [one(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return ", ".join(parts)


def op_dtypes(backend, op, requested=None):
    """The value dtypes to draw for ``op``: the op's (registry), narrowed to the backend's own
    (``backend.dtypes(op)``; None there: no restriction) and to ``requested`` (--dtypes) when
    given. None: every dtype the op takes; [] none at all."""
    return _narrowed(op, backend.dtypes(op) if _has(backend, "dtypes") else None, requested)


def _narrowed(op, declared, requested):
    """``op_dtypes`` with the backend's declaration (``declared``) already asked."""
    dtypes = [d.name for d in REGISTRY[op].dtypes] if op in REGISTRY else None
    if declared is not None:  # None: the backend declares no restriction for this op
        own = [np.dtype(d).name for d in declared]
        dtypes = own if dtypes is None else [d for d in dtypes if d in own]
    if requested is not None:
        dtypes = [d for d in (dtypes if dtypes is not None else requested) if d in requested]
    return dtypes


def run_op(backend, backend_name, op, *, s=8, max_examples=100, seed=None, derandomize=False,
           policy="derived", db=".conformance-db", failures_dir=None, progress=None, explicit=True,
           dtypes=None, op_timeout=None, tier="default", file_tag=""):
    """Check one op under Hypothesis; returns an OpReport. ``dtypes``: value dtypes requested
    (None: all), narrowed to those the op and the backend take. ``op_timeout``: seconds after
    which no further example starts (status "timeout"). A backend call that crashes its worker
    or times out (``conformance.isolate``) ends the op with status "crash" / "timeout" and
    that input saved for replay, unshrunk. ``tier``: the input tier (``conformance.regimes``:
    lengths at the backend's declared kernel seams; None: small inputs only). ``explicit``: check the
    op's explicit examples (``strategies.EXAMPLES``) and, with a tier, its release-gate strata
    (``conformance.strata``) too; False: generated inputs only."""
    if not _has(backend, op):
        return OpReport(op, backend_name, "skipped", message="backend has no such op")
    if op not in strategies.STRATEGIES:
        return OpReport(op, backend_name, "skipped", message="no strategy for this op (golden-only)")
    requested = dtypes
    try:
        declared = backend.dtypes(op) if _has(backend, "dtypes") else None
    except Exception as exc:  # noqa: BLE001 - the backend's own description failed
        return _failed_start(op, BackendFailure(backend_name, f"dtypes({op!r})", exc))
    undeclared = declared is None
    try:
        dtypes = _narrowed(op, declared, requested)
    except TypeError as exc:  # dtypes that are not dtypes
        return _failed_start(op, BackendFailure(backend_name, f"dtypes({op!r})", exc, kind="config"))
    if dtypes is not None and not dtypes:
        return OpReport(op, backend_name, "skipped",
                        message=f"no value dtype that the op, the backend and --dtypes {requested} all take")
    if requested is None and undeclared:
        dtypes = None  # every dtype: the strategies' own default mix
    count = [0]
    last = {}
    tally = {}  # value dtype -> examples, rejected, shrink_calls, worst_margin, max_n

    def counts(args):
        first = np.asarray(args[0][2] if isinstance(args[0], tuple) else args[0])  # a CSR operand: its data
        t = tally.setdefault(first.dtype.name, {"examples": 0, "rejected": 0, "shrink_calls": 0,
                                                "worst_margin": 0.0, "max_n": 0, "small": 0, "medium": 0,
                                                "large": 0})
        t["max_n"] = max(t["max_n"], int(first.size))
        return t

    def tier_of(args):
        n = int(np.asarray(args[0][2] if isinstance(args[0], tuple) else args[0]).size)
        return "small" if n <= 20 * s * s else "medium" if n <= regimes.MEDIUM_MAX else "large"

    derand = derandomize and seed is None  # a derandomized run has no example database (Hypothesis rule)
    # a named policy judges float sums on its domain of exactly summable values (compare's docstring)
    domain = "any" if policy == "derived" else "exact"

    def check(case):
        args, kwargs = case
        t = counts(args)
        shrinking = bool(last)  # after the first failure Hypothesis only shrinks it
        if dtypes is not None and not _accepts(args, dtypes):
            t["rejected"] += 1
            reject()  # an explicit example in a dtype the backend does not take
        if op_timeout is not None and time.perf_counter() - t0 > op_timeout:
            last.update(status="timeout", msg=f"{op} ran past its time limit of {op_timeout:g} s after "
                                              f"{count[0]} examples (no failing input: the op was stopped)")
            raise _Stop
        stats = {}
        try:
            msg = one_example(backend, op, args, kwargs, s=s, policy=policy, stats=stats)
        except UnsatisfiedAssumption:  # the backend declined this input
            t["rejected"] += 1
            raise
        except (BackendCrash, BackendTimeout) as exc:
            last.update(args=args, kwargs=kwargs, msg=str(exc),
                        status="crash" if isinstance(exc, BackendCrash) else "timeout")
            raise _Stop from None
        if shrinking:
            t["shrink_calls"] += 1
        else:
            t["examples"] += 1
            t[tier_of(args)] += 1  # the regimes covered: examples per input tier
            count[0] += 1  # generated examples checked: rejected inputs and shrink calls are not counted
            if msg is None:
                t["worst_margin"] = max(t["worst_margin"], stats.get("margin", 0.0))
        if progress:
            progress(op, count[0])
        if msg:
            last.update(args=args, kwargs=kwargs, msg=msg)
            raise AssertionError(msg)

    def kernel_regimes(classes):
        try:
            return regimes.for_backend(backend, s, tier, classes)
        except Exception as exc:  # noqa: BLE001 - the backend's regimes() raised, or declared nonsense
            raise BackendFailure(backend_name, "regimes()", exc,
                                 kind="config" if isinstance(exc, regimes.RegimesError) else "crash") from None

    def passes():
        """(strategy, examples, database subfolder, explicit cases) per pass: with a tier, the small
        lengths and then the kernel-scale ones (``regimes`` module docstring), each its share of the
        budget; without, one pass of small inputs."""
        if not tier:
            return [(strategies.op_inputs(op, s, dtypes, None, domain), max_examples, "", True)]
        n_small = (max(1, round(max_examples * regimes.share(tier, ("small",)) / 100)) if max_examples > 1
                   else max_examples)
        out = [(strategies.op_inputs(op, s, dtypes, kernel_regimes(("small",)), domain), n_small, "", True)]
        if max_examples - n_small > 0:
            kernel = kernel_regimes(("medium", "large"))
            out.append((strategies.op_inputs(op, s, dtypes, kernel, domain), max_examples - n_small, "kernel",
                        False))
        return out

    strata_seen = {}  # stratum -> cases checked

    def run_strata():
        """The release-gate strata (``conformance.strata``): deterministic kernel-scale cases, after
        the generated passes; a failure is reported unshrunk, naming its stratum."""
        token = _REFERENCE.set("golden")
        try:
            for case in strata.cases(op, s, dtypes, kernel_regimes(("medium", "large")), 0 if seed is None else seed):
                before = count[0]
                _REFERENCE.set(case.reference)  # one_example judges the case by it (exact.plain)
                try:
                    check((case.args, case.kwargs))
                except UnsatisfiedAssumption:
                    continue
                except AssertionError:
                    m = re.search(r"(?:^|: )index (\d+):", last.get("msg", ""))
                    where = case.locate(m.group(1)) if m else ""
                    last["msg"] = f"stratum {case.stratum} ({case.label}{where}): {last.get('msg', '')}"
                    last["stratum"] = {"stratum": case.stratum, "label": case.label}
                    last["reference"] = case.reference  # the saved case replays against it
                    raise
                if count[0] > before:
                    strata_seen[case.stratum] = strata_seen.get(case.stratum, 0) + 1
        finally:
            _REFERENCE.reset(token)

    def run_pass(strategy, n, sub, with_explicit):
        database = None
        if db and not derand:
            database = DirectoryBasedExampleDatabase(str(Path(db) / backend_name / sub) if sub else
                                                     str(Path(db) / backend_name))
        prop = settings(max_examples=n, deadline=None, derandomize=derand, database=database,
                        suppress_health_check=list(HealthCheck), print_blob=False, report_multiple_bugs=False,
                        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink])(given(strategy)(check))
        for case in strategies.EXAMPLES.get(op, ()) if explicit and with_explicit else ():
            prop = example(case)(prop)
        if seed is not None:
            prop = hyp_seed(seed)(prop)
        prop()

    t0 = time.perf_counter()
    try:
        for i, (strategy, n, sub, with_explicit) in enumerate(passes()):
            try:
                run_pass(strategy, n, sub, with_explicit)
            except Unsatisfiable:
                if i == 0 or count[0] == 0:
                    raise
                # the backend declined every kernel-scale input: the report's rejected count shows it
        if tier and explicit:
            run_strata()
    except BackendFailure as exc:  # regimes() raised: no input of this op can be drawn
        return _tallied(_failed_start(op, exc), tally)
    except (AssertionError, _Stop):
        pass
    except Unsatisfiable:
        if count[0] == 0 and not last:  # nothing was checked: no evidence either way
            return _tallied(OpReport(op, backend_name, "skipped", 0, 0, time.perf_counter() - t0,
                                     message="the backend declined every generated input (NotImplementedError)"),
                            tally)
        last.setdefault("msg", "Hypothesis: too many inputs rejected")
    except Exception as exc:  # Hypothesis itself (e.g. flaky) or the strategy
        last.setdefault("msg", f"{type(exc).__name__}: {exc}")
    secs = time.perf_counter() - t0
    extra = {"strata": dict(strata_seen)} if tier and explicit and op in strata.STRATA_OPS else {}
    if not last:
        return _tallied(OpReport(op, backend_name, "pass", count[0], 0, secs, extra=extra), tally)
    if "stratum" in last:
        extra["failed_stratum"] = last["stratum"]
    rep = OpReport(op, backend_name, last.get("status", "fail"), count[0], 1, secs, message=last["msg"],
                   counterexample=_describe(last.get("args", ()), last.get("kwargs", {})) if "args" in last else "",
                   extra=extra)
    cmd = f"python -m conformance --backend {backend_name} --ops {op} --s {s}"
    if seed is not None:
        cmd += f" --seed {seed}"
    if failures_dir and "args" in last:
        path = Path(failures_dir) / f"{backend_name.replace(':', '_')}-{op}{file_tag}.npz"
        try:
            path = save_case(path, {"op": op, "args": tuple(last["args"]), "kwargs": dict(last["kwargs"]),
                                    "s": s, "policy": policy, "backend": backend_name,
                                    **({"reference": last["reference"]} if "reference" in last else {})})
        except TypeError as exc:  # an input that is not data: keep the report, say why there is no file
            rep.message += f" (counterexample not saved: {exc})"
        else:
            rep.replay_file = str(path.resolve())
            cmd = f"python -m conformance --backend {backend_name} --replay {path.resolve()}"
    rep.command = cmd
    return _tallied(rep, tally)


def run_stage(backend, backend_name, stage, *, s=8, max_examples=100, seed=None):
    """Check one stage of the golden model (``conformance.stages``) that the backend exposes, run
    like an op (Hypothesis, shrinking); returns its OpReport (op "stage:NAME")."""
    strat, gold = stages.STAGES[stage]
    last = {}
    count = [0]

    dtypes = backend.dtypes(STAGE_PREFIX + stage) if _has(backend, "dtypes") else None

    @settings(max_examples=max_examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strat(s, dtypes))
    def prop(args):
        count[0] += 1
        expected = np.asarray(gold(args, s))
        try:
            actual = np.asarray(getattr(backend, stage)(*args))
        except (BackendCrash, BackendTimeout) as exc:  # not shrunk: see _Stop
            last.update(args=args, msg=str(exc), status="crash" if isinstance(exc, BackendCrash) else "timeout")
            raise _Stop from None
        msg = stages.check(stage, args, expected, actual, s)
        if msg:
            last.update(args=args, msg=msg)
            raise AssertionError(msg)

    if seed is not None:
        prop = hyp_seed(seed)(prop)
    t0 = time.perf_counter()
    try:
        prop()
    except (AssertionError, _Stop):
        pass
    rep = OpReport(STAGE_PREFIX + stage, backend_name, last.get("status", "fail") if last else "pass", count[0],
                   int(bool(last)),
                   time.perf_counter() - t0, message=last.get("msg", ""),
                   counterexample=_describe(last.get("args", ()), {}) if last else "")
    if last:
        rep.command = f"python -m conformance --backend {backend_name} --ops {STAGE_PREFIX}{stage} --s {s}"
    return rep


def _failed_start(op, failure):
    """The report of an op whose run could not start (a ``BackendFailure``): status "crash" when
    the backend's method raised, "fail" when it declared something unusable."""
    return OpReport(op, failure.backend, "crash" if failure.kind == "crash" else "fail", failures=1,
                    message=failure.line())


def _tallied(rep, tally):
    """``rep`` with the per-dtype counts and their totals."""
    rep.by_dtype = {d: dict(t) for d, t in sorted(tally.items())}
    rep.rejected = sum(t["rejected"] for t in tally.values())
    rep.shrink_calls = sum(t["shrink_calls"] for t in tally.values())
    rep.worst_margin = max((t["worst_margin"] for t in tally.values()), default=0.0)
    return rep


def replay(backend, path, *, s=None, policy=None):
    """Re-run a saved counterexample; returns (op, message or None). ``s`` and ``policy``
    override the saved ones. The file is read as data only (``casefile.load_case``): a file
    that is not a case file raises CaseFileError; a case in a value dtype the backend does not
    take raises ValueError naming it."""
    case = load_case(path)
    op = case["op"]
    args = case["args"]
    dtypes = op_dtypes(backend, op) if _has(backend, "dtypes") else None
    if dtypes is not None and not _accepts(args, dtypes):
        first = args[0][2] if isinstance(args[0], tuple) else args[0]
        raise ValueError(f"the case's {op} values are {np.asarray(first).dtype}, which this backend does not "
                         f"take (it takes {', '.join(dtypes)})")
    ref = case.get("reference", "golden")
    msg = one_example(backend, op, args, case["kwargs"], s=case["s"] if s is None else s,
                      policy=case["policy"] if policy is None else policy,
                      **({"reference": ref} if ref != "golden" else {}))
    return op, msg


def _accepts(args, dtypes):
    first = args[0][2] if isinstance(args[0], tuple) else args[0]  # a CSR operand: its data
    return np.asarray(first).dtype.name in dtypes


_has = has_op  # the one definition is in conformance.backends
