"""The element operation of ``cp.reduce.async.bulk{.tensor}`` (PTX ISA, cp.reduce.async.bulk): the bytes a
bulk copy moves are combined with the destination's, element by element, as ``red`` would (add wraps for
integers and rounds once for floats, ``.add.noftz`` keeps f16/bf16 subnormals; min/max by the type's
order; inc/dec as atom's; and/or/xor on the bits). Each element is one atomic update; the order between
two reductions to the same element is the order the functional model issues them (exact for the integer
operations, where the order cannot show)."""

from __future__ import annotations

from typing import Any

import numpy as np

from sim.functional.types import bf16_to_f32, f64_to_bf16
from sim.ptx.types import TYPES

_UINT: dict[int, np.dtype] = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
                              8: np.dtype(np.uint64)}
_SINT: dict[int, np.dtype] = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}
_INT_OPS: dict[str, Any] = {
    "add": lambda o, b: o + b, "min": np.minimum, "max": np.maximum, "and": lambda o, b: o & b,
    "or": lambda o, b: o | b, "xor": lambda o, b: o ^ b,
    "inc": lambda o, b: np.where(o >= b, 0, o + 1).astype(o.dtype),
    "dec": lambda o, b: np.where((o == 0) | (o > b), b, o - 1).astype(o.dtype),
}
_FLOAT_OPS: dict[str, Any] = {"add": lambda o, b: o + b, "min": np.fmin, "max": np.fmax}


def reduce_bytes(red: str, t: str, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The bytes of ``old`` (the destination) combined with ``new`` (the source) as elements of PTX type
    ``t`` under operation ``red``; both uint8 arrays of the same length. ValueError for a pair the PTX
    ISA does not define."""
    info = TYPES[t]
    n = info.size
    if old.size % n:
        raise ValueError(f"{old.size} bytes are not whole .{t} elements")
    o = old.view(_UINT[n]).copy()
    b = new.view(_UINT[n])
    if t in ("f16", "bf16"):
        if red not in _FLOAT_OPS:
            raise ValueError(f".{red}.{t} is not a cp.reduce.async.bulk operation (add, min, max)")
        if t == "f16":
            of, bf = o.view(np.float16).astype(np.float64), b.view(np.float16).astype(np.float64)
            out = _FLOAT_OPS[red](of, bf).astype(np.float16).view(np.uint16)
        else:
            of, bf = bf16_to_f32(o).astype(np.float64), bf16_to_f32(b).astype(np.float64)
            out = f64_to_bf16(_FLOAT_OPS[red](of, bf))
        return np.ascontiguousarray(out).view(np.uint8)
    if t.startswith("f"):
        if red not in _FLOAT_OPS:
            raise ValueError(f".{red}.{t} is not a cp.reduce.async.bulk operation (add, min, max)")
        ft = np.dtype(np.float32 if n == 4 else np.float64)
        with np.errstate(all="ignore"):
            out = _FLOAT_OPS[red](o.view(ft), b.view(ft)).astype(ft)
        return np.ascontiguousarray(out).view(np.uint8)
    if red not in _INT_OPS:
        raise ValueError(f".{red}.{t} is not a cp.reduce.async.bulk operation")
    it = _SINT[n] if t.startswith("s") else _UINT[n]
    out = _INT_OPS[red](o.view(it), b.view(it)).astype(it)
    return np.ascontiguousarray(out).view(np.uint8)



__all__ = ["reduce_bytes"]
