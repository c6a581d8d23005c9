"""The conformance suite itself: its power (every named fault caught), its
reports (JUnit XML parses, JSON matches the documented schema), replay of a
saved counterexample, exit status, comparators and strategies."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import compare, faults, report, runner, strategies
from conformance.__main__ import main
from conformance.suite import mutation_score

pytestmark = pytest.mark.native_only  # the suite's own logic: not target-dependent


def test_the_fault_catalogue_is_not_empty():
    assert len(faults.FAULTS) >= 12


# one case per fault, so that pytest-xdist spreads the mutation score over its workers (one test
# of every fault took 119 s of one worker with a cold Numba cache)
@pytest.mark.parametrize("fault", list(faults.FAULTS))
def test_every_fault_is_detected_with_a_counterexample(fault):
    rows = mutation_score("mmvref", list(strategies.STRATEGIES), s=8,
                          max_examples=runner.PROFILES["ci"]["max_examples"], seed=None, derandomize=True,
                          log=lambda *a: None, names=[fault])  # the ci profile catches every fault
    assert [name for name, _, _, _ in rows] == [fault]
    _, caught, rep, _ = rows[0]
    assert caught, f"fault not detected: {fault}"  # N/A (None) counts as missed here
    assert rep.counterexample and rep.message and rep.command, fault
    assert "cannot simulate" not in rep.message, fault


def test_reports_validate_and_failures_replay(tmp_path, capsys):
    out = tmp_path / "rep"
    bad = "faulty:compress_drops_last:mmvref"
    status = main(["--backend", bad, "--ops", "compress", "split", "--profile", "ci", "--report", str(out),
                   "--db", str(tmp_path / "db")])
    assert status == 1
    doc = json.loads((out / "report.json").read_text())
    assert report.validate(doc) == []
    assert doc["passed"] is False
    ops = {o["op"]: o for o in doc["ops"]}
    assert ops["compress"]["status"] == "fail" and ops["split"]["status"] == "pass"
    root = ET.parse(out / "report.xml").getroot()
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["compress"].find("failure") is not None and cases["split"].find("failure") is None
    md = (out / "report.md").read_text()
    assert "compress" in md and "--replay" in md
    # what a release record needs: policy and tolerance, seed, versions, the command; absolute paths
    assert doc["policy"] == "derived" and "Higham" in doc["tolerance"] and "derived" in md and "Higham" in md
    assert {"mmvref", "numpy", "numba", "python"} <= set(doc["versions"]) and "numpy" in md
    assert "--ops compress split" in doc["command"] and doc["command"] in md
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["policy"] == "derived" and "version.numpy" in props and props["tolerance"]
    assert all(o["replay_file"] == "" or o["replay_file"].startswith("/") for o in doc["ops"])
    # a second run into the same directory keeps only its own counterexamples
    stale = out / "failures" / "other-scan.npz"
    stale.write_bytes(b"old")
    assert main(["--backend", bad, "--ops", "compress", "--profile", "ci", "--report", str(out),
                 "--db", str(tmp_path / "db")]) == 1
    assert not stale.exists() and len(list((out / "failures").glob("*.npz"))) == 1
    # the printed command replays the minimal counterexample: it fails on the faulty
    # backend and passes on the correct one
    replay_file = ops["compress"]["replay_file"]
    assert main(["--backend", bad, "--replay", replay_file]) == 1
    assert main(["--backend", "mmvref", "--replay", replay_file]) == 0
    capsys.readouterr()


def test_schema_validation_rejects_bad_documents():
    doc = report.to_json([], backend="x", profile="ci", seed=None, s=8, policy="derived", seconds=0.0,
                         versions=report.versions(), command="python -m conformance")
    assert report.validate(doc) == []
    broken = dict(doc)
    del broken["passed"]
    broken["ops"] = [{"op": "scan", "status": "maybe"}]
    errs = report.validate(broken)
    assert any("passed" in e for e in errs) and any("status" in e for e in errs)


def test_exit_status_and_emulation_stages(tmp_path, capsys):
    assert main(["--backend", "emulation", "--ops", "scan", "stage:row_scan", "stage:complete_rows",
                 "--profile", "ci", "--db", str(tmp_path)]) == 0
    # a backend that implements none of the requested ops cannot pass
    assert main(["--backend", "mmvref", "--ops", "stage:diff", "--profile", "ci", "--db", str(tmp_path)]) == 1
    capsys.readouterr()


# ----------------------------------------------------------------------------- comparators

def test_derived_bound_scales_with_the_prefix_for_prefix_difference_ops():
    """A segment sum after a huge value: the SCD bound allows an error relative to
    the prefix (a correct prefix-difference kernel passes), the row-size view would not."""
    x = np.array([1e6, -1e6, 1e-3, 2e-3], np.float32)
    f = np.array([1, 0, 1, 0], np.uint8)
    expected = np.array([0.0, 3e-3], np.float32)
    off = np.array([0.0, 3e-3 + 0.06], np.float32)  # 20x the row, tiny against the prefix 2e6
    assert compare.check("segmented_sum", (x, f), {}, expected, off, s=4) is None
    way_off = np.array([0.0, 3e-3 + 5.0], np.float32)
    msg = compare.check("segmented_sum", (x, f), {}, expected, way_off, s=4)
    assert msg and "index 1" in msg and "bound" in msg and "exact" in msg
    # a backend declaring the "sequential" model is held to its segment's own magnitude
    assert compare.check("segmented_sum", (x, f), {}, expected, off, s=4, model="sequential")


def test_integer_results_must_match_dtype_and_bits():
    e = np.array([1, 2], np.int32)
    assert compare.check("scan", (e,), {}, e, e.astype(np.int64)) == "dtype int64, expected int32"
    assert "index 1" in compare.check("scan", (e,), {}, e, np.array([1, 3], np.int32))
    z = np.array([0.0, -0.0], np.float32)
    assert compare.check("radix_sort", (z,), {}, z, np.array([0.0, 0.0], np.float32))  # -0.0 moved as +0.0


def test_named_policies():
    x = np.ones(2000, np.float32)
    e = np.cumsum(x)  # exact: the reference is the exact prefix, whatever expected holds
    a = e.copy()
    a[0] += 0.5  # one element in 2000 beyond 1e-3: allowed by "double thousandths" (<= 0.1%)
    assert compare.check("scan", (x,), {}, e, a, policy="double_thousandths") is None
    a[1] += 0.5
    a[2] += 0.5
    assert compare.check("scan", (x,), {}, e, a, policy="double_thousandths")
    assert compare.check("scan", (x,), {}, e, a, policy="torch_testing")
    assert compare.check("scan", (x.astype(np.float16),), {}, e, e * (1 + 2.0**-14), policy="mere_mare") is None
    # CANN's threshold follows the OUTPUT dtype (fp16 in, fp32 out: 2^-13, so 2^-12 is beyond the mean)
    assert compare.check("scan", (x.astype(np.float16),), {}, e, e * (1 + 2.0**-12), policy="mere_mare")
    with pytest.raises(ValueError, match="policy"):
        compare.check("scan", (x,), {}, e, e, policy="nope")


# ----------------------------------------------------------------------------- strategies

@settings(max_examples=30)
@given(data=st.data(), s=st.sampled_from([2, 4, 8]))
def test_strategies_documented_shapes(data, s):
    n = data.draw(strategies.lengths(s))
    assert 0 <= n <= 20 * s * s
    f = data.draw(strategies.flags(n, s))
    assert f.shape == (n,) and set(np.unique(f.astype(np.uint8))) <= {0, 1}
    ptr = data.draw(strategies.offsets(n, s))
    assert ptr[0] == 0 and ptr[-1] == n and np.all(np.diff(ptr) >= 0)
    indptr, indices, dat, shape = data.draw(strategies.csr_matrices("int32", s))
    assert indptr[0] == 0 and indptr[-1] == len(indices) == len(dat) and len(indptr) == shape[0] + 1
    assert np.all(np.diff(indptr) >= 0) and (len(indices) == 0 or indices.max() < shape[1])
    x = data.draw(strategies.values("float32", 5, finite_sums=True))
    assert np.isfinite(x.astype(np.float64).sum() * 4)


def test_edge_values_and_op_inputs():
    assert 127 in strategies.edge_values("int8") and -128 in strategies.edge_values("int8")
    assert any(np.isnan(v) for v in strategies.edge_values("float16", nonfinite=True))
    assert not any(np.isinf(v) for v in strategies.edge_values("float32"))
    with pytest.raises(KeyError, match="no strategy"):
        strategies.op_inputs("mult")
    assert set(faults.FAULTS) and all(f.ops for f in faults.FAULTS.values())


@pytest.mark.parametrize("argv, flag", [(["--max-examples", "0"], "--max-examples"), (["--s", "1"], "--s")])
def test_cli_refuses_a_run_that_would_test_nothing(argv, flag, capsys):
    assert main(["--backend", "mmvref", "--ops", "scan", *argv]) == 2
    err = capsys.readouterr().err
    assert flag in err and "must be >=" in err


@pytest.mark.parametrize("argv, code, words", [
    (["--backend", "mmvrf"], 2, "unknown backend 'mmvrf'"),
    (["--backend", "nosuchmodule:Backend"], 2, "ModuleNotFoundError"),
    (["--backend", "npu:NoSuchBackend"], 2, "AttributeError"),
    (["--backend", "faulty:no_such_fault:mmvref"], 2, "unknown fault 'no_such_fault'"),
    (["--backend", "faulty:mmvref"], 2, "faulty:FAULT:BASE"),
    (["--backend", "mmvref", "--ops", "scann"], 2, "unknown ops ['scann']"),
    (["--backend", "mmvref", "--replay", "no/such/file.npz"], 2, "no such case file"),
    (["--backend", "mmvref", "--mutation-score", "--backend", "mmvrf"], 2, "unknown backend"),
    (["--backend", "tcuscan", "--ops", "scan"], 3, "unavailable here"),
])
def test_exit_codes_and_one_line_messages(argv, code, words, capsys):
    """0 conforms, 1 does not, 2 usage or configuration, 3 backend unavailable; never a traceback."""
    assert main(argv) == code
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_pytest_plugin_skips_an_unavailable_backend():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs", "conformance",
                        "--backend", "tcuscan", "--ops", "scan", "-rs"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "1 skipped" in p.stdout and "unavailable here" in p.stdout


class _Wrap:
    """The mmvref backend with every op's result passed through ``post``."""

    def __init__(self, post):
        from conformance import backends

        self._b, self._post = backends.resolve("mmvref"), post

    def __getattr__(self, op):
        f = getattr(self._b, op)
        return (lambda *a, **k: self._post(f(*a, **k))) if callable(f) and op in strategies.STRATEGIES else f


