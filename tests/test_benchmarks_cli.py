"""The benchmark driver's command line (``python -m benchmarks``): arguments it must refuse
before it runs anything."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.native_only  # the driver's argument handling: not target-dependent

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("cpu", ["native", "no-such-cpu"])
def test_a_target_numba_cannot_compile_for_is_refused_before_any_benchmark(cpu):
    r = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--ops", "scan", "--target", "haswell", cpu],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert f"--target {cpu}: Numba cannot compile for this CPU name" in r.stderr
    assert "not a recognized processor" in r.stderr
    assert "# mmvref benchmarks" not in r.stdout  # refused before the native build ran


def test_another_builds_ratios_use_the_peers_timed_in_its_process():
    """``--target``'s child times the peers beside its build; the report's ratios for that build's
    rows use those times, not the native run's."""
    from benchmarks.harness import Result
    from benchmarks.report import markdown
    from benchmarks.run import with_own_peers

    native = [Result("op", "case", "ours", True, 10, 80, ms=1.0), Result("op", "case", "peer", False, 10, 80, ms=2.0)]
    child = [Result("copy", "n", "numba parallel copy", False, 10, 80, ms=0.1),
             Result("op", "case", "ours", True, 10, 80, ms=1.5), Result("op", "case", "peer", False, 10, 80, ms=4.5),
             Result("op", "other", "ours", True, 10, 80, ms=1.0)]
    kept = with_own_peers(child)
    assert [(r.op, r.case, r.impl) for r in kept] == [("copy", "n", "numba parallel copy"), ("op", "case", "ours"),
                                                      ("op", "other", "ours")]
    assert kept[1].extra["peer_ms"] == {"peer": 4.5} and kept[2].extra["peer_ms"] == {}
    kept[1].impl = "ours [haswell build]"
    lines = markdown(native + [kept[1]], 50.0, {"op": ["peer"]}).splitlines()
    ratio = {ln.split(" | ")[2]: ln.rstrip(" |").split(" | ")[-1] for ln in lines if ln.startswith("| op |")}
    assert ratio["**ours**"].startswith("2.00") and ratio["**ours [haswell build]**"].startswith("3.00")
