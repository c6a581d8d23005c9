"""Scaling a conformance run out (issue 15, point 9): --jobs gives a serial run's results, the pytest
plugin gives the same outcomes under pytest-xdist, and --time-budget keeps every distinct failure."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.__main__ import main, parser
from conformance.jobs import run_jobs
from conformance.suite import campaign, run

pytestmark = pytest.mark.native_only  # process handling, not kernels

ROOT = Path(__file__).resolve().parents[1]
OPS = ["segmented_scan", "segmented_sum", "scan"]
FAULTY = "faulty:start_end_flag_confusion:mmvref"


def _outcome(reps):
    return [(r.op, r.status, r.examples, r.counterexample) for r in reps]


def test_jobs_give_the_serial_results(tmp_path):
    kw = dict(s=8, max_examples=30, seed=7, derandomize=False, policy="derived", db=None, report_dir=None, tier="default")
    serial = run(FAULTY, OPS, progress=False, log=lambda *a: None, **kw)
    spread = run_jobs(FAULTY, OPS, 2, call_timeout=None, log=lambda *a: None, **kw)
    assert _outcome(spread) == _outcome(serial)
    assert [r.status for r in serial] == ["fail", "fail", "pass"]


def test_ops_of_a_family_share_a_worker():
    from conformance.jobs import family_parts

    ops = ["scan", "compress", "spmv", "segment_csr", "topk", "compress_ind", "spmm", "argsort", "scatter"]
    parts = family_parts(ops, 2)
    # largest first; families of one size in the order of their first op
    assert parts == [["scan", "segment_csr", "scatter"], ["compress", "compress_ind"], ["spmv", "spmm"],
                     ["topk", "argsort"]]
    # fewer parts than workers: the largest split in two, until every worker has a part or none can split
    assert sorted(family_parts(["scan", "segment_csr", "scatter", "spmv"], 3)) == [["scan", "segment_csr"],
                                                                                    ["scatter"], ["spmv"]]
    assert sorted(family_parts(["scan", "segment_csr", "scatter", "spmv"], 4)) == [["scan"], ["scatter"],
                                                                                    ["segment_csr"], ["spmv"]]
    assert sorted(sum(family_parts(ops, 16), [])) == sorted(ops) and len(family_parts(ops, 16)) == len(ops)
    assert family_parts(["stage:row_scan", "stage:diff"], 1) == [["stage:row_scan"], ["stage:diff"]]


def test_a_dying_job_process_is_a_crash_and_the_next_part_gets_a_fresh_one(monkeypatch):
    """Without isolation a segfault kills the worker process: the op is reported as a crash, and
    the part handed to that worker next (compress, another family) runs in a new process."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]))
    kw = dict(s=8, max_examples=10, seed=1, derandomize=False, policy="derived", db=None, report_dir=None, tier="default")
    reps = run_jobs("isolation_backends:Broken", ["scan", "segmented_scan", "compress"], 1, call_timeout=None,
                    log=lambda *a: None, **kw)
    status = {r.op: r for r in reps}
    assert [r.op for r in reps] == ["scan", "segmented_scan", "compress"]
    assert status["scan"].status == "pass" and status["compress"].status == "pass"
    assert status["segmented_scan"].status == "crash" and "job process died" in status["segmented_scan"].message


def test_jobs_option(tmp_path, capsys):
    assert main(["--backend", "mmvref", "--ops", "scan", "compress", "--max-examples", "10", "--jobs", "2", "--db",
                 str(tmp_path), "--report", str(tmp_path / "rep")]) == 0
    assert "compress" in (tmp_path / "rep" / "report.md").read_text()
    assert main(["--backend", "mmvref", "--jobs", "0"]) == 2
    with pytest.raises(SystemExit) as exc:  # argparse's own usage error
        main(["--backend", "mmvref", "--jobs", "many"])
    assert exc.value.code == 2
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert parser().parse_args(["--backend", "mmvref", "--jobs", "auto"]).jobs == cpus >= 1
    assert main(["--backend", "mmvref", "--jobs", "2", "--time-budget", "5"]) == 2
    capsys.readouterr()


def test_time_budget_keeps_every_distinct_failure(tmp_path):
    # The budget is counted on a clock that runs out after the second round (campaign logs once a
    # round), not on the wall clock: on a slow machine 8 real seconds did not see the first round's
    # shrinking through, and the op was cut off as a timeout.
    rounds = []

    def clock():
        return 0.0 if len(rounds) < 2 else 1e9

    reps = campaign(FAULTY, OPS, 1e6, s=8, max_examples=20, derandomize=False, policy="derived",
                    db=str(tmp_path / "db"), report_dir=str(tmp_path / "rep"), seed=3, log=rounds.append, clock=clock)
    by = {r.op: r for r in reps}
    assert by["scan"].status == "pass" and by["segmented_scan"].status == "fail"
    assert by["segmented_scan"].extra["rounds"] == len(rounds) == 2
    for op in ("segmented_scan", "segmented_sum"):
        kept = by[op].extra["distinct_failures"]
        assert kept and by[op].failures == len(kept)
        assert len({k["message"] for k in kept}) == len(kept)
        assert all(Path(k["replay_file"]).is_file() for k in kept)
    assert by["scan"].examples > 20  # more than one round's worth


def test_pytest_plugin_under_xdist_matches_serial(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))

    def outcomes(*extra):
        p = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "conformance", "-p", "no:cacheprovider",
                            "--backend", FAULTY, "--conformance-profile", "ci", "--max-examples", "15", "--ops", *OPS,
                            "-rA", "-q", *extra],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith(("PASSED", "FAILED"))]
        return sorted(ln.split(" - ")[0] for ln in lines), p

    serial, p1 = outcomes()
    parallel, p2 = outcomes("-n", "2")
    assert len(serial) == len(OPS), p1.stdout[-2000:]
    assert parallel == serial, (p1.stdout[-1500:], p2.stdout[-1500:])
    assert sum(s.startswith("FAILED") for s in serial) == 2
