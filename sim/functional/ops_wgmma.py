"""Hopper warpgroup MMA: wgmma.mma_async with shared-memory matrix descriptors, wgmma.fence,
commit_group and wait_group.

A warpgroup is four consecutive warps of a CTA (warp index / 4). The 64-row accumulator is split by
rows: warp q of the group (warp index % 4) holds rows 16q..16q+15, and when A comes from registers
it holds those rows of A too. So each warp computes its own 16 x N slice from its rows of A and
all of B, and no warp needs another's registers: the collective instruction runs warp by warp.

The simulator completes a wgmma when the warp executes it (functionally); commit_group and
wait_group only order (their timing is in sim/timing). Layouts come from CUTLASS
cute/atom/mma_traits_sm90_gmma.hpp (make_gmma_desc's canonical K-major and MN-major layouts,
the CLayout/ALayout register fragments) and cute/arch/mma_sm90_desc.hpp (the descriptor bits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.errors import ExecutionError
from sim.functional.fragments import a_fragment, accumulator_map, to_s32, to_values
from sim.functional.operands import DecodeCtx, Reader
from sim.ptx.ir import Instruction, Operand
from sim.ptx.types import type_mods

if TYPE_CHECKING:
    from sim.functional.warp import Warp

    Exec = Callable[[Warp, np.ndarray, bool], int | None]

# descriptor bits 62-63 (GmmaDescriptor layout_type_) -> (Swizzle<B,4,3> bits B, rows of 16 bytes
# one swizzle atom row spans: the W of CUTLASS's canonical layouts)
SWIZZLE = {0: (0, 1), 1: (3, 8), 2: (2, 4), 3: (1, 2)}
_BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
_K = {2: 16, 4: 8, 1: 32}  # element bytes -> K of one wgmma (always 32 bytes of K)
_N_FLOAT = tuple(range(8, 257, 8))
_N_INT = (8, 16, 24) + tuple(range(32, 257, 16))


@dataclass(frozen=True)
class Desc:
    """A shared-memory matrix descriptor (64 bits): byte start address, leading and stride byte
    offsets, base offset (bits 49-51) and swizzle mode (bits 62-63)."""

    start: int
    lbo: int
    sbo: int
    base: int
    layout: int

    @staticmethod
    def decode(d: int) -> Desc:
        return Desc((d & 0x3FFF) << 4, ((d >> 16) & 0x3FFF) << 4, ((d >> 32) & 0x3FFF) << 4, (d >> 49) & 7,
                    (d >> 62) & 3)

    def encode(self) -> int:
        return ((self.start >> 4) | (self.lbo >> 4) << 16 | (self.sbo >> 4) << 32 | self.base << 49
                | self.layout << 62)


def swizzle(addr: np.ndarray, bits: int) -> np.ndarray:
    """CuTe Swizzle<bits,4,3> on byte addresses: address bits 7.. (the 128-byte row) XOR into bits
    4.. (the 16-byte chunk); bits 3 = 128B, 2 = 64B, 1 = 32B, 0 = none."""
    if not bits:
        return addr
    mask = ((1 << bits) - 1) << 7
    return addr ^ ((addr & mask) >> 3)


def tile_addresses(d: Desc, rows: np.ndarray, kdim: int, es: int, mn_major: bool) -> np.ndarray:
    """Byte addresses (len(rows), kdim) of the elements (row, k) of an operand tile; row is the M
    (A) or N (B) index. K-major (the default): core matrices of 8 rows x 16 bytes; MN-major
    (imm-trans 1, 16-bit types): 8 k-rows of 16 bytes of consecutive M/N elements. CUTLASS
    make_gmma_desc, in bytes (T = 16 / es elements, W = 16-byte chunks per swizzle row):
      K-major  none:    ((8,m),(T,2)):((16, SBO),(es, LBO))       swizzled: ((8,m),(T,2)):((16W, SBO),(es, 16))
      MN-major none:    ((T,m),(8,k)):((es, SBO),(16, LBO))       swizzled: ((T,W,m),(8,k)):((es,16,LBO),(16W,SBO))"""
    bits, w = SWIZZLE[d.layout]
    t = 16 // es
    i = rows.astype(np.int64)[:, None]
    j = np.arange(kdim, dtype=np.int64)[None, :]
    if not mn_major:
        r, mi, e, kj = i % 8, i // 8, j % t, j // t
        if d.layout == 0:
            off = r * 16 + mi * d.sbo + e * es + kj * d.lbo
        else:
            off = r * 16 * w + mi * d.sbo + e * es + kj * 16
    else:
        e, r, kj = i % t, j % 8, j // 8
        if d.layout == 0:
            off = e * es + (i // t) * d.sbo + r * 16 + kj * d.lbo
        else:
            off = e * es + ((i // t) % w) * 16 + (i // (t * w)) * d.lbo + r * 16 * w + kj * d.sbo
    return swizzle(d.start + off, bits)


def _read_tile(w: Warp, ins: Instruction, d: Desc, rows: np.ndarray, kdim: int, es: int,
               mn_major: bool) -> np.ndarray:
    """The raw bits (len(rows), kdim) of a descriptor-addressed tile in the CTA's shared memory."""
    if d.base:
        raise ExecutionError(f"wgmma descriptor base offset {d.base} is not modelled (only 0, the "
                             f"canonical layouts' value) in '{ins.text}'", w.L.file, ins.line)
    addr = tile_addresses(d, rows, kdim, es, mn_major)
    sh = w.cta.shared
    if int(addr.max()) + es > sh.size:
        raise ExecutionError(f"wgmma descriptor reads shared memory at {int(addr.max()):#x}, beyond the "
                             f"CTA's {sh.size} bytes, in '{ins.text}'", w.L.file, ins.line)
    raw = sh.data[addr[..., None] + np.arange(es)]
    return np.ascontiguousarray(raw).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[es])[..., 0]


