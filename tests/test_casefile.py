"""Counterexample files are data only: saved cases round-trip exactly, and a file
that is not a case file (a crafted pickle above all) is refused without running it."""
from __future__ import annotations

import pickle
import zipfile

import numpy as np
import pytest

from conformance.__main__ import main
from conformance.casefile import CaseFileError, load_case, save_case

pytestmark = pytest.mark.native_only  # the suite's own logic: not target-dependent


def _case():
    csr = (np.array([0, 2, 3], np.int64), np.array([0, 2, 1], np.int32), np.array([1.5, -2.0, 3.0], np.float16),
           (2, 3))
    return {"op": "spmv", "args": (csr, np.array([1, 2, 3], np.int8)),
            "kwargs": {"exclusive": True, "dtype": None, "overflow": "wrap", "scale": float("nan"),
                       "k": np.int64(3), "flags": [True, False]},
            "s": 8, "policy": "derived", "backend": "faulty:x:mmvref"}


def test_round_trip_keeps_values_dtypes_and_structure(tmp_path):
    path = save_case(tmp_path / "c", _case())
    assert path.suffix == ".npz"
    got = load_case(path)
    want = _case()
    (ip, ix, d, shape), x = got["args"]
    (wip, wix, wd, wshape), wx = want["args"]
    for a, b in ((ip, wip), (ix, wix), (d, wd), (x, wx)):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    assert shape == wshape and isinstance(shape, tuple)
    kw = got["kwargs"]
    assert kw["exclusive"] is True and kw["dtype"] is None and kw["overflow"] == "wrap"
    assert np.isnan(kw["scale"]) and kw["k"] == 3 and kw["k"].dtype == np.int64
    assert kw["flags"] == [True, False]
    assert {k: got[k] for k in ("op", "s", "policy", "backend")} == {k: want[k] for k in ("op", "s", "policy",
                                                                                           "backend")}


def test_values_that_are_not_data_are_not_saved(tmp_path):
    with pytest.raises(TypeError, match="object array"):
        save_case(tmp_path / "c", {"op": "scan", "args": (np.array([object()]),)})
    with pytest.raises(TypeError, match="cannot save a"):
        save_case(tmp_path / "c", {"op": "scan", "args": (lambda: 0,)})


class _Payload:
    """Unpickling this creates a file: the proof that a loader ran code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_crafted_pickle_is_refused_and_never_run(tmp_path, capsys):
    marker = tmp_path / "ran"
    evil = tmp_path / "scan.pkl"
    evil.write_bytes(pickle.dumps({"op": "scan", "x": _Payload(str(marker))}))
    with pytest.raises(CaseFileError, match="not a case file"):
        load_case(evil)
    assert main(["--backend", "mmvref", "--replay", str(evil)]) == 2
    err = capsys.readouterr().err
    assert "--replay" in err and "not a case file" in err and "Traceback" not in err
    # the same pickle inside an .npz (an object array) is refused too
    boxed = tmp_path / "boxed.npz"
    arr = np.empty(1, object)
    arr[0] = _Payload(str(marker))
    np.savez(boxed, __case__=np.frombuffer(b'{"format": "mmvref-conformance-case/1", "case": {}}', np.uint8), a0=arr)
    with pytest.raises(CaseFileError, match="pickle"):
        load_case(boxed)
    assert not marker.exists()


@pytest.mark.parametrize("make", ["missing", "no-header", "bad-json", "bad-format", "unknown-tag", "bad-ref"])
def test_malformed_case_files_are_refused_with_the_reason(tmp_path, make):
    path = tmp_path / "c.npz"
    hdr = {"no-header": None, "bad-json": b"{not json", "bad-format": b'{"format": "other", "case": {}}',
           "unknown-tag": b'{"format": "mmvref-conformance-case/1", "case": {"$code": "print(1)"}}',
           "bad-ref": b'{"format": "mmvref-conformance-case/1", "case": {"$dict": {"op": "scan", '
                      b'"args": {"$tuple": [{"$array": "a9", "scalar": false}]}}}}'}.get(make)
    if make != "missing":
        members = {"a0": np.arange(3)}
        if hdr is not None:
            members["__case__"] = np.frombuffer(hdr, np.uint8)
        np.savez(path, **members)
        assert zipfile.is_zipfile(path)
    with pytest.raises(CaseFileError, match=str(path.name)):
        load_case(path)


@pytest.mark.parametrize("op", sorted(__import__("conformance.strategies", fromlist=["STRATEGIES"]).STRATEGIES))
def test_every_ops_inputs_round_trip(tmp_path, op):
    """What the runner saves (any op's generated inputs) loads back equal, dtypes included."""
    from hypothesis import HealthCheck, given, settings

    from conformance import strategies

    def same(a, b):
        if isinstance(a, np.ndarray) or isinstance(a, np.generic):
            assert type(a) is type(b) and a.dtype == b.dtype and a.shape == np.shape(b)
            np.testing.assert_array_equal(a, b)
        elif isinstance(a, (tuple, list)):
            assert type(a) is type(b) and len(a) == len(b)
            for x, y in zip(a, b):
                same(x, y)
        elif isinstance(a, dict):
            assert a.keys() == b.keys()
            for k in a:
                same(a[k], b[k])
        elif isinstance(a, float) and np.isnan(a):
            assert np.isnan(b)
        else:
            assert a == b and type(a) is type(b)

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(case=strategies.op_inputs(op, 4))
    def prop(case):
        args, kwargs = case
        path = save_case(tmp_path / op, {"op": op, "args": tuple(args), "kwargs": dict(kwargs)})
        got = load_case(path)
        same(got["args"], tuple(args))
        same(got["kwargs"], dict(kwargs))

    prop()
