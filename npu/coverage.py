"""Which of upstream's kernels the project covers, and how (``python -m npu --coverage``).

One row per kernel of ``tcuscan_ops`` (``UPSTREAM_KERNELS``):

- wrapped as: the ``TcuscanBackend`` op or stage that calls it (the family
  modules' ``WRAPS``, npu/_tcuscan/<family>.py), or "not wrapped: <reason>"
  (their ``NOT_WRAPPED``);
- dtypes: argument -> result dtypes (the stand-in family modules' ``DTYPES``,
  npu/_standin/<family>.py);
- stand-in: whether ``npu._standin`` has its CPU twin;
- tested by: the ports of upstream's tests (tests/upstream/test_upstream_*.py)
  that call it, when the repository's tests/ directory is present;
- conformance: whether the conformance suite checks what wraps it: an op with a
  strategy or a stage of the suite that the backend has, and for "op X, variant=V"
  a V among ``TcuscanBackend.variants(X)``. The suite's ops and stages are given by
  the caller (``table(strategies=..., stages=...)``: npu does not import the suite,
  which sits above it); without them the column is not judged and not shown.
  ``conformance.coverage.table()`` is the table with it (``python -m conformance
  --coverage``).

A gap is unexplained when a kernel is in no ``WRAPS`` / ``NOT_WRAPPED`` or in
more than one entry, has no stand-in twin or no ``DTYPES`` entry, or no ported
test calls it (or a name in those tables is no upstream kernel, or a family
module does not import); ``--check`` lists them and exits 1.
"""
from __future__ import annotations

import dataclasses
import importlib
import pathlib
import re

__all__ = ["UPSTREAM_KERNELS", "UPSTREAM_COMMIT", "Row", "Table", "build_table", "collect", "table",
           "conformance_checked", "render_text", "render_markdown", "render_gaps"]

UPSTREAM_COMMIT = "ddcd5ce"
#: the 52 Python names of ``tcuscan_ops``, in the order src/pybind11.cpp of huawei-csl/pytorch-tcuscan
#: defines them (``m.def("run_...")``) at commit ddcd5ce
UPSTREAM_KERNELS = (
    "run_add", "run_diff", "run_seg_scan", "run_scan_multi_core", "run_scan_multi_core_no_l2",
    "run_csr_gather", "run_compress", "run_filter_greater_eq", "run_filter_less_eq", "run_where",
    "run_compress_ind", "run_compress_ind_no_arange", "run_compress_pos", "run_seg_sum",
    "run_seg_sum_single_core", "run_seg_sum_multi_core", "run_seg_sum_single_cube", "run_seg_sum_multi_cube",
    "run_spmv", "run_spmv_v2", "run_spmv_multi_cube", "run_spmv_v2_multi_cube", "run_searchsorted",
    "run_copy", "run_scan_batch", "run_scan_single_core", "run_seg_scan_vec", "run_seg_scan_mc_revert",
    "run_topk_int16", "run_topk_fp16", "run_topk_pivot_fp16", "run_split", "run_split_ind", "run_mc_gather",
    "run_gather_spmv", "run_radix_sort", "run_matmul_cce", "run_row_scan", "run_gen_lower",
    "run_reduce_tiles", "run_cube_reduce", "run_complete_rows", "run_complete_blocks", "run_block_scan",
    "run_simple_pad", "run_scan_multi_cube", "run_scan_cpu", "run_tri_inv_col_sweep",
    "run_tri_inv_cube_col_sweep", "run_triu_inv_rec_unroll", "run_count_if", "run_histogram",
)

TESTS_NOT_FOUND = "tests not found"
_TARGET = re.compile(r"\b(op|stage)\s+([A-Za-z_]\w*)(?:\s*,\s*variant\s*=\s*['\"]?(\w+))?")


@dataclasses.dataclass(frozen=True)
class Row:
    kernel: str
    wrapped: str          # "op scan, variant=single_core" / "not wrapped: <reason>" / "?" (in neither table)
    dtypes: str           # "" when no DTYPES entry
    standin: bool
    tests: tuple | None   # port file names calling the kernel; None when tests/ is absent
    conformance: bool | None  # None: not judged (no conformance suite given to ``table``)
    gaps: tuple           # the unexplained gaps of this kernel (empty: none)


@dataclasses.dataclass(frozen=True)
class Table:
    rows: tuple
    gaps: tuple           # every unexplained gap, rows' and global ones, one line each
    tests_dir: str | None

    @property
    def judged(self) -> bool:
        """Whether the conformance column was judged (``table`` given the suite's ops and stages)."""
        return any(r.conformance is not None for r in self.rows)

    def summary(self) -> str:
        n = len(self.rows)
        wrapped = sum(not r.wrapped.startswith(("not wrapped", "?")) for r in self.rows)
        out = [f"{n} upstream kernels (huawei-csl/pytorch-tcuscan {UPSTREAM_COMMIT}): {wrapped} wrapped, "
               f"{sum(r.wrapped.startswith('not wrapped') for r in self.rows)} not wrapped (reason given), "
               f"{sum(r.standin for r in self.rows)} with a stand-in twin, "
               + (f"{sum(bool(r.tests) for r in self.rows)} tested by an upstream-derived test, "
                  if self.tests_dir else "upstream-derived tests not found, ")
               + (f"{sum(bool(r.conformance) for r in self.rows)} conformance-checked" if self.judged else
                  "conformance-checked not judged here (python -m conformance --coverage)")]
        out.append(f"{len(self.gaps)} unexplained gap(s)" if self.gaps else "no unexplained gap")
        return "; ".join(out)


