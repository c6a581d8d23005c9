"""npu._device: what only runs with an NPU, run on the CPU over a fake NPU.

``FakeTorch`` is torch with an NPU bolted on: ``torch.device("npu:N")`` is a
fake device, tensors "moved" there stay on the CPU but record the move,
``torch.npu.synchronize`` counts, and every host read (``.cpu()``) of such a
tensor is logged, so the tests see the order of moves, synchronisations and
reads that the real device would get. The import path is tested with fake
``torch_npu`` / ``tcuscan_ops`` modules in ``sys.modules``."""
from __future__ import annotations

import importlib.machinery
import sys
import types

import numpy as np
import pytest

pytestmark = pytest.mark.native_only  # the stand-in: no kernel chosen by the compile target

torch = pytest.importorskip("torch")

import npu  # noqa: E402
from npu._device import DEFAULT_DEVICE, Device, import_kernels  # noqa: E402
from npu.testing import CpuTcuscanBackend, fake_tcuscan_ops  # noqa: E402


class FakeNpuDevice:
    type = "npu"

    def __init__(self, spec):
        self.spec = spec if ":" in spec else spec + ":0"
        self.index = int(self.spec.split(":")[1])

    def __str__(self):
        return self.spec

    def __eq__(self, other):
        return str(other) == self.spec

    def __hash__(self):
        return hash(self.spec)


class FakeTorch:
    """torch, except: "npu:N" devices, a torch.npu namespace, and a log of moves, syncs and reads."""

    def __init__(self):
        self.log = []
        log = self.log

        def synchronize(device=None):
            log.append(("sync", str(device)))

        self.npu = types.SimpleNamespace(synchronize=synchronize)

        class OnFakeNpu(torch.Tensor):
            """A CPU tensor standing for one on the fake NPU."""

            def to(self, *args, **kwargs):
                if args and isinstance(args[0], FakeNpuDevice):
                    log.append(("to", str(args[0]), args[1] if len(args) > 1 else kwargs.get("dtype")))
                    args = args[1:]
                    return super().to(*args, **kwargs) if args or kwargs else self
                return super().to(*args, **kwargs)

            def cpu(self):
                log.append(("read",))
                return torch.Tensor.cpu(self).as_subclass(torch.Tensor)

        self.OnFakeNpu = OnFakeNpu

    def __getattr__(self, name):
        return getattr(torch, name)

    def device(self, spec):
        spec = str(spec)
        return FakeNpuDevice(spec) if spec.startswith("npu") else torch.device(spec)

    def from_numpy(self, a):
        return torch.from_numpy(a).as_subclass(self.OnFakeNpu)

    def ones(self, *size, dtype=None, device=None):
        self.log.append(("alloc", str(device), dtype))
        return torch.ones(*size, dtype=dtype).as_subclass(self.OnFakeNpu)

    def events(self, kind):
        return [e for e in self.log if e[0] == kind]


def every_read_after_a_sync(log):
    """Each host read comes after a synchronisation with no move or allocation in between."""
    reads = [i for i, e in enumerate(log) if e[0] == "read"]
    for i in reads:
        before = [e for e in log[:i] if e[0] != "read"]
        if not before or before[-1][0] != "sync":
            return False
    return bool(reads)


# ----------------------------------------------------------------- moves and reads


def test_arrays_go_to_the_named_device_in_the_asked_dtype():
    ft = FakeTorch()
    dev = Device("npu:2", torch=ft)
    assert dev.is_npu and str(dev) == "npu:2" and dev.type == "npu"
    t = dev.to_device(np.arange(5, dtype=np.int16), torch.float16)
    assert ft.log == [("to", "npu:2", torch.float16)]
    assert t.dtype == torch.float16 and t.tolist() == [0, 1, 2, 3, 4]
    dev.to_device(np.ones(3, np.int8))
    assert ft.log[-1] == ("to", "npu:2", None)


