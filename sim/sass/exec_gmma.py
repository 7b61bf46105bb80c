"""Warpgroup MMA in SASS: HGMMA (f16 / bf16 / tf32), QGMMA (e4m3 / e5m2), IGMMA (s8 / u8), and the
WARPGROUP.ARRIVE / WARPGROUP.DEPBAR fences around them.

The forms ptxas (sm_90a) writes, seen in nvdisasm listings of tests/fixtures/async/wgmma_*.ptx,
tests/fixtures/triton/*matmul*.ptx and a probe of every PTX variant (docs/sass_timing.md):

    HGMMA.64x64x16.F32 R24, gdesc[UR16], R24 ;                   A and B from descriptors
    HGMMA.64x8x16.F32 R24, gdesc[UR4].negA.tnspA.tnspB, R24 ;   imm-scale-a -1, imm-trans-a/b 1
    HGMMA.64x8x16.F32.BF16 R24, R28, gdesc[UR8], R24 ;           A from registers R28..R31
    HGMMA.64x8x16.F32 R24, gdesc[UR4], RZ, !UPT ;                scale-d false: D = A B
    IGMMA.64x8x32.S8.U8 R32, gdesc[UR4], RZ, !UPT ;              s32 accumulators
    QGMMA.64x8x32.F16.E5M2.E4M3 R36, gdesc[UR4], R36, gsb0 ;     gsb0: closes a wgmma group

gdesc[URn] names four uniform registers: URn:URn+1 A's descriptor, URn+2:URn+3 B's (with A from
registers only B's is used, still at URn+2). The modifiers are the shape, the accumulator type and
the A / B types (F16 when absent for HGMMA). D and C are register blocks in PTX accumulator order
(PTX d_i = R(base + i)), so the fragment layouts are those of sim.functional.ops_wgmma, which this
module reuses: each warp computes its 16 x N slice of the warpgroup's 64 x N result when it executes
the instruction (rows 16 (warp % 4) ..), as PTX mode does. WARPGROUP.ARRIVE and WARPGROUP.DEPBAR
only order: their timing is in sim.sass.timing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from sim.functional.fragments import a_fragment, accumulator_map, to_s32, to_values
from sim.functional.ops_wgmma import _BYTES, _K, Desc, tile_addresses
from sim.sass.exec_operands import Ctx, reg_index
from sim.sass.exec_state import RZ, Warp
from sim.sass.listing import Operand

Exec = Callable[[Warp, np.ndarray], None]

_GDESC = re.compile(r"^gdesc\[(UR\d+)\]((?:\.\w+)*)$")
_SHAPE = re.compile(r"^64x(\d+)x(\d+)$")
_TYPES = {"F16": "f16", "BF16": "bf16", "TF32": "tf32", "E4M3": "e4m3", "E5M2": "e5m2", "S8": "s8", "U8": "u8"}
_DTYPES = {"F32": "f32", "F16": "f16", "S32": "s32"}


def gmma_group_end(ins_operands: tuple[Operand, ...]) -> bool:
    """True when a GMMA carries gsb0: it closes the warp's open wgmma group (wgmma.commit_group)."""
    return any(o.text == "gsb0" for o in ins_operands)


# opcode -> (accumulator type fixed by the opcode or None: the first type modifier, A/B types allowed)
_FAMILY: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "HGMMA": (None, ("f16", "bf16", "tf32")), "QGMMA": (None, ("e4m3", "e5m2")), "IGMMA": ("s32", ("s8", "u8")),
}


