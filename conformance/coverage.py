"""The upstream kernel coverage table with its conformance column (``python -m conformance
--coverage``).

``npu.coverage`` builds the table (per upstream kernel of ``tcuscan_ops``: what wraps it, its
dtypes, its stand-in twin, the upstream-derived tests that call it) but, sitting below the
suite, cannot say whether the suite checks a kernel; this module gives it the suite's op
names with a strategy (``conformance.strategies.STRATEGIES``) and its stages
(``conformance.stages.STAGES``): a kernel is conformance-checked when what wraps it is such
an op or stage that ``TcuscanBackend`` has (and, for "op X, variant=V", V is among its
``variants(X)``). The renderers are ``npu.coverage``'s.
"""
from __future__ import annotations

from npu import coverage as _npu_coverage
from npu.coverage import Table, render_gaps, render_markdown, render_text

from . import stages, strategies

__all__ = ["table", "Table", "render_text", "render_markdown", "render_gaps"]


def table(tests_dir="auto") -> Table:
    """The coverage table of this checkout, its conformance column judged against this suite
    (``tests_dir`` as ``npu.coverage.table``'s)."""
    return _npu_coverage.table(tests_dir, strategies=strategies.STRATEGIES, stages=stages.STAGES)