@pytest.mark.parametrize("layout", ["reversed", "strided", "read_only", "reversed_one", "fortran"])
def test_any_host_layout_is_moved(layout):
    base = np.arange(24, dtype=np.float32)
    a = {"reversed": base[::-1], "strided": base[::3], "reversed_one": base[:1][::-1],
         "fortran": np.asfortranarray(base.reshape(4, 6)), "read_only": base.copy()}[layout]
    if layout == "read_only":
        a.flags.writeable = False
    dev = Device("npu:0", torch=FakeTorch())
    t = dev.to_device(a)
    assert np.array_equal(dev.to_host(t), a)


def test_results_are_read_only_after_the_device_synchronised():
    ft = FakeTorch()
    dev = Device("npu:1", torch=ft)
    t = dev.to_device(np.arange(4, dtype=np.int32))
    out = dev.to_host(t + 1)
    assert out.tolist() == [1, 2, 3, 4] and isinstance(out, np.ndarray)
    assert ft.log[-2:] == [("sync", "npu:1"), ("read",)] and dev.syncs == 1
    dev.to_host(t)
    assert dev.syncs == 2 and every_read_after_a_sync(ft.log)


def test_off_the_npu_nothing_waits():
    ft = FakeTorch()
    dev = Device("cpu", torch=ft)
    assert not dev.is_npu
    dev.to_host(dev.to_device(np.ones(3, np.float32)))
    assert ft.events("sync") == [] and dev.syncs == 0


# ----------------------------------------------------------------- constants


def test_constants_are_built_once_per_device_s_and_dtype():
    ft = FakeTorch()
    d0, d1 = Device("npu:0", torch=ft), Device("npu:1", torch=ft)
    u, lo = d0.constants(32, torch.float16)
    assert d0.constants(32, torch.float16)[0] is u  # cached
    assert ft.events("alloc") == [("alloc", "npu:0", torch.float16)]
    assert u.shape == (32, 32) and int(u.sum()) == 32 * 33 // 2 and int(lo.sum()) == 32 * 31 // 2
    assert torch.equal(u + lo, torch.ones(32, 32, dtype=torch.float16))
    assert d1.constants(32, torch.float16)[0] is not u  # another device: its own
    d0.constants(64, torch.float16)
    d0.constants(32, torch.int8)
    assert ft.events("alloc") == [("alloc", "npu:0", torch.float16), ("alloc", "npu:1", torch.float16),
                                  ("alloc", "npu:0", torch.float16), ("alloc", "npu:0", torch.int8)]
    d0.constants(64, torch.float16)
    assert len(ft.events("alloc")) == 4


# ----------------------------------------------------------------- which device


def test_npu_device_environment_variable_is_honoured(monkeypatch):
    ft = FakeTorch()
    monkeypatch.delenv("NPU_DEVICE", raising=False)
    assert str(Device(torch=ft)) == DEFAULT_DEVICE == "npu:0"
    monkeypatch.setenv("NPU_DEVICE", "npu:3")
    assert str(Device(torch=ft)) == "npu:3"
    assert str(Device("npu:1", torch=ft)) == "npu:1"  # an explicit device wins
    monkeypatch.setenv("NPU_DEVICE", "cpu")
    b = npu.TcuscanBackend(module=fake_tcuscan_ops(), s=32)
    assert b.device == torch.device("cpu") and b.dev.device == b.device


# ----------------------------------------------------------------- the backend on the fake NPU


