"""The runtime's front: a loaded module with its bindings (the seeds' dgmm_* calls as methods)."""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from kernelgen.module import Module, read
from runtime.backends import Backend, Job, make_backend
from sim.errors import WorkbenchError
from sim.launch import Arg, numpy_dtype
from sim.layouts import parse_layout


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


def from_storage(flat: np.ndarray, shape: tuple[int, ...], layout: str) -> np.ndarray:
    if layout not in ("row", "col") and len(shape) == 2:
        return parse_layout(layout).gather(flat, shape[0], shape[1])
    return flat.reshape(shape[::-1]).T if layout == "col" else flat.reshape(shape)


class Kernel:
    def __init__(self, module: Module, backend: Backend):
        self.module = module
        self.backend = backend
        self.tensors: dict[str, dict[str, Any]] = {t["name"]: t for t in module.manifest["tensors"]}
        self.scalars: dict[str, float] = dict(module.manifest["scalars"])
        self.bound: dict[str, np.ndarray] = {}
        self.last_error: str | None = None
        self.last_variant: int | None = None
        self.last_cycles: int | None = None
        self._job: Job | None = None

    def _fail(self, msg: str) -> NoReturn:
        self.last_error = f"{self.module.path}: {msg}"
        raise RuntimeFailure(msg, self.module.path)

    def bind_input(self, name: str, array: np.ndarray) -> None:
        self._bind(name, array, "input")

    def bind_output(self, name: str, array: np.ndarray) -> None:
        self._bind(name, array, "output")

    def set_scalar(self, name: str, value: float) -> None:
        if name not in self.scalars:
            self._fail(f"no scalar {name!r}; the module's scalars are {', '.join(self.scalars)}")
        self.scalars[name] = float(value)

    def _bind(self, name: str, array: np.ndarray, io: str) -> None:
        t = self.tensors.get(name)
        if t is None:
            self._fail(f"no tensor {name!r}; the module declares {', '.join(self.tensors)}")
        if t["io"] != io:
            self._fail(f"{name} is an {t['io']}: bind it with bind_{t['io']}({name!r}, array)")
        want = numpy_dtype(t["dtype"])
        if not isinstance(array, np.ndarray) or array.dtype != want:
            got = getattr(array, "dtype", type(array).__name__)
            self._fail(f"{name}: dtype {got}, the module declares {t['dtype']} ({want}); "
                       f"convert it, e.g. x.astype(np.{want})")
        if array.ndim != len(t["shape"]):
            self._fail(f"{name}: {array.ndim}-d array, expected {len(t['shape'])}-d ({' x '.join(t['shape'])})")
        if io == "output" and not array.flags.writeable:
            self._fail(f"{name}: the output array is read-only; bind a writeable array")
        self.bound[name] = array

    def dims(self) -> dict[str, int]:
        """M, N, K from the bound tensors' shapes (each name must agree everywhere it appears)."""
        seen: dict[str, tuple[int, str]] = {}
        for name, arr in self.bound.items():
            for d, n in zip(self.tensors[name]["shape"], arr.shape):
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
        for name, t in self.tensors.items():
            if name not in self.bound:
                self._fail(f"missing binding: {name} ({t['io']} {t['dtype']} {' x '.join(t['shape'])}); "
                           f"bind it with bind_{t['io']}({name!r}, array)")
        dims = self.dims()
        self._check_extents(dims)
        v = self.variant_for(dims["K"])
        var = self.module.variants[v]
        args = []
        for p in var["params"]:
            role = p["role"]
            if p["kind"] == "buffer":
                t = self.tensors[role]
                args.append(Arg("buffer", p["dtype"], array=to_storage(self.bound[role], t["layout"]),
                                name=p["name"], role=role, init="file"))
            else:
                value = dims[role] if role in dims else self.scalars[role]
                args.append(Arg("scalar", p["dtype"], value=value, name=p["name"], role=role))
        bm, bn = var["tile"]
        grid = (-(-dims["N"] // bn), -(-dims["M"] // bm), 1)
        try:
            self._job = self.backend.submit(v, args, grid)
        except WorkbenchError as e:
            self._fail(e.message)
        self.last_variant = v
        self.last_error = None

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
            if a.role in self.tensors and self.tensors[a.role]["io"] == "output":
                dst = self.bound[a.role]
                dst[...] = from_storage(outputs[i], dst.shape, self.tensors[a.role]["layout"])

    wait = sync
