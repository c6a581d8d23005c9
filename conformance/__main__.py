"""python -m conformance --backend NAME [--ops OP ...] [--max-examples N] [--seed S] [--report DIR]

NAME: mmvref, emulation, tcuscan, dask (``npu.BACKENDS``), ``package.module:attribute``
naming any backend object, or ``faulty:FAULT:BASE`` (a named fault injected into
BASE). ``--mutation-score`` runs every fault of ``conformance.faults`` against
the backend and reports which were detected. ``--replay FILE`` re-runs a saved
counterexample.

The backend runs in a worker process (``conformance.isolate``; ``--no-isolate``
runs it in this one): a call that crashes the worker or takes longer than
``--timeout`` seconds ends that op with status CRASH or TIMEOUT, its input saved
for ``--replay``, and the run goes on with the next op. ``--op-timeout`` bounds
each op's whole run. With ``--report DIR`` the reports are rewritten after every
op (marked incomplete until the run ends), so a killed run still leaves one.

Exit status: 0 every op (and every stage the backend exposes) conforms; 1 some
do not (or a fault went undetected); 2 usage or configuration error (an unknown
backend, op or fault, a file that is not a case file), one line on stderr;
3 the backend is unavailable on this machine (e.g. no NPU); 4 the backend
crashed or timed out (on some op, or while starting), whatever the other ops did.

Starting the backend (``conformance.backends``: resolving its name, calling its
class or factory, then asking it once for its ops, ``dtypes``, ``variants``,
``error_model``, ``regimes()``, ``overflow``, ``topk_ties``, ``s`` and
``version``) ends the run when it fails, with one line on stderr naming the
backend and the method, and, with ``--report DIR``, a report whose one row
("startup") says so:

- 4 (row status "crash"): an exception raised by the backend's own code, e.g.
  its constructor or ``regimes()`` failing to query the device. The suite called
  into the backend and the backend broke, as when an op crashes.
- 2 (row status "fail"): the backend answered, but with something the suite
  cannot use (regimes it does not know, an error model or overflow contract that
  does not exist, dtypes that are not dtypes): a configuration error, like a
  name that resolves to nothing (unknown backend, module or attribute; no report
  then: there is no backend to report on).
- 3: ``npu.NpuUnavailableError`` (no device here), not a failure of the backend.
A describing method that raises later, on one op, ends that op as CRASH (or FAIL
for an unusable answer) and the run goes on.
"""
from __future__ import annotations

import argparse
import sys
import time

import npu
from mmvref.registry import REGISTRY

from . import backends, faults, report, runner, stages
from .isolate import DEFAULT_CALL_TIMEOUT, BackendCrash, BackendTimeout, IsolatedBackend

_STAGE_PREFIX = "stage:"


#: seconds between progress lines when stdout is not a terminal (CI logs)
PROGRESS_EVERY_S = 10.0


def _progress_printer(enabled):
    """A progress callback: on a terminal, one line rewritten in place; in a log (not a TTY),
    a line at most every PROGRESS_EVERY_S seconds, so a long op still shows it is alive."""
    if not enabled:
        return None
    if sys.stdout.isatty():
        def show(op, k):
            if k % 5 == 0:
                sys.stdout.write(f"\r  {op:22s} {k:5d} examples ...")
                sys.stdout.flush()
        return show
    t0 = [time.monotonic(), time.monotonic()]  # op start, last line

    def log_line(op, k):
        now = time.monotonic()
        if k == 1:
            t0[0] = t0[1] = now
        if now - t0[1] >= PROGRESS_EVERY_S:
            t0[1] = now
            print(f"  {op:28s} {k:5d} examples so far, {now - t0[0]:6.1f} s ...", flush=True)
    return log_line


#: exit statuses (see the module docstring)
EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_CRASH = 0, 1, 2, 3, 4


class _Exit(Exception):
    """A configuration problem: the message (one line) and the exit status; ``failure``: the
    backend's failure while starting (``backends.BackendFailure``), for the report."""

    def __init__(self, code, msg, failure=None):
        super().__init__(msg)
        self.code = code
        self.failure = failure


def _resolve(name, s):
    if name.startswith("faulty:"):
        parts = name.split(":", 2)
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise ValueError(f"faulty backends are named faulty:FAULT:BASE, got {name!r}")
        _, fault, base = parts
        return faults.FaultyBackend(backends.resolve(base), fault, s)
    return backends.resolve(name)


