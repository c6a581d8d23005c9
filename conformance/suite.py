"""A conformance run: every requested op and stage of one backend, one after the other.

``run`` checks each op (``runner.run_op``) or stage (``runner.run_stage``) and logs
one line per op (and, for a failure, its message, counterexample and the command
that reproduces it); ``campaign`` is ``--time-budget`` (rounds of fresh seeds);
``mutation_score`` injects every named fault (``conformance.faults``) into a
backend. ``conformance.jobs`` spreads ``run`` over worker processes and
``conformance.session`` is what the command line (``python -m conformance``) does
with them.
"""
from __future__ import annotations

import sys
import time

from mmvref.registry import REGISTRY

from . import faults, runner, stages

__all__ = ["run", "campaign", "mutation_score", "all_op_names", "failures_dir", "progress_printer",
           "PROGRESS_EVERY_S"]

#: seconds between progress lines when stdout is not a terminal (CI logs)
PROGRESS_EVERY_S = 10.0


def progress_printer(enabled):
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


def all_op_names():
    """Every registry op with a strategy, then every stage (stage:NAME)."""
    from .strategies import STRATEGIES

    return [n for n in REGISTRY if n in STRATEGIES] + [runner.STAGE_PREFIX + st for st in stages.STAGES]


def failures_dir(report_dir, db):
    """Where a run saves its counterexamples: the report directory's failures/, else the
    example database's; None without either."""
    return (report_dir + "/failures") if report_dir else (db + "/failures" if db else None)


def run(name, ops, *, s, max_examples, seed, derandomize, policy, db, report_dir, progress=True, log=print,
        explicit=True, dtypes=None, backend=None, op_timeout=None, on_report=None, tier="default", clean=True,
        file_tag=""):
    """Every op of ``ops`` on the backend ``name`` (resolved here unless ``backend`` is given);
    the list of OpReports. ``on_report(reports)`` is called after each op. ``clean``: remove
    earlier runs' counterexample files first (see below); ``file_tag`` is appended to this
    run's counterexample file names (rounds of a --time-budget campaign)."""
    backend = faults.resolve(name, s) if backend is None else backend
    s = getattr(backend, "s", s)
    fail_dir = failures_dir(report_dir, db)
    if fail_dir and clean:  # only this run's counterexamples: a report directory's from earlier runs, and in the
        # database's folder this backend's files for the ops about to run, are removed
        from pathlib import Path

        stale = (Path(fail_dir).glob("*.npz") if report_dir else
                 (Path(fail_dir) / f"{name.replace(':', '_')}-{op}.npz" for op in ops))
        for old in stale:
            old.unlink(missing_ok=True)
    reports = []
    for op in ops:
        if op.startswith(runner.STAGE_PREFIX):
            stage = op[len(runner.STAGE_PREFIX):]
            if not runner._has(backend, stage):
                reports.append(runner.OpReport(op, name, "skipped", message="backend does not expose this stage"))
            else:
                reports.append(runner.run_stage(backend, name, stage, s=s, max_examples=max_examples, seed=seed))
        else:
            reports.append(runner.run_op(backend, name, op, s=s, max_examples=max_examples, seed=seed,
                                         derandomize=derandomize, policy=policy, db=db, failures_dir=fail_dir,
                                         progress=progress_printer(progress),
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


def _signature(r):
    """What makes two failures of a campaign the same: op, status and the message without its input
    and numbers."""
    import re

    return (r.op, r.status, re.sub(r"[-+0-9.e]+", "#", r.message.split("; input:")[0])[:120])


def campaign(name, ops, budget, *, log=print, seed=None, clock=time.perf_counter, **kw):
    """--time-budget: rounds of every op with fresh seeds until ``budget`` seconds are spent (an op
    running at the end is stopped by its op timeout); every distinct failure (``_signature``) is
    kept, its counterexample saved with a round tag. Returns one merged report per op: examples
    and counts summed over rounds, the first failure of each distinct kind in ``extra``.
    ``clock``: the seconds the budget is counted in (a test passes one that ends after a number of
    rounds, whatever the machine's speed)."""
    import random

    t_end = clock() + budget
    rng = random.Random(seed) if seed is not None else random.SystemRandom()
    merged, seen, rounds = {}, set(), 0
    while clock() < t_end:
        left = t_end - clock()
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
            f"{len(seen)} distinct failures so far, {max(0.0, t_end - clock()):.0f} s left")
    out = [merged[op] for op in ops if op in merged]
    for r in out:
        r.extra["rounds"] = rounds
    return out


def mutation_score(base, ops, *, s, max_examples, seed, derandomize, log=print, names=None):
    """Every fault (or those named in ``names``) injected into ``base``: rows (name, detected, report, ops) where detected is
    True (a comparison failed), False (MISSED) or None (N/A: the backend has none of the fault's
    ops, or takes none of the inputs the fault can act on). A fault counts as detected only by a
    failed comparison: inputs its wrapper cannot simulate are rejected, not counted
    (``faults.FaultNotApplicable``)."""
    rows = []
    backend = faults.resolve(base, s)
    for fname, fault in faults.FAULTS.items():
        if names is not None and fname not in names:
            continue
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
            faulty = faults.FaultyBackend(faults.resolve(base, s), fname, s)
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
