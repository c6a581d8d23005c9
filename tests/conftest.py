import gc
import os

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


def pytest_sessionfinish(session):
    # Collect garbage once, then freeze what is left, before the session reports that it has finished.
    # pytest's unraisable-exception cleanup runs five full collections after that report; on a heap
    # that holds thousands of Numba compilations each takes seconds, and an xdist worker still busy
    # 5 s after the controller asked it to stop is sent SIGINT by execnet. The KeyboardInterrupt then
    # lands in Hypothesis's gc callback and is reported as an unraisable-exception warning. Finalizers
    # of the garbage collected here still run, so their unraisable exceptions are still reported.
    gc.collect()
    gc.freeze()