def resolve_or_exit(name, s, call_timeout=None):
    """The backend, started and described (in a worker process when ``call_timeout`` is given:
    ``IsolatedBackend``), or _Exit with status 3 (unavailable here), 2 (a name that resolves to
    nothing: unknown backend or fault, a module or attribute that does not exist; or the backend
    declared something unusable) or 4 (a method of the backend raised while starting or
    describing it, or the worker crashed or hung): see the module docstring."""
    try:
        if call_timeout:
            return IsolatedBackend(name, s, call_timeout=call_timeout)  # its worker describes the backend
        backend = _resolve(name, s)
        backends.describe(backend, name, s=s)
        return backend
    except npu.NpuUnavailableError as exc:
        raise _Exit(EXIT_UNAVAILABLE, f"backend {name} is unavailable here: {exc}") from None
    except backends.BackendFailure as exc:
        if exc.kind == "config":
            raise _Exit(EXIT_USAGE, f"{exc.line()} (while starting the backend)", failure=exc) from None
        raise _Exit(EXIT_CRASH, f"{exc.line()} (while starting the backend)", failure=exc) from None
    except (ValueError, ImportError, AttributeError) as exc:
        raise _Exit(EXIT_USAGE, f"--backend {name}: {type(exc).__name__}: {' '.join(str(exc).split())}") from None
    except (BackendCrash, BackendTimeout) as exc:
        raise _Exit(EXIT_CRASH, f"backend {name}: {exc}",
                    failure=backends.BackendFailure(name, "its worker process", exc)) from None


def _stage_report(backend, name, stage, s, examples, seed):
    """A stage check, run like an op (Hypothesis, shrinking, a report row)."""
    import numpy as np
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hyp_seed

    strat, gold = stages.STAGES[stage]
    last = {}
    count = [0]

    dtypes = backend.dtypes(_STAGE_PREFIX + stage) if runner._has(backend, "dtypes") else None

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(strat(s, dtypes))
    def prop(args):
        count[0] += 1
        expected = np.asarray(gold(args, s))
        try:
            actual = np.asarray(getattr(backend, stage)(*args))
        except (BackendCrash, BackendTimeout) as exc:  # not shrunk: see runner._Stop
            last.update(args=args, msg=str(exc), status="crash" if isinstance(exc, BackendCrash) else "timeout")
            raise runner._Stop from None
        msg = stages.check(stage, args, expected, actual, s)
        if msg:
            last.update(args=args, msg=msg)
            raise AssertionError(msg)

    if seed is not None:
        prop = hyp_seed(seed)(prop)
    t0 = time.perf_counter()
    try:
        prop()
    except (AssertionError, runner._Stop):
        pass
    rep = runner.OpReport(_STAGE_PREFIX + stage, name, last.get("status", "fail") if last else "pass", count[0],
                          int(bool(last)),
                          time.perf_counter() - t0, message=last.get("msg", ""),
                          counterexample=runner._describe(last.get("args", ()), {}) if last else "")
    if last:
        rep.command = f"python -m conformance --backend {name} --ops {_STAGE_PREFIX}{stage} --s {s}"
    return rep


