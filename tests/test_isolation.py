"""The conformance runner survives a backend that segfaults or hangs (``conformance.isolate``):
CRASH / TIMEOUT per op with the input saved, the run goes on, exit status 4, and reports
written after every op so a killed run leaves one."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conformance import report, runner
from conformance.isolate import BackendCrash, BackendTimeout, IsolatedBackend

pytestmark = pytest.mark.native_only  # process handling, not kernels

ROOT = Path(__file__).resolve().parents[1]
BROKEN = "isolation_backends:Broken"


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"), env.get("PYTHONPATH", "")])
    return env


def _cli(*args, timeout=300, cwd):
    return subprocess.run([sys.executable, "-m", "conformance", *args], capture_output=True, text=True,
                          env=_env(), timeout=timeout, cwd=cwd)


def test_crash_and_hang_become_results_and_the_run_goes_on(tmp_path):
    rep = tmp_path / "rep"
    p = _cli("--backend", BROKEN, "--ops", "scan", "segmented_scan", "segmented_sum", "compress",
             "--timeout", "3", "--max-examples", "15", "--seed", "1", "--report", str(rep), "--db",
             str(tmp_path / "db"), cwd=tmp_path)
    assert p.returncode == 4, p.stdout + p.stderr
    doc = json.loads((rep / "report.json").read_text())
    assert report.validate(doc) == []
    assert doc["complete"] is True and doc["passed"] is False
    status = {o["op"]: o for o in doc["ops"]}
    assert [o["op"] for o in doc["ops"]] == ["scan", "segmented_scan", "segmented_sum", "compress"]
    assert status["scan"]["status"] == "pass" and status["compress"]["status"] == "pass"
    assert status["segmented_scan"]["status"] == "crash"
    assert "SIGSEGV" in status["segmented_scan"]["message"]
    assert status["segmented_sum"]["status"] == "timeout"
    assert "did not return within 3 s" in status["segmented_sum"]["message"]
    assert doc["versions"]["backend"] == "broken-1.0"
    for op, word in (("segmented_scan", "CRASH"), ("segmented_sum", "TIMEOUT")):
        f = Path(status[op]["replay_file"])
        assert f.is_file() and f.suffix == ".npz"
        assert "--replay" in status[op]["command"]
        r = _cli("--backend", BROKEN, "--replay", str(f), "--timeout", "2", cwd=tmp_path)
        assert r.returncode == 4 and word in r.stdout, r.stdout + r.stderr
    junit = (rep / "report.xml").read_text()
    assert 'errors="2"' in junit and "CRASH:" in junit and "TIMEOUT:" in junit
    md = (rep / "report.md").read_text()
    assert "segmented_scan (crash)" in md and "segmented_sum (timeout)" in md


def test_killed_run_leaves_an_incomplete_report(tmp_path):
    """Reports are written after every op: in-process (--no-isolate) the hang of the second op
    stalls the run, which is then killed; the first op's result is on disk, marked incomplete."""
    rep = tmp_path / "rep"
    proc = subprocess.Popen([sys.executable, "-m", "conformance", "--backend", BROKEN, "--no-isolate", "--ops",
                             "scan", "segmented_sum", "--max-examples", "10", "--report", str(rep), "--db",
                             str(tmp_path / "db")], env=_env(), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        doc = None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                doc = json.loads((rep / "report.json").read_text())
                break
            except (OSError, ValueError):
                time.sleep(0.5)
        assert doc is not None, "no report appeared while the run was going on"
        time.sleep(1)
        assert proc.poll() is None, "the run should be stuck in segmented_sum"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    doc = json.loads((rep / "report.json").read_text())
    assert report.validate(doc) == []
    assert doc["complete"] is False
    assert [(o["op"], o["status"]) for o in doc["ops"]] == [("scan", "pass")]
    assert "INCOMPLETE" in (rep / "report.md").read_text()


class _Raises:
    """Module-level (the worker imports it by name): errors of the backend keep their types."""

    def variants(self, op):
        return ("a", "b") if op == "scan" else ()

    def scan(self, x, **kw):
        if len(x) == 1:
            raise NotImplementedError("one element is outside this kernel")
        if len(x) == 2:
            raise OverflowError("too big")
        if len(x) == 3:
            raise _Unpicklable()
        return np.cumsum(x)

    def topk(self, x, k, **kw):
        import torch

        return torch.from_numpy(np.sort(x)[::-1][:k].copy()), torch.arange(k)


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not picklable")


def test_isolated_backend_keeps_exception_types_and_results(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    b = IsolatedBackend("tests.test_isolation:_Raises", call_timeout=60)
    try:
        assert runner._has(b, "scan") and runner._has(b, "topk") and not runner._has(b, "spmv")
        assert not runner._has(b, "dtypes")
        assert b.variants("scan") == ("a", "b") and b.variants("topk") == ()  # declared variants pass through
        with pytest.raises(NotImplementedError, match="outside this kernel"):
            b.scan(np.ones(1))
        with pytest.raises(OverflowError, match="too big"):
            b.scan(np.ones(2))
        with pytest.raises(RuntimeError, match="_Unpicklable"):
            b.scan(np.ones(3))
        np.testing.assert_array_equal(b.scan(np.arange(5)), np.cumsum(np.arange(5)))
        vals, _ = b.topk(np.arange(5.0), 2)
        assert type(vals).__module__.startswith("torch")  # the protocol check sees what the backend returned
        rep = runner.run_op(b, "raises", "topk", max_examples=5, db=None, seed=0)
        assert rep.status == "fail" and "torch.Tensor" in rep.message
    finally:
        b.close()


def test_crash_restarts_the_worker(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    b = IsolatedBackend(BROKEN, call_timeout=2)
    try:
        x, f = np.arange(5, dtype=np.int32), np.zeros(5, np.bool_)
        with pytest.raises(BackendCrash, match="SIGSEGV"):
            b.segmented_scan(x, f)
        # a fresh worker after each kill; its first answer includes its start (importing numpy and
        # mmvref, loading kernels from the cache), which took more than 2 s on a loaded 2-vCPU CI VM:
        # these calls check that it answers, not how fast
        b.call_timeout = 60.0
        np.testing.assert_array_equal(b.scan(x), np.cumsum(x))
        b.call_timeout = 2.0
        with pytest.raises(BackendTimeout, match="within 2 s"):
            b.segmented_sum(x, f)
        b.call_timeout = 60.0
        np.testing.assert_array_equal(b.segmented_scan(x[:3], f[:3]), np.cumsum(x[:3]))
    finally:
        b.close()


def test_op_timeout_stops_the_op_without_a_counterexample():
    from npu import MmvrefBackend

    rep = runner.run_op(MmvrefBackend(), "mmvref", "scan", max_examples=1000, db=None, seed=0, op_timeout=1e-9)
    assert rep.status == "timeout"
    assert "time limit" in rep.message and rep.counterexample == "" and rep.replay_file == ""


@pytest.mark.parametrize("flag", ["--timeout", "--op-timeout"])
def test_timeouts_must_be_positive(flag, capsys):
    from conformance.__main__ import main

    assert main(["--backend", "mmvref", "--ops", "scan", flag, "0"]) == 2
    assert flag in capsys.readouterr().err


def test_unknown_backend_in_the_worker_is_a_usage_error(tmp_path):
    p = _cli("--backend", "isolation_backends:NoSuchThing", "--ops", "scan", cwd=tmp_path, timeout=120)
    assert p.returncode == 2 and "NoSuchThing" in p.stderr and "Traceback" not in p.stderr


# ----------------------------------------------------------------------------- failures while starting

_STARTUP = [
    ("RegimesRaise", 4, "regimes()", "RuntimeError: device query failed: no NPU answered on /dev/davinci0"),
    ("ConstructorRaises", 4, "isolation_backends:ConstructorRaises()", "OSError: cannot open /dev/davinci0"),
    ("DtypesRaise", 4, "dtypes('scan')", "KeyError: 'scan'"),
    ("VersionRaises", 4, "version()", "RuntimeError: firmware version query timed out"),
    ("UnknownRegimes", 2, "regimes()", "unknown regimes ['warps']"),
    ("UnknownErrorModel", 2, "error_model('scan')", "'fuzzy' is not one of"),
]


@pytest.mark.parametrize("backend, code, method, error, isolate",
                         [(*c, True) for c in _STARTUP] + [(*c, False) for c in _STARTUP if c[0] in
                                                           ("RegimesRaise", "ConstructorRaises", "UnknownRegimes")])
def test_a_backend_failing_while_starting_ends_the_run_with_one_line_and_a_report(backend, code, method, error,
                                                                                   isolate, tmp_path):
    """A method that raises while the suite starts or describes the backend is a crash (4); an answer
    the suite cannot use is a configuration error (2). Either way: one line on stderr naming the
    backend and the method, no traceback, and a report whose one row says so (in a worker process,
    and with --no-isolate)."""
    rep = tmp_path / "rep"
    p = _cli("--backend", f"isolation_backends:{backend}", "--ops", "scan", "--max-examples", "3", "--report",
             str(rep), "--db", str(tmp_path / "db"), *([] if isolate else ["--no-isolate"]), cwd=tmp_path,
             timeout=180)
    assert p.returncode == code, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"backend isolation_backends:{backend}: {method} " in lines[0] and error in lines[0], lines[0]
    doc = json.loads((rep / "report.json").read_text())
    assert report.validate(doc) == [] and doc["complete"] is True and doc["passed"] is False
    (row,) = doc["ops"]
    assert row["op"] == "startup" and row["status"] == ("crash" if code == 4 else "fail")
    assert method in row["message"] and error in row["message"] and row["extra"]["method"] == method
    junit = (rep / "report.xml").read_text()
    assert ("<error" if code == 4 else "<failure") in junit and method in junit
    assert "startup" in (rep / "report.md").read_text()


def test_a_describing_method_failing_later_crashes_that_op_only():
    """regimes() answered while the backend was described, then raised on an op: that op is a CRASH
    naming regimes(), with no traceback; the exit status of such a run is 4."""
    from isolation_backends import RegimesRaiseLater

    RegimesRaiseLater.calls = 1  # the describe step's call
    rep = runner.run_op(RegimesRaiseLater(), "later", "scan", max_examples=3, db=None, seed=0)
    assert rep.status == "crash" and "regimes() raised RuntimeError: device query failed" in rep.message
