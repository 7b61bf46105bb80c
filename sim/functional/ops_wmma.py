"""Warp-level ``wmma.load`` / ``wmma.store`` / ``wmma.mma`` (PTX ISA "Warp-level Matrix Multiply-
Accumulate Instructions"): shapes m16n16k16, m32n8k16, m8n32k16 (f16, bf16, s8, u8) and m16n16k8 (tf32).

The ISA leaves the fragment layout unspecified: a program may only move a fragment with wmma.load,
wmma.store and wmma.mma, or apply the same operation to every element. So any layout that the three
agree on gives every legal program its result; this one is: slot ``s`` of lane ``l`` holds element
``(l * slots + s) mod (rows * cols)`` of the operand in row-major order (A is M x K, B is K x N, C and D
are M x N), slots packed into 32-bit registers lower bits first. f16/bf16 A and B fragments have 8
registers (16 slots) in every shape, as the ISA writes them, so a 256-element operand is held twice.
The memory layout (``.row``/``.col``) and the stride (elements; default the leading dimension) only
decide where each element is read or written."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from sim.functional.fragments import ELEMENT_BITS, to_s32, to_values
from sim.functional.operands import DecodeCtx
from sim.ptx.ir import Instruction
from sim.ptx.types import type_mods

if TYPE_CHECKING:
    from sim.functional.warp import Warp

    Exec = Callable[[Warp, np.ndarray, bool], int | None]

SHAPES = {"m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16), "m8n32k16": (8, 32, 16), "m16n16k8": (16, 16, 8)}
_LANES = np.arange(32)
_BITS = {**ELEMENT_BITS, "f32": 32, "s32": 32}
_STORE_DT: dict[int, np.dtype] = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32)}


def _shape(ins: Instruction, cx: DecodeCtx) -> tuple[int, int, int]:
    name = next((x for x in ins.mods if x in SHAPES), None)
    if name is None:
        raise cx.err(ins, f"wmma needs a shape ({', '.join(SHAPES)})")
    return SHAPES[name]


def _dims(which: str, M: int, N: int, K: int) -> tuple[int, int]:
    return {"a": (M, K), "b": (K, N), "c": (M, N), "d": (M, N)}[which]


def _slots(which: str, t: str, rows: int, cols: int) -> int:
    if which in ("a", "b") and t in ("f16", "bf16"):
        return 16  # 8 .f16x2 / .b32 registers whatever the shape
    return max(1, rows * cols // 32)


def _places(slots: int, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of slot s of lane l, shape (slots, 32)."""
    flat = (_LANES[None, :] * slots + np.arange(slots)[:, None]) % (rows * cols)
    return flat // cols, flat % cols


def _operand(ins: Instruction, cx: DecodeCtx) -> tuple[str, str]:
    """(which, type): which of a/b/c/d a load or store moves, and its element type."""
    which = next((x for x in ins.mods if x in ("a", "b", "c", "d")), None)
    ts = type_mods(ins.mods)
    if which is None or len(ts) != 1:
        raise cx.err(ins, "wmma.load.{a,b,c} / wmma.store.d need the operand letter and one type")
    if ts[0] not in _BITS:
        raise cx.err(ins, f"wmma element type .{ts[0]} is not supported (f16, bf16, tf32, s8, u8, f32, s32)")
    return which, ts[0]


def _layout(ins: Instruction, cx: DecodeCtx) -> str:
    lay = [x for x in ins.mods if x in ("row", "col")]
    if len(lay) != 1:
        raise cx.err(ins, "wmma.load / wmma.store take one layout, .row or .col")
    return lay[0]


def _space(ins: Instruction) -> str:
    return next((x for x in ins.mods if x in ("global", "shared")), "shared" if "shared::cta" in ins.mods
                else "generic")