def run(name, ops, *, s, max_examples, seed, derandomize, policy, db, report_dir, progress=True, log=print,
        explicit=True, dtypes=None, backend=None, op_timeout=None, on_report=None, tier="default", clean=True,
        file_tag=""):
    """Every op of ``ops`` on the backend ``name`` (resolved here unless ``backend`` is given);
    the list of OpReports. ``on_report(reports)`` is called after each op. ``clean``: remove
    earlier runs' counterexample files first (see below); ``file_tag`` is appended to this
    run's counterexample file names (rounds of a --time-budget campaign)."""
    backend = _resolve(name, s) if backend is None else backend
    s = getattr(backend, "s", s)
    fail_dir = _failures_dir(report_dir, db)
    if fail_dir and clean:  # only this run's counterexamples: a report directory's from earlier runs, and in the
        # database's folder this backend's files for the ops about to run, are removed
        from pathlib import Path

        stale = (Path(fail_dir).glob("*.npz") if report_dir else
                 (Path(fail_dir) / f"{name.replace(':', '_')}-{op}.npz" for op in ops))
        for old in stale:
            old.unlink(missing_ok=True)
    reports = []
    for op in ops:
        if op.startswith(_STAGE_PREFIX):
            stage = op[len(_STAGE_PREFIX):]
            if not runner._has(backend, stage):
                reports.append(runner.OpReport(op, name, "skipped", message="backend does not expose this stage"))
            else:
                reports.append(_stage_report(backend, name, stage, s, max_examples, seed))
        else:
            reports.append(runner.run_op(backend, name, op, s=s, max_examples=max_examples, seed=seed,
                                         derandomize=derandomize, policy=policy, db=db, failures_dir=fail_dir,
                                         progress=_progress_printer(progress),
                                         explicit=explicit, dtypes=dtypes, op_timeout=op_timeout, tier=tier,
                                         file_tag=file_tag))
        r = reports[-1]
        if progress and sys.stdout.isatty():
            sys.stdout.write("\r" + " " * 60 + "\r")
        status = {"pass": "ok", "skipped": f"skipped ({r.message})"}.get(r.status, r.status.upper())
        more = "".join(f", {v} {k}" for k, v in (("rejected", r.rejected), ("shrink calls", r.shrink_calls)) if v)
        log(f"  {r.op:28s} {r.examples:5d} examples {r.seconds:7.2f} s  {status}{more}")
        if on_report is not None:
            on_report(reports)
        if r.status in ("crash", "timeout") and not r.counterexample:
            log(f"      {r.message}")
        elif r.status != "pass" and r.status != "skipped":
            log(f"      {r.message}")
            log(f"      {'minimal counterexample' if r.status == 'fail' else 'input (not shrunk)'}: "
                f"{r.counterexample}")
            log(f"      reproduce: {r.command}")
    return reports


def _failures_dir(report_dir, db):
    return (report_dir + "/failures") if report_dir else (db + "/failures" if db else None)


def _signature(r):
    """What makes two failures of a campaign the same: op, status and the message without its input
    and numbers."""
    import re

    return (r.op, r.status, re.sub(r"[-+0-9.e]+", "#", r.message.split("; input:")[0])[:120])


def campaign(name, ops, budget, *, log=print, seed=None, **kw):
    """--time-budget: rounds of every op with fresh seeds until ``budget`` seconds are spent (an op
    running at the end is stopped by its op timeout); every distinct failure (``_signature``) is
    kept, its counterexample saved with a round tag. Returns one merged report per op: examples
    and counts summed over rounds, the first failure of each distinct kind in ``extra``."""
    import random

    t_end = time.perf_counter() + budget
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    merged, seen, rounds = {}, set(), 0
    while time.perf_counter() < t_end:
        left = t_end - time.perf_counter()
        reps = run(name, ops, seed=rng.randrange(2**32), op_timeout=max(left, 1.0), clean=rounds == 0,
                   file_tag=f"-round{rounds}", log=lambda *a: None, progress=False, **kw)
        for r in reps:
            m = merged.setdefault(r.op, runner.OpReport(r.op, r.backend, "skipped", message=r.message))
            if r.status == "timeout" and not r.counterexample:  # the budget ran out inside this op
                continue
            m.examples += r.examples
            m.rejected += r.rejected
            m.shrink_calls += r.shrink_calls
            m.seconds += r.seconds
            m.worst_margin = max(m.worst_margin, r.worst_margin)
            if m.status == "skipped" and r.status != "skipped":
                m.status, m.message = "pass", ""
            if r.status not in ("pass", "skipped"):
                if _signature(r) in seen:
                    if r.replay_file:  # the same failure again: keep only the first file
                        from pathlib import Path

                        Path(r.replay_file).unlink(missing_ok=True)
                    continue
                seen.add(_signature(r))
                if m.status in ("pass", "skipped"):
                    m.status, m.message, m.counterexample, m.command, m.replay_file = (
                        r.status, r.message, r.counterexample, r.command, r.replay_file)
                m.failures += 1
                m.extra.setdefault("distinct_failures", []).append(
                    {"round": rounds, "status": r.status, "message": r.message[:500], "replay_file": r.replay_file})
        rounds += 1
        log(f"  round {rounds}: {sum(r.examples for r in reps)} examples, "
            f"{len(seen)} distinct failures so far, {max(0.0, t_end - time.perf_counter()):.0f} s left")
    out = [merged[op] for op in ops if op in merged]
    for r in out:
        r.extra["rounds"] = rounds
    return out


