"""npu.coverage (``python -m npu --coverage``): the table builder on synthetic inputs, the rendering and
the command line, and the real table (every upstream kernel explained); its conformance column, judged by
conformance.coverage (``python -m conformance --coverage``), npu itself importing nothing of the suite."""
from __future__ import annotations

import subprocess
import sys

import pytest

from npu import coverage
from npu.__main__ import main

pytestmark = pytest.mark.native_only  # no kernel chosen by the compile target

KERNELS = ("run_a", "run_b", "run_c", "run_d")


def checked(text):
    return text.startswith("op")


def inputs(**over):
    base = dict(
        kernels=KERNELS,
        wraps={"fam1": {"run_a": "op scan, variant=single_core", "run_b": "stage diff"}},
        not_wrapped={"fam2": {"run_c": "a layout helper", "run_d": "no op computes it"}},
        dtypes={"fam1": {"run_a": "int8 -> int32", "run_b": "fp16 -> fp16"},
                "fam2": {"run_c": "fp16 -> fp16", "run_d": "int16 -> int32"}},
        standins={"run_a", "run_b", "run_c", "run_d"},
        tests={"run_a": ["test_upstream_a.py", "test_upstream_ab.py"], "run_b": ["test_upstream_ab.py"],
               "run_c": ["test_upstream_c.py"], "run_d": ["test_upstream_d.py"]},
        checked=checked,
    )
    base.update(over)
    return base


def rows_gaps(**over):
    rows, gaps = coverage.build_table(**inputs(**over))
    return {r.kernel: r for r in rows}, gaps


def test_a_complete_table_has_no_gap_and_every_column():
    rows, gaps = rows_gaps()
    assert gaps == [] and list(rows) == list(KERNELS)
    a, b, c = rows["run_a"], rows["run_b"], rows["run_c"]
    assert a.wrapped == "op scan, variant=single_core" and a.conformance and a.dtypes == "int8 -> int32"
    assert a.tests == ("test_upstream_a.py", "test_upstream_ab.py") and a.standin
    assert b.wrapped == "stage diff" and not b.conformance  # the checker says no
    assert c.wrapped == "not wrapped: a layout helper" and not c.conformance and c.gaps == ()


@pytest.mark.parametrize("case, kernel, gap", [
    ("neither", "run_a", "in no WRAPS nor NOT_WRAPPED"),
    ("both", "run_c", "in fam1.WRAPS and fam2.NOT_WRAPPED"),
    ("twice", "run_a", "in fam1.WRAPS and fam3.WRAPS"),
    ("no_standin", "run_d", "no stand-in twin"),
    ("no_test", "run_b", "no upstream-derived test calls it"),
    ("no_dtypes", "run_c", "no DTYPES entry"),
])
def test_each_kind_of_gap_is_found(case, kernel, gap):
    i = inputs()
    if case == "neither":
        i["wraps"] = {"fam1": {"run_b": "stage diff"}}
    elif case == "both":
        i["wraps"]["fam1"]["run_c"] = "op compress"
    elif case == "twice":
        i["wraps"]["fam3"] = {"run_a": "op scan"}
    elif case == "no_standin":
        i["standins"] = {"run_a", "run_b", "run_c"}
    elif case == "no_test":
        i["tests"] = {k: v for k, v in i["tests"].items() if k != "run_b"}
    elif case == "no_dtypes":
        del i["dtypes"]["fam2"]["run_c"]
    rows, gaps = coverage.build_table(**i)
    assert gaps == [f"{kernel}: {gap}"]
    assert [r.gaps for r in rows if r.kernel == kernel] == [(gap,)]
    if case == "neither":
        assert rows[0].wrapped == "?" and not rows[0].conformance


def test_names_that_are_no_upstream_kernel_and_global_errors_are_gaps():
    i = inputs(standins={"run_a", "run_b", "run_c", "run_d", "run_extra"}, errors=["npu/_tcuscan/x.py: boom"])
    i["not_wrapped"]["fam2"]["run_typo"] = "?"
    _, gaps = coverage.build_table(**i)
    assert gaps == ["npu/_tcuscan/x.py: boom", "run_typo: in fam2.NOT_WRAPPED but not an upstream kernel",
                    "run_extra: a stand-in twin but not an upstream kernel"]


def test_without_the_tests_directory_the_tests_column_says_so_and_is_no_gap():
    rows, gaps = rows_gaps(tests=None)
    assert gaps == [] and all(r.tests is None for r in rows.values())
    t = coverage.Table(tuple(rows.values()), (), None)
    assert coverage.TESTS_NOT_FOUND in coverage.render_text(t)
    assert coverage.TESTS_NOT_FOUND in coverage.render_markdown(t)


@pytest.mark.parametrize("text, expected", [
    ("op scan", True),
    ("op scan, variant=multi_cube", True),
    ("op scan, variant='single_core'", True),
    ("op scan, variant=batch", False),          # not a declared variant
    ("op frobnicate", False),                   # no strategy
    ("op weighted_sample", False),              # a strategy, but the backend lacks the op
    ("stage diff", True),
    ("stage nope", False),
    ("stage diff, variant=x", False),           # stages have no variants
    ("op scan, variant=multi_cube; stage diff", True),
    ("op scan; op frobnicate", False),
    ("a helper", False),
])
def test_conformance_checked(text, expected):
    got = coverage.conformance_checked(
        text, strategies={"scan": 1, "weighted_sample": 1, "frobnicate_not": 1}, stages={"diff": 1},
        backend_ops={"scan", "diff", "frobnicate"},
        variants=lambda op: {"scan": {"single_core": None, "multi_cube": ("float16",)}}.get(op, ()))
    assert got is expected