def conformance_checked(wrapped, *, strategies, stages, backend_ops, variants):
    """Whether the conformance suite checks what ``wrapped`` (a WRAPS text) names: each "op X" has a
    strategy and is a backend method, each "stage X" is a stage the backend has, each "variant=V" is among
    ``variants(X)``. ``wrapped`` naming nothing: False."""
    targets = _TARGET.findall(wrapped or "")
    if not targets:
        return False
    for kind, name, variant in targets:
        if name not in backend_ops or name not in (strategies if kind == "op" else stages):
            return False
        if variant and (kind != "op" or variant not in (variants(name) or ())):
            return False
    return True


def build_table(kernels, wraps, not_wrapped, dtypes, standins, tests, checked, errors=()):
    """The coverage table from its inputs (each testable on its own).

    ``kernels``: the upstream names; ``wraps`` / ``not_wrapped`` / ``dtypes``: {family: {kernel: text}};
    ``standins``: the stand-in twins' names; ``tests``: {kernel: [port files]} or None (tests/ absent);
    ``checked``: text of a WRAPS entry -> conformance-checked?, or None (not judged: every row's
    ``conformance`` is None); ``errors``: global gaps (e.g. a family module that does not import)."""
    known = set(kernels)
    gaps = list(errors)
    for what, table in (("WRAPS", wraps), ("NOT_WRAPPED", not_wrapped), ("DTYPES", dtypes)):
        for fam, entries in table.items():
            for k in entries:
                if k not in known:
                    gaps.append(f"{k}: in {fam}.{what} but not an upstream kernel")
    for k in sorted(set(standins) - known):
        gaps.append(f"{k}: a stand-in twin but not an upstream kernel")
    rows = []
    for k in kernels:
        w = [(fam, t[k]) for fam, t in wraps.items() if k in t]
        nw = [(fam, t[k]) for fam, t in not_wrapped.items() if k in t]
        d = [t[k] for t in dtypes.values() if k in t]
        own = []
        if not w and not nw:
            own.append("in no WRAPS nor NOT_WRAPPED")
        elif len(w) + len(nw) > 1:
            places = [f"{fam}.WRAPS" for fam, _ in w] + [f"{fam}.NOT_WRAPPED" for fam, _ in nw]
            own.append("in " + " and ".join(places))
        if k not in standins:
            own.append("no stand-in twin")
        if not d:
            own.append("no DTYPES entry")
        elif len(d) > 1:
            own.append("in more than one DTYPES")
        ktests = None if tests is None else tuple(sorted(tests.get(k, ())))
        if ktests is not None and not ktests:
            own.append("no upstream-derived test calls it")
        if w:
            wrapped = "; ".join(t for _, t in w)
            conf = all(checked(t) for _, t in w) if checked is not None else None
        elif nw:
            wrapped, conf = "not wrapped: " + "; ".join(t for _, t in nw), False if checked is not None else None
        else:
            wrapped, conf = "?", False if checked is not None else None
        rows.append(Row(k, wrapped, "; ".join(d), k in standins, ktests, conf, tuple(own)))
        gaps.extend(f"{k}: {g}" for g in own)
    return rows, gaps


def _tests_dir():
    d = pathlib.Path(__file__).resolve().parent.parent / "tests" / "upstream"
    return d if d.is_dir() else None


def upstream_test_calls(tests_dir, kernels):
    """{kernel: [port files]}: the ports (test_upstream_*.py) that call the kernel (``.run_x(``) or
    name it as a string (``"run_x"``, for a parametrised kernel)."""
    out = {k: [] for k in kernels}
    pats = {k: re.compile(rf"(?:\.{k}\s*\(|['\"]{k}['\"])") for k in kernels}
    for path in sorted(pathlib.Path(tests_dir).glob("test_upstream_*.py")):
        if path.stem == "test_upstream_inventory":
            continue
        text = path.read_text(encoding="utf-8")
        for k, pat in pats.items():
            if pat.search(text):
                out[k].append(path.name)
    return out