def _imm_of(op: Operand, ins: Instruction, cx: DecodeCtx, allowed: tuple[int, ...], what: str) -> int:
    if op.kind != "imm" or int(op.value) not in allowed:
        raise cx.err(ins, f"wgmma {what} must be an immediate {' or '.join(map(str, allowed))}")
    return int(op.value)


def _check_types(ins: Instruction, cx: DecodeCtx) -> tuple[str, str, str, int, int]:
    """(dtype, atype, btype, N, K) of a supported wgmma.mma_async, else a PtxError naming the line."""
    shape = next((m for m in ins.mods if m.startswith("m64n") and "k" in m), "")
    ts = type_mods(ins.mods)
    if not shape or len(ts) != 3:
        raise cx.err(ins, "wgmma.mma_async needs a .m64nNkK shape and .dtype.atype.btype")
    dt, at, bt = ts
    n, k = (int(x) for x in shape[4:].split("k"))
    float8 = ("e4m3", "e5m2")
    ok = ((k == 16 and at == bt and (at == "f16" and dt in ("f16", "f32") or at == "bf16" and dt == "f32"))
          or (k == 8 and at == bt == "tf32" and dt == "f32")
          or (k == 32 and at in float8 and bt in float8 and dt in ("f16", "f32"))
          or (k == 32 and at in ("s8", "u8") and bt in ("s8", "u8") and dt == "s32"))
    if not ok:
        raise cx.err(ins, f"wgmma .{shape}.{dt}.{at}.{bt} is not a PTX wgmma form (k16 f16/bf16, k8 tf32, "
                          "k32 e4m3/e5m2 or s8/u8)")
    if n not in (_N_INT if dt == "s32" else _N_FLOAT):
        raise cx.err(ins, f"wgmma N={n} is not allowed for .{at} (PTX ISA: multiples of 8 up to 256; "
                          "for s8/u8 8, 16, 24 and multiples of 16 from 32)")
    return dt, at, bt, n, k


def b_wgmma(ins: Instruction, cx: DecodeCtx) -> Exec:
    mods = ins.mods
    if "fence" in mods or "commit_group" in mods:
        return lambda w, m, full: None
    if "wait_group" in mods:
        if len(ins.operands) != 1:
            raise cx.err(ins, "wgmma.wait_group takes one immediate count N")
        _imm_of(ins.operands[0], ins, cx, tuple(range(8)), "wait_group count")
        return lambda w, m, full: None
    if "mma_async" not in mods:
        raise cx.err(ins, f"'{ins.full}' is not supported (wgmma.mma_async, fence, commit_group, wait_group)")
    if "sp" in mods:
        raise cx.err(ins, "sparse wgmma (.sp) is not supported")
    return _build_mma(ins, cx)