def test_upstream_test_calls_are_found_by_call_or_quoted_name(tmp_path):
    (tmp_path / "test_upstream_x.py").write_text("ops().run_seg_sum(x, f, 32)\n# run_b mentioned only\n")
    (tmp_path / "test_upstream_y.py").write_text("K = ['run_seg_sum_multi_core']\ngetattr(ops(), k)(x)\n")
    (tmp_path / "test_upstream_inventory.py").write_text("ops().run_b(x)\n")  # the inventory is no port
    calls = coverage.upstream_test_calls(tmp_path, ("run_seg_sum", "run_seg_sum_multi_core", "run_b"))
    assert calls == {"run_seg_sum": ["test_upstream_x.py"], "run_seg_sum_multi_core": ["test_upstream_y.py"],
                     "run_b": []}


def test_the_kernel_list_is_upstream_s_52():
    assert len(coverage.UPSTREAM_KERNELS) == len(set(coverage.UPSTREAM_KERNELS)) == 52
    assert all(k.startswith("run_") for k in coverage.UPSTREAM_KERNELS)


def test_renderers_and_command_line(capsys):
    rows, gaps = rows_gaps(standins={"run_a", "run_b", "run_c"})
    t = coverage.Table(tuple(rows.values()), tuple(gaps), "tests/upstream")
    md = coverage.render_markdown(t)
    assert md.startswith("| Kernel | Wrapped as |") and md.count("\n| `run_") == 4
    assert "| `run_d` | not wrapped: no op computes it | int16 -> int32 | no |" in md
    assert "GAP: no stand-in twin" in coverage.render_text(t)
    assert coverage.render_gaps(t) == "run_d: no stand-in twin\n1 unexplained gap(s)\n"
    assert main([]) == 0 and "NPU stack" in capsys.readouterr().out
    assert main(["--coverage", "--markdown"]) == 0
    assert capsys.readouterr().out.startswith("| Kernel |")


def test_without_a_checker_the_conformance_column_is_not_judged_nor_shown():
    rows, gaps = rows_gaps(checked=None)
    assert gaps == [] and all(r.conformance is None for r in rows.values())
    t = coverage.Table(tuple(rows.values()), (), "tests/upstream")
    assert not t.judged and "conformance-checked not judged here" in t.summary()
    assert "conformance-checked:" not in coverage.render_text(t)
    md = coverage.render_markdown(t)
    assert "Conformance-checked" not in md
    assert "| `run_d` | not wrapped: no op computes it | int16 -> int32 | yes | `test_upstream_d.py` |\n" in md
    judged = coverage.Table(tuple(rows_gaps()[0].values()), (), "tests/upstream")
    assert judged.judged and "1 conformance-checked" in judged.summary()  # run_a only: the checker's "op"
    assert "| Conformance-checked |" in coverage.render_markdown(judged)


def test_npu_imports_nothing_of_the_conformance_suite():
    """npu sits below conformance: its coverage command runs without importing the suite."""
    code = ("import contextlib, io, sys\n"
            "from npu.__main__ import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    for argv in (['--coverage'], ['--coverage', '--markdown'], ['--coverage', '--check']):\n"
            "        main(argv)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'conformance'))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_conformance_column_is_judged_by_the_suite(capsys):
    from conformance import coverage as conformance_coverage
    from conformance.__main__ import main as conformance_main
    from conformance.stages import STAGES
    from conformance.strategies import STRATEGIES

    plain, judged = coverage.table(), conformance_coverage.table()
    assert not plain.judged and judged.judged
    assert judged.gaps == plain.gaps and [r.kernel for r in judged.rows] == [r.kernel for r in plain.rows]
    for p, j in zip(plain.rows, judged.rows):
        assert p.conformance is None and (p.wrapped, p.dtypes, p.standin, p.tests) == (j.wrapped, j.dtypes,
                                                                                       j.standin, j.tests)
        if j.wrapped.startswith(("not wrapped", "?")):
            assert j.conformance is False
        else:  # the checker sees the suite's own ops and stages
            for kind, name, _ in coverage._TARGET.findall(j.wrapped):
                if name not in (STRATEGIES if kind == "op" else STAGES):
                    assert j.conformance is False
    assert any(r.conformance for r in judged.rows)
    assert conformance_main(["--coverage", "--markdown"]) == 0
    out = capsys.readouterr().out
    assert out == coverage.render_markdown(judged) and "| Conformance-checked |" in out.splitlines()[0]
    assert conformance_main(["--coverage", "--check"]) == (1 if judged.gaps else 0)
    assert capsys.readouterr().out == coverage.render_gaps(plain)
    assert conformance_main(["--check"]) == 2  # only with --coverage
    assert "--check and --markdown go with --coverage" in capsys.readouterr().err


def test_python_dash_m_npu_check_exit_status():
    r = subprocess.run([sys.executable, "-m", "npu", "--coverage", "--check"], capture_output=True, text=True)
    t = coverage.table()
    assert r.returncode == (1 if t.gaps else 0)
    assert r.stdout == coverage.render_gaps(t)


def test_the_real_table_has_no_unexplained_gap():
    """Every upstream kernel wrapped or explained, stood in for, with its dtypes, called by a ported test.
    Fails until every kernel family is done (``python -m npu --coverage --check`` lists what is left)."""
    t = coverage.table()
    assert t.tests_dir is not None, "tests/upstream not found"
    assert not t.gaps, coverage.render_gaps(t)