def _types(cx: Ctx) -> tuple[str, str, str, int, int]:
    """(dtype, atype, btype, N, K) from the modifiers; anything else is a one-line error."""
    ins = cx.ins
    fixed, allowed = _FAMILY[ins.opcode]
    mods = list(ins.modifiers)
    m = _SHAPE.match(mods[0]) if mods else None
    if m is None:
        raise cx.err(f"{ins.opcode} needs a 64xNxK shape modifier")
    n, k = int(m.group(1)), int(m.group(2))
    rest = mods[1:]
    if fixed is None:
        if not rest or rest[0] not in _DTYPES:
            raise cx.err(f"{ins.opcode} needs an accumulator type (.F32 or .F16) after the shape")
        dt = _DTYPES[rest.pop(0)]
    else:  # IGMMA.64xNx32.S8.U8: s32 accumulators, then the A and B types
        dt = fixed
    ab = [_TYPES.get(x) for x in rest]
    if None in ab or len(ab) > 2:
        raise cx.err(f"modifier .{rest[ab.index(None)] if None in ab else rest[2]} of {ins.opcode} is not modelled")
    at, bt = (ab[0], ab[-1]) if ab else ("f16", "f16")
    same = at == bt or allowed != ("f16", "bf16", "tf32")  # HGMMA: one input type; QGMMA/IGMMA may mix
    if at not in allowed or bt not in allowed or not same or k != _K[_BYTES[at]] or n % 8 or not 8 <= n <= 256:
        raise cx.err(f"{ins.opcode} .{'.'.join(mods)} is not a wgmma form this model knows")
    return dt, at, bt, n, k