def mutation_score(base, ops, *, s, max_examples, seed, derandomize, log=print):
    """Every fault injected into ``base``: rows (name, detected, report, ops) where detected is
    True (a comparison failed), False (MISSED) or None (N/A: the backend has none of the fault's
    ops, or takes none of the inputs the fault can act on). A fault counts as detected only by a
    failed comparison: inputs its wrapper cannot simulate are rejected, not counted
    (``faults.FaultNotApplicable``)."""
    rows = []
    backend = _resolve(base, s)
    for fname, fault in faults.FAULTS.items():
        todo = [op for op in ops if op in fault.ops]
        if not any(runner._has(backend, op) for op in todo):
            rows.append((fname, None, None, todo))
            log(f"  {fname:36s} {'N/A':30s} (the backend has none of the ops {todo})")
            continue
        why = fault.requires(backend) if fault.requires else None
        if why:
            rows.append((fname, None, None, todo))
            log(f"  {fname:36s} {'N/A':30s} ({why})")
            continue
        how = "generated"
        activated = 0
        for explicit in (False, True):  # generated (shrunk) inputs first; the explicit examples next
            faulty = faults.FaultyBackend(_resolve(base, s), fname, s)
            reps = run(faulty.name + ":" + base, todo, s=s, max_examples=max_examples, seed=seed,
                       derandomize=derandomize, policy="derived", db=None, report_dir=None, progress=False,
                       log=lambda *a: None, explicit=explicit, backend=faulty)
            activated += faulty.activated
            caught = [r for r in reps if r.status == "fail"]
            if caught:
                if "failed_stratum" in caught[0].extra:
                    how = f"stratum {caught[0].extra['failed_stratum']['stratum']}"
                break
            how = "explicit example"
        if not caught and (all(r.status == "skipped" or r.examples == 0 for r in reps) or not activated):
            rows.append((fname, None, None, todo))
            why = (f"no input of ops {todo} that the backend takes" if activated else
                   f"the fault changed no result on the inputs the backend takes for {todo}")
            log(f"  {fname:36s} {'N/A':30s} ({why})")
            continue
        rows.append((fname, bool(caught), caught[0] if caught else None, todo))
        log(f"  {fname:36s} {('detected (' + how + ')') if caught else 'MISSED':30s} "
            + (f"[{caught[0].op}] {caught[0].counterexample[:150]}" if caught else f"(ops {todo})"))
    applicable = [r for r in rows if r[1] is not None]
    detected = sum(bool(r[1]) for r in applicable)
    log(f"mutation score: {detected}/{len(applicable)} applicable faults detected "
        f"({len(rows) - len(applicable)} N/A)")
    return rows


def main(argv=None):
    try:
        return _main(argv)
    except _Exit as exc:
        print(f"python -m conformance: {'error: ' if exc.code == EXIT_USAGE else ''}{exc}", file=sys.stderr)
        return exc.code


