import pytest

import npu

pytestmark = pytest.mark.native_only  # the golden model / stand-in: no kernel chosen by the compile target


def test_import_npu_without_the_npu_stack():
    # This machine has no torch_npu, CANN or tcuscan: import works and says what is missing.
    assert npu.is_available() is False
    names = " ".join(npu.missing())
    assert "torch_npu" in names and "tcuscan" in names
    assert issubclass(npu.NpuUnavailableError, RuntimeError)
