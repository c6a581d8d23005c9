"""Kernel-scale inputs (issue 15, point 2): a backend's declared regimes put lengths and CSR rows
at its seams, tiers weigh small / medium / large inputs, and failures still shrink small."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import faults, regimes, runner, strategies
from npu import MmvrefBackend

pytestmark = pytest.mark.native_only  # the suite's own logic: not target-dependent


def test_seam_lengths_and_row_lengths():
    r = regimes.Regimes(tiles=(8,), lanes=(16,), cores=(20,), row_buckets=(64,))
    seams = set(r.seam_lengths())
    for S_j in (8, 64, 512, 4096, 32768, 262144, 2097152):  # S^j up to max_n = 2^22
        for k in (1, 2, 3):
            if k * S_j + 1 <= r.max_n:
                assert {k * S_j - 1, k * S_j, k * S_j + 1} <= seams
    assert {(1 << 22) - 1, 1 << 22} <= seams and max(seams) <= 1 << 22
    assert {20 * 8 - 1, 20 * 8, 20 * 64 + 1, 15, 17} <= seams  # cores x tile, lanes +- 1
    assert set(r.row_lengths()) == {0, 1, 7, 8, 9, 63, 64, 65}
    assert regimes.Regimes(tier="release").max_n == 10_000_000
    with pytest.raises(ValueError, match="tier"):
        regimes.Regimes(tier="huge")
    with pytest.raises(ValueError, match="tiles"):
        regimes.Regimes(tiles=(1,))


def test_backend_declared_regimes():
    class Declares:
        def regimes(self):
            return {"tiles": [128], "row_buckets": [32]}

    r = regimes.for_backend(Declares(), s=8, tier="default")
    assert r.tiles == (128,) and r.row_buckets == (32,) and r.lanes == regimes.Regimes().lanes
    assert {128 * 128 - 1, 2 * 128 ** 3 - 1, 2 * 128 ** 3} <= set(r.seam_lengths())
    assert regimes.for_backend(object(), s=16).tiles == (16,)  # none declared: the run's s
    assert regimes.for_backend(MmvrefBackend(), s=16).tiles == (8,)  # declared
    fb = faults.FaultyBackend(MmvrefBackend(), "spmv_rows_of_64_dropped")
    assert 64 in regimes.for_backend(fb).row_buckets and 48 in regimes.for_backend(fb).row_buckets

    class Bad:
        def regimes(self):
            return {"tiles": [8], "warp": 32}

    with pytest.raises(ValueError, match="warp"):
        regimes.for_backend(Bad())


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.data())
def test_tiers_reach_kernel_scale(data):
    """Every tier shows up: lengths above 2^16 in the default tier, row seams in CSR matrices."""
    r = regimes.Regimes()
    n = data.draw(strategies.lengths(8, regimes=r))
    assert 0 <= n <= r.max_n
    test_tiers_reach_kernel_scale.seen.add("large" if n > regimes.MEDIUM_MAX else "medium" if n > 1280 else "small")


test_tiers_reach_kernel_scale.seen = set()


def test_tiers_seen():
    test_tiers_reach_kernel_scale()
    assert test_tiers_reach_kernel_scale.seen == {"small", "medium", "large"}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.data())
def test_csr_row_seams_are_drawn(data):
    r = regimes.Regimes()
    ptr, ind, val, shape = data.draw(strategies.csr_matrices("float32", 8, regimes=r))
    lens = set(np.diff(ptr).tolist())
    test_csr_row_seams_are_drawn.seen |= lens & set(r.row_lengths())


test_csr_row_seams_are_drawn.seen = set()


def test_every_row_seam_is_drawn():
    test_csr_row_seams_are_drawn()
    assert test_csr_row_seams_are_drawn.seen == set(regimes.Regimes().row_lengths())


class _FixedRegimes:
    """mmvref's scan with regimes that do not depend on this process's thread count (so the drawn
    inputs are the same in every test process)."""

    def scan(self, *a, **k):
        return MmvrefBackend().scan(*a, **k)

    def regimes(self):
        return {"tiles": (8,), "lanes": (8, 16), "cores": (2, 8)}


def test_a_seam_fault_shrinks_to_the_smallest_failing_seam():
    """scan wrong only at index 4095: found by the default tier and shrunk to the smallest length
    that still shows it (4096 elements). Integers, which are compared exactly: in a float32 sum of
    4096 terms one lost term can lie within the worst-case rounding bound."""
    bad = faults.FaultyBackend(_FixedRegimes(), "scan_wrong_at_4095")
    rep = runner.run_op(bad, "faulty", "scan", max_examples=300, db=None, seed=0, explicit=False,
                        dtypes=["int32"])
    assert rep.status == "fail"
    assert "array of shape (4096,)" in rep.counterexample, rep.counterexample
    small = faults.FaultyBackend(MmvrefBackend(), "block_boundary_off_by_one")
    rep = runner.run_op(small, "faulty", "scan", max_examples=100, db=None, seed=0, explicit=False)
    assert rep.status == "fail" and "<" not in rep.counterexample  # shrunk to a printable (<= 64) array


def test_profiles_have_tiers():
    assert {p["tier"] for p in runner.PROFILES.values()} == {"default", "release"}
    assert runner.PROFILES["release"]["max_examples"] >= runner.PROFILES["default"]["max_examples"]


def test_strata_row_lengths_hold_every_power_of_two_and_the_declared_seams():
    """2^k - 1, 2^k, 2^k + 1 for every 2^k up to max_n whatever the backend declares, the declared
    row seams on top (the release-gate strata: conformance.strata)."""
    r = regimes.Regimes(tiles=(8,), row_buckets=(100,))
    got = set(r.strata_row_lengths())
    want, p = set(), 1
    while p <= 1 << 22:
        want |= {p - 1, p, p + 1} - {(1 << 22) + 1}
        p *= 2
    assert got == want | {7, 8, 9, 99, 100, 101} and max(got) == r.max_n
    release = regimes.Regimes(tier="release")
    assert max(release.strata_row_lengths()) == (1 << 23) + 1  # max_n = 10^7 lies between 2^23 + 1 and 2^24


def test_large_length_is_the_shortest_large_seam():
    r = regimes.Regimes()
    assert r.large_length() == (1 << 16) + 1
    assert r.large_length(cap=1 << 10) == 1 << 10 and r.large_length(cap=1 << 16) == 1 << 16


def test_unusable_declarations_are_regimes_errors():
    class NotADict:
        def regimes(self):
            return [8, 16]

    class Raises:
        def regimes(self):
            raise RuntimeError("device query failed")

    with pytest.raises(regimes.RegimesError, match="must return a dict"):
        regimes.for_backend(NotADict())
    with pytest.raises(regimes.RegimesError, match="lanes"):
        regimes.Regimes(lanes=("x",))
    with pytest.raises(RuntimeError, match="device query"):  # the backend's own error passes through
        regimes.for_backend(Raises())