def test_the_backend_runs_on_the_fake_npu_and_reads_only_after_synchronising():
    ft = FakeTorch()
    b = npu.TcuscanBackend(module=fake_tcuscan_ops(), device=Device("npu:0", torch=ft), s=32)
    cpu = CpuTcuscanBackend(s=32)
    rng = np.random.default_rng(0)
    x8 = rng.integers(-5, 5, 200).astype(np.int8)
    x16 = rng.standard_normal(200).astype(np.float16)
    flags = (rng.random(200) < 0.1).astype(np.uint8)
    for op, args, kw in [("scan", (x8,), {}), ("scan", (x16,), {"variant": "multi_cube"}),
                         ("segmented_sum", (x16, flags), {}), ("compress", (x16, flags), {})]:
        got, want = getattr(b, op)(*args, **kw), getattr(cpu, op)(*args, **kw)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert np.array_equal(g, w), op
    moves = ft.events("to")
    assert moves and all(dev == "npu:0" for _, dev, _ in moves)
    assert every_read_after_a_sync(ft.log)
    assert ft.events("alloc") == [("alloc", "npu:0", torch.float16)]  # multi_cube's U_s, L_s^- on the device
    assert b._constants(32, torch.float16) is b.dev.constants(32, torch.float16)
    assert "npu:0" in repr(b)


# ----------------------------------------------------------------- importing the kernels


def _fake_module(name, **attrs):
    mod = types.ModuleType(name)
    mod.__spec__ = importlib.machinery.ModuleSpec(name, None)
    mod.__dict__.update(attrs)
    return mod


def test_without_the_npu_stack_the_error_says_what_to_install():
    with pytest.raises(npu.NpuUnavailableError) as err:
        import_kernels()
    msg = str(err.value)
    assert "torch_npu" in msg and "tcuscan" in msg and "CANN" in msg and "pytorch-tcuscan" in msg
    assert "module=" in msg


def test_torch_npu_without_tcuscan_names_only_tcuscan(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", _fake_module("torch_npu"))
    with pytest.raises(npu.NpuUnavailableError) as err:
        import_kernels()
    msg = str(err.value)
    assert "tcuscan (build it from huawei-csl/pytorch-tcuscan)" in msg and "pip install torch-npu" not in msg


def test_a_torch_npu_that_does_not_load_is_reported(monkeypatch):
    monkeypatch.setattr(npu, "missing", lambda: [])
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # importing it raises
    with pytest.raises(npu.NpuUnavailableError, match="torch_npu is installed but does not import"):
        import_kernels()


@pytest.mark.parametrize("layout", ["make_build", "wheel"])
def test_the_kernels_import_after_torch_npu(monkeypatch, layout):
    imported = []
    ops = _fake_module("tcuscan_ops", **fake_tcuscan_ops().__dict__)
    monkeypatch.setitem(sys.modules, "torch_npu", _fake_module("torch_npu"))
    if layout == "make_build":  # tcuscan_ops.*.so on the path
        monkeypatch.setitem(sys.modules, "tcuscan_ops", ops)
    else:  # pip install: the tcuscan package with its tcuscan_ops extension
        monkeypatch.setitem(sys.modules, "tcuscan_ops", None)
        monkeypatch.setitem(sys.modules, "tcuscan", _fake_module("tcuscan", tcuscan_ops=ops))
        monkeypatch.setitem(sys.modules, "tcuscan.tcuscan_ops", ops)
    real_import = importlib.import_module
    monkeypatch.setattr(importlib, "import_module", lambda name, *a: imported.append(name) or real_import(name, *a))
    assert import_kernels() is ops
    assert imported[0] == "torch_npu"
    monkeypatch.setenv("NPU_DEVICE", "cpu")  # the first run's path: module=None, the device from the environment
    b = npu.TcuscanBackend(s=32)
    assert b.module is ops and b.device == torch.device("cpu")
    assert b.scan(np.ones(40, np.int8)).tolist() == list(range(1, 41))


def test_a_tcuscan_whose_kernels_do_not_import_is_reported(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_npu", _fake_module("torch_npu"))
    monkeypatch.setitem(sys.modules, "tcuscan_ops", None)
    monkeypatch.setitem(sys.modules, "tcuscan", _fake_module("tcuscan"))
    with pytest.raises(npu.NpuUnavailableError, match="its kernels do not import"):
        import_kernels()
