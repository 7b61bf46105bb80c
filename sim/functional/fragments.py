"""What mma.sync and wgmma share: element bits -> values, and where a lane's fragment registers
hold the elements of A, B and the accumulator (PTX ISA 9.7.14.5 "Matrix fragments for mma.m16n8k*",
the same placement CUTLASS's SM80 and SM90 MMA traits give)."""

from __future__ import annotations

import numpy as np

from sim.functional.types import FP8_VALUES, bf16_to_f32

LANES = np.arange(32)
_G = LANES // 4
_T = LANES % 4

# bits of one element of each A/B type mma.sync and wgmma read
ELEMENT_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "e4m3": 8, "e5m2": 8, "s8": 8, "u8": 8, "s4": 4, "u4": 4}
INTEGER = ("s8", "u8", "s4", "u4")


def to_values(bits: np.ndarray, t: str) -> np.ndarray:
    """Raw element bits -> float64 (int64 for the integer types); tf32 ignores the low 13 mantissa bits."""
    if t == "f16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    if t == "bf16":
        return bf16_to_f32(bits.astype(np.uint16)).astype(np.float64)
    if t == "tf32":
        return (bits.astype(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if t in FP8_VALUES:
        return FP8_VALUES[t][bits.astype(np.uint8)]
    if t == "s8":
        return bits.astype(np.uint8).view(np.int8).astype(np.int64)
    if t == "s4":
        v = bits.astype(np.int64) & 0xF
        return v - ((v & 0x8) << 1)
    return bits.astype(np.int64)


def unpack(v: np.ndarray, ebits: int) -> list[np.ndarray]:
    """The 32 // ebits elements of each lane's 32-bit register, element 0 in the lowest bits."""
    u = np.asarray(v)
    u = u.astype(np.uint32) if u.shape == (32,) else np.broadcast_to(u, (32,)).astype(np.uint32)
    mask = np.uint32((1 << ebits) - 1) if ebits < 32 else np.uint32(0xFFFFFFFF)
    return [(u >> np.uint32(ebits * x)) & mask for x in range(32 // ebits)]


def accumulator_map(i: int) -> tuple[np.ndarray, np.ndarray]:
    """(row within 16, column) of accumulator value i of each lane: c0,c1 at (g, 2t..2t+1), c2,c3 at
    (g+8, ...), then the same for each further 8 columns (CUTLASS CLayout_64xN over a warp's 16 rows)."""
    return _G + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * _T + (i & 1)


def a_fragment(per: int, r: int, x: int) -> tuple[np.ndarray, np.ndarray]:
    """(row within 16, k) of element x of A register r when a 32-bit register holds ``per`` elements:
    registers alternate rows g / g+8, and each pair covers the next 4 * per columns of K."""
    return _G + 8 * (r & 1), 4 * per * (r >> 1) + per * _T + x


def b_fragment(per: int, r: int, x: int) -> tuple[np.ndarray, np.ndarray]:
    """(k, column) of element x of B register r (B is K x 8, "col": each lane holds column g)."""
    return 4 * per * r + per * _T + x, _G


def to_s32(v: np.ndarray, sat: bool) -> np.ndarray:
    """An integer MMA result as s32: .satfinite clamps to the int32 range; otherwise the sum wraps modulo 2^32."""
    x = v.astype(np.int64)
    if sat:
        return np.clip(x, -(2**31), 2**31 - 1).astype(np.int32)
    return (x & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
