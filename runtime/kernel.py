"""The runtime's front: a loaded module with its bindings (the seeds' dgmm_* calls as methods)."""

from __future__ import annotations

import dataclasses
from typing import Any, NoReturn

import numpy as np

from kernelgen.module import Module, read
from runtime.backends import Backend, Job, make_backend
from runtime.devarray import ALSO, DeviceArray, device_view, storage_order
from sim.errors import WorkbenchError
from sim.launch import Arg, numpy_dtype
from sim.layouts import parse_layout

# tensors stored packed along K: the declared dtype -> the bound array's dtype (sim.launch's name) and the
# values per element of it; an s4 tensor is bound as bytes of two s4, the lower nibble first (PTX packing)
PACKED = {"s4": ("s4x2", 2)}


def storage_dtype(declared: str) -> str:
    return PACKED[declared][0] if declared in PACKED else declared


class RuntimeFailure(WorkbenchError):
    """A call the module cannot honour; its message is also ``Kernel.last_error``."""


def load(path: str, device: str = "sim:npu7nm", timed: bool = False) -> Kernel:
    """Open a module for ``device`` ("sim:HW" runs the simulator, functional unless ``timed``; "cuda" runs
    on GPU 0 through pycuda). A wrong ABI or a module built for other hardware is a RuntimeFailure."""
    try:
        module = read(path)
        return Kernel(module, make_backend(module, device, timed))
    except WorkbenchError as e:
        raise RuntimeFailure(e.message, e.file or path) from None


def to_storage(arr: np.ndarray, layout: str) -> np.ndarray:
    """A logical matrix as the kernel's flat buffer: row -> C order, col -> column-major, blocked-PxQ and
    striped-N as sim/layouts.py stores them (padding zero)."""
    if layout not in ("row", "col") and arr.ndim == 2:
        return parse_layout(layout).scatter(arr)
    return np.ravel(arr, order="F" if layout == "col" else "C").copy()


def storage_view(arr: np.ndarray, layout: str) -> np.ndarray:
    """The kernel's buffer as a view whose C-order elements are the storage (no copy for row and col: arr or
    arr.T); for a backend that copies it at submit (into its page-locked buffer, transposing on the way)."""
    if layout == "col" and arr.ndim == 2:
        return arr.T
    if layout in ("row", "col"):
        return arr
    return to_storage(arr, layout)


def from_storage(flat: np.ndarray, shape: tuple[int, ...], layout: str) -> np.ndarray:
    if layout not in ("row", "col") and len(shape) == 2:
        return parse_layout(layout).gather(flat, shape[0], shape[1])
    return flat.reshape(shape[::-1]).T if layout == "col" else flat.reshape(shape)


def _packing(t: dict[str, Any]) -> str:
    if t["dtype"] not in PACKED:
        return ""
    return f", {PACKED[t['dtype']][1]} values per element along K, the lower nibble first"


