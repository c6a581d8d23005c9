"""The PyG benchmark's report (``benchmarks/pyg.py``): the Amdahl ceilings of issue 33's step
targets, computed from one profiled step, and the target lines that cite them."""
from __future__ import annotations

import math

import pytest

from benchmarks import pyg as bench

pytestmark = pytest.mark.native_only  # report arithmetic: not target-dependent


def _profile(aggregation, messages, dense, other, outside):
    p = {"aggregation": aggregation, "message building": messages, "dense matmul": dense,
         "other torch ops": other, "outside torch ops": outside}
    p["step (profiled)"] = sum(p.values())
    return p


def test_ceilings_scale_the_profiled_shares_to_the_timed_step():
    # profiled step 50 ms: 20 replaceable, 20 dense, 10 other; timed median 40 ms (profiling overhead 25%)
    c = bench.ceilings(stock_best_ms=96.0, enabled_ms=40.0, prof=_profile(15.0, 5.0, 20.0, 8.0, 2.0))
    # without the 20 replaceable ms of 50, the timed step would be 40 * 30 / 50 = 24 ms: 96 / 24 = 4x
    assert c["free_aggregation"] == pytest.approx(4.0)
    # the dense matmuls alone: 40 * 20 / 50 = 16 ms: 96 / 16 = 6x
    assert c["dense_only"] == pytest.approx(6.0)
    assert c["replaceable_share"] == pytest.approx(0.4) and c["dense_share"] == pytest.approx(0.4)


def test_a_step_of_replaceable_work_only_has_no_ceiling():
    c = bench.ceilings(10.0, 5.0, _profile(4.0, 1.0, 0.0, 0.0, 0.0))
    assert math.isinf(c["free_aggregation"]) and math.isinf(c["dense_only"])


def _row(model, repr_, stock_ms, mmvref_ms, vs_best, ceiling=None):
    r = {"model": model, "graph": "20k", "repr": repr_, "stock": {"ms": stock_ms, "spread": 1.0},
         "mmvref": {"ms": mmvref_ms, "spread": 1.0}, "vs_same": stock_ms / mmvref_ms, "vs_best": vs_best}
    if ceiling is not None:
        r["ceiling"] = ceiling
    return r


def test_a_missed_target_cites_its_ceiling_and_says_when_it_is_out_of_reach():
    below = bench.ceilings(60.0, 30.0, _profile(10.0, 0.0, 15.0, 5.0, 0.0))   # free aggregation: 3.0x
    rows = [_row("sage-sum", "edge_index", 200.0, 30.0, 2.0, below), _row("sage-sum", "adj_t (CSR)", 60.0, 31.0, 1.94),
            _row("sage-max", "edge_index", 300.0, 10.0, 6.0)]
    text = bench._targets(rows, {})
    line = next(ln for ln in text.splitlines() if "| sage-sum |" in ln and ">= 3x" in ln)
    assert "**NOT met**" in line and "edge_index" in line
    # 60 / (30 * 20 / 30) = 3.0 (dense alone: 60 / 15 = 4.0): equal to the target, so reachable in principle (not "out of reach")
    assert "a free aggregation would give 3.00x, the dense matmuls alone 4.00x" in line
    assert "out of reach" not in line
    rows[0]["ceiling"] = bench.ceilings(60.0, 30.0, _profile(5.0, 0.0, 20.0, 5.0, 0.0))  # 60 / 25 = 2.4x
    line = next(ln for ln in bench._targets(rows, {}).splitlines() if "| sage-sum |" in ln and ">= 3x" in ln)
    assert "out of reach: a free aggregation would give 2.40x" in line
    met = next(ln for ln in bench._targets(rows, {}).splitlines() if "| sage-max |" in ln and ">= 5x" in ln)
    assert met.rstrip(" |").endswith("met") and "ceiling" not in met and "free aggregation" not in met
    table = bench._ceiling_table(rows)
    assert table.count("\n") == 2 and "| sage-sum | 20k | edge_index | 2.00x | 17% | 67% | 2.40x | 3.00x | 3x |" in table
