"""Backends that misbehave, for the isolation tests (``tests/test_isolation.py``): each wraps the
correct mmvref backend and breaks one op on inputs longer than a few elements, so the shrunk or
saved input is small and the ops around it still conform."""
from __future__ import annotations

import ctypes
import time

from npu import MmvrefBackend


class Broken:
    """scan and compress correct; segmented_scan segfaults and segmented_sum hangs on inputs of
    more than 3 elements."""

    name = "broken"
    version = "broken-1.0"

    def __init__(self):
        self._base = MmvrefBackend()

    def scan(self, *a, **k):
        return self._base.scan(*a, **k)

    def compress(self, *a, **k):
        return self._base.compress(*a, **k)

    def segmented_scan(self, x, flags, **k):
        if len(x) > 3:
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        return self._base.segmented_scan(x, flags, **k)

    def segmented_sum(self, x, flags, **k):
        if len(x) > 3:
            time.sleep(3600)
        return self._base.segmented_sum(x, flags, **k)
