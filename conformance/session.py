"""What ``python -m conformance`` does, as library functions: its ``__main__`` parses the
arguments, calls these and prints.

- ``resolve_or_exit``: start and describe the backend (in a worker process when a call
  timeout is given, ``conformance.isolate``), or a ``ConfigError`` carrying the exit status;
- ``replay``: re-run one saved counterexample (``runner.replay``);
- ``run_backend``: the run itself, serial (``suite.run``), over worker processes
  (``jobs.run_jobs``) or a ``--time-budget`` campaign (``suite.campaign``), its reports written
  after every op and at the end (``conformance.report``); an ``Outcome`` with its exit status;
- ``mutation_exit_code``: the status of ``suite.mutation_score``'s rows.

Exit statuses (``EXIT_*``; see ``conformance.__main__``'s docstring): 0 every op conforms; 1 some do
not; 2 usage or configuration error; 3 the backend is unavailable here; 4 the backend crashed or
timed out.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import npu
from mmvref.registry import REGISTRY

from . import backends, faults, report, runner, suite
from .isolate import BackendCrash, BackendTimeout, IsolatedBackend

__all__ = ["EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_UNAVAILABLE", "EXIT_CRASH", "ConfigError",
           "resolve_or_exit", "dtype_names", "requested_ops", "examples_for", "seed_for", "op_listing",
           "fault_listing", "Replay", "replay", "Outcome", "run_backend", "mutation_exit_code"]

#: exit statuses (see ``conformance.__main__``)
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_CRASH = 0, 1, 2, 3, 4


class ConfigError(Exception):
    """A configuration problem: the message (one line) and the exit status ``code``; ``failure``:
    the backend's failure while starting (``backends.BackendFailure``), for the report;
    ``reports``: the directory a report of that failure was written to (``run_backend``), or None."""

    def __init__(self, code, msg, failure=None):
        super().__init__(msg)
        self.code = code
        self.failure = failure
        self.reports = None


def resolve_or_exit(name, s, call_timeout=None):
    """The backend, started and described (in a worker process when ``call_timeout`` is given:
    ``IsolatedBackend``), or ConfigError with status 3 (unavailable here), 2 (a name that resolves
    to nothing: unknown backend or fault, a module or attribute that does not exist; or the backend
    declared something unusable) or 4 (a method of the backend raised while starting or describing
    it, or the worker crashed or hung): see ``conformance.__main__``'s docstring."""
    try:
        if call_timeout:
            return IsolatedBackend(name, s, call_timeout=call_timeout)  # its worker describes the backend
        backend = faults.resolve(name, s)
        backends.describe(backend, name, s=s)
        return backend
    except npu.NpuUnavailableError as exc:
        raise ConfigError(EXIT_UNAVAILABLE, f"backend {name} is unavailable here: {exc}") from None
    except backends.BackendFailure as exc:
        if exc.kind == "config":
            raise ConfigError(EXIT_USAGE, f"{exc.line()} (while starting the backend)", failure=exc) from None
        raise ConfigError(EXIT_CRASH, f"{exc.line()} (while starting the backend)", failure=exc) from None
    except (ValueError, ImportError, AttributeError) as exc:
        raise ConfigError(EXIT_USAGE, f"--backend {name}: {type(exc).__name__}: {' '.join(str(exc).split())}") \
            from None
    except (BackendCrash, BackendTimeout) as exc:
        raise ConfigError(EXIT_CRASH, f"backend {name}: {exc}",
                          failure=backends.BackendFailure(name, "its worker process", exc)) from None


def dtype_names(dtypes):
    """``--dtypes``: the names of the requested value dtypes (None: all), or ConfigError."""
    if not dtypes:
        return dtypes
    import numpy as np

    try:
        return [np.dtype(d).name for d in dtypes]
    except TypeError as exc:
        raise ConfigError(EXIT_USAGE, f"--dtypes: {exc}") from None


def requested_ops(ops):
    """``--ops``: the ops to check (None or empty: every op and stage, ``suite.all_op_names``), or
    ConfigError naming the unknown ones."""
    all_ops = suite.all_op_names()
    ops = ops or all_ops
    unknown = [o for o in ops if o not in all_ops]
    if unknown:
        raise ConfigError(EXIT_USAGE, f"unknown ops {unknown}; known: {', '.join(all_ops)}")
    return ops


def examples_for(profile, max_examples=None):
    """Examples per op: ``max_examples`` when given, else the profile's (``runner.PROFILES``)."""
    return max_examples if max_examples is not None else runner.PROFILES[profile]["max_examples"]


def seed_for(profile, seed=None):
    """The run's seed: ``seed``; a fresh one when None and the profile is not derandomized (an
    unseeded run still reports, and can rerun, its seed); None for a derandomized run."""
    if seed is None and not runner.PROFILES[profile]["derandomize"]:
        import random

        return random.SystemRandom().randrange(2**32)
    return seed


def op_listing():
    """``--list-ops``: (name, one line) per op and stage, in ``suite.all_op_names`` order."""
    out = []
    for name in suite.all_op_names():
        if name.startswith(runner.STAGE_PREFIX):
            from mmvref import golden

            stage = name[len(runner.STAGE_PREFIX):]
            doc = (getattr(getattr(golden, stage, None), "__doc__", "") or "").strip()
            out.append((name, f"stage of the golden model: {doc.splitlines()[0] if doc else stage}"))
        else:
            spec = REGISTRY[name]
            out.append((name, f"{spec.signature}; dtypes {', '.join(d.name for d in spec.dtypes)}"))
    return out


