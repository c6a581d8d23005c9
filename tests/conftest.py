import gc
import os

import pytest
from hypothesis import HealthCheck, settings
from numba.core import event

settings.register_profile(
    "ci", derandomize=True, max_examples=50, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev", max_examples=200, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


class _CompileCount(event.Listener):
    """Counts Numba's compile events (every dispatcher, nested ones included) in this process."""

    def __init__(self):
        self.n = 0

    def on_start(self, ev):
        self.n += 1

    def on_end(self, ev):
        pass


_COMPILES = _CompileCount()
event.register("numba:compile", _COMPILES)
_frozen_at = [0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    # After a test that compiled (its fixtures torn down), collect garbage once and freeze what is
    # left. A worker's heap grows by every Numba compilation (types, IR, dispatchers, kept alive by
    # the caches), and each full collection walks all of it: on a cold cache, serially over
    # test_cold_scanfamily + test_segment_reduce, 109 full collections took 77 s of 447 s. Frozen
    # objects are never walked again, so later collections see only what was allocated since.
    # Garbage is still collected (here, and by any collection inside a test); what a finished test
    # leaves alive (caches, module globals) stays alive, as it would have anyway. Tests that
    # compiled nothing (most of them) skip this: a collection per test would cost more than it saves.
    yield
    if _COMPILES.n != _frozen_at[0]:
        gc.collect()
        gc.freeze()
        _frozen_at[0] = _COMPILES.n


def pytest_sessionfinish(session):
    # Collect garbage once, then freeze what is left, before the session reports that it has finished.
    # pytest's unraisable-exception cleanup runs five full collections after that report; on a heap
    # that holds thousands of Numba compilations each takes seconds, and an xdist worker still busy
    # 5 s after the controller asked it to stop is sent SIGINT by execnet. The KeyboardInterrupt then
    # lands in Hypothesis's gc callback and is reported as an unraisable-exception warning. Finalizers
    # of the garbage collected here still run, so their unraisable exceptions are still reported.
    gc.collect()
    gc.freeze()
