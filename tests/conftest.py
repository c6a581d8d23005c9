import gc
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", derandomize=True, max_examples=50, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "dev", max_examples=200, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    # After each test (its fixtures torn down), collect garbage once and freeze what is left. A
    # worker's heap grows by every Numba compilation (types, IR, dispatchers, kept alive by the
    # caches), and each automatic full collection walks all of it: on a cold cache, serially over
    # test_cold_scanfamily + test_segment_reduce, 109 full collections took 77 s of 447 s. Frozen
    # objects are never walked again, so a collection sees only what the running test allocated.
    # Garbage is still collected (here, and by any collection inside a test); what a finished
    # test leaves alive (caches, module globals) stays alive, as it would have anyway.
    yield
    gc.collect()
    gc.freeze()


def pytest_sessionfinish(session):
    # Collect garbage once, then freeze what is left, before the session reports that it has finished.
    # pytest's unraisable-exception cleanup runs five full collections after that report; on a heap
    # that holds thousands of Numba compilations each takes seconds, and an xdist worker still busy
    # 5 s after the controller asked it to stop is sent SIGINT by execnet. The KeyboardInterrupt then
    # lands in Hypothesis's gc callback and is reported as an unraisable-exception warning. Finalizers
    # of the garbage collected here still run, so their unraisable exceptions are still reported.
    gc.collect()
    gc.freeze()