def fault_listing():
    """``--list-faults``: (name, its ops, one line) per named fault (``faults.FAULTS``)."""
    return [(f.name, tuple(f.ops), f.description.strip().splitlines()[0]) for f in faults.FAULTS.values()]


@dataclass
class Replay:
    """A replayed case: its ``op`` and ``message`` (None: the backend conforms), or ``crash``, the
    BackendCrash / BackendTimeout the (isolated) backend ended with."""
    op: str | None = None
    message: str | None = None
    crash: BaseException | None = None

    @property
    def crash_kind(self):
        """"crash" (the worker died), "timeout" (it did not answer in time), or None."""
        if self.crash is None:
            return None
        return "crash" if isinstance(self.crash, BackendCrash) else "timeout"


def replay(name, path, *, s, replay_s=None, policy=None, call_timeout=None):
    """``--replay``: the saved case ``path`` re-run on the backend ``name`` (started with tile size
    ``s``; ``replay_s`` and ``policy`` override the saved ones when given). ConfigError for a file
    that is not a case file (before the backend is started), a backend that does not start, or a
    case in a dtype the backend does not take."""
    from .casefile import CaseFileError, load_case

    try:
        load_case(path)  # refuse a file that is not a case file before resolving the backend
    except CaseFileError as exc:
        raise ConfigError(EXIT_USAGE, f"--replay {exc}") from None
    try:
        op, msg = runner.replay(resolve_or_exit(name, s, call_timeout), path, s=replay_s, policy=policy)
    except ValueError as exc:  # a case in a dtype this backend does not take
        raise ConfigError(EXIT_USAGE, f"--replay {path}: {exc}") from None
    except (BackendCrash, BackendTimeout) as exc:
        return Replay(crash=exc)
    return Replay(op, msg)


@dataclass
class Outcome:
    """A finished run: its reports (one per op), its seconds and the directory its reports were
    written to (None without ``--report``)."""
    reports: list = field(default_factory=list)
    seconds: float = 0.0
    report_dir: str | None = None

    @property
    def failed(self):
        return [r for r in self.reports if r.status not in ("pass", "skipped")]

    @property
    def broke(self):
        """Ops that ended by a crash or a timeout."""
        return [r for r in self.reports if r.status in ("crash", "timeout")]

    @property
    def ran(self):
        return [r for r in self.reports if r.status != "skipped"]

    @property
    def exit_code(self):
        if not self.ran:
            return EXIT_FAIL
        return EXIT_CRASH if self.broke else (EXIT_FAIL if self.failed else EXIT_OK)


def run_backend(name, ops, *, profile, examples, seed, s, policy, db, report_dir=None, dtypes=None,
                call_timeout=None, op_timeout=None, jobs=1, time_budget=None, argv=None, log=print):
    """The run of ``python -m conformance``: the backend ``name`` started (``resolve_or_exit``), then
    ``ops`` checked serially, over ``jobs`` worker processes or as a ``time_budget`` campaign, each
    op logged through ``log``; with ``report_dir`` the reports rewritten after every op (marked
    incomplete) and at the end. A backend that does not start raises ConfigError, its
    ``reports`` naming the directory of the one-row ("startup") report written when there is a
    failure to report. ``argv``: the command line, for the reports."""
    prof = runner.PROFILES[profile]
    t0 = time.perf_counter()
    try:
        backend_obj = resolve_or_exit(name, s, call_timeout)
    except ConfigError as exc:
        if report_dir and exc.failure is not None:  # the report says why nothing ran
            row = runner.OpReport("startup", name, "crash" if exc.failure.kind == "crash" else "fail",
                                  failures=1, message=str(exc), command=report.command_line(argv),
                                  extra={"method": exc.failure.method, "error_type": exc.failure.error_type})
            exc.reports = report.write_all(report_dir, [row], backend=name, profile=profile, seed=seed, s=s,
                                           policy=policy, seconds=time.perf_counter() - t0,
                                           versions=report.versions(), command=report.command_line(argv),
                                           complete=True)
        raise
    versions = report.versions(backend_obj)  # asked once (its version() was asked while describing it)

    def write_reports(reps, complete):
        return report.write_all(report_dir, reps, backend=name, profile=profile, seed=seed, s=s, policy=policy,
                                seconds=time.perf_counter() - t0, versions=versions,
                                command=report.command_line(argv), complete=complete)

    on_report = (lambda r: write_reports(r, False)) if report_dir else None
    common = dict(s=s, max_examples=examples, derandomize=prof["derandomize"], policy=policy, db=db,
                  report_dir=report_dir, dtypes=dtypes, tier=prof["tier"])
    if time_budget:
        reps = suite.campaign(name, ops, time_budget, backend=backend_obj, on_report=on_report, seed=seed, log=log,
                              **common)
    elif jobs > 1:
        from .jobs import run_jobs

        reps = run_jobs(name, ops, jobs, call_timeout=call_timeout, on_report=on_report, seed=seed,
                        op_timeout=op_timeout, log=log, **common)
    else:
        reps = suite.run(name, ops, seed=seed, backend=backend_obj, op_timeout=op_timeout, on_report=on_report,
                         log=log, **common)
    if isinstance(backend_obj, IsolatedBackend):
        backend_obj.close()
    secs = time.perf_counter() - t0
    written = write_reports(reps, True) if report_dir else None
    return Outcome(reps, secs, None if written is None else str(written))


def mutation_exit_code(rows):
    """The status of a ``--mutation-score`` run (``suite.mutation_score``'s rows): 0 when no
    applicable fault went undetected, else 1."""
    return EXIT_OK if all(r[1] is not False for r in rows) else EXIT_FAIL
