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


class _ScanBackend:
    """The correct mmvref scan, and nothing else."""

    name = "scan-only"

    def scan(self, *a, **k):
        return MmvrefBackend().scan(*a, **k)


class RegimesRaise(_ScanBackend):
    """A device query that fails while the suite describes the backend."""

    def regimes(self):
        raise RuntimeError("device query failed:\nno NPU answered on /dev/davinci0")


class RegimesRaiseLater(_ScanBackend):
    """regimes() answers once (while the backend is described), then its device query fails."""

    calls = 0

    def regimes(self):
        RegimesRaiseLater.calls += 1
        if RegimesRaiseLater.calls > 1:
            raise RuntimeError("device query failed on the second call")
        return {"tiles": (8,)}


class ConstructorRaises(_ScanBackend):
    def __init__(self):
        raise OSError("cannot open /dev/davinci0")


class DtypesRaise(_ScanBackend):
    def dtypes(self, op):
        raise KeyError(op)


class VersionRaises(_ScanBackend):
    def version(self):
        raise RuntimeError("firmware version query timed out")


class UnknownRegimes(_ScanBackend):
    """Declares a regime the suite does not know: a configuration error, not a crash."""

    def regimes(self):
        return {"tiles": (8,), "warps": (32,)}


class UnknownErrorModel(_ScanBackend):
    def error_model(self, op):
        return "fuzzy"
