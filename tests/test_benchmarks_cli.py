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