def collect(tests_dir="auto", *, strategies=None, stages=None):
    """The inputs of ``build_table`` read from the project: the family modules' tables, the stand-in,
    the ported tests (``tests_dir``: "auto" = the repository's tests/upstream, None = none) and, when
    ``strategies`` and ``stages`` (the conformance suite's op names with a strategy and its stage
    names) are given, the checker of the conformance column (else None: not judged)."""
    from . import _standin

    families = _standin.FAMILIES
    wraps, not_wrapped, dtypes, errors = {}, {}, {}, []
    for fam in families:
        for pkg, names in (("_tcuscan", (("WRAPS", wraps), ("NOT_WRAPPED", not_wrapped))),
                           ("_standin", (("DTYPES", dtypes),))):
            modname = f"{__package__}.{pkg}.{fam}"
            try:
                mod = importlib.import_module(modname)
            except ModuleNotFoundError as exc:
                if exc.name != modname:
                    errors.append(f"npu/{pkg}/{fam}.py does not import: {exc}")
                continue
            except Exception as exc:  # a family module being written
                errors.append(f"npu/{pkg}/{fam}.py does not import: {type(exc).__name__}: {exc}")
                continue
            for attr, into in names:
                into[fam] = dict(getattr(mod, attr, None) or {})
    try:
        standins = set(_standin.kernels())
    except Exception as exc:
        standins = set()
        errors.append(f"npu._standin.kernels() fails: {type(exc).__name__}: {exc}")
    if tests_dir == "auto":
        tests_dir = _tests_dir()
    elif tests_dir is not None and not pathlib.Path(tests_dir).is_dir():
        tests_dir = None
    tests = upstream_test_calls(tests_dir, UPSTREAM_KERNELS) if tests_dir else None
    return dict(kernels=UPSTREAM_KERNELS, wraps=wraps, not_wrapped=not_wrapped, dtypes=dtypes,
                standins=standins, tests=tests, checked=_real_checker(errors, strategies, stages),
                errors=errors), tests_dir


def _real_checker(errors, strategies, stages):
    """The conformance column's checker for ``TcuscanBackend`` (None when ``strategies`` or ``stages``
    is not given); a backend module that does not import is a gap either way."""
    try:
        from ._tcuscan import TcuscanBackend
    except Exception as exc:
        errors.append(f"npu._tcuscan does not import: {type(exc).__name__}: {exc}")
        return None if strategies is None or stages is None else (lambda text: False)
    if strategies is None or stages is None:
        return None
    probe = object.__new__(TcuscanBackend)  # variants() reads only the class tables
    backend_ops = {n for n in dir(TcuscanBackend) if not n.startswith("_")}
    return lambda text: conformance_checked(text, strategies=strategies, stages=stages,
                                            backend_ops=backend_ops, variants=probe.variants)


def table(tests_dir="auto", *, strategies=None, stages=None) -> Table:
    """The coverage table of this checkout; its conformance column judged when the suite's op names
    with a strategy (``strategies``) and stage names (``stages``) are given
    (``conformance.coverage.table``), else left out."""
    inputs, tdir = collect(tests_dir, strategies=strategies, stages=stages)
    rows, gaps = build_table(**inputs)
    return Table(tuple(rows), tuple(gaps), None if tdir is None else str(tdir))


def _tests_cell(row):
    if row.tests is None:
        return TESTS_NOT_FOUND
    return ", ".join(row.tests) if row.tests else "none"


def _yn(b):
    return "yes" if b else "no"


def render_text(t: Table) -> str:
    lines = []
    for r in t.rows:
        lines.append(f"{r.kernel:<28} {r.wrapped}")
        lines.append(f"{'':<28} dtypes: {r.dtypes or '?'}")
        conf = f"conformance-checked: {_yn(r.conformance)} | " if t.judged else ""
        lines.append(f"{'':<28} stand-in: {_yn(r.standin)} | {conf}tested by: {_tests_cell(r)}")
        if r.gaps:
            lines.append(f"{'':<28} GAP: " + "; ".join(r.gaps))
    lines.append("")
    lines.append(t.summary())
    lines.extend(f"  gap: {g}" for g in t.gaps if not any(g.startswith(r.kernel + ":") for r in t.rows))
    return "\n".join(lines) + "\n"


def _md(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def render_markdown(t: Table) -> str:
    judged = t.judged
    lines = ["| Kernel | Wrapped as | Dtypes (argument -> result) | Stand-in | Upstream-derived tests |"
             + (" Conformance-checked |" if judged else ""),
             "| --- | --- | --- | --- | --- |" + (" --- |" if judged else "")]
    for r in t.rows:
        tests = _tests_cell(r) if r.tests is None else (", ".join(f"`{n}`" for n in r.tests) or "none")
        lines.append(f"| `{r.kernel}` | {_md(r.wrapped)} | {_md(r.dtypes or '?')} | {_yn(r.standin)} | "
                     f"{tests} |" + (f" {_yn(r.conformance)} |" if judged else ""))
    lines.append("")
    lines.append(t.summary() + ".")
    return "\n".join(lines) + "\n"


def render_gaps(t: Table) -> str:
    if not t.gaps:
        return f"no unexplained gap ({len(t.rows)} upstream kernels)\n"
    return "".join(f"{g}\n" for g in t.gaps) + f"{len(t.gaps)} unexplained gap(s)\n"
