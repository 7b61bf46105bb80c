"""runtime.cuda's bookkeeping without a GPU: a stand-in for pycuda.driver whose device memory is host
memory and whose kernel multiplies what its pointers point at. It checks what the backend copies and
passes: host arrays go through page-locked buffers and device copies, device arrays (the CUDA array
interface) are passed by pointer with no copy either way, and a producer's foreign stream is waited for."""

from __future__ import annotations

import ctypes
import json
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

from runtime import load

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_runtime import SPEC, FakeDevice  # noqa: E402


def _view(ptr: int, dtype: np.dtype, count: int) -> np.ndarray:
    buf = (ctypes.c_byte * (count * np.dtype(dtype).itemsize)).from_address(ptr)
    return np.frombuffer(buf, dtype=dtype)


class FakeDriver(types.ModuleType):
    """pycuda.driver as runtime/cuda.py uses it; device memory is host memory (pointers stay real)."""

    def __init__(self):
        super().__init__("pycuda.driver")
        self.log: list[tuple] = []
        self.function_attribute = types.SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES=1)
        drv = self

        class Ctx:
            def push(self):
                pass

            def pop(self):
                pass

        class Device:
            def __init__(self, i):
                pass

            def compute_capability(self):
                return (9, 0)

            def name(self):
                return "fake H200"

            def retain_primary_context(self):
                return Ctx()

        class Stream:
            handle = 0x5150

            def synchronize(self):
                drv.log.append(("sync",))

        class Alloc:
            def __init__(self, n):
                self.buf = np.zeros(n, np.uint8)

            def __int__(self):
                return self.buf.ctypes.data

        class Function:
            def prepare(self, types_):
                self.types = types_

            def set_attribute(self, *a):
                pass

            def prepared_async_call(self, grid, block, stream, *args, shared_size=0):
                # the module's parameters: A, B, D pointers, then M, N, K, alpha (tests/test_runtime.py SPEC)
                pa, pb, pd, m, n, k, alpha = (int(x) if i < 6 else float(x) for i, x in enumerate(args))
                a = _view(pa, np.float16, m * k).reshape(m, k).astype(np.float64)
                b = _view(pb, np.float16, n * k).reshape(n, k).astype(np.float64)  # B col-major
                _view(pd, np.float32, m * n)[:] = (alpha * a @ b.T).astype(np.float32).ravel()
                drv.log.append(("launch", pa, pb, pd))

        self.Device, self.Stream, self.Alloc = Device, Stream, Alloc
        self.module_from_buffer = lambda data: types.SimpleNamespace(get_function=lambda name: Function())

    def init(self):
        pass

    def mem_alloc(self, n):
        return self.Alloc(n)

    def pagelocked_empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def memcpy_htod_async(self, mem, host, stream):
        mem.buf[:host.nbytes] = host.view(np.uint8).ravel()
        self.log.append(("htod", int(mem)))

    def memcpy_dtoh_async(self, host, mem, stream):
        host.view(np.uint8).ravel()[:] = mem.buf[:host.nbytes]
        self.log.append(("dtoh", int(mem)))


