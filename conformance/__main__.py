"""python -m conformance --backend NAME [--ops OP ...] [--max-examples N] [--seed S] [--report DIR]

NAME: mmvref, mmvref-prepared, emulation, tcuscan, dask (``npu.BACKENDS``), ``package.module:attribute``
naming any backend object, or ``faulty:FAULT:BASE`` (a named fault injected into
BASE). ``--mutation-score`` runs every fault of ``conformance.faults`` against
the backend and reports which were detected. ``--replay FILE`` re-runs a saved
counterexample. ``--coverage`` prints npu's upstream kernel coverage table (``python -m npu
--coverage``) with its column saying whether this suite checks each kernel
(``conformance.coverage``; ``--markdown``, ``--check``, ``--tests DIR`` as there).

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

from . import coverage, session, suite
from .isolate import DEFAULT_CALL_TIMEOUT
from .runner import PROFILES
from .session import EXIT_CRASH, EXIT_FAIL, EXIT_OK, EXIT_USAGE
from .suite import all_op_names  # noqa: F401 - re-exported: its earlier home (conformance.suite has it)


def _jobs(text):
    """--jobs: a count, or 'auto' (the CPUs this process may run on)."""
    if text == "auto":
        import os

        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of processes or 'auto', got {text!r}") from None


def parser():
    """The command line's arguments (its help: this module's docstring)."""
    p = argparse.ArgumentParser(prog="python -m conformance", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="mmvref", help="mmvref, emulation, tcuscan, package.module:attr, "
                                                       "or faulty:FAULT:BASE")
    p.add_argument("--ops", nargs="*", default=None,
                   help="registry op names, or stage:NAME (default: all ops and stages the backend has)")
    p.add_argument("--profile", choices=sorted(PROFILES), default="default",
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
    p.add_argument("--jobs", type=_jobs, default=1, metavar="N",
                   help="run the ops in N worker processes, or 'auto': one per CPU this process may use "
                        "(results as a serial run with the same seed)")
    p.add_argument("--time-budget", type=float, default=None, metavar="SECONDS",
                   help="a fuzzing campaign: rounds of every op with fresh seeds until SECONDS are spent, "
                        "every distinct failure saved")
    p.add_argument("--list-ops", action="store_true", help="list the ops (and stages) with one line each, and exit")
    p.add_argument("--list-faults", action="store_true", help="list the named faults with one line each, and exit")
    p.add_argument("--coverage", action="store_true",
                   help="the upstream kernel coverage table (python -m npu --coverage) with its conformance column, "
                        "and exit")
    p.add_argument("--check", action="store_true", help="with --coverage: list unexplained gaps, exit 1 if any")
    p.add_argument("--markdown", action="store_true", help="with --coverage: the table in Markdown")
    p.add_argument("--tests", metavar="DIR", default="auto",
                   help="with --coverage: the ported upstream tests (default: the repository's tests/upstream)")
    return p


def main(argv=None):
    """``python -m conformance`` with ``argv`` (default: the command line's); the exit status."""
    try:
        return _main(argv)
    except session.ConfigError as exc:
        if exc.reports is not None:  # a report of the backend's failure to start was written
            print(f"reports: {exc.reports}/report.xml, report.json, report.md")
        print(f"python -m conformance: {'error: ' if exc.code == EXIT_USAGE else ''}{exc}", file=sys.stderr)
        return exc.code


def _usage(msg):
    return session.ConfigError(EXIT_USAGE, msg)


def _main(argv):
    a = parser().parse_args(argv)
    if a.list_ops:
        for name, line in session.op_listing():
            print(f"{name:26s} {line}")
        return EXIT_OK
    if a.list_faults:
        for name, ops, line in session.fault_listing():
            print(f"{name:36s} [{', '.join(ops)}] {line}")
        return EXIT_OK
    if a.coverage:
        t = coverage.table(a.tests)
        if a.check:
            sys.stdout.write(coverage.render_gaps(t))
            return EXIT_FAIL if t.gaps else EXIT_OK
        sys.stdout.write(coverage.render_markdown(t) if a.markdown else coverage.render_text(t))
        return EXIT_OK
    if a.check or a.markdown:
        raise _usage("--check and --markdown go with --coverage")
    dtypes = session.dtype_names(a.dtypes)
    for flag, v, lo in (("--max-examples", a.max_examples, 1), ("--s", a.s, 2)):
        if v is not None and v < lo:  # 0 examples would test nothing and still pass
            raise _usage(f"{flag} must be >= {lo}, got {v}")
    for flag, v in (("--timeout", a.timeout), ("--op-timeout", a.op_timeout), ("--time-budget", a.time_budget)):
        if v is not None and not v > 0:
            raise _usage(f"{flag} must be > 0 seconds, got {v}")
    if a.jobs < 1:
        raise _usage(f"--jobs must be >= 1, got {a.jobs}")
    if a.jobs > 1 and a.time_budget:
        raise _usage("--jobs and --time-budget do not combine (a campaign runs its rounds serially)")
    call_timeout = a.timeout if a.isolate else None
    s = 8 if a.s is None else a.s  # with --replay, None keeps the saved s and policy
    policy = "derived" if a.policy is None else a.policy
    examples = session.examples_for(a.profile, a.max_examples)
    if a.replay:
        r = session.replay(a.backend, a.replay, s=s, replay_s=a.s, policy=a.policy, call_timeout=call_timeout)
        if r.crash is not None:
            print(f"replay {a.replay} on {a.backend}: {r.crash_kind.upper()}: {r.crash}")
            return EXIT_CRASH
        print(f"replay {a.replay} ({r.op}) on {a.backend}: "
              + ("conforms" if r.message is None else f"FAIL: {r.message}"))
        return EXIT_OK if r.message is None else EXIT_FAIL
    ops = session.requested_ops(a.ops)
    if a.mutation_score:
        session.resolve_or_exit(a.backend, s)
        print(f"conformance mutation score: base={a.backend} examples={examples}")
        rows = suite.mutation_score(a.backend, ops, s=s, max_examples=examples, seed=a.seed,
                                    derandomize=PROFILES[a.profile]["derandomize"])
        return session.mutation_exit_code(rows)
    seed = session.seed_for(a.profile, a.seed)
    print(f"conformance: backend={a.backend} profile={a.profile} examples={examples} seed={seed} "
          f"policy={policy}")
    out = session.run_backend(a.backend, ops, profile=a.profile, examples=examples, seed=seed, s=s, policy=policy,
                              db=a.db, report_dir=a.report, dtypes=dtypes, call_timeout=call_timeout,
                              op_timeout=a.op_timeout, jobs=a.jobs, time_budget=a.time_budget, argv=argv)
    if out.report_dir is not None:
        print(f"reports: {out.report_dir}/report.xml, report.json, report.md")
    if not out.ran:
        print("conformance: FAIL (no op ran: the backend implements none of the requested ops)")
        return out.exit_code
    verdict = "PASS" if not out.failed else f"{len(out.failed)} op(s) FAILED" + (
        f" ({len(out.broke)} by crash or timeout)" if out.broke else "")
    print(f"conformance: {verdict} ({len(out.ran)} checked, {len(out.reports) - len(out.ran)} skipped, "
          f"{out.seconds:.1f} s)")
    return out.exit_code


if __name__ == "__main__":
    sys.exit(main())