@pytest.mark.parametrize("post, words", [
    (lambda r: __import__("torch").from_numpy(np.asarray(r)), "returned torch.Tensor, expected a numpy.ndarray"),
    (lambda r: np.asarray(r).tolist(), "returned list, expected a numpy.ndarray"),
])
def test_results_must_be_numpy_arrays(post, words):
    """A backend returning torch tensors or lists fails on every op it has, with a clear message."""
    from conformance import runner

    for op in ("scan", "segmented_sum", "spmv"):
        rep = runner.run_op(_Wrap(post), "wrapped", op, s=4, max_examples=5, db=None, derandomize=True)
        assert rep.status == "fail" and words in rep.message, (op, rep.message)
        assert rep.counterexample


def test_an_exception_while_checking_keeps_the_counterexample(tmp_path, monkeypatch):
    from conformance import runner

    def boom(*a, **k):
        raise ZeroDivisionError("comparator bug")

    monkeypatch.setattr(compare, "check", boom)
    rep = runner.run_op(_Wrap(lambda r: r), "wrapped", "scan", s=4, max_examples=5, db=None, derandomize=True,
                        failures_dir=str(tmp_path))
    assert rep.status == "fail" and "checking the result raised ZeroDivisionError: comparator bug" in rep.message
    assert rep.counterexample and rep.replay_file and rep.replay_file.endswith(".npz")