def _build_mma(ins: Instruction, cx: DecodeCtx) -> Exec:
    dt, at, bt, n, k = _check_types(ins, cx)
    ops = ins.operands
    es = _BYTES[at]
    a_regs = ops[1].kind == "vec"
    half = es == 2
    want = 4 if dt == "s32" else (6 if not half else (7 if a_regs else 8))
    if len(ops) != want:
        raise cx.err(ins, f"wgmma .{dt}.{at}.{bt} with A from {'registers' if a_regs else 'a descriptor'} "
                          f"takes {want} operands, found {len(ops)}")
    nacc = n // 4 if dt == "f16" else n // 2
    if ops[0].kind != "vec" or len(ops[0].items) != nacc:
        raise cx.err(ins, f"wgmma m64n{n} .{dt} needs {{...}} of {nacc} accumulator registers")
    sa = _imm_of(ops[4], ins, cx, (1, -1), "imm-scale-a") if dt != "s32" else 1
    sb = _imm_of(ops[5], ins, cx, (1, -1), "imm-scale-b") if dt != "s32" else 1
    ta = _imm_of(ops[6], ins, cx, (0, 1), "imm-trans-a") if half and not a_regs else 0
    tb = _imm_of(ops[-1], ins, cx, (0, 1), "imm-trans-b") if half else 0
    sd = ops[3]
    if sd.kind == "imm":
        const = bool(sd.value)
        rsd: Reader = lambda w: const  # noqa: E731
    else:
        rsd = cx.rd(sd, "pred", ins)
    acc_t = {"f32": "f32", "f16": "b32", "s32": "s32"}[dt]
    racc = [cx.rd(x, acc_t, ins) for x in ops[0].items]
    wacc = [cx.wr(x, acc_t, ins) for x in ops[0].items]
    if a_regs:
        if len(ops[1].items) != 4:
            raise cx.err(ins, "wgmma A from registers takes {...} of 4 registers")
        ra = [cx.rd(x, "b32", ins) for x in ops[1].items]
        fa = _a_from_registers(ra, at, es, k)
    else:
        fa = _a_from_descriptor(cx.rd(ops[1], "b64", ins), ins, at, es, k, bool(ta))
    rb = cx.rd(ops[2], "b64", ins)
    nrows = np.arange(n)
    sat = "satfinite" in ins.mods

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        if not full:
            raise ExecutionError(f"wgmma needs all 32 lanes of each warp active (.sync.aligned) in '{ins.text}'",
                                 w.L.file, ins.line)
        q = w.wid % 4
        if (w.wid // 4 + 1) * 128 > w.cta.nthreads:
            raise ExecutionError(f"wgmma needs a whole warpgroup (128 threads from thread {w.wid // 4 * 128}); "
                                 f"the block has {w.cta.nthreads} in '{ins.text}'", w.L.file, ins.line)
        A = fa(w, q) * sa
        bdesc = Desc.decode(int(np.asarray(rb(w)).flat[0]))
        B = to_values(_read_tile(w, ins, bdesc, nrows, k, es, bool(tb)), bt) * sb
        D = A @ B.T
        if np.asarray(rsd(w)).flat[0]:
            D = D + _gather_acc(racc, w, dt, n)
        _scatter_acc(wacc, w, D, dt, m, full, sat)
    return run


def _a_from_descriptor(rd: Reader, ins: Instruction, at: str, es: int, k: int, trans: bool,
                       ) -> Callable[[Any, int], np.ndarray]:
    def read(w: Any, q: int) -> np.ndarray:
        d = Desc.decode(int(np.asarray(rd(w)).flat[0]))
        return to_values(_read_tile(w, ins, d, np.arange(16 * q, 16 * q + 16), k, es, trans), at)
    return read


def _a_from_registers(ra: list[Reader], at: str, es: int, k: int) -> Callable[[Any, int], np.ndarray]:
    per = 4 // es  # elements per 32-bit register

    def read(w: Any, q: int) -> np.ndarray:
        bits = np.zeros((16, k), dtype=np.uint32)
        for r, rd in enumerate(ra):
            v = np.broadcast_to(np.asarray(rd(w)), (32,)).astype(np.uint32)
            for x in range(per):
                row, col = a_fragment(per, r, x)
                bits[row, col] = (v >> np.uint32(8 * es * x)) & np.uint32((1 << (8 * es)) - 1)
        return to_values(bits, at)
    return read


def _gather_acc(racc: list[Reader], w: Any, dt: str, n: int) -> np.ndarray:
    C = np.zeros((16, n))
    for i, rd in enumerate(racc):
        v = np.broadcast_to(np.asarray(rd(w)), (32,))
        if dt == "f16":
            u = v.astype(np.uint32)
            for x in range(2):
                row, col = accumulator_map(2 * i + x)
                C[row, col] = ((u >> np.uint32(16 * x)) & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
        else:
            row, col = accumulator_map(i)
            C[row, col] = v
    return C


def _scatter_acc(wacc: list[Any], w: Any, D: np.ndarray, dt: str, m: np.ndarray, full: bool, sat: bool) -> None:
    for i, wr in enumerate(wacc):
        if dt == "f16":
            lo_r, lo_c = accumulator_map(2 * i)
            hi_r, hi_c = accumulator_map(2 * i + 1)
            lo = D[lo_r, lo_c].astype(np.float16).view(np.uint16).astype(np.uint32)
            hi = D[hi_r, hi_c].astype(np.float16).view(np.uint16).astype(np.uint32)
            wr(w, lo | (hi << np.uint32(16)), m, full)
        else:
            row, col = accumulator_map(i)
            v = D[row, col]
            wr(w, v.astype(np.float32) if dt == "f32" else to_s32(v, sat), m, full)


SEMANTICS_WGMMA = {"wgmma": b_wgmma}
