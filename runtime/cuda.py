"""The runtime on GPU 0 through pycuda: the module's cubin (or its PTX, JIT-compiled) per variant, one
stream, page-locked host buffers; submit copies in, launches and copies out asynchronously, wait
synchronises the stream. Device and page-locked buffers come from pools (runtime.pool): allocated on the
first launch of a size, reused by later launches once the earlier launch has been waited for. Needs the
optional [gpu] extra (pycuda).

A bound device array (runtime.devarray: torch, cupy, numba, pycuda GPUArray) is passed by its pointer: no
copy in, no copy out, the kernel reads and writes it in place. The stream is a blocking one (pycuda's
default flags), so it runs after work queued before on the legacy default stream (torch's default) and
such work queued after waits for it; a producer that names another stream (CUDA array interface v3
``stream``) gets an event on that stream which this stream waits for before the kernel."""

from __future__ import annotations

import atexit
import ctypes
import re
from typing import Any

import numpy as np

from kernelgen.module import Module
from runtime.backends import Job
from runtime.devarray import DeviceArray
from runtime.pool import Pool
from sim.errors import ExecutionError, UsageError
from sim.launch import Arg

SCALARS = {"u32": np.uint32, "s32": np.int32, "u64": np.uint64, "f32": np.float32, "f64": np.float64}
SHARED_OPT_IN = 48 * 1024  # dynamic shared memory above this needs the function attribute


def arch_capability(arch: str) -> tuple[int, int]:
    """sm_90a -> (9, 0)."""
    m = re.fullmatch(r"sm_(\d+)(\d)[af]?", arch)
    if not m:
        raise ValueError(arch)
    return int(m.group(1)), int(m.group(2))


LEGACY_STREAM = 1  # CU_STREAM_LEGACY as the CUDA array interface names it
EVENT_DISABLE_TIMING = 2  # CU_EVENT_DISABLE_TIMING


class CudaBackend:
    device = "cuda"
    device_arrays = True
    copies_at_submit = True  # submit copies every host input into its page-locked buffer

    def __init__(self, module: Module):
        built = module.manifest["hw"]
        if not built.get("arch"):
            raise UsageError(f"module built for {built['name']!r}, which names no GPU arch: load it with "
                             f"device='sim:{built['name']}'", module.path)
        try:
            import pycuda.driver as cuda
        except ImportError as e:
            raise UsageError(f"device='cuda' needs pycuda ({e}): pip install -e '.[gpu]'", module.path) from None
        cuda.init()
        dev = cuda.Device(0)
        found = dev.compute_capability()
        want = arch_capability(built["arch"])
        if tuple(found) != want:
            raise UsageError(f"module built for {built['arch']} ({built['name']}), found {dev.name()} "
                             f"(sm_{found[0]}{found[1]}): rebuild with --hardware for this GPU", module.path)
        self.cuda = cuda
        self.module = module
        self.ctx = dev.retain_primary_context()
        self.ctx.push()
        # pycuda aborts the process when a pushed context is still on the stack at exit; atexit runs
        # last-registered first, so several loaded modules pop in the order they pushed in reverse
        atexit.register(self.ctx.pop)
        self.stream = cuda.Stream()
        self.functions: dict[int, Any] = {}
        self.device_pool = Pool(lambda nbytes: cuda.mem_alloc(nbytes))
        self.host_pool = Pool(lambda key: cuda.pagelocked_empty(key[0], key[1]))

    def function(self, v: int) -> Any:
        if v not in self.functions:
            var = self.module.variants[v]
            data = (self.module.members[var["cubin"]] if var.get("cubin")
                    else self.module.members[var["ptx"]] + b"\0")
            func = self.cuda.module_from_buffer(data).get_function(var["kernel"])
            dyn = int(var["dynamic_shared"])
            if dyn > SHARED_OPT_IN:
                func.set_attribute(self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn)
            func.prepare(["P" if p["kind"] == "buffer" else SCALARS[p["dtype"]] for p in var["params"]])
            self.functions[v] = (func, dyn, tuple(var["block"]))
        return self.functions[v]

    def after_producer(self, stream: int) -> None:
        """Make this stream wait for the work queued so far on a producer's stream (a raw CUstream handle;
        pycuda wraps none, so the driver is called directly)."""
        lib = ctypes.CDLL("libcuda.so.1")
        ev = ctypes.c_void_p()

        def check(rc: int, fn: str) -> None:
            if rc != 0:
                raise ExecutionError(f"{fn} for the producer's stream {stream:#x} failed (CUresult {rc})")

        check(lib.cuEventCreate(ctypes.byref(ev), EVENT_DISABLE_TIMING), "cuEventCreate")
        check(lib.cuEventRecord(ev, ctypes.c_void_p(stream)), "cuEventRecord")
        check(lib.cuStreamWaitEvent(ctypes.c_void_p(self.stream.handle), ev, 0), "cuStreamWaitEvent")
        check(lib.cuEventDestroy_v2(ev), "cuEventDestroy")

    def submit(self, variant: int, args: list[Arg], grid: tuple[int, int, int],
               bound: dict[int, DeviceArray]) -> Job:
        cuda, s = self.cuda, self.stream
        func, dyn, block = self.function(variant)
        pinned: dict[int, np.ndarray] = {}
        device: dict[int, Any] = {}
        call: list[Any] = []
        waited: set[int] = set()
        for i, a in enumerate(args):
            if i in bound:
                d = bound[i]
                if d.stream is not None and d.stream != LEGACY_STREAM and d.stream not in waited:
                    self.after_producer(d.stream)
                    waited.add(d.stream)
                call.append(d.ptr)
            elif a.kind == "buffer":
                assert a.array is not None
                host = self.host_pool.take((a.array.shape, a.array.dtype.str))
                mem = self.device_pool.take(max(1, host.nbytes))
                if a.role != "D":  # the output is only written: nothing to copy up
                    host[...] = a.array
                    cuda.memcpy_htod_async(mem, host, s)
                pinned[i] = host
                device[i] = mem
                call.append(int(mem))
            else:
                scalar: Any = SCALARS[a.dtype]
                call.append(scalar(a.value))
        try:
            func.prepared_async_call(grid, block, s, *call, shared_size=dyn)
        except Exception as e:  # noqa: BLE001 - pycuda raises its own Error subclasses
            raise ExecutionError(f"launch failed: {e}") from None
        for i, a in enumerate(args):
            if a.role == "D" and i in pinned:
                cuda.memcpy_dtoh_async(pinned[i], device[i], s)
        return Job(variant, args, (pinned, device, bound))  # bound: kept alive until waited for

    def wait(self, job: Job) -> tuple[dict[int, np.ndarray], int | None]:
        try:
            self.stream.synchronize()
        except Exception as e:  # noqa: BLE001
            raise ExecutionError(f"kernel failed on the GPU: {e}") from None
        pinned, device, _ = job.handle
        outputs = {i: np.array(h) for i, h in pinned.items() if job.args[i].role == "D"}
        for host in pinned.values():
            self.host_pool.give((host.shape, host.dtype.str), host)
        for i, mem in device.items():
            self.device_pool.give(max(1, pinned[i].nbytes), mem)
        return outputs, None