@pytest.fixture
def cuda_ko(ko_npu, tmp_path, monkeypatch):
    """The npu7nm module with an arch written into its manifest (the backend only checks the arch), and
    the stand-in driver in place of pycuda."""
    path = tmp_path / "arch.ko"
    with zipfile.ZipFile(ko_npu) as src, zipfile.ZipFile(path, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name == "module.json":
                man = json.loads(data)
                man["hw"]["arch"] = "sm_90a"
                data = json.dumps(man).encode()
            dst.writestr(name, data)
    drv = FakeDriver()
    monkeypatch.setitem(sys.modules, "pycuda", types.ModuleType("pycuda"))
    monkeypatch.setitem(sys.modules, "pycuda.driver", drv)
    monkeypatch.setattr("atexit.register", lambda fn: None)
    return path, drv


@pytest.fixture(scope="module")
def ko_npu(tmp_path_factory) -> Path:
    from kernelgen.krange import partition
    from kernelgen.module import build
    from kernelgen.spec import parse_spec
    from sim.hw import load_hw

    hw = load_hw("npu7nm")
    spec = parse_spec({**SPEC, "K": 64, "tiling": SPEC["tiling"] + ["TILE_K in [16, 16]"]}, "kr.yaml")
    path = tmp_path_factory.mktemp("ko") / "fixed.ko"
    path.write_bytes(build(partition(spec, hw), hw, Path(hw.path).read_text(), cubin=False))
    return path


def _operands(rng):
    a = rng.standard_normal((16, 64)).astype(np.float16)
    bt = rng.standard_normal((16, 64)).astype(np.float16)  # B (64 x 16) col-major = B^T row-major
    return a, bt, a.astype(np.float64) @ bt.astype(np.float64).T


def test_device_arrays_are_neither_copied_in_nor_out(cuda_ko):
    path, drv = cuda_ko
    kern = load(str(path), device="cuda")
    a, bt, ref = _operands(np.random.default_rng(0))
    da, db, dd = FakeDevice(a), FakeDevice(bt.T), FakeDevice(np.zeros((16, 16), np.float32))
    kern.bind_input("A", da)
    kern.bind_input("B", db)
    kern.bind_output("D", dd)
    kern.launch()
    kern.sync()
    assert drv.log == [("launch", a.ctypes.data, bt.ctypes.data, dd.arr.ctypes.data), ("sync",)]
    assert np.allclose(dd.arr, ref, rtol=1e-5, atol=1e-4)


def test_host_arrays_still_go_through_page_locked_copies(cuda_ko):
    path, drv = cuda_ko
    kern = load(str(path), device="cuda")
    a, bt, ref = _operands(np.random.default_rng(1))
    d = np.zeros((16, 16), np.float32)
    kern.bind_input("A", a)
    kern.bind_input("B", FakeDevice(bt.T))  # mixed: B in place, A and D copied
    kern.bind_output("D", d)
    kern.launch()
    kern.sync()
    kinds = [e[0] for e in drv.log]
    assert kinds == ["htod", "launch", "dtoh", "sync"]  # A up, D down (an output is not copied up)
    assert drv.log[1][2] == bt.ctypes.data
    assert np.allclose(d, ref, rtol=1e-5, atol=1e-4)
    b = np.ascontiguousarray(bt.T)  # B as a row-major K x N host array: laid out column-major into the buffer
    kern.bind_input("B", b)
    b_saved = b.copy()
    kern.launch()
    b[...] = 0  # the backend has its copy: changing B after launch() does not reach the kernel
    kern.sync()
    assert np.allclose(d, ref, rtol=1e-5, atol=1e-4) and (b_saved != 0).any()


def test_a_producer_stream_is_waited_for(cuda_ko, monkeypatch):
    path, drv = cuda_ko
    kern = load(str(path), device="cuda")
    calls = []

    class FakeLib:
        def __getattr__(self, name):
            return lambda *a: calls.append((name, *(getattr(x, "value", x) for x in a[1:2]))) or 0

    monkeypatch.setattr(ctypes, "CDLL", lambda name: FakeLib())
    a, bt, _ = _operands(np.random.default_rng(2))
    kern.bind_input("A", FakeDevice(a, stream=0xBEEF))
    kern.bind_input("B", FakeDevice(bt.T, stream=1))  # the legacy default stream: ordered already
    kern.bind_output("D", FakeDevice(np.zeros((16, 16), np.float32), stream=0xBEEF))
    kern.launch()
    kern.sync()
    names = [c[0] for c in calls]
    assert names == ["cuEventCreate", "cuEventRecord", "cuStreamWaitEvent", "cuEventDestroy_v2"]  # once
    assert calls[1][1] == 0xBEEF