def b_gmma(cx: Ctx) -> Exec:
    ins = cx.ins
    dt, at, bt, n, k = _types(cx)
    ops = list(ins.operands)
    if ops and ops[-1].text == "gsb0":
        ops.pop()
    scale_d: Callable[[Warp], Any] | None = None
    if ops and ops[-1].kind in ("pred", "upred"):
        scale_d = cx.pred(ops.pop())
    a_regs = len(ops) == 4
    if len(ops) != (4 if a_regs else 3) or ops[0].kind != "reg" or ops[-1].kind != "reg":
        raise cx.err(f"{ins.opcode} operands are not 'Rd, [Ra,] gdesc[URn], Rc|RZ[, pred][, gsb0]'")
    g = _GDESC.match(ops[-2].text)
    if g is None:
        raise cx.err(f"{ins.opcode} operand '{ops[-2].text}' is not a gdesc[URn] descriptor pair")
    flags = set(filter(None, g.group(2).split(".")))
    bad = flags - {"negA", "negB", "tnspA", "tnspB"}
    if bad:
        raise cx.err(f"descriptor suffix .{sorted(bad)[0]} of {ins.opcode} is not modelled")
    ur = reg_index(g.group(1))
    es = _BYTES[at]
    nacc = n // 4 if dt == "f16" else n // 2
    wacc = cx.wn(ops[0], nacc)
    zero_c = reg_index(ops[-1].regs[0]) == RZ
    racc = None if zero_c else cx.rn(ops[-1], nacc)
    ra = cx.rn(ops[1], 4) if a_regs else None
    sa = -1.0 if "negA" in flags else 1.0
    sb = -1.0 if "negB" in flags else 1.0
    ta, tb = "tnspA" in flags, "tnspB" in flags
    rows_b = np.arange(n)

    def desc(w: Warp, i: int) -> Desc:
        return Desc.decode(int(w.UR[i]) | int(w.UR[i + 1]) << 32)

    def tile(w: Warp, d: Desc, rows: np.ndarray, trans: bool) -> np.ndarray:
        if d.base:
            raise cx.err(f"descriptor base offset {d.base} is not modelled (only 0, the canonical layouts' value)")
        addr = tile_addresses(d, rows, k, es, trans)
        sh = w.cta.shared
        if int(addr.max()) + es > sh.size or int(addr.min()) < 0:
            raise cx.err(f"descriptor reads shared memory at {int(addr.max()):#x}, beyond the CTA's {sh.size} bytes")
        raw = np.ascontiguousarray(sh.data[addr[..., None] + np.arange(es)])
        return raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[es])[..., 0]

    def a_tile(w: Warp, q: int) -> np.ndarray:
        if ra is None:
            return to_values(tile(w, desc(w, ur), np.arange(16 * q, 16 * q + 16), ta), at)
        per = 4 // es
        bits = np.zeros((16, k), dtype=np.uint32)
        for r, rd in enumerate(ra):
            v = np.broadcast_to(np.asarray(rd(w)), (32,)).astype(np.uint32)
            for x in range(per):
                row, col = a_fragment(per, r, x)
                bits[row, col] = (v >> np.uint32(8 * es * x)) & np.uint32((1 << (8 * es)) - 1)
        return to_values(bits, at)

    def run(w: Warp, m: np.ndarray) -> None:
        if not m.all():
            raise cx.err("a warpgroup MMA needs all 32 lanes of each warp active")
        if (w.wid // 4 + 1) * 128 > w.cta.nthreads:
            raise cx.err(f"a warpgroup MMA needs a whole warpgroup; the block has {w.cta.nthreads} threads")
        q = w.wid % 4
        A = a_tile(w, q) * sa
        B = to_values(tile(w, desc(w, ur + 2), rows_b, tb), bt) * sb
        D = A @ B.T
        if racc is not None and (scale_d is None or bool(np.asarray(scale_d(w)).flat[0])):
            D = D + _gather(racc, w, dt, n)
        _scatter(wacc, w, D, dt, m)
    return run


def _gather(racc: list[Any], w: Warp, dt: str, n: int) -> np.ndarray:
    C = np.zeros((16, n))
    for i, rd in enumerate(racc):
        v = np.broadcast_to(np.asarray(rd(w)), (32,)).astype(np.uint32)
        if dt == "f16":
            for x in range(2):
                row, col = accumulator_map(2 * i + x)
                C[row, col] = ((v >> np.uint32(16 * x)) & np.uint32(0xFFFF)).astype(np.uint16).view(np.float16)
        else:
            row, col = accumulator_map(i)
            C[row, col] = v.view(np.float32) if dt == "f32" else v.view(np.int32)
    return C


def _scatter(wacc: list[Any], w: Warp, D: np.ndarray, dt: str, m: np.ndarray) -> None:
    for i, wr in enumerate(wacc):
        if dt == "f16":
            lo_r, lo_c = accumulator_map(2 * i)
            hi_r, hi_c = accumulator_map(2 * i + 1)
            lo = D[lo_r, lo_c].astype(np.float16).view(np.uint16).astype(np.uint32)
            hi = D[hi_r, hi_c].astype(np.float16).view(np.uint16).astype(np.uint32)
            wr(w, lo | (hi << np.uint32(16)), m)
        else:
            row, col = accumulator_map(i)
            v = D[row, col]
            wr(w, v.astype(np.float32).view(np.uint32) if dt == "f32" else to_s32(v, False).view(np.uint32), m)


def b_warpgroup(cx: Ctx) -> Exec:
    """WARPGROUP.ARRIVE (wgmma.fence) and WARPGROUP.DEPBAR.LE gsb0, N (wgmma.wait_group N): no state."""
    mods = set(cx.ins.modifiers)
    if mods not in ({"ARRIVE"}, {"DEPBAR", "LE"}):
        raise cx.err(f"WARPGROUP.{'.'.join(cx.ins.modifiers)} is not modelled (ARRIVE, DEPBAR.LE)")
    return lambda w, m: None


def b_fence(cx: Ctx) -> Exec:
    """FENCE.VIEW.ASYNC.{S,G,...} (fence.proxy.async): orders generic and async-proxy accesses; the
    functional model has one view of memory, so nothing to do."""
    if cx.ins.modifiers[:2] != ("VIEW", "ASYNC"):
        raise cx.err(f"FENCE.{'.'.join(cx.ins.modifiers)} is not modelled (FENCE.VIEW.ASYNC)")
    return lambda w, m: None


SASS_GMMA: dict[str, Callable[[Ctx], Exec]] = {
    "HGMMA": b_gmma, "QGMMA": b_gmma, "IGMMA": b_gmma, "WARPGROUP": b_warpgroup, "FENCE": b_fence,
}


def gmma_work(modifiers: tuple[str, ...]) -> tuple[int, str]:
    """(MACs of one warp's 16-row share, A's element type) of a GMMA whose functional decode accepted
    these modifiers: 16 x N x K, the first of the A/B type modifiers (f16 when there is none)."""
    m = _SHAPE.match(modifiers[0]) if modifiers else None
    n, k = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    ab = [_TYPES[x] for x in modifiers[1:] if x in _TYPES and x not in _DTYPES]
    return 16 * n * k, ab[0] if ab else "f16"