class Kernel:
    def __init__(self, module: Module, backend: Backend):
        self.module = module
        self.backend = backend
        self.tensors: dict[str, dict[str, Any]] = {t["name"]: t for t in module.manifest["tensors"]}
        self.scalars: dict[str, float] = dict(module.manifest["scalars"])
        self.bound: dict[str, np.ndarray | DeviceArray] = {}
        self.last_error: str | None = None
        self.last_variant: int | None = None
        self.last_cycles: int | None = None
        self._job: Job | None = None
        self._version = 0  # bumped by every bind and set_scalar: a prepared launch older than it is stale
        self._prepared: tuple[int, int, list[Arg], dict[int, DeviceArray], tuple[int, int, int]] | None = None
        self._buffers = 0

    def _fail(self, msg: str) -> NoReturn:
        self.last_error = f"{self.module.path}: {msg}"
        raise RuntimeFailure(msg, self.module.path)

    def bind_input(self, name: str, array: Any) -> None:
        """A numpy array (copied to the device at each launch) or a device array (__cuda_array_interface__:
        torch CUDA tensors, cupy, numba, pycuda GPUArray; the kernel reads it in place)."""
        self._bind(name, array, "input")

    def bind_output(self, name: str, array: Any) -> None:
        """A writeable numpy array (filled by sync()) or a device array (the kernel writes it in place)."""
        self._bind(name, array, "output")

    def set_scalar(self, name: str, value: float) -> None:
        if name not in self.scalars:
            self._fail(f"no scalar {name!r}; the module's scalars are {', '.join(self.scalars)}")
        self.scalars[name] = float(value)
        self._version += 1

    def _bind(self, name: str, array: Any, io: str) -> None:
        t = self.tensors.get(name)
        if t is None:
            self._fail(f"no tensor {name!r}; the module declares {', '.join(self.tensors)}")
        if t["io"] != io:
            self._fail(f"{name} is an {t['io']}: bind it with bind_{t['io']}({name!r}, array)")
        try:
            dev = device_view(array)
        except ValueError as e:
            self._fail(f"{name}: {e}")
        self._version += 1
        if dev is not None:
            self.bound[name] = self._device_binding(name, t, dev, io)
            return
        want = numpy_dtype(storage_dtype(t["dtype"]))
        if not isinstance(array, np.ndarray):
            self._fail(f"{name}: a {type(array).__module__}.{type(array).__name__} is neither a numpy array nor a "
                       f"device array (__cuda_array_interface__); bind np.asarray(x) or a CUDA tensor")
        if array.dtype != want:
            self._fail(f"{name}: dtype {array.dtype}, the module declares {t['dtype']} ({want}{_packing(t)}); "
                       f"convert it, e.g. x.astype(np.{want})")
        if array.ndim != len(t["shape"]):
            self._fail(f"{name}: {array.ndim}-d array, expected {len(t['shape'])}-d ({' x '.join(t['shape'])})")
        if io == "output" and not array.flags.writeable:
            self._fail(f"{name}: the output array is read-only; bind a writeable array")
        self.bound[name] = array

    def _device_binding(self, name: str, t: dict[str, Any], dev: DeviceArray, io: str) -> DeviceArray:
        """Checks of a device array against the declared tensor (dtype, rank, dense storage in the
        tensor's layout, writeable output) and the backend (the simulator runs on host arrays)."""
        if not getattr(self.backend, "device_arrays", False):
            self._fail(f"{name}: a device array, but {self.backend.device} runs on host memory: bind a numpy "
                       f"array (x.cpu().numpy() for a torch tensor) or load the module with device='cuda'")
        want = numpy_dtype(storage_dtype(t["dtype"]))
        if dev.dtype != want and dev.dtype.str not in ALSO.get(t["dtype"], ()):
            raw = " (torch's bf16)" if dev.dtype.str == "|V2" else ""
            self._fail(f"{name}: device array of dtype {dev.dtype} ({dev.dtype.str}{raw}), the module declares "
                       f"{t['dtype']} ({want}, {want.str}{_packing(t)}); convert it on the device first")
        if dev.ndim != len(t["shape"]):
            self._fail(f"{name}: {dev.ndim}-d device array, expected {len(t['shape'])}-d "
                       f"({' x '.join(t['shape'])})")
        order = storage_order(t["layout"])
        if order is None:
            self._fail(f"{name}: layout {t['layout']} is scattered on the host; bind a numpy array for it")
        if not dev.dense_in(order):
            fix = "x.contiguous()" if order == "C" else "x.t().contiguous().t() (column-major)"
            self._fail(f"{name}: device array strides {dev.strides} (bytes) are not dense {t['layout']}-major "
                       f"storage of {dev.shape}; bind {fix}")
        if io == "output" and dev.readonly:
            self._fail(f"{name}: the output device array is read-only; bind a writeable one")
        return dev

    def dims(self) -> dict[str, int]:
        """M, N, K from the bound tensors' shapes (each name must agree everywhere it appears)."""
        seen: dict[str, tuple[int, str]] = {}
        for name, arr in self.bound.items():
            per = PACKED.get(self.tensors[name]["dtype"], ("", 1))[1]
            for d, n in zip(self.tensors[name]["shape"], arr.shape):
                n = n * per if d == "K" else n  # a packed tensor's K extent counts elements, not bytes
                if d in seen and seen[d][0] != n:
                    self._fail(f"{name} gives {d}={n} but {seen[d][1]} gives {d}={seen[d][0]}; fix the shapes")
                seen.setdefault(d, (int(n), name))
        return {d: v for d, (v, _) in seen.items()}

    def _check_extents(self, dims: dict[str, int]) -> None:
        """M, N, K must be extents the module was built for (its kernels may assume their alignment)."""
        for d, n in dims.items():
            ext = self.module.manifest["spec"][d]
            lo, hi, mult = (ext, ext, 1) if isinstance(ext, int) else (*ext["range"], ext["multiple_of"])
            if not lo <= n <= hi or n % mult:
                want = f"{d}={lo}" if lo == hi else f"{d} in [{lo}, {hi}]" + (f", a multiple of {mult}"
                                                                                  if mult > 1 else "")
                self._fail(f"{d}={n} but the module was built for {want}; rebuild it with that range")

    def variant_for(self, k: int) -> int:
        try:
            return self.module.dispatch(k)
        except WorkbenchError as e:
            self._fail(e.message)

    def launch(self) -> None:
        """Start the GEMM on the bound tensors and return at once; ``sync()`` waits for it."""
        if self._job is not None:
            self._fail("a launch is still in flight; call sync() before the next launch")
        prepared = self._prepared if self._prepared and self._prepared[0] == self._version else self._prepare()
        _, v, args, device, grid = prepared
        if len(device) < self._buffers:  # host inputs: copied now (the caller may have changed them)
            args = self._with_host_copies(args, device)
        try:
            self._job = self.backend.submit(v, args, grid, device)
        except WorkbenchError as e:
            self._fail(e.message)
        self.last_variant = v
        self.last_error = None

    def _prepare(self) -> tuple[int, int, list[Arg], dict[int, DeviceArray], tuple[int, int, int]]:
        """What a launch of the current bindings needs: the variant for K and its arguments (host input
        buffers without their data, filled per launch by _with_host_copies). Kept until the next bind or
        set_scalar, so repeated launches of the same bindings skip the checks and the dispatch."""
        for name, t in self.tensors.items():
            if name not in self.bound:
                self._fail(f"missing binding: {name} ({t['io']} {t['dtype']} {' x '.join(t['shape'])}); "
                           f"bind it with bind_{t['io']}({name!r}, array)")
        dims = self.dims()
        self._check_extents(dims)
        v = self.variant_for(dims["K"])
        var = self.module.variants[v]
        args: list[Arg] = []
        device: dict[int, DeviceArray] = {}
        for p in var["params"]:
            role = p["role"]
            if p["kind"] == "buffer":
                bound = self.bound[role]
                if isinstance(bound, DeviceArray):  # read / written in place: no host copy
                    device[len(args)] = bound
                # an output host array's storage is made once: the kernel only writes it (sync() copies out)
                out = None if isinstance(bound, DeviceArray) or self.tensors[role]["io"] == "input" \
                    else to_storage(bound, self.tensors[role]["layout"])
                args.append(Arg("buffer", storage_dtype(p["dtype"]), array=out, name=p["name"], role=role,
                                init="device" if isinstance(bound, DeviceArray) else "file"))
            else:
                value = dims[role] if role in dims else self.scalars[role]
                args.append(Arg("scalar", p["dtype"], value=value, name=p["name"], role=role))
        bm, bn = var["tile"]
        grid = (-(-dims["N"] // bn), -(-dims["M"] // bm), 1)
        self._buffers = sum(1 for p in var["params"] if p["kind"] == "buffer")
        self._prepared = (self._version, v, args, device, grid)
        return self._prepared

    def _with_host_copies(self, args: list[Arg], device: dict[int, DeviceArray]) -> list[Arg]:
        out = list(args)
        for i, a in enumerate(args):
            if a.kind == "buffer" and i not in device and self.tensors[a.role]["io"] == "input":
                host = self.bound[a.role]
                assert isinstance(host, np.ndarray)  # not in `device`
                layout = self.tensors[a.role]["layout"]
                # a backend that copies inputs before submit returns takes a view (one copy, into its
                # page-locked buffer); the simulator reads them later on its thread: a copy of their values now
                array = storage_view(host, layout) if self.backend.copies_at_submit else to_storage(host, layout)
                out[i] = dataclasses.replace(a, array=array)
        return out

    def sync(self) -> None:
        """Wait for the launch in flight (if any) and write its outputs into the bound output arrays."""
        job, self._job = self._job, None
        if job is None:
            return
        try:
            outputs, cycles = self.backend.wait(job)
        except WorkbenchError as e:
            self._fail(e.message)
        self.last_cycles = cycles
        for i, a in enumerate(job.args):
            if a.role in self.tensors and self.tensors[a.role]["io"] == "output" and i in outputs:
                dst = self.bound[a.role]
                assert isinstance(dst, np.ndarray)  # a device output is written in place (not in outputs)
                dst[...] = from_storage(outputs[i], dst.shape, self.tensors[a.role]["layout"])

    wait = sync