class ScanOnly:
    """A backend with scan only (the mmvref one), for the mutation score's N/A rows."""

    def scan(self, x, **kw):
        import mmvref

        return mmvref.scan(x, **kw)


def test_mutation_score_says_na_for_faults_on_ops_the_backend_lacks(capsys):
    rows = mutation_score("tests.test_conformance_suite:ScanOnly", list(strategies.STRATEGIES), s=4,
                          max_examples=20, seed=None, derandomize=True)
    by = {name: caught for name, caught, _, _ in rows}
    scan_faults = [f.name for f in faults.FAULTS.values() if "scan" in f.ops]
    # nearly all detected in 20 examples at s = 4; a kernel-scale one may be N/A (no drawn input made it
    # change a result) or MISSED (it changed a float result by less than the tolerance)
    assert scan_faults and sum(by[n] is True for n in scan_faults) >= len(scan_faults) - 3, by
    others = [f.name for f in faults.FAULTS.values() if "scan" not in f.ops]
    assert others and all(by[n] is None for n in others), by  # N/A, never MISSED
    out = capsys.readouterr().out
    judged = sum(by[n] is not None for n in scan_faults)
    assert "N/A" in out and f"/{judged} applicable faults detected ({len(by) - judged} N/A)" in out


def test_a_crash_of_the_fault_wrapper_is_not_a_detection():
    from conformance import runner

    def crashing(base, op, args, kw, s):
        raise IndexError("wrapper bug")

    fault = faults.Fault("crashes", "a wrapper that crashes", ("scan",), crashing)
    faults.FAULTS["crashes"] = fault
    try:
        rep = runner.run_op(faults.FaultyBackend(ScanOnly(), "crashes", 4), "faulty:crashes", "scan", s=4,
                            max_examples=10, db=None, derandomize=True)
    finally:
        del faults.FAULTS["crashes"]
    assert rep.status == "skipped" and rep.examples == 0, rep  # every input rejected: nothing detected
    assert "declined every generated input" in rep.message


