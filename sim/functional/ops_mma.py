"""Warp-level mma.sync.aligned.m16n8kK.row.col: A (16 x K, row-major fragments) times B (K x 8,
column fragments) plus C, each lane holding its elements in 32-bit registers.

Forms (PTX ISA 9.7.14.5, "Matrix Fragments for mma.m16n8k*"; the A/B maps of
sim/functional/fragments.py): f16/bf16 -> f32 at k8/k16; tf32 -> f32 at k4/k8; s8/u8 -> s32 at
k16/k32 and s4/u4 -> s32 at k32/k64 (with or without .satfinite; without it the sum wraps modulo
2^32); e4m3/e5m2 -> f32 at k32 (sm_89 and later). Integer products are summed exactly in 64 bits,
float products in float64 and rounded to f32 once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from sim.functional.fragments import (
    ELEMENT_BITS,
    INTEGER,
    a_fragment,
    accumulator_map,
    b_fragment,
    to_s32,
    to_values,
)
from sim.functional.operands import DecodeCtx
from sim.ptx.ir import Instruction
from sim.ptx.types import type_mods

if TYPE_CHECKING:
    from sim.functional.warp import Warp

    Exec = Callable[[Warp, np.ndarray, bool], int | None]

_FLOAT8 = ("e4m3", "e5m2")
_INT8 = ("s8", "u8")
_INT4 = ("s4", "u4")


def _form(ins: Instruction, cx: DecodeCtx) -> tuple[str, str, str, int]:
    """(dtype, atype, btype, K) of a supported mma.sync, else a PtxError naming the line."""
    mods = ins.mods
    shape = next((x for x in mods if x.startswith("m16n8k")), "")
    ts = type_mods(mods)
    if not shape or "row" not in mods or "col" not in mods or len(ts) != 4:
        raise cx.err(ins, "only mma.sync.aligned.m16n8kK.row.col.dtype.atype.btype.ctype is supported")
    dt, at, bt, ct = ts
    k = int(shape[6:])
    per = 32 // ELEMENT_BITS.get(at, 32)
    ok = (ct == dt and k in (4 * per, 8 * per) and (
        (at == bt and at in ("f16", "bf16", "tf32") and dt == "f32")
        or (at in _INT8 and bt in _INT8 or at in _INT4 and bt in _INT4) and dt == "s32"
        or (at in _FLOAT8 and bt in _FLOAT8 and dt == "f32" and k == 32)))
    if not ok:
        raise cx.err(ins, f"mma .{shape}.{dt}.{at}.{bt}.{ct} is not supported (f32 from f16/bf16 k8/k16, tf32 "
                          "k4/k8, e4m3/e5m2 k32; s32 from s8/u8 k16/k32, s4/u4 k32/k64)")
    if "satfinite" in mods and dt != "s32":
        raise cx.err(ins, "mma .satfinite is modelled for the integer (s32) forms only")
    return dt, at, bt, k


def _places(maps: list[list[tuple[np.ndarray, np.ndarray]]]) -> tuple[np.ndarray, np.ndarray]:
    """The (row, column) index arrays of maps[register][element] over the 32 lanes, flattened in
    (register, element, lane) order."""
    rows = np.concatenate([np.broadcast_to(r, (32,)) for per_reg in maps for r, _ in per_reg])
    cols = np.concatenate([np.broadcast_to(c, (32,)) for per_reg in maps for _, c in per_reg])
    return rows.astype(np.intp), cols.astype(np.intp)


def b_mma(ins: Instruction, cx: DecodeCtx) -> Exec:
    dt, at, bt, k = _form(ins, cx)
    ebits = ELEMENT_BITS[at]
    per = 32 // ebits
    na, nb = k // (2 * per), k // (4 * per)
    d, a, b, c = ins.operands[:4]
    if any(o.kind != "vec" for o in (d, a, b, c)):
        raise cx.err(ins, "mma operands are {...} register vectors")
    ra = [cx.rd(x, "b32", ins) for x in a.items]
    rb = [cx.rd(x, "b32", ins) for x in b.items]
    rc = [cx.rd(x, dt, ins) for x in c.items]
    wd = [cx.wr(x, dt, ins) for x in d.items]
    if len(ra) != na or len(rb) != nb or len(rc) != 4 or len(wd) != 4:
        raise cx.err(ins, f"mma m16n8k{k} .{at} takes {{4 D}}, {{{na} A}}, {{{nb} B}}, {{4 C}} registers")
    integer = at in INTEGER
    vt = np.int64 if integer else np.float64
    sat = "satfinite" in ins.mods
    amap = [[a_fragment(per, r, x) for x in range(per)] for r in range(na)]
    bmap = [[b_fragment(per, r, x) for x in range(per)] for r in range(nb)]
    cmap = [accumulator_map(i) for i in range(4)]

    # every element of A, B and C at once: (register, element, lane) -> (row, column), one place each
    a_rows, a_cols = _places(amap)
    b_rows, b_cols = _places(bmap)
    c_rows, c_cols = _places([[p] for p in cmap])
    shifts = (np.arange(per, dtype=np.uint32) * np.uint32(ebits))[None, :, None]
    emask = np.uint32((1 << ebits) - 1) if ebits < 32 else np.uint32(0xFFFFFFFF)

    def elements(rds: list, w: Warp) -> np.ndarray:
        regs = np.empty((len(rds), 32), dtype=np.uint32)
        for i, rd in enumerate(rds):
            regs[i] = rd(w)  # a scalar (immediate) operand fills its row
        return ((regs[:, None, :] >> shifts) & emask).ravel()

    def warp_elements(rds: list, w: Warp, nw: int) -> np.ndarray:
        """elements() of each of the nw warps of a lock-step group: (warp, register, element, lane)."""
        regs = np.empty((len(rds), w.lanes[0]), dtype=np.uint32)
        for i, rd in enumerate(rds):
            regs[i] = rd(w)
        bits = (regs[:, None, :] >> shifts) & emask  # (register, element, warp x lane)
        return bits.reshape(len(rds), per, nw, 32).transpose(2, 0, 1, 3).reshape(nw, -1)

    def run_group(w: Warp, m: np.ndarray, full: bool, nw: int) -> None:
        """run() for each warp of a lock-step group: the same arrays, one product per warp."""
        A = np.zeros((nw, 16, k), dtype=vt)
        B = np.zeros((nw, k, 8), dtype=vt)
        C = np.zeros((nw, 16, 8), dtype=vt)
        A[:, a_rows, a_cols] = to_values(warp_elements(ra, w, nw), at)
        B[:, b_rows, b_cols] = to_values(warp_elements(rb, w, nw), bt)
        cv = np.empty((4, w.lanes[0]), dtype=vt)
        for i, rd in enumerate(rc):
            cv[i] = rd(w)
        C[:, c_rows, c_cols] = cv.reshape(4, nw, 32).transpose(1, 0, 2).reshape(nw, -1)
        D = np.empty((nw, 16, 8), dtype=vt)
        for i in range(nw):  # a 2-D product per warp, as run() computes it (the same summation order)
            D[i] = A[i] @ B[i] + C[i]
        for wr, (row, col) in zip(wd, cmap):
            v = D[:, row, col].ravel()
            wr(w, to_s32(v, sat) if integer else v.astype(np.float32), m, full)

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        if w.lanes[0] != 32:
            run_group(w, m, full, w.lanes[0] // 32)
            return
        A = np.zeros((16, k), dtype=vt)
        B = np.zeros((k, 8), dtype=vt)
        C = np.zeros((16, 8), dtype=vt)
        A[a_rows, a_cols] = to_values(elements(ra, w), at)
        B[b_rows, b_cols] = to_values(elements(rb, w), bt)
        cv = np.empty((4, 32), dtype=vt)
        for i, rd in enumerate(rc):
            cv[i] = rd(w)
        C[c_rows, c_cols] = cv.ravel()
        D = A @ B + C
        for wr, (row, col) in zip(wd, cmap):
            v = D[row, col]
            wr(w, to_s32(v, sat) if integer else v.astype(np.float32), m, full)
    return run


SEMANTICS_MMA = {"mma": b_mma}