def _main(argv):
    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="mmvref", help="mmvref, emulation, tcuscan, package.module:attr, "
                                                       "or faulty:FAULT:BASE")
    p.add_argument("--ops", nargs="*", default=None,
                   help="registry op names, or stage:NAME (default: all ops and stages the backend has)")
    p.add_argument("--profile", choices=sorted(runner.PROFILES), default="default",
                   help="example budget and input tier: default (100 per op, inputs at the backend's kernel "
                        "seams up to 2^22 elements), ci (40, derandomized) or release (200, 30%% of the inputs "
                        "of 1e6-1e7 elements); each then checks the release-gate strata (conformance.strata: "
                        "rows of every 2^k +- 1 non-zeros, every dtype and feature width at kernel scale)")
    p.add_argument("--max-examples", type=int, default=None, help="examples per op (overrides the profile)")
    p.add_argument("--seed", type=int, default=None, help="Hypothesis seed (reproducible runs)")
    p.add_argument("--s", type=int, default=None, help="tile size s for the golden model and the strategies "
                                                       "(default 8; a backend's own .s wins; with --replay, "
                                                       "overrides the saved one)")
    p.add_argument("--policy", choices=["derived", "double_thousandths", "mere_mare", "torch_testing"],
                   default=None, help="float comparison policy (see conformance.compare; default derived; with "
                                      "--replay, overrides the saved one)")
    p.add_argument("--report", metavar="DIR", default=None, help="write report.xml, report.json, report.md here")
    p.add_argument("--db", default=".conformance-db", help="Hypothesis example database (failures replay first)")
    p.add_argument("--replay", metavar="FILE", default=None, help="re-run one saved counterexample")
    p.add_argument("--mutation-score", action="store_true", help="inject every named fault; report detection")
    p.add_argument("--dtypes", nargs="+", default=None, metavar="DTYPE",
                   help="value dtypes to draw (e.g. int8 float16); with a backend's own dtypes, their intersection")
    p.add_argument("--no-isolate", dest="isolate", action="store_false",
                   help="run the backend in this process (default: in a worker process, see conformance.isolate)")
    p.add_argument("--timeout", type=float, default=DEFAULT_CALL_TIMEOUT, metavar="SECONDS",
                   help=f"seconds one backend call may take (isolated runs; default {DEFAULT_CALL_TIMEOUT:g})")
    p.add_argument("--op-timeout", type=float, default=None, metavar="SECONDS",
                   help="seconds each op's run may take; no new example starts after that (default: no limit)")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="run the ops in N worker processes (results as a serial run with the same seed)")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="a fuzzing campaign: rounds of every op with fresh seeds until SECONDS are spent, "
                        "every distinct failure saved")
    p.add_argument("--list-ops", action="store_true", help="list the ops (and stages) with one line each, and exit")
    p.add_argument("--list-faults", action="store_true", help="list the named faults with one line each, and exit")
    a = p.parse_args(argv)
    if a.list_ops:
        for name in all_op_names():
            if name.startswith(_STAGE_PREFIX):
                from mmvref import golden

                stage = name[len(_STAGE_PREFIX):]
                doc = (getattr(getattr(golden, stage, None), "__doc__", "") or "").strip()
                print(f"{name:26s} stage of the golden model: {doc.splitlines()[0] if doc else stage}")
            else:
                spec = REGISTRY[name]
                print(f"{name:26s} {spec.signature}; dtypes {', '.join(d.name for d in spec.dtypes)}")
        return EXIT_OK
    if a.list_faults:
        for f in faults.FAULTS.values():
            print(f"{f.name:36s} [{', '.join(f.ops)}] {f.description.strip().splitlines()[0]}")
        return EXIT_OK
    if a.dtypes:
        import numpy as np

        try:
            a.dtypes = [np.dtype(d).name for d in a.dtypes]
        except TypeError as exc:
            raise _Exit(EXIT_USAGE, f"--dtypes: {exc}") from None
    for flag, v, lo in (("--max-examples", a.max_examples, 1), ("--s", a.s, 2)):
        if v is not None and v < lo:  # 0 examples would test nothing and still pass
            print(f"python -m conformance: error: {flag} must be >= {lo}, got {v}", file=sys.stderr)
            return 2
    for flag, v in (("--timeout", a.timeout), ("--op-timeout", a.op_timeout), ("--time-budget", a.time_budget)):
        if v is not None and not v > 0:
            raise _Exit(EXIT_USAGE, f"{flag} must be > 0 seconds, got {v}")
    if a.jobs < 1:
        raise _Exit(EXIT_USAGE, f"--jobs must be >= 1, got {a.jobs}")
    if a.jobs > 1 and a.time_budget:
        raise _Exit(EXIT_USAGE, "--jobs and --time-budget do not combine (a campaign runs its rounds serially)")
    call_timeout = a.timeout if a.isolate else None
    replay_s, replay_policy = a.s, a.policy
    a.s = 8 if a.s is None else a.s
    a.policy = "derived" if a.policy is None else a.policy
    prof = runner.PROFILES[a.profile]
    examples = a.max_examples if a.max_examples is not None else prof["max_examples"]
    if a.replay:
        from .casefile import CaseFileError, load_case

        try:
            load_case(a.replay)  # refuse a file that is not a case file before resolving the backend
        except CaseFileError as exc:
            print(f"python -m conformance: error: --replay {exc}", file=sys.stderr)
            return 2
        try:
            op, msg = runner.replay(resolve_or_exit(a.backend, a.s, call_timeout), a.replay, s=replay_s,
                                    policy=replay_policy)
        except ValueError as exc:  # a case in a dtype this backend does not take
            raise _Exit(EXIT_USAGE, f"--replay {a.replay}: {exc}") from None
        except (BackendCrash, BackendTimeout) as exc:
            print(f"replay {a.replay} on {a.backend}: {'CRASH' if isinstance(exc, BackendCrash) else 'TIMEOUT'}: "
                  f"{exc}")
            return EXIT_CRASH
        print(f"replay {a.replay} ({op}) on {a.backend}: " + ("conforms" if msg is None else f"FAIL: {msg}"))
        return 0 if msg is None else 1
    all_ops = all_op_names()
    ops = a.ops or all_ops
    unknown = [o for o in ops if o not in all_ops]
    if unknown:
        raise _Exit(EXIT_USAGE, f"unknown ops {unknown}; known: {', '.join(all_ops)}")
    if a.mutation_score:
        resolve_or_exit(a.backend, a.s)
        print(f"conformance mutation score: base={a.backend} examples={examples}")
        rows = mutation_score(a.backend, ops, s=a.s, max_examples=examples, seed=a.seed,
                              derandomize=prof["derandomize"])
        return 0 if all(r[1] is not False for r in rows) else 1
    if a.seed is None and not prof["derandomize"]:  # an unseeded run still reports (and can rerun) its seed
        import random

        a.seed = random.SystemRandom().randrange(2**32)
    print(f"conformance: backend={a.backend} profile={a.profile} examples={examples} seed={a.seed} "
          f"policy={a.policy}")
    t0 = time.perf_counter()
    try:
        backend_obj = resolve_or_exit(a.backend, a.s, call_timeout)
    except _Exit as exc:
        if a.report and exc.failure is not None:  # the report says why nothing ran
            row = runner.OpReport("startup", a.backend, "crash" if exc.failure.kind == "crash" else "fail",
                                  failures=1, message=str(exc), command=report.command_line(argv),
                                  extra={"method": exc.failure.method, "error_type": exc.failure.error_type})
            d = report.write_all(a.report, [row], backend=a.backend, profile=a.profile, seed=a.seed, s=a.s,
                                 policy=a.policy, seconds=time.perf_counter() - t0, versions=report.versions(),
                                 command=report.command_line(argv), complete=True)
            print(f"reports: {d}/report.xml, report.json, report.md")
        raise
    versions = report.versions(backend_obj)  # asked once (its version() was asked while describing it)

    def write_reports(reps, complete):
        return report.write_all(a.report, reps, backend=a.backend, profile=a.profile, seed=a.seed, s=a.s,
                                policy=a.policy, seconds=time.perf_counter() - t0, versions=versions,
                                command=report.command_line(argv), complete=complete)

    on_report = (lambda r: write_reports(r, False)) if a.report else None
    common = dict(s=a.s, max_examples=examples, derandomize=prof["derandomize"], policy=a.policy, db=a.db,
                  report_dir=a.report, dtypes=a.dtypes, tier=prof["tier"])
    if a.time_budget:
        reps = campaign(a.backend, ops, a.time_budget, backend=backend_obj, on_report=on_report, seed=a.seed,
                        **common)
    elif a.jobs > 1:
        from .jobs import run_jobs

        reps = run_jobs(a.backend, ops, a.jobs, call_timeout=call_timeout, on_report=on_report, seed=a.seed,
                        op_timeout=a.op_timeout, **common)
    else:
        reps = run(a.backend, ops, seed=a.seed, backend=backend_obj, op_timeout=a.op_timeout, on_report=on_report,
                   **common)
    if isinstance(backend_obj, IsolatedBackend):
        backend_obj.close()
    secs = time.perf_counter() - t0
    failed = [r for r in reps if r.status not in ("pass", "skipped")]
    broke = [r for r in reps if r.status in ("crash", "timeout")]
    ran = [r for r in reps if r.status != "skipped"]
    if a.report:
        d = write_reports(reps, True)
        print(f"reports: {d}/report.xml, report.json, report.md")
    if not ran:
        print("conformance: FAIL (no op ran: the backend implements none of the requested ops)")
        return 1
    verdict = "PASS" if not failed else f"{len(failed)} op(s) FAILED" + (
        f" ({len(broke)} by crash or timeout)" if broke else "")
    print(f"conformance: {verdict} ({len(ran)} checked, {len(reps) - len(ran)} skipped, {secs:.1f} s)")
    return EXIT_CRASH if broke else (EXIT_FAIL if failed else EXIT_OK)


def all_op_names():
    """Every registry op with a strategy, then every stage (stage:NAME)."""
    from .strategies import STRATEGIES

    return [n for n in REGISTRY if n in STRATEGIES] + [_STAGE_PREFIX + st for st in stages.STAGES]


if __name__ == "__main__":
    sys.exit(main())