def test_list_ops_and_faults_one_line_each(capsys):
    from conformance.suite import all_op_names

    assert main(["--list-ops"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == all_op_names()
    assert main(["--list-faults"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == list(faults.FAULTS)


class Recorder(ScanOnly):
    """scan through mmvref, recording the value dtypes it was called with."""

    seen: set = set()

    def scan(self, x, **kw):
        Recorder.seen.add(np.asarray(x).dtype.name)
        return super().scan(x, **kw)


def make_scan_only():
    """A factory: called by the backend resolver (module:attr naming a callable)."""
    return ScanOnly()


def test_dtypes_option_restricts_the_values_drawn(tmp_path, capsys):
    import importlib

    rec = importlib.import_module("tests.test_conformance_suite").Recorder  # the class the resolver imports
    rec.seen = set()
    assert main(["--backend", "tests.test_conformance_suite:Recorder", "--ops", "scan", "--dtypes", "int8",
                 "float16", "--max-examples", "30", "--db", str(tmp_path), "--no-isolate"]) == 0  # records here
    assert rec.seen and rec.seen <= {"int8", "float16"}, rec.seen
    assert main(["--backend", "mmvref", "--ops", "scan", "--dtypes", "int9"]) == 2
    assert "--dtypes" in capsys.readouterr().err


def test_factories_are_called(tmp_path):
    assert main(["--backend", "tests.test_conformance_suite:make_scan_only", "--ops", "scan", "--max-examples",
                 "5", "--db", str(tmp_path)]) == 0


class Int8Only(ScanOnly):
    def dtypes(self, op):
        return ["int8"]


def test_replay_honours_s_policy_and_the_backends_dtypes(tmp_path, monkeypatch, capsys):
    from conformance import runner
    from conformance.casefile import save_case

    path = save_case(tmp_path / "case", {"op": "scan", "args": (np.arange(5, dtype=np.int32),),
                                         "kwargs": {"exclusive": False}, "s": 4, "policy": "derived"})
    seen = []
    real = runner.one_example

    def spy(backend, op, args, kwargs, *, s, policy="derived"):
        seen.append((s, policy))
        return real(backend, op, args, kwargs, s=s, policy=policy)

    monkeypatch.setattr(runner, "one_example", spy)
    assert main(["--backend", "mmvref", "--replay", str(path)]) == 0
    assert main(["--backend", "mmvref", "--replay", str(path), "--s", "16", "--policy", "mere_mare"]) == 0
    assert seen == [(4, "derived"), (16, "mere_mare")]
    assert main(["--backend", "tests.test_conformance_suite:Int8Only", "--replay", str(path)]) == 2
    err = capsys.readouterr().err
    assert "int32" in err and "does not take" in err and len(err.strip().splitlines()) == 1


def test_unseeded_runs_report_the_seed_they_used(tmp_path, capsys):
    assert main(["--backend", "mmvref", "--ops", "scan", "--max-examples", "3", "--db", str(tmp_path),
                 "--report", str(tmp_path / "r")]) == 0
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    assert isinstance(doc["seed"], int) and f"seed={doc['seed']}" in capsys.readouterr().out


def test_progress_lines_in_logs(tmp_path, monkeypatch, capsys):
    from conformance import suite

    monkeypatch.setattr(suite, "PROGRESS_EVERY_S", 0.0)
    assert main(["--backend", "mmvref", "--ops", "scan", "--max-examples", "5", "--db", str(tmp_path)]) == 0
    assert "examples so far" in capsys.readouterr().out  # captured stdout is not a TTY, like a CI log


def _op_parts():
    """Every op and stage of the suite in three parts of whole families (``jobs.family_parts``): one
    run of all of them took 53 s of one pytest-xdist worker with a cold Numba cache."""
    from conformance import jobs, session

    parts = jobs.family_parts(session.requested_ops(None), 3)
    return [sum(parts[i::3], []) for i in range(3)]


def test_the_op_parts_hold_every_op_once():
    from conformance import session

    assert sorted(sum(_op_parts(), [])) == sorted(session.requested_ops(None))


@pytest.mark.parametrize("ops", _op_parts(), ids=lambda ops: ops[0])
@pytest.mark.parametrize("backend", ["npu.testing:CpuTcuscanBackend"])  # ops and stages: the suite's paths
def test_a_run_prints_no_warnings_of_its_own(backend, ops, tmp_path):
    """Every op and stage through the CLI with every warning shown (-W always): nothing on stderr
    comes from the suite, the golden model or the fast ops (found this way: fp16 "large" draws
    overflowing to inf in the strategies, a float32 bound overflowing in the stage checks)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.run([sys.executable, "-W", "always", "-m", "conformance", "--backend", backend, "--profile",
                        "ci", "--db", str(tmp_path), "--ops", *ops], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    own = [line for line in p.stderr.splitlines()
           if "Warning" in line and any(f"{os.sep}{pkg}{os.sep}" in line for pkg in ("conformance", "mmvref", "npu"))]
    assert not own, "\n".join(own)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_values_are_finite_unless_nonfinite_is_asked(dtype, data):
    """The "large" fill draws beyond the dtype's range; it must clip, not overflow to inf."""
    x = data.draw(strategies.values(dtype, 20_000, pins=0))  # long: |N(0,1)| > 4 happens
    assert np.isfinite(x).all(), x


class DeclinesOddLengths(ScanOnly):
    """Declines (NotImplementedError) every input of odd length."""

    def scan(self, x, **kw):
        if len(x) % 2:
            raise NotImplementedError("odd lengths are outside this kernel")
        return super().scan(x, **kw)


def test_reports_count_examples_rejected_and_shrink_calls_apart_per_dtype(tmp_path):
    from conformance import runner

    seen = []
    real = runner.one_example

    def spy(backend, op, args, kwargs, **kw):
        seen.append(len(args[0]))
        return real(backend, op, args, kwargs, **kw)

    runner.one_example = spy
    try:
        rep = runner.run_op(DeclinesOddLengths(), "odd", "scan", max_examples=40, db=None, seed=3)
    finally:
        runner.one_example = real
    odd = sum(n % 2 for n in seen)
    assert rep.status == "pass" and rep.rejected == odd > 0 and rep.examples == len(seen) - odd
    assert rep.shrink_calls == 0
    assert sum(t["examples"] for t in rep.by_dtype.values()) == rep.examples
    assert sum(t["rejected"] for t in rep.by_dtype.values()) == rep.rejected
    assert max(t["max_n"] for t in rep.by_dtype.values()) == max(seen)
    floats = [t["worst_margin"] for d, t in rep.by_dtype.items() if d.startswith("float")]
    assert floats and 0 < max(floats) < 1  # float sums are not bit-exact, and within tolerance
    assert all(t["worst_margin"] == 0 for d, t in rep.by_dtype.items() if d.startswith("int"))
    assert rep.worst_margin == max(t["worst_margin"] for t in rep.by_dtype.values())

    bad = faults.FaultyBackend(__import__("npu").MmvrefBackend(), "block_boundary_off_by_one")
    rep = runner.run_op(bad, "faulty", "scan", max_examples=100, db=None, seed=1, explicit=False)  # shrunk
    assert rep.status == "fail" and rep.shrink_calls > 0
    assert rep.examples == sum(t["examples"] for t in rep.by_dtype.values())
    doc = report.to_json([rep], backend="faulty", profile="default", seed=1, s=8, policy="derived", seconds=1.0)
    assert report.validate(doc) == []
    md = report.to_markdown([rep], backend="faulty", profile="default", seconds=1.0)
    assert "| scan | all | fail |" in md and any(f"| scan | {d} |" in md for d in rep.by_dtype)
    assert "shrink calls" in report.to_junit([rep], backend="faulty", seconds=1.0)


class _TwoScanKernels:
    """A backend with two scan kernels behind ``variant=``; "fast" is wrong where a tile of 4 ends."""

    def variants(self, op):
        return ("exact", "fast") if op == "scan" else ()

    def scan(self, x, *, exclusive=False, variant="exact"):
        import mmvref

        z = mmvref.scan(x, exclusive=exclusive)
        if variant == "fast" and len(z) > 4:
            z = z.copy()
            z[4] += 1
        return z


def test_every_declared_variant_is_checked():
    """A bug in one kernel variant fails the op, the message naming the variant; a backend whose
    variants all agree passes; without ``variants`` the method is called without ``variant=``."""
    rep = runner.run_op(_TwoScanKernels(), "two-kernels", "scan", s=4, max_examples=30, db=None,
                        derandomize=True)
    assert rep.status == "fail" and "variant='fast'" in rep.message, rep.message

    class Honest(_TwoScanKernels):
        def variants(self, op):
            return ("exact",) if op == "scan" else ()

    assert runner.run_op(Honest(), "honest", "scan", s=4, max_examples=30, db=None, derandomize=True).status == "pass"
    assert runner.variants_of(ScanOnly(), "scan") == (None,)


def test_variants_may_declare_the_dtypes_each_takes():
    """A variant is called only with the value dtypes it declares (None: all)."""

    class PerDtype(_TwoScanKernels):
        def variants(self, op):
            return {"exact": None, "fast": ("float32",)} if op == "scan" else ()

    ints = np.arange(10, dtype=np.int16)
    assert runner.variants_of(PerDtype(), "scan", ints.dtype) == ("exact",)
    assert runner.variants_of(PerDtype(), "scan", np.dtype(np.float32)) == ("exact", "fast")
    assert runner.one_example(PerDtype(), "scan", (ints,), {}, s=4) is None  # "fast" (wrong) not called
    msg = runner.one_example(PerDtype(), "scan", (ints.astype(np.float32),), {}, s=4)
    assert msg and "variant='fast'" in msg
