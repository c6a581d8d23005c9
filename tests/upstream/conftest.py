"""Fixtures every port of upstream's tests shares."""
import pytest


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """One torch intra-op thread per test process: the ports run as many small torch calls on a 2-core
    machine beside another pytest-xdist worker, where two threads each oversubscribe the cores (boolean
    indexing measured 20-30x slower); restored after the module."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
