"""Device arrays the runtime binds without a host copy: anything exposing ``__cuda_array_interface__``
(torch CUDA tensors, cupy, numba, pycuda GPUArray). A bare pycuda DeviceAllocation has no shape or dtype,
so it is refused with the one-line fix (wrap it in a GPUArray).

``device_view(obj)`` returns a ``DeviceArray`` (pointer, shape, byte strides, dtype, the stream its producer
named, and the object itself, kept alive while bound), or None for an object that is not a device array.
A problem with an object that *is* one (a masked numba array, a bf16 torch tensor, a DeviceAllocation) is a
``ValueError`` whose message the runtime prints as its one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# typestrs accepted for a declared dtype besides numpy_dtype's own: bf16 travels as 16-bit bit patterns
# (numpy has no bf16): torch's int16 view of a bf16 tensor, or a bf16 tensor itself, which torch describes
# as "|V2" (two raw bytes; seen on the H200 machine, 2026-12-01)
ALSO = {"bf16": ("<i2", "|V2")}


@dataclass(frozen=True)
class DeviceArray:
    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes per step of each dimension (C order when the producer gave none)
    dtype: np.dtype
    readonly: bool
    stream: int | None  # the producer's stream (CUDA array interface v3), None or 1/2 for the default ones
    owner: Any

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def dense_in(self, order: str) -> bool:
        """Elements laid out without gaps in C ("C") or Fortran ("F") order (size-1 dimensions' strides
        do not matter, as numpy's flags treat them)."""
        dims = list(zip(self.shape, self.strides))
        if order == "F":
            dims.reverse()
        step = self.dtype.itemsize
        for n, s in reversed(dims):
            if n != 1 and s != step:
                return False
            step *= n
        return True


def c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    out, step = [], itemsize
    for n in reversed(shape):
        out.append(step)
        step *= n
    return tuple(reversed(out))


def device_view(obj: Any) -> DeviceArray | None:
    """The device array behind ``obj``, or None when it is not one (numpy arrays, host tensors)."""
    if isinstance(obj, np.ndarray):
        return None
    kind = type(obj).__module__.split(".")[0] + "." + type(obj).__name__
    if kind == "pycuda.DeviceAllocation" or type(obj).__name__ == "DeviceAllocation":
        raise ValueError("a pycuda DeviceAllocation has no shape or dtype: wrap it, "
                         "pycuda.gpuarray.GPUArray(shape, dtype, gpudata=allocation)")
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        return None  # torch CPU tensors raise AttributeError too: a host object, not a device array
    except Exception as e:  # noqa: BLE001 - producers raise their own (torch: TypeError for bf16)
        hint = " (a bf16 torch tensor: bind t.view(torch.int16), its bits)" if "bfloat16" in str(e) else ""
        raise ValueError(f"its __cuda_array_interface__ failed: {str(e).splitlines()[0]}{hint}") from None
    if cai.get("mask") is not None:
        raise ValueError("a masked device array: bind one without a mask")
    shape = tuple(int(n) for n in cai["shape"])
    dtype = np.dtype(cai["typestr"])
    strides = cai.get("strides")
    ptr, readonly = cai["data"]
    return DeviceArray(int(ptr or 0), shape,
                       tuple(int(s) for s in strides) if strides else c_strides(shape, dtype.itemsize),
                       dtype, bool(readonly), cai.get("stream"), obj)


def storage_order(layout: str) -> str | None:
    """The dense order a device array of a logical matrix must have for ``layout``: "C" (row), "F" (col);
    None for the blocked and striped layouts, which the runtime scatters on the host."""
    return {"row": "C", "col": "F"}.get(layout)
