"""PTX types as numpy dtypes (from the one table, sim.ptx.types), bit-exact conversions between
register storage and instruction types."""

from __future__ import annotations

import numpy as np

from sim.ptx.types import TYPES, is_float, is_packed, is_signed

# the types the functional model computes on (sim.ptx.types: np is None for the others)
NP: dict[str, np.dtype] = {name: t.np for name, t in TYPES.items() if t.np is not None}
UINT: dict[int, np.dtype] = {
    1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)
}
SINT: dict[int, np.dtype] = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32), 8: np.dtype(np.int64)}
__all__ = ["NP", "UINT", "SINT", "is_float", "is_packed", "is_signed"]


def storage(regtype: str) -> np.dtype:
    """numpy dtype a register of a declared PTX type is stored in (16-bit floats as bits)."""
    if regtype in ("f16", "bf16"):
        return np.dtype(np.uint16)
    return NP[regtype]


def bits_to(arr: np.ndarray, t: str) -> np.ndarray:
    """Reinterpret stored register bits as type t (truncating or zero/sign extending on size mismatch)."""
    want = NP[t]
    have = arr.dtype
    if have == want:
        return arr
    if have == np.bool_ or want == np.bool_:
        return arr.astype(want)
    if have.itemsize == want.itemsize:
        return arr.view(want)
    u = arr.view(UINT[have.itemsize])
    if have.itemsize > want.itemsize:
        return u.astype(UINT[want.itemsize]).view(want)
    if is_signed(t):
        return arr.view(SINT[have.itemsize]).astype(SINT[want.itemsize]).view(want)
    return u.astype(UINT[want.itemsize]).view(want)


def to_storage(val: np.ndarray, t: str, store: np.dtype) -> np.ndarray:
    """Convert a value of instruction type t to register storage bits (extending by t's signedness)."""
    if val.dtype == store:
        return val
    if store == np.bool_:
        return val.astype(np.bool_)
    if val.dtype == np.bool_:
        return val.astype(store)
    vs = val.dtype.itemsize
    if vs == store.itemsize:
        return val.view(store)
    if vs > store.itemsize:
        return val.view(UINT[vs]).astype(UINT[store.itemsize]).view(store)
    if is_signed(t):
        return val.view(SINT[vs]).astype(SINT[store.itemsize]).view(store)
    return val.view(UINT[vs]).astype(UINT[store.itemsize]).view(store)


# -- bf16 ---------------------------------------------------------------------------------------
def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """f32 -> bf16 bits with round-to-nearest-even (rn) or toward zero (rz); NaN stays NaN."""
    x = np.asarray(x, dtype=np.float32)
    u = x.view(np.uint32)
    if mode == "rz":
        out = (u >> np.uint32(16)).astype(np.uint16)
    else:
        lsb = (u >> np.uint32(16)) & np.uint32(1)
        out = ((u + np.uint32(0x7FFF) + lsb) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out = np.where(nan, ((u >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16), out)
    return out


def f64_to_bf16(x: np.ndarray) -> np.ndarray:
    """f64 -> bf16 bits rounded once to nearest even: to f32 by round-to-odd (24 bits hold the 8 of
    bf16 plus two, so the second rounding cannot double-round), then to bf16."""
    x = np.asarray(x, np.float64)
    r = x.astype(np.float32)
    r = np.where(np.abs(r.astype(np.float64)) > np.abs(x), np.nextafter(r, np.float32(0)), r)
    u = r.view(np.uint32) | (r.astype(np.float64) != x).astype(np.uint32)
    u = np.where(np.isfinite(x), u, x.astype(np.float32).view(np.uint32))
    return f32_to_bf16(u.view(np.float32))


# -- exact fused multiply-add --------------------------------------------------------------------
def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b+c rounded once to f32. The f64 product is exact; the f64 sum can only mislead the final
    rounding when it lands exactly on an f32 midpoint (low 29 mantissa bits 0x10000000), so only
    then TwoSum recovers the sum's error and breaks the tie toward the exact value."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c64 = np.asarray(c, np.float64)
    s = p + c64
    if not ((s.view(np.uint64) & np.uint64(0x1FFFFFFF)) == np.uint64(0x10000000)).any():
        return s.astype(np.float32)
    bb = s - p
    e = (p - (s - bb)) + (c64 - bb)
    nz = e != 0
    if np.any(nz):
        s = np.where(nz & np.isfinite(s), np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b+c for f64 with error-free transforms (Dekker product + TwoSum); correctly rounded
    except for rare double-rounding cases of the final addition."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    p = a * b
    split = 134217729.0  # 2**27 + 1
    ta = split * a
    ah = ta - (ta - a)
    al = a - ah
    tb = split * b
    bh = tb - (tb - b)
    bl = b - bh
    ep = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bb = s - p
    e = (p - (s - bb)) + (c - bb)
    out = s + (e + ep)
    return np.where(np.isfinite(p), out, p + c)


def _fp8_table(exp_bits: int, man_bits: int, ieee_special: bool) -> np.ndarray:
    """float64 value of each of the 256 patterns of a sign/exp_bits/man_bits 8-bit float.
    e5m2 (ieee_special) has IEEE infinities and NaNs at the top exponent; e4m3 (the OCP 'FN'
    variant PTX uses) has no infinity and one NaN mantissa (all ones) at the top exponent."""
    bias = (1 << (exp_bits - 1)) - 1
    top = (1 << exp_bits) - 1
    out = np.empty(256, dtype=np.float64)
    for b in range(256):
        s = -1.0 if b >> 7 else 1.0
        e = (b >> man_bits) & top
        m = b & ((1 << man_bits) - 1)
        if e == 0:
            v = m / (1 << man_bits) * 2.0 ** (1 - bias)
        elif ieee_special and e == top:
            v = np.inf if m == 0 else np.nan
        elif not ieee_special and e == top and m == (1 << man_bits) - 1:
            v = np.nan
        else:
            v = (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
        out[b] = s * v
    return out


FP8_VALUES = {"e4m3": _fp8_table(4, 3, False), "e5m2": _fp8_table(5, 2, True)}