def _element_offsets(ins: Instruction, cx: DecodeCtx, rows: int, cols: int, slots: int, regs_at: int):
    """Closure: the (slots, 32) element offsets of each slot (row or col layout, the stride operand or
    the leading dimension), and the (row, col) places."""
    r, c = _places(slots, rows, cols)
    lay = _layout(ins, cx)
    ops = ins.operands
    stride_op = ops[2] if len(ops) > 2 else None
    lead = cols if lay == "row" else rows
    rd_stride = cx.rd(stride_op, "u32", ins) if stride_op is not None else None
    major, minor = (r, c) if lay == "row" else (c, r)

    def offsets(w: Warp) -> np.ndarray:
        st = np.broadcast_to(np.asarray(rd_stride(w), dtype=np.int64), (32,)) if rd_stride else np.full(32, lead)
        return major * st[None, :] + minor
    return offsets, (r, c)


def _pack(vals: np.ndarray, bits: int) -> np.ndarray:
    """(slots, 32) element bits -> (registers, 32) uint32, lower bits first."""
    per = 32 // bits
    v = vals.astype(np.uint32).reshape(-1, per, 32)
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))[None, :, None]
    return np.bitwise_or.reduce(v << shifts, axis=1)


def _unpack(regs: np.ndarray, bits: int) -> np.ndarray:
    per = 32 // bits
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(bits))[None, :, None]
    mask = np.uint32((1 << bits) - 1) if bits < 32 else np.uint32(0xFFFFFFFF)
    return ((regs[:, None, :] >> shifts) & mask).reshape(-1, 32)


def b_wmma(ins: Instruction, cx: DecodeCtx) -> Exec:
    if "load" in ins.mods:
        return _load(ins, cx)
    if "store" in ins.mods:
        return _store(ins, cx)
    if "mma" in ins.mods:
        return _mma(ins, cx)
    raise cx.err(ins, "wmma.load, wmma.store or wmma.mma")


def _moved(ins: Instruction, cx: DecodeCtx, regs_at: int) -> tuple:
    """What wmma.load (registers first) and wmma.store (address first) share: the fragment's register
    operand, address closure, element offsets, slots, bits, element size, storage dtype and space."""
    M, N, K = _shape(ins, cx)
    which, t = _operand(ins, cx)
    rows, cols = _dims(which, M, N, K)
    bits = _BITS[t]
    slots = _slots(which, t, rows, cols)
    regs = ins.operands[regs_at]
    if regs.kind != "vec" or len(regs.items) != slots * bits // 32:
        raise cx.err(ins, f"wmma.{'load' if regs_at == 0 else 'store'}.{which} .{t} moves "
                          f"{slots * bits // 32} registers")
    fa, _ = cx.addr(ins.operands[1 - regs_at], ins)
    offsets, _ = _element_offsets(ins, cx, rows, cols, slots, regs_at)
    return regs, fa, offsets, slots, bits, bits // 8, _STORE_DT[bits], _space(ins)


def _load(ins: Instruction, cx: DecodeCtx) -> Exec:
    dst, fa, offsets, slots, bits, esz, sdt, space = _moved(ins, cx, 0)
    wrs = [cx.wr(x, "b32", ins) for x in dst.items]

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        base = fa(w).astype(np.uint64)
        offs = offsets(w)
        vals = np.empty((slots, 32), dtype=np.uint32)
        seen = []
        for s in range(slots):
            addrs = base + (offs[s] * esz).astype(np.uint64)
            vals[s] = w.mem_load(space, addrs, m, sdt, 1, ins)[:, 0]
            seen.append(w.rec.addrs)
        _record(w, seen, esz)
        for wr, reg in zip(wrs, _pack(vals, bits)):
            wr(w, reg, m, full)
    return run


def _store(ins: Instruction, cx: DecodeCtx) -> Exec:
    src, fa, offsets, slots, bits, esz, sdt, space = _moved(ins, cx, 1)
    rds = [cx.rd(x, "b32", ins) for x in src.items]

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        regs = np.empty((len(rds), 32), dtype=np.uint32)
        for i, rd in enumerate(rds):
            regs[i] = rd(w)
        vals = _unpack(regs, bits)
        base = fa(w).astype(np.uint64)
        offs = offsets(w)
        seen = []
        for s in range(slots):
            addrs = base + (offs[s] * esz).astype(np.uint64)
            w.mem_store(space, addrs, m, vals[s].astype(sdt)[:, None], sdt, ins)
            seen.append(w.rec.addrs)
        _record(w, seen, esz)
    return run


def _record(w: Warp, seen: list, esz: int) -> None:
    """One memory record for the whole instruction: every element's address (the timing model's
    accesses), each esz bytes."""
    parts = [a for a in seen if a is not None]
    if parts:
        w.rec.addrs = np.concatenate(parts)
        w.rec.size = esz


def _mma_types(ins: Instruction, cx: DecodeCtx) -> tuple[str, str, str, str]:
    ts = type_mods(ins.mods)
    if len(ts) == 2:  # f16 family: .dtype.ctype
        return ts[0], "f16", "f16", ts[1]
    if len(ts) == 4:
        return ts[0], ts[1], ts[2], ts[3]
    raise cx.err(ins, "wmma.mma types: .dtype.ctype (f16) or .dtype.atype.btype.ctype")


def _mma(ins: Instruction, cx: DecodeCtx) -> Exec:
    M, N, K = _shape(ins, cx)
    dt, at, bt, ct = _mma_types(ins, cx)
    integer = at in ("s8", "u8")
    if at != bt and not integer or any(x not in _BITS for x in (dt, at, bt, ct)):
        raise cx.err(ins, f"wmma.mma .{dt}.{at}.{bt}.{ct} is not supported")
    ops = ins.operands
    if len(ops) != 4 or any(o.kind != "vec" for o in ops):
        raise cx.err(ins, "wmma.mma takes {D}, {A}, {B}, {C} register vectors")
    frags = []
    for o, which, t in zip(ops, "dabc", (dt, at, bt, ct)):
        rows, cols = _dims(which, M, N, K)
        slots = _slots(which, t, rows, cols)
        if len(o.items) != slots * _BITS[t] // 32:
            raise cx.err(ins, f"wmma.mma .{which} .{t} is {slots * _BITS[t] // 32} registers")
        frags.append((rows, cols, slots, _places(slots, rows, cols), _BITS[t], t))
    wd = [cx.wr(x, "b32", ins) for x in ops[0].items]
    reads = [[cx.rd(x, "b32", ins) for x in o.items] for o in ops[1:]]
    sat = "satfinite" in ins.mods
    vt = np.int64 if integer else np.float64

    def gather(rds: list, frag: tuple, w: Warp) -> np.ndarray:
        rows, cols, slots, (r, c), bits, t = frag
        regs = np.empty((len(rds), 32), dtype=np.uint32)
        for i, rd in enumerate(rds):
            regs[i] = rd(w)
        raw = _unpack(regs, bits)
        if t == "f32":
            v = raw.astype(np.uint32).view(np.float32).astype(np.float64)
        elif t == "s32":
            v = raw.astype(np.uint32).view(np.int32).astype(np.int64)
        else:
            v = to_values(raw.ravel(), t).reshape(raw.shape)
        out = np.zeros((rows, cols), dtype=vt)
        out[r.ravel(), c.ravel()] = v.ravel()  # duplicates hold equal values
        return out

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        A = gather(reads[0], frags[1], w)
        B = gather(reads[1], frags[2], w)
        C = gather(reads[2], frags[3], w)
        D = A @ B + C
        rows, cols, slots, (r, c), bits, t = frags[0]
        v = D[r, c]
        if integer:
            raw = to_s32(v, sat).view(np.uint32)
        elif t == "f16":
            raw = v.astype(np.float16).view(np.uint16).astype(np.uint32)
        else:
            raw = v.astype(np.float32).view(np.uint32)
        for wr, reg in zip(wd, _pack(raw, bits)):
            wr(w, reg, m, full)
    return run


SEMANTICS_WMMA = {"wmma": b_wmma}
